"""What each sweep feature promises and no other test pinned down: one assertion per promise.

Comparison promises are checked on real baselines read back from JSON as a sweep writes them; the
selector on the shipped matrix; the cuDNN copy count in a real process that maps real .so files.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import FAKE_CUDNN, REPO, build_so

from ort_gpu_matrix.compare.changes import Scope, compare
from ort_gpu_matrix.compare.grouping import group, shorten
from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.plan.cells import cells_of
from ort_gpu_matrix.plan.select import select
from ort_gpu_matrix.store.baseline import Baseline

CELL = "gpu-3.12-cu130"
LIB = {"pinned": {}, "cudnn_copies": [], "cudnn_by_name": ["/usr/lib/libcudnn.so.9 (91400)"],
       "cudart_by_name": ["/usr/local/cuda/lib64/libcudart.so.13 (13000)"]}


def _record(tests: dict[str, str], library: dict | None = None, teeth: dict | None = None) -> dict:
    passed = sum(line.split()[0] == "passed" for line in tests.values())
    return {"verdict": "pass", "counts": {"collected": len(tests), "passed": passed}, "teeth": teeth,
            "library": library or LIB, "provenance": {}, "tests": tests}


def _saved(tmp_path: Path, name: str, modes: dict[str, dict]) -> Baseline:
    """A baseline of CELL with these mode records, written as a sweep writes it and read back."""
    data = {"baseline_version": 1, "name": name, "created": "2026-11-30T00:00:00+00:00", "cells": {CELL: modes}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return Baseline.load(path)


def _baseline(tmp_path: Path, name: str, tests: dict[str, str], library: dict | None = None) -> Baseline:
    return _saved(tmp_path, name, {"normal": _record(tests, library)})


def test_a_test_that_gains_a_tier_is_a_tier_regression(tmp_path):
    before = _baseline(tmp_path, "b", {"t::x": "passed CUDNN_FLASH_ATTENTION"})
    after = _baseline(tmp_path, "a", {"t::x": "passed CUDNN_FLASH_ATTENTION MATH"})
    (change,) = compare(before, after).regressions
    assert (change.kind, change.test, change.before, change.after) == (
        "tier", "t::x", ["CUDNN_FLASH_ATTENTION"], ["CUDNN_FLASH_ATTENTION", "MATH"])
    assert change.line() == f"tier: {CELL} normal t::x: CUDNN_FLASH_ATTENTION -> CUDNN_FLASH_ATTENTION, MATH"


def test_a_by_name_cudart_that_changes_is_a_library_regression(tmp_path):
    before = _baseline(tmp_path, "b", {"t::x": "passed"})
    after = _baseline(tmp_path, "a", {"t::x": "passed"},
                      {**LIB, "cudart_by_name": ["/opt/torch/nvidia/cu13/lib/libcudart.so.13 (13020)"]})
    (change,) = compare(before, after).regressions
    assert (change.kind, change.test) == ("library", "cudart_by_name")
    assert change.after == ["/opt/torch/nvidia/cu13/lib/libcudart.so.13 (13020)"]


def test_a_flaky_test_in_a_baseline_reads_back_flaky_and_stays_no_regression(tmp_path):
    before = _baseline(tmp_path, "b", {"t::x": "passed reruns=2"})
    assert before.cells[CELL]["normal"].tests["t::x"].reruns == 2
    assert json.loads(before.to_json())["cells"][CELL]["normal"]["tests"]["t::x"] == "passed reruns=2"
    cmp = compare(before, _baseline(tmp_path, "a", {"t::x": "passed reruns=1"}))
    assert cmp.regressions == [] and [c.before for c in cmp.flaky] == ["2 rerun(s)"]
    cmp = compare(_baseline(tmp_path, "s", {"t::x": "passed"}), _baseline(tmp_path, "a2", {"t::x": "passed reruns=1"}))
    assert [c.kind for c in cmp.regressions] == ["flaky"]


def test_a_selector_that_matches_several_cells_selects_them_all():
    cells = cells_of(load_matrix(REPO / "matrix.toml"))
    by_ort = {c.name for c in cells if c.ort.id == cells[0].ort.id}
    assert len(by_ort) > 1
    assert {c.name for c, _ in select(cells, [cells[0].ort.id])} == by_ort
    assert {m for _, modes in select(cells, ["teeth"]) for m in modes} == {"teeth"}


def test_cudnn_sub_libraries_are_not_counted_as_copies(tmp_path):
    """cuDNN 9 is a shim (libcudnn.so.9) plus sub-libraries (libcudnn_ops, _graph, ...): one copy, not five."""
    shim = build_so(tmp_path / "a" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % 91400)
    subs = [build_so(tmp_path / "a" / f"libcudnn_{n}.so.9", f"libcudnn_{n}.so.9", f"int x_{n};\n")
            for n in ("ops", "graph", "engines_precompiled")]
    other = build_so(tmp_path / "b" / "libcudnn.so.9.19.0", "libcudnn.so.9", FAKE_CUDNN % 91900)
    code = ("import ctypes, json, sys; [ctypes.CDLL(p) for p in sys.argv[1:]]; "
            "from ort_matrix_probe.audit import audit; print(json.dumps(audit()['cudnn_copies']))")
    out = subprocess.run([sys.executable, "-c", code, str(shim), *map(str, subs), str(other)], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    assert sorted(c["file"] for c in json.loads(out)) == sorted([str(shim), str(other)])


def test_a_new_test_that_fails_or_errors_is_a_test_regression(tmp_path):
    before = _baseline(tmp_path, "b", {"t::a": "passed"})
    after = _baseline(tmp_path, "a", {"t::a": "passed", "t::new_f": "failed", "t::new_e": "error"})
    assert [(c.kind, c.test, c.before, c.after) for c in compare(before, after).regressions] == [
        ("test", "t::new_e", "new", "error"), ("test", "t::new_f", "new", "failed")]


def test_a_passing_test_that_is_gone_is_a_test_regression(tmp_path):
    cmp = compare(_baseline(tmp_path, "b", {"t::a": "passed", "t::b": "passed"}), _baseline(tmp_path, "a", {"t::a": "passed"}))
    assert ("test", "t::b", "passed", "gone") in [(c.kind, c.test, c.before, c.after) for c in cmp.regressions]


def test_fewer_passed_tests_is_a_count_regression_though_as_many_were_collected(tmp_path):
    cmp = compare(_baseline(tmp_path, "b", {"t::a": "passed", "t::b": "passed"}),
                  _baseline(tmp_path, "a", {"t::a": "passed", "t::b": "skipped"}))
    assert [(c.test, c.before, c.after) for c in cmp.regressions if c.kind == "count"] == [("passed", 2, 1)]


def test_another_cudnn_copy_mapped_is_a_library_regression_and_one_gone_is_not(tmp_path):
    one = {**LIB, "cudnn_copies": ["/usr/lib/libcudnn.so.9.14.0 (9.14.0)"]}
    two = {**LIB, "cudnn_copies": [*one["cudnn_copies"], "/opt/torch/nvidia/cudnn/lib/libcudnn.so.9 (9.19.0)"]}
    before, after = _baseline(tmp_path, "b", {"t::x": "passed"}, one), _baseline(tmp_path, "a", {"t::x": "passed"}, two)
    (change,) = compare(before, after).regressions
    assert (change.kind, change.test, change.before, change.after) == (
        "library", "cudnn_copies", one["cudnn_copies"], two["cudnn_copies"])
    assert compare(after, before).regressions == []


def test_a_bitten_test_that_turns_toothless_is_a_teeth_regression(tmp_path):
    tests = {"t::x": "failed MATH", "t::y": "failed MATH"}
    before = _saved(tmp_path, "b", {"teeth": _record(tests, teeth={"bitten": ["t::x", "t::y"], "toothless": []})})
    after = _saved(tmp_path, "a", {"teeth": _record(tests, teeth={"bitten": ["t::y"], "toothless": ["t::x"]})})
    cmp = compare(before, after)
    assert [(c.kind, c.test, c.before, c.after) for c in cmp.regressions] == [("teeth", "t::x", "bitten", "toothless")]
    assert cmp.improvements == []
    back = compare(after, before)  # toothless -> bitten: an improvement, never a regression
    assert back.regressions == [] and [(c.kind, c.test) for c in back.improvements] == [("teeth", "t::x")]


def test_a_mode_left_out_by_select_is_not_selected_and_one_chosen_that_did_not_run_is_missing(tmp_path):
    before = _saved(tmp_path, "b", {"normal": _record({"t::x": "passed"}), "teeth": _record({"t::x": "failed MATH"})})
    after = _saved(tmp_path, "a", {"normal": _record({"t::x": "passed"})})
    cmp = compare(before, after, Scope(frozenset({CELL}), frozenset({(CELL, "normal")})))
    assert [(c.cell, c.mode, c.after) for c in cmp.not_selected] == [(CELL, "teeth", "not selected")]
    assert cmp.missing == [] and cmp.removed == []
    chosen = frozenset({(CELL, "normal"), (CELL, "teeth")})
    cmp = compare(before, after, Scope(frozenset({CELL}), chosen, {CELL: "its build failed"}))
    assert [(c.cell, c.mode, c.after) for c in cmp.missing] == [(CELL, "teeth", "did not run: its build failed")]
    assert cmp.not_selected == [] and cmp.removed == []


def test_saving_onto_a_baseline_keeps_the_modes_this_sweep_did_not_run(tmp_path):
    earlier = _saved(tmp_path, "e", {"normal": _record({"t::x": "passed"}), "teeth": _record({"t::x": "failed MATH"})})
    now = _saved(tmp_path, "n", {"normal": _record({"t::x": "passed", "t::y": "passed"})})
    merged, kept = now.merged_over(earlier)
    assert kept == [f"{CELL} teeth"]
    assert set(merged.cells[CELL]) == {"normal", "teeth"}
    assert set(merged.cells[CELL]["normal"].tests) == {"t::x", "t::y"}  # this sweep's record wins
    assert merged.cells[CELL]["teeth"] == earlier.cells[CELL]["teeth"]


def test_repeated_selectors_of_one_cell_add_up():
    cells = cells_of(load_matrix(REPO / "matrix.toml"))
    cell = next(c for c in cells if len(c.modes) == 3)
    chosen = select(cells, [cell.mode_session("normal"), cell.mode_session("teeth")])
    assert [(c.name, modes) for c, modes in chosen] == [(cell.name, ("normal", "teeth"))]


def test_changes_are_grouped_by_transition_the_largest_group_first(tmp_path):
    before = _baseline(tmp_path, "b", {f"t::{n}": "passed CUDNN_FLASH_ATTENTION" for n in "abcd"})
    after = _baseline(tmp_path, "a", {"t::a": "passed", **{f"t::{n}": "passed MATH" for n in "bcd"}})
    groups = group(compare(before, after).regressions)
    assert [(g.kind, g.before, g.after, sorted(g.tests)) for g in groups] == [
        ("tier", "CUDNN_FLASH_ATTENTION", "MATH", ["t::b", "t::c", "t::d"]),
        ("tier", "CUDNN_FLASH_ATTENTION", "(no tier)", ["t::a"])]
    assert groups[0].headline() == "tier CUDNN_FLASH_ATTENTION → MATH: 3 test(s), 3 row(s) in 1 cell(s) x 1 mode(s) (normal)"


def test_test_names_are_shortened_at_a_separator_never_inside_a_name():
    assert shorten(["s/test_a.py::TestX::test_case_1", "s/test_a.py::TestX::test_case_2"]) == (
        "s/test_a.py::TestX::", ["test_case_1", "test_case_2"])
    assert shorten(["s/test_a.py::t", "s/test_b.py::t"]) == ("s/", ["test_a.py::t", "test_b.py::t"])
    assert shorten(["test_a.py::t", "test_b.py::t"]) == ("", ["test_a.py::t", "test_b.py::t"])


def test_a_selector_that_matches_nothing_names_every_cell_and_cells_selects_all():
    import pytest

    from ort_gpu_matrix.plan.select import SelectionError
    cells = cells_of(load_matrix(REPO / "matrix.toml"))
    with pytest.raises(SelectionError) as err:
        select(cells, ["teeth", "no-such-cell"])
    assert str(err.value) == (f"--select 'no-such-cell' matches no cell, mode session or tag; cells: "
                              f"{', '.join(c.name for c in cells)}")
    assert select(cells, ["cells"]) == [(c, c.modes) for c in cells] == select(cells, [])

"""What each sweep feature promises and no other test pinned down: one assertion per promise.

Comparison promises are checked on real baselines read back from JSON as a sweep writes them; the
selector on the shipped matrix; the cuDNN copy count in a real process that maps real .so files.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import FAKE_CUDNN, REPO, build_so

from ort_gpu_matrix.baseline import Baseline
from ort_gpu_matrix.cells import cells_of
from ort_gpu_matrix.compare import compare
from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.sweep import select

CELL = "gpu-3.12-cu130"
LIB = {"pinned": {}, "cudnn_copies": [], "cudnn_by_name": ["/usr/lib/libcudnn.so.9 (91400)"],
       "cudart_by_name": ["/usr/local/cuda/lib64/libcudart.so.13 (13000)"]}


def _baseline(tmp_path: Path, name: str, tests: dict[str, str], library: dict | None = None) -> Baseline:
    data = {"baseline_version": 1, "name": name, "created": "2026-11-30T00:00:00+00:00",
            "cells": {CELL: {"normal": {"verdict": "pass", "counts": {"collected": len(tests), "passed": len(tests)},
                                        "teeth": None, "library": library or LIB, "provenance": {},
                                        "tests": tests}}}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return Baseline.load(path)


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

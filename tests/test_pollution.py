"""Pollution, named and undone, end to end: real nox runs of the `pollution` fixture suite on CPU.

test_polluter.py sets ORT_DISABLE_FLASH_ATTENTION and never restores it (as ORT's test_gqa.py does);
test_victim.py's tier follows that variable (FLASH_ATTENTION unset, EFFICIENT_ATTENTION at "1"), as
test_mha.py's does; test_scoped.py sets it in setUpClass and restores it in tearDownClass, and its
tests need it. The order is the `files` order in one process (-n 0), so each order is certain.
"""
import dataclasses
import json
import re

import pytest
from helpers import CELL, SUITES

from ort_gpu_matrix.compare.changes import compare
from ort_gpu_matrix.report.model import build
from ort_gpu_matrix.report.render import html, markdown, terminal
from ort_gpu_matrix.store import results
from ort_gpu_matrix.store.baseline import Baseline

ROOT = SUITES / "pollution"
POLLUTER, VICTIM = "test_polluter.py::test_disables_flash", "test_victim.py::test_attention"
FLAG = "ORT_DISABLE_FLASH_ATTENTION"
ORDERS = {"polluter-first": ["test_polluter.py", "test_victim.py", "test_scoped.py"],
          "victim-first": ["test_victim.py", "test_scoped.py", "test_polluter.py"]}
NAMED = f"{POLLUTER} left {FLAG} (unset) -> '1'"


def _run(harness, order, isolation=None, pytest_args='["-n", "0"]', files=None):
    extra = f"pytest_args = {pytest_args}" + (f'\nisolation = "{isolation}"' if isolation else "")
    run = harness.run(files or ORDERS[order], root=ROOT, pythonpath=(".", ".."), suite_extra=extra)
    r = run.result("normal")
    assert r["verdict"] == "pass", (r["reasons"], run.output[-3000:])
    return run, r


def _polluters(r):
    return {p["test"]: p for p in r["pollution"]}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_by_default_the_polluter_is_named_and_undone_and_the_later_tier_does_not_depend_on_order(harness, order):
    run, r = _run(harness, order)
    assert r["dispatch"]["tests"][VICTIM] == ["FLASH_ATTENTION"]  # the mode's own environment, in either order
    assert r["isolation"] == "restore"
    assert set(_polluters(r)) == {POLLUTER}, "the setUpClass/tearDownClass pair that cleans up is no pollution"
    p = _polluters(r)[POLLUTER]
    assert p["changes"] == [{"what": "env", "name": FLAG, "before": None, "after": "1"}]
    assert p["undone"] and p["scope"] == "function" and p["later_tests"] == (3 if order == "polluter-first" else 0)
    assert any(w.startswith(f"pollution: {NAMED} (undone;") for w in r["warnings"])
    assert f"warning: pollution: {NAMED} (undone;" in run.output  # the cell table
    assert r["env"].get(FLAG) is None and r["dispatch"]["tests"][
        "test_scoped.py::TestEfficientOnly::test_first_needs_it"] == ["EFFICIENT_ATTENTION"]


@pytest.mark.parametrize("isolation", ["report", "off"])
def test_without_the_undo_the_order_effect_comes_back(harness, isolation):
    tiers = {}
    for order in sorted(ORDERS):
        _, r = _run(harness, order, isolation)
        tiers[order] = r["dispatch"]["tests"][VICTIM]
        assert r["isolation"] == isolation
        if isolation == "off":
            assert r["pollution"] == []
        else:
            p = _polluters(r)[POLLUTER]
            assert not p["undone"] and p["later_tests"] == (3 if order == "polluter-first" else 0)
    assert tiers == {"polluter-first": ["EFFICIENT_ATTENTION"], "victim-first": ["FLASH_ATTENTION"]}


def test_under_xdist_each_worker_names_its_polluters_and_no_tier_depends_on_the_schedule(harness):
    _, r = _run(harness, "polluter-first", pytest_args='["-n", "2"]')
    assert r["dispatch"]["tests"][VICTIM] == ["FLASH_ATTENTION"]
    assert _polluters(r)[POLLUTER]["process"] in ("gw0", "gw1")


def test_every_report_form_shows_the_section_escaped_and_cut_and_calibrate_prints_it(harness, tmp_path):
    run, _ = _run(harness, "polluter-first", files=[*ORDERS["polluter-first"], "test_hostile.py"])
    result = results.load(harness.results / f"{CELL}-normal.json")
    assert {p.test for p in result.pollution} == {POLLUTER, "test_hostile.py::test_leaves_a_hostile_value"}
    report = build([result])
    text, md, page = terminal.render(report), markdown.render(report), html.render(report, tmp_path)
    for form in (text, md, page):
        assert "Pollution (process state tests changed and did not undo) (2)" in form
        assert "v" * 400 not in form, "a value is cut"
    assert f"{CELL}-normal: {NAMED} (undone; 4 later test(s) of controller ran without it)" in text
    assert "\x1b" not in text and "\x07" not in text
    assert "<script>alert" not in md and "<script>alert" not in page and "[x](javascript" not in md
    assert "&lt;script&gt;" in page and re.search(r"ORT\\_FIXTURE\\_HOSTILE", md)
    cal = harness.nox("-s", "calibrate", "--", "--from", str(harness.results), "--write", str(tmp_path / "e.toml"))
    assert cal.proc.returncode == 0, cal.output[-3000:]
    assert f"pollution: {CELL}-normal (isolation restore): {NAMED} (undone;" in cal.output
    assert "\x1b]0;owned" not in cal.output


def test_a_baseline_records_isolation_and_a_comparison_across_a_difference_notes_it(harness, tmp_path):
    _run(harness, "victim-first")
    result = results.load(harness.results / f"{CELL}-normal.json")
    now = Baseline.of([result])
    assert json.loads(now.to_json())["cells"][CELL]["normal"]["isolation"] == "restore"
    same = compare(now, now)
    assert same.notes == [] and same.regressions == []
    off = Baseline({CELL: {"normal": dataclasses.replace(now.cells[CELL]["normal"], isolation="off")}})
    cmp = compare(off, now)
    assert [(c.kind, c.before, c.after) for c in cmp.notes] == [("isolation", "off", "restore")]
    assert cmp.regressions == []
    text = terminal.render(build([result], off, "before"))
    assert "Isolation differs from the baseline (tier changes may be test order; not a regression) (1)" in text
    # a baseline saved before isolation existed still reads, as unknown
    data = json.loads(now.to_json())
    del data["cells"][CELL]["normal"]["isolation"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert Baseline.load(old).cells[CELL]["normal"].isolation == "unknown"


def test_a_result_from_before_isolation_still_loads(harness, tmp_path):
    _run(harness, "victim-first")
    data = json.loads((harness.results / f"{CELL}-normal.json").read_text())
    data["schema_version"] = 1
    del data["isolation"], data["pollution"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    r = results.load(old)
    assert (r.isolation, r.pollution, r.schema_version) == ("unknown", [], results.SCHEMA_VERSION)


def test_many_tests_of_one_file_that_leave_the_same_variable_share_one_report_line():
    """ORT's CUDA tests each set ORT_DISABLE_FLASH_ATTENTION: 125 polluters that differ only in their id read as
    one line per file; fewer than GROUP_AT stay one line each, and a different variable is its own group."""
    from ort_gpu_matrix.judge.pollution import GROUP_AT, Pollution, StateChange, lines

    def p(test, value, later, name="ORT_DISABLE_FLASH_ATTENTION", undone=True):
        return Pollution(test, "function", "gw0", [StateChange("env", name, None, value)], undone, later)

    many = [p(f"test_gqa_cuda.py::T::test_{i}", "01"[i % 2], i) for i in range(GROUP_AT)]
    few = [p(f"test_mha.py::T::test_{i}", "0", 1) for i in range(GROUP_AT - 1)]
    other = [p(f"test_gqa_cuda.py::T::test_x{i}", "1", 0, name="ORT_OTHER") for i in range(GROUP_AT)]
    got = lines(many + few + other)
    assert got[0] == (f"test_gqa_cuda.py: {GROUP_AT} tests each left ORT_DISABLE_FLASH_ATTENTION (unset) -> '0' | "
                      f"(unset) -> '1' (undone each time; up to {GROUP_AT - 1} later test(s) of a process ran without "
                      "it; first: test_gqa_cuda.py::T::test_0)")
    assert got[1:GROUP_AT] == [x.line() for x in few]
    assert got[GROUP_AT:] == [f"test_gqa_cuda.py: {GROUP_AT} tests each left ORT_OTHER (unset) -> '1' (undone each "
                              "time; up to 0 later test(s) of a process ran without it; first: test_gqa_cuda.py::T::test_x0)"]
    assert lines(many[:-1]) == [x.line() for x in many[:-1]]  # one fewer: each its own line

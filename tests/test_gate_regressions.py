"""`--gate regressions` where a green would be false: a skipped or xfailed test that now fails in a mode that
was failing already, a new error in a scoped teeth against an unscoped baseline, a scoped teeth that ran nothing
(compare(), in-process), and a baseline cell whose result never arrived (a real `nox -s report`).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_sweep_trust import A, B, Box, base  # noqa: F401  (base: the module fixture, a green sweep saved as `base`)

from ort_gpu_matrix.compare.changes import Scope, compare
from ort_gpu_matrix.store.baseline import Baseline

CELL = "gpu-3.12-cu130"


def _saved(tmp_path: Path, name: str, mode: str, rec: dict) -> Baseline:
    data = {"baseline_version": 1, "name": name, "created": "2026-11-30T00:00:00+00:00", "cells": {CELL: {mode: rec}}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return Baseline.load(path)


def _rec(verdict: str, tests: dict[str, str], scope: str = "all") -> dict:
    passed = sum(line.split()[0] == "passed" for line in tests.values())
    return {"verdict": verdict, "counts": {"collected": len(tests), "passed": passed}, "teeth": None,
            "library": {}, "provenance": {}, "tests": tests, **({"teeth_scope": scope} if scope != "all" else {})}


def test_a_skipped_test_that_now_fails_in_an_already_failing_mode_is_a_regression(tmp_path):
    scope = Scope(frozenset({CELL}), frozenset({(CELL, "normal")}))
    before = _saved(tmp_path, "b", "normal", _rec("fail", {"t::known": "failed", "t::gpu_only": "skipped",
                                                           "t::x": "xfailed", "t::ok": "passed"}))
    after = _saved(tmp_path, "a", "normal", _rec("fail", {"t::known": "failed", "t::gpu_only": "failed",
                                                          "t::x": "error", "t::ok": "passed"}))
    cmp = compare(before, after, scope)
    # the mode was failing already, so under --gate regressions only cmp.regressions can make this sweep red
    assert {(c.kind, c.test) for c in cmp.regressions} == {("test", "t::gpu_only"), ("test", "t::x")}


def test_a_new_error_in_a_scoped_teeth_against_an_unscoped_baseline_is_a_regression(tmp_path):
    scope = Scope(frozenset({CELL}), frozenset({(CELL, "teeth")}))
    before = _saved(tmp_path, "b", "teeth", _rec("fail", {"t::a": "failed", "t::b": "passed"}))
    tests = {"t::a": "failed", "t::new_cudnn": "error"}
    unscoped = compare(before, _saved(tmp_path, "a1", "teeth", _rec("fail", tests)), scope)
    assert [(c.kind, c.test, c.before) for c in unscoped.regressions if c.test == "t::new_cudnn"] == [
        ("test", "t::new_cudnn", "new")]  # the control: unscoped, the new error is a regression
    scoped = compare(before, _saved(tmp_path, "a2", "teeth", _rec("fail", tests, "cudnn")), scope)
    assert [(c.kind, c.test, c.before) for c in scoped.regressions if c.test == "t::new_cudnn"] == [
        ("test", "t::new_cudnn", "new")]


def test_report_gate_regressions_fails_when_a_baseline_cell_has_no_result(base, venvs, tmp_path):  # noqa: F811
    box = Box(tmp_path, venvs, base)
    arts = tmp_path / "artifacts"
    shutil.copytree(base / "results", arts, ignore=shutil.ignore_patterns("sweep*.json", "report.*"))
    for f in arts.glob(f"{B}-*.json"):
        f.unlink()  # cell b's CI job died: its artifact never arrived
    assert not list(arts.glob(f"{B}-*.json")) and list(arts.glob(f"{A}-*.json"))
    run = box.report(str(arts), "--baseline", "base", "--gate", "regressions")
    doc = json.loads((box.results / "report.json").read_text())
    assert [c["cell"] for c in doc["missing"]] == [B], (doc["removed"], doc["missing"], run.out[-1500:])
    assert run.code != 0 and doc["ok"] is False


def test_a_scoped_teeth_that_ran_nothing_is_a_regression(tmp_path):
    scope = Scope(frozenset({CELL}), frozenset({(CELL, "teeth")}))
    rec = _rec("fail", {"t::a": "failed", "t::b": "passed", "t::c": "failed"})
    rec["teeth"] = {"bitten": ["t::a"], "toothless": ["t::b"]}
    before = _saved(tmp_path, "b", "teeth", rec)
    after = _saved(tmp_path, "a", "teeth", _rec("fail", {}, "cudnn"))
    assert compare(before, after, scope).regressions

"""compare(), one branch at a time, asserting the whole Comparison (every list, every field of every change), so
a mutant that renames a kind, swaps before/after or drops a change is caught in-process (mutmut maps these
tests to compare/changes.py's functions through its stats run)."""
from __future__ import annotations

import pytest

from ort_gpu_matrix.compare.changes import Change, LibsDiff, Scope, add_stale_rules, compare, libs_comparison, show
from ort_gpu_matrix.judge.stale import StaleRecord
from ort_gpu_matrix.store.baseline import Baseline, ModeRecord
from ort_gpu_matrix.store.baseline import TestLine as Line
from ort_gpu_matrix.util import codec

C = "c1"
LIB = {"cudnn_by_name": ["/l/libcudnn.so.9 (91400)"], "cudart_by_name": ["/l/libcudart.so.13 (13000)"],
       "cudnn_copies": []}


def rec(tests: dict[str, str], verdict: str = "pass", counts: dict | None = None, teeth=None, library=None,
        scope: str = "all") -> ModeRecord:
    lines = {n: Line.decode(t) for n, t in tests.items()}
    if counts is None:
        counts = {"collected": len(lines), "passed": sum(t.outcome == "passed" for t in lines.values())}
    return ModeRecord(verdict, counts, lines, teeth, LIB if library is None else library, {}, scope)


def base(cells: dict[str, dict[str, ModeRecord]]) -> Baseline:
    return Baseline(cells, "n", "2026-12-01T00:00:00+00:00")


def cmp_of(b: ModeRecord, a: ModeRecord, mode: str = "normal"):
    return compare(base({C: {mode: b}}), base({C: {mode: a}})).to_dict()


def ch(kind, test, before, after, mode="normal", cell=C) -> dict:
    return {"kind": kind, "cell": cell, "mode": mode, "test": test, "before": before, "after": after}


EMPTY = {k: [] for k in ("regressions", "improvements", "added", "removed", "flaky", "missing", "not_selected",
                                "notes")}


def test_equal_runs_compare_empty():
    r = rec({"t::a": "passed CUDNN_FLASH_ATTENTION"})
    assert cmp_of(r, r) == EMPTY


def test_a_test_that_also_dispatches_math_is_a_tier_regression_and_losing_it_too():
    b, a = rec({"t::a": "passed CUDNN_FLASH_ATTENTION"}), rec({"t::a": "passed CUDNN_FLASH_ATTENTION MATH"})
    assert cmp_of(b, a) == {**EMPTY, "regressions": [
        ch("tier", "t::a", ["CUDNN_FLASH_ATTENTION"], ["CUDNN_FLASH_ATTENTION", "MATH"])]}
    assert cmp_of(a, b)["regressions"] == [ch("tier", "t::a", ["CUDNN_FLASH_ATTENTION", "MATH"],
                                              ["CUDNN_FLASH_ATTENTION"])]
    same = rec({"t::a": "passed MATH CUDNN_FLASH_ATTENTION"})  # order alone is no change
    assert cmp_of(a, same) == EMPTY


def test_a_failing_test_with_other_tiers_is_both_a_test_and_a_tier_regression():
    b, a = rec({"t::a": "passed MATH"}), rec({"t::a": "failed"}, counts={"collected": 1, "passed": 1})
    assert cmp_of(b, a)["regressions"] == [ch("test", "t::a", "passed", "failed"), ch("tier", "t::a", ["MATH"], [])]


def test_a_verdict_that_turns_fail_is_a_regression_and_back_an_improvement():
    b, a = rec({}, "pass", {"collected": 0, "passed": 0}), rec({}, "fail", {"collected": 0, "passed": 0})
    assert cmp_of(b, a) == {**EMPTY, "regressions": [ch("verdict", None, "pass", "fail")]}
    assert cmp_of(a, b) == {**EMPTY, "improvements": [ch("verdict", None, "fail", "pass")]}
    assert cmp_of(a, a) == EMPTY


def test_test_transitions():
    counts = {"collected": 5, "passed": 1}
    b = rec({"t::gone": "passed", "t::skip": "skipped", "t::xf": "xfailed", "t::fixed": "failed", "t::err": "error"},
            counts=counts)
    a = rec({"t::skip": "failed", "t::xf": "error", "t::fixed": "passed", "t::err": "error", "t::new": "failed",
             "t::newerr": "error", "t::newpass": "passed", "t::newskip": "skipped"}, counts={"collected": 8, "passed": 2})
    got = cmp_of(b, a)
    assert got["regressions"] == [ch("test", "t::gone", "passed", "gone"), ch("test", "t::new", "new", "failed"),
                                  ch("test", "t::newerr", "new", "error"), ch("test", "t::skip", "skipped", "failed"),
                                  ch("test", "t::xf", "xfailed", "error")]
    assert got["improvements"] == [ch("test", "t::fixed", "failed", "passed"), ch("test", "t::newpass", "new", "passed")]
    assert got["flaky"] == [] and got["added"] == [] and got["removed"] == []


def test_a_passed_test_that_now_skips_is_a_regression_and_a_skip_that_passes_an_improvement():
    b, a = rec({"t::a": "passed"}), rec({"t::a": "skipped"}, counts={"collected": 1, "passed": 1})
    assert cmp_of(b, a)["regressions"] == [ch("test", "t::a", "passed", "skipped")]
    assert cmp_of(a, b)["improvements"] == [ch("test", "t::a", "skipped", "passed")]


def test_flaky_tests():
    b = rec({"t::stable": "passed", "t::was": "passed reruns=2", "t::new": "failed"}, counts={"collected": 3, "passed": 2})
    a = rec({"t::stable": "passed reruns=1", "t::was": "passed reruns=1", "t::new": "passed reruns=3"},
            counts={"collected": 3, "passed": 3})
    got = cmp_of(b, a)
    flaky_stable = ch("flaky", "t::stable", "stable", "passed after 1 rerun(s)")
    assert got["flaky"] == [ch("flaky", "t::new", "stable", "passed after 3 rerun(s)"), flaky_stable,
                            ch("flaky", "t::was", "2 rerun(s)", "passed after 1 rerun(s)")]
    assert got["regressions"] == [flaky_stable]  # only the test that passed without a rerun before
    assert got["improvements"] == [ch("test", "t::new", "failed", "passed")]
    failed_after_rerun = rec({"t::stable": "failed reruns=1"}, counts={"collected": 1, "passed": 1})
    assert cmp_of(rec({"t::stable": "passed"}), failed_after_rerun)["flaky"] == []


def test_counts_fall_as_regressions_and_rise_as_nothing():
    b = rec({"t::a": "passed"}, counts={"collected": 3, "passed": 2})
    a = rec({"t::a": "passed"}, counts={"collected": 2, "passed": 1})
    assert cmp_of(b, a)["regressions"] == [ch("count", "collected", 3, 2), ch("count", "passed", 2, 1)]
    assert cmp_of(a, b) == EMPTY
    same = rec({"t::a": "passed"}, counts={"collected": 3, "passed": 2})
    assert cmp_of(b, same) == EMPTY


def test_a_scoped_teeth_against_an_unscoped_one():
    b = rec({"t::a": "failed", "t::b": "passed"}, counts={"collected": 2, "passed": 1})
    a = rec({"t::a": "failed"}, counts={"collected": 1, "passed": 0}, scope="cudnn")
    assert cmp_of(b, a, "teeth") == EMPTY  # fewer by design; t::b left out by the scope
    none = rec({}, counts={"collected": 0, "passed": 0}, scope="cudnn")
    assert cmp_of(b, none, "teeth")["regressions"] == [ch("count", "collected", 2, 0, "teeth"),
                                                       ch("count", "passed", 1, 0, "teeth")]
    a_missing_b = rec({"t::a": "failed"}, counts={"collected": 2, "passed": 1})
    assert cmp_of(b, a_missing_b, "teeth")["regressions"] == [ch("test", "t::b", "passed", "gone", "teeth")]
    nothing_before = rec({}, counts={"collected": 0, "passed": 0})
    assert cmp_of(nothing_before, rec({}, counts={"collected": 0, "passed": 0}, scope="cudnn"), "teeth") == EMPTY


def test_teeth_changes():
    t_b = {"bitten": ["t::a", "t::b"], "toothless": ["t::c"]}
    t_a = {"bitten": ["t::b", "t::c"], "toothless": ["t::a"]}
    got = cmp_of(rec({}, teeth=t_b), rec({}, teeth=t_a), "teeth")
    assert got["regressions"] == [ch("teeth", "t::a", "bitten", "toothless", "teeth")]
    assert got["improvements"] == [ch("teeth", "t::c", "toothless", "bitten", "teeth")]
    assert cmp_of(rec({}, teeth=t_b), rec({}, teeth=None), "teeth")["regressions"] == [
        ch("teeth", None, "coverage checked", "coverage not checked", "teeth")]
    assert cmp_of(rec({}, teeth=None), rec({}, teeth=t_a), "teeth") == EMPTY
    assert cmp_of(rec({}, teeth=None), rec({}, teeth=None), "teeth") == EMPTY


def test_library_changes():
    other = {**LIB, "cudnn_by_name": ["/t/libcudnn.so.9 (91900)"]}
    assert cmp_of(rec({}, library=LIB), rec({}, library=other))["regressions"] == [
        ch("library", "cudnn_by_name", LIB["cudnn_by_name"], other["cudnn_by_name"])]
    gone = {k: v for k, v in LIB.items() if k != "cudart_by_name"}
    assert cmp_of(rec({}, library=LIB), rec({}, library=gone))["regressions"] == [
        ch("library", "cudart_by_name", LIB["cudart_by_name"], None)]
    assert cmp_of(rec({}, library=gone), rec({}, library=LIB)) == EMPTY  # none before: nothing to lose
    copies = {**LIB, "cudnn_copies": ["/a", "/b"]}
    assert cmp_of(rec({}, library=LIB), rec({}, library=copies))["regressions"] == [
        ch("library", "cudnn_copies", [], ["/a", "/b"])]
    assert cmp_of(rec({}, library=copies), rec({}, library=LIB)) == EMPTY
    no_copies_key = {k: v for k, v in LIB.items() if k != "cudnn_copies"}
    assert cmp_of(rec({}, library=no_copies_key), rec({}, library=copies))["regressions"] == [
        ch("library", "cudnn_copies", None, ["/a", "/b"])]
    assert cmp_of(rec({}, library=copies), rec({}, library={**LIB, "cudnn_copies": ["/b", "/a"]})) == EMPTY


def test_added_removed_not_selected_and_missing():
    r = rec({"t::a": "passed"})
    both = base({"c0": {"normal": r, "teeth": r}, C: {"normal": r}})
    after = base({C: {"normal": r, "teeth": r}, "c2": {"normal": r}})
    got = compare(both, after).to_dict()
    assert got == {**EMPTY, "added": [ch("cell", None, None, "pass", "teeth"), ch("cell", None, None, "pass", "normal", "c2")],
                   "removed": [ch("cell", None, "pass", None, "normal", "c0"), ch("cell", None, "pass", None, "teeth", "c0")]}
    scope = Scope(frozenset({"c0", C}), frozenset({("c0", "teeth")}), {"c0": "its build failed"})
    got = compare(both, after, scope).to_dict()
    assert got["removed"] == []
    assert got["not_selected"] == [ch("not selected", None, "pass", "not selected", "normal", "c0")]
    assert got["missing"] == [ch("missing", None, "pass", "did not run: its build failed", "teeth", "c0")]
    scope = Scope(frozenset({"c0"}), frozenset({("c0", "normal")}))
    assert compare(both, after, scope).to_dict()["missing"] == [
        ch("missing", None, "pass", "did not run: no result came back", "normal", "c0")]
    assert compare(both, after, Scope(frozenset({C}))).to_dict()["removed"] == [
        ch("cell", None, "pass", None, "normal", "c0"), ch("cell", None, "pass", None, "teeth", "c0")]


def test_regressions_are_ordered_by_kind_then_cell_mode_and_test():
    b = rec({"t::b": "passed MATH", "t::a": "passed"}, counts={"collected": 3, "passed": 2}, library=LIB)
    a = rec({"t::b": "passed", "t::a": "failed"}, "fail", {"collected": 2, "passed": 1},
            library={**LIB, "cudnn_copies": ["/x"]})
    kinds = [(c["kind"], c["cell"], c["mode"], c["test"]) for c in
             compare(base({"z": {"normal": b}, "y": {"teeth": b, "normal": b}}),
                     base({"z": {"normal": a}, "y": {"teeth": a, "normal": a}})).to_dict()["regressions"]]
    assert kinds == [("verdict", "y", "normal", None), ("verdict", "y", "teeth", None), ("verdict", "z", "normal", None),
                     ("test", "y", "normal", "t::a"), ("test", "y", "teeth", "t::a"), ("test", "z", "normal", "t::a"),
                     ("tier", "y", "normal", "t::b"), ("tier", "y", "teeth", "t::b"), ("tier", "z", "normal", "t::b"),
                     ("count", "y", "normal", "collected"), ("count", "y", "normal", "passed"),
                     ("count", "y", "teeth", "collected"), ("count", "y", "teeth", "passed"),
                     ("count", "z", "normal", "collected"), ("count", "z", "normal", "passed"),
                     ("library", "y", "normal", "cudnn_copies"), ("library", "y", "teeth", "cudnn_copies"),
                     ("library", "z", "normal", "cudnn_copies")]


def test_show_and_line():
    assert show(None) == "(none)" and show([]) == "(no tier)" and show(()) == "(no tier)"
    assert show(["MATH", "CUDNN"]) == "MATH, CUDNN" and show(("A",)) == "A" and show(3) == "3"
    assert Change("tier", "c", "normal", "t::x", ["A"], None).line() == "tier: c normal t::x: A -> (none)"
    assert Change("verdict", "c", None, None, "pass", "fail").line() == "verdict: c: pass -> fail"


class _R:
    def __init__(self, cell, mode, stale):
        self.cell = type("Cell", (), {"name": cell})()
        self.mode = mode
        self.stale_rules = stale


def test_stale_rules_are_improvements_in_cell_and_mode_order():
    cmp = compare(base({}), base({}))
    add_stale_rules(cmp, [_R("b", "normal", [StaleRecord("normal", "known_failures", "t::x", "", "", "passes now")]),
                          _R("a", "teeth", [StaleRecord("teeth", "known_toothless", "t::y", "", "old reason"),
                                            StaleRecord("teeth", "allowed_skips", "t::z", "", "y", "w")]),
                          _R("a", "normal", [])])
    assert cmp.to_dict()["improvements"] == [
        ch("stale-rule", "t::y", "known_toothless", "old reason", "teeth", "a"),
        ch("stale-rule", "t::z", "allowed_skips", "w", "teeth", "a"),
        ch("stale-rule", "t::x", "known_failures", "passes now", "normal", "b")]


def test_libs_comparison_pairs_cells_that_differ_only_in_libs():
    ids = {"p": {"python": "3.12", "ort": "o", "torch": "t", "libs": "sys", "suite": "s"},
           "q": {"python": "3.12", "ort": "o", "torch": "t", "libs": "pip", "suite": "s"},
           "r": {"python": "3.13", "ort": "o", "torch": "t", "libs": "pip", "suite": "s"},
           "s": {"python": "3.12", "ort": "o", "torch": "t", "libs": "sys", "suite": "s"}}
    lp = {**LIB, "cudnn_by_name": ["/p"]}
    lq = {**LIB, "cudnn_by_name": ["/q"]}
    p = rec({"t::a": "passed MATH", "t::b": "passed", "t::c": "failed"}, library=lp)
    q = rec({"t::a": "passed CUDNN_FLASH_ATTENTION", "t::b": "passed", "t::d": "passed"}, library=lq)
    run = base({"p": {"normal": p, "teeth": p}, "q": {"normal": q}, "r": {"normal": q}, "s": {"normal": p}})
    d, d2 = libs_comparison(run, ids)  # p and s have one libs set: never a pair
    assert (d.mode, d.cells, d.cudnn) == ("normal", ("p", "q"), (["/p"], ["/q"]))
    assert (d2.mode, d2.cells, d2.cudnn) == ("normal", ("q", "s"), (["/q"], ["/p"]))
    assert d.tests == [("t::a", "passed MATH", "passed CUDNN_FLASH_ATTENTION"), ("t::c", "failed", "(absent)"),
                       ("t::d", "(absent)", "passed")]
    assert libs_comparison(run, {k: v for k, v in ids.items() if k != "q"}) == []
    assert [x.cells for x in libs_comparison(run, {k: v for k, v in ids.items() if k != "p"})] == [("q", "s")]
    same = base({"p": {"normal": p}, "q": {"normal": p, "teeth": p}})
    (d,) = libs_comparison(same, ids)
    assert d.tests == []
    for key in ("python", "ort", "torch", "suite"):
        other = {**ids, "q": {**ids["q"], key: "other"}}
        assert libs_comparison(base({"p": {"normal": p}, "q": {"normal": q}}), other) == [], key
    nolib = base({"p": {"normal": rec({}, library={})}, "q": {"normal": rec({}, library={})}})
    assert libs_comparison(nolib, ids)[0].cudnn == ([], [])


def test_records_without_some_keys_compare_as_zero_and_empty():
    none = rec({}, counts={})
    assert cmp_of(none, none) == EMPTY
    assert cmp_of(none, rec({}, counts={"collected": 0, "passed": 0})) == EMPTY
    no_copies = {k: v for k, v in LIB.items() if k != "cudnn_copies"}
    assert cmp_of(rec({}, library=LIB), rec({}, library=no_copies)) == EMPTY
    scoped = rec({}, counts={"collected": 0, "passed": 0}, scope="cudnn")
    assert cmp_of(rec({}, counts={"passed": 1}), scoped, "teeth") == EMPTY  # none collected before: no count to lose


def test_a_test_left_out_by_the_scope_leaves_the_tests_after_it_compared():
    b = rec({"t::a": "passed", "t::b": "passed"})
    a = rec({"t::b": "failed"}, counts={"collected": 2, "passed": 2}, scope="cudnn")
    assert cmp_of(b, a, "teeth")["regressions"] == [ch("test", "t::b", "passed", "failed", "teeth")]


def test_an_added_mode_leaves_the_modes_after_it_compared():
    r, f = rec({"t::a": "passed"}), rec({"t::a": "passed"}, "fail")
    got = compare(base({C: {"teeth": r}}), base({C: {"normal": r, "teeth": f}})).to_dict()
    assert got["added"] == [ch("cell", None, None, "pass")]
    assert got["regressions"] == [ch("verdict", None, "pass", "fail", "teeth")]


def test_library_regressions_of_one_mode_are_ordered_by_key():
    other = {"cudnn_by_name": ["/t/libcudnn.so.9"], "cudart_by_name": ["/t/libcudart.so.13"], "cudnn_copies": ["/x"]}
    assert [c["test"] for c in cmp_of(rec({}), rec({}, library=other))["regressions"]] == [
        "cudart_by_name", "cudnn_by_name", "cudnn_copies"]


def test_libs_comparison_looks_past_a_cell_with_the_same_libs():
    ids = {n: {"python": "3.12", "ort": "o", "torch": "t", "libs": libs, "suite": "s"}
           for n, libs in (("p", "sys"), ("pa", "sys"), ("q", "pip"))}
    r = rec({})
    assert [d.cells for d in libs_comparison(base({n: {"normal": r} for n in ids}), ids)] == [("p", "q"), ("pa", "q")]
    ids["pb"] = {**ids["p"], "python": "3.13", "libs": "x"}
    ids["pz"] = {**ids["p"], "libs": "z"}
    got = [d.cells for d in libs_comparison(base({n: {"normal": r} for n in ids}), ids)]
    assert got == [("p", "pz"), ("p", "q"), ("pa", "pz"), ("pa", "q"), ("pz", "q")]


def test_a_hand_made_record_without_a_count_compares_it_as_absent(tmp_path):
    """A baseline written by hand may leave a count out: compare reads a missing count as 0 and shows it as
    absent, `(none)`, instead of raising KeyError."""
    path = tmp_path / "hand.json"
    path.write_text('{"baseline_version": 1, "cells": {"c1": {"normal": {"verdict": "pass", '
                    '"counts": {"collected": 2}, "tests": {"t::a": "passed", "t::b": "passed"}}}}}')
    hand = Baseline.load(path)
    full = base({C: {"normal": rec({"t::a": "passed", "t::b": "passed"}, library={})}})
    got = compare(full, hand)
    assert [c.to_dict() for c in got.regressions] == [ch("count", "passed", 2, None)]
    assert [c.line() for c in got.regressions] == ["count: c1 normal passed: 2 -> (none)"]
    assert compare(hand, full).to_dict() == EMPTY  # no count before: nothing to drop from


def test_a_known_flaky_test_within_its_set_changes_nothing_and_outside_it_is_a_regression():
    flaky_set = {"outcomes": ["failed", "passed"], "tiers": ["MATH"]}
    sets = {"t::fl": flaky_set, "t::fl2": flaky_set, "t::nw": flaky_set, "t::was": flaky_set,
            "t::out": {"outcomes": ["passed"], "tiers": []}}
    b = rec({"t::fl": "passed MATH", "t::fl2": "passed", "t::out": "passed", "t::ok": "passed", "t::was": "skipped",
             "t::x": "skipped"}, counts={"collected": 6, "passed": 4}, library={})
    a = rec({"t::fl": "failed", "t::fl2": "passed MATH", "t::out": "failed", "t::ok": "passed", "t::was": "failed",
             "t::nw": "failed", "t::x": "skipped"}, counts={"collected": 5, "passed": 2}, library={})
    got = compare(base({C: {"normal": b}}), base({C: {"normal": a}}), flaky={(C, "normal"): sets}).to_dict()
    assert got == {**EMPTY, "regressions": [
        ch("test", "t::out", "passed", "failed"), ch("test", "t::was", "skipped", "failed"),
        ch("count", "collected", 6, 5), ch("count", "passed", 4, 2)]}
    plain = compare(base({C: {"normal": b}}), base({C: {"normal": a}})).to_dict()  # no sets: every change counts
    assert [(c["kind"], c["test"]) for c in plain["regressions"]] == [
        ("test", "t::fl"), ("test", "t::nw"), ("test", "t::out"), ("test", "t::was"), ("tier", "t::fl"),
        ("tier", "t::fl2"), ("count", "collected"), ("count", "passed")]
    other = compare(base({C: {"normal": b}}), base({C: {"normal": a}}), flaky={(C, "teeth"): sets}).to_dict()
    assert other == plain  # the sets of another mode do not apply


def test_a_mode_whose_isolation_differs_is_noted_and_never_fails():
    b = ModeRecord("pass", {"collected": 1, "passed": 1}, {"t::a": Line("passed")}, None, {}, {}, "all", "off")
    a = ModeRecord("pass", {"collected": 1, "passed": 1}, {"t::a": Line("passed")}, None, {}, {}, "all", "restore")
    got = compare(base({C: {"normal": b}}), base({C: {"normal": a}}))
    assert got.to_dict() == {**EMPTY, "notes": [ch("isolation", None, "off", "restore")]}
    assert [c.line() for c in got.notes] == ["isolation: c1 normal: off -> restore"]
    assert compare(base({C: {"normal": a}}), base({C: {"normal": a}})).to_dict() == EMPTY


def test_a_pass_lost_within_a_known_flaky_set_is_no_drop_in_passed():
    sets = {"t::fl": {"outcomes": ["failed", "passed"], "tiers": []}}
    b = rec({"t::fl": "passed", "t::ok": "passed"}, counts={"collected": 2, "passed": 2}, library={})
    a = rec({"t::fl": "failed", "t::ok": "passed"}, counts={"collected": 2, "passed": 1}, library={})
    assert compare(base({C: {"normal": b}}), base({C: {"normal": a}}), flaky={(C, "normal"): sets}).to_dict() == EMPTY
    gone = rec({"t::ok": "passed"}, counts={"collected": 1, "passed": 1}, library={})  # the flaky test did not run
    assert [c["test"] for c in compare(base({C: {"normal": b}}), base({C: {"normal": gone}}),
                                       flaky={(C, "normal"): sets}).to_dict()["regressions"]] == ["t::fl", "collected",
                                                                                                  "passed"]


def test_a_missing_after_count_is_a_drop_even_from_one_and_in_a_scoped_teeth():
    b = rec({}, counts={"collected": 1, "passed": 1}, library={})
    a = rec({}, counts={}, library={})
    assert [c.line() for c in compare(base({C: {"normal": b}}), base({C: {"normal": a}})).regressions] == [
        "count: c1 normal collected: 1 -> (none)", "count: c1 normal passed: 1 -> (none)"]
    scoped = rec({}, counts={}, library={}, scope="cudnn")
    assert [c.line() for c in compare(base({C: {"teeth": b}}), base({C: {"teeth": scoped}})).regressions] == [
        "count: c1 teeth collected: 1 -> (none)", "count: c1 teeth passed: 1 -> (none)"]


def test_a_test_the_cuda_ep_no_longer_serves_is_an_ep_regression_only_where_both_sides_had_a_census():
    import dataclasses

    before = dataclasses.replace(rec({"t::a": "passed ep=CUDA", "t::b": "passed ep=CPU", "t::c": "failed ep=CUDA",
                                      "t::d": "passed ep=CUDA"}), ep_census=True)
    after = dataclasses.replace(rec({"t::a": "passed ep=CPU", "t::b": "passed ep=CUDA", "t::c": "failed ep=none",
                                     "t::d": "passed"}), ep_census=True)
    got = cmp_of(before, after)
    assert got["regressions"] == [ch("ep", "t::a", "CUDA", "CPU"), ch("ep", "t::c", "CUDA", "no run"),
                                  ch("ep", "t::d", "CUDA", "no CUDA session")]
    assert got["improvements"] == [ch("ep", "t::b", "CPU", "CUDA")]
    # a side from a result without a census (schema 2) knows nothing of EPs: no ep change either way
    assert cmp_of(before, dataclasses.replace(after, ep_census=False))["regressions"] == []
    assert cmp_of(dataclasses.replace(before, ep_census=False), after)["improvements"] == []
    assert Line.decode("passed MATH ep=CUDA,CPU reruns=1") == Line("passed", ("MATH",), 1, ("CUDA", "CPU"))
    assert codec.decode(ModeRecord, codec.encode(after)).ep_census is True


def test_a_grouped_test_is_everywhere_only_when_it_changed_in_every_place_of_its_group():
    from ort_gpu_matrix.compare.grouping import group
    rows = [Change("tier", "c1", "normal", "t::a", "CUDNN_FLASH_ATTENTION", "MATH"),
            Change("tier", "c2", "normal", "t::a", "CUDNN_FLASH_ATTENTION", "MATH"),
            Change("tier", "c2", "normal", "t::b", "CUDNN_FLASH_ATTENTION", "MATH")]
    (g,) = group(rows)
    assert (g.everywhere("t::a"), g.everywhere("t::b")) == (True, False)
    (one,) = group(rows[2:3])
    assert one.everywhere("t::b")


def _on(major: str | None, tests: dict[str, str], stack: list[str]) -> ModeRecord:
    r = rec(tests, library={**LIB, "cuda_stack": stack})
    return ModeRecord(r.verdict, r.counts, r.tests, r.teeth, r.library, {"ort_cuda": major}, r.teeth_scope)


def test_cells_of_two_cuda_majors_that_run_the_same_test_files_are_compared_with_what_served_each():
    ids = {"c12": {"python": "3.12", "ort": "o126", "torch": "t28", "libs": "pip12", "suite": "att12"},
           "c13": {"python": "3.12", "ort": "o131", "torch": "img", "libs": "sys13", "suite": "att"},
           "c13b": {"python": "3.12", "ort": "o131", "torch": "img", "libs": "sys13b", "suite": "att"},
           "d13": {"python": "3.12", "ort": "o131", "torch": "img", "libs": "sys13c", "suite": "dispatch"},
           "p11": {"python": "3.11", "ort": "o131", "torch": "img", "libs": "sys13d", "suite": "att"}}
    s12, s13 = ["cublas CUDA 12 12.8.4.1 (/a/libcublas.so.12)"], ["cublas CUDA 13 13.0.2 (/b/libcublas.so.13)"]
    a12 = _on("12.8", {"f.py::a": "failed", "f.py::b": "passed FLASH_ATTENTION"}, s12)
    a13 = _on("13.0", {"f.py::a": "passed", "f.py::b": "passed FLASH_ATTENTION"}, s13)
    other_files = _on("13.0", {"g.py::x": "passed"}, s13)
    run = base({"c12": {"normal": a12}, "c13": {"normal": a13}, "c13b": {"normal": a13}, "d13": {"normal": other_files},
                "p11": {"normal": a13}})
    got = {d.cells: d for d in libs_comparison(run, ids)}
    # c12 against each CUDA 13 cell of its python and test files; c13/c13b differ in libs but also in nothing
    # else, so they pair as today (no majors); d13 runs other files, p11 another python
    assert set(got) == {("c12", "c13"), ("c12", "c13b"), ("c13", "c13b")}
    d = got["c12", "c13"]
    assert d.majors == (12, 13) and d.stacks == ([s12], [s13])
    assert d.tests == [("f.py::a", "failed", "passed")]
    assert d.served == {"f.py::a": ("L1", "R1")} and d.spread == ({"L1": 2}, {"R1": 2})  # one stack served them all
    assert got["c13", "c13b"].majors is None
    # one CUDA major on both sides, or a side whose ORT build says none: no cross-major pair
    same = base({"c12": {"normal": _on("13.0", {"f.py::a": "failed"}, s13)}, "c13": {"normal": a13}})
    assert libs_comparison(same, ids) == []
    unknown = base({"c12": {"normal": _on(None, {"f.py::a": "failed"}, [])}, "c13": {"normal": a13}})
    assert libs_comparison(unknown, ids) == []


def test_a_cross_major_pair_needs_the_same_test_files_and_each_mode_is_judged_on_its_own():
    ids = {"c12": {"python": "3.12", "ort": "o126", "torch": "t28", "libs": "p12", "suite": "s12"},
           "c13": {"python": "3.12", "ort": "o131", "torch": "img", "libs": "s13", "suite": "s"}}
    same_file = (_on("12.8", {"f.py::a": "passed"}, []), _on("13.0", {"f.py::b": "passed"}, []))
    (d,) = libs_comparison(base({"c12": {"normal": same_file[0]}, "c13": {"normal": same_file[1]}}), ids)
    assert d.tests == [("f.py::a", "passed", "(absent)"), ("f.py::b", "(absent)", "passed")]  # one file: a pair
    other_file = (_on("12.8", {"f.py::a": "passed"}, []), _on("13.0", {"g.py::a": "passed"}, []))
    assert libs_comparison(base({"c12": {"normal": other_file[0]}, "c13": {"normal": other_file[1]}}), ids) == []
    # a mode whose ORT names no CUDA is skipped, and the modes after it are still compared
    run = base({"c12": {"normal": _on(None, {"f.py::a": "passed"}, []), "teeth": _on("12.8", {"f.py::a": "failed"}, [])},
                "c13": {"normal": _on("13.0", {"f.py::a": "passed"}, []), "teeth": _on("13.0", {"f.py::a": "failed"}, [])}})
    assert [(d.mode, d.majors) for d in libs_comparison(run, ids)] == [("teeth", (12, 13))]
    # a record stored before the audit listed the stack (an old baseline) shows none, as an empty list
    old = rec({"f.py::a": "passed"}, library=LIB)
    old = ModeRecord(old.verdict, old.counts, old.tests, old.teeth, old.library, {"ort_cuda": "12.8"}, old.teeth_scope)
    (d,) = libs_comparison(base({"c12": {"normal": old}, "c13": {"normal": _on("13.0", {"f.py::a": "passed"}, [])}}), ids)
    assert d.stacks == ([], []) and d.majors == (12, 13) and d.tests == []


def test_cells_of_two_cuda_majors_that_share_a_libs_set_are_compared_too():
    """A CUDA 12 and a CUDA 13 cell that both pin nothing (libs `none`) differ in their ORT and torch."""
    ids = {"c12": {"python": "3.12", "ort": "o126", "torch": "t28", "libs": "none", "suite": "s"},
           "c13": {"python": "3.12", "ort": "o131", "torch": "img", "libs": "none", "suite": "s"}}
    run = base({"c12": {"normal": _on("12.8", {"f.py::a": "failed"}, [])},
                "c13": {"normal": _on("13.0", {"f.py::a": "passed"}, [])}})
    (d,) = libs_comparison(run, ids)
    assert d.majors == (12, 13) and d.tests == [("f.py::a", "failed", "passed")]


def test_a_side_whose_processes_mapped_two_stacks_names_the_one_that_served_each_test():
    """An xdist worker that mapped another cuBLAS than its siblings: each listed test says which stack served it."""
    ids = {"c12": {"python": "3.12", "ort": "o126", "torch": "t28", "libs": "p12", "suite": "s12"},
           "c13": {"python": "3.12", "ort": "o131", "torch": "img", "libs": "s13", "suite": "s"}}
    s12, mixed = ["cublas CUDA 12 12.8 (/a/libcublas.so.12)"], ["cublas CUDA 13 13.0 (/b/libcublas.so.13)"]
    left = _on("12.8", {"f.py::a": "failed", "f.py::b": "failed", "f.py::c": "passed"}, [])
    left = ModeRecord(left.verdict, left.counts, left.tests, left.teeth,
                      {**left.library, "cuda_stacks": [s12, s12 + mixed], "stack_of": {"f.py::a": 0, "f.py::b": 1}},
                      left.provenance, left.teeth_scope)
    right = _on("13.0", {"f.py::a": "passed", "f.py::b": "passed", "f.py::c": "passed"}, mixed)
    (d,) = libs_comparison(base({"c12": {"normal": left}, "c13": {"normal": right}}), ids)
    assert d.served == {"f.py::a": ("L1", "R1"), "f.py::b": ("L2", "R1")}
    assert d.spread == ({"L1": 1, "L2": 1, "not audited": 1}, {"R1": 3})  # f.py::c's process sent no audit
    assert d.stack_rows() == [f"c12 L1, 1 test(s): {s12[0]}", f"c12 L2, 1 test(s): {s12[0]}; {mixed[0]}",
                              "c12: 1 test(s) ran in a process no audit came back from", f"c13 R1, 3 test(s): {mixed[0]}"]
    assert d.served_text("f.py::b") == "served by L2 | R1"


def test_the_terminal_and_markdown_name_the_stack_that_served_each_listed_test():
    from types import SimpleNamespace

    from ort_gpu_matrix.report.render import markdown, terminal
    s12, s13 = ["cublas CUDA 12 12.8 (/a/libcublas.so.12)"], ["cublas CUDA 13 13.0 (/b/libcublas.so.13)"]
    d = LibsDiff("normal", ("c12", "c13"), ([], []), [("f.py::a", "failed", "passed")], majors=(12, 13),
                 stacks=([s12], [s13]), served={"f.py::a": ("L1", "R1")}, spread=({"L1": 2}, {"R1": 2}))
    report = SimpleNamespace(libs=[d])
    text = "\n".join(terminal._libs_comparison(report))  # type: ignore[arg-type]
    assert f"    c12 L1, 2 test(s): {s12[0]}" in text and f"    c13 R1, 2 test(s): {s13[0]}" in text
    assert "    f.py::a: failed | passed (served by L1 | R1)" in text
    md = "\n".join(markdown._libs_comparison(report))  # type: ignore[arg-type]
    assert "  - f.py::a: failed vs passed (served by L1 \\| R1)" in md  # the pipe escaped: no table cell break
    same_major = LibsDiff("normal", ("a", "b"), ([], []), [("f.py::a", "failed", "passed")])
    assert "served by" not in "\n".join(terminal._libs_comparison(SimpleNamespace(libs=[same_major])))  # type: ignore[arg-type]


def test_a_libs_diff_says_each_sides_stacks_with_the_tests_each_served_and_who_served_a_test():
    from ort_gpu_matrix.compare.changes import NOT_AUDITED, LibsDiff

    diff = LibsDiff("normal", ("c12", "c13"), ([], []), [], majors=(12, 13),
                    stacks=([["cudart CUDA 12 12.8 (/a)", "cudnn CUDA 12 9.8 (/b)"], []], []),
                    served={"t::a": ("L1", NOT_AUDITED)}, spread=({"L1": 3, NOT_AUDITED: 2}, {}))
    assert diff.stack_rows() == ["c12 L1, 3 test(s): cudart CUDA 12 12.8 (/a); cudnn CUDA 12 9.8 (/b)",
                                 "c12 L2, 0 test(s): no CUDA library mapped",
                                 "c12: 2 test(s) ran in a process no audit came back from",
                                 "c13: no CUDA library audited"]
    assert diff.served_text("t::a") == f"served by L1 | {NOT_AUDITED}"
    assert diff.served_text("t::gone") == f"served by {NOT_AUDITED} | {NOT_AUDITED}"
    with pytest.raises(ValueError):  # a side without its stacks is a bug, not a shorter list
        LibsDiff("normal", ("c12", "c13"), ([], []), [], stacks=([],), spread=({}, {})).stack_rows()  # type: ignore[arg-type]


def test_a_stack_label_says_where_a_test_is_absent_and_what_served_it_on_one_side():
    from ort_gpu_matrix.compare.changes import NOT_AUDITED, _stacks
    from ort_gpu_matrix.compare.epmoves import eps_text

    two = {"cuda_stacks": [["a"], ["b"]], "stack_of": {"t::a": 1}}
    stacks, label = _stacks(ModeRecord("pass", {}, {"t::a": Line("passed"), "t::b": Line("passed")}, None, two, {}),
                            "R")
    assert stacks == [["a"], ["b"]]
    assert [label("t::a"), label("t::b"), label("t::gone")] == ["R2", NOT_AUDITED, "absent"]
    assert [eps_text(("CUDA", "CPU")), eps_text(()), eps_text(None)] == ["CUDA, CPU", "no run", "no CUDA session"]

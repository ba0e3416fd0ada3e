"""Node truth in sweeps, in-process: a baseline line's ops per EP (store/baseline.py), a per-op ep change
(compare/epmoves.py, compare/changes.py), how confirmation checks and clears it (compare/suspects.py,
compare/unreproduced.py), and what a bisect step's line says of it (drive/bisect_step.py, app/bisect.py).
tests/test_nodesweep.py runs the same through real nox sweeps."""
from __future__ import annotations

import dataclasses
import json

import pytest
from helpers import result

from ort_gpu_matrix.app.bisect import Followed, _piece
from ort_gpu_matrix.compare.changes import Change, ChangeKind, Comparison, compare
from ort_gpu_matrix.compare.changes import test_changes as per_test
from ort_gpu_matrix.compare.epmoves import Seen, back_on_cuda
from ort_gpu_matrix.compare.grouping import group
from ort_gpu_matrix.compare.suspects import Suspects, _reproduces
from ort_gpu_matrix.compare.unreproduced import filter_comparison
from ort_gpu_matrix.drive.bisect_step import line
from ort_gpu_matrix.judge.counts import Dispatch
from ort_gpu_matrix.judge.counts import TestResult as T
from ort_gpu_matrix.judge.eps import EpCensus, EpTest
from ort_gpu_matrix.judge.nodes import NodeRun
from ort_gpu_matrix.judge.verdicts import Status
from ort_gpu_matrix.store.baseline import Baseline, ModeRecord
from ort_gpu_matrix.store.baseline import TestLine as Line
from ort_gpu_matrix.store.confirmation import Confirmation, Rerun
from ort_gpu_matrix.store.confirmation import TestRuns as Runs
from ort_gpu_matrix.util import codec

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
ODD = ["Relu", "com.microsoft.Gelu", "ai.onnx:Add", "a b", "x,y=z", "ops.CPU=Add", "%41", "100%", "é", "\ud800x",
       "reruns=1", "ep=CUDA", "MATH", "~tilde", "tab\there"]


@pytest.mark.parametrize("op", ODD)
def test_an_op_name_of_any_characters_round_trips_in_one_token(op):
    held = Line("passed", ("MATH",), 2, ("CUDA", "CPU"), (("CUDA", tuple(sorted({"Add", op}))), ("CPU", (op,))))
    text = held.encode()
    assert len(text.split()) == 6 and text.split()[0] == "passed" and text.endswith(" reruns=2"), text
    assert Line.decode(text) == held
    assert Line.decode(text).ran_on(op) == ("CUDA", "CPU")


def test_an_ep_name_of_any_characters_round_trips_too_and_cuda_comes_first():
    held = Line("passed", (), 0, ("CUDA",), (("CUDA", ("Add",)), ("My EP,1", ("Relu",)), ("ZZ", ("Relu",))))
    assert held.encode() == "passed ep=CUDA ops.CUDA=Add ops.My%20EP%2C1=Relu ops.ZZ=Relu"
    assert Line.decode(held.encode()) == held
    assert Line.decode("passed ops.CPU=b,a,a ops.CUDA=Add") == Line("passed", ops=(("CUDA", ("Add",)),
                                                                                 ("CPU", ("a", "b"))))


@pytest.mark.parametrize("text", ["passed ops.CUDA=", "passed ops.=Add", "passed ops.CUDA=Add,,Relu",
                                  "passed ops.CUDA=Add ops.CUDA=Relu", "passed ops.CUDA=A=B", "passed ops.CUDA=a/b",
                                  "passed ops.CUDA"])
def test_an_ops_token_that_is_not_one_is_refused_naming_the_form(text):
    with pytest.raises(ValueError, match=r"ops\.EP=OP,OP names each EP once"):
        Line.decode(text)


def test_a_record_keeps_the_ops_that_ran_on_each_ep_and_says_a_node_census_was_taken():
    nodes = [NodeRun("Add", "add", CUDA, 2), NodeRun("Unique", "u", CPU, 2), NodeRun("Relu", "r", CUDA, 1, 2),
             NodeRun("Add", "add2", CUDA, 1, 2), NodeRun("Det", "d", CPU, 0), NodeRun("", "nameless", CPU, 1),
             NodeRun("Odd op", "o", "", 1)]
    ep = EpCensus(True, {"t::a": EpTest({CUDA: 3}, nodes=nodes), "t::b": EpTest({CUDA: 1})}, nodes_taken=True)
    rec = ModeRecord.of(result("normal", {"t::a": "passed", "t::b": "passed", "t::c": "passed"}, ep=ep))
    assert {n: t.encode() for n, t in rec.tests.items()} == {
        "t::a": "passed ep=CUDA ops.CUDA=Add,Relu ops.CPU=Unique",  # Det made no run; a node without op or EP says nothing
        "t::b": "passed ep=CUDA", "t::c": "passed"}
    assert rec.node_census is True and codec.encode(rec)["node_census"] is True
    without = ModeRecord.of(result("normal", {"t::a": "passed"}, ep=dataclasses.replace(ep, nodes_taken=False)))
    assert without.node_census is False and "node_census" not in codec.encode(without)  # omitted at its default


def test_a_version_2_baseline_still_reads_and_knows_no_ops(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"baseline_version": 2, "cells": {"c": {"normal": {
        "verdict": "pass", "counts": {}, "tests": {"t::a": "passed ep=CUDA"}, "ep_census": True}}}}))
    rec = Baseline.load(p).cells["c"]["normal"]
    assert rec.tests["t::a"] == Line("passed", eps=("CUDA",)) and rec.node_census is False and rec.ep_census


def rec(tests: dict[str, str], nodes: bool = True) -> ModeRecord:
    return ModeRecord(Status.PASS, {}, {n: Line.decode(t) for n, t in tests.items()}, ep_census=True,
                      node_census=nodes)


def changes(before: ModeRecord, after: ModeRecord) -> tuple[list[str], list[str]]:
    cmp = compare(Baseline({"c": {"normal": before}}), Baseline({"c": {"normal": after}}))
    return [c.line() for c in cmp.regressions], [c.line() for c in cmp.improvements]


def test_an_op_that_ran_on_cuda_alone_and_now_runs_elsewhere_is_an_ep_regression_naming_the_op():
    before = rec({"t::a": "passed ep=CUDA ops.CUDA=Add,Relu", "t::b": "passed ep=CUDA ops.CUDA=Add,Gelu",
                  "t::c": "passed ep=CUDA ops.CUDA=Add ops.CPU=Unique", "t::d": "passed ep=CUDA ops.CUDA=Relu ops.CPU=Relu",
                  "t::e": "passed ep=CUDA ops.CUDA=Shape,Add", "t::f": "passed ep=CUDA ops.CUDA=Add,Relu"})
    after = rec({"t::a": "passed ep=CUDA ops.CUDA=Add ops.CPU=Relu", "t::b": "passed ep=CUDA ops.CUDA=Add,Gelu ops.CPU=Gelu",
                 "t::c": "passed ep=CUDA ops.CUDA=Add,Unique", "t::d": "passed ep=CUDA ops.CPU=Relu",
                 "t::e": "passed ep=CUDA ops.CUDA=Add ops.CPU=Shape", "t::f": "passed ep=CUDA ops.CUDA=Add"})
    assert changes(before, after) == (
        ["ep: c normal t::a: Relu: CUDA -> CPU", "ep: c normal t::b: Gelu: CUDA -> CUDA, CPU",
         "ep: c normal t::d: Relu: CUDA, CPU -> CPU"],  # d lost its last CUDA kernel
        ["ep: c normal t::c: Unique: CPU -> CUDA"])  # e is a shape op, f's Relu did not run
    cmp = compare(Baseline({"c": {"normal": before}}), Baseline({"c": {"normal": after}}))
    assert cmp.regressions[0] == Change(ChangeKind.EP, "c", "normal", "t::a", "CUDA", "CPU", "Relu")
    assert cmp.to_dict()["regressions"][0] == {"kind": "ep", "cell": "c", "mode": "normal", "test": "t::a",
                                               "before": "CUDA", "after": "CPU", "op": "Relu"}
    assert "op" not in Change(ChangeKind.EP, "c", "normal", "t::x", "CUDA", "CPU").to_dict()


def test_a_placement_seen_in_the_baseline_and_unseen_now_is_one_ep_regression_of_its_own():
    before = rec({"t::a": "passed ep=CUDA ops.CUDA=Add,Relu", "t::b": "passed ep=CUDA ops=unseen"})
    after = rec({"t::a": "passed ep=CUDA ops=unseen", "t::b": "passed ep=CUDA ops.CUDA=Add"})
    assert changes(before, after) == (["ep: c normal t::a: node placement seen -> node placement unseen"],
                                      ["ep: c normal t::b: node placement unseen -> node placement seen"])
    line = Line.decode("passed ep=CUDA ops.CUDA=Add ops=unseen")
    assert line.unseen and line.encode() == "passed ep=CUDA ops.CUDA=Add ops=unseen"
    with pytest.raises(ValueError, match="ops= is written only as ops=unseen"):
        Line.decode("passed ep=CUDA ops=seen")


def test_one_cause_is_named_once_and_only_where_both_sides_carried_a_node_census_and_kept_their_outcome():
    before = rec({"t::a": "passed ep=CUDA ops.CUDA=Add,Relu", "t::b": "passed ep=CUDA ops.CUDA=Add,Relu"})
    after = rec({"t::a": "passed ep=CPU ops.CPU=Add,Relu", "t::b": "failed ep=CUDA ops.CPU=Add,Relu"})
    assert changes(before, after) == (["test: c normal t::b: passed -> failed", "ep: c normal t::a: CUDA -> CPU"], [])
    assert changes(after, before)[1] == ["ep: c normal t::a: CPU -> CUDA", "test: c normal t::b: failed -> passed"]
    moved = rec({"t::a": "passed ep=CUDA ops.CPU=Relu ops.CUDA=Add", "t::b": "passed ep=CUDA ops.CUDA=Add,Relu"})
    assert changes(before, moved)[0] == ["ep: c normal t::a: Relu: CUDA -> CPU"]
    assert changes(before, dataclasses.replace(moved, node_census=False)) == ([], [])
    assert changes(dataclasses.replace(before, node_census=False), moved) == ([], [])
    both = per_test("c", "normal", "t::a", before.tests["t::a"], moved.tests["t::a"], Seen.EPS)
    assert both == ([], [])


def test_a_per_op_change_groups_by_its_op():
    rows = [Change(ChangeKind.EP, "c", "normal", "t::a", "CUDA", "CPU", "Relu"),
            Change(ChangeKind.EP, "c", "normal", "t::b", "CUDA", "CPU", "Relu"),
            Change(ChangeKind.EP, "c", "normal", "t::c", "CUDA", "CPU", "Gelu"),
            Change(ChangeKind.EP, "c", "normal", "t::d", "CUDA", "CPU")]
    assert sorted((g.kind, g.headline()) for g in group(rows)) == [
        ("ep", "ep CUDA → CPU: 1 test(s), 1 row(s) in 1 cell(s) x 1 mode(s) (normal)"),
        ("ep Gelu", "ep Gelu CUDA → CPU: 1 test(s), 1 row(s) in 1 cell(s) x 1 mode(s) (normal)"),
        ("ep Relu", "ep Relu CUDA → CPU: 2 test(s), 2 row(s) in 1 cell(s) x 1 mode(s) (normal)")]


def test_a_per_op_change_that_did_not_reproduce_leaves_the_regressions_alone_by_its_op():
    relu, gelu = (Change(ChangeKind.EP, "c1", "normal", "t::a", "CUDA", "CPU", op) for op in ("Relu", "Gelu"))
    whole = Change(ChangeKind.EP, "c1", "normal", "t::b", "CUDA", "CPU")
    runs = [Runs("t::a", ["ep Gelu", "ep Relu"], ["x", "y"], ["ep Relu"]), Runs("t::b", ["ep"], ["x", "y"], ["ep"])]
    confirmed = Confirmation(2, Status.FAIL, [], result().counts, [Rerun("r1", None, 2, 1.0)], runs)
    cmp = Comparison(regressions=[relu, gelu, whole])
    filter_comparison(cmp, [result("normal", confirmation=confirmed)])
    assert cmp.regressions == [gelu]
    assert relu.check == "ep Relu" and whole.check == "ep"


def _suspect(baseline: Line) -> Suspects:
    return Suspects(None, result("normal"), {}, {}, baseline={"t::a": baseline})  # type: ignore[arg-type]


def _ran(nodes: list[tuple[str, str, int]], outcome: str = "passed", runs: dict | None = None) -> T:
    use = {"session": 1, "asked": [CUDA, CPU], "served": [CUDA, CPU], "runs": runs or {CUDA: 1},
           "nodes": [{"op": op, "name": op.lower(), "ep": ep, "runs": n} for op, ep, n in nodes]}
    return T("t::a", outcome, "", (), ep=(use,))  # type: ignore[arg-type]


def test_a_per_op_change_is_cleared_only_by_a_rerun_with_the_op_back_on_cuda_alone():
    m = _suspect(Line("passed", eps=("CUDA",), ops=(("CUDA", ("Add", "Relu")),)))
    assert not _reproduces(m, "t::a", "ep Relu", _ran([("Add", CUDA, 1), ("Relu", CUDA, 1)]))
    assert _reproduces(m, "t::a", "ep Relu", _ran([("Add", CUDA, 1), ("Relu", CPU, 1)]))
    assert _reproduces(m, "t::a", "ep Relu", _ran([("Relu", CUDA, 1), ("Relu", CPU, 1)]))  # on both: still off
    assert _reproduces(m, "t::a", "ep Relu", _ran([("Add", CUDA, 1)]))  # it did not run: nothing went away
    # back on the CUDA EP in a rerun that failed: the ep change is gone (the failure is the rerun's own, and keeps
    # the test's first line in the result: suspects._clean)
    assert not _reproduces(m, "t::a", "ep Relu", _ran([("Relu", CUDA, 1)], outcome="failed"))
    assert _reproduces(m, "t::a", "ep Relu", _ran([]))  # no node census: nothing seen
    assert _reproduces(m, "t::a", "ep Relu", None)
    # the test as a whole: the CUDA EP serves it again, whatever its ops did
    assert not _reproduces(m, "t::a", "ep", _ran([("Relu", CPU, 1)]))
    assert _reproduces(m, "t::a", "ep", _ran([("Relu", CPU, 1)], runs={CPU: 1}))
    assert back_on_cuda(Line("passed", ops=(("CUDA", ("Relu",)),)), "Relu") and not back_on_cuda(None, "Relu")


def test_a_bisect_step_line_says_what_an_ep_change_is_about_and_leaves_other_lines_as_they_were():
    nodes = [NodeRun("Add", "add", CUDA, 1), NodeRun("Relu", "r", CPU, 1), NodeRun("Gelu", "g", CUDA, 1)]
    r = result("normal", {"t::a": "passed", "t::b": "passed"}, dispatch=Dispatch({"t::a": ["MATH", "MATH"]}),
               ep=EpCensus(True, {"t::a": EpTest({CUDA: 1, CPU: 1}, nodes=nodes)}, nodes_taken=True))
    assert line(r, "t::a") == "passed MATH"
    assert line(r, "t::a", ()) == "passed MATH ep=CUDA,CPU"
    assert line(r, "t::a", ("Relu",)) == "passed MATH ep=CUDA,CPU ops.CPU=Relu"
    assert line(r, "t::a", ("Gelu", "Relu")) == "passed MATH ep=CUDA,CPU ops.CUDA=Gelu ops.CPU=Relu"
    assert line(r, "t::a", ("Unique",)) == "passed MATH ep=CUDA,CPU"  # not run: no ops token
    assert line(r, "t::b", ("Relu",)) == "passed"  # it asked for no CUDA session
    assert line(r, "t::gone", ()) == "absent"


def test_a_bisect_follows_ep_changes_and_checks_the_good_end_by_the_piece_each_change_is_about():
    relu = Change(ChangeKind.EP, "c", "normal", "t::a", "CUDA", "CPU", "Relu")
    whole = Change(ChangeKind.EP, "c", "normal", "t::b", "CUDA", "no run")
    tier = Change(ChangeKind.TIER, "c", "normal", "t::c", ["MATH", "CUDNN"], ["MATH"])
    f = Followed(None, "normal", "regressions", {}, {"t::a": [relu], "t::b": [whole], "t::c": [tier]})  # type: ignore[arg-type]
    assert f.watch() == {"t::a": ("Relu",), "t::b": ()}
    assert _piece(relu, "passed ep=CUDA ops.CUDA=Relu") == ("Relu on", "CUDA", "CUDA")
    assert _piece(relu, "passed ep=CUDA ops.CPU=Relu")[1] == "CPU"
    assert _piece(relu, "passed ep=CUDA")[1] == "not run"
    assert _piece(whole, "passed ep=CUDA ops.CPU=Relu") == ("EPs", "CUDA", "CUDA")
    assert _piece(whole, "passed")[1] == "no CUDA session"
    assert _piece(whole, "oddity ep=CUDA")[1] == "oddity ep=CUDA"  # unreadable: never the baseline's
    assert _piece(tier, "passed MATH CUDNN") == ("tiers", ["CUDNN", "MATH"], ["CUDNN", "MATH"])
    assert _piece(tier, "passed CUDNN ep=CUDA ops.CUDA=Relu")[1] == ["CUDNN"]  # a tier is never an ep token
    test = Change(ChangeKind.TEST, "c", "normal", "t::d", "passed", "failed")
    assert _piece(test, "passed MATH ep=CUDA") == ("outcome", "passed", "passed")


def test_a_known_flaky_test_within_its_set_still_names_its_move_off_cuda():
    before = rec({"t::a": "passed MATH ep=CUDA ops.CUDA=Add,Relu"})
    after = rec({"t::a": "failed ep=CUDA ops.CUDA=Add ops.CPU=Relu"})
    flaky = {("c", "normal"): {"t::a": {"outcomes": ["passed", "failed"], "tiers": ["MATH"]}}}
    cmp = compare(Baseline({"c": {"normal": before}}), Baseline({"c": {"normal": after}}), flaky=flaky)
    assert [c.line() for c in cmp.regressions] == []  # the outcome changed: no ep change is named across outcomes
    after = rec({"t::a": "passed MATH ep=CUDA ops.CUDA=Add ops.CPU=Relu"})
    cmp = compare(Baseline({"c": {"normal": before}}), Baseline({"c": {"normal": after}}), flaky=flaky)
    assert [c.line() for c in cmp.regressions] == ["ep: c normal t::a: Relu: CUDA -> CPU"]

"""The edges of node truth's stored lines and calibrate's cuda_ops rules, in-process (issue 48, mutation testing):
a baseline line's ep= and ops. tokens as written and as refused (store/baseline.py), and what calibrate writes,
keeps and says of a function's ops (calibrate/ops.py). Each test pins a decision a mutant of these modules changed
while every other test still passed (docs/mutations.md, "Issue 48, second part")."""
from __future__ import annotations

import pytest
from helpers import result
from test_calibrate_ops_units import CPU, CUDA, node, passed, rules, use
from test_calibrate_units import OBS1, seen

from ort_gpu_matrix.calibrate import ops as opsmod
from ort_gpu_matrix.calibrate.tiers import ObservedRun
from ort_gpu_matrix.config.model import CudaOpsRule, DispatchExpect, NodePolicy, Observation
from ort_gpu_matrix.judge.eps import EpCensus, EpTest
from ort_gpu_matrix.judge.nodes import NodeRun
from ort_gpu_matrix.store.baseline import ModeRecord, ops_by_ep
from ort_gpu_matrix.store.baseline import TestLine as Line
from ort_gpu_matrix.util.voice import Voice

EP_FORM = "ep= must be given once, as EP names joined by commas (CUDA,CPU) or none"
OPS_FORM = ("ops.EP=OP,OP names each EP once, with the ops that ran on it joined by commas (ops.CUDA=Add,Relu), other "
            "characters %-quoted")


def test_a_test_that_asked_for_cuda_and_made_no_run_is_written_ep_none_and_read_back():
    assert Line("passed", eps=()).encode() == "passed ep=none"
    assert Line.decode("passed ep=none") == Line("passed", eps=())
    assert Line.decode("passed").eps is None  # asked for no CUDA session: no token at all


@pytest.mark.parametrize("text", ["passed ep=CUDA ep=CPU", "passed ep=CUDA=CPU", "passed ep=CUDA=CPU,CUDA",
                                  "passed ep=none=x", "passed ep=CUDA,"])
def test_an_ep_token_given_twice_or_not_a_list_of_names_is_refused_with_the_line_and_the_form(text):
    with pytest.raises(ValueError) as err:
        Line.decode(text)
    assert str(err.value) == f"{text!r}: {EP_FORM}"


@pytest.mark.parametrize("text", ["passed ops.CUDA=Add,,Relu", "passed ops.CUDA=A=B", "passed ops.CUDA"])
def test_an_ops_token_refused_names_the_line_and_the_whole_form(text):
    with pytest.raises(ValueError) as err:
        Line.decode(text)
    assert str(err.value) == f"{text!r}: {OPS_FORM}"


def test_an_op_keeps_its_domain_colon_as_written_and_a_slash_is_quoted_so_it_reads_back():
    held = Line("passed", ops=(("CUDA", ("a/b", "ai.onnx:Add")),))
    assert held.encode() == "passed ops.CUDA=a%2Fb,ai.onnx:Add"
    assert Line.decode(held.encode()) == held


def test_eps_other_than_cuda_are_ordered_by_their_name_not_by_their_ops():
    assert Line.decode("passed ops.ZZ=Add ops.AA=Relu ops.CUDA=Mul").ops == (
        ("CUDA", ("Mul",)), ("AA", ("Relu",)), ("ZZ", ("Add",)))
    nodes = [NodeRun("Add", "a", "ZZExecutionProvider", 1), NodeRun("Relu", "r", "AAExecutionProvider", 1)]
    assert ops_by_ep(nodes) == (("AA", ("Relu",)), ("ZZ", ("Add",)))


def test_a_record_says_ops_unseen_of_a_test_some_of_whose_placement_was_unseen():
    ep = EpCensus(True, {"t::a": EpTest({CUDA: 1}, 1, nodes=[NodeRun("Add", "a", CUDA, 1)], nodes_unseen=["old ORT"]),
                         "t::b": EpTest({CUDA: 1}, 1, nodes=[NodeRun("Add", "a", CUDA, 1)])}, nodes_taken=True)
    rec = ModeRecord.of(result("normal", {"t::a": "passed", "t::b": "passed", "t::c": "passed"}, ep=ep))
    assert {n: line.encode() for n, line in rec.tests.items()} == {
        "t::a": "passed ep=CUDA ops.CUDA=Add ops=unseen", "t::b": "passed ep=CUDA ops.CUDA=Add", "t::c": "passed"}


def test_an_old_rule_the_runs_keep_is_kept_without_a_word():
    tests = [passed("t.py::test_relu", use(node("Add"), node("Relu")))]
    old = (CudaOpsRule("test_relu", ("Add", "Relu"), "mine"),)
    out, said = rules([seen("c1", "normal", tests)], old=old)
    assert out == [CudaOpsRule("test_relu", ("Add", "Relu"), "mine", (OBS1,))] and said == []


def test_an_old_rule_that_matched_nothing_is_dropped_only_where_drop_stale_says_and_else_kept_as_written():
    mine = Observation("c1", "1.0", "2026-01-01")
    keep = CudaOpsRule("test_keep", ("Add",), "keep", (mine,))
    drop = CudaOpsRule("test_drop", ("Add",), "drop", (mine,))
    run = seen("c1", "normal", [passed("t.py::test_other", use(node("Unique", CPU)))])
    said: list[str] = []
    out = opsmod.ops_rules((keep, drop), [ObservedRun(run.observation, run.tests)], ("Shape",),
                           lambda rule: rule.test == "test_drop", Voice.plain(say=said.append))
    assert out == [keep]  # its observed as written: nothing seen afresh, nothing lost


def test_a_function_with_no_common_op_names_the_case_that_ran_the_fewest_ops_there():
    run = seen("c1", "normal", [passed("t.py::test_apart[a]", use(node("Mul"), node("Relu"), node("Sub"))),
                                passed("t.py::test_apart[b]", use(node("Add"), node("Unique")))])
    out, said = rules([run])
    assert out == []
    assert said == ["not written: cuda_ops rule for t.py::test_apart: no op but a shape op ran on the CUDA EP alone in "
                    "every one of its passed cases in every run (e.g. t.py::test_apart[b] ran Add, Unique there)"]


def test_every_shape_op_left_out_of_a_rule_is_named_in_its_reason():
    run = seen("c1", "normal", [passed("t.py::test_s", use(node("Add"), node("Shape"), node("Gather")))])
    out, _ = rules([run], shape=("Shape", "Gather"))
    assert out[0].ops == ("Add",) and out[0].reason.endswith(" (shape ops left out: Gather, Shape)")


def test_the_cpu_nodes_calibrate_says_follow_the_suites_own_shape_ops():
    run = ObservedRun(OBS1, [passed("t::a", use(node("Add"), node("Unique", CPU), node("Shape", CPU)))])
    mine = DispatchExpect(nodes=NodePolicy("fail", ("Unique",)))  # the suite calls Unique a shape op, not Shape
    assert opsmod.cpu_nodes_seen([run], mine) == [
        "t::a: Shape ran on the CPU in c1 (CPUExecutionProvider, node 'shape')"]
    assert opsmod.cpu_nodes_seen([run], DispatchExpect()) == [
        "t::a: Unique ran on the CPU in c1 (CPUExecutionProvider, node 'unique')"]


def test_an_op_on_several_eps_or_in_several_nodes_names_each():
    run = ObservedRun(OBS1, [passed("t::a", use(node("Relu", CPU, name="r1"), node("Relu", "OtherEP", name="r2")))])
    assert opsmod.cpu_nodes_seen([run], DispatchExpect()) == [
        "t::a: Relu ran on CPUExecutionProvider, OtherEP in c1 (node 'r1', 'r2')"]

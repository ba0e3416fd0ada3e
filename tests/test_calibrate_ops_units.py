"""calibrate's cuda_ops rules in-process, on runs built here: which ops each test function's rule lists, which
functions get none and why, how old rules are kept, what it says of CPU nodes, and the rules as the expect file
writes them and the loader reads them back. tests/test_calibrate_nodes.py runs the real thing."""
from __future__ import annotations

import tomllib

from test_calibrate_units import OBS1, OBS2, calib, seen, suite

from ort_gpu_matrix.calibrate import ops as opsmod
from ort_gpu_matrix.calibrate import suite as cal
from ort_gpu_matrix.calibrate.tiers import ObservedRun
from ort_gpu_matrix.config.expectfile import LINE, ModeTable, render
from ort_gpu_matrix.config.model import (
    CpuOpsRule,
    CudaOpsRule,
    DispatchExpect,
    FallbackRule,
    NodePolicy,
    Observation,
    PassExpect,
)
from ort_gpu_matrix.judge.counts import TestResult as T
from ort_gpu_matrix.judge.nodes import NodeRun, judge
from ort_gpu_matrix.judge.tiers import function_regex
from ort_gpu_matrix.util.voice import Voice

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"


def node(op, ep=CUDA, runs=1, name=None):
    return {"op": op, "name": name or op.lower(), "ep": ep, "runs": runs}


def use(*nodes, session=1, unseen=None, served=(CUDA, CPU)):
    out = {"session": session, "asked": [CUDA, CPU], "served": list(served), "runs": {CUDA: 1}}
    if nodes:
        out["nodes"] = list(nodes)
    if unseen:
        out["nodes_unseen"] = unseen
    return out


def passed(nodeid, *uses, outcome="passed", parent=None, by_subtests=False):
    return T(nodeid, outcome, "", (), ep=tuple(uses), parent=parent, by_subtests=by_subtests)


def rules(runs, shape=("Shape",), old=()):
    said = []
    out = opsmod.ops_rules(old, [ObservedRun(r.observation, r.tests) for r in runs], shape, lambda r: True,
                           Voice.plain(say=said.append))
    return out, said


def test_a_rule_per_function_lists_the_ops_every_passing_case_ran_on_cuda_alone_in_every_run():
    r1 = seen("c1", "normal", [
        passed("t.py::test_relu[a]", use(node("Add"), node("Relu"), node("Shape"))),
        passed("t.py::test_relu[b]", use(node("Add"), node("Relu"), node("Mul"))),
        passed("t.py::test_unique", use(node("Add"), node("Unique", CPU))),
        passed("t.py::test_gelu", use(node("Add"), node("com.microsoft.Gelu"))),
        passed("t.py::test_cpu"),  # never asked for the CUDA EP: passed over in silence
        T("t.py::test_failed", "failed", "boom", (), ep=(use(node("Add")),))])
    r2 = seen("c2", "normal", [
        passed("t.py::test_relu[a]", use(node("Add"), node("Relu"), node("Shape"))),
        # Add ran on CUDA and, in another session, on the CPU: not on CUDA alone
        passed("t.py::test_gelu", use(node("Add"), node("com.microsoft.Gelu")), use(node("Add", CPU), session=2))],
        ort="1.31.0", started="2026-11-30T01")
    out, said = rules([r1, r2])
    assert [(r.test, r.ops, r.observed) for r in out] == [
        (function_regex("t.py::test_gelu"), ("com.microsoft.Gelu",), (OBS1, OBS2)),
        (function_regex("t.py::test_relu"), ("Add", "Relu"), (OBS1, OBS2)),  # Shape: a shape op; Mul: one case only
        (function_regex("t.py::test_unique"), ("Add",), (OBS1,))]
    assert out[1].reason == "seen in c1: 2 case(s), c2: 1 case(s), each of them running every op listed on the CUDA " \
                            "EP alone, in every run"
    assert said == []
    out, _ = rules([r1], shape=())  # the suite's shape_ops decide: none here, so Shape could be listed, but [b] lacks it
    assert out[1].ops == ("Add", "Relu")
    out, _ = rules([seen("c1", "normal", [passed("t.py::test_s", use(node("Add"), node("Shape")))])], shape=("Shape",))
    assert out[0].ops == ("Add",) and out[0].reason.endswith(" (shape ops left out: Shape)")


def test_a_function_without_a_node_census_or_without_a_common_cuda_op_gets_no_rule_and_it_is_said():
    run = seen("c1", "normal", [
        passed("t.py::test_unseen[a]", use(node("Add"))),
        passed("t.py::test_unseen[b]", use(unseen="session.record_ep_graph_assignment_info is 0")),
        passed("t.py::test_no_census", use()),  # a CUDA-served session with no placement: a result without a census
        passed("t.py::test_never_run", use(node("Add", runs=0), node("Unique", CPU, runs=0))),
        passed("t.py::test_apart[a]", use(node("Add", CPU), node("Relu"))),
        passed("t.py::test_apart[b]", use(node("Add", CPU), node("Unique"))),
        passed("t.py::test_served_by_cpu", use(served=(CPU,)))])  # a fallback: asked, no CUDA-served build
    out, said = rules([run])
    assert out == []
    assert said == [
        "not written: cuda_ops rule for t.py::test_apart: no op but a shape op ran on the CUDA EP alone in every one "
        "of its passed cases in every run (e.g. t.py::test_apart[a] ran Relu there)",
        "not written: cuda_ops rule for t.py::test_never_run: no op but a shape op ran on the CUDA EP alone in every "
        "one of its passed cases in every run (e.g. t.py::test_never_run ran none there)",
        "not written: cuda_ops rule for t.py::test_no_census: 1 of its passed case(s) have no node census in some run "
        "(e.g. t.py::test_no_census: its result has no node census (the census was off, or the report predates it)), "
        "so where its ops ran is unknown",
        "not written: cuda_ops rule for t.py::test_served_by_cpu: no op but a shape op ran on the CUDA EP alone in "
        "every one of its passed cases in every run (e.g. t.py::test_served_by_cpu ran none there)",
        "not written: cuda_ops rule for t.py::test_unseen: 1 of its passed case(s) have no node census in some run "
        "(e.g. t.py::test_unseen[b]: its placement is unseen: session.record_ep_graph_assignment_info is 0), so "
        "where its ops ran is unknown"]


def test_a_test_failed_by_its_subtests_alone_is_read_on_its_passing_parts():
    parent = "t.py::T::test_each"
    # the failing subtest ran Relu on the CPU: its runs are its own, judged apart, and leave the rule's Relu be
    tests = [passed(parent, use(node("Add"), node("Relu")), use(node("Add"), node("Relu", CPU), session=2),
                    outcome="failed", by_subtests=True),
             passed(f"{parent} (op='Relu')", use(node("Add"), node("Relu")), parent=parent),
             passed(f"{parent} (op='Relu', dtype=int8)", use(node("Add"), node("Relu", CPU), session=2),
                    parent=parent, outcome="failed")]
    out, said = rules([seen("c1", "normal", tests)])
    assert [(r.test, r.ops) for r in out] == [(function_regex(parent), ("Add", "Relu"))] and said == []
    expect = PassExpect(cuda_ops=tuple(out))
    assert judge(expect, tests).reasons == []  # the judge reads it alike


def test_old_rules_are_never_weakened_observed_afresh_and_stale_ones_dropped():
    tests = [passed("t.py::test_relu", use(node("Add"), node("Relu", CPU))), passed("t.py::test_new", use(node("Add")))]
    far = Observation("c9", "1.0", "2026-01-01")
    old = (CudaOpsRule("test_relu", ("Add", "Relu"), "mine", (Observation("c1", "1.0", "2026-01-01"),)),
           CudaOpsRule("test_gone", ("Add",), "gone"), CudaOpsRule("test_far", ("X",), "far", (far,)))
    out, said = rules([seen("c1", "normal", tests)], old=old)
    assert out == [CudaOpsRule("test_relu", ("Add", "Relu"), "mine", (OBS1,)), old[2],
                   CudaOpsRule(function_regex("t.py::test_new"), ("Add",), out[2].reason, (OBS1,))]
    assert said == ["kept as written: cuda_ops rule 'test_relu' (Add, Relu): broken by 1 test(s) in the runs "
                    "calibrated (e.g. t.py::test_relu); calibrate never weakens a rule (edit or remove it if the change "
                    "is intended)"]
    assert opsmod.cuda_only([NodeRun("Add", "a", CUDA, 1), NodeRun("Add", "b", CPU, 0),
                             NodeRun("Mul", "m", CUDA, 0)]) == {"Add"}


def test_the_suite_table_writes_cuda_ops_beside_cuda_runs_says_each_cpu_node_and_keeps_a_persons_rules():
    allowed = CpuOpsRule("test_det", ("Det",), "no CUDA kernel")
    fallback = FallbackRule("test_x", "^nope", "tolerated")
    s = suite(normal={"allowed_cpu_ops": (allowed,), "allowed_fallbacks": (fallback,)})
    tests = [passed("t.py::test_unique[\u202e]", use(node("Add"), node("Unique", CPU, name="u\x1b[2J"),
                                                       node("Shape", CPU))),
             passed("t.py::test_det", use(node("Add"), node("Det", CPU)))]
    c, said = calib([seen("c1", "normal", tests, s=s)], old={"normal": {"allowed_cpu_ops", "allowed_fallbacks"}})
    t = c.table("normal")
    assert [(r.test, r.ops) for r in t.cuda_ops] == [(function_regex("t.py::test_det"), ("Add",)),
                                                     (function_regex("t.py::test_unique"), ("Add",))]
    assert t.kept_rules == {"allowed_cpu_ops": (allowed,), "allowed_fallbacks": (fallback,)} and t.kept == {}
    assert "allowed_cpu_ops" not in cal.CALIBRATED and "cuda_ops" in cal.CALIBRATED
    # Det is accepted by the person's rule, Shape is a shape op: only Unique is said (its name escaped)
    assert [x for x in said if x.startswith("not accepted")] == [
        "not accepted: normal t.py::test_unique[\\u202e]: Unique ran on the CPU in c1 (CPUExecutionProvider, node "
        "'u\\x1b[2J'): add an allowed_cpu_ops rule if that is intended (a CPU node is never written down)"]
    assert cal.summary(t).endswith(", 2 cuda_ops")
    text = render(["h"], [t])
    got = tomllib.loads(text)["expect"]["normal"]
    assert got["allowed_cpu_ops"] == [{"test": "test_det", "ops": ["Det"], "reason": "no CUDA kernel"}]
    assert got["allowed_fallbacks"] == [{"test": "test_x", "error": "^nope", "reason": "tolerated"}]
    c, said = calib([seen("c1", "normal", tests, s=s)], inline={"normal": {"cuda_ops"}})
    assert c.table("normal").cuda_ops == [] and said[0].startswith("not written: normal cuda_ops: [suite.s.expect.normal]")
    other = opsmod.cpu_nodes_seen([ObservedRun(OBS1, [passed("t::a", use(node("Relu", "OtherEP")))])],
                                  DispatchExpect(nodes=NodePolicy()))
    assert other == ["t::a: Relu ran on OtherEP in c1 (node 'relu')"]


def test_cuda_ops_rules_render_one_a_line_or_as_tables_and_read_back_as_written():
    seen_ = (Observation("gpu-3.12-x", "1.31.1", "2026-12-04"),)
    many = tuple(f"com.microsoft.Op{i:03d}" for i in range(40))  # far longer than a line
    table = ModeTable("normal", cuda_ops=[CudaOpsRule("t::a", ("Add", "com.microsoft.Gelu"), "ran on CUDA", seen_),
                                          CudaOpsRule("t::b", ("Relu",), subtests=True)])
    wide = ModeTable("require_cudnn", cuda_ops=[CudaOpsRule("t::" + "x" * 300, many, "r" * 400, seen_, True)],
                     kept_rules={"allowed_cpu_ops": (CpuOpsRule("t::" + "y" * 300, ("Unique",), "why"),)})
    text = render(["a header"], [table, wide])
    assert max(len(line) for line in text.splitlines()) <= LINE
    assert '    { test = "t::a", ops = ["Add", "com.microsoft.Gelu"], reason = "ran on CUDA", observed = ' in text
    assert "[[expect.require_cudnn.cuda_ops]]" in text and "[[expect.require_cudnn.allowed_cpu_ops]]" in text
    got = tomllib.loads(text)["expect"]
    obs = [{"cell": "gpu-3.12-x", "ort": "1.31.1", "date": "2026-12-04"}]
    assert got["normal"] == {"cuda_ops": [
        {"test": "t::a", "ops": ["Add", "com.microsoft.Gelu"], "reason": "ran on CUDA", "observed": obs},
        {"test": "t::b", "subtests": True, "ops": ["Relu"], "reason": ""}]}
    assert got["require_cudnn"] == {
        "cuda_ops": [{"test": "t::" + "x" * 300, "subtests": True, "ops": list(many), "reason": "r" * 400,
                      "observed": obs}],
        "allowed_cpu_ops": [{"test": "t::" + "y" * 300, "ops": ["Unique"], "reason": "why"}]}

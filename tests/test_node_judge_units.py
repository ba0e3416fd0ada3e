"""judge/nodes.py in-process: the node runs a test's census holds, what a subtest owns, and every rule's finding and
message (cuda_ops, allowed_cpu_ops, the CPU nodes no rule covers, shape ops, stale rules), on hand-built tests."""
from __future__ import annotations

from ort_gpu_matrix.config.model import CpuOpsRule, CudaOpsRule, DispatchExpect, NodePolicy
from ort_gpu_matrix.judge.counts import TestResult as TR
from ort_gpu_matrix.judge.nodes import NodeRun, judge, judged_nodes, node_runs, units, unseen_of
from ort_gpu_matrix.judge.outcomes import GONE

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
F = "f.py::"


def use(session: int, *nodes: tuple[str, str, str, int], unseen: str | None = None) -> dict:
    out: dict = {"session": session, "asked": [CUDA, CPU], "served": [CUDA, CPU], "runs": {CUDA: 1},
                 "nodes": [{"op": op, "name": name, "ep": ep, "runs": runs} for op, name, ep, runs in nodes]}
    if unseen is not None:
        out["nodes_unseen"] = unseen
    return out


def tr(name: str, *uses: dict, outcome: str = "passed", parent: str | None = None, by_subtests: bool = False):
    return TR(F + name, outcome, "", (), ep=tuple(uses), parent=parent, by_subtests=by_subtests)


def expect(cuda_ops=(), allowed=(), cpu_nodes="warn", shape_ops=("Shape",)) -> DispatchExpect:
    return DispatchExpect(cuda_ops=tuple(cuda_ops), allowed_cpu_ops=tuple(allowed),
                          nodes=NodePolicy(cpu_nodes=cpu_nodes, shape_ops=tuple(shape_ops)))


def cuda_ops(pattern: str, *ops: str, subtests: bool = False) -> CudaOpsRule:
    return CudaOpsRule(test=pattern, ops=ops, reason="why", subtests=subtests)


def allowed(pattern: str, *ops: str) -> CpuOpsRule:
    return CpuOpsRule(test=pattern, ops=ops, reason="no CUDA kernel")


ADD = ("Add", "add", CUDA, 2)
UNIQUE_CPU = ("Unique", "unique", CPU, 2)
UNIQUE_CUDA = ("Unique", "unique", CUDA, 2)


# ---------------------------------------------------------------- what a test's census holds

def test_node_runs_reads_every_node_of_every_use_with_its_session():
    t = tr("t", use(1, ADD, UNIQUE_CPU), use(3, ("com.microsoft.Gelu", "gelu", CUDA, 0)),
             {"session": 4, "asked": [CUDA], "served": [CPU], "runs": {CPU: 1}})
    assert node_runs(t) == [NodeRun("Add", "add", CUDA, 2, 1), NodeRun("Unique", "unique", CPU, 2, 1),
                            NodeRun("com.microsoft.Gelu", "gelu", CUDA, 0, 3)]
    assert NodeRun("Unique", "unique", CPU, 2, 1).line() == "Unique 'unique' on CPUExecutionProvider (2 run(s), session 1)"
    assert NodeRun("Unique", "uni'que", CPU, 1).line() == "Unique \"uni'que\" on CPUExecutionProvider (1 run(s), session 0)"


def test_unseen_of_gives_each_reason_once_in_order():
    t = tr("t", use(1, unseen="b why"), use(2, unseen="a why"), use(3, unseen="b why"), use(4, unseen=""), use(5))
    assert unseen_of(t) == ["a why", "b why"]
    assert unseen_of(tr("t")) == []


def test_a_test_with_subtests_owns_only_the_runs_outside_them():
    parent = tr("T::t", use(1, ("Add", "add", CUDA, 5), ("Unique", "unique", CPU, 3), ("Relu", "relu", CUDA, 0)),
                  use(2, ("Add", "add", CUDA, 1)))
    sub = tr("T::t (i=0)", use(1, ("Add", "add", CUDA, 2), ("Unique", "unique", CPU, 3), ("Relu", "relu", CUDA, 0)),
               parent=F + "T::t")
    other = tr("T::t (i=1)", use(2, ("Add", "add", CUDA, 1)), parent=F + "T::t")
    own = units([parent, sub, other])
    assert own[F + "T::t"] == [NodeRun("Add", "add", CUDA, 3, 1), NodeRun("Relu", "relu", CUDA, 0, 1)]
    assert own[F + "T::t (i=0)"] == node_runs(sub) and own[F + "T::t (i=1)"] == node_runs(other)


def test_the_same_node_in_another_session_or_on_another_ep_is_not_taken_off():
    parent = tr("T::t", use(1, ("Add", "add", CUDA, 2), ("Add", "add", CPU, 2)), use(2, ("Add", "add", CUDA, 2)))
    sub = tr("T::t [s]", use(1, ("Add", "add", CUDA, 2)), parent=F + "T::t")
    assert units([parent, sub])[F + "T::t"] == [NodeRun("Add", "add", CPU, 2, 1), NodeRun("Add", "add", CUDA, 2, 2)]


def test_a_test_failed_by_its_subtests_is_judged_on_its_passing_parts():
    parent = tr("T::t", use(1, ("Unique", "unique", CPU, 3), ("Add", "add", CUDA, 3)), outcome="failed",
                  by_subtests=True)
    bad = tr("T::t [bad]", use(1, ("Unique", "unique", CPU, 1), ("Add", "add", CUDA, 1)), outcome="failed",
               parent=F + "T::t")
    good = tr("T::t [good]", use(1, ("Unique", "unique", CPU, 2), ("Add", "add", CUDA, 2)), parent=F + "T::t")
    plain = tr("T::u", use(1, ("Unique", "unique", CPU, 3)), outcome="failed")
    judged = judged_nodes([parent, bad, good, plain])
    assert judged[F + "T::t"] == [NodeRun("Unique", "unique", CPU, 2, 1), NodeRun("Add", "add", CUDA, 2, 1)]
    assert judged[F + "T::u"] == node_runs(plain)  # failed on its own: not one of those
    assert judged[F + "T::t [good]"] == node_runs(good)
    errored = tr("T::t [err]", use(1, ("Unique", "unique", CPU, 3), ("Add", "add", CUDA, 3)), outcome="error",
                   parent=F + "T::t")
    assert judged_nodes([parent, errored])[F + "T::t"] == []  # every run was the erroring subtest's


def test_two_failing_subtests_runs_of_one_node_are_both_taken_off():
    parent = tr("T::t", use(1, ("Unique", "unique", CPU, 5)), outcome="failed", by_subtests=True)
    subs = [tr(f"T::t [{i}]", use(1, ("Unique", "unique", CPU, 2)), outcome="failed", parent=F + "T::t")
            for i in range(2)]
    assert judged_nodes([parent, *subs])[F + "T::t"] == [NodeRun("Unique", "unique", CPU, 1, 1)]
    assert units([parent, *subs])[F + "T::t"] == [NodeRun("Unique", "unique", CPU, 1, 1)]


def test_a_test_that_failed_itself_keeps_every_run_its_failing_subtests_made():
    parent = tr("T::t", use(1, ("Unique", "unique", CPU, 3)), outcome="failed")
    sub = tr("T::t [bad]", use(1, ("Unique", "unique", CPU, 1)), outcome="failed", parent=F + "T::t")
    assert judged_nodes([parent, sub])[F + "T::t"] == [NodeRun("Unique", "unique", CPU, 3, 1)]


def test_a_test_failed_by_subtests_that_are_not_listed_keeps_its_runs():
    parent = tr("T::t", use(1, ("Unique", "unique", CPU, 3)), outcome="failed", by_subtests=True)
    assert judged_nodes([parent])[F + "T::t"] == [NodeRun("Unique", "unique", CPU, 3, 1)]


# ---------------------------------------------------------------- cuda_ops

def test_a_cuda_ops_rule_fails_a_passing_test_that_ran_a_listed_op_off_cuda():
    tests = [tr("test_unique", use(1, ADD, UNIQUE_CPU), use(2, ("Unique", "u2", CPU, 1), ("Unique", "u3", "X", 1))),
             tr("test_relu", use(1, ADD, ("Relu", "relu", CUDA, 2)))]
    found = judge(expect([cuda_ops("test_", "Unique", "Add")], shape_ops=()), tests)
    assert found.reasons == [
        "cuda_ops rule 'test_' (Unique, Add) broken by 2 test(s): "
        f"{F}test_relu: Unique did not run on the CUDA EP (no build the CUDA EP served holds it; ran: Add, Relu); "
        f"{F}test_unique: Unique ran on {CPU}, X (node 'unique', 4 run(s))"]
    assert found.warnings == [] and found.stale == [] and found.uncovered == {}  # a rule's op is its to judge


def test_a_cuda_ops_rule_passes_where_every_listed_op_ran_on_cuda_only():
    tests = [tr("test_unique", use(1, ADD, UNIQUE_CUDA, ("Unique", "again", CPU, 0)))]
    found = judge(expect([cuda_ops("test_unique", "Unique")]), tests)
    assert found.reasons == [] and found.stale == [] and found.warnings == []


def test_why_a_listed_op_made_no_cuda_run():
    never_run = tr("test_built", use(1, ("Add", "add", CUDA, 0), ("Unique", "unique", CUDA, 0)))
    unseen = tr("test_unseen", use(1, unseen="this ORT cannot report node placement"), use(2, unseen="another"))
    no_session = tr("test_none")
    cpu_served = tr("test_cpu", {"session": 1, "asked": [CUDA], "served": [CPU], "runs": {CPU: 1}})
    found = judge(expect([cuda_ops("test_", "Unique")]), [never_run, unseen, no_session, cpu_served])
    (reason,) = found.reasons
    assert reason == (
        "cuda_ops rule 'test_' (Unique) broken by 4 test(s): "
        f"{F}test_built: Unique did not run on the CUDA EP (the build holding it was never run by the test); "
        f"{F}test_cpu: Unique did not run on the CUDA EP (the CUDA EP served no build the test ran); "
        f"{F}test_cpu: session 1 made 1 run(s) the CUDA EP did not serve (CPUExecutionProvider): every op of it ran "
        "there; "
        f"{F}test_none: Unique did not run on the CUDA EP (the test asked for no CUDA session); "
        f"{F}test_unseen: Unique did not run on the CUDA EP (its placement is unseen: another)")


def test_a_cuda_ops_rule_judges_passes_only_and_is_stale_where_none_matched():
    tests = [tr("test_a", use(1, UNIQUE_CPU), outcome="failed"), tr("test_b", outcome="skipped"),
             tr("test_x", use(1, UNIQUE_CPU), outcome="xpassed")]
    rules = [cuda_ops("test_a|test_b", "Unique"), cuda_ops("test_gone", "Unique"), cuda_ops("test_x", "Unique")]
    found = judge(expect(rules), tests)
    assert found.stale == [("cuda_ops", rules[0], "it matched no test that passed",
                            [f"{F}test_a (failed)", f"{F}test_b (skipped)"]),
                           ("cuda_ops", rules[1], GONE, [])]
    assert found.reasons == [f"cuda_ops rule 'test_x' (Unique) broken by 1 test(s): {F}test_x: Unique ran on {CPU} "
                             "(node 'unique', 2 run(s))"]


def test_a_test_failed_by_a_subtest_is_judged_on_its_passing_parts_by_a_cuda_ops_rule():
    parent = tr("T::t", use(1, ("Unique", "unique", CPU, 1), ("Unique", "unique", CUDA, 2)), outcome="failed",
                  by_subtests=True)
    bad = tr("T::t [bad]", use(1, ("Unique", "unique", CPU, 1)), outcome="failed", parent=F + "T::t")
    good = tr("T::t [good]", use(1, ("Unique", "unique", CUDA, 2)), parent=F + "T::t")
    found = judge(expect([cuda_ops("T::t$", "Unique")]), [parent, bad, good])
    assert found.reasons == [] and found.stale == []
    worse = tr("T::t [good]", use(1, ("Unique", "unique", CPU, 2)), parent=F + "T::t")
    parent2 = tr("T::t", use(1, ("Unique", "unique", CPU, 3)), outcome="failed", by_subtests=True)
    found = judge(expect([cuda_ops("T::t$", "Unique")]), [parent2, bad, worse])
    assert found.reasons == [f"cuda_ops rule 'T::t$' (Unique) broken by 1 test(s): {F}T::t: Unique ran on {CPU} "
                             "(node 'unique', 2 run(s))"]


# ---------------------------------------------------------------- CPU nodes no rule covers

def test_a_cpu_node_no_rule_covers_is_a_warning_and_a_reason_under_cpu_nodes_fail():
    tests = [tr("test_unique", use(1, ADD, UNIQUE_CPU, ("Shape", "shape", CPU, 2), ("Det", "det", CPU, 0))),
             tr("test_failed", use(1, UNIQUE_CPU), outcome="failed"),
             tr("test_x", use(2, ("Det", "det", CPU, 1)), outcome="xpassed")]
    said = ("2 node(s) ran on the CPU inside sessions the CUDA EP served, in 2 test(s) that passed (no cuda_ops or "
            "allowed_cpu_ops rule covers them, and they are not shape ops): "
            f"{F}test_unique: Unique 'unique' on {CPU} (2 run(s), session 1); "
            f"{F}test_x: Det 'det' on {CPU} (1 run(s), session 2)")
    warned = judge(expect(), tests)
    assert warned.warnings == [said] and warned.reasons == []
    assert warned.uncovered == {F + "test_unique": [NodeRun("Unique", "unique", CPU, 2, 1)],
                                F + "test_x": [NodeRun("Det", "det", CPU, 1, 2)]}
    failed = judge(expect(cpu_nodes="fail"), tests)
    assert failed.reasons == [said] and failed.warnings == []
    assert judge(expect(shape_ops=("Shape", "Unique", "Det")), tests).warnings == []


def test_a_subtests_cpu_node_is_named_under_the_subtest_alone():
    parent = tr("T::t", use(1, ("Unique", "unique", CPU, 3)))
    sub = tr("T::t [s]", use(1, ("Unique", "unique", CPU, 3)), parent=F + "T::t")
    found = judge(expect(), [parent, sub])
    assert list(found.uncovered) == [F + "T::t [s]"]


def test_rules_cover_cpu_nodes_and_an_allowed_rule_that_covers_none_is_stale():
    tests = [tr("test_unique", use(1, ADD, UNIQUE_CPU)), tr("test_det", use(1, ("Det", "det", CPU, 1))),
             tr("test_relu", use(1, ("Relu", "relu", CUDA, 1)))]
    rules = [allowed("test_unique", "Unique"), allowed("test_relu", "Relu"), allowed("test_gone", "Unique"),
             allowed("test_unique", "Det")]
    found = judge(expect([cuda_ops("test_det", "Det")], rules, cpu_nodes="fail"), tests)
    assert found.uncovered == {}  # Unique allowed; Det named by a cuda_ops rule, which fails it instead
    assert found.reasons == [f"cuda_ops rule 'test_det' (Det) broken by 1 test(s): {F}test_det: Det ran on {CPU} "
                             "(node 'det', 1 run(s))"]
    assert found.stale == [("allowed_cpu_ops", rules[1], "no test it matches ran a listed op on the CPU",
                            [F + "test_relu"]),
                           ("allowed_cpu_ops", rules[2], GONE, []),
                           ("allowed_cpu_ops", rules[3], "no test it matches ran a listed op on the CPU",
                            [F + "test_unique"])]


def test_a_rule_covers_a_subtests_cpu_node_only_where_it_says_subtests():
    parent = tr("T::t", use(1, ("Unique", "unique", CPU, 1)))
    sub = tr("T::t [s]", use(1, ("Unique", "unique", CPU, 1)), parent=F + "T::t")
    bare = judge(expect(allowed=[allowed("T::t", "Unique")]), [parent, sub])
    assert list(bare.uncovered) == [F + "T::t [s]"] and [s[0] for s in bare.stale] == ["allowed_cpu_ops"]
    rule = CpuOpsRule(test="T::t", ops=("Unique",), reason="r", subtests=True)
    assert judge(expect(allowed=[rule]), [parent, sub]).uncovered == {}


def test_more_cpu_nodes_than_a_reason_lists_are_counted():
    tests = [tr(f"test_{i}", use(1, ("Unique", "unique", CPU, 1))) for i in range(10)]
    (said,) = judge(expect(), tests).warnings
    assert said.startswith("10 node(s) ran on the CPU inside sessions the CUDA EP served, in 10 test(s) that passed")
    assert said.endswith("; and 2 more")


# ---------------------------------------------------------------- unseen placements, and runs another EP served

def test_a_passing_tests_unseen_placement_is_a_warning_and_under_fail_a_reason_each_reason_named():
    tests = [tr("t", use(1, unseen="b why"), use(2, unseen="a why")),
             tr("t [s]", use(1, unseen="b why"), parent=F + "t"),  # its test names it: not listed again
             tr("broken", use(3, unseen="c why"), outcome="failed"),  # a failure is judged by its failure
             tr("seen", use(4, ADD))]
    said = ("1 test(s) that passed ran a build the CUDA EP served whose node placement is unseen, so no node of it was "
            f"judged: {F}t (a why; b why)")
    warned = judge(expect(), tests)
    assert warned.warnings == [said] and warned.reasons == []
    failed = judge(expect(cpu_nodes="fail"), tests)
    assert failed.reasons == [said] and failed.warnings == []
    assert judge(expect(cpu_nodes="fail"), [tests[3]]).reasons == []


def test_a_cuda_ops_rule_names_every_ep_that_served_a_sessions_runs_instead_of_cuda():
    other = {"session": 2, "asked": [CUDA, CPU], "served": [CPU], "runs": {CPU: 2, "AzureExecutionProvider": 1}}
    found = judge(expect(cuda_ops=[cuda_ops("t$", "Add")]), [tr("t", use(1, ADD), other)])
    assert found.reasons == [f"cuda_ops rule 't$' (Add) broken by 1 test(s): {F}t: session 2 made 3 run(s) the CUDA "
                             "EP did not serve (AzureExecutionProvider, CPUExecutionProvider): every op of it ran there"]

"""Node truth: which EP ran each op of a CUDA test, and an op that fell to the CPU named, judged by real nox runs.

The CPU wheel has no CUDA EP, so the `nodes` fixture suite meets the stand-in (tests/fixtures/suites/cudastandin.py):
ORT's CPU wheel partitions each graph for real, records the placement because the probe asked it to, and the
stand-in reports a CUDA-served session's nodes on the CUDA EP, except the ops it has no kernel for (Unique) or
places on purpose (Shape), which stay on the CPU EP as ORT leaves them. Every test passes on values alone, as ORT's
own op tests do, so only the node census can say where Unique ran.
"""
from __future__ import annotations

from helpers import SUITES

ROOT = SUITES / "nodes"
T = "test_nodes.py::"
CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
SUB = f"{T}TestOps::test_each_op (op='Unique')"
TURNED_OFF = "the test set session.record_ep_graph_assignment_info to 0 itself"


def _run(harness, expect="", suite_extra="", env=None, modes=("normal",)):
    return harness.run(["test_nodes.py"], root=ROOT, pythonpath=[".", ".."], expect=expect, suite_extra=suite_extra,
                       env=env, modes=modes)


def _node(op, name, ep, runs, session):
    return {"op": op, "name": name, "ep": ep, "runs": runs, "session": session}


def test_each_test_keeps_every_node_its_op_name_ep_and_runs_and_a_cpu_node_is_a_warning_by_default(harness):
    run = _run(harness)
    assert run.proc.returncode == 0, run.output[-3000:]
    r = run.result("normal")
    assert r["verdict"] == "pass" and r["ep"]["nodes_taken"] is True
    tests = r["ep"]["tests"]
    assert tests[f"{T}test_unique"]["nodes"] == [_node("Add", "add", CUDA, 2, 1), _node("Unique", "unique", CPU, 2, 1)]
    assert tests[f"{T}test_relu"]["nodes"] == [_node("Add", "add", CUDA, 1, 2), _node("Relu", "relu", CUDA, 1, 2)]
    assert [n["op"] for n in tests[f"{T}test_gelu"]["nodes"]] == ["Add", "com.microsoft.Gelu"]  # a contrib op: domain
    assert tests[f"{T}test_shape"]["nodes"][1] == _node("Shape", "shape", CPU, 1, 4)
    assert tests[f"{T}test_unique_built_never_run"]["nodes"][1]["runs"] == 0  # built, placed, never run
    off = tests[f"{T}test_unique_recording_turned_off"]
    assert "nodes" not in off and off["nodes_unseen"] == [TURNED_OFF]  # the test's own choice is kept, and said
    assert f"{T}test_unique_on_cpu_only" not in tests  # it never asked for the CUDA EP
    assert tests[SUB]["nodes"][1]["op"] == "Unique" and tests[f"{T}TestOps::test_each_op"]["nodes"]  # subtests too
    warning = next(w for w in r["warnings"] if "ran on the CPU inside" in w)
    # Unique that ran, once each where it ran: the test, the subtest (not its test again); never Shape (a shape op),
    # never the session that was built and not run, never the test whose placement is unseen
    assert warning == (
        "2 node(s) ran on the CPU inside sessions the CUDA EP served, in 2 test(s) that passed (no cuda_ops or "
        "allowed_cpu_ops rule covers them, and they are not shape ops): "
        f"{SUB}: Unique 'unique' on {CPU} (1 run(s), session 8); "
        f"{T}test_unique: Unique 'unique' on {CPU} (2 run(s), session 1)")
    assert "ran on the CPU inside sessions the CUDA EP served" in run.output


def test_cuda_ops_rules_fail_an_op_that_ran_on_the_cpu_did_not_run_or_was_unseen_and_pass_the_rest(harness):
    expect = f"""[suite.s.expect.normal]
allowed_cpu_ops = [{{ test = "{T}test_unique$|TestOps", ops = ["Unique"], reason = "no CUDA kernel" }}]
cuda_ops = [
  {{ test = "{T}test_relu$", ops = ["Add", "Relu"], reason = "the GPU's own" }},
  {{ test = "{T}test_gelu$", ops = ["com.microsoft.Gelu"] }},
  {{ test = "{T}test_unique$", ops = ["Add", "Unique"] }},
  {{ test = "{T}test_relu$", ops = ["Softmax"] }},
  {{ test = "{T}test_unique_built_never_run|{T}test_unique_recording", ops = ["Add"] }},
  {{ test = "{T}test_renamed_away", ops = ["Add"] }},
]
"""
    r = _run(harness, expect=expect).result("normal")
    assert r["verdict"] == "fail"
    assert r["reasons"] == [
        f"cuda_ops rule '{T}test_unique$' (Add, Unique) broken by 1 test(s): {T}test_unique: Unique ran on {CPU} "
        "(node 'unique', 2 run(s))",
        f"cuda_ops rule '{T}test_relu$' (Softmax) broken by 1 test(s): {T}test_relu: Softmax did not run on the CUDA "
        "EP (no build the CUDA EP served holds it; ran: Add, Relu)",
        f"cuda_ops rule '{T}test_unique_built_never_run|{T}test_unique_recording' (Add) broken by 2 test(s): "
        f"{T}test_unique_built_never_run: Add did not run on the CUDA EP (the build holding it was never run by the "
        f"test); {T}test_unique_recording_turned_off: Add did not run on the CUDA EP (its placement is unseen: "
        f"{TURNED_OFF})"]
    # the allowed Unique (and the one a cuda_ops rule names) is no warning; a rule for TestOps covers its subtests
    # only with subtests = true, so the subtest's Unique is still named; the rules that judged nothing are stale
    cpu = [w for w in r["warnings"] if "ran on the CPU inside" in w]
    assert len(cpu) == 1 and cpu[0].endswith(f"): {SUB}: Unique 'unique' on {CPU} (1 run(s), session 8)"), cpu
    stale = {s["pattern"]: s["what"] for s in r["stale_rules"] if s["key"] == "cuda_ops"}
    assert stale == {f"{T}test_renamed_away": "it matched no test that ran (gone, renamed or deselected)"}


def test_cpu_nodes_fail_makes_an_uncovered_cpu_node_fail_the_mode_and_a_rule_that_covers_nothing_is_stale(harness):
    expect = f"""[suite.s.expect.normal]
allowed_cpu_ops = [
  {{ test = "TestOps", ops = ["Unique"], reason = "no CUDA kernel", subtests = true }},
  {{ test = "{T}test_relu$", ops = ["Relu"], reason = "not what happens" }},
]
"""
    run = _run(harness, expect=expect, suite_extra='cpu_nodes = "fail"\n')
    r = run.result("normal")
    assert r["verdict"] == "fail" and run.proc.returncode != 0
    assert r["reasons"] == [  # strict: a node on the CPU fails, and so does a placement nothing could judge
        "1 node(s) ran on the CPU inside sessions the CUDA EP served, in 1 test(s) that passed (no cuda_ops or "
        f"allowed_cpu_ops rule covers them, and they are not shape ops): {T}test_unique: Unique 'unique' on {CPU} "
        "(2 run(s), session 1)",
        f"1 test(s) that passed ran a build the CUDA EP served whose node placement is unseen, so no node of it was "
        f"judged: {T}test_unique_recording_turned_off ({TURNED_OFF})"]
    stale = {s["pattern"]: s["what"] for s in r["stale_rules"] if s["key"] == "allowed_cpu_ops"}
    assert stale == {f"{T}test_relu$": "no test it matches ran a listed op on the CPU"}


def test_a_suite_may_name_its_own_shape_ops(harness):
    # Unique named a shape op (a suite whose graphs use it on shapes): neither warned about nor failed; the result
    # keeps the list it was judged with, for reports and baselines
    r = _run(harness, suite_extra='shape_ops = ["Shape", "Unique"]\n').result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    assert not any("ran on the CPU inside" in w for w in r["warnings"]) and r["ep"]["shape_ops"] == ["Shape", "Unique"]
    unseen = [w for w in r["warnings"] if "placement is unseen" in w]  # said, as a warning outside strict mode
    assert unseen == [f"1 test(s) that passed ran a build the CUDA EP served whose node placement is unseen, so no "
                      f"node of it was judged: {T}test_unique_recording_turned_off ({TURNED_OFF})"]

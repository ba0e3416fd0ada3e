"""`nox -s calibrate` on the `nodes` fixture suite: a cuda_ops rule per test function, from the ops its passing
cases ran on the (stand-in) CUDA EP, shape ops left out and CPU nodes said, never written; and a later release
that moves an op to the CPU fails the mode by the rule, naming the op and the EP that ran it.

Real nox, real venvs, the CPU wheel: the stand-in CUDA EP (tests/fixtures/suites/cudastandin.py) reports each node
of a CUDA-served session on the CUDA EP except the op types in CUDA_STANDIN_CPU_OPS, which stay on the CPU EP."""
from __future__ import annotations

from helpers import PY, SUITES
from test_calibrate import Calibration

from ort_gpu_matrix.judge.tiers import function_regex

T = "test_nodes.py::"
CELL = f"c-{PY}-x"


def test_calibrate_writes_cuda_ops_per_function_and_a_release_that_moves_relu_to_the_cpu_fails(tmp_path, venvs,
                                                                                               monkeypatch):
    c = Calibration(tmp_path, venvs, pairings='{{ python = "{py}", ort = "cpu", torch = "none", libs = "x", '
                                              'modes = ["normal"] }}')
    c.matrix.write_text(c.matrix.read_text().replace(str(SUITES / "calibrate"), str(SUITES / "nodes"))
                        .replace('files = ["test_calibrate.py"]', 'files = ["test_nodes.py"]'))
    cal = c.calibrate(CELL)
    assert cal.returncode == 0, cal.stdout[-4000:]
    assert f"wrote {c.expect}: normal: min_passed 8, 6 cuda_runs, 5 cuda_ops" in cal.stdout, cal.stdout[-4000:]
    rules = {r["test"]: r["ops"] for r in c.data()["normal"]["cuda_ops"]}
    assert rules == {function_regex(f"{T}TestOps::test_each_op"): ["Add", "Relu"],  # Unique ran on the CPU in one
                     function_regex(f"{T}test_gelu"): ["Add", "com.microsoft.Gelu"],
                     function_regex(f"{T}test_relu"): ["Add", "Relu"],
                     function_regex(f"{T}test_shape"): ["Add"],  # Shape: on the CPU, and a shape op besides
                     function_regex(f"{T}test_unique"): ["Add"]}  # Unique ran on the CPU
    assert "allowed_cpu_ops" not in c.data()["normal"]
    said = cal.stdout
    assert (f"not accepted: normal {T}test_unique: Unique ran on the CPU in {CELL} (CPUExecutionProvider, node "
            "'unique'): add an allowed_cpu_ops rule if that is intended (a CPU node is never written down)") in said
    assert f"not accepted: normal {T}TestOps::test_each_op (op='Unique'): Unique ran on the CPU in {CELL}" in said
    assert "Shape ran on" not in said  # a shape op is never said
    assert (f"not written: cuda_ops rule for {T}test_unique_recording_turned_off: 1 of its passed case(s) have no node "
            f"census in some run (e.g. {T}test_unique_recording_turned_off: its placement is unseen: ") in said
    assert (f"not written: cuda_ops rule for {T}test_unique_built_never_run: no op but a shape op ran on the CUDA EP "
            f"alone in every one of its passed cases in every run (e.g. {T}test_unique_built_never_run ran none there)"
            ) in said
    assert "test_unique_on_cpu_only" not in said  # it never asked for the CUDA EP
    assert "still failing after calibration" not in said  # re-judged under the rules written: nothing from them
    again = c.nox("-s", CELL)
    assert again.returncode == 0 and c.result(f"{CELL}-normal")["verdict"] == "pass", again.stdout[-3000:]
    # the release after: its CUDA EP has no Relu kernel, so ORT places Relu on the CPU; every test still passes
    monkeypatch.setenv("CUDA_STANDIN_CPU_OPS", "Unique,Det,Shape,Relu")
    later = c.nox("-s", CELL)
    r = c.result(f"{CELL}-normal")
    assert later.returncode != 0 and r["verdict"] == "fail" and r["counts"]["failed"] == 0, later.stdout[-3000:]
    relu = [x for x in r["reasons"] if x.startswith(f"cuda_ops rule {function_regex(T + 'test_relu')!r}")]
    assert relu == [f"cuda_ops rule {function_regex(T + 'test_relu')!r} (Add, Relu) broken by 1 test(s): "
                    f"{T}test_relu: Relu ran on CPUExecutionProvider (node 'relu', 1 run(s))"], r["reasons"]
    each = function_regex(T + "TestOps::test_each_op")
    assert r["reasons"] == [f"cuda_ops rule {each!r} (Add, Relu) broken by 1 test(s): {T}TestOps::test_each_op: Relu "
                            "ran on CPUExecutionProvider (node 'relu', 1 run(s))", *relu]  # by its Relu subtest's node

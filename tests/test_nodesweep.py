"""A sweep names an op that ran on the CUDA EP in the baseline and on the CPU now, confirmed by reruns like any change.

Real nox sweeps of the `nodes` fixture suite with the CPU wheel: the stand-in CUDA EP (fixtures/suites/cudastandin.py)
reports a CUDA-served session's nodes on the CUDA EP, except the ops CUDA_STANDIN_CPU_OPS lists, which stay on the
CPU EP. The "new release" is the same suite with Relu in that list, given in the environment of the sweep: every
test still passes on values, the CUDA EP still serves every session, and only the node census sees Relu move.
"""
from __future__ import annotations

import json

from helpers import CELL, SUITES

ROOT = SUITES / "nodes"
T = "test_nodes.py::"
RELU = f"{T}test_relu"
MOVED = "Unique,Det,Shape,Relu"


def _sweep(harness, tmp_path, *args: str, env: dict | None = None):
    run = harness.nox("-s", "sweep", "--", *args, env={"MATRIX_BASELINES": str(tmp_path / "baselines"), **(env or {})})
    return run, json.loads((harness.results / "sweep.json").read_text())


def test_an_op_that_fell_to_the_cpu_is_an_ep_regression_confirmed_and_one_seen_once_is_cleared(harness, tmp_path):
    harness.write(["test_nodes.py"], root=ROOT, pythonpath=[".", ".."])
    first, _ = _sweep(harness, tmp_path, "--save-baseline", "b1")
    assert first.proc.returncode == 0, first.output[-3000:]
    saved = json.loads((tmp_path / "baselines" / "b1.json").read_text())
    assert saved["baseline_version"] == 3
    record = saved["cells"][CELL]["normal"]
    assert record["node_census"] is True and record["ep_census"] is True
    assert record["tests"][RELU] == "passed ep=CUDA ops.CUDA=Add,Relu"
    assert record["tests"][f"{T}test_unique"] == "passed ep=CUDA ops.CUDA=Add ops.CPU=Unique"

    later, data = _sweep(harness, tmp_path, "--baseline", "b1", "--gate", "regressions", "--confirm", "2",
                         env={"CUDA_STANDIN_CPU_OPS": MOVED})
    assert later.proc.returncode != 0 and data["ok"] is False, later.output[-3000:]
    ep = [r for r in data["regressions"] if r["kind"] == "ep"]
    assert {"kind": "ep", "cell": CELL, "mode": "normal", "test": RELU, "before": "CUDA", "after": "CPU",
            "op": "Relu"} in ep, data["regressions"]
    assert {r["op"] for r in ep} == {"Relu"} and all((r["before"], r["after"]) == ("CUDA", "CPU") for r in ep)
    assert {r["kind"] for r in data["regressions"]} == {"ep"}  # each test kept its outcome: only the op moved
    assert f"ep: {CELL} normal {RELU}: Relu: CUDA -> CPU" in later.output
    assert "[ep Relu CUDA → CPU: " in later.output  # grouped by the op that moved
    result = json.loads((harness.results / f"{CELL}-normal.json").read_text())
    runs = {t["test"]: t for t in result["confirmation"]["tests"]}
    assert runs[RELU]["checks"] == ["ep Relu"] and runs[RELU]["unconfirmed"] == [], runs[RELU]
    assert runs[RELU]["runs"] == ["passed ep=CUDA ops.CUDA=Add ops.CPU=Relu"] * 3  # the first run and both reruns
    assert runs[RELU]["against"] == "passed ep=CUDA ops.CUDA=Add,Relu"
    report = harness.nox("-s", "report", "--", str(harness.results), "--baseline", "b1",
                         env={"MATRIX_BASELINES": str(tmp_path / "baselines")})
    assert f"ep: {CELL} normal {RELU}: Relu: CUDA -> CPU" in report.output, report.output[-3000:]  # from the results

    # Relu on the CPU in the first test process only: a rerun shows it back on the CUDA EP, so nothing is confirmed
    once, data = _sweep(harness, tmp_path, "--baseline", "b1", "--gate", "regressions", "--confirm", "2",
                        env={"CUDA_STANDIN_CPU_OPS": MOVED, "CUDA_STANDIN_CPU_OPS_ONCE": str(tmp_path / "once")})
    assert once.proc.returncode == 0 and data["ok"] is True, once.output[-3000:]
    assert data["regressions"] == []
    apart = {u["test"]: u for u in data["unconfirmed"]}
    assert apart[RELU]["checks"] == ["ep Relu"]
    # the first rerun cleared it, and a test with nothing left to check is not rerun again
    assert apart[RELU]["runs"] == ["passed ep=CUDA ops.CUDA=Add ops.CPU=Relu", "passed ep=CUDA ops.CUDA=Add,Relu"]
    assert f"ep Relu: {CELL} normal {RELU}: runs: " in once.output

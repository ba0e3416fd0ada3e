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


def _run(harness, expect="", suite_extra="", env=None, modes=("normal",), files=("test_nodes.py",)):
    return harness.run(list(files), root=ROOT, pythonpath=[".", ".."], expect=expect, suite_extra=suite_extra,
                       env=env, modes=modes)


def test_each_test_records_every_node_with_its_op_name_ep_and_runs(harness):
    run = _run(harness)
    r = run.result("normal")
    tests = r["ep"]["tests"]
    assert r["ep"]["nodes_taken"] is True
    assert tests[f"{T}test_unique"]["nodes"] == [
        {"op": "Add", "name": "add", "ep": CUDA, "runs": 2, "session": 1},
        {"op": "Unique", "name": "unique", "ep": CPU, "runs": 2, "session": 1}], tests[f"{T}test_unique"]
    print(run.output[-4000:])
    print(r["warnings"])
    raise AssertionError(r["warnings"])

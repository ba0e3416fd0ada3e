"""An ORT before 1.24 cannot say where it placed a node: the census says so, and a cuda_ops rule fails rather than
pass unchecked. Real nox, a real venv of onnxruntime 1.23.2 (the CPU wheel, with the stand-in CUDA EP of
tests/fixtures/suites/cudastandin.py), built once per test run in a venvs dir of its own (its fingerprint is not
the shared venvs')."""
from __future__ import annotations

import pytest
from helpers import SUITES, once_per_run

from ort_matrix_probe import placement

OLD_ORT = "onnxruntime==1.23.2"  # the last release without InferenceSession.get_provider_graph_assignment_info
T = "test_any_ort.py::test_unique_any_ort"
CUDA = "CUDAExecutionProvider"


@pytest.fixture(scope="session")
def old_venvs(tmp_path_factory):
    """The venvs dir every test of this file shares: nox builds the 1.23.2 venv in it on the first run, and the
    engine's own lock lets a second run reuse it."""
    return once_per_run(tmp_path_factory, "venvs-ort-1.23", lambda d: None)


def test_an_ort_without_the_placement_api_leaves_the_nodes_unseen_and_a_cuda_ops_rule_fails(harness, old_venvs):
    harness.venvs = old_venvs
    expect = """[suite.s.expect.normal]
cuda_ops = [{ test = "test_unique_any_ort", ops = ["Unique"], reason = "the kernel under test" }]
"""
    run = harness.run(["test_any_ort.py"], root=SUITES / "nodes", pythonpath=[".", ".."], expect=expect,
                      ort=OLD_ORT)
    r = run.result("normal")
    assert r["provenance"]["ort"]["version"] == "1.23.2", run.output[-3000:]
    assert r["outcomes"][T] == "passed", run.output[-3000:]
    test = r["ep"]["tests"][T]
    assert test["nodes_unseen"] == [placement.NO_API] and not test.get("nodes"), test
    assert test["runs"] == {CUDA: 1}  # the EP census still sees the CUDA EP serve it
    assert r["verdict"] == "fail"
    assert r["reasons"] == [f"cuda_ops rule 'test_unique_any_ort' (Unique) broken by 1 test(s): {T}: Unique did not "
                            f"run on the CUDA EP (its placement is unseen: {placement.NO_API})"], r["reasons"]

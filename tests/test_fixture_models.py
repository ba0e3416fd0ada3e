"""The fixture suites carry their ORT models as bytes (importing onnx costs seconds per test process): the bytes
must be what onnx builds for the same graph, or the suites would test a model nobody wrote."""
from __future__ import annotations

import importlib.util

from helpers import SUITES
from onnx import TensorProto, helper


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _identity(n: int, name: str) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], name, [x], [y])
    return helper.make_model(graph).SerializeToString()


def test_tinyort_carries_the_identity_model_onnx_builds():
    assert _load(SUITES / "tinyort.py", "tinyort_bytes").IDENTITY_MODEL == _identity(2, "identity")


def test_the_libsets_suite_carries_the_identity_model_onnx_builds():
    mod = _load(SUITES / "libsets" / "test_imports_ort.py", "imports_ort_bytes")
    assert mod.MODEL == _identity(1, "g")


def test_the_carried_model_runs_in_ort():
    out = _load(SUITES / "tinyort.py", "tinyort_run").run_identity()
    assert out.tolist() == [1.0, 2.0]

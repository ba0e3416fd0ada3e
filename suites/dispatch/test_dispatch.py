"""The built-in dispatch suite: which attention kernel does ORT really run?

Each GPU test builds one minimal attention graph, checks its values against a
numpy reference (which holds on every tier, MATH included) and then reads the
tier ORT printed as `SdpaKernel=<TIER>` on native fd 1. A tier other than
the canary's skips, unless ORT_TEST_REQUIRE_CUDNN_SDPA=1, in which case
unittest's assertEqual fails with the canary's verbatim message.

The canary's tier is cuDNN flash attention, as in ORT's own tests, unless
DISPATCH_CANARY_TIER names another: ORT's CUDA 12 build 1.26.0 has no cuDNN
path, and its contrib MultiHeadAttention runs FLASH_ATTENTION, so the CUDA 12
cells gate on that (matrix.toml, [suite.dispatch_cu12]). The `_cudnn` test
names stay: they name the path these graphs take on the CUDA 13 builds.

Measured on an H200 with onnxruntime-gpu 1.31.1: an opset-24 Attention decode
step with the full KV cache plus nonpad_kv_seqlen, and a contrib
MultiHeadAttention decode step, both dispatch CUDNN_FLASH_ATTENTION; with
sdpa_kernel=16 they dispatch MATH.
"""
from __future__ import annotations

import ctypes
import os
import re
import sys
import tempfile
import unittest

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

try:  # imported first, as ORT's transformers tests do: its bundled cuDNN is what can shadow ORT's
    import torch
except ImportError:
    torch = None

CUDNN = "CUDNN_FLASH_ATTENTION"
CANARY = os.environ.get("DISPATCH_CANARY_TIER") or CUDNN  # the tier the gate requires
CUDA = "CUDAExecutionProvider"
_ASSERT = unittest.TestCase()  # assertEqual's message is the canary's message
_TIER = re.compile(rb"SdpaKernel=([A-Z_]+)")
_ANSI = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")
KV_LEN = 64

needs_cuda = pytest.mark.skipif(CUDA not in ort.get_available_providers(),
                                reason=f"{CUDA} is not available in this onnxruntime build")

# (q_heads, kv_heads, head_size): MHA and GQA layouts measured on the H200
SHAPES = {"mha-8x8x64": (8, 8, 64), "gqa-32x8x128": (32, 8, 128), "mha-16x16x64": (16, 16, 64)}
ELEM = {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}


def _cast_graph(nodes, inputs, outputs, dtype):
    """Inputs and outputs stay fp32 so numpy can feed them; compute runs in `dtype`."""
    if dtype == "fp32":
        return nodes, inputs, outputs
    pre = [helper.make_node("Cast", [i.name + "_f32"], [i.name], to=ELEM[dtype])
           for i in inputs if i.type.tensor_type.elem_type == TensorProto.FLOAT]
    post = [helper.make_node("Cast", [o.name], [o.name + "_f32"], to=TensorProto.FLOAT) for o in outputs]
    for i in inputs:
        if i.type.tensor_type.elem_type == TensorProto.FLOAT:
            i.name += "_f32"
    outs = [helper.make_tensor_value_info(o.name + "_f32", TensorProto.FLOAT, None) for o in outputs]
    return pre + nodes + post, inputs, outs


def attention_model(q_heads: int, kv_heads: int, head: int, dtype: str) -> bytes:
    """Opset-24 Attention decode: q_seq=1, full KV cache as K/V, nonpad_kv_seqlen, no past, no mask."""
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("q", f, [None, q_heads, 1, head]),
              helper.make_tensor_value_info("k", f, [None, kv_heads, KV_LEN, head]),
              helper.make_tensor_value_info("v", f, [None, kv_heads, KV_LEN, head]),
              helper.make_tensor_value_info("nonpad", TensorProto.INT64, [None])]
    outputs = [helper.make_tensor_value_info("y", f, None)]
    node = helper.make_node("Attention", ["q", "k", "v", "", "", "", "nonpad"], ["y"])
    nodes, inputs, outputs = _cast_graph([node], inputs, outputs, dtype)
    graph = helper.make_graph(nodes, "attention_decode", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)]).SerializeToString()


def mha_model(heads: int, head: int, dtype: str) -> bytes:
    """Contrib MultiHeadAttention decode: q_seq=1 against a KV cache of KV_LEN."""
    f, hidden = TensorProto.FLOAT, heads * head
    inputs = [helper.make_tensor_value_info("q", f, [None, 1, hidden]),
              helper.make_tensor_value_info("k", f, [None, KV_LEN, hidden]),
              helper.make_tensor_value_info("v", f, [None, KV_LEN, hidden])]
    outputs = [helper.make_tensor_value_info("y", f, None)]
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft", num_heads=heads)
    nodes, inputs, outputs = _cast_graph([node], inputs, outputs, dtype)
    graph = helper.make_graph(nodes, "mha_decode", inputs, outputs)
    opsets = [helper.make_opsetid("", 24), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def reference(q, k, v, nonpad):
    """Plain softmax attention in float64, GQA by repeating KV heads, padding masked out."""
    batch, q_heads, _, head = q.shape
    group = q_heads // k.shape[1]
    k = np.repeat(k, group, axis=1).astype(np.float64)
    v = np.repeat(v, group, axis=1).astype(np.float64)
    scores = q.astype(np.float64) @ k.transpose(0, 1, 3, 2) / np.sqrt(head)
    mask = np.arange(k.shape[2])[None, None, None, :] >= nonpad[:, None, None, None]
    scores = np.where(mask, -np.inf, scores)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return (weights @ v).astype(np.float32)


def attention_feeds(q_heads, kv_heads, head, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, q_heads, 1, head), dtype=np.float32)
    k = rng.standard_normal((2, kv_heads, KV_LEN, head), dtype=np.float32)
    v = rng.standard_normal((2, kv_heads, KV_LEN, head), dtype=np.float32)
    nonpad = np.array([KV_LEN, KV_LEN - 9], dtype=np.int64)
    return q, k, v, nonpad


def run_observed(model: bytes, feeds: dict, provider: str) -> tuple[np.ndarray, list[str]]:
    """Run once and read the SdpaKernel tiers ORT printed on native fd 1, as ORT's own tests do."""
    sess = ort.InferenceSession(model, providers=[provider])
    with tempfile.TemporaryFile() as sink:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(sink.fileno(), 1)
        try:
            (out,) = sess.run(None, feeds)
        finally:
            ctypes.CDLL(None).fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        printed = sink.read()
    return out, [t.decode() for t in _TIER.findall(_ANSI.sub(b"", printed))]


def gate_on_canary(tiers: list[str]) -> None:
    """Skip a tier that is not the canary's, unless the run requires it: then fail with the canary."""
    observed = tiers[-1] if tiers else "no SdpaKernel line"
    if observed != CANARY and os.environ.get("ORT_TEST_REQUIRE_CUDNN_SDPA") != "1":
        pytest.skip(f"dispatched {observed}, not {CANARY}")
    _ASSERT.assertEqual(CANARY, observed)


TOL = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 6e-2}


@needs_cuda
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_attention_decode_cudnn(shape, dtype):
    q_heads, kv_heads, head = SHAPES[shape]
    q, k, v, nonpad = attention_feeds(q_heads, kv_heads, head)
    out, tiers = run_observed(attention_model(q_heads, kv_heads, head, dtype),
                              {"q_f32": q, "k_f32": k, "v_f32": v, "nonpad": nonpad}, CUDA)
    np.testing.assert_allclose(out, reference(q, k, v, nonpad), atol=TOL[dtype], rtol=TOL[dtype])
    gate_on_canary(tiers)


@needs_cuda
def test_mha_contrib_decode_cudnn():
    heads, head = 8, 64
    q, k, v, _ = attention_feeds(heads, heads, head, seed=1)
    flat = lambda x: x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], heads * head)  # noqa: E731
    out, tiers = run_observed(mha_model(heads, head, "fp16"), {"q_f32": flat(q), "k_f32": flat(k), "v_f32": flat(v)}, CUDA)
    expected = flat(reference(q, k, v, np.array([KV_LEN, KV_LEN])))
    np.testing.assert_allclose(out, expected, atol=1e-2, rtol=1e-2)
    gate_on_canary(tiers)


@needs_cuda
def test_attention_values_only_cudnn_path():
    """Runs the cuDNN-dispatching graph but checks values only: stays green when MATH is forced.

    Kept on purpose, declared known_toothless in matrix.toml: real suites have such
    parity tests, and the teeth verdict must notice them.
    """
    q, k, v, nonpad = attention_feeds(8, 8, 64, seed=2)
    out, _ = run_observed(attention_model(8, 8, 64, "fp16"), {"q_f32": q, "k_f32": k, "v_f32": v, "nonpad": nonpad}, CUDA)
    np.testing.assert_allclose(out, reference(q, k, v, nonpad), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_attention_values_cpu(shape):
    q_heads, kv_heads, head = SHAPES[shape]
    q, k, v, nonpad = attention_feeds(q_heads, kv_heads, head, seed=3)
    out, _ = run_observed(attention_model(q_heads, kv_heads, head, "fp32"), {"q": q, "k": k, "v": v, "nonpad": nonpad},
                          "CPUExecutionProvider")
    np.testing.assert_allclose(out, reference(q, k, v, nonpad), atol=1e-4, rtol=1e-4)


def test_mha_contrib_values_cpu():
    heads, head = 8, 64
    q, k, v, _ = attention_feeds(heads, heads, head, seed=4)
    flat = lambda x: x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], heads * head)  # noqa: E731
    out, _ = run_observed(mha_model(heads, head, "fp32"), {"q": flat(q), "k": flat(k), "v": flat(v)},
                          "CPUExecutionProvider")
    np.testing.assert_allclose(out, flat(reference(q, k, v, np.array([KV_LEN, KV_LEN]))), atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(torch is None, reason="this pairing has no torch")
def test_torch_shares_the_process():
    """torch and ORT in one process, as in ORT's transformers tests; the audit reports whose cuDNN serves."""
    if torch.cuda.is_available():
        x = torch.ones(2, 8, 16, 16, device="cuda")
        assert torch.nn.functional.conv2d(x, torch.ones(4, 8, 3, 3, device="cuda")).shape == (2, 4, 14, 14)


def test_onnx_fits_this_ort():
    """A pairing must pin onnx to what its ORT accepts (1.31.1 rejects onnx 1.23's IR 14)."""
    model = onnx.load_from_string(attention_model(8, 8, 64, "fp32"))
    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])

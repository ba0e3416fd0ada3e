"""The issue's facts, asked of the GPU wheel itself (issue 48's H200 evidence).

    python facts.py

Builds `Add -> Unique`, `Add -> Det` and `Add -> Relu` (onnx's helper, opset 17 in the default domain, IR 9) and,
for each, a session with providers CUDA then CPU: what get_providers() says, what ORT printed on fd 2 at the default
log level, the node placement from session.record_ep_graph_assignment_info=1 and get_provider_graph_assignment_info,
and the lines ORT logs at log_severity_level=0 that name a placement. Prints one block per graph.
"""
import os
import re
import tempfile

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"


def model(op: str) -> bytes:
    shape = [3, 3] if op == "Det" else [4]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Add", ["x", "x"], ["t"], name="add"), helper.make_node(op, ["t"], ["y"], name=op.lower())]
    m = helper.make_model(helper.make_graph(nodes, op, [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m.SerializeToString()


def fd2(build):
    """What `build()` printed on native fd 2, and what it returned."""
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            out = build()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        return f.read().decode("utf-8", "replace"), out


for op in ("Unique", "Det", "Relu"):
    data = model(op)
    feed = {"x": np.arange(9 if op == "Det" else 4, dtype=np.float32).reshape([3, 3] if op == "Det" else [4])}
    said, s = fd2(lambda data=data: ort.InferenceSession(data, providers=[CUDA, CPU]))
    s.run(None, feed)
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    placed = ort.InferenceSession(data, so, providers=[CUDA, CPU])
    placed.run(None, feed)
    api = [(g.ep_name, [(n.op_type, n.name) for n in g.get_nodes()]) for g in placed.get_provider_graph_assignment_info()]
    verbose = ort.SessionOptions()
    verbose.log_severity_level = 0
    log, _ = fd2(lambda data=data, verbose=verbose: ort.InferenceSession(data, verbose, providers=[CUDA, CPU]))
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", x) for x in log.splitlines() if "placed on" in x or "Node placements" in x]
    print(f"## Add -> {op}")
    print(f"get_providers(): {s.get_providers()}")
    print(f"fd 2 at the default log level: {len(said.strip())} characters" + (f": {said.strip()[:300]!r}" if said.strip() else ""))
    print(f"get_provider_graph_assignment_info(): {api}")
    print(f"log_severity_level=0: {len(log.splitlines())} lines; placement lines: {[x[-120:] for x in lines]}")

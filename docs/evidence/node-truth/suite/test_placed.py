"""Two sessions on ORT's real CUDA build, values checked only, as ORT's own op tests check them: `Add -> Unique`
(ORT 1.31.1's CUDA build has no Unique kernel, so ORT places that node on the CPU EP without a word) and
`Add -> Relu` (every node on CUDA). Both pass wherever they ran; only the node census can say where Unique ran."""
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
X = np.array([1.0, 2.0, 2.0, 3.0], dtype=np.float32)


def _model(op: str) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Add", ["x", "x"], ["t"], name="add"), helper.make_node(op, ["t"], ["y"], name=op.lower())]
    return helper.make_model(helper.make_graph(nodes, op, [x], [y]), opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=9).SerializeToString()


def test_unique_on_cuda():
    sess = ort.InferenceSession(_model("Unique"), providers=[CUDA, CPU])
    assert sess.get_providers()[0] == CUDA
    assert sess.run(None, {"x": X})[0].tolist() == [2.0, 4.0, 6.0]


def test_relu_on_cuda():
    sess = ort.InferenceSession(_model("Relu"), providers=[CUDA, CPU])
    assert sess.run(None, {"x": X})[0].tolist() == [2.0, 4.0, 4.0, 6.0]

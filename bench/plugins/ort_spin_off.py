"""An experiment's pytest plugin (bench/fixed_costs.py --spin-off), not the product: every ORT session of the run
made with its intra-op threads' spinning off (`session.intra_op.allow_spinning = 0`), to measure how much of a
run's CPU time is threads spinning while they wait. Spinning decides how an idle thread waits, not what any kernel
computes."""
from __future__ import annotations

import inspect


def pytest_configure(config):
    import onnxruntime as ort

    original = ort.InferenceSession.__init__
    signature = inspect.signature(original)

    def init(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        options = bound.arguments.get("sess_options") or ort.SessionOptions()
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        bound.arguments["sess_options"] = options
        original(*bound.args, **bound.kwargs)

    ort.InferenceSession.__init__ = init

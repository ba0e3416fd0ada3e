"""Idle threads that sleep instead of spin: ORT's side of a suite's `quiet_threads` (ORT_MATRIX_QUIET_THREADS=1).

ORT's thread pools spin while they wait for work by default, and so do OpenMP's (torch's CPU work). A test
that waits on the GPU then holds several cores busy doing nothing: one process of ORT's attention suite burned
4.7 cores on average on the H200 (docs/evidence/below-floor-h200.md), and a cell's three runs share the host's
cores. The engine sets OMP_WAIT_POLICY=PASSIVE for OpenMP; here every InferenceSession is built with
`session.intra_op.allow_spinning` and `session.inter_op.allow_spinning` set to "0", unless the test set either
itself. Spinning decides how an idle thread waits, never what a kernel computes or which one runs.

The test's own SessionOptions object gets the entries (ORT reads them from it as the session is built); a test
that passed none gets a fresh one. Stdlib only, like the rest of the probe.
"""
from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

QUIET_ENV = "ORT_MATRIX_QUIET_THREADS"
KEYS = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")


def _has(options: Any, key: str) -> bool:
    try:
        options.get_session_config_entry(key)
    except Exception:  # ORT raises for a key that was never set
        return False
    return True


def wrap_create(original: Callable[..., Any], module: ModuleType) -> Callable[..., Any]:
    """`_create_inference_session(self, ...)`, with its session options' spinning off where the test left it."""
    options_cls = getattr(getattr(module, "C", None), "SessionOptions", None)

    def create(session: Any, *args: Any, **kwargs: Any) -> Any:
        options = getattr(session, "_sess_options", None)
        if options is None and options_cls is not None:
            options = options_cls()
            session._sess_options = options
        if options is not None:
            for key in KEYS:
                if not _has(options, key):
                    options.add_session_config_entry(key, "0")
        return original(session, *args, **kwargs)
    return create

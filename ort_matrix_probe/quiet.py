"""Idle threads that sleep instead of spin: ORT's side of a suite's `quiet_threads` (ORT_MATRIX_QUIET_THREADS=1).

ORT's thread pools spin while they wait for work by default, and so do OpenMP's (torch's CPU work). A test
that waits on the GPU then holds several cores busy doing nothing: one process of ORT's attention suite burned
4.7 cores on average on the H200 (docs/evidence/below-floor-h200.md), and a cell's three runs share the host's
cores. The engine sets OMP_WAIT_POLICY=PASSIVE for OpenMP; here every InferenceSession is built with
`session.intra_op.allow_spinning` and `session.inter_op.allow_spinning` off, each unless the test set that key
itself. Spinning decides how an idle thread waits, never what a kernel computes or which one runs.

ORT reads the entries from the SessionOptions the session is built with, so the test's own object gets them (a
test that passed none gets a fresh one), and the session's options carry them after. A test must not see that:
one that checks its code turned spinning off would pass for the harness's doing. So the value written is MARK,
which ORT takes as off (it spins only where the value is exactly "1"), and SessionOptions.get_session_config_entry
answers for a MARK as ORT does for a key never set. What stays visible: ORT's warning, on stderr, where a test
sets one of these keys on options a session was already built with.
Stdlib only, like the rest of the probe.
"""
from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

QUIET_ENV = "ORT_MATRIX_QUIET_THREADS"
KEYS = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")
MARK = "0 (ort-gpu-matrix quiet_threads)"  # off for ORT, which spins only where the value is exactly "1"


def options_class(module: ModuleType) -> type | None:
    return getattr(getattr(module, "C", None), "SessionOptions", None)


def hide(original: Callable[..., Any], options_cls: type) -> Callable[..., Any]:
    """`SessionOptions.get_session_config_entry`, answering for a key the harness set as if it were never set:
    ORT's own error, raised by asking a fresh SessionOptions."""
    def get_session_config_entry(options: Any, key: str) -> Any:
        value = original(options, key)
        if key in KEYS and value == MARK:
            return original(options_cls(), key)  # raises as ORT does for a key never set
        return value
    return get_session_config_entry


def wrap_create(original: Callable[..., Any], options_cls: type, read: Callable[..., Any]) -> Callable[..., Any]:
    """`_create_inference_session(self, ...)`, with its session options' spinning off where the test left it.
    `read` is ORT's own `get_session_config_entry`, past `hide`: options reused for another session hold the MARK
    already, and writing it again would have ORT warn on stderr."""
    def create(session: Any, *args: Any, **kwargs: Any) -> Any:
        options = getattr(session, "_sess_options", None)
        if options is None:
            options = options_cls()
            session._sess_options = options
        for key in KEYS:
            try:
                read(options, key)
            except Exception:  # ORT raises for a key that was never set
                options.add_session_config_entry(key, MARK)
        return original(session, *args, **kwargs)
    return create

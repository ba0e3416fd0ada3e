"""Wait for the node ids a teeth run keeps, when its engine hands them over after the run has started.

A teeth started early (issue 24) pays its start (interpreter, torch, ORT, collection) while require_cudnn
still runs; which of its tests to keep is known only once require_cudnn's result is stored. The engine then
writes the keep file (atomically: written beside it, then renamed), and each process that collected waits
here, at the end of its collection, before any test runs. The wait is bounded: a file that never comes is a
usage error, never a run of every test.

Stdlib only, like the rest of the probe.
"""
from __future__ import annotations

import os
import time

WAIT_ENV = "ORT_MATRIX_KEEP_WAIT_S"  # set only for a keep file that is handed over later: the most seconds to wait
POLL_S = 0.05


class KeepNotHandedOver(Exception):
    """The keep file did not appear within the wait the engine allowed."""


def wait_for(path: str, wait: str | None) -> float:
    """Return once `path` exists (at once without `wait`); the seconds waited. Raises KeepNotHandedOver."""
    if not wait:
        return 0.0
    try:
        limit = float(wait)
    except ValueError:
        raise KeepNotHandedOver(f"{WAIT_ENV}={wait!r} is not a number of seconds") from None
    start = time.monotonic()
    while not os.path.exists(path):
        if time.monotonic() - start > limit:
            raise KeepNotHandedOver(f"the node ids to keep did not arrive in {path} within {limit:g} s")
        time.sleep(POLL_S)
    return time.monotonic() - start

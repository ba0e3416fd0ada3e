"""One place where a session turns an engine error into nox's failed status.

The engine raises a `UserError` (util/errors.py) for everything a person can fix, from whatever layer found
it; every session body is wrapped here once, at registration, so no session lists error types of its own
and a new one raised anywhere below reaches the user as its message, never as a traceback. nox does the
same for its own sessions in one place (its runner maps a session's exceptions to a status).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ort_gpu_matrix.util.errors import UserError

Body = Callable[[Any], None]


def user_errors(prefix: str = "") -> Callable[[Body], Body]:
    """A session body whose UserError ends the session with `session.error(prefix + message)`."""
    def wrap(body: Body) -> Body:
        @functools.wraps(body)
        def session_body(session: Any) -> None:
            try:
                body(session)
            except UserError as exc:
                session.error(f"{prefix}{exc}")
        return session_body
    return wrap

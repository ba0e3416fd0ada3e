"""A mode run's child process, started so that no signal strands it: in a session of its own, dying with the sweep."""
from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..util.orphans import die_with_parent

_STOP = {signal.SIGINT, signal.SIGTERM}


@contextmanager
def held() -> Iterator[None]:
    """SIGINT and SIGTERM held back while a child is started and counted (or killed): one that lands meanwhile
    is delivered as this ends, once the bookkeeping is done."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)


def spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """The child, writing to `log`, dying with this process. Called inside `held()`."""
    with log.open("wb") as sink:
        return subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C reaches only us; we pass it on once
            preexec_fn=_setup(os.getpid()))


def _setup(parent: int) -> Callable[[], None]:
    def setup() -> None:
        """In the child, before exec: lift the mask blocked around Popen, and die with the sweep."""
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)
        die_with_parent(parent)
    return setup

"""pytest's process group, stopped whole: a timeout or a signal reaches every xdist worker, never just the parent.

The test process runs in a session of its own, so a Ctrl-C at the terminal does not reach it
directly; the runner turns SIGINT and SIGTERM into a stop of the group, gives pytest a grace
period to write its report, then kills what is left. A run must never go on in a removed dir.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from types import FrameType

STOP_GRACE_S = 10.0  # after SIGINT, how long pytest may take to write its report before SIGKILL


class Interrupted(KeyboardInterrupt):
    """SIGTERM, turned into what nox already handles for Ctrl-C: stop this session and the rest."""


def stop_group(proc: subprocess.Popen[str], grace: float) -> None:
    """SIGINT to the whole group (pytest writes its report on it), SIGKILL whatever is left after `grace`."""
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGINT:
                os.killpg(proc.pid, signal.SIGKILL)  # workers that outlived their controller
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


class Signals:
    """While a run is in progress: SIGTERM raises Interrupted; once stopping, a second signal exits at once."""

    def __init__(self) -> None:
        self.saved: dict[int, object] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            self.saved[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._terminate)
        return self

    @staticmethod
    def _terminate(signum: int, frame: FrameType | None) -> None:
        raise Interrupted("SIGTERM")

    def stopping(self, proc: subprocess.Popen[str], workdir: Path) -> None:
        """From now on a second SIGINT or SIGTERM kills the group, removes the private dir and exits."""
        def at_once(signum: int, frame: FrameType | None) -> None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            shutil.rmtree(workdir, ignore_errors=True)
            os._exit(128 + signum)

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved.setdefault(sig, signal.getsignal(sig))
                signal.signal(sig, at_once)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

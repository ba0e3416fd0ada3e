"""A require_cudnn census handed to a teeth that was started before that census was stored (issue 24).

In a cell session on one GPU, or a `--gpus` sweep, teeth's start (interpreter, torch, ORT, collection: most
of a scoped teeth) can be paid while require_cudnn still runs. Its parent starts it with
`--census-file SESSION=PATH` and, once require_cudnn's child has exited, writes the run it stored into PATH:
`SESSION=RUN_ID`, the same reference a teeth started after it gets as `--census`, or `none: why` when it stored
nothing. The file is renamed into place, so a reader sees all of it or nothing, and it lives in the parent's
private 0700 dir.

So the census is still read only once its run is stored, and from that run's own bundle (census.py's
`census_from_store`): the early start changes when teeth's processes start, never what they judge.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from ..store.results import Result
from ..util.fs import write_atomic
from ..util.orphans import new_workdir
from ..util.voice import Voice

NONE = "none: "
POLL_S = 0.1


class HandoffError(Exception):
    """A handoff file that cannot be read, or did not come in time; the message says which."""


class Handoff:
    """The parent's side: one file per teeth session started early, in a private dir removed at the end. The dir
    is named for the process that made it (orphans.py), so a parent that was SIGKILLed leaves it only until the
    next run, which removes it."""

    def __init__(self, voice: Voice) -> None:
        self.dir = new_workdir("handoff", voice)

    def path(self, session: str) -> Path:
        return self.dir / f"{session}.census"

    def give(self, session: str, found: Result | str) -> None:
        """`found`: require_cudnn's fresh stored run, or why there is none."""
        write_atomic(self.path(session), f"{found.session}={found.run_id}" if isinstance(found, Result)
                     else NONE + " ".join(found.split()))

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_ref(path: Path, limit_s: float | None = None) -> tuple[str | None, str | None]:
    """The child's side: (SESSION=RUN_ID, None) once the parent wrote it, or (None, why there is no census).
    Unbounded by default: the parent writes the file whenever require_cudnn's child exits, and this process dies
    with its parent (the scheduler's PR_SET_PDEATHSIG)."""
    deadline = None if limit_s is None else time.monotonic() + limit_s
    while not path.exists():
        if deadline is not None and time.monotonic() > deadline:
            raise HandoffError(f"--census-file {path}: no census was handed over within {limit_s:g} s")
        time.sleep(POLL_S)
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise HandoffError(f"--census-file {path}: cannot be read: {exc.strerror or exc}") from None
    if text.startswith(NONE):
        return None, text[len(NONE):]
    return text, None

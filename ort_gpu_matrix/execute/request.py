"""One mode run as it is asked for, before it starts: which mode of which cell, in which venv, and how it starts.

These are values a caller builds and the runner only reads, so a cell's run, a scoped teeth, an
early teeth and a confirmation rerun all go through one run_mode with one shape of argument.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..config.overrides import Workspace
from ..envs.venvs import Venv
from ..host.host import Resolved
from ..plan.cells import Cell


@dataclass(frozen=True)
class Kept:
    """What a teeth started early keeps once its census came, and the -n arguments a run of it gets."""

    ids: Sequence[str]
    workers: Sequence[str]


@dataclass(frozen=True)
class KeepLater:
    """The node ids of a teeth started early (issue 24): `basis` (its last run's) narrows the files it starts on,
    and `workers` are the -n arguments it starts with, a run of `basis`'s (few_workers). `resolve()` blocks until
    require_cudnn's census is stored and returns what to keep, or None: not to run."""

    basis: Sequence[str]
    workers: Sequence[str]
    resolve: Callable[[], Kept | None]


@dataclass(frozen=True)
class ModeRun:
    """One mode of one cell, in its built venv: everything a run, its verdict and its stored result read.

    tox hands each env its own configuration and pytest passes one Item; this is the matrix's one
    object for "this mode of this cell, here". Below the planning layer nothing takes the Matrix.
    """

    cell: Cell
    mode: str
    resolved: Resolved
    venv: Venv
    workspace: Workspace

    @property
    def session(self) -> str:
        return self.cell.mode_session(self.mode)


@dataclass(frozen=True)
class Launch:
    """How this one run starts, beyond its mode: what it keeps, what a slot sets, who watches its group.

    `keep`: run only these node ids (a scoped teeth). They go to the probe in a file, which keeps
    exactly those items at collection, in every xdist worker alike: no node id is parsed as a
    command-line argument, and no command line grows with the number of tests.
    `given`: set over this process's environment before the mode's own, as a slot sets its GPU (gpus.slot_env):
    a confirmation rerun in the sweep's process runs under the GPU of the run it confirms.
    `started_group`: told pytest's process group id once it exists, so that a caller running this in a
    thread (the overlapped confirmation reruns), where no signal arrives, can stop it on the main thread's interrupt.
    `drop`: do not run these node ids (their outcomes are carried from another run, drive/carry.py); they go to
    the probe in a file as `keep` does, and every other item runs, those new since the census included.
    `later` (instead of `keep`): a teeth started early. pytest starts on the files of `later.basis` and its
    processes wait after collection (keepwait.py) while this waits for `later.resolve()`, then the keep file is
    written and the tests run; the run's start, duration and timeout count from that moment. Where there is no
    census, or it needs other files, pytest is stopped before any test and EarlyAbandoned raised.
    """

    keep: Sequence[str] | None = None
    given: Mapping[str, str] = field(default_factory=dict)
    started_group: Callable[[int], None] | None = None
    later: KeepLater | None = None
    drop: Sequence[str] = ()

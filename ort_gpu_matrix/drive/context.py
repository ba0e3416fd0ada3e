"""What every mode run of one cell shares: the cell resolved here, where it keeps things, how it speaks.

pytest hands each test one Item and tox each env its own configuration; the cell runner had passed
the same ten loose arguments down three levels instead. A CellRuns is built once per cell by the
command that runs it and read by everything below; a ModeRun (execute/request.py) is one of its modes.
"""
from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config.overrides import Workspace
from ..envs.venvs import Venv
from ..execute.request import ModeRun
from ..host.host import Resolved
from ..host.ortsource import SourceTree
from ..plan.cells import Cell
from ..store.results import Result
from ..util.voice import Voice


@dataclass(frozen=True)
class CellRuns:
    """One cell's mode runs in this process. `earlier`: this process's stored results by session, which a
    later mode reads (teeth's census) and each run adds to; `census_files`: the require_cudnn sessions whose
    census a --gpus parent hands over while this process runs (--census-file), each with the file it comes in
    (census.py), or the normal run a require_cudnn carries outcomes from. `voice`: who hears it (util/voice.py), its `events` told as each mode run starts and ends."""

    cell: Cell
    resolved: Resolved
    workspace: Workspace
    posargs: tuple[str, ...]
    earlier: MutableMapping[str, Result]
    voice: Voice
    source: SourceTree | None = None  # the ORT release the tests come from, if any
    census_files: Mapping[str, Path] = field(default_factory=dict)
    full: bool = False  # --full: every mode runs every test, carrying nothing (carry.py)

    def mode_run(self, mode: str, venv: Venv) -> ModeRun:
        return ModeRun(self.cell, mode, self.resolved, venv, self.workspace)

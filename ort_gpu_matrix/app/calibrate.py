"""`nox -s calibrate`: the chosen cells run (or read), and one expect file written per suite that accepts what they did.

The command starts from the matrix, as the sweep does: it chooses the cells, finds where each suite's
file goes, and hands each suite's runs to calibrate/suite.py, which merges them into the file a
person reviews. Below this, calibrate reads cells and a Workspace, never the Matrix.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..calibrate.gather import RUNS, CalibrateError, read, run
from ..calibrate.suite import (
    Outcome,
    SuiteCalibration,
    header,
    pollution_said,
    relative,
    still_failing,
    summary,
    targets,
    write_file,
)
from ..config import expectfile
from ..config.loader import read_toml
from ..config.model import Matrix, expect_path
from ..config.modes import MODES
from ..plan.cells import cells_of
from ..plan.select import select
from ..report.render.live import Display
from ..util.voice import Voice


@dataclass(frozen=True)
class CalibrateArgs:
    """What a calibrate run was asked: `write` (--write, else each suite's own file), `from_dirs` (--from: read
    results instead of running), `force` (replace a file that is not the suite's), `keep_stale`, `rounds` (--runs)."""

    write: Path | None = None
    from_dirs: Sequence[Path] = ()
    force: bool = False
    keep_stale: bool = False
    rounds: int = RUNS


def calibrate(matrix: Matrix, selectors: Sequence[str], asked: CalibrateArgs, voice: Voice,
              display: Display | None = None) -> Outcome:
    """Run (or read) the chosen cells, and write one expect file per suite that accepts what they did. What
    calibrate says of its own goes into the Outcome's lines, in place of `voice.say`: the session prints them
    once the files are written."""
    write, from_dirs, force, keep_stale, rounds = asked.write, asked.from_dirs, asked.force, asked.keep_stale, asked.rounds
    out = Outcome()
    voice = dataclasses.replace(voice, say=out.lines.append)
    say = voice.say
    cells = cells_of(matrix)
    chosen = [c for c, _ in select(cells, selectors)]
    suites = {c.suite.id: c.suite for c in chosen}
    paths = targets(matrix.workspace, suites, write, force)
    if rounds < 2 and not from_dirs:
        raise CalibrateError(f"--runs {rounds}: a flake is told from a failure only by running each mode at least "
                             f"twice; use --runs 2 or more (default {RUNS}); nothing was run")
    seen = read(chosen, from_dirs, voice) if from_dirs else run(matrix.workspace, chosen, bool(selectors), rounds,
                                                               voice, display)
    if not seen:
        raise CalibrateError("nothing to calibrate: no mode run of the chosen cells left a result to read"
                             + ("" if from_dirs else " (the reasons are above)"))
    pollution_said(seen, voice)
    raw = read_toml(matrix.path).get("suite", {})
    for sid, suite in suites.items():
        runs = [s for s in seen if s.cell.suite.id == sid]
        if not runs:
            say(f"not written: [suite.{sid}]: none of its cells left a result to calibrate from")
            continue
        own = expect_path(matrix.base, suite)
        old_raw = read_toml(own).get("expect", {}) if own is not None and own.is_file() else {}
        inline_raw = raw.get(sid, {}).get("expect", {})
        modes = [m for m in MODES if any(s.mode == m for s in runs)]
        cal = SuiteCalibration(
            suite, runs,
            inline={m: set(inline_raw.get(m, {})) for m in modes},
            old_keys={m: set(old_raw.get(m, {})) for m in modes},
            all_cells={m: {c.name for c in cells if c.suite.id == sid and m in c.modes} for m in modes},
            keep_stale=keep_stale, voice=voice)
        tables = [cal.table(m) for m in modes]
        path = paths[sid]
        rel = relative(matrix.workspace, path)
        expect = write_file(matrix.workspace, suite, path, expectfile.render(header(suite, runs, rel), tables))
        out.written[sid] = path
        say(f"wrote {path}: " + "; ".join(summary(t) for t in tables))
        still_failing(sid, runs, expect, voice)
        if own != path:
            say(f'to use it, set expect_file = "{rel}" in [suite.{sid}] of {matrix.path}')
    return out

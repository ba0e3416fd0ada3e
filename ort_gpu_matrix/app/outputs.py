"""What a sweep leaves behind: sweep.json, report.md and report.html, the baseline asked for, the step summary.

A JUnit file (--junit-xml) is written from the same report, with the rule of each expectation from the matrix;
its path is checked before anything runs, and it is written whole (a temp file beside it, renamed) or not at all.

A baseline is never shrunk, never overwritten silently and never fed the sweep's own regressions;
an optional output (the step summary) that fails is a warning, never a lost run. What another session
reads back from sweep.json (`nox -s bisect`: the confirmed changes) is a typed record, read through the
codec, so a reader never parses the words a report shows.
"""
from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..compare.changes import Change, Comparison
from ..config.model import Matrix
from ..plan.cells import cells_of
from ..report.render import html, junitxml, markdown
from ..store.baseline import Baseline
from ..store.results import Result, current_path
from ..util import codec
from ..util.fs import unwritable, write_atomic
from ..util.voice import Voice
from .outcome import SWEEP_VERSION, Options, Plan, SweepOutcome


def save(plan: Plan, opts: Options, results: list[Result], outcome: SweepOutcome, voice: Voice) -> None:
    """--save-baseline: never shrunk, never overwritten silently, never fed this sweep's own regressions."""
    assert plan.save_to is not None and opts.save_baseline is not None
    cmp = outcome.report.comparison
    # the same file, however each option named it (a name, a path, baselines/ beside the matrix or MATRIX_BASELINES)
    same = plan.before_path is not None and plan.before_path.resolve() == plan.save_to.resolve()
    if same and cmp and cmp.regressions and not opts.accept_regressions:
        outcome.refused = (f"baseline {opts.save_baseline} was NOT saved: this sweep has {len(cmp.regressions)} "
                           f"regression(s) against it, and saving would make them the new normal. Fix: look at them, "
                           "then re-run with --accept-regressions to save anyway")
        voice.log(f"sweep: {outcome.refused}")
        return
    if not results:
        outcome.refused = f"baseline {opts.save_baseline} was NOT saved: nothing ran"
        voice.log(f"sweep: {outcome.refused}")
        return
    new = Baseline.of(results, opts.save_baseline)
    existed = plan.save_to.exists()
    kept: list[str] = []
    if plan.saved_before is not None:
        new, kept = new.merged_over(plan.saved_before)
    new.save(plan.save_to)
    outcome.files["baseline"] = plan.save_to
    updated = f"updated {len(Baseline.of(results).modes())} mode record(s)"
    if kept:
        how = f"{updated}, kept {len(kept)} this sweep did not run ({', '.join(kept[:6])}" \
              f"{', ...' if len(kept) > 6 else ''}; --replace drops them)"
    else:
        how = "replaced (--replace)" if existed and opts.replace else updated if existed else "saved"
    voice.log(f"sweep: baseline {opts.save_baseline} {how}: {plan.save_to}")


def summary(outcome: SweepOutcome, voice: Voice) -> None:
    """Append report.md to $GITHUB_STEP_SUMMARY; a failure there is one warning line, never a lost run."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary or "markdown" not in outcome.files:
        return
    try:
        with open(summary, "a") as f:
            f.write(outcome.files["markdown"].read_text())
    except OSError as exc:
        warning = f"GITHUB_STEP_SUMMARY={summary} could not be written ({exc.strerror or exc}); " \
                  "the report, sweep.json and any baseline were written"
        outcome.warnings.append(warning)
        voice.log(f"warning: {warning}")


@dataclass(frozen=True)
class SweepChanges:
    """Of sweep.json, what a bisect follows: the baseline the sweep compared with, and its confirmed changes
    (a change a rerun did not reproduce is never among them: it is in `unconfirmed`)."""

    baseline: str | None = None
    regressions: list[Change] = field(default_factory=list)
    improvements: list[Change] = field(default_factory=list)


def read_changes(path: Path) -> SweepChanges:
    """sweep.json's changes, typed. codec.CodecError (a ValueError) names the key of JSON that is not a sweep's;
    OSError or another ValueError: no JSON there."""
    return codec.decode(SweepChanges, json.loads(path.read_text()))


def document(results_dir: Path, outcome: SweepOutcome, started: str) -> dict[str, object]:
    report = outcome.report
    cmp = report.comparison.to_dict() if report.comparison else {k: [] for k in Comparison.KEYS}
    return {
        "sweep_version": SWEEP_VERSION, "started": started, "host": socket.gethostname(), "ok": outcome.ok,
        "gate": report.gate, "allow_missing": report.allow_missing, "why_failed": report.why_failed(),
        "baseline": report.baseline_name,
        "interrupted": outcome.interrupted,
        "cells": [{"session": r.session, "cell": r.cell.name, "mode": r.mode, "verdict": r.verdict.value,
                   "result": str(current_path(results_dir, r.session)), "bundle": r.bundle} for r in report.results],
        "already_failing": [r.session for r in report.already_failing],
        **cmp, "skipped": report.skipped, "errors": outcome.errors,
        "confirm": report.confirm,
        "unconfirmed": [u.to_dict() for u in report.unconfirmed],
        "libs_unconfirmed": [{"mode": d.mode, "cells": list(d.cells), "test": t, "left": a, "right": b}
                             for d in report.libs for t, a, b in d.unconfirmed],
        "confirmation": {r.session: codec.encode(r.confirmation) for r in report.results if r.confirmation is not None},
    }


def write(results_dir: Path, outcome: SweepOutcome, started: str, out_dir: Path | None, name: str = "sweep.json",
          roots: Sequence[Path] = ()) -> dict[str, Path]:
    """sweep.json beside the results (a report writes report.json instead), report.md and report.html in out_dir."""
    out = out_dir or results_dir
    files = {"sweep": (results_dir if name == "sweep.json" else out) / name, "markdown": out / "report.md",
             "html": out / "report.html"}
    write_atomic(files["sweep"], json.dumps(document(results_dir, outcome, started), indent=2) + "\n")
    write_atomic(files["markdown"], markdown.render(outcome.report))
    write_atomic(files["html"], html.render(outcome.report, out, roots or [results_dir]))
    return files


def junit_problem(path: Path) -> str | None:
    """Why --junit-xml PATH cannot be written, or None; asked before a sweep runs or a report writes anything."""
    if path.is_dir():
        return f"{path} is a directory"
    return unwritable(path.parent)


def expectations(matrix: Matrix) -> junitxml.Expectations:
    """Each cell's expectations per mode, as the matrix has them: the JUnit file names the rule that accepted a test."""
    return {c.name: c.suite.expect for c in cells_of(matrix)}


def junit(path: Path, outcome: SweepOutcome, rules: junitxml.Expectations, voice: Voice) -> None:
    """--junit-xml: the report as one JUnit file, replaced whole; a write that fails is a warning, never a lost run
    (the path was checked before the sweep ran, so only a full disk or a lost mount gets here)."""
    try:
        write_atomic(path, junitxml.render(outcome.report, rules))
    except OSError as exc:
        warning = f"--junit-xml {path} could not be written ({exc.strerror or exc}); the report and sweep.json were"
        outcome.warnings.append(warning)
        voice.log(f"warning: {warning}")
        return
    outcome.files["junit"] = path

"""`nox -s calibrate`: run (or read) cells and write the expectations that accept today's outcome, for review.

    nox -s calibrate -- [SELECT ...] [--write PATH] [--from DIR ...] [--force] [--keep-stale] [--runs N] [--verbose]

SELECT picks cells as `nox -s sweep -- --select` does (cell names, mode session names, tags); each
chosen cell runs in all its modes. The session succeeds once the file is written, whatever the
verdicts of the runs were: a red first run is what it is for.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ort_gpu_matrix.config.overrides import Overrides

from .errors import user_errors


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nox -s calibrate --", exit_on_error=False)
    p.add_argument("select", nargs="*", metavar="SELECT", help="cells, mode sessions or tags (default: every cell)")
    p.add_argument("--write", type=Path, metavar="PATH",
                   help="the file to write (default: the suite's expect_file, else expect/<suite>.toml)")
    p.add_argument("--from", dest="from_dirs", type=Path, action="append", default=[], metavar="DIR",
                   help="read the results in DIR instead of running (repeatable)")
    p.add_argument("--force", action="store_true", help="replace a file that is not the suite's expect_file")
    p.add_argument("--keep-stale", action="store_true", help="keep the rules that matched nothing")
    p.add_argument("--runs", type=int, default=2, metavar="N",
                   help="run each mode N times (N >= 2, default 2): a test that differs between runs gets known_flaky")
    p.add_argument("--verbose", action="store_true",
                   help="stream pytest's output and every harness line (default: one line per mode run)")
    return p


def register(nox: Any, default_matrix: Path) -> None:
    overrides = Overrides.from_environ()
    matrix_file = overrides.matrix_toml or default_matrix

    @user_errors("calibrate: ")
    def calibrate(session: Any) -> None:
        """Write the expectations that accept the chosen cells' outcome today (-- [SELECT ...] [--write PATH] [--from DIR])."""
        from ort_gpu_matrix.app.calibrate import CalibrateArgs
        from ort_gpu_matrix.app.calibrate import calibrate as engine
        from ort_gpu_matrix.config.loader import load_matrix
        from ort_gpu_matrix.report.render import color, live
        from ort_gpu_matrix.util.voice import Voice, unheard

        try:
            args = _parser().parse_args(session.posargs)
        except (argparse.ArgumentError, SystemExit) as exc:
            session.error(f"calibrate: {exc}; usage: {_parser().format_usage().strip()}")
            return
        display = None if args.verbose or args.from_dirs else live.for_here(color.enabled())
        # say: calibrate keeps its own lines in its outcome, printed below once the files are written
        voice = Voice(log=session.log if display is None else display.line, echo=print, say=unheard, warn=session.warn)
        here = Path(session.invoked_from)  # nox runs from the noxfile's dir; paths are the user's
        asked = CalibrateArgs(write=here / args.write if args.write else None,
                              from_dirs=[here / d for d in args.from_dirs], force=args.force,
                              keep_stale=args.keep_stale, rounds=args.runs)
        outcome = engine(load_matrix(matrix_file, overrides), args.select, asked, voice, display)
        print("\n".join(outcome.lines))
        if not outcome.written:
            session.error("calibrate: nothing was written (above: why)")

    nox.session(calibrate, name="calibrate", venv_backend="none", default=False)

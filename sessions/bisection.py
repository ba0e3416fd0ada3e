"""`nox -s bisect`: which ORT build made a change the sweep confirmed (ort_gpu_matrix/app/bisect.py).

    nox -s bisect -- [--cell NAME] [--mode MODE] [--tests REGEX | --improvement]
                     (--versions V1 V2 ... | --between V1 V2 | --wheels FILE_OR_DIR ...)
                     [--confirm N] [--resume] [--out DIR] [-- PYTEST_ARGS ...]

It exits 0 when every followed change was located, and fails saying why otherwise. Ctrl-C keeps the
steps done; the same command with --resume goes on from them.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ort_gpu_matrix.config.overrides import Overrides

from .errors import user_errors


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nox -s bisect --", exit_on_error=False)
    p.add_argument("--cell", help="the cell (default: the one whose changes the last sweep confirmed)")
    p.add_argument("--mode", help="the mode (default: the sweep's; normal with --tests)")
    p.add_argument("--tests", metavar="REGEX", help="follow these tests of the cell's last run instead")
    p.add_argument("--improvement", action="store_true", help="follow the last sweep's improvements")
    p.add_argument("--versions", nargs="+", default=[], metavar="V", help="releases on the index, oldest first")
    p.add_argument("--between", nargs=2, metavar=("GOOD", "BAD"), help="every release between two, from the index")
    p.add_argument("--wheels", nargs="+", type=Path, default=[], metavar="FILE_OR_DIR",
                   help="wheel files, or a wheelhouse of nightlies")
    p.add_argument("--confirm", type=_count, default=2, metavar="N",
                   help="rerun a test that differs from the good end N times before it counts as bad (default 2)")
    p.add_argument("--resume", action="store_true", help="go on from the steps an interrupted bisect kept")
    p.add_argument("--out", type=Path, help="where bisect.md and bisect.html go (default: the bisect's dir)")
    return p


def register(nox: Any, default_matrix: Path) -> None:
    overrides = Overrides.from_environ()
    matrix_file = overrides.matrix_toml or default_matrix

    @user_errors("bisect: ")
    def bisect(session: Any) -> None:
        """Which ORT build changed the tests the last sweep confirmed (-- --versions A B C | --between A B | --wheels DIR)."""
        from ort_gpu_matrix.app.bisect import BisectArgs
        from ort_gpu_matrix.app.bisect import bisect as engine
        from ort_gpu_matrix.config.loader import load_matrix
        from ort_gpu_matrix.report.render import bisect as render
        from ort_gpu_matrix.util.fs import write_atomic
        from ort_gpu_matrix.util.voice import Voice

        posargs = list(session.posargs)
        extra = posargs[posargs.index("--") + 1:] if "--" in posargs else []
        posargs = posargs[:posargs.index("--")] if "--" in posargs else posargs
        try:
            args = _parser().parse_args(posargs)
        except (argparse.ArgumentError, SystemExit) as exc:
            session.error(f"bisect: {exc}; usage: {_parser().format_usage().strip()}")
            return
        here = Path(session.invoked_from)
        asked = BisectArgs(args.cell, args.mode, args.tests, args.improvement, tuple(args.versions),
                      tuple(args.between) if args.between else None, tuple(here / w for w in args.wheels),
                      args.confirm, args.resume, tuple(extra))
        voice = Voice(log=session.log, echo=print, say=session.log, warn=session.warn)  # its steps go to nox's log
        try:
            record, where = engine(load_matrix(matrix_file, overrides), asked, voice)
        except KeyboardInterrupt:
            session.error("bisect: interrupted: the steps done are kept; the same command with --resume goes on")
            return
        out = here / args.out if args.out else where
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "bisect.md", render.markdown(record))
        write_atomic(out / "bisect.html", render.html(record))
        print(render.terminal(record))
        print(f"bisect: {where / 'bisect.json'}, {out / 'bisect.md'}, {out / 'bisect.html'}")
        if not record.located:
            session.error(f"bisect: {render.verdict_line(record)}")

    nox.session(bisect, name="bisect", venv_backend="none", default=False)

"""`nox -s sweep` (run the matrix, report, compare with a baseline) and `nox -s report` (report from result files).

    nox -s sweep -- [--select SESSION_OR_TAG ...] [--baseline NAME_OR_FILE] [--save-baseline NAME]
                    [--rerun-failures N] [--gpus 0,1|all [--slots-per-gpu N]] [--out DIR] [-- PYTEST_ARGS ...]
    nox -s report -- [PATHS ...] [--baseline NAME_OR_FILE] [--out DIR]
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ort_gpu_matrix.cells import cells_of
from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.errors import MatrixError
from ort_gpu_matrix.overrides import Overrides


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"nox -s {prog} --", exit_on_error=False)
    p.add_argument("--baseline", help="compare with baselines/NAME.json (or a .json file)")
    p.add_argument("--out", type=Path, help="where report.md and report.html go (default: the results dir)")
    if prog == "sweep":
        p.add_argument("--select", nargs="+", default=[], metavar="SESSION_OR_TAG")
        p.add_argument("--save-baseline", metavar="NAME")
        p.add_argument("--rerun-failures", type=int, default=0, metavar="N")
        p.add_argument("--gpus", metavar="0,1|all", help="mode runs in parallel, one per GPU at a time, as child processes")
        p.add_argument("--slots-per-gpu", type=int, default=1, metavar="N", help="with --gpus: N mode runs per GPU at once")
        p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # started by a --gpus parent
        p.add_argument("--census", action="append", default=[], help=argparse.SUPPRESS)  # SESSION=RUN_ID, for teeth
    else:
        p.add_argument("paths", nargs="*", type=Path)
        p.add_argument("--latest", action="store_true", help="of two results for one session, keep the newer")
    return p


def _args(session: Any, prog: str) -> tuple[argparse.Namespace, list[str]]:
    posargs = list(session.posargs)
    extra: list[str] = []
    if "--" in posargs:
        i = posargs.index("--")
        posargs, extra = posargs[:i], posargs[i + 1:]
    try:
        return _parser(prog).parse_args(posargs), extra
    except (argparse.ArgumentError, SystemExit) as exc:
        session.error(f"{prog}: {exc}; usage: {_parser(prog).format_usage().strip()}")
        raise


def register(nox: Any, default_matrix: Path) -> None:
    overrides = Overrides.from_environ()
    matrix_file = overrides.matrix_toml or default_matrix

    def sweep(session: Any) -> None:
        """Run every cell this host can run (or --select), write the report, compare with --baseline."""
        from ort_gpu_matrix.baseline import BaselineError
        from ort_gpu_matrix.gpus import GpuError, slots
        from ort_gpu_matrix.harness import censuses
        from ort_gpu_matrix.render import terminal
        from ort_gpu_matrix.sweep import SelectionError, run, select, with_reruns

        args, pytest_args = _args(session, "sweep")
        try:
            matrix = load_matrix(matrix_file, overrides)
            matrix, rerun_args = with_reruns(matrix, args.rerun_failures)
            chosen = select(cells_of(matrix), args.select)
            gpu_slots = [] if args.child else slots(args.gpus, args.slots_per_gpu, warn=session.warn)
            child_args = [*(["--rerun-failures", str(args.rerun_failures)] if args.rerun_failures else []),
                          *(["--", *pytest_args] if pytest_args else [])]
            earlier = censuses(matrix.workspace.results_dir, args.census, session.warn)
            outcome = run(matrix, chosen, [*rerun_args, *pytest_args], bool(args.select), args.baseline,
                          args.save_baseline, args.out, log=session.log, echo=print, slots=gpu_slots,
                          child_args=child_args, noxfile=default_matrix.parent / "noxfile.py", child=args.child,
                          earlier=earlier)
        except (MatrixError, SelectionError, BaselineError, GpuError) as exc:
            session.error(str(exc))
            return
        if args.child:
            if not outcome.ok:
                session.error("cell FAILED (its result says why)")
            return
        print(terminal.render(outcome.report))
        for cell, why in outcome.errors.items():
            print(f"  {cell}: {why}")
        print(f"written: {', '.join(str(p) for p in outcome.files.values())}")
        if outcome.interrupted:
            session.error(f"sweep interrupted ({outcome.interrupted}): the report above shows what had finished")
        if not outcome.ok:
            session.error("sweep FAILED: " + ("nothing ran" if not outcome.report.results else
                                              "failing modes, regressions or cells that did not run (above)"))

    def report(session: Any) -> None:
        """Build the sweep report from result files or dirs (default: the results dir); runs nothing."""
        from ort_gpu_matrix.baseline import BaselineError
        from ort_gpu_matrix.render import terminal
        from ort_gpu_matrix.report import InputError, gather
        from ort_gpu_matrix.sweep import report_only

        args, _ = _args(session, "report")
        try:
            matrix = load_matrix(matrix_file, overrides)
            results = gather(args.paths or [matrix.workspace.results_dir], latest=args.latest)
            if not results:
                session.error(f"no results in {', '.join(map(str, args.paths or [matrix.workspace.results_dir]))}")
                return
            outcome = report_only(matrix, results, args.baseline, args.out)
        except (MatrixError, InputError, BaselineError) as exc:
            session.error(str(exc))
            return
        print(terminal.render(outcome.report))
        print(f"written: {', '.join(str(p) for p in outcome.files.values())}")
        if not outcome.ok:
            session.error("report: failing modes or regressions (above)")

    nox.session(sweep, name="sweep", venv_backend="none", default=False)
    nox.session(report, name="report", venv_backend="none", default=False)

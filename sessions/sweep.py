"""`nox -s sweep` (run the matrix, report, compare with a baseline) and `nox -s report` (report from result files).

    nox -s sweep -- [--select SESSION_OR_TAG ...] [--baseline NAME_OR_FILE] [--gate all|regressions]
                    [--allow-missing] [--save-baseline NAME [--replace] [--accept-regressions]]
                    [--rerun-failures N] [--confirm N] [--out DIR] [--junit-xml PATH]
                    [--gpus 0,1|all [--slots-per-gpu N]] [--verbose] [-- PYTEST_ARGS ...]
    nox -s report -- [PATHS ...] [--baseline NAME_OR_FILE] [--gate all|regressions] [--allow-missing] [--out DIR]
                     [--junit-xml PATH]
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.config.overrides import Overrides

from .errors import user_errors


def _count(text: str) -> int:
    """A whole number >= 0: `--rerun-failures -1` is a mistake, not zero."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def _parser(prog: str) -> argparse.ArgumentParser:
    from ort_gpu_matrix.report.model import GATES  # here, not at the top: every nox run would import the report

    p = argparse.ArgumentParser(prog=f"nox -s {prog} --", exit_on_error=False)
    p.add_argument("--baseline", help="compare with baselines/NAME.json (or a .json file)")
    p.add_argument("--out", type=Path, help="where report.md and report.html go (default: the results dir)")
    p.add_argument("--junit-xml", type=Path, metavar="PATH",
                   help="also write the sweep as one JUnit XML file, for CI's test tabs (relative to where nox ran)")
    p.add_argument("--gate", choices=GATES, default="all",
                   help="all: every mode passes (default); regressions: nothing got worse than the baseline")
    p.add_argument("--allow-missing", action="store_true",
                   help="a baseline cell that could not run here does not fail the gate")
    if prog == "sweep":
        # extend: `--select A --select B` runs both, as `--select A B` does
        p.add_argument("--select", nargs="+", action="extend", default=[], metavar="SESSION_OR_TAG")
        p.add_argument("--save-baseline", metavar="NAME", help="save this sweep as baselines/NAME.json")
        p.add_argument("--replace", action="store_true",
                       help="with --save-baseline: write exactly this sweep's records (default: update them in place)")
        p.add_argument("--accept-regressions", action="store_true",
                       help="with --baseline X --save-baseline X: save even though this sweep regressed against X")
        p.add_argument("--rerun-failures", type=_count, default=0, metavar="N")
        p.add_argument("--confirm", type=_count, default=2, metavar="N",
                       help="rerun each mode's regressed and unexpectedly failing tests N times before they count "
                            "(default 2; 0: off)")
        p.add_argument("--gpus", metavar="0,1|all|none",
                       help="mode runs in parallel on these GPUs, as child processes (default: all where nvidia-smi "
                            "lists GPUs and CUDA_VISIBLE_DEVICES is unset; none: one after another in this process)")
        p.add_argument("--slots-per-gpu", default="auto", metavar="N|auto",
                       help="with --gpus: N mode runs per GPU at once, and as many of a cell's confirmation reruns "
                            "(default auto: decided from the GPU's free memory, each run's last peak and the cores; "
                            "1 keeps one run per GPU)")
        p.add_argument("--full", action="store_true",
                       help="every mode runs every test: require_cudnn carries no outcome from normal (default: it "
                            "runs only the tests that may change under it, and says which it carried)")
        p.add_argument("--verbose", action="store_true",
                       help="stream pytest's output and every harness line (default: one line per mode run)")
        p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # started by a --gpus parent
        p.add_argument("--census", action="append", default=[], help=argparse.SUPPRESS)  # SESSION=RUN_ID, for teeth
        # SESSION=PATH: a teeth started early reads the SESSION=RUN_ID of its require_cudnn from PATH once written
        p.add_argument("--census-file", action="append", default=[], help=argparse.SUPPRESS)
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
        args = _parser(prog).parse_args(posargs)
    except (argparse.ArgumentError, SystemExit) as exc:
        session.error(f"{prog}: {exc}; usage: {_parser(prog).format_usage().strip()}")
        raise
    if prog == "sweep" and args.save_baseline is None and (args.replace or args.accept_regressions):
        session.error(f"{prog}: --replace and --accept-regressions go with --save-baseline NAME")
    if prog == "sweep" and not args.child and (args.census or args.census_file):
        session.error(f"{prog}: --census and --census-file are what a --gpus sweep gives its own child runs; a sweep "
                      "reads each census itself from the require_cudnn run it makes: drop them")
    return args, extra


def _users(session: Any, path: Path | None) -> Path | None:
    """A path the user typed, from where nox was run (nox runs a session from the noxfile's dir)."""
    return None if path is None else Path(session.invoked_from) / path


def _sweep(session: Any, matrix_file: Path, overrides: Any, noxfile: Path) -> None:
    from ort_gpu_matrix.app.outcome import Options
    from ort_gpu_matrix.app.sweep import Invocation, SweepArgs, from_command
    from ort_gpu_matrix.report.render import color, live, terminal
    from ort_gpu_matrix.util.voice import Voice

    args, pytest_args = _args(session, "sweep")
    opts = Options(args.baseline, args.save_baseline, args.out, args.gate, args.allow_missing, args.replace,
                   args.accept_regressions, args.confirm, junit_xml=_users(session, args.junit_xml))
    cmd = SweepArgs(tuple(args.select), args.rerun_failures, args.slots_per_gpu, args.gpus, tuple(args.census),
                  tuple(args.census_file), tuple(pytest_args), args.full)
    # a child's output is its log: it streams everything; the parent (or a serial sweep) is watched
    display = None if args.verbose or args.child else live.for_here(color.enabled())
    voice = Voice(log=session.log if display is None else display.line, echo=print, say=print, warn=session.warn)
    how = Invocation(voice, noxfile=noxfile, child=args.child, display=display)
    outcome = from_command(load_matrix(matrix_file, overrides), cmd, opts, how)
    if args.child:
        if not outcome.ok:
            session.error("cell FAILED (its result says why)")
        return
    print(terminal.render(outcome.report))
    print(f"written: {', '.join(str(p) for p in outcome.files.values())}")
    for warning in outcome.warnings:
        print(f"warning: {warning}")
    if outcome.interrupted:
        session.error(f"sweep interrupted ({outcome.interrupted}): the report above shows what had finished")
    if outcome.refused:
        session.error(outcome.refused)
    if not outcome.ok:
        session.error(f"sweep FAILED (gate {args.gate}): " + "; ".join(outcome.report.why_failed()))


def _report(session: Any, matrix_file: Path, overrides: Any) -> None:
    from ort_gpu_matrix.app.outcome import Options
    from ort_gpu_matrix.app.sweep import report_only
    from ort_gpu_matrix.report.model import gather
    from ort_gpu_matrix.report.render import terminal
    from ort_gpu_matrix.util.voice import Voice

    args, _ = _args(session, "report")
    # it runs nothing: its one line of its own (a step summary it could not write) goes to stdout, with the report
    voice = Voice(log=print, echo=print, say=print, warn=session.warn)
    matrix = load_matrix(matrix_file, overrides)
    paths = args.paths or [matrix.workspace.results_dir]
    results = gather(paths, latest=args.latest)
    if not results:
        session.error(f"no results in {', '.join(map(str, paths))}")
        return
    roots = [p if p.is_dir() else p.parent for p in paths]  # the report links only to files under these
    outcome = report_only(matrix, results, Options(args.baseline, out=args.out, gate=args.gate,
                                                   allow_missing=args.allow_missing,
                                                   junit_xml=_users(session, args.junit_xml)), roots, voice)
    print(terminal.render(outcome.report))
    print(f"written: {', '.join(str(p) for p in outcome.files.values())}")
    for warning in outcome.warnings:
        print(f"warning: {warning}")
    if not outcome.ok:
        session.error(f"report FAILED (gate {args.gate}): " + "; ".join(outcome.report.why_failed()))


def register(nox: Any, default_matrix: Path, noxfile: Path) -> None:
    """`sweep` and `report`; a --gpus sweep starts its children with `noxfile`, the one that registered it."""
    overrides = Overrides.from_environ()
    matrix_file = overrides.matrix_toml or default_matrix

    @user_errors()
    def sweep(session: Any) -> None:
        """Run every cell this host can run (or --select), write the report, compare with --baseline."""
        _sweep(session, matrix_file, overrides, noxfile)

    @user_errors()
    def report(session: Any) -> None:
        """Build the sweep report from result files or dirs (default: the results dir); runs nothing."""
        _report(session, matrix_file, overrides)

    nox.session(sweep, name="sweep", venv_backend="none", default=False)
    nox.session(report, name="report", venv_backend="none", default=False)

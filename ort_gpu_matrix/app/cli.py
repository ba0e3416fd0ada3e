"""`ort-gpu-matrix`: the matrix as an installed tool, run where the matrix.toml is, as tox and nox are.

It never imports nox (the engine does not): it hands over to `python -P -m nox -f <noxfile>` with
exec, so nox's output, signals (Ctrl-C reaches nox directly) and exit status are nox's own. The
noxfile is the one shipped in the package (ort_gpu_matrix/sessions/noxfile.py), or a checkout's
own noxfile.py when run from one. nox runs a noxfile from its own directory, so the matrix goes
over as an absolute path in MATRIX_TOML; `-P` keeps the user's directory off sys.path, so a
`sessions/` or `ort_gpu_matrix/` there cannot shadow the installed package.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..util import packaged
from ..util.errors import UserError

USAGE = """\
usage: ort-gpu-matrix [--matrix PATH] [NOX OPTIONS] [-- POSARGS]
       ort-gpu-matrix [--matrix PATH] init

  ort-gpu-matrix                      the doctor, then every cell of ./matrix.toml this host can run
  ort-gpu-matrix -l                   every session, and why a cell cannot run here
  ort-gpu-matrix -s doctor            what this host has for the matrix
  ort-gpu-matrix -s sweep -- --baseline NAME   nox's options and a session's arguments pass through
  ort-gpu-matrix init                 write a starter matrix.toml for this host (never over a file)

  --matrix PATH   the matrix file (default: $MATRIX_TOML, else matrix.toml in this directory)
"""

NOXFILE_OPTIONS = ("-f", "--noxfile")


class UsageError(UserError):
    """A command line we cannot run; the message names the fix."""


def parse(argv: list[str]) -> tuple[str | None, str | None, list[str]]:
    """(--matrix value, "init" or None, the arguments for nox). Only what comes before `--` is ours."""
    head, tail = (argv[:argv.index("--")], argv[argv.index("--"):]) if "--" in argv else (argv, [])
    matrix: str | None = None
    command: str | None = None
    rest: list[str] = []
    i = 0
    while i < len(head):
        a = head[i]
        if a == "--matrix":
            if i + 1 >= len(head):
                raise UsageError("--matrix needs a path\n    fix: ort-gpu-matrix --matrix path/to/matrix.toml ...")
            matrix, i = head[i + 1], i + 2
            continue
        if a.startswith("--matrix="):
            matrix = a.split("=", 1)[1]
        elif a == "init" and command is None and not rest:
            command = "init"
        elif a in NOXFILE_OPTIONS or a.startswith("--noxfile="):
            raise UsageError(f"{a}: ort-gpu-matrix runs its own noxfile\n    fix: pass the matrix with --matrix, or "
                             "register the sessions in a noxfile of yours (from ort_gpu_matrix.sessions import "
                             "register) and run nox -f")
        else:
            rest.append(a)
        i += 1
    if command == "init" and (rest or tail):
        raise UsageError(f"init takes only --matrix, not {' '.join(rest + tail)}\n    fix: ort-gpu-matrix init "
                         "[--matrix PATH]")
    return matrix, command, rest + tail


def matrix_path(given: str | None) -> Path:
    """--matrix, else $MATRIX_TOML, else ./matrix.toml; absolute, relative to where the tool was run."""
    chosen = given or os.environ.get("MATRIX_TOML") or "matrix.toml"
    return Path(os.path.abspath(os.path.expanduser(chosen)))


def init(path: Path) -> int:
    from ..config.loader import load_matrix
    from ..host.host import check
    from ..plan.cells import cells_of
    from .starter import InitError, render, survey, write

    try:
        write(path, render(survey()))
    except InitError as exc:
        print(f"ort-gpu-matrix init: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    matrix = load_matrix(path)
    for cell in cells_of(matrix):
        why = check(cell, matrix.workspace)
        state = "runnable here" if not isinstance(why, Exception) else \
            "not runnable here: " + "; ".join(p.problem for p in why.problems)
        print(f"  {cell.name}: {state}")
    here = "" if path.parent == Path.cwd() else f" --matrix {path}"
    print(f"next: ort-gpu-matrix{here} -l  (the sessions), ort-gpu-matrix{here}  (the doctor, then every cell "
          "that can run here)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        given, command, nox_args = parse(args)
    except UsageError as exc:
        print(f"ort-gpu-matrix: {exc}", file=sys.stderr)
        return 2
    path = matrix_path(given)
    if command == "init":
        return init(path)
    if any(a in ("-h", "--help") for a in nox_args[:nox_args.index("--") if "--" in nox_args else None]):
        print(USAGE)
        print("nox's own options follow.\n")
    elif not path.exists():
        named = "--matrix" if given else "MATRIX_TOML" if os.environ.get("MATRIX_TOML") else None
        what = f"{named} {path}: no such file" if named else f"no matrix.toml in {path.parent}"
        fix = ("`ort-gpu-matrix init` writes one for this host, or pass --matrix PATH" if named is None
               else f"check the path, or `ort-gpu-matrix --matrix {path} init` writes a starter there")
        print(f"ort-gpu-matrix: {what}\n    fix: {fix}", file=sys.stderr)
        return 2
    env = {**os.environ, "MATRIX_TOML": str(path)}
    cmd = [sys.executable, "-P", "-m", "nox", "-f", str(packaged.noxfile()), *nox_args]
    sys.stdout.flush()
    os.execve(sys.executable, cmd, env)
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    raise SystemExit(main())

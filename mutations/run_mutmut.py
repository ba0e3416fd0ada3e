"""Mutation testing of the decision code with mutmut 3 (issue 26): one command, a score per module.

    python3 mutations/run_mutmut.py                  # every module of [tool.mutmut] only_mutate (about 30 min, 2 cores)
    python3 mutations/run_mutmut.py --changed        # only the modules this branch touches against main (pre-commit)
    python3 mutations/run_mutmut.py --changed REF    # ... against REF
    python3 mutations/run_mutmut.py --module compare --module plan.select   # some modules (or one function)
    python3 mutations/run_mutmut.py --summary        # no run: the table of the last run's results

mutmut itself is configured in pyproject.toml ([tool.mutmut]): what it mutates, the in-process tests it may
run, the files it copies into mutants/. This script only picks the mutant names to run (`mutmut run` takes
globs), runs mutmut on this interpreter with two workers, and scores each module against
mutations/equivalent.toml: mutants judged equivalent (no test can tell them from the original), each with its
reason. A listed mutant that no longer exists or that a test now kills is reported as stale, and the exit code
is 1 when a module scores below 90% of its non-equivalent mutants or an equivalent entry is stale.

Not part of .ci/run: it takes minutes, not seconds. Standard library only (Python >= 3.11 for tomllib).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EQUIVALENT = REPO / "mutations" / "equivalent.toml"
GOAL = 0.90
# A module as scored: its name, the mutant-name glob of the part of it that in-process tests cover. The rest of
# these two decides from stored results through real nox runs (tests/test_carry.py), which mutmut does not run.
SCOPES: dict[str, tuple[str, ...]] = {
    "ort_gpu_matrix.drive.knowncut": tuple(f"ort_gpu_matrix.drive.knowncut.x_{f}__mutmut_*"
                                           for f in ("left_out", "missed_fast", "known_cut")),
    "ort_gpu_matrix.drive.carry": ("ort_gpu_matrix.drive.carry.x_changing__mutmut_*",)}


def only_mutate() -> list[str]:
    return list(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"])


def module_of(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def glob_of(module: str) -> list[str]:
    return list(SCOPES.get(module, (f"{module}.*",)))


def changed(ref: str) -> list[str]:
    """The mutated files that differ from ref: committed on this branch since it forked, staged or not."""
    base = subprocess.run(["git", "merge-base", ref, "HEAD"], cwd=REPO, capture_output=True, text=True)
    if base.returncode != 0:
        raise SystemExit(f"--changed {ref}: git merge-base failed: {base.stderr.strip()}")
    names = subprocess.run(["git", "diff", "--name-only", base.stdout.strip()], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    names += subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.split()
    return [p for p in only_mutate() if p in names]


def pick(args: argparse.Namespace) -> list[str]:
    modules = [module_of(p) for p in only_mutate()]
    if args.changed is not None:
        return [g for p in changed(args.changed) for g in glob_of(module_of(p))]
    if args.module:
        out: list[str] = []
        for name in args.module:
            full = name if name.startswith(("ort_gpu_matrix.", "ort_matrix_probe.")) else f"ort_gpu_matrix.{name}"
            if full in modules:
                out += glob_of(full)
            elif full.rpartition(".")[0] in modules:  # one function: module.function
                mod, _, fn = full.rpartition(".")
                out.append(f"{mod}.x_{fn}__mutmut_*")
            elif f"ort_matrix_probe.{name}" in modules:
                out += glob_of(f"ort_matrix_probe.{name}")
            else:
                raise SystemExit(f"--module {name!r}: not one of {', '.join(modules)} (or module.function)")
        return out
    return [g for m in modules for g in glob_of(m)]


def results() -> dict[str, str]:
    """Every mutant of the last run and its status, as `mutmut results --all true` prints them."""
    proc = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=REPO,
                          capture_output=True, text=True)
    out = {}
    for line in proc.stdout.splitlines():
        m = re.fullmatch(r"\s*(\S+__mutmut_\d+): (.+)", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def equivalents() -> dict[str, str]:
    data = tomllib.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    return {name: str(reason) for name, reason in data.get("equivalent", {}).items()}


def in_scope(name: str, globs: list[str]) -> bool:
    import fnmatch
    return any(fnmatch.fnmatchcase(name, g) for g in globs)


def summary(globs: list[str]) -> int:
    status = {n: s for n, s in results().items() if in_scope(n, globs)}
    equiv = equivalents()
    rows, bad = [], 0
    per: dict[str, Counter[str]] = {}
    for name, s in status.items():
        module = name.split(".x_")[0].split(".xǁ")[0]
        per.setdefault(module, Counter())["equivalent" if name in equiv and s == "survived" else s] += 1
    print("| module | mutants | killed | survived | no tests | timeout | segfault | equivalent | not run yet | score |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for module in sorted(per):
        c = per[module]
        total = sum(c.values())
        counted = total - c["equivalent"] - c["not checked"]  # a mutant not run yet has no outcome to score
        # a mutant whose test process crashed (segfault) was caught too: the tests did not pass under it
        killed = c["killed"] + c["timeout"] + c["caught by type check"] + c["segfault"]
        score = killed / counted if counted else 1.0
        bad += score < GOAL or c["not checked"] > 0
        rows.append(module)
        print(f"| {module} | {total} | {c['killed']} | {c['survived']} | {c['no tests']} | {c['timeout']} | "
              f"{c['segfault']} | {c['equivalent']} | {c['not checked']} | {f'{score:.1%}' if counted else 'not run'} |")
        other = set(c) - {"killed", "survived", "no tests", "timeout", "equivalent", "caught by type check",
                          "not checked", "segfault"}
        if other:
            print(f"|   {module}: also {dict((k, c[k]) for k in sorted(other))} | | | | | | | |")
    stale = [n for n in equiv if in_scope(n, globs) and status.get(n) not in ("survived", "not checked")]
    for n in stale:
        print(f"stale equivalent entry: {n} is {status.get(n, 'gone')} (edit {EQUIVALENT.relative_to(REPO)})")
    return 1 if bad or stale else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--changed", nargs="?", const="main", default=None, metavar="REF",
                    help="mutate only the files that differ from REF (default main)")
    ap.add_argument("--module", action="append", help="a module of only_mutate (compare, config.loader, "
                    "fdtap, ...) or module.function; repeatable")
    ap.add_argument("--summary", action="store_true", help="no run: score the last run's results")
    ap.add_argument("--max-children", type=int, default=2)
    args = ap.parse_args(argv)
    globs = pick(args)
    if not globs:
        print("no mutated file changed: nothing to run")
        return 0
    if not args.summary:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONPATH")}
        proc = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children),
                               *globs], cwd=REPO, env=env)
        if proc.returncode != 0:
            print(f"mutmut run exited {proc.returncode}", file=sys.stderr)
            return proc.returncode
    return summary(globs)


if __name__ == "__main__":
    sys.exit(main())

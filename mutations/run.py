"""Hand-written mutation testing: apply each mutant of mutations/mutants.toml to a fresh copy of the repo and
run the tests it names there; a mutant is killed when they fail.

    python mutations/run.py                     # every mutant, then docs/mutations.md
    python mutations/run.py --only ID1,ID2      # just these (the others keep their last recorded outcome)
    python mutations/run.py --check-baseline    # every listed test on the unmutated tree: all must pass
    python mutations/run.py --self-test         # prove the copy, not an installed checkout, is what runs

Standard library only (Python >= 3.11 for tomllib). Each mutant runs in its own tempfile.mkdtemp() copy of
the files git knows (tracked, and untracked but not ignored), with cwd and PYTHONPATH at the copy, so the
tests, nox's engine and the probe copied into the test venvs are the mutated code, never an editable install.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MUTANTS = REPO / "mutations" / "mutants.toml"
OUTCOMES = REPO / "mutations" / "outcomes.json"  # the last outcome of every mutant, so --only can update one
DOC = REPO / "docs" / "mutations.md"
KEYS = {"id", "file", "before", "after", "bug", "tests", "survives"}
REQUIRED = KEYS - {"survives"}
TIMEOUT_S = 900
NEW_TESTS = "tests/test_mutants.py"  # the killing tests this pass added
PYTEST = ["-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
# Variables of the caller that would change what the copy's tests run or where they write.
DROPPED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONPATH", "MATRIX_TOML", "MATRIX_RESULTS", "MATRIX_VENVS",
               "MATRIX_WHEELHOUSE", "MATRIX_OFFLINE", "MATRIX_KEEP_WORKDIR", "MATRIX_BASELINES", "VIRTUAL_ENV")


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    before: str
    after: str
    bug: str
    tests: tuple[str, ...]
    survives: str | None = None


@dataclass
class Outcome:
    status: str  # KILLED, SURVIVED, ERROR
    detail: str = ""  # the failing test, or why it is an ERROR
    exit_code: int | None = None
    seconds: float = 0.0
    tail: list[str] = field(default_factory=list)


def load_mutants() -> list[Mutant]:
    data = tomllib.loads(MUTANTS.read_text())
    out, seen = [], set()
    for i, table in enumerate(data.get("mutant", [])):
        unknown, missing = set(table) - KEYS, REQUIRED - set(table)
        if unknown or missing:
            raise SystemExit(f"{MUTANTS}: mutant #{i} ({table.get('id')}): unknown keys {sorted(unknown)}, "
                             f"missing keys {sorted(missing)}")
        if table["id"] in seen:
            raise SystemExit(f"{MUTANTS}: duplicate mutant id {table['id']!r}")
        seen.add(table["id"])
        if not table["tests"]:
            raise SystemExit(f"{MUTANTS}: mutant {table['id']!r} lists no tests")
        out.append(Mutant(table["id"], table["file"], table["before"], table["after"], table["bug"],
                          tuple(table["tests"]), table.get("survives")))
    return out


def repo_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, capture_output=True).stdout.decode().split("\0")
    return [f for f in listed if f and (REPO / f).is_file()]


def copy_tree(files: list[str]) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="mutant-"))
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target, follow_symlinks=False)
    return dest


def apply(tree: Path, m: Mutant) -> None:
    path = tree / m.file
    text = path.read_text()
    n = text.count(m.before)
    if n != 1:
        raise ValueError(f"{m.id}: `before` occurs {n} times in {m.file}, not exactly once: {m.before!r}")
    path.write_text(text.replace(m.before, m.after))


def env_for(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env["PYTHONPATH"] = str(tree)  # before site-packages: the copy's packages shadow any editable install
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def imported_from(tree: Path) -> None:
    """The copy's packages are what `python` imports there; fail loudly otherwise."""
    code = "import importlib.util as u; [print(u.find_spec(n).origin) for n in " \
           "('ort_gpu_matrix', 'ort_matrix_probe', 'sessions')]"  # found, not executed: a mutant may break it
    proc = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env_for(tree), capture_output=True, text=True)
    paths = proc.stdout.split()
    if proc.returncode != 0 or len(paths) != 3 or not all(Path(p).resolve().is_relative_to(tree.resolve()) for p in paths):
        raise SystemExit(f"the mutant copy {tree} is not what python imports there: {proc.stdout}{proc.stderr}")


def test_args(tests: tuple[str, ...]) -> list[str]:
    args: list[str] = []
    for t in tests:
        args += shlex.split(t) if t.startswith("-") else [t]
    return args


def run_tests(tree: Path, tests: tuple[str, ...], extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, *PYTEST, *extra, *test_args(tests)]
    return subprocess.run(cmd, cwd=tree, env=env_for(tree), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=TIMEOUT_S)


FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$")  # node ids may hold spaces: test_fault[a b]
COLLECT_ERROR = re.compile(r"^_+ ERROR collecting (\S+) _+$")


def classify(proc: subprocess.CompletedProcess[str]) -> Outcome:
    lines = proc.stdout.splitlines()
    failed = [m.group(1) for line in lines if (m := FAILED_LINE.match(line))]
    if proc.returncode == 0:
        return Outcome("SURVIVED", "", 0, tail=lines[-5:])
    if proc.returncode in (1, 2, 3):  # a test failed, or the mutant broke collection or pytest itself
        # the last one: a pytester test prints its inner session's FAILED lines before the outer summary
        return Outcome("KILLED", failed[-1] if failed else f"pytest exit {proc.returncode}", proc.returncode,
                       tail=lines[-15:])
    collecting = [m.group(1) for line in lines if (m := COLLECT_ERROR.match(line))]
    if proc.returncode == 4 and collecting:  # a node id of a module the mutant made unimportable
        return Outcome("KILLED", f"collection error in {collecting[0]}", 4, tail=lines[-15:])
    # 4: usage error (a node id that does not exist), 5: nothing collected: the test list is wrong, not the code
    return Outcome("ERROR", f"pytest exit {proc.returncode} (usage error or nothing collected: fix `tests`)",
                   proc.returncode, tail=lines[-15:])


def run_mutant(m: Mutant, files: list[str]) -> Outcome:
    tree = copy_tree(files)
    started = time.monotonic()
    try:
        apply(tree, m)
        imported_from(tree)
        try:
            out = classify(run_tests(tree, m.tests))
        except subprocess.TimeoutExpired:
            out = Outcome("KILLED", f"timed out after {TIMEOUT_S} s", None)
    except ValueError as exc:
        out = Outcome("ERROR", str(exc))
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    out.seconds = round(time.monotonic() - started, 1)
    return out


def check_baseline(mutants: list[Mutant], files: list[str]) -> int:
    """Every listed test passes on the unmutated tree, so a kill is the mutant's doing."""
    tests = tuple(dict.fromkeys(t for m in mutants for t in m.tests))
    tree = copy_tree(files)
    try:
        imported_from(tree)
        print(f"baseline: {len(tests)} test ids on the unmutated tree ...", flush=True)
        proc = subprocess.run([sys.executable, *[a for a in PYTEST if a != "-x"], "-rfE", *test_args(tests)],
                              cwd=tree, env=env_for(tree), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=TIMEOUT_S * 4)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    print("\n".join(proc.stdout.splitlines()[-25:]))
    if proc.returncode != 0:
        print(f"baseline FAILED (pytest exit {proc.returncode}): a test that fails unmutated gives false kills",
              file=sys.stderr)
    return proc.returncode


SELF_TESTS = [  # each must be KILLED, or the copy is not what runs
    Mutant("self-test-in-process", "ort_gpu_matrix/verdicts.py", "from __future__ import annotations\n",
           "from __future__ import annotations\nraise ImportError('mutant copy in use')\n", "import broken",
           ("tests/test_results.py::test_unchecked_coverage_is_one_key",)),
    Mutant("self-test-nox", "ort_gpu_matrix/harness.py", "from __future__ import annotations\n",
           "from __future__ import annotations\nraise ImportError('mutant copy in use')\n", "import broken",
           ("tests/test_verdicts.py::test_all_pass_passes",)),
    Mutant("self-test-probe", "ort_matrix_probe/plugin.py", "from __future__ import annotations\n",
           "from __future__ import annotations\nraise ImportError('mutant copy in use')\n", "import broken",
           ("tests/test_verdicts.py::test_all_pass_passes",)),
]


def self_test(files: list[str]) -> int:
    bad = 0
    for m in SELF_TESTS:
        out = run_mutant(m, files)
        print(f"{m.id}: {out.status} {out.detail} ({out.seconds} s)", flush=True)
        bad += out.status != "KILLED"
    return 1 if bad else 0


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "⏎")


def _code(text: str) -> str:
    text = _cell(text.strip()) or "(nothing)"
    return f"`` {text} ``"


def render(mutants: list[Mutant], outcomes: dict[str, dict[str, Any]],
           ran: list[str] | None = None) -> tuple[str, list[str]]:
    """The doc. `ran`: the ids this invocation ran, when it was an --only run (None: every row ran)."""
    problems = []
    rows, survivors = [], []
    counted = killed = 0
    for m in mutants:
        o = outcomes.get(m.id)
        if o is None:
            result = "NOT RUN"
            problems.append(f"{m.id}: not run yet")
        elif o["status"] == "KILLED":
            detail = next((t for t in m.tests if t.startswith(o["detail"])), o["detail"])
            result = f"KILLED by `{detail}`" + (" (new test)" if detail.startswith(NEW_TESTS) else "")
            counted += 1
            killed += 1
            if m.survives:
                problems.append(f"{m.id}: marked `survives` but KILLED by {o['detail']}: the reason is stale")
                result += " (stale `survives` reason)"
        elif o["status"] == "SURVIVED":
            counted += 1
            result = "SURVIVED" + (" (accepted, see below)" if m.survives else " (NO REASON)")
            survivors.append(m)
            if not m.survives:
                problems.append(f"{m.id}: SURVIVED without a reason: add a killing test or a `survives` reason")
        else:
            result = f"ERROR: {o['detail']}"
            problems.append(f"{m.id}: ERROR: {o['detail']}")
        rows.append(f"| {m.id} | `{m.file}` | {_code(m.before)} → {_code(m.after)} | {_cell(m.bug)} | {result} |")
    pct = f"{100 * killed / counted:.1f}%" if counted else "n/a"
    lines = [
        "# Mutation testing",
        "",
        "Hand-written, realistic one-line mutations over the verdict path, the runner, the probe, venvs and",
        "results (issue 7, \"Tests that bite\"), and over the sweep and report layer (issue 17): compare, baseline,",
        "typecheck, report, sweep, grouping, render/, the probe's fd capture and its library audit.",
        "Each mutant lives in `mutations/mutants.toml` (the file, an",
        "exact `before` that occurs once, its `after`, the bug it models and the tests that should catch it).",
        "`mutations/run.py` copies the repo into a fresh temp dir per mutant, applies it, and runs",
        "`python -m pytest -x -q -p no:cacheprovider -p no:xdist <tests>` there with cwd and `PYTHONPATH` at the copy",
        "(so nox's engine and the probe it installs into the test venvs are the mutated code, never an editable",
        "install; `--self-test` proves it with mutants that break an import). Exit 1-3 is a kill; 4 and 5",
        "(usage error, nothing collected) are an ERROR of the table, not a kill.",
        "",
        "    python mutations/run.py --check-baseline   # every listed test passes on the unmutated tree",
        "    python mutations/run.py                    # every mutant; writes this file",
        "    python mutations/run.py --only ID1,ID2     # some; the rest keep their outcome (mutations/outcomes.json)",
        "",
        "The run exits non-zero when a mutant survives without a `survives` reason, when an accepted survivor",
        "is killed (its reason is stale) or when a row is an ERROR.",
        "",
        "`--only` runs the rows it names and rewrites this file from `mutations/outcomes.json`, where every",
        "other row keeps the outcome of its own last run (which may predate later changes to the code or the",
        "tests). " + (f"This file was last written by an `--only` run of {len(ran)} of the {len(mutants)} rows "
                      f"({sum(outcomes.get(i, {}).get('status') == 'KILLED' for i in ran)} of them killed); the other "
                      f"{len(mutants) - len(ran)} show earlier outcomes, so the total below adds up runs made at "
                      "different times." if ran is not None else "This file was last written by a run of every row."),
        "",
        "The sweep-layer rows (issue 17) model bugs against promises the sweep makes, and are killed by",
        "tests/test_sweep_promises.py (comparison, grouping, selection, merging, cuDNN copies), tests/test_sweep_trust.py",
        "(real `nox -s sweep` / `nox -s report` rows: gates, baselines, outputs, hostile text, links) and",
        "tests/test_probe.py (overlapping runs, a token left in libc's stdout buffer); the scheduler is not covered here.",
        "",
        f"Rows killed by a test of `{NEW_TESTS}` (marked *new test*) survived every pre-existing test of the",
        "files that cover their code (tests/test_verdicts, test_census, test_guards, test_probe, test_results,",
        "the matching test_faults rows) when this pass began; those tests were added to kill them.",
        "",
        f"**Killed: {killed}/{counted} ({pct}).**",
        "",
        "| id | file | before → after | bug it models | result |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
        "## Survivors",
        "",
    ]
    if not survivors:
        lines.append("None.")
    for m in survivors:
        lines.append(f"- **{m.id}** ({m.bug}): {m.survives or 'NO REASON GIVEN'}")
    if problems:
        lines += ["", "## Problems", "", *[f"- {p}" for p in problems]]
    return "\n".join(lines) + "\n", problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--check-baseline", action="store_true", help="run every listed test unmutated, then stop")
    ap.add_argument("--self-test", action="store_true", help="prove the mutated copy is what the tests import")
    args = ap.parse_args()
    mutants = load_mutants()
    files = repo_files()
    if args.self_test:
        return self_test(files)
    chosen = mutants
    if args.only:
        wanted = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = set(wanted) - {m.id for m in mutants}
        if unknown:
            raise SystemExit(f"unknown mutant ids: {sorted(unknown)}")
        chosen = [m for m in mutants if m.id in wanted]
    if args.check_baseline:
        return check_baseline(chosen, files)
    for m in chosen:  # fail loudly, before spending minutes, on a `before` that is not there exactly once
        text = (REPO / m.file).read_text()
        if text.count(m.before) != 1:
            raise SystemExit(f"{m.id}: `before` occurs {text.count(m.before)} times in {m.file}: {m.before!r}")
    outcomes = json.loads(OUTCOMES.read_text()) if OUTCOMES.exists() else {}
    for i, m in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {m.id} ({m.file}) ...", end=" ", flush=True)
        out = run_mutant(m, files)
        print(f"{out.status} {out.detail} ({out.seconds} s)", flush=True)
        if out.status == "ERROR":
            print("    " + "\n    ".join(out.tail), flush=True)
        outcomes[m.id] = {"status": out.status, "detail": out.detail, "exit_code": out.exit_code,
                          "seconds": out.seconds}
        OUTCOMES.write_text(json.dumps({k: outcomes[k] for k in sorted(outcomes)}, indent=1) + "\n")
    ids = {m.id for m in mutants}
    outcomes = {k: v for k, v in outcomes.items() if k in ids}
    text, problems = render(mutants, outcomes, [m.id for m in chosen] if args.only else None)
    DOC.write_text(text)
    print(f"wrote {DOC}")
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""The bare recipe beside the harness, per test and per subtest (issue 46's H200 evidence).

    python3 bare.py RESULT_JSON OUT_LOG [VAR=VALUE ...]

Runs plain pytest in the venv the harness used (its interpreter, the suite's files and pythonpath, the
libraries the result says the test process had pinned, the extra variables given), with no probe and no
harness, in a fresh private dir, `-n 1 -v -o verbosity_subtests=1` so pytest prints every subtest. Then it
compares, per test, what pytest printed with the harness's result: each test's outcome as pytest called it
(the harness's report keeps that as `pytest_outcome` where it judges otherwise) and each subtest's outcome, in
order. Under xdist pytest 9.1 prints a subtest's params as the repr of their repr (`i='0'` for `i=0`), so
quotes are left out when two descriptions are compared. Prints one summary line and every difference.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

XDIST = ["-n", "1"]  # pytest prints each subtest of a unittest test only under xdist (else they go to its capture);
# one worker runs them in order, as the harness's one process does: ORT's ScatterND test writes into the cwd
LINE = re.compile(r"^\[gw\d+\] \[\s*\d+%\] (SUB)?(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)(.*?) (\S+\.py::\S+)\s*$")
WORD = {"PASSED": "passed", "FAILED": "failed", "SKIPPED": "skipped", "XFAIL": "xfailed", "XPASS": "xpassed",
        "ERROR": "error"}


def loose(description: str) -> str:
    return re.sub(r"['\"]", "", description.strip())


def bare(result: dict, extra: dict, log: Path) -> tuple[dict, dict, str, float]:
    suite_root = Path(result["command"][result["command"].index("--rootdir") + 1])
    files = [a for a in result["command"] if a.endswith(".py") and not a.startswith("-")]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH")}
    env.update({k: v for k, v in result["env"].items() if v is not None and k in ("LD_PRELOAD", "LD_LIBRARY_PATH",
                                                                                  "PYTHONPATH")})
    env.update(extra)
    python = os.path.join(result["venv"]["path"], "bin", "python")
    with tempfile.TemporaryDirectory() as work:  # 0700: ORT's ScatterND test writes its profiles into the cwd
        ini = Path(work) / "pytest.ini"
        ini.write_text("[pytest]\n")  # as the harness: no ini above the suite's root is read, no conftest above it
        start = time.monotonic()
        p = subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", "-c", str(ini), "--rootdir",
                            str(suite_root), "--confcutdir", str(suite_root), *XDIST, "-v", "-o",
                            "verbosity_subtests=1", *files], cwd=work, env=env, capture_output=True, text=True)
        took = time.monotonic() - start
    log.write_text(p.stdout + p.stderr)
    tests: dict[str, str] = {}
    subtests: dict[str, list[tuple[str, str]]] = {}
    for line in p.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        sub, word, description, nodeid = m.groups()
        if sub:
            subtests.setdefault(nodeid, []).append((loose(description), WORD[word]))
        else:
            tests[nodeid] = WORD[word]
    summary = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "(no output)"
    return _rooted(tests, work, suite_root), _rooted(subtests, work, suite_root), f"pytest exit {p.returncode}: {summary}", took


def _rooted(by_id: dict, work: str, root: Path) -> dict:
    """Ids as the harness has them, relative to the suite's root (pytest printed them relative to the cwd)."""
    out = {}
    for nodeid, value in by_id.items():
        path, sep, rest = nodeid.partition("::")
        out[os.path.relpath(os.path.normpath(os.path.join(work, path)), root) + sep + rest] = value
    return out


def harness(result: dict) -> tuple[dict, dict]:
    report = json.loads((Path(result["bundle"]) / "report.json").read_text())
    tests, subtests = {}, {}
    for nodeid, t in report["tests"].items():
        tests[nodeid] = t.get("pytest_outcome") or t["outcome"]
        subtests[nodeid] = [(loose(sid[len(nodeid):]), s["outcome"]) for sid, s in t.get("subtests", {}).items()]
    return tests, subtests


def main() -> int:
    result = json.loads(Path(sys.argv[1]).read_text())
    extra = dict(arg.split("=", 1) for arg in sys.argv[3:])
    b_tests, b_subs, said, took = bare(result, extra, Path(sys.argv[2]))
    h_tests, h_subs = harness(result)
    diffs = [f"test {n}: bare {b_tests.get(n)}, harness {h_tests.get(n)}"
             for n in sorted(set(b_tests) | set(h_tests)) if b_tests.get(n) != h_tests.get(n)]
    diffs += [f"subtests of {n}: bare {b_subs.get(n, [])}, harness {h_subs.get(n, [])}"
              for n in sorted(set(b_subs) | {k for k, v in h_subs.items() if v}) if b_subs.get(n, []) != h_subs.get(n, [])]
    subs = Counter(o for v in b_subs.values() for _, o in v)
    extra_text = " ".join(sys.argv[3:]) or "nothing"
    print(f"bare ({extra_text} set; {took:.1f} s): {said}; {len(b_tests)} tests, subtests {dict(sorted(subs.items()))}")
    print(f"harness: verdict {result['verdict']}, counts {result['counts']}")
    print(f"per test and per subtest: {'EQUAL' if not diffs else f'{len(diffs)} difference(s)'}")
    for d in diffs:
        print(f"  {d}")
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())

"""Judge stored H200 results by an expect file's tier rules and known failures, running nothing (issue 25).

    ORT_SOURCE=.ort-src python3 docs/evidence/tier-rules/check.py RESULT.json [EXPECT.toml]

Why: calibrate's file is reviewed by hand after the device run (rules merged, comments, findings), so the
reviewed file must be shown to hold on the very runs it was written from. This reads a result and its probe
report, loads the shipped matrix with expect_file pointing at EXPECT (default expect/ort_cuda_attention.toml),
and applies the engine's own tier judge (tierrules.judge) and known_failures matching, as the verdict does.
Exit 0 when no rule breaks, no rule is stale and every failure is known.
"""
from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from ort_gpu_matrix.config.loader import load_matrix  # noqa: E402
from ort_gpu_matrix.judge import tiers as tierrules  # noqa: E402
from ort_gpu_matrix.judge.verdicts import tests_of  # noqa: E402
from ort_gpu_matrix.plan.cells import cells_of  # noqa: E402


def main(argv: list[str]) -> int:
    result = Path(argv[0])
    expect = Path(argv[1] if len(argv) > 1 else REPO / "expect" / "ort_cuda_attention.toml").resolve()
    r = json.loads(result.read_text())
    report = json.loads((result.parent / "report.json").read_text()) if (result.parent / "report.json").exists() \
        else json.loads(Path(r["report"]).read_text())
    text = (REPO / "matrix.toml").read_text()
    head = "[suite.ort_cuda_attention]\n"
    text = re.sub(r'(?m)^expect_file = "expect/ort_cuda_attention.toml".*\n', "", text)
    with tempfile.TemporaryDirectory() as d:
        m = Path(d) / "matrix.toml"
        m.write_text(text.replace(head, head + f'expect_file = "{expect}"\n').replace('root = "suites/', f'root = "{REPO}/suites/'))
        cell = next(c for c in cells_of(load_matrix(m)) if c.name == r["cell"]["name"])
    exp = cell.suite.expect[r["mode"]]
    tests = tests_of(report)
    judged = tierrules.judge(exp.tiers, tests)
    failed = [t for t in tests if t.outcome in ("failed", "error")]
    unknown = [t.nodeid for t in failed if not any(re.search(k.test, t.nodeid) for k in exp.known_failures)]
    print(f"{result}: {len(tests)} tests, {sum(t.outcome == 'passed' for t in tests)} passed, {len(failed)} failed; "
          f"{len(exp.tiers)} tier rules, {len(exp.known_failures)} known failures ({expect.name})")
    for b in judged.reasons:
        print("  BROKEN:", b[:400])
    for s in judged.stale:
        print("  STALE:", s.rule.test)
    for n in unknown:
        print("  UNKNOWN FAILURE:", n)
    ok = not judged.reasons and not judged.stale and not unknown
    print("  every tier rule holds, none is stale, every failure is known" if ok else "  NOT OK")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What isolation (issue 22) costs: per test and per mode run, read from the probe's own clock.

    python bench/isolation.py RESULT.json [RESULT.json ...]

Each result's probe report (`report` in the result) holds, per test process, `isolation_s` (the time spent in
isolation.py's watch: the snapshots around each test and each wider-scoped fixture, the comparisons, the
undoing) and `isolation_tests` (the tests it watched), measured with perf_counter inside the process. The
share of a mode run is the busiest process's isolation time against the run's wall time (the workers run
side by side, so the run is longer by at most that). The target: <= 2% of a mode run. An A/B of whole runs
(isolation "off" against "restore", run-reproducible-h200.sh STEP=4) is the cross-check; its noise is larger
than what it measures. Nothing here is a test: a missed target is reported, not failed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def figures(result_path: Path) -> dict[str, object]:
    r = json.loads(result_path.read_text())
    report = json.loads(Path(r["report"]).read_text())
    procs = {k: v for k, v in (report.get("timings") or {}).items() if v.get("isolation_tests")}
    if not procs:
        raise SystemExit(f"{result_path}: its probe report has no isolation_s figures (isolation off, or an older probe)")
    spent = {k: float(v["isolation_s"]) for k, v in procs.items()}
    tests = sum(int(v["isolation_tests"]) for v in procs.values())
    wall = float(r["duration_s"])
    busiest = max(spent.values())
    return {"session": r["session"], "isolation": report.get("isolation"), "tests": tests,
            "processes": len(procs), "per_test_ms": round(1000 * sum(spent.values()) / tests, 3),
            "busiest_process_s": round(busiest, 3), "mode_run_s": wall,
            "share_of_mode_run": round(busiest / wall, 5), "target": 0.02, "met": busiest / wall <= 0.02}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for a in argv:
        f = figures(Path(a))
        print(f"{f['session']} (isolation {f['isolation']}): {f['tests']} tests in {f['processes']} process(es), "
              f"{f['per_test_ms']} ms a test; busiest process {f['busiest_process_s']} s of a {f['mode_run_s']} s "
              f"mode run = {100 * float(f['share_of_mode_run']):.2f}% (target <= 2%: {'met' if f['met'] else 'MISSED'})")
        print(json.dumps(f))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

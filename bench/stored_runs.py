"""Every run stored in a results dir, one JSON list in sweep-timeline.json's shape (session, started, ended) plus what
a schedule must not change: its -n and how many SdpaKernel lines of each tier its tests printed.

    python bench/stored_runs.py RESULTS_DIR > runs.json

A run's `ended` is its start plus its duration, which leaves out its harness's own start (and an early teeth's wait).
bench/util_phases.py reads the list as a timeline. Nothing here is a test.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path


def stored_runs(results: Path) -> list[dict]:
    runs = []
    for p in sorted(results.glob("runs/*/*/result.json")):
        r = json.loads(p.read_text())
        start = datetime.fromisoformat(r["started"]).timestamp()
        cmd = r.get("command") or []
        ns = [cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "-n"]  # the last one wins
        lines = Counter(t for tiers in (r.get("dispatch") or {}).get("tests", {}).values() for t in tiers)
        runs.append({"session": r["session"], "run_id": r.get("run_id"), "started": start,
                     "ended": start + float(r["duration_s"]),
                     "n": ns[-1] if ns else None,
                     "tier_lines": dict(sorted(lines.items()))})
    return runs


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(json.dumps(stored_runs(Path(sys.argv[1])), indent=1))

"""Judge the stored H200 runs of docs/evidence/subtests again with this engine (reports and junit from the bundles).

    mkdir -p /tmp/st && tar -xzf docs/evidence/subtests/results-a.tar.gz -C /tmp/st
    PYTHONPATH=. ORT_SOURCE=$PWD/.ort-src python3 docs/evidence/subtests/rejudge.py /tmp/st

The runs were judged by the engine of their day; this says whether today's judges them the same, verdict,
reasons and counts (pytest's log is not stored, so its summary line is not checked here).
"""
import json
import sys
from pathlib import Path

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.execute.junit import read
from ort_gpu_matrix.execute.probe_report import read_report
from ort_gpu_matrix.judge.verdicts import Standard, judge, outcome_judge
from ort_gpu_matrix.judge.witnesses import Evidence
from ort_gpu_matrix.plan.cells import cells_of

root = Path(sys.argv[1])
cells = {c.name: c for c in cells_of(load_matrix(Path("docs/evidence/subtests/matrix.toml")))}
for f in sorted(root.glob("st-*-normal.json")):
    r = json.loads(f.read_text())
    bundle = root / "runs" / r["session"] / Path(r["bundle"]).name
    report, sha, problem = read_report(bundle / "report.json")
    cell = cells[r["cell"]["name"]]
    ev = Evidence(r["pytest_exit_code"], report, sha, problem, sha, read(bundle / "junit.xml"), None, None,
                  meant_env={k: v for k, v in r["env"].items() if v is not None and k in ("CUDA_VISIBLE_DEVICES",)})
    pinned = tuple(p for p in (r["libraries"].get("pinned") or {}).values() if p)
    std = Standard(outcome_judge("normal"), cell.suite.expect["normal"], pinned, r["venv"]["path"], cell.name)
    v = judge(ev, std)
    same = (v.status.value == r["verdict"], len(v.reasons) == len(r["reasons"]), v.counts.__dict__ == r["counts"])
    print(f"{r['session']}: stored {r['verdict']} ({len(r['reasons'])} reasons), now {v.status.value} "
          f"({len(v.reasons)} reasons); verdict/reasons/counts same: {same}")
    for a in v.reasons:
        if a not in r["reasons"]:
            print("   new:", a[:200])
    for a in r["reasons"]:
        if a not in v.reasons:
            print("   gone:", a[:200])

"""The two-GPU evidence as Markdown: the GPU of each result, the timelines, the walls and their ratios, the verdicts.

    python3 summary.py --one RESULTS_ONE --two RESULTS_TWO --anchor anchor.json --walls walls.tsv

Every number printed is read from what the runs wrote: each result's `gpu` and `verdict`, each
sweep's sweep-timeline.json, the anchor's JSON, and the walls the run script measured.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def results(d: Path) -> dict[str, dict]:
    sweep = json.loads((d / "sweep.json").read_text())
    return {c["session"]: json.loads(Path(c["result"]).read_text()) for c in sweep["cells"]}


def timeline(d: Path) -> list[str]:
    rows = json.loads((d / "sweep-timeline.json").read_text())
    t0 = min(r["started"] for r in rows)
    out = ["| cell | GPU | start (s) | end (s) | exit |", "| --- | --- | --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: r["started"]):
        out.append(f"| {r['cell']} | {r['gpu']} | {r['started'] - t0:.1f} | {r['ended'] - t0:.1f} | {r['exit']} |")
    return out


def outside_pytest(d: Path, res: dict[str, dict]) -> list[str]:
    """Per cell: its wall in the timeline against the sum of its modes' pytest durations (the results say)."""
    rows = json.loads((d / "sweep-timeline.json").read_text())
    out = ["| cell | cell wall (s) | pytest, sum of its modes (s) | outside pytest (s) |", "| --- | --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: r["started"]):
        inside = sum(x["duration_s"] for x in res.values() if x["cell"]["name"] == r["cell"])
        wall = r["ended"] - r["started"]
        out.append(f"| {r['cell']} | {wall:.1f} | {inside:.1f} | {wall - inside:.1f} |")
    return out


def overlaps(d: Path) -> list[tuple[str, str]]:
    rows = json.loads((d / "sweep-timeline.json").read_text())
    return [(a["cell"], b["cell"]) for i, a in enumerate(rows) for b in rows[i + 1:]
            if a["gpu"] != b["gpu"] and a["started"] < b["ended"] and b["started"] < a["ended"]]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--one", type=Path, required=True)
    p.add_argument("--two", type=Path, required=True)
    p.add_argument("--anchor", type=Path, required=True)
    p.add_argument("--walls", type=Path, required=True)
    a = p.parse_args()
    walls = dict(line.split("\t")[:2] for line in a.walls.read_text().splitlines() if line.strip())
    walls_f = {k: float(v) for k, v in walls.items()}
    anchor = json.loads(a.anchor.read_text())
    one, two = results(a.one), results(a.two)
    print("### Where each mode ran (`--gpus 0,1`)\n")
    print("| session | verdict | CUDA_VISIBLE_DEVICES | index | UUID | name |\n| --- | --- | --- | --- | --- | --- |")
    for s, r in two.items():
        g = r.get("gpu") or {}
        print(f"| {s} | {r['verdict']} | {g.get('cuda_visible_devices')} | {g.get('index')} | {g.get('uuid')} |"
              f" {g.get('name')} |")
    uuids = {(r.get("gpu") or {}).get("uuid") for r in two.values()}
    print(f"\nDistinct GPU UUIDs across the results: {len(uuids)} ({', '.join(sorted(map(str, uuids)))})\n")
    print("### Timeline, `--gpus 0,1`\n")
    print("\n".join(timeline(a.two)))
    pairs = overlaps(a.two)
    print(f"\nCells on different GPUs that overlapped in time: {len(pairs)} pairs\n")
    print("### Timeline, `--gpus 0`\n")
    print("\n".join(timeline(a.one)))
    print("\n### Where the time went: the harness outside pytest\n")
    print("`--gpus 0,1`:\n")
    print("\n".join(outside_pytest(a.two, two)))
    print("\n`--gpus 0`:\n")
    print("\n".join(outside_pytest(a.one, one)))
    print("\n### Verdicts: one GPU against two\n")
    print("| session | `--gpus 0` | `--gpus 0,1` | same |\n| --- | --- | --- | --- |")
    same = True
    for s in sorted(set(one) | set(two)):
        v1, v2 = one.get(s, {}).get("verdict"), two.get(s, {}).get("verdict")
        same &= v1 == v2
        print(f"| {s} | {v1} | {v2} | {'yes' if v1 == v2 else '**no**'} |")
    print(f"\nEvery verdict matches: {'yes' if same else 'NO'}\n")
    print("### Wall times\n")
    print("| run | wall (s) |\n| --- | --- |")
    for k, v in walls_f.items():
        print(f"| {k} | {v:.1f} |")
    print(f"| anchor (the pytest commands by hand, one queue per GPU; measured inside) | {anchor['wall_s']:.1f} |")
    t1 = walls_f["sweep --gpus 0"]
    for k in sorted(walls_f):
        if k.startswith("sweep --gpus 0,1"):
            print(f"\n- `{k}` / `--gpus 0` = {walls_f[k] / t1:.3f} (target <= 0.7)")
            ta = walls_f[k.replace("sweep --gpus 0,1", "anchor")]
            print(f"- `{k}` / anchor{k[len('sweep --gpus 0,1'):]} (measured next to it) = {walls_f[k] / ta:.3f}"
                  " (target <= 1.1)")
    print("\n### Anchor runs\n")
    print("| session | GPU | start (s) | end (s) | pytest exit |\n| --- | --- | --- | --- | --- |")
    for r in sorted(anchor["runs"], key=lambda r: r["started"]):
        print(f"| {r['session']} | {r['gpu']} | {r['started'] - anchor['start']:.1f} | {r['ended'] - anchor['start']:.1f}"
              f" | {r['exit']} |")


if __name__ == "__main__":
    main()

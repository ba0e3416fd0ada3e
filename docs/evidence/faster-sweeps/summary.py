"""The faster-sweeps evidence as Markdown, from what the runs wrote: walls, ratios, GPUs, timelines, teeth.

    python3 summary.py STATE_DIR

STATE_DIR is what run-faster-sweeps-h200.sh keeps between its stages: walls.tsv (name, seconds, exit,
results dir) and the results dirs it names. Every number is read from there: the walls the script
measured, each result's `gpu`, `verdict`, `duration_s` and `teeth_coverage`, each sweep-timeline.json,
and the anchors' JSON. A stage that has not run yet is left out.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def walls(state: Path) -> list[tuple[str, float, int, Path]]:
    rows = []
    for line in (state / "walls.tsv").read_text().splitlines():
        name, seconds, code, where = line.split("\t")
        rows.append((name, float(seconds), int(code), Path(where)))
    return rows


def of(rows, prefix: str) -> list[tuple[str, float, int, Path]]:
    return [r for r in rows if r[0].startswith(prefix + " #")]


def results(d: Path) -> dict[str, dict]:
    sweep = json.loads((d / "sweep.json").read_text())
    return {c["session"]: json.loads(Path(c["result"]).read_text()) for c in sweep["cells"]}


def ratios(a_rows, b_rows, label: str, target: float) -> list[str]:
    pairs = list(zip(a_rows, b_rows, strict=False))  # an A without its B yet is left out
    if not pairs:
        return []
    out = [f"| pair | {label} | ratio |", "| --- | --- | --- |"]
    values = []
    for (an, a, ac, _), (bn, b, bc, _) in pairs:
        values.append(a / b)
        out.append(f"| {an} / {bn} | {a:.1f} s / {b:.1f} s (exit {ac}, {bc}) | {a / b:.3f}x |")
    med = statistics.median(values)
    out += ["", f"Median {med:.3f}x, target <= {target}x: {'met' if med <= target else 'NOT met'}."]
    return out


def timeline(d: Path) -> list[str]:
    rows = sorted(json.loads((d / "sweep-timeline.json").read_text()), key=lambda r: r["started"])
    t0 = min(r["started"] for r in rows)
    out = ["| mode run | GPU | slot | predicted (s) | start (s) | end (s) | exit |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        p = "-" if r.get("predicted_s") is None else f"{r['predicted_s']:.1f}"
        out.append(f"| {r['session']} | {r['gpu']} | {r['slot']} | {p} | {r['started'] - t0:.1f} | "
                   f"{r['ended'] - t0:.1f} | {r['exit']} |")
    return out


def gpus(d: Path) -> list[str]:
    out = ["| session | verdict | CUDA_VISIBLE_DEVICES | UUID | name |", "| --- | --- | --- | --- | --- |"]
    for s, r in sorted(results(d).items()):
        g = r.get("gpu") or {}
        out.append(f"| {s} | {r['verdict']} | {g.get('cuda_visible_devices')} | {g.get('uuid')} | {g.get('name')} |")
    return out


def teeth(d: Path) -> dict:
    (r,) = [r for r in results(d).values() if r["mode"] == "teeth"]
    return r


def scope(rows) -> list[str]:
    alls, scoped = of(rows, "scope all"), of(rows, "scope cudnn")
    if not alls or not scoped:
        return []
    out = ["| run | nox wall (s) | teeth pytest (s) | collected | bitten | toothless | verdict |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    durations: dict[str, list[float]] = {"all": [], "cudnn": []}
    covs = {}
    for name, wall, _, d in [*alls, *scoped]:
        r = teeth(d)
        cov = r["teeth_coverage"]
        kind = cov.get("scope", "all")
        durations[kind].append(r["duration_s"])
        covs[kind] = cov
        out.append(f"| {name} | {wall:.1f} | {r['duration_s']:.1f} | {r['counts']['collected']} | {cov.get('bitten')} | "
                   f"{cov.get('toothless')} | {r['verdict']} |")
    med = statistics.median(durations["cudnn"]) / statistics.median(durations["all"])
    same = all(covs["all"].get(k) == covs["cudnn"].get(k)
               for k in ("cudnn_tests", "bitten_tests", "declared_toothless", "undeclared_toothless"))
    out += ["", f"teeth pytest time, scoped over unscoped (medians): {med:.3f}x, target <= 0.8x: "
                f"{'met' if med <= 0.8 else 'NOT met'}.",
            f"The same cuDNN tests, bitten and toothless, test by test, in both scopes: {'yes' if same else 'NO'}."]
    return out


def main() -> None:
    state = Path(sys.argv[1])
    rows = walls(state)
    print("# Faster sweeps on the H200 x2: what the runs wrote\n")
    print("## Walls\n")
    print("| run | wall (s) | exit |\n| --- | --- | --- |")
    for name, seconds, code, _ in rows:
        print(f"| {name} | {seconds:.1f} | {code} |")
    two, one = of(rows, "two"), of(rows, "one")
    if two and one:
        print("\n## `--gpus 0,1` against `--gpus 0`, A B A B\n")
        print("\n".join(ratios(two, one, "--gpus 0,1 / --gpus 0", 0.66)))
        print(f"\n### The GPU of each result ({two[0][0]})\n")
        print("\n".join(gpus(two[0][3])))
        for name, _, _, d in (two[0], one[0]):
            print(f"\n### Timeline of {name}\n")
            print("\n".join(timeline(d)))
    anchors = of(rows, "anchor")
    if anchors and two:
        print("\n## Against the hand-started two-queue anchor (the same pytest commands, the sweep's queues)\n")
        print("\n".join(ratios([two[0]] * len(anchors), anchors, "sweep / anchor", 1.0)))
    if of(rows, "scope all"):
        print("\n## teeth_scope = \"cudnn\" against \"all\", A B A B\n")
        print("\n".join(scope(rows)))
    s2, s1 = of(rows, "slots2"), of(rows, "slot1")
    if s2 and s1:
        print("\n## One GPU: `--gpus 0 --slots-per-gpu 2` against `--gpus 0`\n")
        print("\n".join(ratios(s2, s1, "2 slots / 1 slot", 0.66)))
        print(f"\n### Timeline of {s2[0][0]}\n")
        print("\n".join(timeline(s2[0][3])))


if __name__ == "__main__":
    main()

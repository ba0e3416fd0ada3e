"""What each way ORT can tell node placement costs, and what each sees: one process, the installed onnxruntime.

    python3 bench/placement_ways.py [--model M.onnx | --chain N] [--builds K] [--runs R]
                                    [--providers CUDAExecutionProvider,CPUExecutionProvider] [--out FILE.json]

A model (an ONNX file, or by default a generated chain of N elementwise nodes, optionally ending in an op the CUDA
EP has no kernel for: `--tail Unique`) is built K times and run R times per build, for each way, the ways in
alternating order (forward, then backward) so drift on a shared host hits each alike:

- none: the baseline, a session as a test builds it;
- api: `session.record_ep_graph_assignment_info=1` in the session's config, and
  `get_provider_graph_assignment_info()` after the build (ORT >= 1.24; the probe's way, ort_matrix_probe/placement.py);
- log: `SessionOptions.log_severity_level = 0`, fd 2 sent to a file while the session is built and run, and ORT's
  `Node(s) placed on [EP]` lines parsed (the nodes under each, or `All nodes placed on [EP]` with only a count);
- profile: `enable_profiling`, `end_profiling()` after the runs, and each Node event's `args.provider` in its JSON
  (it sees only the nodes that ran, and only once a run is over).

Printed per way: the median build time, the median time of one run, the median time to read the placement back
(parse the log, end and parse the profile, ask the API), and what it saw: the node -> EP map, checked against the
other ways'. The model is made before any timing, from protobuf bytes written here (onnx is never imported), and
the feeds from the session's own input metadata. Nothing here is a test.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

RECORD_KEY = "session.record_ep_graph_assignment_info"
WAYS = ("none", "api", "log", "profile")
CHAIN_OPS = ("Add", "Relu", "Mul", "Sigmoid")  # Add and Mul take the previous output twice
_PLACED = re.compile(r"(All nodes|Node\(s\)) placed on \[(\w+)\]\. Number of nodes: (\d+)")
_NODE_LINE = re.compile(r"\]\s{2,}(\S+) \((.*)\)\s*$")  # `  OpType (name)` under a Node(s) placed line
_KERNEL = "_kernel_time"
_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
          "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}

# ---------------------------------------------------------------- a model without onnx: protobuf by hand


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _value_info(name: str, dim: str | None) -> bytes:
    """A float tensor of one dimension named `dim` (a ValueInfoProto), or of unknown shape where dim is None."""
    tensor = _field(1, 1) + (_field(2, _field(1, _field(2, dim))) if dim else b"")
    return _field(1, name) + _field(2, _field(1, tensor))


def chain_model(n: int, tail: str | None = None) -> tuple[bytes, list[str]]:
    """A graph of n elementwise nodes in a chain (and `tail` after them), IR 8 and opset 17 so that any ORT since 1.14
    loads it; and its node names."""
    nodes, names, prev = [], [], "x"
    ops = [CHAIN_OPS[i % len(CHAIN_OPS)] for i in range(n)] + ([tail] if tail else [])
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        inputs = [prev, prev] if op in ("Add", "Mul") else [prev]
        name = f"{op.lower()}_{i}"
        nodes.append(b"".join(_field(1, x) for x in inputs) + _field(2, out) + _field(3, name) + _field(4, op))
        names.append(name)
        prev = out
    graph = (b"".join(_field(1, node) for node in nodes) + _field(2, "chain") + _field(11, _value_info("x", "n"))
             + _field(12, _value_info("y", None)))
    return _field(1, 8) + _field(8, _field(1, "") + _field(2, 17)) + _field(7, graph), names


def feeds(session: Any, size: int) -> dict[str, np.ndarray]:
    """An input of each declared type, every unknown dimension `size` long (values 1..k, so Unique keeps them)."""
    out = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else size for d in arg.shape]
        count = int(np.prod(shape)) if shape else 1
        out[arg.name] = (np.arange(count) % 97 + 1).astype(_TYPES.get(arg.type, np.float32)).reshape(shape)
    return out


# ---------------------------------------------------------------- the ways

@contextlib.contextmanager
def fd2_to(path: Path) -> Iterator[None]:
    """fd 2 into `path` (native writes too), then back."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def parse_log(text: str) -> dict[str, str]:
    """ORT's verbose placement lines: node -> EP; `*` -> EP where it said only that all nodes went to one EP."""
    seen: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = _PLACED.search(line)
        if m:
            current = m.group(2)
            if m.group(1) == "All nodes":
                seen["*"] = f"{current} ({m.group(3)} nodes)"
            continue
        n = _NODE_LINE.search(line) if current and "VerifyEachNodeIsAssignedToAnEp" in line else None
        if n:
            seen[n.group(2)] = current
    return seen


def parse_profile(path: str) -> dict[str, str]:
    events = json.loads(Path(path).read_text())
    return {e["name"][: -len(_KERNEL)]: e["args"]["provider"] for e in events
            if e.get("cat") == "Node" and e.get("name", "").endswith(_KERNEL) and "provider" in e.get("args", {})}


def read_api(session: Any) -> dict[str, str]:
    return {str(node.name): str(sub.ep_name) for sub in session.get_provider_graph_assignment_info()
            for node in sub.get_nodes()}


def options_for(way: str, scratch: Path) -> ort.SessionOptions:
    options = ort.SessionOptions()
    if way == "api":
        options.add_session_config_entry(RECORD_KEY, "1")
    elif way == "log":
        options.log_severity_level = 0
    elif way == "profile":
        options.enable_profiling = True
        options.profile_file_prefix = str(scratch / "profile")
    return options


def one_build(way: str, model: bytes, providers: list[str], runs: int, size: int, scratch: Path) -> dict[str, Any]:
    """Build once and run `runs` times the way `way` asks; the seconds of each phase, and what it saw."""
    log = scratch / "ort.log"
    log.write_bytes(b"")
    quiet = fd2_to(log) if way == "log" else contextlib.nullcontext()
    options = options_for(way, scratch)
    with quiet:
        t0 = time.perf_counter()
        session = ort.InferenceSession(model, options, providers=providers)
        t1 = time.perf_counter()
        feed = feeds(session, size)
        t2 = time.perf_counter()
        for _ in range(runs):
            session.run(None, feed)
        t3 = time.perf_counter()
    seen: dict[str, str] | str = {}
    if way == "api":
        seen = _or_why(lambda: read_api(session))
    elif way == "log":
        seen = parse_log(log.read_text(errors="replace"))
    elif way == "profile":
        seen = _or_why(lambda: parse_profile(session.end_profiling()))
    t4 = time.perf_counter()
    for leftover in scratch.glob("profile*.json"):
        leftover.unlink()
    return {"build_s": t1 - t0, "run_s": (t3 - t2) / max(runs, 1), "read_s": t4 - t3, "seen": seen,
            "providers": session.get_providers()}


def _or_why(read: Callable[[], dict[str, str]]) -> dict[str, str] | str:
    try:
        return read()
    except Exception as exc:  # an ORT without the API, or a profile it did not write: say so, never guess
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


# ---------------------------------------------------------------- the comparison

def agree(seen: dict[str, dict[str, str] | str], names: list[str] | None) -> list[str]:
    """Where the ways' maps differ: each way against the API's map (else the first full map), `*` read as every node."""
    maps = {way: m for way, m in seen.items() if isinstance(m, dict) and m}
    ref_way = "api" if "api" in maps else next((w for w in maps if "*" not in maps[w]), None)
    if ref_way is None:
        return ["no way gave a node -> EP map to compare with"]
    ref = maps[ref_way]
    out = []
    for way, m in maps.items():
        if way == ref_way:
            continue
        if "*" in m:
            ep, count = m["*"].split(" (")[0], int(m["*"].split("(")[1].split()[0])
            off = sorted(n for n, e in ref.items() if e != ep)
            if off or count != len(ref):
                out.append(f"{way}: all {count} node(s) on {ep}; {ref_way}: {len(ref)} node(s), off it: {off}")
            continue
        only_ran = way == "profile"  # the profile sees the nodes that ran: a node of the graph may be missing
        diff = sorted(n for n in set(ref) | set(m) if ref.get(n) != m.get(n) and not (only_ran and n not in m))
        if diff:
            out.append(f"{way} differs from {ref_way} on {diff[:8]}: " + "; ".join(
                f"{n}: {m.get(n)} vs {ref.get(n)}" for n in diff[:8]))
    if names is not None and set(ref) != set(names) and ref_way == "api":
        out.append(f"note: ORT's graph has other nodes than the model's (its optimizers, copies): "
                   f"{sorted(set(ref) ^ set(names))[:8]}")
    return out


def bench(model: bytes, names: list[str] | None, providers: list[str], builds: int, runs: int,
          size: int) -> dict[str, Any]:
    per: dict[str, list[dict[str, Any]]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="placement-ways-") as tmp:
        scratch = Path(tmp)
        for way in WAYS:  # one untimed build each first: ORT's and the EP's first-use costs fall on none of them
            one_build(way, model, providers, 1, size, scratch)
        for k in range(builds):
            for way in WAYS if k % 2 == 0 else tuple(reversed(WAYS)):
                per[way].append(one_build(way, model, providers, runs, size, scratch))
    rows = {}
    for way, got in per.items():
        rows[way] = {"build_ms": round(statistics.median(g["build_s"] for g in got) * 1e3, 3),
                     "run_us": round(statistics.median(g["run_s"] for g in got) * 1e6, 1),
                     "read_ms": round(statistics.median(g["read_s"] for g in got) * 1e3, 3),
                     "seen": got[-1]["seen"], "served": got[-1]["providers"]}
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="an ONNX file (default: a generated chain)")
    ap.add_argument("--chain", type=int, default=64, help="nodes in the generated chain")
    ap.add_argument("--tail", help="an op after the chain (Unique: no CUDA kernel, so it lands on the CPU EP)")
    ap.add_argument("--builds", type=int, default=10, help="builds per way (K)")
    ap.add_argument("--runs", type=int, default=20, help="runs per build (R)")
    ap.add_argument("--size", type=int, default=1024, help="the length of each input's unknown dimensions")
    ap.add_argument("--providers", default="CPUExecutionProvider", help="comma-separated, in ORT's order")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.model:
        model, names = args.model.read_bytes(), None
    else:
        model, names = chain_model(args.chain, args.tail)
    providers = [p for p in args.providers.split(",") if p]
    rows = bench(model, names, providers, args.builds, args.runs, args.size)
    base = rows["none"]
    print(f"onnxruntime {ort.__version__}, providers {providers}, served {base['served']}; "
          f"{'model ' + str(args.model) if args.model else f'a chain of {args.chain} node(s)'}"
          f"{' then ' + args.tail if args.tail and not args.model else ''}; {args.builds} builds x {args.runs} runs per way")
    print(f"{'way':8} {'build ms':>10} {'x none':>7} {'run us':>10} {'x none':>7} {'read ms':>9}  saw")
    for way, r in rows.items():
        seen = r["seen"]
        counts = {} if isinstance(seen, str) else _count(seen)
        said = seen if isinstance(seen, str) else "-" if not seen else f"{sum(counts.values())} node(s): " + ", ".join(
            f"{ep.removesuffix('ExecutionProvider')} x{n}" for ep, n in counts.items())
        print(f"{way:8} {r['build_ms']:10.3f} {r['build_ms'] / base['build_ms']:7.3f} {r['run_us']:10.1f} "
              f"{r['run_us'] / base['run_us']:7.3f} {r['read_ms']:9.3f}  {said}")
    differences = agree({way: r["seen"] for way, r in rows.items() if way != "none"}, names)
    print("maps agree" if not differences else "maps differ:\n  " + "\n  ".join(differences))
    if args.out:
        args.out.write_text(json.dumps({"ort": ort.__version__, "providers": providers, "builds": args.builds,
                                        "runs": args.runs, "ways": rows, "differences": differences}, indent=1) + "\n")
    return 0


def _count(seen: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, ep in seen.items():
        if name == "*":
            ep, n = ep.split(" (")[0], int(ep.split("(")[1].split()[0])
            out[ep] = out.get(ep, 0) + n
        else:
            out[ep] = out.get(ep, 0) + 1
    return out


if __name__ == "__main__":
    sys.exit(main())

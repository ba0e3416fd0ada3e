"""bench/placement_ways.py runs on the CPU wheel and reads the same placement every way ORT tells it; nothing here
is timed. It also pins what the bench found: the assignment API records the partitioner's nodes, before ORT's
EP-specific fusions, where the verbose log and the profile see the fused graph."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

from helpers import REPO, SUITES

BENCH = REPO / "bench" / "placement_ways.py"


def _bench_module():
    spec = importlib.util.spec_from_file_location("_placement_ways", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> str:
    proc = subprocess.run([sys.executable, str(BENCH), "--builds", "1", "--runs", "1", *args], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_way_sees_the_chain_on_the_cpu_and_the_maps_agree():
    out = _run("--chain", "8", "--tail", "Unique")
    lines = out.splitlines()
    assert lines[0].startswith("onnxruntime 1.32.0, providers ['CPUExecutionProvider']"), out
    saw = {line.split()[0]: line.split("  ")[-1].strip() for line in lines[2:6]}
    assert saw == {"none": "-", "api": "9 node(s): CPU x9", "log": "9 node(s): CPU x9",
                   "profile": "9 node(s): CPU x9"}, out
    assert lines[6] == "maps agree", out


def test_the_api_sees_the_nodes_before_fusion_and_the_log_and_profile_after(tmp_path):
    loaded = importlib.util.spec_from_file_location("_tinyort", SUITES / "tinyort.py")
    tinyort = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(tinyort)
    model = tmp_path / "add_gelu.onnx"
    model.write_bytes(tinyort.add_then("Gelu"))
    out = _run("--model", str(model), "--size", "4")
    assert "api           " in out and "2 node(s): CPU x2" in out, out
    assert "maps differ:\n  log: all 1 node(s) on CPUExecutionProvider; api: 2 node(s), off it: []\n" in out, out
    assert "profile differs from api on ['BiasGelu']" in out, out


def test_the_log_parser_reads_each_eps_nodes_and_the_all_on_one_line():
    ways = _bench_module()
    prefix = "2026-12-05 02:21:02.6 [V:onnxruntime:, session_state.cc:1601 VerifyEachNodeIsAssignedToAnEp]"
    split = "\n".join([
        f"{prefix} Node placements",
        f"{prefix}  Node(s) placed on [CUDAExecutionProvider]. Number of nodes: 2",
        f"{prefix}   Add (add)",
        f"{prefix}   MemcpyToHost (Memcpy)",
        f"{prefix}  Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1",
        f"{prefix}   Unique (my unique)",
        "2026-12-05 [I:onnxruntime:, inference_session.cc:3424 operator()] Session successfully initialized.",
        f"{prefix.replace('VerifyEach', 'Other')}   Relu (not a placement line)"])
    assert ways.parse_log(split) == {"add": "CUDAExecutionProvider", "Memcpy": "CUDAExecutionProvider",
                                     "my unique": "CPUExecutionProvider"}
    assert ways.parse_log(f"{prefix}  All nodes placed on [CPUExecutionProvider]. Number of nodes: 5") == {
        "*": "CPUExecutionProvider (5 nodes)"}
    assert ways.agree({"api": {"a": "X", "b": "Y"}, "log": {"*": "X (2 nodes)"}}, None) == [
        "log: all 2 node(s) on X; api: 2 node(s), off it: ['b']"]
    assert ways.agree({"api": {"a": "X"}, "profile": {}}, ["a"]) == []  # a profile of no run sees nothing

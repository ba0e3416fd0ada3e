"""The node census in reports, from a real run: the `nodes` fixture suite run by the real nox on the CPU wheel (its
stand-in CUDA EP leaves Unique and Shape on the CPU EP, as ORT leaves them: tests/fixtures/suites/cudastandin.py),
then `nox -s report` over the results it stored, in the terminal, report.md and report.html.
"""
from __future__ import annotations

import re

from helpers import CELL, SUITES

ROOT = SUITES / "nodes"
T = "test_nodes.py::"
CPU = "CPUExecutionProvider"
TITLE = "CUDA sessions with nodes on the CPU"


def test_the_report_names_the_ops_each_function_ran_on_the_cpu_and_lists_each_node_by_op(harness, tmp_path):
    run = harness.run(["test_nodes.py"], root=ROOT, pythonpath=[".", ".."])
    assert run.result("normal")["ep"]["nodes_taken"] is True, run.output[-3000:]
    out = tmp_path / "report"
    text = harness.nox("-s", "report", "--", str(harness.results), "--out", str(out)).output

    def row(name: str) -> str:
        return next(line for line in text.splitlines() if line.strip().startswith(f"{name} "))

    # function, cases, no tier (none is printed), CUDA runs, fallbacks, ops on CPU, broken rule
    assert row("test_unique").split() == ["test_unique", "1", "1", "2", "-", "Unique", "-"], text[-5000:]
    assert row("test_relu").split() == ["test_relu", "1", "1", "1", "-", "-", "-"]
    assert row("test_shape").split() == ["test_shape", "1", "1", "1", "-", "1", "shape", "-"]  # counted apart
    assert row("test_unique_built_never_run").split()[-2] == "-"  # placed on the CPU, never run there
    assert row("test_unique_recording_turned_off").split()[-2] == "unknown"  # the test's own options hid it
    assert row("TestOps::test_each_op").split()[-2] == "Unique"  # its subtests' nodes are its function's
    section = text.split(f"\n{TITLE} (")[1].split("\n\n")[0]
    assert section.startswith("2):\n  Unique: 2 node(s) in 2 CUDA session(s) of 2 test(s), 3 run(s)\n"), section
    normal = f"{CELL}-normal {T}"
    assert f"    {normal}test_unique: session 1, node 'unique' on {CPU}, 2 run(s)\n" in section
    assert re.search(rf"\n    {re.escape(normal)}TestOps::test_each_op \(op='Unique'\): session \d+, node 'unique' on "
                     rf"{CPU}, 1 run\(s\)\n", section), section  # the subtest, not its test as well
    assert re.search(r"\n  shape ops \(ORT's CPU-preferred nodes, not judged\): 1 node\(s\) in 1 CUDA session\(s\) of "
                     rf"1 test\(s\), 1 run\(s\)\n    {re.escape(normal)}test_shape: session \d+, Shape node 'shape' on "
                     rf"{CPU}, 1 run\(s\)\n", section), section
    assert (f"  placement unseen, so not known to be on CUDA, for 1 CUDA-asking test(s) in 1 mode run(s) ({CELL}-normal): "
            "the test set session.record_ep_graph_assignment_info to 0 itself") in section

    md = (out / "report.md").read_text()
    assert "| CUDA runs | fallbacks | ops on CPU | broken rule |" in md
    assert f"## {TITLE} (2)" in md
    assert f"  - {CELL}-normal test\\_nodes.py::test\\_unique: session 1, node 'unique' on {CPU}, 2 run(s)" in md
    page = (out / "report.html").read_text()
    assert "<th>ops on CPU</th>" in page and '<td class="mono">Unique</td>' in page
    assert f'<h2 id="cpu-nodes">{TITLE} (2)</h2>' in page
    assert f"<li>{CELL}-normal {T}test_unique: session 1, node &#39;unique&#39; on {CPU}, 2 run(s)</li>" in page

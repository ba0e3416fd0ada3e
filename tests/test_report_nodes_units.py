"""The node census in reports, on hand-built Results: the tier table's `ops on CPU` column per test function, and
the section that lists the CUDA sessions with nodes on the CPU, grouped by op type, in every report form.

A node is one of a CUDA-served build's (judge/nodes.py NodeRun): its op, name, the EP ORT placed it on and the runs
it made there. A run without a node census (ep.nodes_taken false) says nothing of where its nodes ran: the reports
read it as unknown, never as "none on the CPU".
"""
from __future__ import annotations

import re

from helpers import result

from ort_gpu_matrix.judge.eps import EpCensus, EpTest
from ort_gpu_matrix.judge.nodes import NodeRun
from ort_gpu_matrix.report.model import build
from ort_gpu_matrix.report.render import cpunodes, html, markdown, terminal
from ort_gpu_matrix.report.tiertable import tier_table

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
F = "test_ops.py::"


def node(op: str, ep: str = CPU, runs: int = 2, session: int = 1, name: str | None = None) -> NodeRun:
    return NodeRun(op, name if name is not None else op.lower(), ep, runs, session)


def entry(*nodes: NodeRun, unseen: tuple[str, ...] = ()) -> EpTest:
    cuda_runs = max((n.runs for n in nodes), default=0) or (1 if unseen else 0)
    return EpTest({CUDA: cuda_runs}, len({n.session for n in nodes}) or 1, [], list(nodes), list(unseen))


def run(tests: dict[str, EpTest], mode: str = "normal", name: str = "c1", taken: bool = True):
    return result(mode, {t: "passed" for t in tests}, name=name, ep=EpCensus(True, tests, [], [], nodes_taken=taken))


def cpu_column(results) -> dict[str, str]:
    return {row.function: row.cpu_cell() for row in tier_table(results, 100).rows}


def test_the_column_names_the_op_types_that_ran_off_cuda_per_function_and_only_counts_the_shape_ops():
    results = [run({
        f"{F}test_unique[a]": entry(node("Add", CUDA), node("Unique"), node("Shape"), node("Gather")),
        f"{F}test_unique[b]": entry(node("Add", CUDA), node("Det"), node("Shape")),
        f"{F}test_relu": entry(node("Add", CUDA), node("Relu", CUDA)),
        f"{F}test_built": entry(node("Add", CUDA), node("Unique", runs=0)),  # placed on the CPU, never run there
        f"{F}test_gelu": entry(node("com.microsoft.Gelu", "OtherExecutionProvider")),  # any EP but CUDA counts
    })]
    assert cpu_column(results) == {f"{F}test_unique": "Det, Gather, Unique +1 shape", f"{F}test_relu": "-",
                                   f"{F}test_built": "-", f"{F}test_gelu": "com.microsoft.Gelu"}
    shape_only = [run({f"{F}test_shape": entry(node("Add", CUDA), node("Shape"))})]
    assert cpu_column(shape_only) == {f"{F}test_shape": "1 shape"}


def test_a_function_no_node_census_saw_is_unknown_never_none():
    before = run({f"{F}test_unique": entry(node("Add", CUDA))}, taken=False)  # a result from before the census
    assert cpu_column([before]) == {f"{F}test_unique": "unknown"}
    unseen = run({f"{F}test_old": entry(unseen=("this ORT cannot report node placement",))})
    off = run({f"{F}test_off": EpTest({CUDA: 3}, 1)})  # CUDA ran it, no node listed: ORT_MATRIX_NODE_CENSUS=off
    fell = run({f"{F}test_fell": EpTest({CPU: 1}, 1)})  # the CPU served it: no CUDA-served build to see
    assert cpu_column([unseen, off, fell]) == {f"{F}test_old": "unknown", f"{F}test_off": "unknown",
                                               f"{F}test_fell": "-"}
    # one cell saw it, another did not: what was seen, and how many cases some run did not see
    seen = run({f"{F}test_unique": entry(node("Add", CUDA), node("Unique"))}, name="c2")
    assert cpu_column([before, seen]) == {f"{F}test_unique": "Unique, 1 unseen"}


def test_the_column_reads_normal_and_require_cudnn_runs_and_a_test_for_its_subtests():
    results = [run({f"{F}test_a": entry(node("Unique"))}, mode="teeth"),  # teeth forces MATH: not in the table
               run({f"{F}TestOps::test_each": entry(node("Relu", CUDA), node("Det")),
                    f"{F}TestOps::test_each [op=Det]": entry(node("Det"))}, mode="require_cudnn")]
    assert cpu_column(results) == {f"{F}TestOps::test_each": "Det"}
    many = run({f"{F}test_many": entry(*(node(op) for op in ("A", "B", "C", "D", "E", "F", "G", "H", "Shape")))})
    assert cpu_column([many]) == {f"{F}test_many": "A, B, C, D, E, F +2 more +1 shape"}


def test_the_section_groups_the_nodes_by_op_with_their_counts_and_the_shape_ops_last():
    rep = build([
        run({f"{F}test_unique[a]": entry(node("Add", CUDA), node("Unique"), node("Shape", runs=1)),
             f"{F}test_unique[b]": entry(node("Unique", session=2), node("Unique", session=3, name="u2"))}),
        run({f"{F}test_det": entry(node("Det", runs=4))}, mode="require_cudnn"),
        run({f"{F}test_relu": entry(node("Relu", CUDA))}, name="c2")])
    found = cpunodes.groups(rep)
    assert [g.heading for g in found] == [
        "Unique: 3 node(s) in 3 CUDA session(s) of 2 test(s), 6 run(s)",
        "Det: 1 node(s) in 1 CUDA session(s) of 1 test(s), 4 run(s)",
        f"{cpunodes.SHAPE}: 1 node(s) in 1 CUDA session(s) of 1 test(s), 1 run(s)"]
    assert found[0].nodes == [f"c1-normal {F}test_unique[a]: session 1, node 'unique' on {CPU}, 2 run(s)",
                              f"c1-normal {F}test_unique[b]: session 2, node 'unique' on {CPU}, 2 run(s)",
                              f"c1-normal {F}test_unique[b]: session 3, node 'u2' on {CPU}, 2 run(s)"]
    assert found[2].nodes == [f"c1-normal {F}test_unique[a]: session 1, Shape node 'shape' on {CPU}, 1 run(s)"]
    assert cpunodes.total(rep) == 4  # sessions with a node on the CPU other than a shape op
    assert cpunodes.empty(found) is None and cpunodes.unseen(rep) is None


def test_a_test_holding_subtests_lists_only_what_ran_outside_them():
    parent, sub = f"{F}TestOps::test_each", f"{F}TestOps::test_each [op=Unique]"
    rep = build([run({parent: entry(node("Unique", runs=3)), sub: entry(node("Unique", runs=2))})])
    (g,) = cpunodes.groups(rep)
    assert g.nodes == [f"c1-normal {parent}: session 1, node 'unique' on {CPU}, 1 run(s)",
                       f"c1-normal {sub}: session 1, node 'unique' on {CPU}, 2 run(s)"]
    assert g.heading == "Unique: 2 node(s) in 1 CUDA session(s) of 2 test(s), 3 run(s)"
    only_inside = build([run({parent: entry(node("Unique")), sub: entry(node("Unique"))})])
    assert cpunodes.groups(only_inside)[0].nodes == [f"c1-normal {sub}: session 1, node 'unique' on {CPU}, 2 run(s)"]


def test_what_no_census_saw_is_said_and_nothing_seen_is_not_called_none():
    rep = build([run({f"{F}test_a": entry(node("Add", CUDA))}, taken=False),
                 run({f"{F}test_b": entry(unseen=("this ORT cannot report node placement",))}, mode="require_cudnn")])
    assert cpunodes.groups(rep) == [] and cpunodes.empty([]) == "None seen."
    assert cpunodes.unseen(rep) == ("placement unseen, so not known to be on CUDA, for 2 CUDA-asking test(s) in 2 mode "
                                    "run(s) (c1-normal, c1-require_cudnn): the run took no node census (a result "
                                    "from before it); this ORT cannot report node placement")
    text = terminal.render(rep)
    assert f"\n{cpunodes.TITLE} (0)\n  None seen.\n  placement unseen, so not known" in text
    shape = cpunodes.groups(build([run({f"{F}test_s": entry(node("Shape"))})]))
    assert cpunodes.empty(shape) == "None but shape ops."


def test_every_form_shows_the_column_and_the_section():
    rep = build([run({f"{F}test_unique": entry(node("Add", CUDA), node("Unique"), node("Shape"))})])
    text = terminal.render(rep)
    row = next(line.split() for line in text.splitlines() if line.strip().startswith(f"{F}test_unique "))
    # 1 case, no tier (it printed none), 2 CUDA runs, no fallback, Unique and one shape op on the CPU, no rule
    assert row == [f"{F}test_unique", "1", "1", "2", "-", "Unique", "+1", "shape", "-"], row
    assert "ops on CPU: the op types whose nodes ran on another EP" in text
    assert (f"\n{cpunodes.TITLE} (1):\n  Unique: 1 node(s) in 1 CUDA session(s) of 1 test(s), 2 run(s)\n"
            f"    c1-normal {F}test_unique: session 1, node 'unique' on {CPU}, 2 run(s)\n  {cpunodes.SHAPE}:") in text
    md = markdown.render(rep)
    assert "| CUDA runs | fallbacks | ops on CPU | broken rule |" in md
    assert "| test\\_ops.py::test\\_unique | 1 | 1 | 2 | - | Unique \\+1 shape | - |" in md
    assert f"## {cpunodes.TITLE} (1)" in md and "  - c1-normal test\\_ops.py::test\\_unique: session 1" in md
    page = html.render(rep, "/tmp")
    assert "<th>ops on CPU</th>" in page and '<td class="mono">Unique +1 shape</td>' in page
    assert f'<h2 id="cpu-nodes">{cpunodes.TITLE} (1)</h2>' in page


HOSTILE_OP = "com.evil.<script>alert(1)</script>"
HOSTILE_NAME = "n`x`|<script>alert(2)</script>|\x1b]0;owned\x07"
HOSTILE_TEST = f"{F}test_x[a|b`<img src=x onerror=alert(3)>`]"


def test_op_types_node_names_and_test_ids_are_escaped_in_every_form(tmp_path):
    rep = build([run({HOSTILE_TEST: entry(node(HOSTILE_OP, name=HOSTILE_NAME), node("Add", CUDA))})])
    text = terminal.render(rep)
    assert "\x1b" not in text and "\x07" not in text and "\\x1b]0;owned\\x07" in text
    md = markdown.render(rep)
    assert "<script>" not in md and "<img" not in md
    section = md.split(f"## {cpunodes.TITLE}")[1].split("\n## ")[0]
    assert "com.evil.&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "n\\`x\\`\\|&lt;script&gt;alert(2)&lt;/script&gt;\\|" in section  # no code span, no column break
    table = md.split("## Tiers by test function")[1].split("\n## ")[0]
    row = next(line for line in table.splitlines() if "test\\_x" in line)
    assert len(re.findall(r"(?<!\\)\|", row)) == 8 and "com.evil.&lt;script&gt;" in row  # 7 columns, not split
    page = html.render(rep, tmp_path)
    assert "<script>alert" not in page and "<img" not in page
    assert "com.evil.&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;script&gt;alert(2)" in page

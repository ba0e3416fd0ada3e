"""The CPU nodes section every report form shows: the CUDA sessions with nodes on the CPU, grouped by op type, so
an op whose CUDA kernel went missing in a hundred tests reads as one group, with the node, session and runs of each.

A node is listed where it ran (runs > 0) on an EP other than CUDA inside a build the CUDA EP served, as the node
census (judge/nodes.py) stored it in each result. A test holding subtests lists only what ran outside them: its
census holds its subtests' too, and judge/nodes.py units takes them off the same way. Shape ops are ORT's
CPU-preferred nodes, which no rule judges: they form one group of their own, last. They are named by
the shape_ops of the suite each result was judged with (kept in its EP census). A test whose placement no node
census saw is counted in a note, never read as having no node on the CPU.

Shared here so the terminal, Markdown and HTML say the same thing; each form escapes what it shows (op types,
node names and test ids come from the code under test), and every line is clipped.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ort_matrix_probe.schema import parent_of

from ...judge.eps import CUDA_EP, EpTest
from ...judge.nodes import NodeRun, own
from ..model import Report
from ..tiertable import placement_seen
from .summary import clip

TITLE = "CUDA sessions with nodes on the CPU"
SHAPE = "shape ops (ORT's CPU-preferred nodes, not judged)"
SHOWN = 8  # nodes listed under each op before "and N more" (every one is in the result files)
NOT_TAKEN = "the run took no node census (a result from before it)"
CENSUS_OFF = "the CUDA EP ran its sessions and no node is listed (ORT_MATRIX_NODE_CENSUS=off)"


@dataclass(frozen=True)
class CpuNodeGroup:
    """The nodes of one op type (or every shape op) that ran off CUDA in CUDA-served sessions: one group of the
    section."""

    op: str  # the op type, clipped, or SHAPE
    nodes: list[str]  # "session test: session N, node 'name' on EP, R run(s)", in session then test order, clipped
    tests: int  # distinct test ids
    sessions: int  # distinct CUDA sessions (a mode run's session numbers)
    runs: int

    @property
    def heading(self) -> str:
        return (f"{self.op}: {len(self.nodes)} node(s) in {self.sessions} CUDA session(s) of {self.tests} test(s), "
                f"{self.runs} run(s)")


def own_nodes(tests: Mapping[str, EpTest]) -> dict[str, list[NodeRun]]:
    """Each test's own nodes that ran off CUDA, with their own runs: a test holding subtests less its subtests'."""
    mine = own({nodeid: entry.nodes for nodeid, entry in tests.items()})
    return {nodeid: [n for n in found if n.ep != CUDA_EP and n.runs > 0] for nodeid, found in mine.items()}


def _test(nodeid: str) -> str:
    """The test a session is counted under: numbered in its test process, two xdist workers each have a session 1,
    so a session is counted per test that met it (a subtest's is its test's)."""
    return parent_of(nodeid) or nodeid


def _group(op: str, found: list[tuple[str, str, NodeRun]]) -> CpuNodeGroup:
    lines = [clip(f"{session} {nodeid}: session {n.session}, " + (f"{n.op} " if op == SHAPE else "")
                  + f"node {n.name!r} on {n.ep}, {n.runs} run(s)") for session, nodeid, n in found]
    return CpuNodeGroup(op if op == SHAPE else clip(op, 120), lines, len({nodeid for _, nodeid, _ in found}),
                        len({(session, _test(nodeid), n.session) for session, nodeid, n in found}), sum(n.runs for _, _, n in found))


def groups(report: Report) -> list[CpuNodeGroup]:
    """One group per op type, the one in most tests first, then the shape ops."""
    found: dict[str, list[tuple[str, str, NodeRun]]] = {}
    for r in sorted(report.results, key=lambda r: r.session):
        for nodeid, nodes in sorted(own_nodes(r.ep.tests).items()):
            for n in nodes:
                found.setdefault(SHAPE if n.op in r.ep.shape_ops else n.op, []).append((r.session, nodeid, n))
    out = [_group(op, items) for op, items in found.items()]
    return sorted(out, key=lambda g: (g.op == SHAPE, -g.tests, -len(g.nodes), g.op))


def total(report: Report) -> int:
    """The CUDA sessions with a node on the CPU that is not a shape op: the section's count."""
    return len({(r.session, _test(nodeid), n.session) for r in report.results for nodeid, nodes in own_nodes(r.ep.tests).items()
                for n in nodes if n.op not in r.ep.shape_ops})


def empty(found: list[CpuNodeGroup]) -> str | None:
    """What the section says in place of groups: nothing found at all, or shape ops alone."""
    if not found:
        return "None seen."
    return "None but shape ops." if all(g.op == SHAPE for g in found) else None


def unseen(report: Report) -> str | None:
    """How many CUDA-asking tests no node census saw, in which runs, and why: their nodes are unknown, not none."""
    runs: list[str] = []
    tests = 0
    reasons: set[str] = set()
    for r in sorted(report.results, key=lambda r: r.session):
        missed = [e for nodeid, e in r.ep.tests.items() if parent_of(nodeid) is None and not placement_seen(r.ep, e)]
        if missed:
            runs.append(r.session)
            tests += len(missed)
            reasons |= {w for e in missed for w in e.nodes_unseen or [NOT_TAKEN if not r.ep.nodes_taken else CENSUS_OFF]}
    if not runs:
        return None
    return clip(f"placement unseen, so not known to be on CUDA, for {tests} CUDA-asking test(s) in {len(runs)} mode "
                f"run(s) ({', '.join(runs[:SHOWN])}{', ...' if len(runs) > SHOWN else ''}): "
                f"{'; '.join(sorted(reasons)[:3])}", 600)


def more(g: CpuNodeGroup) -> str | None:
    return f"and {len(g.nodes) - SHOWN} more (every one is in the result files)" if len(g.nodes) > SHOWN else None

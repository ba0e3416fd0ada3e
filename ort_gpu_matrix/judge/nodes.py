"""Node truth: which EP ran each op of a test's CUDA sessions, and the rules that judge it.

The EP census says which EP served a session; it counts a session the CUDA EP serves as CUDA even where ORT
placed some of its nodes on the CPU EP, which it does without a word for a node whose CUDA kernel is missing
for its type, version or dtype. The test then passes on the CPU kernel inside a "CUDA" session. The probe reads
ORT's own placement of every build the CUDA EP served (ort_matrix_probe/placement.py) and this module judges it:

- a `cuda_ops` rule fails each test that passed, matches it, and ran a listed op on an EP other than CUDA, or
  did not run it at all (the rule's promise is that the op ran on the GPU: no run proves nothing);
- a node that ran on the CPU, that no rule covers (a cuda_ops rule that names it fails the test instead; an
  `allowed_cpu_ops` rule accepts it) and whose op is not one of the suite's `shape_ops` (ORT's CPU-preferred
  shape computations), is a warning, or a reason under the suite's `cpu_nodes = "fail"`;
- a rule that matches nothing is stale, like every rule.

A node "ran" in a test when the test ran its session while the build holding it served (schema.NodeUse.runs).
Only a report of version 5 or later has a node census; before it, and from an ORT before 1.24, nothing is seen,
and a cuda_ops rule then fails (it cannot be proven) rather than pass unchecked.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ort_matrix_probe.schema import parent_of

from ..config.model import CpuOpsRule, CudaOpsRule, DispatchExpect
from .counts import TestResult
from .covers import rule_covers
from .outcomes import FAILING, GONE, JUDGED, listing
from .subtests import as_judged

CUDA_EP = "CUDAExecutionProvider"


@dataclass(frozen=True)
class NodeRun:
    """One node of a CUDA-served build a test met: its op, name, the EP ORT placed it on, the runs it made there."""

    op: str
    name: str
    ep: str
    runs: int
    session: int = 0  # the test process's number for the session (epcensus: in the order they asked for CUDA)

    def line(self) -> str:
        return f"{self.op} {self.name!r} on {self.ep} ({self.runs} run(s), session {self.session})"


def node_runs(t: TestResult) -> list[NodeRun]:
    """The nodes of a test's CUDA-served builds, from its EP uses (a test's include its subtests')."""
    return [NodeRun(str(n["op"]), str(n["name"]), str(n["ep"]), int(n["runs"]), int(use["session"]))
            for use in t.ep for n in use.get("nodes", ())]


def unseen_of(t: TestResult) -> list[str]:
    """Why some of a test's CUDA-served builds have no placement (an ORT before 1.24, the test's own options)."""
    return sorted({str(use["nodes_unseen"]) for use in t.ep if use.get("nodes_unseen")})


def _less(nodes: list[NodeRun], taken: Iterable[NodeRun]) -> list[NodeRun]:
    """`nodes` with the runs of `taken` (the same op, name, EP and session) taken off; a node left with none that
    `taken` ran is dropped, one `taken` never ran stays (the test met that build itself)."""
    off: Counter[tuple[str, str, str, int]] = Counter()
    for n in taken:
        off[(n.op, n.name, n.ep, n.session)] += n.runs
    out = []
    for n in nodes:
        k = (n.op, n.name, n.ep, n.session)
        if off[k] and n.runs <= off[k]:
            continue
        out.append(NodeRun(n.op, n.name, n.ep, n.runs - off[k], n.session) if off[k] else n)
    return out


def own(nodes: Mapping[str, Sequence[NodeRun]]) -> dict[str, list[NodeRun]]:
    """Each id's own nodes, by test and subtest id: a test holding subtests keeps what ran outside them (a test's
    census holds its subtests', so listing both would name each node twice). The one place this is decided: the
    judge, the baseline's lines and the report's CPU nodes all read it."""
    inside: dict[str, list[NodeRun]] = {}
    for nodeid, found in nodes.items():
        parent = parent_of(nodeid)
        if parent is not None:
            inside.setdefault(parent, []).extend(found)
    return {nodeid: _less(list(found), inside.get(nodeid, ())) for nodeid, found in nodes.items()}


def units(tests: Sequence[TestResult]) -> dict[str, list[NodeRun]]:
    """Each test's and subtest's own nodes (own), from a run's tests."""
    return own({t.nodeid: node_runs(t) for t in tests})


def judged_nodes(tests: Sequence[TestResult]) -> dict[str, list[NodeRun]]:
    """The nodes a cuda_ops rule judges a test by: a test failed by its subtests alone is judged on its passing
    parts, its failing subtests' runs taken off (as its tiers are: judge/subtests.as_judged)."""
    failing: dict[str, list[NodeRun]] = {}
    for t in tests:
        if t.parent is not None and t.outcome in FAILING:
            failing.setdefault(t.parent, []).extend(node_runs(t))
    return {t.nodeid: _less(node_runs(t), failing.get(t.nodeid, ())) if t.by_subtests else node_runs(t)
            for t in tests}


@dataclass
class NodeFindings:
    """What the node rules found in one run: reasons, warnings, stale rules (key, rule, what, tests), and the CPU
    nodes no rule covers, by test."""

    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stale: list[tuple[str, Any, str, list[str]]] = field(default_factory=list)
    uncovered: dict[str, list[NodeRun]] = field(default_factory=dict)


def _broken(rule: CudaOpsRule, t: TestResult, nodes: list[NodeRun]) -> list[str]:
    """How one test breaks the rule: each listed op that ran off CUDA, or did not run at all, and why."""
    out = []
    for op in rule.ops:
        mine = [n for n in nodes if n.op == op]
        elsewhere = [n for n in mine if n.runs and n.ep != CUDA_EP]
        if elsewhere:
            out.append(f"{t.nodeid}: {op} ran on {', '.join(sorted({n.ep for n in elsewhere}))} "
                       f"(node {elsewhere[0].name!r}, {sum(n.runs for n in elsewhere)} run(s))")
        elif not any(n.runs and n.ep == CUDA_EP for n in mine):
            out.append(f"{t.nodeid}: {op} did not run on the CUDA EP ({_why_not(t, nodes, bool(mine))})")
    return out


def _elsewhere(t: TestResult) -> list[str]:
    """Runs a test's CUDA-asking sessions made that the CUDA EP did not serve (a fallback an allowed_fallbacks rule
    accepted, or the test's own set_providers): the census keeps no placement of such a build, and every op of it
    ran there, so a rule that an op runs on CUDA alone cannot hold for the test."""
    out = []
    for use in t.ep:
        off = {ep: n for ep, n in use["runs"].items() if n and ep != CUDA_EP}
        if off:
            out.append(f"{t.nodeid}: session {use['session']} made {sum(off.values())} run(s) the CUDA EP did not serve "
                       f"({', '.join(sorted(off))}): every op of it ran there")
    return out


def _why_not(t: TestResult, nodes: list[NodeRun], placed: bool) -> str:
    """Why a listed op made no CUDA run, as far as the census can tell."""
    unseen = unseen_of(t)
    if unseen:
        return f"its placement is unseen: {unseen[0]}"
    if placed:
        return "the build holding it was never run by the test"
    if not t.ep:
        return "the test asked for no CUDA session"
    if not nodes:
        return "the CUDA EP served no build the test ran"
    return f"no build the CUDA EP served holds it; ran: {', '.join(sorted({n.op for n in nodes if n.runs}))}"


def _cuda_ops(rule: CudaOpsRule, tests: Sequence[TestResult], nodes: dict[str, list[NodeRun]],
              out: NodeFindings) -> None:
    judged = [t for t in tests if t.outcome in JUDGED and rule_covers(rule, t.nodeid)]
    if not judged:
        others = [f"{t.nodeid} ({t.outcome})" for t in tests if rule_covers(rule, t.nodeid)]
        out.stale.append(("cuda_ops", rule, "it matched no test that passed" if others else GONE, others))
        return
    broken = [line for t in judged for line in [*_broken(rule, t, nodes.get(t.nodeid, [])), *_elsewhere(t)]]
    if broken:
        out.reasons.append(f"cuda_ops rule {rule.test!r} ({', '.join(rule.ops)}) broken by "
                           f"{len({b.split(': ', 1)[0] for b in broken})} test(s): {listing(broken)}")


def _covered(rules: Iterable[CpuOpsRule | CudaOpsRule], nodeid: str, op: str) -> bool:
    return any(op in r.ops and rule_covers(r, nodeid) for r in rules)


def _unseen(passing: Sequence[TestResult], expect: DispatchExpect, out: NodeFindings) -> None:
    """Tests that passed with a CUDA-served build whose placement is unseen: nothing was checked there, which is a
    warning, and under cpu_nodes = "fail" a reason (a strict suite never goes green on what it could not see). A
    subtest's is its test's too (folded), so tests are named, not their subtests again."""
    lines = [f"{t.nodeid} ({'; '.join(unseen_of(t))})" for t in passing
             if t.outcome in JUDGED and t.parent is None and unseen_of(t)]
    if lines:
        said = (f"{len(lines)} test(s) that passed ran a build the CUDA EP served whose node placement is unseen, so "
                f"no node of it was judged: {listing(lines)}")
        (out.reasons if expect.nodes.cpu_nodes == "fail" else out.warnings).append(said)


def judge(expect: DispatchExpect, tests: Sequence[TestResult]) -> NodeFindings:
    """Every node rule over a run's tests: cuda_ops rules, the CPU nodes no rule covers, the stale rules."""
    out = NodeFindings()
    passing = as_judged(tests)
    for rule in expect.cuda_ops:
        _cuda_ops(rule, passing, judged_nodes(tests), out)
    shape = set(expect.nodes.shape_ops)
    own = units(tests)
    cpu = {t.nodeid: [n for n in own[t.nodeid] if n.runs and n.ep != CUDA_EP and n.op not in shape]
           for t in passing if t.outcome in JUDGED}
    for nodeid, found in cpu.items():
        left = [n for n in found if not _covered((*expect.cuda_ops, *expect.allowed_cpu_ops), nodeid, n.op)]
        if left:
            out.uncovered[nodeid] = left
    if out.uncovered:
        lines = [f"{nodeid}: {n.line()}" for nodeid, found in out.uncovered.items() for n in found]
        said = (f"{len(lines)} node(s) ran on the CPU inside sessions the CUDA EP served, in {len(out.uncovered)} "
                f"test(s) that passed (no cuda_ops or allowed_cpu_ops rule covers them, and they are not shape ops): "
                f"{listing(lines)}")
        (out.reasons if expect.nodes.cpu_nodes == "fail" else out.warnings).append(said)
    _unseen(passing, expect, out)
    for allowed in expect.allowed_cpu_ops:
        if any(_covered([allowed], nodeid, n.op) for nodeid, found in cpu.items() for n in found):
            continue
        ran = [t.nodeid for t in tests if rule_covers(allowed, t.nodeid)]
        out.stale.append(("allowed_cpu_ops", allowed, "no test it matches ran a listed op on the CPU" if ran else GONE,
                          ran))
    return out

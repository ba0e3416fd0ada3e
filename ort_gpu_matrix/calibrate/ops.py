"""The cuda_ops rules calibrate writes: per test function, the ops every passing case ran on the CUDA EP alone.

A CUDA test can pass on a CPU kernel: ORT places a node whose CUDA kernel is missing for its type, version or
dtype on the CPU EP without a word, inside a session the CUDA EP serves. So, as calibrate writes cuda_runs
rules, it writes a cuda_ops rule for each test function (judge/tiers.py, function_of) listing the ops that
every case of it that passed, in every run given, ran on the CUDA EP and on no other (the node census,
judge/nodes.py). A later release that moves one of them to the CPU then fails the mode, naming the op.

Left out: the suite's shape ops (ORT's CPU-preferred shape computations, `shape_ops`), which ORT may move
between EPs on purpose; a function with no op left gets no rule. A function none of whose cases asked for the
CUDA EP is a CPU test and is passed over in silence. A function one of whose cases has no node census (its
placement unseen, or a result without one) gets no rule, and calibrate says why: what the census did not see
cannot be promised. Old rules are never weakened: a rule the runs broke is kept as written, and calibrate says
it still fails. A node that ran on the CPU is never written down: accepting one is a person's decision
(allowed_cpu_ops), and calibrate says each one it saw, as it says fallbacks.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..config.model import CudaOpsRule, DispatchExpect, NodePolicy, Observation
from ..judge.counts import TestResult
from ..judge.covers import rule_covers
from ..judge.nodes import CUDA_EP, NodeRun, judge, judged_nodes, unseen_of
from ..judge.outcomes import JUDGED
from ..judge.subtests import as_judged
from ..judge.tiers import function_regex
from ..util.escape import term
from ..util.voice import Voice
from .tiers import ObservedRun, passed_by_function, sorted_observed

CPU_EP = "CPUExecutionProvider"


@dataclass(frozen=True)
class _Case:
    """One passing case in one run, as the rule writer reads it."""

    asked: bool  # it asked for the CUDA EP
    unseen: str  # why its placement is unknown ("" when the census saw every CUDA-served build it met)
    ops: frozenset[str]  # the ops it ran on the CUDA EP and on no other EP


def cuda_only(nodes: Sequence[NodeRun]) -> frozenset[str]:
    """The ops that ran (runs > 0) on the CUDA EP and nowhere else: what a cuda_ops rule demands of each op."""
    elsewhere = {n.op for n in nodes if n.runs and n.ep != CUDA_EP}
    return frozenset(n.op for n in nodes if n.runs and n.ep == CUDA_EP) - elsewhere


def _unseen(t: TestResult) -> str:
    """Why the census cannot say where a case's ops ran: ORT could not say (nodes_unseen), or the run took no
    node census (a CUDA-served session with no placement at all: the census off, or a report before it)."""
    said = unseen_of(t)
    if said:
        return f"its placement is unseen: {said[0]}"
    if any(CUDA_EP in use.get("served", ()) and "nodes" not in use for use in t.ep):
        return "its result has no node census (the census was off, or the report predates it)"
    return ""


def _cases(runs: Sequence[ObservedRun], covered: Sequence[str]) -> tuple[dict[str, dict[str, dict[str, list[_Case]]]],
                                                                        dict[str, set[Observation]]]:
    """passed_by_function over every run, each case read with its run's nodes (a test failed by its subtests
    alone without its failing subtests' runs, as the judge reads it)."""
    cases: dict[str, dict[str, dict[str, list[_Case]]]] = {}
    observed: dict[str, set[Observation]] = {}
    for r in runs:
        nodes = judged_nodes(r.tests)

        def case(t: TestResult, nodes: dict[str, list[NodeRun]] = nodes) -> _Case:
            return _Case(bool(t.ep), _unseen(t), cuda_only(nodes.get(t.nodeid, [])))

        got, where = passed_by_function([(r.observation, r.tests)], covered, case)
        for fn, by_cell in got.items():
            for cell, by_case in by_cell.items():
                for nodeid, seen in by_case.items():
                    cases.setdefault(fn, {}).setdefault(cell, {}).setdefault(nodeid, []).extend(seen)
        for fn, obs in where.items():
            observed.setdefault(fn, set()).update(obs)
    return cases, observed


def _kept(old: Sequence[CudaOpsRule], runs: Sequence[ObservedRun], drop_stale: Callable[[CudaOpsRule], bool],
          voice: Voice) -> list[CudaOpsRule]:
    """The old rules that still match, observed afresh, each kept as written (a broken one said)."""
    calibrated = {r.observation.cell for r in runs}
    out: list[CudaOpsRule] = []
    for rule in old:
        hits = [(r.observation, t.nodeid, nodes.get(t.nodeid, [])) for r in runs
                for nodes in [judged_nodes(r.tests)] for t in as_judged(r.tests)
                if t.outcome in JUDGED and rule_covers(rule, t.nodeid)]
        elsewhere = [o for o in rule.observed if o.cell not in calibrated]
        if not hits and not elsewhere and drop_stale(rule):
            continue
        broken = sorted({nodeid for _, nodeid, nodes in hits if set(rule.ops) - cuda_only(nodes)})
        if broken:
            voice.say(f"kept as written: cuda_ops rule {term(repr(rule.test))} ({term(', '.join(rule.ops))}): broken "
                      f"by {len(broken)} test(s) in the runs calibrated (e.g. {term(broken[0])}); calibrate never "
                      "weakens a rule (edit or remove it if the change is intended)")
        seen = elsewhere + [o for o, _, _ in hits]
        out.append(dataclasses.replace(rule, observed=sorted_observed(seen)) if seen else rule)
    return out


def ops_rules(old: Sequence[CudaOpsRule], runs: Sequence[ObservedRun], shape_ops: Sequence[str],
              drop_stale: Callable[[CudaOpsRule], bool], voice: Voice) -> list[CudaOpsRule]:
    """The old rules that still match (observed afresh), then a rule per test function nothing covers."""
    out = _kept(old, runs, drop_stale, voice)
    cases, observed = _cases(runs, [k.test for k in out])  # function -> cell -> node id -> each run's _Case
    for fn, by_cell in sorted(cases.items()):
        seen = [(n, c) for by_case in by_cell.values() for n, cs in by_case.items() for c in cs]
        if not any(c.asked for _, c in seen):
            continue  # a CPU test: it never asked for the CUDA EP
        blind = sorted((n, c.unseen) for n, c in seen if c.unseen)
        if blind:
            voice.say(f"not written: cuda_ops rule for {term(fn)}: {len({n for n, _ in blind})} of its passed case(s) "
                      f"have no node census in some run (e.g. {term(blind[0][0])}: {term(blind[0][1])}), so where its "
                      "ops ran is unknown")
            continue
        common = frozenset.intersection(*(c.ops for _, c in seen))
        ops = sorted(common - set(shape_ops))
        if not ops:
            fewest = min(seen, key=lambda s: (len(s[1].ops - set(shape_ops)), s[0]))
            ran = ", ".join(sorted(fewest[1].ops - set(shape_ops))) or "none"
            voice.say(f"not written: cuda_ops rule for {term(fn)}: no op but a shape op ran on the CUDA EP alone in "
                      f"every one of its passed cases in every run (e.g. {term(fewest[0])} ran {term(ran)} there)")
            continue
        counts = ", ".join(f"{cell}: {len(by_case)} case(s)" for cell, by_case in sorted(by_cell.items()))
        left = sorted(common & set(shape_ops))
        reason = (f"seen in {counts}, each of them running every op listed on the CUDA EP alone, in every run"
                  + (f" (shape ops left out: {', '.join(left)})" if left else ""))
        out.append(CudaOpsRule(function_regex(fn), tuple(ops), reason, sorted_observed(observed[fn])))
    return out


def cpu_nodes_seen(runs: Sequence[ObservedRun], expect: DispatchExpect) -> list[str]:
    """One line per test, op and cell where a node ran off the CUDA EP inside a CUDA-served session, not a shape op
    and not accepted by an allowed_cpu_ops rule: what calibrate says it did not accept (never written down)."""
    lines: set[str] = set()
    only_allowed = DispatchExpect(allowed_cpu_ops=expect.allowed_cpu_ops,
                                  nodes=NodePolicy("warn", expect.nodes.shape_ops))
    for r in runs:
        for nodeid, found in judge(only_allowed, r.tests).uncovered.items():
            for op in sorted({n.op for n in found}):
                mine = [n for n in found if n.op == op]
                eps = sorted({n.ep for n in mine})
                where, detail = ("the CPU", f"{CPU_EP}, ") if eps == [CPU_EP] else (", ".join(eps), "")
                names = ", ".join(repr(name) for name in sorted({n.name for n in mine}))
                lines.add(f"{term(nodeid)}: {term(op)} ran on {term(where)} in {term(r.observation.cell)} "
                          f"({term(detail)}node {term(names)})")
    return sorted(lines)

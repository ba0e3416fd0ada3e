"""The cuda_runs rules calibrate writes: one per test function whose every passing case ran on the CUDA EP.

A pass of a norm or MoE test says nothing of the GPU unless the CUDA EP served its runs, and those tests
print no tier a tier rule could hold them to. So, as calibrate writes tier rules, it writes a cuda_runs
rule (min 1) for each test function (judge/tiers.py, function_of) whose every case that passed, in every run
given, made at least one run the CUDA EP served. A later pass on the CPU, or a pass that builds its
session and never runs it, then fails the mode.

A function some of whose passing cases made no CUDA run gets no rule (it would fail them), and calibrate
says so when any of its cases did ask for the CUDA EP; a function that never asked is a CPU test and is
passed over in silence. Old rules are never weakened: a rule the runs broke is kept as written, and
calibrate says it still fails. Fallbacks are never written down: accepting one is a person's decision
(allowed_fallbacks), and calibrate says which it saw.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..config.model import CudaRunsRule
from ..judge.counts import TestResult
from ..judge.covers import rule_covers
from ..judge.eps import test_eps
from ..judge.outcomes import JUDGED
from ..judge.tiers import function_regex
from ..util.voice import Voice
from .tiers import ObservedRun, passed_by_function, sorted_observed


def _cuda(t: TestResult) -> int:
    return sum(use["runs"].get("CUDAExecutionProvider", 0) for use in t.ep)


def cuda_rules(old: Sequence[CudaRunsRule], runs: Sequence[ObservedRun], drop_stale: Callable[[CudaRunsRule], bool],
               voice: Voice) -> list[CudaRunsRule]:
    """The old rules that still match (observed afresh), then a rule per test function nothing covers."""
    calibrated = {r.observation.cell for r in runs}
    out: list[CudaRunsRule] = []
    for rule in old:
        hits = [(r.observation, t) for r in runs for t in r.tests if t.outcome in JUDGED and rule_covers(rule, t.nodeid)]
        elsewhere = [o for o in rule.observed if o.cell not in calibrated]
        if not hits and not elsewhere and drop_stale(rule):
            continue
        short = sorted({t.nodeid for _, t in hits if _cuda(t) < rule.min})
        if short:
            voice.say(f"kept as written: cuda_runs rule {rule.test!r} (min {rule.min}): broken by {len(short)} test(s) in the "
                "runs calibrated; calibrate never weakens a rule (edit or remove it if the change is intended)")
        seen = elsewhere + [o for o, _ in hits]
        out.append(dataclasses.replace(rule, observed=sorted_observed(seen)) if seen else rule)
    # function -> cell -> node id -> (CUDA runs, asked for the CUDA EP) per run
    cases, observed = passed_by_function([(r.observation, r.tests) for r in runs], [k.test for k in out],
                                         lambda t: (_cuda(t), test_eps(t) is not None))
    for fn, by_cell in sorted(cases.items()):
        if not any(asked for by_case in by_cell.values() for seen in by_case.values() for _, asked in seen):
            continue  # a CPU test: it never asked for the CUDA EP
        without = sorted(n for by_case in by_cell.values() for n, seen in by_case.items() if not all(c for c, _ in seen))
        if without:
            voice.say(f"not written: cuda_runs rule for {fn}: {len(without)} of its passed case(s) made no CUDA run in some "
                f"run (e.g. {without[0]}), so the rule would fail them")
            continue
        counts = {cell: len(by_case) for cell, by_case in sorted(by_cell.items())}
        reason = "seen in " + ", ".join(f"{cell}: {n} case(s)" for cell, n in counts.items()) + \
            ", each of them served by the CUDA EP in every run"
        out.append(CudaRunsRule(function_regex(fn), 1, reason, sorted_observed(observed[fn])))
    return out


def fallbacks_seen(runs: Sequence[ObservedRun]) -> list[str]:
    """One line per test that fell back in the runs: what calibrate says it did not accept."""
    lines = set()
    for r in runs:
        for t in r.tests:
            for use in t.ep:
                if use.get("fallback"):
                    lines.add(f"{t.nodeid} in {r.observation.cell}: {use.get('fallback')}: {use.get('reason', '')}")
    return sorted(lines)

"""EP truth: which execution provider served each test that asked for the CUDA EP, and the rules that judge it.

Tests that print no `SdpaKernel=` line (norms, MoE, quantized matmul) say nothing of the kernel that
ran, and ORT serves a CUDA session on the CPU without raising: its C++ layer skips a CUDA EP whose
library will not load, its Python wrapper retries a failed CUDA session on the CPU, and `Session.run`
does the same on EPFail. The values still match, so such a test passes on the CPU. The probe's census
(ort_matrix_probe/epcensus.py) records, per test, each CUDA-asking session, what served it and its runs
per EP; this module turns that into a verdict:

- a fallback fails the mode in every mode, unless an `allowed_fallbacks` rule matches both the test and
  ORT's reason (on a wheel without the CUDA EP a suite allows "^CUDAExecutionProvider is not in this build");
- a hollow pass (passed, asked for the CUDA EP, made no run it served, and met no fallback that would say
  why) is counted and shown;
- a `cuda_runs` rule fails each test that passed, matches it, and made fewer CUDA runs than its `min`;
- a rule that matches nothing is stale, like every rule.

Only a report of version 3 or later has a census; an older one is judged by nothing here.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ort_matrix_probe.schema import parent_of

from ..config.model import SHAPE_OPS, CudaRunsRule, DispatchExpect, FallbackRule
from ..util.codec import stored
from . import nodes
from .counts import TestResult
from .covers import rule_covers
from .nodes import NodeRun, node_runs, unseen_of
from .outcomes import GONE, JUDGED, listing
from .subtests import as_judged

CUDA_EP = "CUDAExecutionProvider"
KIND_TEXT = {
    "not_in_build": "the wheel has no CUDA EP",
    "not_loaded": "ORT's C++ layer skipped the CUDA EP and served the CPU, nothing raised",
    "retried": "ORT's Python wrapper caught the EP error and retried on the CPU",
    "run_fallback": "Session.run caught EPFail and reran on the CPU",
}


def short_eps(runs: Mapping[str, int]) -> tuple[str, ...]:
    """The EPs that served runs, as a baseline line names them: CUDA first, `ExecutionProvider` dropped."""
    served = sorted((ep for ep, n in runs.items() if n), key=lambda ep: (ep != CUDA_EP, ep))
    return tuple(ep.removesuffix("ExecutionProvider") for ep in served)


def test_eps(t: TestResult) -> tuple[str, ...] | None:
    """A test's short EPs from its census entries, or None when it asked for no CUDA session."""
    if not t.ep:
        return None
    runs: Counter[str] = Counter()
    for use in t.ep:
        runs.update(use["runs"])
    return short_eps(runs)


@dataclass(frozen=True)
class Fallback:
    """One test met one session that asked for the CUDA EP and was served by another."""

    nodeid: str
    kind: str  # not_in_build, not_loaded, retried, run_fallback (epcensus.KINDS)
    asked: list[str]
    served: list[str]
    reason: str  # ORT's: its EP error, or the library that would not load (first line, <= 200 characters)
    allowed_by: str | None = None  # the allowed_fallbacks rule (its test regex) that accepts it

    def line(self) -> str:
        return (f"{self.nodeid} asked for {', '.join(self.asked)}, served by {', '.join(self.served) or 'nothing'} "
                f"({KIND_TEXT.get(self.kind, self.kind)}: {self.reason or 'no reason given'})")


@dataclass(frozen=True)
class EpTest:
    """One test's census: its runs per EP over every session that asked for the CUDA EP."""

    runs: dict[str, int] = field(default_factory=dict)
    sessions: int = 0
    errors: list[str] = field(default_factory=list)  # creations that raised, with nothing served (first lines)
    # the nodes of its CUDA-served builds, per EP (judge/nodes.py), and why some such build's placement is unknown;
    # left out of the stored result where empty, so a test without a node census reads as before it existed
    nodes: list[NodeRun] = field(default_factory=list, metadata=stored(omit_default=True))
    nodes_unseen: list[str] = field(default_factory=list, metadata=stored(omit_default=True))

    @property
    def cuda_runs(self) -> int:
        return self.runs.get(CUDA_EP, 0)

    @property
    def served(self) -> list[str]:
        """The EPs that served at least one of its runs, CUDA first."""
        return sorted((ep for ep, n in self.runs.items() if n), key=lambda ep: (ep != CUDA_EP, ep))


@dataclass(frozen=True)
class EpCensus:
    """What served the tests that asked for the CUDA EP. `taken`: the probe's report carried a census."""

    taken: bool = False
    tests: dict[str, EpTest] = field(default_factory=dict)
    fallbacks: list[Fallback] = field(default_factory=list)  # allowed ones too, marked with their rule
    hollow: list[str] = field(default_factory=list)  # passed, asked for the CUDA EP, no run it served, no fallback
    # the report carried a node census (version 5): only then is "no nodes" a finding
    nodes_taken: bool = field(default=False, metadata=stored(omit_default=True))
    # the suite's shape_ops the run was judged with: reports and baselines read a result without its matrix
    shape_ops: list[str] = field(default_factory=lambda: list(SHAPE_OPS), metadata=stored(omit_default=True))

    @property
    def cuda_runs(self) -> int:
        return sum(t.cuda_runs for t in self.tests.values())

    def unallowed(self) -> list[Fallback]:
        return [f for f in self.fallbacks if f.allowed_by is None]


@dataclass
class EpFindings:
    """What the EP rules found in one mode run: reasons (unallowed fallbacks, broken cuda_runs rules), warnings
    (hollow passes), and the stale rules."""

    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stale: list[tuple[str, Any, str, list[str]]] = field(default_factory=list)  # key, rule, what, tests


def census(tests: Iterable[TestResult], taken: bool, nodes_taken: bool = False) -> EpCensus:
    """The census of a run's tests, before any rule: fallbacks not yet allowed, hollow passes found."""
    per_test: dict[str, EpTest] = {}
    fallbacks: list[Fallback] = []
    hollow: list[str] = []
    tests = list(tests)
    named = _named_by_subtests(tests)
    for t in tests:
        if not t.ep:
            continue
        runs: Counter[str] = Counter()
        for use in t.ep:
            runs.update({str(k): int(v) for k, v in use["runs"].items()})
            kind = use.get("fallback")
            inside = named.get(t.nodeid, {}).get(use["session"])
            if kind and (inside is None or sum(use["runs"].values()) > inside):  # else its subtests name it, each
                fallbacks.append(Fallback(t.nodeid, kind, list(use["asked"]), list(use["served"]),
                                          use.get("reason", "")))
        errors = [u.get("error", "") for u in t.ep if u.get("error")]
        entry = EpTest(dict(sorted(runs.items())), len(t.ep), errors, node_runs(t), unseen_of(t))
        per_test[t.nodeid] = entry
        if t.outcome in JUDGED and not entry.cuda_runs and not any(u.get("fallback") for u in t.ep):
            hollow.append(t.nodeid)  # a fallback already says why it made no CUDA run
    return EpCensus(taken, per_test, fallbacks, sorted(hollow), nodes_taken)


def _named_by_subtests(tests: Sequence[TestResult]) -> dict[str, dict[int, int]]:
    """Per test, the sessions whose fallback one of its subtests met, with the runs its subtests made of each: a
    test's census holds its subtests', so such a fallback is listed once, under the subtest it happened in, unless
    the test also ran that session outside its subtests (then it is listed under the test too)."""
    runs: dict[str, dict[int, int]] = {}
    fell: dict[str, set[int]] = {}
    for t in tests:
        parent = parent_of(t.nodeid)
        if parent is None:
            continue
        for u in t.ep:
            per = runs.setdefault(parent, {})
            per[u["session"]] = per.get(u["session"], 0) + sum(u["runs"].values())
            if u.get("fallback"):
                fell.setdefault(parent, set()).add(u["session"])
    return {p: {sid: runs[p][sid] for sid in sids} for p, sids in fell.items()}


def _allowed(rules: Sequence[FallbackRule], nodeid: str, reason: str) -> str | None:
    """The test regex of the first rule that accepts this test's fallback with ORT's reason, or None."""
    rule = next((r for r in rules if rule_covers(r, nodeid) and re.search(r.error, reason)), None)
    return None if rule is None else rule.test


def _made(entry: EpTest) -> str:
    """What a test that made no (or too few) CUDA runs did instead."""
    others = ", ".join(f"{ep} x{n}" for ep, n in entry.runs.items() if n and ep != CUDA_EP)
    made = f"its runs were served by {others}" if others else "it made no run at all"
    return made + (f"; its CUDA session failed: {entry.errors[0]}" if entry.errors else "")


def unallowed_fallback(expect: DispatchExpect, t: TestResult) -> bool:
    """Whether a test met a fallback that no allowed_fallbacks rule accepts (what confirmation reruns)."""
    return any(use.get("fallback") and _allowed(expect.allowed_fallbacks, t.nodeid, use.get("reason", "")) is None
               for use in t.ep)


def judge(expect: DispatchExpect, tests: Sequence[TestResult], taken: bool,
          nodes_taken: bool = False) -> tuple[EpCensus, EpFindings]:
    """The census with every rule applied: reasons for fallbacks no rule allows and broken cuda_runs rules,
    a warning for hollow passes, and the stale rules; then the node rules (judge/nodes.py), where a node census
    was taken."""
    raw = census(tests, taken, nodes_taken)
    out = EpFindings()
    fallbacks = [dataclasses.replace(f, allowed_by=_allowed(expect.allowed_fallbacks, f.nodeid, f.reason))
                 for f in raw.fallbacks]
    result = EpCensus(taken, raw.tests, fallbacks, raw.hollow, nodes_taken, list(expect.nodes.shape_ops))
    bad = result.unallowed()
    if bad:
        tests_hit = sorted({f.nodeid for f in bad})
        out.reasons.append(f"{len(tests_hit)} test(s) asked for the CUDA EP and were served by another (no "
                           f"allowed_fallbacks rule matches): {listing([f.line() for f in bad])}")
    for rule in expect.allowed_fallbacks:
        if any(f.allowed_by == rule.test and re.search(rule.error, f.reason) for f in fallbacks):
            continue
        near = [f.line() for f in fallbacks if rule_covers(rule, f.nodeid)]
        ran = [t.nodeid for t in tests if rule_covers(rule, t.nodeid)]
        what = ("no fallback had a reason it matches" if near else
                "no test it matches fell back" if ran else GONE)
        out.stale.append(("allowed_fallbacks", rule, what, near or ran))
    for runs_rule in expect.cuda_runs:
        out.reasons += _cuda_runs(runs_rule, as_judged(tests), result, out)
    if result.hollow:
        lines = [f"{n} ({_made(result.tests[n])})" for n in result.hollow]
        out.warnings.append(f"{len(lines)} hollow pass(es): passed after asking for the CUDA EP, with no run it "
                            f"served: {listing(lines)}")
    if nodes_taken or expect.cuda_ops:  # a cuda_ops rule is judged without a node census too: it cannot pass then
        found = nodes.judge(expect, tests)
        out.reasons += found.reasons
        out.warnings += found.warnings
        out.stale += found.stale
    return result, out


def _cuda_runs(rule: CudaRunsRule, tests: Sequence[TestResult], census_: EpCensus, out: EpFindings) -> list[str]:
    judged = [t for t in tests if t.outcome in JUDGED and rule_covers(rule, t.nodeid)]
    if not judged:
        others = [f"{t.nodeid} ({t.outcome})" for t in tests if rule_covers(rule, t.nodeid)]
        out.stale.append(("cuda_runs", rule, "it matched no test that passed" if others else GONE, others))
        return []
    short = []
    for t in judged:
        entry = census_.tests.get(t.nodeid)
        if entry is None:
            short.append(f"{t.nodeid} made 0 CUDA run(s) (it asked for no CUDA session)")
        elif entry.cuda_runs < rule.min:
            detail = f" ({_made(entry)})" if not entry.cuda_runs else ""
            short.append(f"{t.nodeid} made {entry.cuda_runs} CUDA run(s){detail}")
    if not short:
        return []
    return [f"cuda_runs rule {rule.test!r} (min {rule.min}) broken by {len(short)} test(s): {listing(short)}"]


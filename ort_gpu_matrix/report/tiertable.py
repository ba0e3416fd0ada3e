"""Tiers by test function: the table a user writes the first tier rules from, and sees them broken in.

One row per test function (its parameterized cases folded, judge/tiers.py function_of), one column per tier
any of them dispatched (whatever its name: XQA too), each count the number of the function's cases
that dispatched that tier in any cell's normal or require_cudnn run. Teeth is left out: MATH is forced
there. A tier a broken rule did not allow is marked, and so is `no tier` when a case broke a rule by
dispatching nothing.

Where the runs carry an EP census (judge/eps.py), two more columns say what served the function's
CUDA-asking sessions: its runs the CUDA EP served, and its cases that fell back (marked where no
allowed_fallbacks rule accepts it) or passed hollow. Functions that print no tier (norms, MoE) get a
row for these alone. Where the runs carry a node census too (judge/nodes.py), a third names the op types whose
nodes ran on an EP other than CUDA inside the sessions the CUDA EP served; shape ops (ORT's CPU-preferred nodes,
not judged) are only counted there, by the shape_ops of the suite each result was judged with
(kept in its EP census). A function none of whose CUDA-served builds a node census saw reads `unknown`, never as none.

Kept compact for suites of thousands of tests: only functions that dispatched something, broke a
rule or asked for the CUDA EP, broken ones first, at most `limit` rows, and the count of the functions
left out. Every test's tiers and EPs stay in each result's census.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ort_matrix_probe.schema import parent_of

from ..judge.eps import CUDA_EP, EpCensus, EpTest
from ..judge.tiers import function_of
from ..store.results import Result

NONE = "no tier"
OPS_SHOWN = 6  # op types the ops on CPU column names before `+N more` (the CPU nodes section names every one)
OP_CLIP = 60  # characters of one op type there (an op type is the tested graph's text)
JUDGED_MODES = ("normal", "require_cudnn")


@dataclass
class Row:
    function: str
    cases: set[str] = field(default_factory=set)  # node ids with an outcome
    by_tier: dict[str, set[str]] = field(default_factory=dict)  # tier -> node ids that dispatched it
    silent: set[str] = field(default_factory=set)  # node ids that passed and dispatched nothing anywhere
    marked: set[str] = field(default_factory=set)  # tiers (or NONE) a broken rule did not allow
    rules: set[str] = field(default_factory=set)  # the broken rules' regexes
    asked: set[str] = field(default_factory=set)  # node ids with a CUDA-asking session (the EP census)
    cuda_runs: int = 0  # runs the CUDA EP served, over its cases and cells
    fell_back: set[str] = field(default_factory=set)  # node ids whose CUDA-asking session another EP served
    unallowed: set[str] = field(default_factory=set)  # of those, the ones no allowed_fallbacks rule accepts
    hollow: set[str] = field(default_factory=set)  # passed, asked for the CUDA EP, made no CUDA run
    cpu_ops: set[str] = field(default_factory=set)  # op types whose nodes ran off CUDA in a CUDA-served session
    shape_cpu: set[str] = field(default_factory=set)  # of those, the ones the run's suite calls shape ops
    placed: set[str] = field(default_factory=set)  # node ids whose placement a node census saw (in some run)
    unplaced: set[str] = field(default_factory=set)  # node ids whose placement some run did not see

    @property
    def broken(self) -> bool:
        return bool(self.rules or self.unallowed)

    def ep_cells(self, mark: str) -> tuple[str, str, str]:
        """The CUDA runs, fallbacks and ops on CPU columns: `12`, `2 ✗` (unallowed), `1 hollow`, `-`."""
        fallbacks = f"{len(self.fell_back)}" + (f" {mark}" if self.unallowed else "") if self.fell_back else ""
        hollow = f"{len(self.hollow)} hollow" if self.hollow else ""
        return ((str(self.cuda_runs) if self.asked else "-"), ", ".join(x for x in (fallbacks, hollow) if x) or "-",
                self.cpu_cell())

    def cpu_cell(self) -> str:
        """The ops on CPU column: `Det, Unique`, `Unique +2 shape` (shape op types only counted), `-` where none ran
        off CUDA, `unknown` where no node census saw a case's placement, `, 1 unseen` where it saw only some cases'."""
        if not self.asked:
            return "-"
        if not self.placed:
            return "unknown"
        judged = sorted(op if len(op) <= OP_CLIP else op[:OP_CLIP - 1] + "…" for op in self.cpu_ops - self.shape_cpu)
        shape = len(self.cpu_ops & self.shape_cpu)
        text = ", ".join(judged[:OPS_SHOWN]) + (f" +{len(judged) - OPS_SHOWN} more" if len(judged) > OPS_SHOWN else "")
        if shape:
            text += f" +{shape} shape" if text else f"{shape} shape"
        return (text or "-") + (f", {len(self.unplaced)} unseen" if self.unplaced else "")

    def count(self, tier: str) -> int:
        return len(self.silent) if tier == NONE else len(self.by_tier.get(tier, ()))


@dataclass(frozen=True)
class TierTable:
    tiers: list[str]  # the columns: every tier a shown row dispatched, then NONE when a row has one
    rows: list[Row]
    left_out: int  # functions with a tier or a break not shown (over the limit)
    ep: bool = False  # some run carried an EP census with a CUDA-asking test: show its columns

    @property
    def empty(self) -> bool:
        return not self.rows


def placement_seen(census: EpCensus, entry: EpTest) -> bool:
    """Whether a node census saw where every node of a test's CUDA-served builds ran. Not where the run took none
    (before report version 5, or with ORT_MATRIX_NODE_CENSUS=off) or the probe says why some build's is unseen; nor
    where CUDA ran the test's sessions and no node is listed (a stored result that says otherwise is not believed)."""
    if not census.nodes_taken or entry.nodes_unseen:
        return False
    return bool(entry.nodes) or not entry.cuda_runs


def _census(row: Row, nodeid: str, census: EpCensus, entry: EpTest) -> None:
    row.asked.add(nodeid)
    row.cuda_runs += entry.cuda_runs
    (row.placed if placement_seen(census, entry) else row.unplaced).add(nodeid)
    off = {n.op for n in entry.nodes if n.runs and n.ep != CUDA_EP}
    row.cpu_ops |= off
    row.shape_cpu |= off & set(census.shape_ops)


def tier_table(results: Sequence[Result], limit: int) -> TierTable:
    rows: dict[str, Row] = {}
    for r in results:
        if r.mode not in JUDGED_MODES:
            continue
        holders = {p for n in r.outcomes if (p := parent_of(n)) is not None}
        for nodeid, outcome in r.outcomes.items():
            if nodeid in holders and not r.dispatch.tests.get(nodeid):
                continue  # a test whose subtests ran what it ran: they are its function's cases here
            row = rows.setdefault(function_of(nodeid), Row(function_of(nodeid)))
            row.cases.add(nodeid)
            for tier in r.dispatch.tests.get(nodeid, []):
                row.by_tier.setdefault(tier, set()).add(nodeid)
            if outcome in ("passed", "xpassed") and not r.dispatch.tests.get(nodeid):
                row.silent.add(nodeid)
        for nodeid, entry in r.ep.tests.items():
            if parent_of(nodeid) is not None:
                continue  # its test's census holds its runs
            _census(rows.setdefault(function_of(nodeid), Row(function_of(nodeid))), nodeid, r.ep, entry)
        for f in r.ep.fallbacks:
            row = rows.setdefault(function_of(f.nodeid), Row(function_of(f.nodeid)))
            row.fell_back.add(f.nodeid)
            if f.allowed_by is None:
                row.unallowed.add(f.nodeid)
        for nodeid in r.ep.hollow:
            rows.setdefault(function_of(nodeid), Row(function_of(nodeid))).hollow.add(nodeid)
        for b in r.tier_breaks:
            row = rows.setdefault(b.function, Row(b.function))
            row.marked |= {t for t in b.dispatched if t not in b.only} or {NONE}
            row.rules.add(b.rule)
    for row in rows.values():  # a case that dispatched in another cell is not silent
        row.silent -= {n for ids in row.by_tier.values() for n in ids}
    shown = sorted((r for r in rows.values() if r.by_tier or r.broken or r.asked), key=lambda r: (not r.broken, r.function))
    kept = shown[:limit]
    tiers = sorted({t for r in kept for t in r.by_tier})
    if any(r.count(NONE) or NONE in r.marked for r in kept):
        tiers.append(NONE)
    return TierTable(tiers, kept, len(shown) - len(kept), any(r.asked for r in kept))


def cell(row: Row, tier: str, mark: str) -> str:
    """A count as a table shows it: `6`, `6 ✗` where a broken rule did not allow the tier, `-` for none."""
    n = row.count(tier)
    text = str(n) if n else "-"
    return f"{text} {mark}" if tier in row.marked else text

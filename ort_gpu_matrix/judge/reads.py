"""Which tests a mode that only sets variables can change: the probe's census of reads, kept and asked.

require_cudnn differs from normal only in ORT_TEST_REQUIRE_CUDNN_SDPA. A test that never read it in a run
behaves there as it would under require_cudnn up to the first read, and there is none: its outcome carries
over (drive/carry.py). The probe counts every read (ort_matrix_probe/envreads.py); this keeps what it counted
in the result, and answers, for one test, whether it provably cannot change and, where it can, why.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ort_matrix_probe.schema import EVERYTHING, ProbeReport

from ..util.codec import stored


@dataclass(frozen=True)
class ReadCensus:
    """The reads of the watched variables one run's tests made: per test (only the tests that read one), and per
    wider scope (a module's or a class's node id prefix, "" for every test) with the first place each was read
    (the tests' own file and line: untrusted text, escaped where shown). Not `taken`: nothing is known."""

    taken: bool = False
    watched: list[str] = field(default_factory=list, metadata=stored(omit_default=True))
    tests: dict[str, list[str]] = field(default_factory=dict, metadata=stored(omit_default=True))
    scopes: dict[str, list[str]] = field(default_factory=dict, metadata=stored(omit_default=True))
    where: dict[str, list[str]] = field(default_factory=dict, metadata=stored(omit_default=True))

    @classmethod
    def of(cls, report: ProbeReport | None) -> ReadCensus:
        """The census a probe report holds (report version 6, where the engine watched a name), else not taken."""
        reads = report.get("env_reads") if report else None
        if report is None or not isinstance(reads, dict):
            return cls()
        tests = {n: sorted(e["env_reads"]) for n, e in report["tests"].items() if e.get("env_reads")}
        scopes = {s["scope"]: list(s["names"]) for s in reads.get("scopes", [])}
        where = {s["scope"]: list(s["where"]) for s in reads.get("scopes", [])}
        return cls(True, sorted(reads.get("watched", [])), tests, scopes, where)

    def changes(self, nodeid: str, names: Sequence[str]) -> str | None:
        """Why `nodeid` may behave otherwise where `names` are set: None where it provably cannot (it read none of
        them, nor the whole environment, and no read wider than it did)."""
        if not self.taken:
            return "no census of its reads"
        unwatched = sorted(set(names) - set(self.watched))
        if unwatched:
            return f"{', '.join(unwatched)} was not watched"
        wanted = {*names, EVERYTHING}
        read = [n for n in self.tests.get(nodeid, []) if n in wanted]
        if read:
            return f"it read {_what(read)}"
        for scope in sorted(self.scopes):
            why = self.wide(scope, names) if covers(scope, nodeid) else None
            if why is not None:
                return why
        return None

    def wide(self, scope: str, names: Sequence[str]) -> str | None:
        """Why every test of `scope` ("": every test) may change where `names` are set, or None: nothing of them
        was read there."""
        seen = self.scopes.get(scope, [])
        hit = [n for n in seen if n in {*names, EVERYTHING}]
        if not hit:
            return None
        site = self.where.get(scope, [])
        at = f" at {site[seen.index(hit[0])]}" if len(site) == len(seen) else ""
        return f"{_what(hit)} was read{at}, " + (f"for every test of {scope}" if scope else "for every test")


def covers(scope: str, nodeid: str) -> bool:
    """A wider read's scope holds the test: every test (""), or a module's or a class's tests by node id prefix."""
    return not scope or nodeid == scope or nodeid.startswith(scope + "::")


def _what(names: Sequence[str]) -> str:
    plain = [n for n in names if n != EVERYTHING]
    said = [*plain, *(["the whole environment (copied, iterated or inherited by a child process)"]
                      if EVERYTHING in names else [])]
    return " and ".join(said)

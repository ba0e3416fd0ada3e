"""Whether a rule's regex covers an id: a test's, or a subtest's only where the rule says so.

A subtest's id extends its test's (`f.py::T::test [msg] (i=3)`), so a regex searched in ids matches every
subtest of each test it matches. A rule written for a test is about that test: a known failure of the test
does not make each failing subtest expected, and a release engineer who wants that writes it down, with
`subtests = true`. A regex names a subtest, and covers it, when it matches the subtest's id but neither its
test's id nor its description alone: the match spans both, as the whole id calibrate writes does. A regex that
matches the description alone (`float16`, `i=1`) names no test, so it covers nothing: a rule written for one test
never accepts a like-named case of another. Every judge and calibrate ask here, so the rule reads the same in a
verdict, a rerun and a stale check.
"""
from __future__ import annotations

import re
from typing import Protocol

from ort_matrix_probe.schema import parent_of


class Matching(Protocol):
    @property
    def test(self) -> str: ...

    @property
    def subtests(self) -> bool: ...


def covers(pattern: str, nodeid: str, subtests: bool = False) -> bool:
    """`pattern` covers `nodeid`: a test's when it matches it; a subtest's when it names the subtest (a match that
    spans its test's id and its description), or when `subtests` is said and it matches the subtest's test."""
    parent = parent_of(nodeid)
    if parent is None:
        return re.search(pattern, nodeid) is not None
    if re.search(pattern, parent):
        return subtests
    description = nodeid[len(parent) + 1:]
    return re.search(pattern, nodeid) is not None and re.search(pattern, description) is None


def rule_covers(rule: Matching, nodeid: str) -> bool:
    return covers(rule.test, nodeid, rule.subtests)

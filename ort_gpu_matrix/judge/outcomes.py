"""The words every reader of a test's outcome shares, each defined once.

A failing outcome, the id a teardown error gets, the canary's bite and the short listing a reason
names its tests with were written in four modules and had begun to drift (one listing sorted, one
did not). They live here so that the verdict, the expectations, the reruns and calibrate cannot
disagree on what they mean.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ort_matrix_probe.schema import parent_of

FAILING = ("failed", "error")
JUDGED = ("passed", "xpassed")  # a pass, as every tier and EP rule reads one
TEARDOWN = "::teardown"  # the id a teardown error gets, beside its test's own outcome
LISTED = 8  # how many items a reason names before it says "and N more"
GONE = "it matched no test that ran (gone, renamed or deselected)"  # a stale rule's reason


def teardown_of(nodeid: str) -> str:
    """The id a test's teardown error is stored under."""
    return nodeid + TEARDOWN


def test_of(nodeid: str) -> str:
    """The test an id belongs to, as pytest collected it (what a rerun selects): a teardown error's id without
    its suffix, a subtest's test, any other id as it is."""
    if nodeid.endswith(TEARDOWN):
        return nodeid[:-len(TEARDOWN)]
    return parent_of(nodeid) or nodeid


def collected(nodeids: Iterable[str]) -> list[str]:
    """The ids of tests that ran, as pytest collected them: a teardown error or a subtest whose test is also
    listed is that test, not another one."""
    ids = list(nodeids)
    present = set(ids)
    return [n for n in ids if not (test_of(n) != n and test_of(n) in present)]


def first_line(message: str) -> str:
    return message.strip().splitlines()[0].strip() if message.strip() else ""


def bites(outcome: str, message: str, canary: str) -> bool:
    """The canary bit: the test failed, and the first line of its failure is exactly the canary's message.

    Only a failure counts (an error is a broken test, not a bite), and only the exact line: a
    different assertion holding the same words proves nothing about which kernel ran.
    """
    return outcome == "failed" and first_line(message) == canary


def listing(items: Sequence[str]) -> str:
    """The first LISTED items in sorted order, then "and N more": tests end in the order xdist's
    schedule gives, and two runs with the same offenders must give the same reason (a sweep compares them)."""
    shown = "; ".join(sorted(items)[:LISTED])
    return shown + (f"; and {len(items) - LISTED} more" if len(items) > LISTED else "")

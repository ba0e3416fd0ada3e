"""Reports that show what was expected: real sweeps of 120 tests against a real baseline, every report form.

Known failures and allowed skips are shown as expected, apart from the failure and the skip nobody
accepted; the regression group says what is new since the baseline, and a test that was failing
already and is still expected to fail is never shown as new.
"""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from helpers import CELL, SUITES

EXPECT = """
[suite.s.expect.normal]
min_passed = 100
allowed_skips = ["needs a GPU"]
known_failures = [{ test = 'test_many\\[(3|33|63|93)\\]', reason = "wrong on purpose" }]
"""
KNOWN = [f"test_many.py::test_many[{i}]" for i in (3, 33, 63, 93)]
NEW_FAIL, NEW_SKIP = "test_many.py::test_many[61]", "test_many.py::test_many[62]"


class Cells(HTMLParser):
    """The tests x cells grid: each row's test name and its cells' classes and text."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[tuple[str, str]]] = {}
        self._in, self._row, self._cls, self._td = False, None, None, False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id") == "picture":
            self._in = True
        elif self._in and tag == "td":
            self._td = True
            if "mono" in (a.get("class") or ""):
                self._row = a.get("title")
                self.rows[self._row] = []
                self._cls = None
            else:
                self._cls = a.get("class") or ""
                self.rows[self._row].append((self._cls, ""))

    def handle_data(self, data):
        if self._in and self._td and self._cls is not None and self._row:
            cls, text = self.rows[self._row][-1]
            self.rows[self._row][-1] = (cls, text + data)

    def handle_endtag(self, tag):
        if tag == "table":
            self._in = False
        elif tag == "td":
            self._td = False


@pytest.fixture(scope="module")
def swept(tmp_path_factory, venvs):
    from helpers import Harness
    h = Harness(tmp_path_factory.mktemp("expected"), venvs)
    h.write(["test_many.py"], root=SUITES / "expected", expect=EXPECT)
    base = h.nox("-s", "sweep", "--", "--save-baseline", "b")
    assert base.proc.returncode == 0, base.output[-3000:]
    h.write(["test_many.py"], root=SUITES / "expected", expect=EXPECT, suite_extra='env = { EXP_NEW = "1" }')
    run = h.nox("-s", "sweep", "--", "--baseline", "b")
    assert run.proc.returncode != 0, run.output[-3000:]
    return h, run


def test_the_result_records_which_outcomes_were_expected(swept):
    _, run = swept
    r = run.result("normal")
    assert r["counts"]["collected"] == 120
    assert {t: k for t, k in r["expected"].items() if k == "known failure"} == {t: "known failure" for t in KNOWN}
    assert sorted(t for t, k in r["expected"].items() if k == "allowed skip") == sorted(
        f"test_many.py::test_many[{i}]" for i in (7, 27, 47, 67, 87, 107))
    assert NEW_FAIL not in r["expected"] and NEW_SKIP not in r["expected"]


def test_the_terminal_and_markdown_grids_count_expected_and_unexpected_apart(swept):
    h, run = swept
    cell = "FAIL 108/5/7 (unexpected 2; expected 4 known failure, 6 allowed skip)"
    assert re.search(rf"^{re.escape(CELL)}\s+\S+\s+{re.escape(cell)}", run.output, re.M), run.output[-3000:]
    md = (h.results / "report.md").read_text()
    assert f"| {cell} |" in md
    for text in (run.output, md):
        assert ("unexpected: a failure, skip or toothless test no expectation accepts, or a pass that broke a tier "
                "rule; it fails the mode") in text
        assert "expected: accepted by the suite" in text


def test_the_regression_group_says_what_is_new_and_no_expected_failure_is_new(swept):
    h, run = swept
    new = (f"new since the baseline: 2 test(s) ({NEW_FAIL}; {NEW_SKIP}); 4 failing test(s) already failing and "
           "still expected, not new")
    assert f"  [verdict pass → fail: 1 row(s) in 1 cell(s) x 1 mode(s) (normal)]\n  {new}\n" in run.output
    sweep = json.loads((h.results / "sweep.json").read_text())
    moved = {c["test"] for c in sweep["regressions"] if c["kind"] == "test"}
    assert moved == {NEW_FAIL, NEW_SKIP} and not moved & set(KNOWN)
    md = (h.results / "report.md").read_text()
    assert "new since the baseline: 2 test(s)" in md


def test_the_html_grid_shows_expected_and_unexpected_apart_with_a_legend(swept):
    h, _ = swept
    html = (h.results / "report.html").read_text()
    grid = Cells()
    grid.feed(html)
    assert len(grid.rows) == 120
    for t in KNOWN:
        (cls, text), = grid.rows[t]
        assert cls.split() == ["t-xfail", "s-expected"] and text == "failed"  # expected, and unchanged: not new
    (cls, text), = grid.rows[NEW_FAIL]
    assert cls.split() == ["t-fail", "s-unexpected", "changed"] and text == "passed → failed"
    (cls, text), = grid.rows[NEW_SKIP]
    assert cls.split() == ["t-skip", "s-unexpected", "changed"]
    (cls, _), = grid.rows["test_many.py::test_many[7]"]
    assert cls.split() == ["t-skip", "s-expected"]
    (cls, _), = grid.rows["test_many.py::test_many[0]"]
    assert cls.split() == ["t-none"]
    assert 'id="expected-legend"' in html and "it does not fail the mode" in html
    assert "new since the baseline: 2 test(s)" in html


def test_a_known_flaky_test_within_its_set_is_expected_and_outside_it_is_not():
    """In-process: a known_flaky rule accepts a failure or skip within its set as expected, as the verdict
    does; outside its set, or a pass, it is not an expectation's doing. A known_failures rule that also
    matches does not count: the flaky rule alone judges the tests it matches."""
    from ort_gpu_matrix.config.model import FlakyRule, PassExpect, Rule
    from ort_gpu_matrix.judge.counts import TestResult
    from ort_gpu_matrix.judge.expected import KNOWN_FLAKY, why_expected

    rule = FlakyRule(test="t::flaky", outcomes=("passed", "failed"), tiers=("MATH",), reason="comes and goes")
    expect = PassExpect(known_flaky=(rule,), known_failures=(Rule(test="t::", reason="wrong"),))
    assert why_expected(expect, TestResult("t::flaky", "failed", "boom", ("MATH",)), None) == KNOWN_FLAKY
    assert why_expected(expect, TestResult("t::flaky", "failed", "boom", ("FLASH_ATTENTION",)), None) is None
    assert why_expected(expect, TestResult("t::flaky", "error", "boom", ()), None) is None  # not a listed outcome
    assert why_expected(expect, TestResult("t::flaky", "passed", "", ("MATH",)), None) is None
    assert why_expected(expect, TestResult("t::other", "failed", "boom", ()), None) == "known failure"
    from ort_gpu_matrix.config.model import TeethExpect
    from ort_gpu_matrix.judge.expected import BITTEN
    teeth = TeethExpect(known_flaky=(rule,))
    assert why_expected(teeth, TestResult("t::flaky", "failed", teeth.canary, ("MATH",)), None) == BITTEN

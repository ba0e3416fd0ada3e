"""Tier rules, for tests that never check their own tier: judged, calibrated, shown, stale.

Every scenario runs the real nox against the `tiers` fixture suite, whose tests print the tiers they
name on fd 1 (XQA and a name with digits among them) from real CPU InferenceSessions, in real venvs
with the CPU wheel. The rule writer is also run on its own over several runs, as calibrate `--runs N`
hands it runs of one cell.
"""
from __future__ import annotations

import json
import tomllib

from helpers import CELL, SUITES
from test_calibrate import Calibration

from ort_gpu_matrix.calibrate.tiers import ObservedRun, tier_rules
from ort_gpu_matrix.config.model import Observation, TierRule
from ort_gpu_matrix.judge.counts import TestResult as Outcome
from ort_gpu_matrix.judge.tiers import function_of
from ort_gpu_matrix.util.escape import md as esc_md
from ort_gpu_matrix.util.voice import Voice

ROOT = SUITES / "tiers"
NODE = "test_tiers.py::"
RULES = """[suite.s.expect.normal]
allowed_skips = ["needs flash attention"]
tiers = [
  { test = "TestFlash::", only = ["FLASH_ATTENTION", "XQA"], reason = "flash tests run flash (or XQA)" },
  { test = "TestMemoryEfficient::", only = ["EFFICIENT_ATTENTION"], reason = "meant for memory-efficient" },
  { test = "test_xqa_past", only = ["XQA", "FLASH_ATTENTION"] },
  { test = "test_silent|<b>bold</b>", only = ["MATH"] },
  { test = "test_future_tier", only = ["FLASH_ATTENTION_V3"] },
  { test = "test_gone_away", only = ["MATH"], reason = "renamed since" },
  { test = "test_skipped_flash", only = ["FLASH_ATTENTION"] },
  { test = "xqa", only = ["XQA"], reason = "narrow: XQA alone" },
]
"""


def test_broken_rules_fail_the_verdict_naming_the_test_its_tiers_and_the_rule(harness, tmp_path):
    run = harness.run(["test_tiers.py"], root=ROOT, pythonpath=[".", ".."], expect=RULES,
                      suite_extra='env = { TIERS_SHIFT = "1" }')
    assert run.proc.returncode != 0
    r = run.result("normal")
    assert r["verdict"] == "fail"
    tier_reasons = [x for x in r["reasons"] if x.startswith("tier rule")]
    assert tier_reasons == [
        "tier rule 'TestFlash::' (only FLASH_ATTENTION, XQA) broken by 1 test(s): "
        f"{NODE}TestFlash::test_flash_attention[big] dispatched EFFICIENT_ATTENTION x1",
        "tier rule 'TestMemoryEfficient::' (only EFFICIENT_ATTENTION) broken by 2 test(s): "
        f"{NODE}TestMemoryEfficient::test_memory_efficient_0_small dispatched CUDNN_FLASH_ATTENTION x1; "
        f"{NODE}TestMemoryEfficient::test_memory_efficient_1_big dispatched CUDNN_FLASH_ATTENTION x2",
        f"tier rule 'test_silent|<b>bold</b>' (only MATH) broken by 1 test(s): {NODE}test_silent dispatched nothing",
        # every matching rule must hold: test_xqa_past meets its own rule, not the narrow one
        f"tier rule 'xqa' (only XQA) broken by 1 test(s): {NODE}test_xqa_past dispatched XQA x2, FLASH_ATTENTION x1",
    ]
    assert r["reasons"] == tier_reasons  # nothing else failed: the values all held
    # tier names as ORT printed them, kept whatever they are
    assert r["dispatch"]["tests"][f"{NODE}test_xqa_past"] == ["XQA", "FLASH_ATTENTION", "XQA"]
    assert r["dispatch"]["tests"][f"{NODE}test_future_tier"] == ["FLASH_ATTENTION_V3"]
    assert r["dispatch"]["tests_per_tier"]["XQA"] == 1
    assert "XQA 1" in run.output and "FLASH_ATTENTION_V3 1" in run.output  # the cell table's kernels column
    assert {(b["nodeid"], b["dispatched"], b["rule"], b["only"]) for b in r["tier_breaks"]} >= {
        (f"{NODE}TestFlash::test_flash_attention[big]", "EFFICIENT_ATTENTION", "TestFlash::", "FLASH_ATTENTION, XQA"),
        (f"{NODE}test_silent", "", "test_silent|<b>bold</b>", "MATH")}
    stale = {s["pattern"]: s["why"] for s in r["stale_rules"]}
    assert stale == {"test_gone_away": "it matched no test that ran (gone, renamed or deselected)",
                     "test_skipped_flash": f"it matched no test that passed: {NODE}test_skipped_flash (skipped)"}
    assert ("stale rule: tiers 'test_gone_away' matched nothing in this run (it matched no test that ran (gone, "
            "renamed or deselected)); `nox -s calibrate` drops it") in r["warnings"]

    # the table a user writes rules from, in the three report forms
    out = tmp_path / "report"
    rep = harness.nox("-s", "report", "--", str(harness.results), "--out", str(out))
    text = rep.output
    assert "tiers by test function under test_tiers.py::" in text, text[-3000:]
    row = next(line for line in text.splitlines() if line.strip().startswith("TestMemoryEfficient::test_memory_efficient "))
    cols = row.split()
    assert cols[:3] == ["TestMemoryEfficient::test_memory_efficient", "2", "2"] and "!" in cols  # 2 cases, cuDNN 2, marked
    assert cols[-1] == "TestMemoryEfficient::"
    silent = next(line for line in text.splitlines() if line.strip().startswith("test_silent "))
    assert "1 !" in silent  # no tier: 1 case, marked
    md = (out / "report.md").read_text()
    assert "## Tiers by test function" in md
    assert ("| function | cases | CUDNN\\_FLASH\\_ATTENTION | EFFICIENT\\_ATTENTION | FLASH\\_ATTENTION | "
            "FLASH\\_ATTENTION\\_V3 | XQA | no tier | CUDA runs | fallbacks | ops on CPU | broken rule |") in md
    # each row also says how many runs the (stand-in) CUDA EP served, that nothing fell back and no op ran on the CPU
    assert "| TestFlash::test\\_flash\\_attention | 2 | - | 1 ✗ | 1 | - | - | - | 2 | - | - | TestFlash:: |" in md
    assert f"| test\\_silent | 1 | - | - | - | - | - | 1 ✗ | - | - | - | {esc_md('test_silent|<b>bold</b>')} |" in md
    assert "<b>" not in md
    assert "| test\\_future\\_tier | 1 | - | - | - | 1 | - | - | 1 | - | - | - |" in md  # no break, no mark
    page = (out / "report.html").read_text()
    table = page.split('<table id="tier-table">')[1].split("</table>")[0]
    assert "<th>XQA</th>" in table and "<th>FLASH_ATTENTION_V3</th>" in table
    assert '<td class="t-fail">1 ✗</td>' in table
    assert "<b>" not in table and "test_silent|&lt;b&gt;bold&lt;/b&gt;" in table  # a rule's regex is text


def test_a_pass_that_breaks_a_tier_rule_is_unexpected_in_every_report_form(harness, tmp_path):
    """The verdict fails on a broken rule, so the test that broke it is no "ok" pass in the expected/unexpected
    marks: the terminal and Markdown grids count it unexpected and the HTML grid marks its cell so; a pass that
    meets its rules stays unmarked."""
    from test_expected import Cells

    run = harness.run(["test_tiers.py"], root=ROOT, pythonpath=[".", ".."], expect=RULES,
                      suite_extra='env = { TIERS_SHIFT = "1" }')
    r = run.result("normal")
    broken = {b["nodeid"] for b in r["tier_breaks"]}
    assert broken == {f"{NODE}TestFlash::test_flash_attention[big]", f"{NODE}TestMemoryEfficient::test_memory_efficient_0_small",
                      f"{NODE}TestMemoryEfficient::test_memory_efficient_1_big", f"{NODE}test_silent",
                      f"{NODE}test_xqa_past"}
    assert all(r["outcomes"][t] == "passed" for t in broken)
    out = tmp_path / "report"
    rep = harness.nox("-s", "report", "--", str(harness.results), "--out", str(out))
    cell = "FAIL 8/0/1 (unexpected 5; expected 1 allowed skip)"
    assert cell in rep.output, rep.output[-3000:]
    assert f"| {cell} |" in (out / "report.md").read_text()
    grid = Cells()
    grid.feed((out / "report.html").read_text())
    for t in broken:
        (cls, _), = grid.rows[t]
        assert "s-unexpected" in cls.split(), (t, cls)
    for t in (f"{NODE}TestFlash::test_flash_attention[small]", f"{NODE}test_future_tier"):
        (cls, _), = grid.rows[t]  # passes that meet every rule they match: no mark
        assert "s-unexpected" not in cls.split() and "s-expected" not in cls.split(), (t, cls)


def test_a_failure_that_confirmation_clears_into_a_broken_rule_is_unexpected_in_the_reports(harness, tmp_path):
    """A sweep's confirmation judges a test whose failure did not reproduce by its rerun; when that rerun passes on
    a tier a rule forbids, the verdict fails on the rule, and the result's breaks (the tier table's and the
    expected/unexpected marks' source) name it too, not the first run's (none)."""
    flip = "test_flip.py::test_flip_flash"
    harness.write(["test_flip.py"], root=ROOT, pythonpath=[".", ".."],
                  suite_extra=f'env = {{ FLIP_STATE = "{tmp_path / "flips"}" }}',
                  expect='[suite.s.expect.normal]\ntiers = [{ test = "test_flip_flash", only = ["FLASH_ATTENTION"] }]\n')
    run = harness.nox("-s", "sweep", "--", "--confirm", "1")
    assert run.proc.returncode != 0, run.output[-3000:]
    r = run.result("normal")
    assert [(t["test"], t["unconfirmed"]) for t in r["confirmation"]["tests"]] == [(flip, ["unexpected"])]
    assert r["outcomes"] == {flip: "passed"}  # judged by the rerun that cleared its failure
    assert r["reasons"] == [f"tier rule 'test_flip_flash' (only FLASH_ATTENTION) broken by 1 test(s): {flip} "
                            "dispatched EFFICIENT_ATTENTION x1"]
    assert [(b["nodeid"], b["dispatched"]) for b in r["tier_breaks"]] == [(flip, "EFFICIENT_ATTENTION")]
    assert "| FAIL 1/0/0 (unexpected 1) |" in (harness.results / "report.md").read_text()


def test_calibrate_writes_a_rule_per_function_that_passes_and_a_changed_tier_fails_it(tmp_path, venvs):
    c = Calibration(tmp_path, venvs, pairings='{{ python = "{py}", ort = "cpu", torch = "none", libs = "x", '
                                              'modes = ["normal", "require_cudnn"] }}')
    c.matrix.write_text(c.matrix.read_text().replace(str(SUITES / "calibrate"), str(ROOT))
                        .replace('files = ["test_calibrate.py"]', 'files = ["test_tiers.py"]'))
    cell = f"c-{CELL.split('-')[1]}-x"
    cal = c.calibrate(cell)
    assert cal.returncode == 0, cal.stdout[-3000:]
    assert "normal: min_passed 8, 1 allowed skip(s), 5 tiers" in cal.stdout, cal.stdout[-3000:]
    assert "still failing after calibration" not in cal.stdout
    e = tomllib.loads(c.expect.read_text())["expect"]
    date = c.result(f"{cell}-normal")["started"][:10]
    seen = [{"cell": cell, "ort": "1.32.0", "date": date}]
    rules = {r["test"]: (r["only"], r["reason"], r["observed"]) for r in e["normal"]["tiers"]}
    cases = "(?:_[0-9]+(?:_.*)?)?(?:\\[.*\\])?$"
    assert rules == {
        f"^test_tiers\\.py::TestFlash::test_flash_attention{cases}":
            (["FLASH_ATTENTION"], f"seen in {cell}: 2 case(s), FLASH_ATTENTION in 2", seen),
        # the two parameterized.expand cases share one rule, which says what they really ran
        f"^test_tiers\\.py::TestMemoryEfficient::test_memory_efficient{cases}":
            (["CUDNN_FLASH_ATTENTION"], f"seen in {cell}: 2 case(s), CUDNN_FLASH_ATTENTION in 2", seen),
        f"^test_tiers\\.py::test_xqa_past{cases}": (["FLASH_ATTENTION", "XQA"], f"seen in {cell}: 1 case(s), "
                                                     "FLASH_ATTENTION in 1, XQA in 1", seen),
        f"^test_tiers\\.py::test_future_tier{cases}": (["FLASH_ATTENTION_V3"], f"seen in {cell}: 1 case(s), "
                                                       "FLASH_ATTENTION_V3 in 1", seen),
        f"^test_tiers\\.py::test_unforced{cases}": (["FLASH_ATTENTION"], f"seen in {cell}: 1 case(s), "
                                                    "FLASH_ATTENTION in 1", seen),
    }
    assert e["require_cudnn"]["tiers"] == e["normal"]["tiers"]
    again = c.nox("-s", cell)
    assert again.returncode == 0, again.stdout[-3000:]
    assert c.result(f"{cell}-normal")["stale_rules"] == []

    c.matrix.write_text(c.matrix.read_text().replace('expect_file = "expect/s.toml"',
                                                     'expect_file = "expect/s.toml"\nenv = { TIERS_SHIFT = "1" }'))
    shifted = c.nox("-s", cell)
    assert shifted.returncode != 0
    flash = f"^test_tiers\\.py::TestFlash::test_flash_attention{cases}"
    for mode in ("normal", "require_cudnn"):
        assert c.result(f"{cell}-{mode}")["reasons"] == [
            f"tier rule {flash!r} (only FLASH_ATTENTION) broken by 1 test(s): "
            f"{NODE}TestFlash::test_flash_attention[big] dispatched EFFICIENT_ATTENTION x1"]
    # re-calibrating never widens the reviewed rule: it stays, and calibrate says it still fails
    before = c.expect.read_text()
    recal = c.calibrate(cell)
    assert f"kept as written: tier rule {flash!r} (only FLASH_ATTENTION): broken by 1 test(s) in the runs calibrated" in recal.stdout, \
        recal.stdout[-3000:]
    assert f"still failing after calibration: {cell}-normal: tier rule" in recal.stdout
    assert json.dumps(tomllib.loads(before)["expect"]["normal"]["tiers"][0]["only"]) == \
        json.dumps(tomllib.loads(c.expect.read_text())["expect"]["normal"]["tiers"][0]["only"])


def test_teeth_does_not_apply_tier_rules_but_names_a_session_the_forcing_missed(harness):
    run = harness.run(["test_tiers.py"], root=ROOT, pythonpath=[".", ".."], modes=["teeth"])
    r = run.result("teeth")
    assert r["dispatch"]["tests"][f"{NODE}test_unforced"] == ["FLASH_ATTENTION"]
    assert r["dispatch"]["tests"][f"{NODE}test_xqa_past"] == ["MATH", "MATH", "MATH"]
    assert ("1 test(s) dispatched a tier other than MATH with MATH forced (the forcing did not reach their "
            f"sessions): {NODE}test_unforced dispatched FLASH_ATTENTION x1") in r["warnings"]
    assert r["tier_breaks"] == []


def _ran(nodeid: str, *tiers: str, outcome: str = "passed") -> Outcome:
    return Outcome(nodeid, outcome, "", tuple(tiers))


def test_the_rule_writer_takes_the_union_over_runs_and_skips_a_function_with_a_silent_case():
    a, b = Observation("gpu-a", "1.31.1", "2026-12-01"), Observation("gpu-b", "1.31.1", "2026-12-01")
    runs = [ObservedRun(a, [_ran("t.py::C::test_past_0_x", "FLASH_ATTENTION"), _ran("t.py::C::test_past_1_y", "XQA"),
                    _ran("t.py::test_mixed[1]", "MATH"), _ran("t.py::test_mixed[2]"),
                    _ran("t.py::test_cpu")]),
            ObservedRun(a, [_ran("t.py::C::test_past_0_x", "XQA"), _ran("t.py::C::test_past_1_y", "XQA")]),
            ObservedRun(b, [_ran("t.py::C::test_past_0_x", "FLASH_ATTENTION"), _ran("t.py::C::test_past_1_y", "XQA",
                                                                            outcome="failed")])]
    said: list[str] = []
    rules = tier_rules([], runs, lambda r: True, Voice.plain(say=said.append))
    assert rules == [TierRule("^t\\.py::C::test_past(?:_[0-9]+(?:_.*)?)?(?:\\[.*\\])?$", ("FLASH_ATTENTION", "XQA"),
                              "seen in gpu-a: 2 case(s), FLASH_ATTENTION in 1, XQA in 2; 1 case(s) dispatched other "
                              "tiers in other runs; gpu-b: 1 case(s), FLASH_ATTENTION in 1", (a, b))]
    assert said == ["not written: tier rule for t.py::test_mixed: 1 of its passed case(s) dispatched nothing "
                    "(e.g. t.py::test_mixed[2]), so any rule would fail them"]
    assert function_of("t.py::C::test_past_12_b2_s1[fp16]") == "t.py::C::test_past"
    # an old rule is kept, observed afresh; a stale one goes when calibrate says so
    old = [TierRule("test_past", ("FLASH_ATTENTION", "XQA"), "reviewed"), TierRule("test_gone", ("MATH",), "old")]
    kept = tier_rules(old, runs, lambda r: r.test == "test_gone", Voice.plain(say=said.append))
    assert [(r.test, r.reason, r.observed) for r in kept] == [("test_past", "reviewed", (a, b))]

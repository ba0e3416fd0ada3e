"""In-process tests for what an independent review of issues 22 to 25 found (each watched red first)."""
from __future__ import annotations

from ort_gpu_matrix.config.model import FlakyRule, PassExpect, TierRule
from ort_gpu_matrix.judge.counts import TestResult as T
from ort_gpu_matrix.judge.counts import count
from ort_gpu_matrix.judge.verdicts import judge_counts


def test_a_known_flaky_case_within_its_set_is_judged_by_its_flaky_rule_not_by_its_functions_tier_rule():
    """calibrate leaves a flaky case out of its function's tier rule, so the rule must not judge it either:
    case 3 may run EFFICIENT (its known_flaky rule says so) though its siblings' rule says FLASH only."""
    rules = (TierRule("test_past_flash", ("FLASH_ATTENTION",), "flash"),)
    flaky = (FlakyRule("test_past_flash_3$", ("passed",), ("EFFICIENT_ATTENTION", "FLASH_ATTENTION"), "unstable"),)
    tests = [T("t.py::test_past_flash_0", "passed", "", ("FLASH_ATTENTION",)),
             T("t.py::test_past_flash_3", "passed", "", ("EFFICIENT_ATTENTION",))]
    found = judge_counts(PassExpect(tiers=rules, known_flaky=flaky), tests, count(None, tests, 2), None)
    assert found.reasons == [] and found.tier_breaks == [] and found.stale == []
    # outside its flaky set it is judged (by the flaky rule), and a sibling that breaks the tier rule still does
    tests[1] = T("t.py::test_past_flash_3", "passed", "", ("MATH",))
    tests.append(T("t.py::test_past_flash_4", "passed", "", ("EFFICIENT_ATTENTION",)))
    found = judge_counts(PassExpect(tiers=rules, known_flaky=flaky), tests, count(None, tests, 3), None)
    assert [b.nodeid for b in found.tier_breaks] == ["t.py::test_past_flash_4"], found.tier_breaks
    assert any("test_past_flash_3" in r and "MATH" in r for r in found.reasons), found.reasons


def test_a_rerun_that_clears_one_change_but_shows_another_does_not_stand_for_the_test(harness, tmp_path):
    """Baseline: passed on FLASH. The first run: passed on EFFICIENT (a tier regression). The one rerun: failed
    on FLASH. The tier change did not reproduce, so it is unconfirmed; the failure was seen once, in a rerun,
    and never rerun: it must not become the test's outcome, a regression or a failing verdict."""
    from conftest import SUITES

    test = "test_schedule.py::test_scheduled"
    harness.write(["test_schedule.py"], root=SUITES / "tiers", pythonpath=[".", ".."],
                  suite_extra=(f'env = {{ SCHEDULE_STATE = "{tmp_path / "calls"}", SCHEDULE = '
                               '"passed:FLASH_ATTENTION,passed:EFFICIENT_ATTENTION,failed:FLASH_ATTENTION" }'))
    env = {"MATRIX_BASELINES": str(tmp_path / "baselines")}
    base = harness.nox("-s", "sweep", "--", "--save-baseline", "b", "--confirm", "0", env=env)
    assert base.proc.returncode == 0, base.output[-3000:]
    run = harness.nox("-s", "sweep", "--", "--baseline", "b", "--gate", "regressions", "--confirm", "1", env=env)
    r = run.result("normal")
    assert [(t["test"], t["unconfirmed"]) for t in r["confirmation"]["tests"]] == [(test, ["tier"])], r["confirmation"]
    assert r["outcomes"] == {test: "passed"} and r["verdict"] == "pass", (r["outcomes"], r["reasons"])
    assert run.proc.returncode == 0, run.output[-3000:]


def test_a_report_whose_pollution_or_isolation_was_tampered_with_is_not_judged():
    """The probe's report is written inside the test process, so what the engine reads of it is checked: a
    pollution entry of the wrong shape, or an isolation mode that does not exist, makes it malformed (the run
    then fails on that, instead of a traceback, or a baseline that no later load accepts)."""
    from ort_gpu_matrix.execute.probe_report import report_problem
    from ort_matrix_probe.schema import REPORT_VERSION

    good = {"report_version": REPORT_VERSION, "exitstatus": 0, "duration_s": 1.0, "collected": {}, "tests": {},
            "collection": [], "audits": [], "outside_tests_sdpa": [], "unattributed_sdpa": [], "provenance": {},
            "isolation": "restore", "pollution": [
                {"test": "t.py::a", "scope": "function", "process": "gw0", "undone": True, "later_tests": 2,
                 "changes": [{"what": "env", "name": "ORT_X", "before": None, "after": "1"}]}]}
    assert report_problem(good) is None
    bad_entry = {**good, "pollution": [1]}
    assert report_problem(bad_entry) == "the probe's report is malformed: an entry of 'pollution'"
    bad_change = {**good, "pollution": [{**good["pollution"][0], "changes": [{"what": "env", "name": 3}]}]}
    assert report_problem(bad_change) == "the probe's report is malformed: an entry of 'pollution'"
    assert report_problem({**good, "isolation": "x"}) == ("the probe's report is malformed: 'isolation' is 'x', "
                                                          "not one of ('restore', 'report', 'off')")
    # the EP census of a test (report version 3), checked as every other part: refused, never a traceback
    use = {"session": 1, "asked": ["CUDAExecutionProvider"], "served": ["CPUExecutionProvider"],
           "runs": {"CPUExecutionProvider": 2}, "fallback": "not_loaded", "reason": "Failed to load library"}
    entry = {"outcome": "passed", "message": "", "sdpa": []}
    assert report_problem({**good, "tests": {"t::a": {**entry, "ep": [use]}}}) is None
    for bad in (None, 5, "oops", {}, [1], [{**use, "fallback": "elsewhere"}], [{**use, "runs": {"CPU": True}}],
                [{**use, "served": "CPU"}]):
        assert report_problem({**good, "tests": {"t::a": {**entry, "ep": bad}}}) == \
            "the probe's report is malformed: the EP census of 't::a'", bad


def test_a_change_that_did_not_reproduce_against_one_baseline_still_counts_against_another(harness, tmp_path):
    """Swept against baseline a (FLASH), the first run's MATH did not reproduce (the rerun gave FLASH): unconfirmed,
    so the gate holds. The same results reported against baseline b (EFFICIENT) show a tier change that no
    rerun was judged against: it is a regression there, not dropped by a's record."""
    from conftest import SUITES

    test = "test_schedule.py::test_scheduled"
    harness.write(["test_schedule.py"], root=SUITES / "tiers", pythonpath=[".", ".."],
                  suite_extra=(f'env = {{ SCHEDULE_STATE = "{tmp_path / "calls"}", SCHEDULE = "passed:FLASH_ATTENTION,'
                               'passed:EFFICIENT_ATTENTION,passed:MATH,passed:FLASH_ATTENTION" }'))
    env = {"MATRIX_BASELINES": str(tmp_path / "baselines")}
    for name in ("a", "b"):
        saved = harness.nox("-s", "sweep", "--", "--save-baseline", name, "--confirm", "0", env=env)
        assert saved.proc.returncode == 0, saved.output[-3000:]
    swept = harness.nox("-s", "sweep", "--", "--baseline", "a", "--gate", "regressions", "--confirm", "1", env=env)
    assert swept.proc.returncode == 0, swept.output[-3000:]
    r = swept.result("normal")
    assert [(t["test"], t["unconfirmed"], t["against"]) for t in r["confirmation"]["tests"]] == [
        (test, ["tier"], "passed FLASH_ATTENTION ep=CUDA")]
    again_a = harness.nox("-s", "report", "--", str(harness.results), "--baseline", "a", "--gate", "regressions", env=env)
    assert again_a.proc.returncode == 0, again_a.output[-3000:]
    against_b = harness.nox("-s", "report", "--", str(harness.results), "--baseline", "b", "--gate", "regressions",
                            env=env)
    assert against_b.proc.returncode == 1, against_b.output[-3000:]
    assert "1 regression(s)" in against_b.output, against_b.output[-3000:]


def test_an_amended_result_never_replaces_a_newer_run_that_became_current_meanwhile(harness):
    """confirm.py re-stores each amended result; if another run of the session stored a newer result while the
    reruns ran, that newer one stays current, and the amended copy goes to its own bundle only."""
    import dataclasses
    import json

    from conftest import CELL

    from ort_gpu_matrix.store import results as store

    session = f"{CELL}-normal"
    assert harness.run(["test_allpass.py"], session=session).proc.returncode == 0
    older = store.load(harness.results / f"{session}.json")
    assert harness.run(["test_allpass.py"], session=session).proc.returncode == 0
    newer = store.load(harness.results / f"{session}.json")
    assert newer.run_id != older.run_id
    amended = dataclasses.replace(older, reasons=["amended"])
    assert store.store_amended(harness.results, amended) is False
    assert json.loads((harness.results / f"{session}.json").read_text())["run_id"] == newer.run_id
    assert json.loads((harness.results / "runs" / session / older.run_id / "result.json").read_text())["reasons"] == [
        "amended"]
    assert store.store_amended(harness.results, dataclasses.replace(newer, reasons=["amended too"])) is True
    assert json.loads((harness.results / f"{session}.json").read_text())["reasons"] == ["amended too"]


def test_calibrate_grows_a_known_flaky_rule_only_from_runs_where_its_test_was_flaky():
    """An old known_flaky rule ([passed, failed], FLASH) and two runs where its test was stable on MATH: the move
    to MATH is no flake, so the rule is not widened to accept it (the verdict then names it). Runs where the test
    did flake, between its old set and EFFICIENT, grow the rule by EFFICIENT."""
    from dataclasses import dataclass

    from ort_gpu_matrix.calibrate.flaky import flaky, rules
    from ort_gpu_matrix.config.model import Observation

    @dataclass
    class R:
        round: int
        tests: list
        observation: Observation = Observation("c", "1.31.1", "2026-12-01")
        mode: str = "normal"

    old = [FlakyRule("t.py::test_x$", ("failed", "passed"), ("FLASH_ATTENTION",), "unstable")]
    stable = [R(0, [T("t.py::test_x", "passed", "", ("MATH",))]), R(1, [T("t.py::test_x", "passed", "", ("MATH",))])]
    got = rules(old, flaky(stable, lambda r: "c"), stable, lambda r: "c", lambda rule: False)
    assert [(r.outcomes, r.tiers) for r in got] == [(("failed", "passed"), ("FLASH_ATTENTION",))], got
    flaking = [R(0, [T("t.py::test_x", "passed", "", ("EFFICIENT_ATTENTION",))]),
               R(1, [T("t.py::test_x", "failed", "boom", ("FLASH_ATTENTION",))])]
    got = rules(old, flaky(flaking, lambda r: "c"), flaking, lambda r: "c", lambda rule: False)
    assert [(r.outcomes, r.tiers) for r in got] == [(("failed", "passed"), ("EFFICIENT_ATTENTION", "FLASH_ATTENTION"))]

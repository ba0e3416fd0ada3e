"""carry.py's choice and reads.py's answers, in-process: which tests may change, and why; what a census covers."""
from ort_gpu_matrix.drive.carry import changing
from ort_gpu_matrix.judge.outcomes import TEARDOWN
from ort_gpu_matrix.judge.reads import ReadCensus, covers

CANARY = "ORT_TEST_REQUIRE_CUDNN_SDPA"


def census(tests=None, scopes=None, where=None):
    return ReadCensus(True, [CANARY], tests or {}, scopes or {}, where or {})


def test_a_test_with_a_space_in_its_parameter_is_a_test_and_a_teardown_error_is_its_tests():
    outcomes = {"f.py::test_a[x y]": "passed", f"f.py::test_b{TEARDOWN}": "error", "f.py::test_b": "passed",
                "f.py::T::test_c": "passed", "f.py::T::test_c (i=1)": "skipped"}
    why = changing(census({"f.py::test_a[x y]": [CANARY]}), outcomes, (CANARY,))
    assert why == {"f.py::test_a[x y]": f"it read {CANARY}", "f.py::T::test_c": "a subtest of it skipped there"}


def test_each_way_a_census_says_a_test_may_change():
    c = census({"f.py::t1": ["*"], "f.py::t2": ["OTHER"]}, {"g.py": [CANARY], "h.py::K": ["*"]},
               {"g.py": ["/x/g.py:3"], "h.py::K": ["/x/h.py:9"]})
    assert c.changes("f.py::t1", (CANARY,)).startswith("it read the whole environment")
    assert c.changes("f.py::t2", (CANARY,)) is None  # another variable: it cannot change
    assert c.changes("g.py::t", (CANARY,)) == f"{CANARY} was read at /x/g.py:3, for every test of g.py"
    assert c.changes("h.py::K::t", (CANARY,)).startswith("the whole environment")
    assert c.changes("h.py::Kx::t", (CANARY,)) is None  # another class: a prefix is a node id, not a string
    assert c.changes("f.py::t2", ("NOT_WATCHED",)) == "NOT_WATCHED was not watched"
    assert ReadCensus().changes("f.py::t", (CANARY,)) == "no census of its reads"
    assert census(scopes={"": [CANARY]}).wide("", (CANARY,)) == f"{CANARY} was read, for every test"
    assert covers("", "any.py::t") and covers("a.py", "a.py::t") and not covers("a.py", "a.py2::t")


def test_a_census_is_read_from_the_probe_report_as_it_stands():
    assert ReadCensus.of(None) == ReadCensus() and not ReadCensus.of(None).taken
    assert ReadCensus.of({"tests": {}}) == ReadCensus()  # a report of no census (version 5, or nothing watched)
    report = {"tests": {"f.py::b": {"env_reads": ["*", CANARY]}, "f.py::a": {"env_reads": []}, "f.py::c": {}},
              "env_reads": {"watched": ["Z", CANARY], "scopes": [
                  {"scope": "", "names": ["*"], "where": ["worker gw1 went down"]},
                  {"scope": "g.py", "names": [CANARY, "*"], "where": ["/x/g.py:2", "/x/g.py:5"]}]}}
    got = ReadCensus.of(report)
    assert got == ReadCensus(True, [CANARY, "Z"], {"f.py::b": ["*", CANARY]}, {"": ["*"], "g.py": [CANARY, "*"]},
                             {"": ["worker gw1 went down"], "g.py": ["/x/g.py:2", "/x/g.py:5"]})
    assert got.changes("g.py::t", (CANARY,)) == ("the whole environment (copied, iterated or inherited by a child "
                                                 "process) was read at worker gw1 went down, for every test")
    both = f"{CANARY} and the whole environment (copied, iterated or inherited by a child process)"
    assert got.wide("g.py", (CANARY,)) == f"{both} was read at /x/g.py:2, for every test of g.py"
    assert got.wide("g.py", ("Y",)).startswith("the whole environment") and got.wide("h.py", (CANARY,)) is None
    partial = ReadCensus(True, [CANARY], {}, {"g.py": [CANARY, "*"]}, {"g.py": ["/x/g.py:2"]})  # sites lost
    assert partial.wide("g.py", (CANARY,)) == f"{both} was read, for every test of g.py"
    assert got.changes("f.py::b", (CANARY,)) == f"it read {both}"


def test_carried_entries_are_judged_with_the_runs_own_and_an_exit_5_of_dropped_tests_is_no_reason():
    from test_judge_units import COUNTS, ev, report

    from ort_gpu_matrix.config.model import PassExpect
    from ort_gpu_matrix.judge.verdicts import Standard, Status, judge

    own = report({"t::a": {"outcome": "passed", "sdpa": ["MATH"]}})
    carried = {"t::b": {"outcome": "failed", "message": "boom", "sdpa": ["CUDNN_FLASH_ATTENTION"]}}
    v = judge(ev(own), Standard(COUNTS, PassExpect(), (), "/venv"), carried=carried)
    assert v.outcomes == {"t::a": "passed", "t::b": "failed"} and v.status is Status.FAIL
    assert (v.counts.collected, v.counts.passed, v.counts.failed) == (2, 1, 1)
    assert v.dispatch.tests == {"t::a": ["MATH"], "t::b": ["CUDNN_FLASH_ATTENTION"]}
    assert v.reasons == ["1 unexpected failure(s): t::b failed: boom"], v.reasons
    empty = report({}, exitstatus=5)
    kept = {"t::b": {"outcome": "passed"}}
    assert judge(ev(empty, exit_code=5, dropped=1), Standard(COUNTS, PassExpect(), (), "/venv"), carried=kept).reasons == []
    said = judge(ev(empty, exit_code=5), Standard(COUNTS, PassExpect(), (), "/venv"), carried=kept).reasons
    assert any("pytest exit 5" in r for r in said)  # nothing dropped: nothing collected is a reason still


def test_more_reasons_fail_a_verdict_and_a_rule_of_a_left_out_test_is_not_stale():
    import dataclasses

    from test_judge_units import COUNTS, ev, report

    from ort_gpu_matrix.config.model import PassExpect
    from ort_gpu_matrix.judge.stale import StaleRule
    from ort_gpu_matrix.judge.verdicts import Standard, Status, judge, not_stale_for, with_reasons

    v = judge(ev(report({"t::a": {"outcome": "passed"}})), Standard(COUNTS, PassExpect(), (), "/venv"))
    assert with_reasons(v, []) is v
    failed = with_reasons(v, ["x"])
    assert (failed.status, failed.reasons) == (Status.FAIL, [*v.reasons, "x"])
    gone, kept = StaleRule("known_failures", "^t::gone$", "r", "w"), StaleRule("known_failures", "^t::here$", "r", "w")
    stale = dataclasses.replace(v, stale_rules=[gone, kept], warnings=["other", gone.warning(), kept.warning()])
    assert not_stale_for(stale, []) is stale
    cut = not_stale_for(stale, ["t::gone"])
    assert cut.stale_rules == [kept] and cut.warnings == ["other", kept.warning()]


def test_confirmation_reads_a_carried_tests_entry_from_the_run_it_came_from(tmp_path):
    import json

    from helpers import result

    from ort_gpu_matrix.compare.suspects import _report
    from ort_gpu_matrix.store.results import Selection

    runs = tmp_path / "runs"
    (runs / "c1-normal" / "N").mkdir(parents=True)
    (runs / "c1-normal" / "N" / "report.json").write_text(json.dumps(
        {"tests": {"t::b": {"outcome": "failed"}, "t::c": {"outcome": "passed"}}}))
    own = runs / "c1-require_cudnn" / "R"
    own.mkdir(parents=True)
    (own / "report.json").write_text(json.dumps({"tests": {"t::a": {"outcome": "passed"}},
                                                 "collected": {"gw0": 1, "gw1": 1}}))
    sel = Selection(False, "why", "c1-normal N", "c1-normal N", ["t::b"])
    r = result("require_cudnn", {"t::a": "passed", "t::b": "failed"}, report=str(own / "report.json"),
               bundle=str(own), selection=sel)
    got = _report(r)
    assert got["tests"] == {"t::a": {"outcome": "passed"}, "t::b": {"outcome": "failed"}}  # t::c was not carried
    assert got["collected"] == {"with the carried": 2}
    assert _report(result("require_cudnn", report=str(own / "report.json"), bundle=str(own)))["tests"] == {
        "t::a": {"outcome": "passed"}}  # nothing carried: the run's own report as it is
    lost = Selection(False, "why", "c1-normal N", "c1-normal M", ["t::b"])
    assert _report(result("require_cudnn", report=str(own / "report.json"), bundle=str(own), selection=lost)) is None


def test_a_census_that_cannot_be_handed_over_stops_the_waiting_child_with_sigint_and_says_why(tmp_path):
    """A child waits for its handoff file without bound (it dies with its parent). If the parent cannot write
    the file, the child would wait for ever: it is sent SIGINT instead, and stores an interrupted result."""
    import signal
    import subprocess
    import sys

    from ort_gpu_matrix.config.model import Libs, Ort, Suite, Torch
    from ort_gpu_matrix.drive.earlyteeth import hand_over
    from ort_gpu_matrix.drive.handoff import Handoff
    from ort_gpu_matrix.drive.scheduler import jobs_of
    from ort_gpu_matrix.plan.cells import Cell
    from ort_gpu_matrix.util.voice import Voice

    modes = ("normal", "require_cudnn", "teeth")
    cell = Cell("g-a", "3.12", Ort(id="o"), Torch(id="t"), Libs(id="a"), Suite(id="s"), modes, "k")
    normal, req, teeth = jobs_of([(cell, modes)], tmp_path)
    lines: list[str] = []
    handoff = Handoff(Voice.plain(log=lines.append))
    handoff.close()
    handoff.dir.write_text("")  # a file where its dir was: nothing can be written in it
    teeth.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        hand_over(req, [normal, req, teeth], handoff, tmp_path, Voice.plain(log=lines.append))
        assert teeth.proc.wait(timeout=10) == -signal.SIGINT
    finally:
        teeth.proc.kill()
        handoff.dir.unlink()
    assert any(line.startswith("g-a-teeth: the census could not be handed over (") and line.endswith("stopping it")
               for line in lines), lines


def test_teeths_known_cut_keeps_every_test_a_fast_tier_or_a_rule_names_and_every_test_this_venv_has_not_seen():
    """knowncut.left_out on stored results: what a "known" teeth leaves out, rule by rule."""
    from helpers import result

    from ort_gpu_matrix.config.model import TeethExpect
    from ort_gpu_matrix.config.rules import Rule
    from ort_gpu_matrix.drive.knowncut import left_out
    from ort_gpu_matrix.judge.counts import Dispatch
    from ort_gpu_matrix.store.results import Selection, VenvInfo

    here, other = {"ort": "1.31.1"}, {"ort": "1.30.0"}
    files = ["f.py::t_cudnn", "f.py::t_flash", "f.py::t_math", "f.py::t_plain", "f.py::t_failing", "f.py::t_toothless",
             "f.py::T::t_sub", "f.py::T::t_sub (i=1)"]
    mine = result("require_cudnn", dict.fromkeys(files, "passed"), venv=VenvInfo("/v", here),
                  selection=Selection(tests_digest="d1"),
                  dispatch=Dispatch({"f.py::t_cudnn": ["CUDNN_FLASH_ATTENTION"], "f.py::t_math": ["MATH"],
                                     "f.py::T::t_sub (i=1)": ["EFFICIENT_ATTENTION"]}))
    # another venv: its tests are not "seen" here, but a fast tier it saw keeps that test
    elsewhere = result("normal", {"f.py::t_flash": "passed", "f.py::t_new": "passed"}, venv=VenvInfo("/v", other),
                       selection=Selection(tests_digest="d1"), dispatch=Dispatch({"f.py::t_flash": ["FLASH_ATTENTION"]}))
    older_files = result("normal", {"f.py::t_gone": "passed"}, venv=VenvInfo("/v", here),
                         selection=Selection(tests_digest="d0"))
    expect = TeethExpect(known_failures=(Rule("t_failing", "fails under MATH"),),
                         known_toothless=(Rule("t_toothless$", "never bites"),))
    seen, drop = left_out([mine, elsewhere, older_files], here, "d1", expect)
    assert drop == ["f.py::t_math", "f.py::t_plain"]  # MATH only, or nothing: forcing MATH cannot change them
    assert seen == 7  # the subtest counts for its test; t_new (other venv) and t_gone (other files) unseen: they run
    assert left_out([mine], here, "d2", expect) == (0, [])  # other files: nothing seen, nothing left out
    no_digest = result("require_cudnn", dict.fromkeys(files, "passed"), venv=VenvInfo("/v", here))
    assert left_out([no_digest], here, "d1", expect) == (0, [])  # a run of an older schema chose nothing


def test_a_known_cut_always_reads_this_runs_require_cudnn_even_one_stopped_midway(tmp_path):
    """A teeth started early reads the runs on record from the store, where a stopped run is passed over; its own
    require_cudnn must be read all the same, however it ended: a test that dispatched a fast tier in it is kept,
    whether the census came in this process (serial) or was handed over (early)."""
    import time

    from helpers import result

    from ort_gpu_matrix.config.model import Libs, Ort, Suite, TeethExpect, Torch
    from ort_gpu_matrix.config.overrides import Workspace
    from ort_gpu_matrix.drive.context import CellRuns
    from ort_gpu_matrix.drive.knowncut import known_cut
    from ort_gpu_matrix.envs.venvs import Venv
    from ort_gpu_matrix.execute.request import ModeRun
    from ort_gpu_matrix.judge.counts import Dispatch
    from ort_gpu_matrix.plan.cells import Cell
    from ort_gpu_matrix.store import results
    from ort_gpu_matrix.store.results import Selection, VenvInfo
    from ort_gpu_matrix.util.voice import Voice

    modes = ("normal", "require_cudnn", "teeth")
    cell = Cell("g-a", "3.12", Ort(id="o"), Torch(id="t"), Libs(id="a"),
                Suite(id="s", expect={"teeth": TeethExpect()}), modes, "k")
    fp = {"tools": ["pytest"]}
    ws = Workspace(tmp_path, tmp_path / "v", False, None, tmp_path / "matrix.toml")
    run = ModeRun(cell, "teeth", None, Venv(tmp_path, tmp_path, tmp_path, fp), ws)
    ids = {"f.py::t_flash": "passed", "f.py::t_plain": "passed"}

    def stored(age_s, dispatch, **kw):
        return results.store(tmp_path, result("require_cudnn", ids, name="g-a", venv=VenvInfo("/v", fp),
                                              run_id=results.new_run_id(time.time() - age_s),
                                              selection=Selection(tests_digest="d"), dispatch=Dispatch(dispatch), **kw),
                             {}, current=False)

    stored(100, {"f.py::t_flash": ["MATH"], "f.py::t_plain": ["MATH"]})
    prior = stored(0, {"f.py::t_flash": ["FLASH_ATTENTION"], "f.py::t_plain": ["MATH"]}, stopped="timed out after 600 s")
    serial = CellRuns(cell, None, ws, (), {prior.session: prior}, Voice.plain())
    early = CellRuns(cell, None, ws, (), {}, Voice.plain())
    assert known_cut(serial, run, prior, "d").drop == ["f.py::t_plain"]
    assert known_cut(early, run, prior, "d").drop == ["f.py::t_plain"]
    # started beside it, before it was stored: by the runs on record alone (the stopped one is passed over there)
    cut = known_cut(early, run, None, "d", later=True)
    assert cut.drop == ["f.py::t_flash", "f.py::t_plain"] and len(cut.runs) == 1
    assert cut.why == ("0 known test(s) ran that dispatched a tier MATH takes away in a run on record, or that "
                       "known_toothless or known_failures names, and any test no run of this venv and these files has "
                       "seen; 2 left out (1 run(s) read) (decided as it started beside its require_cudnn, which it is "
                       "judged by once stored)")
    assert known_cut(serial, run, prior, "d").why.endswith("; 1 left out (2 run(s) read)")
    none = known_cut(early, run, None, "d")  # after it, without it: nothing would check a cut
    assert none.drop is None and none.why == ("every test ran: no require_cudnn run of this venv in this nox process "
                                              "or sweep to check what a cut would leave out")
    import dataclasses
    asked = known_cut(dataclasses.replace(serial, full=True), run, prior, "d", later=True)
    assert (asked.drop, asked.why) == (None, "every test ran: --full")
    suite_full = dataclasses.replace(cell, suite=dataclasses.replace(cell.suite, full=True))
    by_suite = known_cut(serial, dataclasses.replace(run, cell=suite_full), prior, "d", later=True)
    assert (by_suite.drop, by_suite.why) == (None, "every test ran: suite s sets full")


def test_a_test_that_skipped_or_xfailed_in_normal_runs_again_and_a_read_is_named_first():
    """A skip may hide a gate (a dispatch-gated test skips where its tier did not run): whatever the census says,
    a test that skipped or xfailed in normal, or has a subtest that did, runs again in require_cudnn."""
    outcomes = {"f.py::t_skip": "skipped", "f.py::t_xfail": "xfailed", "f.py::t_read_skip": "skipped",
                "f.py::t_pass": "passed", "f.py::t_sub": "passed", "f.py::t_sub (i=1)": "xfailed",
                "f.py::t_sub2": "passed", "f.py::t_sub2 (i=1)": "skipped", "f.py::t_sub3": "passed",
                "f.py::t_sub3 (i=1)": "passed"}
    why = changing(census({"f.py::t_read_skip": [CANARY]}), outcomes, (CANARY,))
    assert why == {"f.py::t_skip": "it skipped there (a skip may hide a gate)",
                   "f.py::t_xfail": "it xfailed there (a skip may hide a gate)",
                   "f.py::t_read_skip": f"it read {CANARY}",
                   "f.py::t_sub": "a subtest of it skipped there", "f.py::t_sub2": "a subtest of it skipped there"}


def test_a_cut_decided_before_require_cudnn_was_stored_names_what_it_missed_of_the_other_fast_tiers():
    """knowncut.missed_fast: a left-out test that dispatched FLASH or memory-efficient in this run's require_cudnn
    (by a subtest too) is named; one of the teeth's own tier is named elsewhere, as not run; MATH alone is none."""
    from helpers import result

    from ort_gpu_matrix.drive.knowncut import missed_fast
    from ort_gpu_matrix.judge.counts import Dispatch

    prior = result("require_cudnn", dispatch=Dispatch({
        "f.py::t_flash": ["FLASH_ATTENTION"], "f.py::t_cudnn": ["CUDNN_FLASH_ATTENTION"], "f.py::t_math": ["MATH"],
        "f.py::T::t_sub (i=1)": ["EFFICIENT_ATTENTION"], "f.py::t_kept": ["FLASH_ATTENTION"],
        "f.py::t_both": ["MATH", "FLASH_ATTENTION", "CUDNN_FLASH_ATTENTION"]}))
    drop = ["f.py::t_flash", "f.py::t_cudnn", "f.py::t_math", "f.py::T::t_sub", "f.py::t_both", "f.py::t_plain"]
    assert missed_fast(drop, prior, "CUDNN_FLASH_ATTENTION") == ["f.py::T::t_sub", "f.py::t_flash"]
    assert missed_fast(drop, prior, "FLASH_ATTENTION") == ["f.py::T::t_sub", "f.py::t_cudnn"]
    assert missed_fast([], prior, "CUDNN_FLASH_ATTENTION") == []

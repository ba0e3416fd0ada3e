"""calibrate's decisions in-process on runs built here: which failures and toothless tests it
accepts and with what reasons, how old rules are kept, refreshed or dropped, and the counts it writes.
Cells and results are stand-ins with the fields calibrate reads; tests/test_calibrate.py runs the real thing."""
from __future__ import annotations

from types import SimpleNamespace as NS

from ort_gpu_matrix.calibrate import seen as seenmod
from ort_gpu_matrix.calibrate import suite as cal
from ort_gpu_matrix.config.expectfile import Count, ModeTable, Skip
from ort_gpu_matrix.config.kernels import TEETH_MESSAGE
from ort_gpu_matrix.config.model import Observation, PassExpect, Rule, TeethExpect
from ort_gpu_matrix.judge.counts import Dispatch
from ort_gpu_matrix.judge.counts import TestResult as T
from ort_gpu_matrix.judge.verdicts import TeethCoverage
from ort_gpu_matrix.util.voice import Voice

CUDNN = "CUDNN_FLASH_ATTENTION"


def suite(teeth_message=TEETH_MESSAGE, **expect):
    return NS(id="s", expect={"normal": PassExpect(**expect.get("normal", {})),
                              "teeth": TeethExpect(message=teeth_message, **expect.get("teeth", {}))})


def seen(cell, mode, tests, s=None, passed=None, fp="v1", dispatch=None, cov=None, ort="1.32.0", started="2026-12-01T10"):
    s = s or suite()
    result = NS(mode=mode, session=f"{cell}-{mode}", provenance=NS(ort={"version": ort} if ort else None),
                started=started, venv=NS(fingerprint=fp), dispatch=dispatch or Dispatch(), teeth_coverage=cov,
                counts=NS(passed=sum(t.outcome == "passed" for t in tests) if passed is None else passed))
    return seenmod.CalibrationRun(NS(name=cell, suite=s), result, tests)


def test_failures_are_accepted_with_their_first_line_and_the_canarys_refused():
    said = []
    s = seen("c1", "normal", [T("t::ok", "passed", "", ()), T("t::f", "failed", "\nAssertionError: 1\nmore", ()),
                              T("t::e", "error", "", ()), T("t::x", "xfailed", "x", ()),
                              T("t::c", "failed", f"E   {TEETH_MESSAGE}", ())])
    items = seenmod.failures(s, seenmod.canaries(s.cell.suite), Voice.plain(say=said.append))
    assert [(i.text, i.reason) for i in items] == [("t::f", "AssertionError: 1"), ("t::e", "error, with no message")]
    assert said == [f"refused: c1-normal t::c failed with the canary's message ({'E   ' + TEETH_MESSAGE!r}: a test that "
                    "asked for cuDNN and got another tier); a known failure would hide the dispatch change the canary "
                    "exists to catch"]


def test_in_teeth_a_bite_is_no_failure_and_a_near_bite_is_refused():
    own = "AssertionError: 'X' != 'MATH'"
    s = seen("c1", "teeth", [T("t::b", "failed", own, ()), T("t::n", "failed", f"x {own}", ()),
                             T("t::d", "failed", f"x {TEETH_MESSAGE}", ()), T("t::o", "failed", "other", ())],
             suite(teeth_message=own))
    said = []
    assert seenmod.canaries(s.cell.suite) == (own, TEETH_MESSAGE)
    assert seenmod.canaries(suite()) == (TEETH_MESSAGE,)
    assert [i.text for i in seenmod.failures(s, seenmod.canaries(s.cell.suite), Voice.plain(say=said.append))] == ["t::o"]
    assert [m.split(" failed ")[0] for m in said] == ["refused: c1-teeth t::n", "refused: c1-teeth t::d"]
    assert "with MATH forced, holding but not exactly the canary's message" in said[0]
    assert seenmod.bitten_in(s) == {"t::b"}


def test_toothless_reasons_from_the_census_of_the_same_venv():
    prior = Dispatch({"t::a": [CUDNN, CUDNN], "t::b": [CUDNN], "t::c": [CUDNN, "MATH"], "t::d": [CUDNN],
                      "t::e": [CUDNN], "t::m": ["MATH"]})
    rc = seen("c1", "require_cudnn", [], dispatch=prior)
    tests = [T("t::a", "failed", TEETH_MESSAGE, ()), T("t::b", "failed", "other\nx", ()), T("t::c", "skipped", "why", ()),
             T("t::d", "passed", "", ())]
    teeth = seen("c1", "teeth", tests)
    items = seenmod.toothless(teeth, [seen("c2", "require_cudnn", [], dispatch=Dispatch()), rc], Voice.plain())
    assert [(i.text, i.reason) for i in items] == [
        ("t::b", f"dispatched {CUDNN} x1 in require_cudnn; failed with MATH forced, but not with the canary's message: other"),
        ("t::c", f"dispatched {CUDNN} x1 in require_cudnn; skipped with MATH forced: why"),
        ("t::d", f"dispatched {CUDNN} x1 in require_cudnn; passed with MATH forced"),
        ("t::e", f"dispatched {CUDNN} x1 in require_cudnn; did not run with MATH forced")]
    cov = TeethCoverage(True, CUDNN, 3, 1, 2, ["t::a"], ["t::z"], [])
    items = seenmod.toothless(seen("c1", "teeth", tests, cov=cov), [rc], Voice.plain())
    assert [(i.text, i.reason.split(";")[0]) for i in items] == [("t::a", f"dispatched {CUDNN} x2 in require_cudnn"),
                                                                 ("t::z", f"dispatched {CUDNN} in require_cudnn")]
    said = []
    assert seenmod.toothless(seen("c1", "teeth", tests), [seen("c1", "require_cudnn", [], fp="v2", dispatch=prior)],
                             Voice.plain(say=said.append)) == []
    assert said == ["not calibrated: known_toothless from c1-teeth: no require_cudnn run of c1 from the same venv to "
                    "check its coverage against (calibrate the cell in all its modes)"]
    unchecked = TeethCoverage(checked=False)
    assert [i.text for i in seenmod.toothless(seen("c1", "teeth", tests, cov=unchecked), [rc], Voice.plain())] == [
        "t::b", "t::c", "t::d", "t::e"]
    assert seenmod.prior_census(teeth, [seen("c1", "normal", [], dispatch=prior)]) is None


def calib(runs, s=None, old=None, inline=None, cells=None, keep=False):
    said = []
    s = s or runs[0].cell.suite
    cells = cells or {m: {r.cell.name for r in runs if r.mode == m} for m in ("normal", "teeth")}
    c = cal.SuiteCalibration(s, runs, inline or {}, old or {}, cells, keep, Voice.plain(say=said.append))
    return c, said


OBS1 = Observation("c1", "1.32.0", "2026-12-01")
OBS2 = Observation("c2", "1.31.0", "2026-11-30")


def test_a_normal_table_from_two_cells():
    r1 = seen("c1", "normal", [T("t::a", "passed", "", ()), T("t::s", "skipped", "no GPU", ()),
                               T("t::s2", "skipped", "no GPU", ()), T("t::f", "failed", "boom", ())])
    r2 = seen("c2", "normal", [T("t::a", "passed", "", ()), T("t::b", "passed", "", ()), T("t::s", "skipped", "no GPU", ()),
                               T("t::f", "failed", "bang", ()), T("t::g(x)", "error", "E", ())], ort="1.31.0",
              started="2026-11-30T01")
    c, said = calib([r1, r2])
    t = c.table("normal")
    assert t.counts == [Count("min_passed", 1, "seen: c1 1, c2 2")]
    assert t.skips == [Skip("^no GPU$", "c1: 2 test(s), c2: 1 test(s)")]
    assert t.rules == {"known_failures": [Rule("^t::f$", "c1: boom; c2: bang", (OBS1, OBS2)),
                                          Rule(r"^t::g\(x\)$", "E", (OBS2,))]}
    assert said == [] and t.kept == {}


def test_old_rules_are_refreshed_kept_for_other_cells_or_dropped_when_stale():
    old = suite(normal={"known_failures": (Rule("t::f", "old reason", (Observation("c0", "1.0", "2026-01-01"),)),
                                           Rule("t::gone", "gone reason"),
                                           Rule("t::far", "elsewhere", (Observation("c9", "1.0", "2026-01-01"),))),
                        "allowed_skips": ("no GPU", "never"), "min_passed": 5, "require_kernel": CUDNN})
    r1 = seen("c1", "normal", [T("t::a", "passed", "", ()), T("t::f", "failed", "boom", ()),
                               T("t::s", "skipped", "no GPU here", ())], s=old)
    keys = {"normal": {"known_failures", "allowed_skips", "min_passed", "require_kernel"}}
    c, said = calib([r1], old=keys, cells={"normal": {"c1"}})
    t = c.table("normal")
    assert t.kept == {"require_kernel": CUDNN}
    assert t.counts == [Count("min_passed", 1, "seen: c1 1")]  # every cell calibrated: the old 5 goes
    assert t.skips == [Skip("no GPU", "c1: 1 test(s)")]
    assert t.rules["known_failures"] == [Rule("t::f", "old reason", (Observation("c0", "1.0", "2026-01-01"), OBS1)),
                                         Rule("t::far", "elsewhere", (Observation("c9", "1.0", "2026-01-01"),))]
    assert said == ["dropped stale rule: normal allowed_skips 'never': it matched nothing in c1",
                    "dropped stale rule: normal known_failures 't::gone' (gone reason): it matched nothing in c1"]
    c, said = calib([r1], old=keys, cells={"normal": {"c1", "c2"}})  # c2 not calibrated: handwritten rules stay
    t = c.table("normal")
    assert t.counts == [Count("min_passed", 1, "seen: c1 1")]
    assert [r.test for r in t.rules["known_failures"]] == ["t::f", "t::gone", "t::far"]
    assert t.skips == [Skip("no GPU", "c1: 1 test(s)"), Skip("never", "matched nothing in the cells calibrated")]
    assert said == ["kept stale rule: normal allowed_skips 'never': it matched nothing in c1 (some cells of the suite "
                    "were not calibrated)",
                    "kept stale rule: normal known_failures 't::gone' (gone reason): it matched nothing in c1 "
                    "(some cells of the suite were not calibrated)"]
    c, said = calib([r1], old=keys, keep=True)
    assert [r.test for r in c.table("normal").rules["known_failures"]] == ["t::f", "t::gone", "t::far"]
    assert said[0].endswith("(--keep-stale)")


def test_the_lower_old_count_stays_while_a_cell_was_not_calibrated():
    old = suite(normal={"min_passed": 1})
    r = seen("c1", "normal", [T("t::a", "passed", "", ()), T("t::b", "passed", "", ())], s=old)
    c, _ = calib([r], old={"normal": {"min_passed"}}, cells={"normal": {"c1", "c2"}})
    assert c.table("normal").counts == [Count("min_passed", 1, "seen: c1 2")]
    c, _ = calib([r], old={"normal": {"min_passed"}}, cells={"normal": {"c1"}})
    assert c.table("normal").counts == [Count("min_passed", 2, "seen: c1 2")]
    assert c.minimum("normal", "min_passed", {}) is None


def test_nothing_passed_or_nothing_bitten_cannot_be_accepted():
    c, said = calib([seen("c1", "normal", [T("t::s", "skipped", "x", ())]), seen("c2", "normal", [T("t::a", "passed", "", ())])])
    t = c.table("normal")
    assert said == ["not accepted: normal of c1: nothing passed; no expectation can accept that"]
    assert t.counts == [Count("min_passed", 0, "seen: c1 0, c2 1")]
    c, said = calib([seen("c1", "teeth", [T("t::a", "passed", "", ())]),
                     seen("c2", "teeth", [T("t::a", "failed", TEETH_MESSAGE, ()), T("t::b", "failed", TEETH_MESSAGE, ())])])
    t = c.table("teeth")
    assert said[0] == ("not accepted: teeth of c1: nothing failed with the canary's message (the canary has no teeth "
                       "there); no expectation can accept that")
    assert t.counts == [Count("min_failures", 2, "seen: c2 2")]
    assert t.rules == {}


def test_a_key_the_matrix_sets_is_not_written_and_what_it_misses_is_said():
    s = suite(normal={"known_failures": (Rule("t::f", "r"),), "allowed_skips": ("GPU",)})
    r = seen("c1", "normal", [T("t::a", "passed", "", ()), T("t::f", "failed", "x", ()), T("t::g", "failed", "y", ()),
                              T("t::s", "skipped", "no cuDNN", ())], s=s)
    c, said = calib([r], inline={"normal": {"known_failures", "allowed_skips", "min_passed"}})
    t = c.table("normal")
    assert t.rules == {} and t.skips is None and t.counts == []
    assert said == [
        "not written: normal min_passed: [suite.s.expect.normal] in the matrix file sets it (a key is set in one file only)",
        "not written: normal allowed_skips: [suite.s.expect.normal] in the matrix file sets it (a key is set in one "
        "file only); today it does not accept: no cuDNN",
        "not written: normal known_failures: [suite.s.expect.normal] in the matrix file sets it (a key is set in one "
        "file only); today it does not accept: t::g"]


def test_a_teeth_table_with_toothless_tests():
    prior = Dispatch({"t::a": [CUDNN], "t::b": [CUDNN]})
    runs = [seen("c1", "require_cudnn", [], dispatch=prior),
            seen("c1", "teeth", [T("t::a", "failed", TEETH_MESSAGE, ()), T("t::b", "passed", "", ())])]
    c, said = calib(runs)
    t = c.table("teeth")
    assert t.counts == [Count("min_failures", 1, "seen: c1 1")]
    assert t.rules == {"known_toothless": [Rule("^t::b$", f"dispatched {CUDNN} x1 in require_cudnn; passed with MATH forced",
                                                (OBS1,))]}
    assert said == []


def test_an_observation_without_a_version():
    assert seen("c1", "normal", [], ort=None).observation == Observation("c1", "unknown", "2026-12-01")
    assert seen("c1", "normal", [], ort="").observation.ort == "unknown"


def test_a_mode_no_cell_of_the_suite_runs_counts_as_complete_and_stale_rules_name_every_cell():
    old = suite(normal={"known_failures": (Rule("t::gone", "r"),)})
    runs = [seen(c, "normal", [T("t::a", "passed", "", ())], s=old) for c in ("c2", "c1")]
    c, said = calib(runs, old={"normal": {"known_failures"}}, cells={})
    assert c.table("normal").rules == {}
    assert said == ["dropped stale rule: normal known_failures 't::gone' (r): it matched nothing in c1, c2"]


def test_a_flaky_test_gets_a_known_flaky_rule_and_no_other_and_only_in_its_mode():
    from dataclasses import replace

    from ort_gpu_matrix.config.model import FlakyRule
    runs = [seen("c1", "normal", [T("t::a", "passed", "", ()), T("t::fl", "passed", "", (CUDNN,))]),
            replace(seen("c1", "normal", [T("t::a", "passed", "", ()), T("t::fl", "failed", "E: boom\nmore", ())]), round=1),
            seen("c1", "teeth", [T("t::a", "failed", TEETH_MESSAGE, ()), T("t::fl", "failed", TEETH_MESSAGE, ())],
                 cov=TeethCoverage(checked=True, tier_tests=2, bitten=2, bitten_tests=["t::a", "t::fl"])),
            replace(seen("c1", "teeth", [T("t::a", "failed", TEETH_MESSAGE, ()), T("t::fl", "failed", TEETH_MESSAGE, ())],
                         cov=TeethCoverage(checked=True, tier_tests=2, bitten=2, bitten_tests=["t::a", "t::fl"])), round=1)]
    c, said = calib(runs)
    t = c.table("normal")
    assert t.flaky == [FlakyRule("^t::fl$", ("failed", "passed"), (CUDNN,),
                                 f"differed between runs (passed {CUDNN}, failed): E: boom",
                                 (f"c1 run 1: passed {CUDNN}", "c1 run 2: failed"), (OBS1,))]
    assert t.rules == {} and t.tiers == [] and t.counts == [Count("min_passed", 1, "seen: c1 1")]
    assert said == [f"flaky: normal t::fl: passed {CUDNN}, failed"]
    said.clear()
    teeth = c.table("teeth")
    assert teeth.flaky == [] and teeth.counts == [Count("min_failures", 2, "seen: c1 2")] and said == []


def test_in_teeth_a_key_the_matrix_sets_is_not_written_and_what_it_misses_is_said():
    s = suite(teeth={"known_toothless": (Rule("t::b", "r"),), "known_failures": (Rule("t::nothing", "r"),)})
    runs = [seen("c1", "teeth", [T("t::a", "failed", TEETH_MESSAGE, ()), T("t::b", "passed", "", ()),
                                 T("t::c", "passed", "", ()), T("t::f", "failed", "boom", ())], s=s,
                 cov=TeethCoverage(checked=True, tier_tests=3, bitten=1, toothless=2, undeclared_toothless=["t::b", "t::c"],
                                   bitten_tests=["t::a"]))]
    c, said = calib(runs, inline={"teeth": {"min_failures", "known_toothless", "known_failures"}})
    t = c.table("teeth")
    assert t.counts == [] and t.rules == {} and t.flaky == []
    head = "[suite.s.expect.teeth] in the matrix file sets it (a key is set in one file only)"
    assert said == [f"not written: teeth min_failures: {head}",
                    f"not written: teeth known_toothless: {head}; today it does not accept: t::c",
                    f"not written: teeth known_failures: {head}; today it does not accept: t::f"]


def test_tiers_and_known_flaky_the_matrix_sets_are_not_written():
    from dataclasses import replace
    runs = [seen("c1", "normal", [T("t::a", "passed", "", (CUDNN,)), T("t::fl", "passed", "", ())]),
            replace(seen("c1", "normal", [T("t::a", "passed", "", (CUDNN,)), T("t::fl", "failed", "x", ())]), round=1)]
    c, said = calib(runs, inline={"normal": {"tiers", "known_flaky"}})
    t = c.table("normal")
    assert t.tiers == [] and t.flaky == [] and t.rules == {}
    head = "[suite.s.expect.normal] in the matrix file sets it (a key is set in one file only)"
    assert said == [f"not written: normal tiers: {head}",
                    f"not written: normal known_flaky: {head}; today it does not accept: t::fl",
                    "flaky: normal t::fl: passed, failed"]
    c, said = calib(runs, inline={"teeth": {"tiers", "known_flaky"}})  # another mode's keys: this one writes its own
    t = c.table("normal")
    assert [r.test for r in t.tiers] == ["^t::a(?:_[0-9]+(?:_.*)?)?(?:\\[.*\\])?$"] and [r.test for r in t.flaky] == ["^t::fl$"]


def test_an_exact_canary_failure_outside_teeth_is_refused_by_name():
    s = seen("c1", "normal", [T("t::c", "failed", TEETH_MESSAGE, ()), T("t::n", "failed", f"x {TEETH_MESSAGE}", ())])
    said: list[str] = []
    assert seenmod.failures(s, seenmod.canaries(s.cell.suite), Voice.plain(say=said.append)) == []
    assert said == [f"refused: c1-normal t::{n} failed with the canary's message ({m!r}: a test that asked for cuDNN "
                    "and got another tier); a known failure would hide the dispatch change the canary exists to catch"
                    for n, m in (("c", TEETH_MESSAGE), ("n", f"x {TEETH_MESSAGE}"))]
    t = seen("c1", "teeth", [T("t::n", "failed", f"x {TEETH_MESSAGE}", ())])
    said.clear()
    seenmod.failures(t, seenmod.canaries(t.cell.suite), Voice.plain(say=said.append))
    assert said == [f"refused: c1-teeth t::n failed with the canary's message ({'x ' + TEETH_MESSAGE!r}: with MATH "
                    "forced, holding but not exactly the canary's message); a known failure would hide the dispatch "
                    "change the canary exists to catch"]


def test_a_skip_note_counts_the_most_of_any_one_run_of_a_cell():
    from dataclasses import replace
    r1 = seen("c1", "normal", [T(f"t::s{i}", "skipped", "x", ()) for i in range(3)])
    r2 = replace(seen("c1", "normal", [T("t::s0", "skipped", "x", ())]), round=1)
    items = [seenmod.Item("x", "", r) for r in (r1, r1, r1, r2)]
    assert seenmod.skip_note(items) == "c1: 3 test(s)"
    assert cal._least([("c1", 3), ("c1", 5), ("c2", 4)]) == {"c1": 3, "c2": 4}  # type: ignore[arg-type]


def test_old_rules_observed_only_where_calibrated_are_refreshed_or_dropped():
    old_obs = (Observation("c1", "1.31.0", "2026-01-01"),)
    old = suite(normal={"known_failures": (Rule("t::f", "r", old_obs), Rule("t::gone", "g", old_obs)), "min_passed": 0})
    r1 = seen("c1", "normal", [T("t::a", "passed", "", ()), T("t::f", "failed", "boom", ())], s=old)
    keys = {"normal": {"known_failures"}}
    c, said = calib([r1], old=keys, cells={"normal": {"c1", "c2"}})  # c2 not calibrated
    assert c.table("normal").rules["known_failures"] == [Rule("t::f", "r", (OBS1,))]  # seen again today: refreshed
    assert said == ["dropped stale rule: normal known_failures 't::gone' (g): it matched nothing in c1"]
    c, said = calib([r1], old=keys, cells={"normal": {"c1"}}, keep=True)
    assert c.table("normal").rules["known_failures"] == [Rule("t::f", "r", (OBS1,)), Rule("t::gone", "g", old_obs)]
    c, _ = calib([r1], old={}, cells={"normal": {"c1", "c2"}})  # min_passed = 0 is not the old file's: not read
    assert c.table("normal").counts == [Count("min_passed", 1, "seen: c1 1")]
    assert c._complete("teeth") and not calib([r1], cells={"normal": {"c1", "c2"}})[0]._complete("normal")


def test_what_a_matrix_key_misses_is_listed_whole():
    s = suite(normal={"allowed_skips": ("GPU",)})
    r = seen("c1", "normal", [T("t::a", "passed", "", ()), T("t::f", "failed", "x", ()), T("t::g", "failed", "y", ()),
                              T("t::s", "skipped", "no GPU here", ()), T("t::t", "skipped", "no cuDNN", ())], s=s)
    c, said = calib([r], inline={"normal": {"known_failures", "allowed_skips"}})
    c.table("normal")
    head = "[suite.s.expect.normal] in the matrix file sets it (a key is set in one file only)"
    assert said == [f"not written: normal allowed_skips: {head}; today it does not accept: no cuDNN",
                    f"not written: normal known_failures: {head}; today it does not accept: t::f; t::g"]


def test_the_header_names_every_cell_seen():
    runs = [seen("c2", "normal", [], ort="1.31.0", started="2026-11-30T01"), seen("c1", "normal", []),
            seen("c1", "teeth", [])]
    assert cal.header(runs[0].cell.suite, runs, "e/s.toml") == [
        "Expectations of [suite.s] that accept the outcome below, written by `nox -s calibrate`.",
        "Review every rule before committing: each one accepts a failure, a toothless test or a skip.",
        "Seen in: c1 (onnxruntime 1.32.0, 2026-12-01); c2 (onnxruntime 1.31.0, 2026-11-30)",
        'Loaded with expect_file = "e/s.toml" on [suite.s]; a key set here may not be set there too.']


def test_old_tier_flaky_and_toothless_rules_are_read_from_the_old_file_only():
    from dataclasses import replace

    from ort_gpu_matrix.config.model import FlakyRule, TierRule
    obs0 = (Observation("c0", "1.0", "2026-01-01"),)
    old = suite(normal={"tiers": (TierRule("t::a", (CUDNN,), "kept", obs0),),
                        "known_flaky": (FlakyRule("t::gone", ("passed",), (), "fl", observed=obs0),)},
                teeth={"known_toothless": (Rule("t::tl", "tl", obs0),), "min_failures": 1})
    runs = [seen("c1", "normal", [T("t::a", "passed", "", (CUDNN,))], s=old),
            replace(seen("c1", "normal", [T("t::a", "passed", "", (CUDNN,))], s=old), round=1),
            seen("c1", "teeth", [T("t::a", "failed", TEETH_MESSAGE, ()), T("t::b", "failed", TEETH_MESSAGE, ()),
                                 T("t::tl", "passed", "", ())], s=old,
                 cov=TeethCoverage(checked=True, tier_tests=3, bitten=2, toothless=1, declared_toothless=["t::tl"],
                                   bitten_tests=["t::a", "t::b"]))]
    keys = {"normal": {"tiers", "known_flaky"}, "teeth": {"known_toothless", "min_failures"}}
    c, said = calib(runs, old=keys, cells={"normal": {"c1", "c2"}, "teeth": {"c1", "c2"}})
    t = c.table("normal")
    assert [(r.test, r.reason) for r in t.tiers] == [("t::a", "kept")] and t.flaky == []
    assert said == ["dropped stale rule: normal known_flaky 't::gone' (fl): it matched nothing in c1"]
    said.clear()
    teeth = c.table("teeth")
    assert teeth.counts == [Count("min_failures", 1, "seen: c1 2")]  # the old 1 stays while c2 is not calibrated
    assert [(r.test, r.reason) for r in teeth.rules["known_toothless"]] == [("t::tl", "tl")]
    c, said = calib(runs, old=keys, cells={"normal": {"c1"}, "teeth": {"c1"}}, keep=True)
    assert c.table("normal").flaky == [FlakyRule("t::gone", ("passed",), (), "fl", (), obs0)]
    assert said == ["kept stale rule: normal known_flaky 't::gone' (fl): it matched nothing in c1 (--keep-stale)"]


def test_a_canary_failure_in_a_normal_table_is_refused_and_said():
    c, said = calib([seen("c1", "normal", [T("t::a", "passed", "", ()), T("t::c", "failed", TEETH_MESSAGE, ())])])
    assert c.table("normal").rules == {} and said[0].startswith("refused: c1-normal t::c failed with the canary's message")


def test_a_summary_of_an_empty_table_says_nothing():
    assert cal.summary(ModeTable("teeth")) == "teeth: nothing"


def test_an_expect_file_writes_cuda_runs_rules_and_subtests_flags_as_toml_the_loader_reads():
    """Every rule kind calibrate writes, with and without its optional keys, one line each and as [[tables]]
    once too long, read back by tomllib to exactly the values given."""
    import tomllib

    from ort_gpu_matrix.config.expectfile import render
    from ort_gpu_matrix.config.rules import CudaRunsRule, FlakyRule, Observation, Rule

    seen = (Observation("gpu-3.12-x", "1.31.1", "2026-12-04"),)
    long = "t::" + "a" * 300
    table = ModeTable("normal", rules={"known_failures": [Rule("t::sub", "breaks", seen, subtests=True)]},
                      flaky=[FlakyRule("t::f", ("passed", "failed"), (), "flips", subtests=True)],
                      cuda_runs=[CudaRunsRule("t::c", 2, "runs on CUDA", seen), CudaRunsRule("t::d")])
    tables = ModeTable("require_cudnn", cuda_runs=[CudaRunsRule(long, 3, "", seen, subtests=True)])
    got = tomllib.loads(render(["a header"], [table, tables]))["expect"]
    obs = [{"cell": "gpu-3.12-x", "ort": "1.31.1", "date": "2026-12-04"}]
    assert got["normal"] == {
        "known_failures": [{"test": "t::sub", "subtests": True, "reason": "breaks", "observed": obs}],
        "known_flaky": [{"test": "t::f", "subtests": True, "outcomes": ["passed", "failed"], "reason": "flips"}],
        "cuda_runs": [{"test": "t::c", "min": 2, "reason": "runs on CUDA", "observed": obs},
                      {"test": "t::d", "min": 1}]}
    assert got["require_cudnn"] == {"cuda_runs": [{"test": long, "subtests": True, "min": 3, "reason": "",
                                                   "observed": obs}]}

"""The halving itself, in-process (plan/bisection.py): builds stand for a truth table, so every step is seen."""
import math

import pytest

from ort_gpu_matrix.plan.bisection import BAD, GOOD, SKIP, Spans, groups, next_step


def walk(n: int, changes: dict[str, int], broken: set[int] = frozenset(), unsteady: dict[str, set[int]] | None = None):
    """Bisect n builds where test t turns bad at build changes[t]; a broken build is a skip for every test."""
    spans, steps = Spans.start(n, sorted(changes)), []
    while (step := next_step(spans)) is not None:
        index, tests = step
        verdicts = {t: SKIP if index in broken or index in (unsteady or {}).get(t, set())
                    else BAD if index >= changes[t] else GOOD for t in tests}
        spans.record(index, verdicts)
        steps.append((index, tuple(tests)))
        assert len(steps) < 4 * n, "halving did not end"
    return spans, steps


def test_one_change_is_found_in_about_log2_steps():
    for n in (2, 3, 5, 8, 17, 64):
        for at in range(1, n):
            spans, steps = walk(n, {"t::a": at})
            (g,), gone = groups(spans)
            assert (g.last_good, g.first_bad, g.located, gone) == (at - 1, at, True, {})
            assert len(steps) <= math.ceil(math.log2(n - 1)) if n > 2 else steps == []


def test_tests_that_change_at_different_builds_are_followed_apart_and_grouped_by_where():
    spans, steps = walk(16, {"t::a": 3, "t::b": 3, "t::c": 11})
    found, _ = groups(spans)
    assert [(g.tests, g.last_good, g.first_bad) for g in found] == [(("t::a", "t::b"), 2, 3), (("t::c",), 10, 11)]
    # the first step runs every test: all spans hold the middle build
    assert steps[0] == (7, ("t::a", "t::b", "t::c"))


def test_an_untestable_build_is_never_good_or_bad_and_a_change_next_to_it_ends_as_a_range():
    spans, steps = walk(8, {"t::a": 5}, broken={4})
    (g,), _ = groups(spans)
    assert (g.last_good, g.first_bad, g.untested, g.located) == (3, 5, (4,), False)  # 4 or 5 changed it
    spans, _ = walk(8, {"t::a": 6}, broken={3})
    (g,), _ = groups(spans)
    assert (g.last_good, g.first_bad, g.located) == (5, 6, True)  # the skip was stepped around


def test_a_test_unsteady_at_one_build_is_untestable_there_alone():
    spans, _ = walk(8, {"t::a": 4, "t::b": 4}, unsteady={"t::a": {3}})
    found, _ = groups(spans)
    assert [(g.tests, g.last_good, g.first_bad, g.untested) for g in found] == [
        (("t::a",), 2, 4, (3,)), (("t::b",), 3, 4, ())]


def test_a_verdict_outside_its_span_takes_the_test_out_with_why():
    spans = Spans.start(5, ["t::a"])
    spans.record(2, {"t::a": BAD})
    spans.record(3, {"t::a": GOOD})  # good after bad: it changed back, halving cannot locate it
    assert groups(spans) == ([], {"t::a": "good at build 3, outside its span (0, 2)"})
    assert next_step(spans) is None


@pytest.mark.parametrize("n", [2])
def test_two_builds_need_no_step(n):
    spans, steps = walk(n, {"t::a": 1})
    assert steps == [] and groups(spans)[0][0].first_bad == 1


def test_a_record_with_no_finished_walk_never_reads_as_located():
    """A record whose walk did not end (no groups, no problem, not interrupted) is no answer: never `bisect OK`."""
    from ort_gpu_matrix.plan.builds import Build
    from ort_gpu_matrix.report.render.bisect import verdict_line
    from ort_gpu_matrix.store.bisection import Bisection

    record = Bisection("c", "normal", "regressions", {"t::a": "test passed -> failed"},
                       [Build("1.0.0", requirement="x==1.0.0"), Build("1.0.1", requirement="x==1.0.1")])
    assert not record.located
    assert verdict_line(record).startswith("bisect FAILED: no change was located")


def test_a_saved_record_renders_again_as_it_was_written(tmp_path):
    """bisect.json keeps milliseconds: a step's time must render the same before and after (7.64951 s was 7.6 in memory and 7.7 once read back)."""
    from ort_gpu_matrix.plan.bisection import StepRun
    from ort_gpu_matrix.plan.builds import Build
    from ort_gpu_matrix.report.render.bisect import markdown
    from ort_gpu_matrix.store.bisection import Bisection, load

    builds = [Build(v, requirement=f"x=={v}") for v in ("1.0.0", "1.0.1")]
    record = Bisection("c", "normal", "regressions", {"t::a": "test passed -> failed"}, builds, whole_suite_s=3.0)
    record.steps = [StepRun(0, builds[0], ("t::a",), {"t::a": GOOD}, {"t::a": ["passed"]}, seconds=7.64951),
                    StepRun(1, builds[1], ("t::a",), {"t::a": BAD}, {"t::a": ["failed"] * 3}, seconds=2.05)]
    record.groups, record.left = groups(Spans.start(2, ["t::a"]))
    record.save(tmp_path)
    assert markdown(load(tmp_path)) == markdown(record)
    assert "good 1, 7.7 s" in markdown(record)  # 7.65 as stored

"""What a sweep's confirmation reruns, and what a rerun shows, in-process (compare/suspects.py): the suspects of
each mode result (unexpected failures, unallowed fallbacks, regressions against the baseline by test, tier, EP and
op, libs differences), what one rerun clears and what may stand for a test afterwards, and the record a confirmed
result keeps. Results and their probe reports are written here as the harness stores them; drive/confirm.py
starts the reruns, and tests/test_confirm*.py and tests/test_nodesweep.py run the whole path through nox."""
from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest
from helpers import cell as cell_info
from helpers import result

from ort_gpu_matrix.compare.suspects import Suspects, _clean, _report, _reproduces, suspects, unexpected
from ort_gpu_matrix.config.model import FallbackRule, PassExpect, Rule, TeethExpect
from ort_gpu_matrix.judge.counts import Dispatch
from ort_gpu_matrix.judge.counts import TestResult as T
from ort_gpu_matrix.judge.eps import EpCensus, EpTest
from ort_gpu_matrix.judge.nodes import NodeRun
from ort_gpu_matrix.judge.verdicts import Status
from ort_gpu_matrix.store.baseline import Baseline, ModeRecord
from ort_gpu_matrix.store.baseline import TestLine as Line
from ort_gpu_matrix.store.confirmation import Confirmation, Rerun
from ort_gpu_matrix.store.confirmation import TestRuns as Runs

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
CANARY = "AssertionError: 'CUDNN_FLASH_ATTENTION' != 'MATH'"
FLAKY = {"outcomes": ["failed", "passed"], "tiers": ["MATH"]}
NO_LIB = "libcudnn.so.9: cannot open shared object file"


def stand_in(name: str = "c1", **normal) -> NS:
    """The Cell a sweep hands suspects(): its name and its suite's expectations per mode."""
    return NS(name=name, suite=NS(expect={"normal": PassExpect(**normal), "require_cudnn": PassExpect(),
                                          "teeth": TeethExpect(message=CANARY)}))


def use(served=(CUDA, CPU), nodes=(), fallback: str | None = None) -> dict:
    out = {"session": 1, "asked": [CUDA, CPU], "served": list(served), "runs": {served[0]: 1} if served else {}}
    if nodes:
        out["nodes"] = [{"op": op, "name": op.lower(), "ep": ep, "runs": 1} for op, ep in nodes]
    if fallback:
        out.update(fallback="not_loaded", reason=fallback)
    return out


def entry(outcome: str, message: str = "", sdpa=(), ep=()) -> dict:
    return {"outcome": outcome, "message": message, "sdpa": list(sdpa), "ep": list(ep)}


def stored(tmp_path, mode: str, tests: dict[str, dict], name: str = "c1", **kw):
    """A mode result and the probe report it points to, as the harness stores both."""
    path = tmp_path / f"{name}-{mode}.json"
    path.write_text(json.dumps({"tests": tests}))
    outcomes = {t: e["outcome"] for t, e in tests.items()}
    return result(mode, outcomes, name=name, report=str(path), **kw)


OP_NODES = [NodeRun("Add", "add", CUDA, 1), NodeRun("Relu", "relu", CPU, 1)]


def the_sweep(tmp_path):
    """A stopped run; a cell the sweep did not run; c1 normal with one test of each kind of suspect and one of each
    kind that is none; c1 require_cudnn with an unexpected failure of its own; c1 teeth with nothing to confirm."""
    tests = {"t::p": entry("passed"), "t::f": entry("failed", "boom"), "t::k": entry("failed", "known"),
             "t::fl": entry("failed", "flaky"), "t::r": entry("failed", "broke"),
             "t::tier": entry("passed", sdpa=["MATH"]),
             "t::op": entry("passed", ep=[use(nodes=[("Add", CUDA), ("Relu", CPU)])]),
             "t::fb": entry("passed", ep=[use((CPU,), fallback=NO_LIB)]),
             "t::fba": entry("passed", ep=[use((CPU,), fallback="not in this build")])}
    ep = EpCensus(True, {"t::op": EpTest({CUDA: 1}, 1, nodes=OP_NODES)}, nodes_taken=True)
    normal = stored(tmp_path, "normal", tests, known_flaky={"t::fl": FLAKY}, dispatch=Dispatch({"t::tier": ["MATH"]}),
                    ep=ep, verdict=Status.FAIL)
    cudnn = stored(tmp_path, "require_cudnn", {"t::p": entry("passed"), "t::g": entry("failed", "gone wrong")})
    teeth = stored(tmp_path, "teeth", {"t::b": entry("failed", CANARY)})
    stopped = stored(tmp_path, "normal", {"t::s": entry("failed")}, name="c3", stopped="interrupted (SIGINT)")
    elsewhere = stored(tmp_path, "normal", {"t::e": entry("failed")}, name="c9")
    lines = {"t::p": "passed", "t::k": "failed", "t::fl": "passed", "t::r": "passed", "t::tier": "passed CUDNN",
             "t::op": "passed ep=CUDA ops.CUDA=Add,Relu", "t::fb": "passed", "t::fba": "passed"}
    record = ModeRecord(Status.PASS, {}, {t: Line.decode(x) for t, x in lines.items()}, ep_census=True,
                        node_census=True)
    before = Baseline({"c1": {"normal": record, "require_cudnn": ModeRecord(Status.PASS, {}, {
        "t::p": Line("passed"), "t::g": Line("failed")})}})
    cells = {"c1": stand_in(known_failures=(Rule("t::k", "known"),),
                            allowed_fallbacks=(FallbackRule("t::fba", "not in this build", "a CPU wheel"),)),
             "c3": stand_in("c3")}
    return cells, [stopped, elsewhere, normal, cudnn, teeth], before  # the ones passed over first: the rest still read


def test_every_mode_result_with_a_change_to_confirm_is_a_suspect_with_what_each_test_is_checked_for(tmp_path):
    cells, results, before = the_sweep(tmp_path)
    found = suspects(cells, results, before)
    assert [(m.cell.name, m.result.mode) for m in found] == [("c1", "normal"), ("c1", "require_cudnn")]
    normal, cudnn = found
    assert normal.cell is cells["c1"] and normal.result is results[2]
    assert normal.report == json.loads(open(results[2].report).read()) and set(normal.tests) == {
        "t::p", "t::f", "t::k", "t::fl", "t::r", "t::tier", "t::op", "t::fb", "t::fba"}
    assert normal.checks == {"t::f": {"unexpected", "test"}, "t::r": {"unexpected", "test"}, "t::tier": {"tier"},
                             "t::op": {"ep Relu"}, "t::fb": {"fallback"}}
    assert normal.baseline == {"t::f": None, "t::r": Line("passed"), "t::tier": Line("passed", ("CUDNN",)),
                               "t::op": Line.decode("passed ep=CUDA ops.CUDA=Add,Relu")}
    assert normal.record is before.cells["c1"]["normal"] and normal.pending() == ["t::f", "t::fb", "t::op", "t::r",
                                                                                 "t::tier"]
    assert normal.runs == {"t::f": ["failed"], "t::r": ["failed"], "t::tier": ["passed MATH"],
                           "t::op": ["passed ep=CUDA ops.CUDA=Add ops.CPU=Relu"], "t::fb": ["passed ep=CPU"]}
    assert cudnn.checks == {"t::g": {"unexpected"}} and cudnn.baseline == {}  # failing in the baseline already
    assert cudnn.record is before.cells["c1"]["require_cudnn"]


def test_a_known_flaky_test_within_its_set_is_no_suspect_and_a_mode_the_baseline_lacks_has_no_record(tmp_path):
    cells, results, before = the_sweep(tmp_path)
    lacking = Baseline({"c0": before.cells["c1"]})  # the baseline never ran c1
    (normal, cudnn) = suspects(cells, results, lacking)
    assert normal.record is None and normal.baseline == {}
    assert normal.checks == {"t::f": {"unexpected"}, "t::r": {"unexpected"}, "t::fb": {"fallback"}}
    assert cudnn.record is None
    assert normal.confirmation(1).tests[0] == Runs("t::f", ["unexpected"], ["failed"], [], None)


def test_without_a_baseline_only_failures_fallbacks_and_libs_differences_are_suspects(tmp_path):
    cells, results, _ = the_sweep(tmp_path)
    (normal, cudnn) = suspects(cells, results, None)
    assert normal.checks == {"t::f": {"unexpected"}, "t::r": {"unexpected"}, "t::fb": {"fallback"}}
    assert normal.record is None and cudnn.checks == {"t::g": {"unexpected"}}


def test_each_test_the_libs_comparison_names_is_a_suspect_on_both_sides_the_sweep_ran(tmp_path):
    def side(name: str, libs: str, outcome: str):
        return stored(tmp_path, "normal", {"t::l": entry(outcome), "t::same": entry("passed")}, name=name,
                      cell=cell_info(name, libs))

    results = [side("c1", "none", "passed"), side("c2", "cudnn-9.1", "skipped"), side("c3", "cudnn-9.2", "xfailed")]
    found = suspects({"c1": stand_in("c1"), "c2": stand_in("c2")}, results, None)
    assert [(m.cell.name, m.checks) for m in found] == [("c1", {"t::l": {"libs"}}), ("c2", {"t::l": {"libs"}})]
    assert [m.runs for m in found] == [{"t::l": ["passed"]}, {"t::l": ["skipped"]}]


@pytest.mark.parametrize("kw", [dict(stopped="timed out after 60 s"), dict(report=None)])
def test_a_run_stopped_or_without_a_report_has_nothing_a_rerun_could_clear(tmp_path, kw):
    r = stored(tmp_path, "normal", {"t::f": entry("failed")})
    assert _report(r) is not None
    gone = result("normal", {"t::f": "failed"}, **{"report": r.report, **kw})
    assert _report(gone) is None and suspects({"c1": stand_in()}, [gone], None) == []


@pytest.mark.parametrize("text", [None, "{not json", "[1, 2]", '{"tests": []}', '{"no": "tests"}'])
def test_a_report_that_cannot_be_read_as_one_is_none(tmp_path, text):
    path = tmp_path / "report.json"
    if text is not None:
        path.write_text(text)
    assert _report(result("normal", report=str(path))) is None


def test_a_failure_is_unexpected_unless_a_rule_accepts_it_its_flaky_set_holds_it_or_the_canary_bit():
    c = stand_in(known_failures=(Rule("t::k", "known"),))
    flaky = {"t::fl": FLAKY}
    assert unexpected(c, "normal", T("t::f", "failed", "boom", ()), flaky)
    assert unexpected(c, "normal", T("t::e", "error", "boom", ()), flaky)
    assert not unexpected(c, "normal", T("t::p", "passed", "", ()), flaky)
    assert not unexpected(c, "normal", T("t::k", "failed", "boom", ()), flaky)
    assert not unexpected(c, "normal", T("t::fl", "failed", "x", ("MATH",)), flaky)
    assert unexpected(c, "normal", T("t::fl", "failed", "x", ("CUDNN",)), flaky)  # a tier outside its set
    assert unexpected(c, "normal", T("t::fl", "error", "x", ()), flaky)  # an outcome outside its set
    assert not unexpected(c, "teeth", T("t::b", "failed", f"{CANARY}\nmore", ()), {})
    assert unexpected(c, "teeth", T("t::b", "failed", f"x {CANARY}", ()), {})
    assert unexpected(c, "normal", T("t::b", "failed", CANARY, ()), {})  # a bite only in teeth


def _got(nodeid: str, outcome: str = "passed", sdpa=(), ep=()) -> T:
    return T(nodeid, outcome, "", tuple(sdpa), ep=tuple(ep))


def test_a_rerun_with_problems_clears_nothing_and_one_that_did_not_reproduce_a_change_clears_it(tmp_path):
    cells, results, before = the_sweep(tmp_path)
    m = suspects(cells, results, before)[0]
    selected = m.pending()
    everything_gone = {"t::f": _got("t::f"), "t::r": _got("t::r"), "t::tier": _got("t::tier", sdpa=["CUDNN"]),
                       "t::op": _got("t::op", ep=[use(nodes=[("Add", CUDA), ("Relu", CUDA)])]), "t::fb": _got("t::fb")}
    m.weigh(selected, everything_gone, ["the audit failed"])
    assert m.cleared == {} and m.substitute == {} and m.pending() == selected
    assert m.runs["t::tier"] == ["passed MATH", "passed CUDNN"]
    again = {"t::f": _got("t::f", "failed"), "t::r": _got("t::r"), "t::tier": _got("t::tier", "failed", ["CUDNN"]),
             "t::op": _got("t::op", ep=[use(nodes=[("Add", CUDA), ("Relu", CUDA)])])}  # t::fb did not run
    m.weigh(selected, again, [])
    assert m.cleared == {"t::r": {"unexpected", "test"}, "t::tier": {"tier"}, "t::op": {"ep Relu"}}
    # t::tier's rerun failed: its tier change went away, a failure came; it keeps its first run's line
    assert m.substitute == {"t::r": again["t::r"], "t::op": again["t::op"]}
    assert m.pending() == ["t::f", "t::fb"] and m.runs["t::fb"] == ["passed ep=CPU", "passed", "absent"]
    later = {"t::f": _got("t::f"), "t::fb": _got("t::fb", ep=[use()]), "t::r": _got("t::r", sdpa=["MATH"])}
    m.weigh(["t::f", "t::fb"], later, [])
    assert m.pending() == [] and m.substitute["t::f"] is later["t::f"] and m.substitute["t::r"] is again["t::r"]
    m.reruns += [Rerun("r1", None, 5, 1.0, ["the audit failed"]), Rerun("r2", "b2", 5, 1.0), Rerun("r3", "b3", 2, 1.0)]
    record = m.confirmation(3)
    assert record == Confirmation(3, Status.FAIL, [], results[2].counts, m.reruns, [
        Runs("t::f", ["test", "unexpected"], ["failed", "passed", "failed", "passed"], ["test", "unexpected"],
                 "absent"),
        Runs("t::fb", ["fallback"], ["passed ep=CPU", "passed", "absent", "passed ep=CUDA"], ["fallback"],
                 "passed"),
        Runs("t::op", ["ep Relu"], ["passed ep=CUDA ops.CUDA=Add ops.CPU=Relu", "passed ep=CUDA ops.CUDA=Add,Relu",
                                        "passed ep=CUDA ops.CUDA=Add,Relu"], ["ep Relu"],
                 "passed ep=CUDA ops.CUDA=Add,Relu"),
        Runs("t::r", ["test", "unexpected"], ["failed", "passed", "passed"], ["test", "unexpected"], "passed"),
        Runs("t::tier", ["tier"], ["passed MATH", "passed CUDNN", "failed CUDNN"], ["tier"], "passed CUDNN")])
    assert record.first_reasons is not m.result.reasons


def test_a_rerun_reproduces_each_kind_of_check_as_its_change_came_back():
    c = stand_in(allowed_fallbacks=(FallbackRule("t::x", "not in this build", "a CPU wheel"),))
    m = Suspects(c, result("normal", known_flaky={"t::x": FLAKY}), {}, {}, baseline={"t::x": Line("passed")})
    assert _reproduces(m, "t::x", "unexpected", _got("t::x", "failed", ["CUDNN"]))  # a tier outside its flaky set
    assert not _reproduces(m, "t::x", "unexpected", _got("t::x", "failed", ["MATH"]))  # within it
    assert _reproduces(m, "t::x", "unexpected", _got("t::x", "error"))
    assert not _reproduces(m, "t::x", "unexpected", _got("t::x"))
    assert _reproduces(m, "t::x", "fallback", _got("t::x", ep=[use((CPU,), fallback=NO_LIB)]))
    assert not _reproduces(m, "t::x", "fallback", _got("t::x", ep=[use((CPU,), fallback="not in this build")]))
    assert not _reproduces(m, "t::x", "fallback", _got("t::x", ep=[use()]))
    for check in ("unexpected", "fallback", "libs", "test", "tier", "ep", "ep Relu"):
        assert _reproduces(m, "t::x", check, None)  # it did not run: nothing shows the change went away


def test_a_libs_difference_is_cleared_only_by_a_rerun_that_gave_something_else():
    m = Suspects(stand_in(), result("normal"), {}, {}, checks={"t::l": {"libs"}}, runs={"t::l": ["passed MATH"]})
    assert _reproduces(m, "t::l", "libs", _got("t::l", sdpa=["MATH"]))
    assert not _reproduces(m, "t::l", "libs", _got("t::l"))
    m.weigh(["t::l"], {"t::l": _got("t::l", sdpa=["MATH"])}, [])
    assert m.cleared == {}
    m.weigh(["t::l"], {"t::l": _got("t::l", "skipped")}, [])
    assert m.cleared == {"t::l": {"libs"}} and m.substitute == {}  # a libs side stands for nothing
    assert m.runs["t::l"] == ["passed MATH", "passed MATH", "skipped"]


def test_a_known_flaky_test_back_within_its_set_on_both_sides_reproduces_no_test_or_tier_change():
    m = Suspects(stand_in(), result("normal", known_flaky={"t::x": FLAKY}), {}, {},
                 baseline={"t::x": Line("passed", ("MATH",)), "t::y": Line("passed", ("CUDNN",))})
    failed = _got("t::x", "failed", ["MATH"])
    assert not _reproduces(m, "t::x", "test", failed)
    m.result.known_flaky["t::y"] = FLAKY  # the baseline's run of it was outside the set: the change stands
    assert _reproduces(m, "t::y", "test", _got("t::y", "failed", ["MATH"]))
    assert _reproduces(m, "t::new", "test", _got("t::new", "failed"))  # new, and failing
    m.result.known_flaky["t::new"] = FLAKY
    assert not _reproduces(m, "t::new", "test", _got("t::new", "failed"))  # no baseline line: its own set decides


def test_a_per_op_check_of_an_op_named_with_a_space_is_read_whole():
    m = Suspects(stand_in(), result("normal"), {}, {},
                 baseline={"t::a": Line("passed", eps=("CUDA",), ops=(("CUDA", ("Add", "my op")),))})
    assert _reproduces(m, "t::a", "ep my op", _got("t::a", ep=[use(nodes=[("Add", CUDA)])]))  # not run: not cleared
    assert not _reproduces(m, "t::a", "ep my op", _got("t::a", ep=[use(nodes=[("my op", CUDA)])]))


def test_a_rerun_stands_for_its_test_only_without_a_change_of_its_own():
    record = ModeRecord(Status.PASS, {}, {"t::a": Line("passed", ("MATH",))})
    m = Suspects(stand_in(), result("normal"), {}, {}, record=record)
    assert _clean(m, "t::a", _got("t::a", sdpa=["MATH"]))
    assert not _clean(m, "t::a", _got("t::a", sdpa=["CUDNN"]))  # a tier change of its own
    assert not _clean(m, "t::a", _got("t::a", "failed", ["MATH"]))
    assert not _clean(m, "t::new", _got("t::new", "error"))  # unexpected
    assert _clean(Suspects(stand_in(), result("normal"), {}, {}), "t::a", _got("t::a", sdpa=["CUDNN"]))  # no baseline


def test_a_check_cleared_by_one_rerun_is_not_weighed_again_by_a_later_one():
    line = Line("passed", ("MATH",))
    m = Suspects(stand_in(), result("normal"), {}, {}, checks={"t::a": {"fallback", "tier"}}, baseline={"t::a": line},
                 runs={"t::a": ["passed CUDNN ep=CPU"]}, record=ModeRecord(Status.PASS, {}, {"t::a": line}))
    fell = [use((CPU,), fallback=NO_LIB)]
    m.weigh(["t::a"], {"t::a": _got("t::a", "failed", ["MATH"], fell)}, [])  # its tier back, a failure of its own
    assert m.cleared == {"t::a": {"tier"}} and m.substitute == {}
    m.weigh(["t::a"], {"t::a": _got("t::a", "passed", ["MATH"], fell)}, [])  # the fallback reproduced: it clears nothing
    assert m.cleared == {"t::a": {"tier"}} and m.substitute == {} and m.pending() == ["t::a"]


def test_a_rerun_that_clears_its_change_but_shows_a_tier_change_against_the_baseline_stands_for_nothing():
    line = Line("passed", ("MATH",))
    m = Suspects(stand_in(), result("normal"), {}, {}, checks={"t::a": {"test"}}, baseline={"t::a": line},
                 runs={"t::a": ["failed MATH"]}, record=ModeRecord(Status.PASS, {}, {"t::a": line}))
    m.weigh(["t::a"], {"t::a": _got("t::a", "passed", ["CUDNN"])}, [])
    assert m.cleared == {"t::a": {"test"}} and m.substitute == {}

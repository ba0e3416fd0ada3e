"""The one codec of stored records (util/codec.py), in-process: each record a sweep, a run or a bisect stores reads
back equal and typed, and a file with a wrong type or an unknown enum value is refused naming the file and the key."""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field

import pytest
from helpers import result

from ort_gpu_matrix.app.bisect import BisectArgs, BisectError, _from_sweep
from ort_gpu_matrix.app.outputs import SweepChanges, read_changes
from ort_gpu_matrix.compare.changes import Change, ChangeKind, Comparison
from ort_gpu_matrix.config.model import TierRule
from ort_gpu_matrix.judge.counts import Counts
from ort_gpu_matrix.judge.eps import EpCensus, EpTest
from ort_gpu_matrix.judge.stale import StaleRecord, StaleRule
from ort_gpu_matrix.judge.tiers import Break, BreakRecord
from ort_gpu_matrix.judge.verdicts import Status, TeethCoverage
from ort_gpu_matrix.plan.bisection import BAD, GOOD, SKIP, BisectGroup, StepRun, StepVerdict
from ort_gpu_matrix.plan.builds import Build
from ort_gpu_matrix.store import bisection
from ort_gpu_matrix.store.baseline import Baseline, BaselineError, ModeRecord
from ort_gpu_matrix.store.baseline import TestLine as Line
from ort_gpu_matrix.store.confirmation import Confirmation, Rerun
from ort_gpu_matrix.store.confirmation import TestRuns as Runs
from ort_gpu_matrix.store.results import Result, ResultError, load
from ort_gpu_matrix.util import codec

EFF, MATH = "EFFICIENT_ATTENTION", "MATH"


def _full_result() -> Result:
    """A result with every kind of stored value: enums, nested records, optionals, tuples joined into text."""
    rule = TierRule("t::b", (EFF,))
    return result("normal", {"t::a": "passed", "t::b": "passed"}, verdict=Status.FAIL, reasons=["tier rule broken"],
                  counts=Counts(collected=2, passed=2), teeth_coverage=TeethCoverage(scope="cudnn", selected=2),
                  stale_rules=[StaleRule("known_failures", "t::x", "why", "no longer fails", ("c1",), "t::x (passed)")
                               .record("normal")],
                  tier_breaks=[Break(rule, "t::b", (MATH, EFF, MATH)).record("normal")],
                  ep=EpCensus(True, {"t::a": EpTest(runs={"CUDA": 2})}),
                  confirmation=Confirmation(2, Status.FAIL, ["r"], Counts(passed=1), [Rerun("run2", None, 1, 0.5)],
                                            [Runs("t::b", ["tier"], ["passed MATH", "passed EFFICIENT_ATTENTION"],
                                                      ["tier"])]),
                  expected={"t::a": "known failure"}, run_id="r1")


def test_a_result_round_trips_through_the_file_typed(tmp_path):
    r = _full_result()
    path = tmp_path / "r.json"
    path.write_text(json.dumps(r.to_dict()))
    back = load(path)
    assert back == r
    assert back.verdict is Status.FAIL and back.confirmation is not None and back.confirmation.first_verdict is Status.FAIL
    assert back.tier_breaks == [BreakRecord("normal", "t::b", "t::b", (MATH, EFF), "t::b", (EFF,))]
    assert back.stale_rules[0].kind == "no longer fails" and isinstance(back.ep.tests["t::a"], EpTest)
    stored = json.loads(path.read_text())
    assert list(stored)[0] == "schema_version"  # the version heads the file
    # the shapes results have always had: tiers joined into one string, an unchecked coverage as two keys
    assert stored["tier_breaks"] == [{"mode": "normal", "nodeid": "t::b", "function": "t::b",
                                      "dispatched": f"{MATH}, {EFF}", "rule": "t::b", "only": EFF}]
    assert stored["stale_rules"] == [{"mode": "normal", "key": "known_failures", "pattern": "t::x", "reason": "why",
                                      "why": "no longer fails: t::x (passed)", "what": "no longer fails"}]
    assert stored["teeth_coverage"] == {"checked": False, "scope": "cudnn", "selected": 2}


def test_a_stale_rule_stored_before_what_was_kept_reads_its_kind_from_why():
    old = codec.decode(StaleRecord, {"mode": "normal", "key": "known_failures", "pattern": "t::x", "reason": "",
                                     "why": "no longer fails: t::x (passed)"})
    assert old.what == "" and old.kind == "no longer fails: t::x (passed)"
    assert codec.decode(BreakRecord, {"mode": "m", "nodeid": "n", "function": "f", "dispatched": "", "rule": "r",
                                      "only": MATH}).dispatched == ()


def _edited(tmp_path, r: Result, edit) -> tuple:
    data = r.to_dict()
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["stale_rules"][0].__setitem__("pattern", 3),
     "is not a well-formed result: stale_rules[0].pattern: expected a string, found int 3"),
    (lambda d: d["tier_breaks"][0].__setitem__("dispatched", [MATH]),
     "is not a well-formed result: tier_breaks[0].dispatched: expected a string, found a list ['MATH']"),
    (lambda d: d["confirmation"].__setitem__("first_verdict", "maybe"),
     "is not a well-formed result: confirmation.first_verdict: expected one of 'pass', 'fail', found 'maybe'"),
    (lambda d: d.__setitem__("verdict", "passed"),
     "is not a well-formed result: verdict: expected one of 'pass', 'fail', found 'passed'"),
])
def test_a_result_with_a_wrong_value_is_refused_naming_the_file_and_the_key(tmp_path, edit, message):
    path = _edited(tmp_path, _full_result(), edit)
    with pytest.raises(ResultError) as err:
        load(path)
    assert str(err.value) == f"{path}: {message}"


def test_a_baseline_round_trips_typed_and_refuses_an_unknown_verdict(tmp_path):
    rec = ModeRecord(Status.FAIL, {"passed": 1}, {"t::a": Line("passed", (MATH,), 1, ("CUDA",))},
                     {"bitten": ["t::a"], "toothless": []}, {"cudnn_by_name": ["/l/libcudnn.so.9 (91400)"]},
                     {"host": "h"}, "cudnn", "restore", True)
    b = Baseline({"c": {"teeth": rec}}, "n", "t")
    b.save(tmp_path / "b.json")
    back = Baseline.load(tmp_path / "b.json")
    assert back == b and back.cells["c"]["teeth"].verdict is Status.FAIL
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["cells"]["c"]["teeth"]["tests"] == {"t::a": "passed MATH ep=CUDA reruns=1"}
    data["cells"]["c"]["teeth"]["verdict"] = "pending"
    (tmp_path / "b.json").write_text(json.dumps(data))
    with pytest.raises(BaselineError) as err:
        Baseline.load(tmp_path / "b.json")
    assert str(err.value).startswith(f"{tmp_path / 'b.json'}: is not a well-formed baseline: cells.c.teeth.verdict: "
                                     "expected one of 'pass', 'fail', found 'pending'")


def _bisect() -> bisection.Bisection:
    builds = [Build("1.0", "ort==1.0"), Build("1.1", "ort==1.1"), Build("1.2", None, "/w/ort-1.2.whl")]
    steps = [StepRun(0, builds[0], ("t::a",), {"t::a": GOOD}, {"t::a": ["passed"]}, seconds=1.0, run_ids=["r0"]),
             StepRun(2, builds[2], ("t::a",), {"t::a": BAD}, {"t::a": ["failed", "failed"]}, seconds=2.0),
             StepRun(1, builds[1], ("t::a",), {"t::a": SKIP}, skipped="venv would not build")]
    return bisection.Bisection("c", "normal", "regressions", {"t::a": "test passed -> failed"}, builds, steps,
                               [BisectGroup(("t::a",), 0, 2, (1,))], whole_suite_s=10.0)


def test_a_bisect_record_round_trips_typed(tmp_path):
    record = _bisect()
    record.save(tmp_path)
    back = bisection.load(tmp_path)
    assert back == record and back.steps[1].verdicts["t::a"] is StepVerdict.BAD
    stored = json.loads((tmp_path / bisection.FILE).read_text())
    assert stored["groups"] == [{"tests": ["t::a"], "last_good": "1.0", "first_bad": "1.2", "untested": ["1.1"],
                                 "located": False}]
    assert (stored["bisect_version"], stored["step_seconds"], stored["saved_seconds"]) == (1, 3.0, 27.0)
    assert stored["builds"][2] == {"version": "1.2", "requirement": None, "wheel": "/w/ort-1.2.whl"}


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["steps"][1]["verdicts"].__setitem__("t::a", "worse"),
     "steps[1].verdicts.t::a: expected one of 'good', 'bad', 'skip', found 'worse'"),
    (lambda d: d["steps"][0].__setitem__("seconds", "1"), "steps[0].seconds: expected a number, found a string '1'"),
    (lambda d: d["steps"][0].__setitem__("index", 1), "step 1 names no build of this bisect"),
])
def test_a_bisect_record_with_a_wrong_value_is_refused_naming_the_file_and_the_key(tmp_path, edit, message):
    _bisect().save(tmp_path)
    path = tmp_path / bisection.FILE
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(bisection.RecordError) as err:
        bisection.load(tmp_path)
    assert str(err.value) == (f"{path}: is not a well-formed bisect ({message}); fix: run the bisect again without "
                              "--resume")


def test_changes_round_trip_with_their_kind_and_values_typed(tmp_path):
    cmp = Comparison(regressions=[Change(ChangeKind.TIER, "c", "normal", "t::a", [EFF], [MATH]),
                                  Change(ChangeKind.COUNT, "c", "normal", "passed", 3, None),
                                  Change(ChangeKind.VERDICT, "c", "normal", None, Status.PASS, Status.FAIL)],
                     improvements=[Change(ChangeKind.STALE_RULE, "c", "teeth", "t::x", "known_failures", "gone")])
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"sweep_version": 3, "baseline": "b0", **cmp.to_dict()}))
    back = read_changes(path)
    assert back == SweepChanges("b0", cmp.regressions, cmp.improvements)
    assert back.regressions[0].kind is ChangeKind.TIER and back.regressions[0].before == [EFF]
    assert back.regressions[1].before == 3 and back.improvements[0].kind is ChangeKind.STALE_RULE
    assert json.loads(path.read_text())["regressions"][2] == {"kind": "verdict", "cell": "c", "mode": "normal",
                                                              "test": None, "before": "pass", "after": "fail"}


def test_a_sweep_with_an_unknown_change_kind_is_refused_by_bisect_naming_the_file_and_the_key(tmp_path):
    path = tmp_path / "sweep.json"
    change = {"kind": "tyre", "cell": "c", "mode": "normal", "test": "t::a", "before": [], "after": [MATH]}
    path.write_text(json.dumps({"baseline": "b0", "regressions": [change]}))
    with pytest.raises(BisectError) as err:
        _from_sweep(None, BisectArgs(), path)  # type: ignore[arg-type]  (refused before the matrix is looked at)
    assert str(err.value).startswith(f"{path}: is not a sweep's record (regressions[0].kind: expected one of "
                                     "'verdict', 'test', 'tier',")
    assert "found 'tyre'); fix: run nox -s sweep -- --baseline NAME again" in str(err.value)


@dataclass(frozen=True)
class _Inner:
    names: tuple[str, ...] = field(default=(), metadata=codec.stored(joined=", "))


@dataclass(frozen=True)
class _Outer:
    kind: ChangeKind
    inner: list[_Inner]
    value: str | int | list[str] | None = None
    quiet: bool = field(default=False, metadata=codec.stored(omit_default=True))


def test_the_codec_alone_round_trips_and_names_every_wrong_key():
    outer = _Outer(ChangeKind.EP, [_Inner(("A", "B")), _Inner()], ["x"])
    assert codec.encode(outer) == {"kind": "ep", "inner": [{"names": "A, B"}, {"names": ""}], "value": ["x"]}
    assert codec.decode(_Outer, codec.encode(outer)) == outer
    assert codec.decode(_Outer, {"kind": "ep", "inner": [], "value": 2}).value == 2
    with pytest.raises(codec.CodecError) as err:
        codec.decode(_Outer, {"kind": "ink", "inner": [{"names": 1}], "value": 1.5, "quiet": "no"})
    assert err.value.problems == ["kind: expected one of " + ", ".join(repr(k.value) for k in ChangeKind)
                                  + ", found 'ink'", "inner[0].names: expected a string, found int 1",
                                  "value: expected a string, found float 1.5", "quiet: expected true/false, found a string 'no'"]
    assert str(err.value).endswith("; and 1 more")


class _Shade(enum.Enum):
    DARK = "dark"
    LIGHT = "light"


@dataclass(frozen=True)
class _Circle:
    radius: int


@dataclass(frozen=True)
class _Square:
    side: int
    shade: _Shade = _Shade.DARK


@dataclass(frozen=True)
class _Drawing:
    shape: _Circle | _Square  # a union of two records: the one the data fits is built, not the first listed
    shades: tuple[_Shade, ...] = ()
    label: str | None = "untitled"  # null is a value here: it stays None, never the default
    # stored as a list of names or null; the field itself takes no null, so null means its default
    tags: tuple[str, ...] = field(default=("plain",), metadata=codec.stored(shape=list[str] | None))
    layer: int = 0


def test_a_union_of_records_builds_the_one_the_data_fits():
    got = codec.decode(_Drawing, {"shape": {"side": 3, "shade": "light"}})
    assert got.shape == _Square(3, _Shade.LIGHT) and isinstance(got.shape.shade, _Shade)
    assert codec.decode(_Drawing, {"shape": {"radius": 2}}).shape == _Circle(2)


def test_a_tuple_of_enums_reads_back_as_enums():
    got = codec.decode(_Drawing, {"shape": {"radius": 1}, "shades": ["light", "dark"]})
    assert got.shades == (_Shade.LIGHT, _Shade.DARK) and all(isinstance(s, _Shade) for s in got.shades)
    assert codec.decode(_Drawing, codec.encode(got)) == got


def test_null_is_kept_where_the_field_takes_it_and_is_the_default_where_it_does_not():
    got = codec.decode(_Drawing, {"shape": {"radius": 1}, "label": None, "tags": None, "layer": 4})
    assert got.label is None  # the field's own type takes null: a stored null is a value
    assert got.tags == ("plain",)  # only the stored shape takes null: the field's default
    assert got.layer == 4  # and the fields after it are still read

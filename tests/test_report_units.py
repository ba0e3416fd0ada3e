"""The sweep report's data (report/model.py) in-process: what build() puts in a Report, field by field; what makes
a report red under each gate; the grid; and gather() over result files and dirs. mutmut maps these tests to the
module's functions (docs/mutations.md).

The report's "ORT before -> after" line, in every form, is `Report.provenance_changes`: it names each cell whose
ORT differs from its baseline record's, and no cell where only another part of what ran changed (its torch, its
python, its wheel's hash, the CUDA its ORT was built for, its host).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import result

from ort_gpu_matrix.compare.changes import Change, Comparison, Scope
from ort_gpu_matrix.judge.counts import Counts
from ort_gpu_matrix.judge.stale import StaleRecord
from ort_gpu_matrix.judge.verdicts import Status
from ort_gpu_matrix.report.model import InputError, Report, Sweep, build, gather
from ort_gpu_matrix.report.render import markdown, terminal
from ort_gpu_matrix.store.baseline import Baseline
from ort_gpu_matrix.store.confirmation import Confirmation
from ort_gpu_matrix.store.confirmation import TestRuns as Runs  # not collected as a test class
from ort_gpu_matrix.store.results import CellInfo, Provenance

PASSED = {"t::a": "passed"}


def ran(name: str, ort: str = "1.32.0", mode: str = "normal", outcomes: dict[str, str] | None = None, *,
        libs: str = "none", torch: str | None = None, python: str = "3.11.7", sha: str | None = None,
        cuda: str = "12.8", host: str = "h1", cell: CellInfo | None = None, **kw):
    """A stored result of one cell's mode, with the provenance a report compares."""
    prov = Provenance(python=python, ort={"distribution": "onnxruntime-gpu", "version": ort, "cuda_version": cuda},
                      torch={"version": torch, "cuda": "12.8"} if torch else None, ort_wheel_sha256=sha)
    return result(mode, PASSED if outcomes is None else outcomes, name=name, provenance=prov, host=host,
                  cell=cell or CellInfo(name, "3.11", "1.32.0", "none", libs, "canary"), **kw)


def kinds(changes: list[Change]) -> list[tuple]:
    return [(c.kind, c.cell, c.mode, c.test, c.before, c.after) for c in changes]


def test_the_ort_line_names_each_cell_whose_ort_changed_and_no_cell_where_only_the_rest_of_what_ran_did():
    before = Baseline.of([ran("c1", "1.31.0"), ran("c2"), ran("c3"), ran("c3", mode="teeth")])
    now = [ran("c1", "1.32.0"),
           ran("c2", torch="2.9.0", python="3.11.9", sha="abc123", cuda="13.0", host="h2"),  # all but its ORT
           ran("c3"), ran("c3", mode="teeth"),
           ran("c4", "1.33.0")]  # not in the baseline: no ORT to compare with
    rep = build(now, before)
    assert rep.provenance_changes == {"c1": ("onnxruntime-gpu 1.31.0", "onnxruntime-gpu 1.32.0")}
    assert "  c1: ORT onnxruntime-gpu 1.31.0 -> onnxruntime-gpu 1.32.0" in terminal.render(rep).splitlines()
    assert "- **c1**: ORT onnxruntime-gpu 1.31.0 → onnxruntime-gpu 1.32.0" in markdown.render(rep).splitlines()
    assert "c2: ORT" not in terminal.render(rep) and "ORT" not in terminal.render(build(now, None)).split("Libraries")[0]
    assert build(now, None).provenance_changes == {}  # no baseline: nothing to compare against


def test_a_report_without_a_baseline_or_a_sweep_holds_the_results_and_the_defaults():
    rs = [ran("b", mode="teeth"), ran("a", verdict=Status.FAIL)]
    rep = build(rs)
    assert rep.results == rs and rep.comparison is None and rep.libs == [] and rep.baseline_name is None
    assert (rep.provenance_changes, rep.skipped, rep.errors, rep.baseline_verdicts, rep.unconfirmed) == ({}, {}, {}, {}, [])
    assert (rep.gate, rep.allow_missing, rep.interrupted, rep.confirm) == ("all", False, None, None)


def test_what_the_sweep_says_of_itself_reaches_the_report():
    sweep = Sweep(skipped={"x": "no GPU here"}, gate="regressions", allow_missing=True, errors={"y": "build failed"},
                  interrupted="SIGINT", confirm=2)
    rep = build([ran("a")], None, "nightly", sweep)
    assert (rep.skipped, rep.gate, rep.allow_missing, rep.errors, rep.interrupted, rep.confirm, rep.baseline_name) == \
        ({"x": "no GPU here"}, "regressions", True, {"y": "build failed"}, "SIGINT", 2, "nightly")


def test_against_a_baseline_the_comparison_takes_the_sweeps_scope_its_known_flaky_tests_and_stale_rules():
    before = Baseline.of([ran("c1", outcomes={"t::a": "passed", "t::f": "passed"}),
                          ran("c2", verdict=Status.FAIL, outcomes={"t::a": "failed"}),
                          ran("gone"), ran("left-out"), ran("chosen")])
    stale = StaleRecord("normal", "known_failures", "t::x", "r", "no longer fails", "t::x passed")
    now = [ran("c1", outcomes={"t::a": "failed", "t::f": "failed"}, verdict=Status.FAIL,
               known_flaky={"t::f": {"outcomes": ["passed", "failed"], "tiers": []}}, stale_rules=[stale]),
           ran("c2", verdict=Status.FAIL, outcomes={"t::a": "failed"}), ran("new")]
    scope = Scope(frozenset({"c1", "c2", "new", "left-out", "chosen"}),
                  frozenset({("c1", "normal"), ("c2", "normal"), ("new", "normal"), ("chosen", "normal")}),
                  {"chosen": "interrupted"})
    rep = build(now, before, "b", Sweep(scope=scope))
    cmp = rep.comparison
    assert cmp is not None
    assert kinds(cmp.regressions) == [("verdict", "c1", "normal", None, "pass", "fail"),
                                      ("test", "c1", "normal", "t::a", "passed", "failed"),  # t::f: within its set
                                      ("count", "c1", "normal", "passed", 2, 0)]
    assert kinds(cmp.improvements) == [("stale-rule", "c1", "normal", "t::x", "known_failures", "t::x passed")]
    assert [(c.kind, c.cell) for c in cmp.removed] == [("cell", "gone")]
    assert [(c.kind, c.cell) for c in cmp.not_selected] == [("not selected", "left-out")]
    assert kinds(cmp.missing) == [("missing", "chosen", "normal", None, "pass", "did not run: interrupted")]
    assert [(c.kind, c.cell) for c in cmp.added] == [("cell", "new")]
    assert rep.baseline_verdicts == {(c, "normal"): rec["normal"].verdict for c, rec in before.cells.items()}
    assert [r.cell.name for r in rep.already_failing] == ["c2"] and [r.cell.name for r in rep.new_failures] == ["c1"]


def _confirmed(unconfirmed: list[str], runs: list[str], against: str | None = "passed") -> Confirmation:
    """`against`: the baseline line the rerun judged t::a against ("passed": the baseline's own)."""
    return Confirmation(1, Status.FAIL, [], Counts(1, 0), [], [Runs("t::a", ["test", "libs"], runs, unconfirmed,
                                                                    against)])


def test_what_a_confirmation_did_not_reproduce_leaves_the_regressions_and_the_libs_comparison_and_is_listed():
    before = Baseline.of([ran("c1"), ran("c2")])
    now = [ran("c1", outcomes={"t::a": "failed"}, libs="x", confirmation=_confirmed(["test"], ["failed", "passed"]),
               counts=Counts(1, 1)),  # amended: the counts follow the reruns
           ran("c2", outcomes={"t::a": "passed"}, libs="y")]
    rep = build(now, before)
    assert rep.comparison is not None and rep.comparison.regressions == []
    assert [(u.cell, u.mode, u.test, u.checks, u.runs) for u in rep.unconfirmed] == \
        [("c1", "normal", "t::a", ["test"], ["failed", "passed"])]
    (d,) = rep.libs  # c1 and c2 differ only in their libs set
    assert (d.mode, d.cells, d.tests, d.unconfirmed) == ("normal", ("c1", "c2"), [("t::a", "failed", "passed")], [])
    now[0] = ran("c1", outcomes={"t::a": "failed"}, libs="x", counts=Counts(1, 1),
                 confirmation=_confirmed(["test"], ["failed", "passed"], against="failed"))
    other = build(now, before)  # judged against another baseline's line: this comparison's regression stands
    assert other.comparison is not None
    assert kinds(other.comparison.regressions) == [("test", "c1", "normal", "t::a", "passed", "failed")]
    now[0] = ran("c1", outcomes={"t::a": "failed"}, libs="x", confirmation=_confirmed(["libs"], ["failed", "passed"]))
    (d,) = build(now).libs
    assert (d.tests, d.unconfirmed) == ([], [("t::a", ["failed", "passed"], ["passed"])])


def test_cells_of_other_pythons_or_suites_are_not_a_libs_comparison():
    now = [ran("c1", outcomes={"t::a": "failed"}, libs="x"),
           ran("c2", outcomes={"t::a": "passed"}, libs="y", cell=CellInfo("c2", "3.12", "1.32.0", "none", "y", "canary")),
           ran("c3", outcomes={"t::a": "passed"}, libs="y", cell=CellInfo("c3", "3.11", "1.32.0", "none", "y", "other"))]
    assert build(now).libs == []


def red(**kw) -> Report:
    return Report(**{"results": [ran("a")], "comparison": None, "libs": [], **kw})


REGRESSION = Change("test", "a", "normal", "t::a", "passed", "failed")
MISSING = Change("missing", "b", "normal", None, "pass", "did not run: no GPU")


def test_each_thing_that_makes_a_report_red_is_one_line():
    assert red().why_failed() == [] and red().ok
    assert red(results=[]).why_failed() == ["nothing ran"] and not red(results=[]).ok
    failing = [ran("a", verdict=Status.FAIL), ran("b", verdict=Status.FAIL), ran("c")]
    assert red(results=failing).why_failed() == ["2 failing mode(s)"]
    assert red(comparison=Comparison(regressions=[REGRESSION, REGRESSION])).why_failed() == ["2 regression(s)"]
    assert red(comparison=Comparison(missing=[MISSING])).why_failed() == [
        "1 baseline mode(s) did not run (--allow-missing accepts that)"]
    assert red(comparison=Comparison(missing=[MISSING]), allow_missing=True).why_failed() == []
    assert red(errors={"a": "x", "b": "y"}).why_failed() == ["2 cell(s) could not run"]
    assert red(interrupted="SIGTERM").why_failed() == ["interrupted (SIGTERM)"]
    every = red(results=[], comparison=Comparison(regressions=[REGRESSION], missing=[MISSING]), errors={"a": "x"},
                interrupted="SIGINT")
    assert every.why_failed() == ["nothing ran", "1 regression(s)",
                                  "1 baseline mode(s) did not run (--allow-missing accepts that)",
                                  "1 cell(s) could not run", "interrupted (SIGINT)"]


def test_under_the_regressions_gate_a_mode_that_failed_in_the_baseline_too_is_listed_not_failing():
    before = Baseline.of([ran("a", verdict=Status.FAIL), ran("b"), ran("c", verdict=Status.FAIL)])
    failing = [ran("a", verdict=Status.FAIL), ran("b", verdict=Status.FAIL), ran("c"), ran("d", verdict=Status.FAIL)]
    strict = build(failing, before)
    assert [r.cell.name for r in strict.failed] == ["a", "b", "d"]
    assert [r.cell.name for r in strict.already_failing] == ["a"]
    assert [r.cell.name for r in strict.new_failures] == ["b", "d"]
    assert strict.why_failed() == ["3 failing mode(s)", "1 regression(s)"]  # b's verdict
    held = build(failing, before, sweep=Sweep(gate="regressions"))
    assert held.why_failed() == ["2 failing mode(s) not already failing in the baseline", "1 regression(s)"]
    assert build([ran("a", verdict=Status.FAIL)], Baseline.of([ran("a", verdict=Status.FAIL)]),
                 sweep=Sweep(gate="regressions")).ok


def test_the_grid_is_cells_by_name_then_modes():
    rs = [ran("b", mode="teeth"), ran("a"), ran("b"), ran("a", mode="require_cudnn")]
    grid = red(results=rs).cells()
    assert list(grid) == ["a", "b"]
    assert grid == {"a": {"normal": rs[1], "require_cudnn": rs[3]}, "b": {"teeth": rs[0], "normal": rs[2]}}


def stored(path: Path, r) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(r.to_dict()))
    return path


def test_gather_reads_the_current_results_of_dirs_and_files_and_nothing_else(tmp_path):
    a = stored(tmp_path / "host-a" / "c1-normal.json", ran("c1", run_id="r1"))
    stored(tmp_path / "host-a" / "runs" / "c1-normal" / "r0" / "result.json", ran("c1", run_id="r0"))  # history
    stored(tmp_path / "host-a" / ".c1-teeth.json", ran("c1", mode="teeth", run_id="r2"))  # being written
    stored(tmp_path / "host-a" / "sweep-c9.json", ran("c9", run_id="r2"))
    stored(tmp_path / "host-a" / ".locks" / "c8-normal.json", ran("c8", run_id="r2"))
    (tmp_path / "host-a" / "report.json").write_text(json.dumps({"tests": {}}))  # a probe report
    (tmp_path / "host-a" / "bench.json").write_text(json.dumps([1, 2]))
    (tmp_path / "host-a" / "other.json").write_text(json.dumps({"schema_version": 1}))  # no session
    (tmp_path / "host-a" / "notes.txt").write_text("not JSON, not read")
    b = stored(tmp_path / "elsewhere" / "c2-normal.json", ran("c2", run_id="r1"))
    got = gather([tmp_path / "host-a", b])
    assert sorted((r.session, r.run_id) for r in got) == [("c1-normal", "r1"), ("c2-normal", "r1")]
    assert [r.session for r in gather([a, a])] == ["c1-normal"]  # one run's result, twice: once


def test_gather_names_the_path_it_cannot_use(tmp_path):
    with pytest.raises(InputError, match=f"^{tmp_path / 'nope'}: no such file or directory$"):
        gather([tmp_path / "nope"])
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(InputError, match=f"^{tmp_path / 'broken.json'}: is not JSON \\(Expecting"):
        gather([tmp_path])
    (tmp_path / "broken.json").unlink()
    (tmp_path / "bad.json").write_text(json.dumps({"schema_version": 1, "session": "s"}))
    with pytest.raises(InputError, match=f"^{tmp_path / 'bad.json'}: is not a well-formed result"):
        gather([tmp_path])


def test_two_runs_of_one_session_are_refused_unless_the_newer_is_asked_for(tmp_path):
    old = stored(tmp_path / "a" / "c1-normal.json", ran("c1", run_id="r1", host="ha", started="2026-12-01T00:00:00+00:00"))
    new = stored(tmp_path / "b" / "c1-normal.json", ran("c1", run_id="r2", host="hb", started="2026-12-02T00:00:00+00:00"))
    with pytest.raises(InputError) as e:
        gather([old, new])
    assert str(e.value) == (f"c1-normal: two results from different runs: {old} (run r1, host ha) and {new} (run r2, "
                            f"host hb); pass --latest to keep the newer")
    assert [r.run_id for r in gather([old, new], latest=True)] == ["r2"]
    assert [r.run_id for r in gather([new, old], latest=True)] == ["r2"]
    tie = stored(tmp_path / "c" / "c1-normal.json", ran("c1", run_id="r0", started="2026-12-02T00:00:00+00:00"))
    assert [r.run_id for r in gather([new, tie], latest=True)] == ["r2"]  # one start: the run id decides
    assert [r.run_id for r in gather([tie, new], latest=True)] == ["r2"]

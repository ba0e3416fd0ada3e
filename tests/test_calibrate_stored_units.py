"""calibrate from stored results, in-process: what `nox -s calibrate -- --from DIR` does, without nox. Results and
probe reports are written here as the harness stores them, against a matrix file loaded by the real loader
(these reach calibrate's read, targets, _write and calibrate in the test process, where mutmut maps them;
the nox runs of tests/test_calibrate.py reach them only in a subprocess). The runs calibrate makes itself (`run`,
watched with a display or not) go through `Runner`, a stand-in for drive/cell.py's run_cell that keeps its
contract."""
from __future__ import annotations

import dataclasses
import io
import json
import locale
import re
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import result
from test_bad_inputs import BASE, PY, ROOT

from ort_gpu_matrix.app import calibrate as appcal
from ort_gpu_matrix.calibrate import gather
from ort_gpu_matrix.calibrate import suite as cal
from ort_gpu_matrix.config.kernels import TEETH_MESSAGE
from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.host.host import check
from ort_gpu_matrix.judge.counts import Counts, Dispatch
from ort_gpu_matrix.judge.pollution import Pollution, StateChange
from ort_gpu_matrix.judge.verdicts import Status, TeethCoverage
from ort_gpu_matrix.plan.cells import cells_of
from ort_gpu_matrix.report.render.live import Display
from ort_gpu_matrix.store.results import CellInfo, Provenance, load
from ort_gpu_matrix.util.voice import Voice

CUDNN = "CUDNN_FLASH_ATTENTION"
CELL = "gpu-3.11-x"


class Stored:
    """A matrix file (the suite s, one cell, normal and teeth) and a results dir of its cell's runs."""

    def __init__(self, tmp: Path, matrix: str = BASE.replace('modes = ["normal"]', 'modes = ["normal", "teeth"]')):
        self.tmp = tmp
        (tmp / "matrix.toml").write_text(matrix)
        self.matrix = load_matrix(tmp / "matrix.toml")
        self.results = tmp / "results"
        self.results.mkdir()

    def store(self, mode: str, tests: dict[str, dict], suite: str = "s", report: bool | str = True, run_id: str = "r1",
              cell: str = CELL, into: Path | None = None, **kw) -> Path:
        session = f"{cell}-{mode}"
        into = into or self.results
        path = into / "runs" / session / run_id / "report.json"
        if report is True:
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps({"tests": tests}))
        outcomes = {n: t["outcome"] for n, t in tests.items()}
        passed = sum(o == "passed" for o in outcomes.values())
        r = result(mode, outcomes, session=session, cell=CellInfo(cell, "3.11", "cpu", "none", "x", suite),
                   report=str(path) if report is True else report or None, run_id=run_id,
                   provenance=Provenance(ort={"version": "1.32.0"}), counts=Counts(len(outcomes), passed), **kw)
        (into / f"{session}.json").write_text(json.dumps(r.to_dict()))
        return path

    def calibrate(self, **kw) -> cal.Outcome:
        return appcal.calibrate(self.matrix, [], appcal.CalibrateArgs(from_dirs=[self.results], **kw), Voice.plain())


NORMAL = {"t::ok": {"outcome": "passed", "sdpa": [CUDNN]}, "t::f": {"outcome": "failed", "message": "AssertionError: 1\nmore"},
          "t::s": {"outcome": "skipped", "message": "no GPU here"}}
TEETH = {"t::ok": {"outcome": "failed", "message": TEETH_MESSAGE}, "t::tl": {"outcome": "passed"},
         "t::f": {"outcome": "failed", "message": "AssertionError: 1"}}


def test_calibrate_from_results_writes_a_file_that_accepts_them_and_says_what_it_did(tmp_path):
    s = Stored(tmp_path)
    s.store("normal", NORMAL, verdict=Status.FAIL, reasons=["library audit: a second cuDNN"])
    s.store("teeth", TEETH, teeth_coverage=TeethCoverage(checked=True, tier_tests=2, bitten=1, toothless=1,
                                                         undeclared_toothless=["t::tl"], bitten_tests=["t::ok"]),
            pollution=[Pollution("t::ok", "function", "gw0", [StateChange("env", "ORT_X", None, "1")], True, 2)], isolation="restore")
    out = s.calibrate()
    path = tmp_path / "expect" / "s.toml"
    assert out.written == {"s": path}
    assert out.lines == [
        f"pollution: {CELL}-teeth (isolation restore): t::ok left ORT_X (unset) -> '1' (undone; 2 later test(s) of gw0 ran without it)",
        f"wrote {path}: normal: min_passed 1, 1 allowed skip(s), 1 known_failures, 1 tiers; "
        "teeth: min_failures 1, 1 known_toothless, 1 known_failures",
        f"still failing after calibration: {CELL}-normal: library audit: a second cuDNN",
        f'to use it, set expect_file = "expect/s.toml" in [suite.s] of {tmp_path / "matrix.toml"}']
    obs = f'observed = [{{ cell = "{CELL}", ort = "1.32.0", date = "2026-12-01" }}]'
    assert path.read_text() == "\n".join([
        "# Expectations of [suite.s] that accept the outcome below, written by `nox -s calibrate`.",
        "# Review every rule before committing: each one accepts a failure, a toothless test or a skip.",
        f"# Seen in: {CELL} (onnxruntime 1.32.0, 2026-12-01)",
        '# Loaded with expect_file = "expect/s.toml" on [suite.s]; a key set here may not be set there too.', "",
        "[expect.normal]", f"min_passed = 1  # seen: {CELL} 1", "allowed_skips = [",
        f'    "^no GPU here$",  # {CELL}: 1 test(s)', "]", "known_failures = [",
        f'    {{ test = "^t::f$", reason = "AssertionError: 1", {obs} }},', "]", "tiers = [",
        '    { test = "^t::ok(?:_[0-9]+(?:_.*)?)?(?:\\\\[.*\\\\])?$", only = ["CUDNN_FLASH_ATTENTION"], '
        f'reason = "seen in {CELL}: 1 case(s), CUDNN_FLASH_ATTENTION in 1", {obs} }},', "]", "",
        "[expect.teeth]", f"min_failures = 1  # seen: {CELL} 1", "known_toothless = [",
        f'    {{ test = "^t::tl$", reason = "dispatched {CUDNN} in require_cudnn; passed with MATH forced", {obs} }},',
        "]", "known_failures = [", f'    {{ test = "^t::f$", reason = "AssertionError: 1", {obs} }},', "]", ""])
    assert [p.name for p in path.parent.iterdir()] == ["s.toml"]  # no temp file left
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_calibrating_into_the_suites_own_file_merges_it_and_says_nothing_about_using_it(tmp_path):
    own = BASE.replace('modes = ["normal"]', 'modes = ["normal"]').replace('pythonpath = [".."]',
                                                                          'pythonpath = [".."]\nexpect_file = "e/s.toml"')
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "s.toml").write_text('[expect.normal]\nknown_failures = [{ test = "^t::gone$", reason = "old" }]\n'
                                           'require_kernel = "CUDNN_FLASH_ATTENTION"\n')
    s = Stored(tmp_path, own)
    s.store("normal", {"t::ok": {"outcome": "passed", "sdpa": [CUDNN]}})
    out = s.calibrate()
    assert out.written == {"s": tmp_path / "e" / "s.toml"}
    assert out.lines == [
        "dropped stale rule: normal known_failures '^t::gone$' (old): it matched nothing in " + CELL,
        f"wrote {tmp_path / 'e' / 's.toml'}: normal: min_passed 1, 1 tiers"]
    text = (tmp_path / "e" / "s.toml").read_text()
    assert 'require_kernel = "CUDNN_FLASH_ATTENTION"' in text and "t::gone" not in text
    assert '# Loaded with expect_file = "e/s.toml" on [suite.s]' in text


def test_results_calibrate_cannot_use_are_named_and_skipped(tmp_path):
    s = Stored(tmp_path)
    s.store("normal", NORMAL, stopped="interrupted (SIGINT)")
    s.store("teeth", TEETH, report=False)
    with pytest.raises(cal.CalibrateError) as err:
        s.calibrate()
    assert str(err.value) == "nothing to calibrate: no mode run of the chosen cells left a result to read"
    seen: list[str] = []
    assert gather.read(cells_of(s.matrix), [s.results], Voice.plain(say=seen.append)) == []
    assert seen == [f"not calibrated: {CELL}-normal: the run was interrupted (SIGINT)",
                    f"not calibrated: {CELL}-teeth: the run left no probe report (see its log)",
                    f"no result: {CELL} has no usable result in {s.results}"]


def test_a_result_of_another_suite_or_a_mode_the_cell_does_not_run_is_not_read(tmp_path):
    s = Stored(tmp_path, BASE)  # the cell runs normal only
    s.store("normal", NORMAL, suite="other")
    s.store("teeth", TEETH)
    said: list[str] = []
    assert gather.read(cells_of(s.matrix), [s.results], Voice.plain(say=said.append)) == []
    assert said == [f"not calibrated: {CELL}-normal: it ran suite other, the matrix gives {CELL} suite s",
                    f"no result: {CELL} has no usable result in {s.results}"]


def test_results_moved_with_their_runs_dir_are_read_and_a_lost_report_is_an_error(tmp_path):
    s = Stored(tmp_path)
    s.store("normal", NORMAL)
    moved = tmp_path / "moved"
    s.results.rename(moved)
    (seen,) = gather.read(cells_of(s.matrix)[:1], [moved], Voice.plain())  # its report names the old place: found under moved/
    assert [t.nodeid for t in seen.tests] == ["t::ok", "t::f", "t::s"] and seen.result.session == f"{CELL}-normal"
    (moved / "runs" / f"{CELL}-normal" / "r1" / "report.json").write_text('{"tests": []}')  # not a probe report
    with pytest.raises(cal.CalibrateError) as err:
        gather.read(cells_of(s.matrix), [moved], Voice.plain())
    assert str(err.value) == (f"{CELL}-normal: its probe report ({s.results}/runs/{CELL}-normal/r1/report.json) cannot "
                              "be read: calibrate reads each test's failure message and skip reason from it; copy the "
                              "results dir whole, runs/ included")
    (moved / f"{CELL}-normal.json").write_text("{")
    with pytest.raises(cal.CalibrateError, match="is not JSON"):
        gather.read(cells_of(s.matrix), [moved], Voice.plain())
    assert gather.json_of(moved / "nothing.json") is None and gather.json_of(moved / f"{CELL}-normal.json") is None


def test_targets_refuse_a_file_calibrate_would_replace_unread(tmp_path):
    s = Stored(tmp_path)
    suite = s.matrix.suites["s"]
    assert cal.targets(s.matrix.workspace, {"s": suite}, None, False) == {"s": tmp_path / "expect" / "s.toml"}
    assert cal.targets(s.matrix.workspace, {"s": suite}, tmp_path / "w.toml", False) == {"s": tmp_path / "w.toml"}
    (tmp_path / "w.toml").write_text("")
    with pytest.raises(cal.CalibrateError) as err:
        cal.targets(s.matrix.workspace, {"s": suite}, tmp_path / "w.toml", False)
    assert str(err.value) == (f"{tmp_path / 'w.toml'} exists and is not the expect file of [suite.s] (it has no "
                              "expect_file): calibrate would replace it without reading it; pass --force to replace "
                              "it, or --write another path")
    assert cal.targets(s.matrix.workspace, {"s": suite}, tmp_path / "w.toml", True) == {"s": tmp_path / "w.toml"}
    with pytest.raises(cal.CalibrateError) as err:
        cal.targets(s.matrix.workspace, {"s": suite}, tmp_path, True)
    assert str(err.value) == f"{tmp_path} is a directory: --write takes the .toml file to write"
    with pytest.raises(cal.CalibrateError) as err:
        cal.targets(s.matrix.workspace, {"s": suite, "b": suite, "a": suite}, tmp_path / "x.toml", False)
    assert str(err.value) == ("--write names one file, but the cells chosen run 3 suites (a, b, s): choose one suite's "
                              "cells, or leave --write out")
    own = dataclasses.replace(suite, expect_file="e/s.toml")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "s.toml").write_text("")
    assert cal.targets(s.matrix.workspace, {"s": own}, None, False) == {"s": tmp_path / "e" / "s.toml"}
    with pytest.raises(cal.CalibrateError, match=r"\(its expect_file is .*e/s.toml\)"):
        cal.targets(s.matrix.workspace, {"s": own}, tmp_path / "w.toml", False)


def test_a_file_that_does_not_load_is_never_written(tmp_path):
    s = Stored(tmp_path)
    target = tmp_path / "new" / "s.toml"
    with pytest.raises(cal.CalibrateError) as err:
        cal.write_file(s.matrix.workspace, s.matrix.suites["s"], target, "[expect.normal]\nmin_passed = -1\n")
    assert str(err.value).startswith("the file calibrate wrote does not load, so nothing was written:\nort-gpu-matrix: ")
    assert "min_passed" in str(err.value)
    assert list(target.parent.iterdir()) == []
    expect = cal.write_file(s.matrix.workspace, s.matrix.suites["s"], target, "[expect.normal]\nmin_passed = 4\n")
    assert expect["normal"].min_passed == 4 and target.read_text() == "[expect.normal]\nmin_passed = 4\n"  # type: ignore[union-attr]


def test_one_run_is_refused_before_anything_runs_and_paths_outside_stay_whole(tmp_path):
    s = Stored(tmp_path)
    with pytest.raises(cal.CalibrateError) as err:
        appcal.calibrate(s.matrix, [], appcal.CalibrateArgs(rounds=1), Voice.plain())
    assert str(err.value) == ("--runs 1: a flake is told from a failure only by running each mode at least twice; use "
                              "--runs 2 or more (default 2); nothing was run")
    assert cal.relative(s.matrix.workspace, tmp_path / "a" / "b.toml") == "a/b.toml"
    assert cal.relative(s.matrix.workspace, Path("/elsewhere/b.toml")) == "/elsewhere/b.toml"


def test_a_cell_whose_expect_file_is_not_written_yet_runs_on_the_matrix_tables(tmp_path):
    text = BASE.replace('pythonpath = [".."]', 'pythonpath = [".."]\nexpect_file = "e/s.toml"')
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "s.toml").write_text("")
    s = Stored(tmp_path, text)
    (tmp_path / "e" / "s.toml").unlink()
    (c,) = cells_of(s.matrix)
    said: list[str] = []
    got = gather.as_run(s.matrix.workspace, c, Voice.plain(say=said.append))
    assert got.suite.expect_file is None and got.name == c.name
    assert said == [f"{CELL}: {tmp_path / 'e' / 's.toml'} does not exist yet: the run is judged by [suite.s.expect] alone"]
    (tmp_path / "e" / "s.toml").write_text("")
    assert gather.as_run(s.matrix.workspace, c, Voice.plain(say=said.append)) is c and len(said) == 1
    plain = Stored(tmp_path / "p" if (tmp_path / "p").mkdir() is None else tmp_path)
    (pc,) = cells_of(plain.matrix)
    assert gather.as_run(plain.matrix.workspace, pc, Voice.plain(say=said.append)) is pc and len(said) == 1


class Runner:
    """Stands in for drive/cell.py's run_cell (the nox and pytest run that test_calibrate.py makes for real),
    keeping its contract: each call stores the results of the next round in the matrix's results dir and returns
    them, tells its voice's events as each mode run starts and ends, echoes pytest's command (the host's interpreter, the
    posargs), records each result in `earlier` (teeth reads its require_cudnn census there), or raises what a
    failed build raises."""

    def __init__(self, stored: Stored, rounds: list[dict[str, dict]], error: Exception | None = None,
                 teeth: dict[str, dict] | None = None, stopped: tuple[int, ...] = ()):
        self.stored, self.rounds, self.error, self.calls = stored, rounds, error, []
        self.teeth, self.stopped = teeth, stopped
        self.asked: list[tuple[list[str], dict]] = []  # each call's posargs and earlier runs, as given

    def __call__(self, cr, modes, overlap=None):
        cell, resolved, posargs, earlier, voice = cr.cell, cr.resolved, cr.posargs, cr.earlier, cr.voice
        log, echo, watch = voice.log, voice.echo, voice.events
        self.calls.append((cell.name, tuple(modes), watch))
        self.asked.append(([*posargs], dict(earlier)))
        if self.error is not None:
            raise self.error
        log(f"ran {cell.name} {len(self.calls)}")
        out = []
        for mode in modes:
            session = cell.mode_session(mode)
            if watch is not None:
                watch.mode_started(session)
            echo(f"{session}: {resolved.interpreter} -m pytest" + "".join(f" {a}" for a in posargs))
            tests = self.teeth if mode == "teeth" and self.teeth is not None else self.rounds[len(self.calls) - 1]
            kw = {"stopped": "interrupted (SIGINT)"} if len(self.calls) in self.stopped else {}
            self.stored.store(mode, tests, run_id=f"r{len(self.calls)}", cell=cell.name,
                              into=cr.workspace.results_dir, **kw)
            stored = load(cr.workspace.results_dir / f"{session}.json")
            earlier[session] = stored
            if watch is not None:
                watch.mode_ended(stored)
            out.append(stored)
        return out


def test_calibrate_runs_each_cell_the_rounds_asked_and_tells_a_flake_from_a_failure(tmp_path, monkeypatch):
    s = Stored(tmp_path, BASE)
    runner = Runner(s, [{"t::ok": {"outcome": "passed"}, "t::fl": {"outcome": "passed"}},
                        {"t::ok": {"outcome": "passed"}, "t::fl": {"outcome": "failed", "message": "E: 1"}}])
    monkeypatch.setattr(gather, "run_cell", runner)
    logged: list[str] = []
    out = appcal.calibrate(s.matrix, [], appcal.CalibrateArgs(), Voice.plain(log=logged.append, echo=logged.append))
    assert [c[:2] for c in runner.calls] == [(CELL, ("normal",))] * 2
    python = check(cells_of(s.matrix)[0], s.matrix.workspace).interpreter  # type: ignore[union-attr]
    assert logged == [f"calibrate: {CELL} (normal), run 1 of 2", f"ran {CELL} 1", f"{CELL}-normal: {python} -m pytest",
                      f"calibrate: {CELL} (normal), run 2 of 2", f"ran {CELL} 2", f"{CELL}-normal: {python} -m pytest"]
    assert out.lines[0] == "flaky: normal t::fl: passed, failed"
    assert "known_flaky = [" in (tmp_path / "expect" / "s.toml").read_text()


def test_a_cell_that_cannot_run_here_is_an_error_when_named_and_skipped_otherwise(tmp_path, monkeypatch):
    s = Stored(tmp_path, BASE.replace('pythons = ["', 'pythons = ["3.99", "').replace(
        "include = [{", 'include = [{ python = "3.99", ort = "cpu", torch = "none", libs = "x" }, {'))
    cells = cells_of(s.matrix)
    assert [c.name for c in cells] == ["gpu-3.99-x", CELL]
    runner = Runner(s, [{"t::ok": {"outcome": "passed"}}] * 2)
    monkeypatch.setattr(gather, "run_cell", runner)
    said: list[str] = []
    seen = gather.run(s.matrix.workspace, cells, False, 2, Voice.plain(say=said.append))
    assert said[0].startswith("skipped: gpu-3.99-x cannot run on this host: pairing.include[0].python: no python 3.99")
    assert [(x.cell.name, x.round) for x in seen] == [(CELL, 0), (CELL, 1)]
    with pytest.raises(cal.CalibrateError) as err:
        gather.run(s.matrix.workspace, cells, True, 2, Voice.plain(say=said.append))
    assert str(err.value).startswith("gpu-3.99-x cannot run on this host: pairing.include[0].python: no python 3.99")
    from ort_gpu_matrix.envs.venvs import BuildError
    monkeypatch.setattr(gather, "run_cell", Runner(s, [], BuildError("uv failed\nmore")))
    with pytest.raises(cal.CalibrateError) as err:
        gather.run(s.matrix.workspace, cells[1:], True, 2, Voice.plain(say=said.append))
    assert str(err.value) == f"{CELL} did not run: uv failed"


TWO_CELLS = BASE.replace('modes = ["normal"]', 'modes = ["normal", "teeth"]').replace('pythons = ["', 'pythons = ["3.99", "').replace(
    "include = [{", 'include = [{ python = "3.99", ort = "cpu", torch = "none", libs = "x" }, {')


def test_read_takes_the_chosen_cells_in_mode_order_from_every_dir(tmp_path):
    s = Stored(tmp_path, TWO_CELLS)
    other = tmp_path / "other"
    other.mkdir()
    s.store("teeth", TEETH, cell="gpu-3.99-x")
    s.store("normal", NORMAL, cell="gpu-3.99-x", into=other)
    s.store("normal", NORMAL)  # gpu-3.11-x: not chosen
    chosen = [c for c in cells_of(s.matrix) if c.name == "gpu-3.99-x"]
    said: list[str] = []
    got = gather.read(chosen, [s.results, other], Voice.plain(say=said.append))
    assert [(x.cell.name, x.mode) for x in got] == [("gpu-3.99-x", "normal"), ("gpu-3.99-x", "teeth")] and said == []
    assert gather.read([c for c in cells_of(s.matrix) if c.name == CELL], [other], Voice.plain(say=said.append)) == []
    assert said == [f"no result: {CELL} has no usable result in {other}"]
    said.clear()
    gather.read([c for c in cells_of(s.matrix) if c.name == CELL], [other, other], Voice.plain(say=said.append))
    assert said == [f"no result: {CELL} has no usable result in {other}, {other}"]


def test_a_result_of_another_suite_leaves_the_next_result_read(tmp_path):
    s = Stored(tmp_path)
    s.store("normal", NORMAL, suite="other")
    s.store("teeth", TEETH)
    said: list[str] = []
    got = gather.read(cells_of(s.matrix), [s.results], Voice.plain(say=said.append))
    assert [x.mode for x in got] == ["teeth"]
    assert said == [f"not calibrated: {CELL}-normal: it ran suite other, the matrix gives {CELL} suite s"]


def test_a_report_outside_the_results_dir_is_read_where_the_result_says(tmp_path):
    s = Stored(tmp_path)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"tests": {"t::ok": {"outcome": "passed"}}}))
    s.store("normal", {"t::ok": {"outcome": "passed"}}, report=str(elsewhere))
    (seen,) = gather.read(cells_of(s.matrix), [s.results], Voice.plain())
    assert [t.nodeid for t in seen.tests] == ["t::ok"]


def test_two_suites_cannot_share_one_write_target_and_parents_are_made(tmp_path):
    s = Stored(tmp_path)
    suite = s.matrix.suites["s"]
    with pytest.raises(cal.CalibrateError) as err:
        cal.targets(s.matrix.workspace, {"s": suite, "b": suite}, tmp_path / "x.toml", False)
    assert str(err.value).startswith("--write names one file, but the cells chosen run 2 suites (b, s)")
    deep = tmp_path / "new" / "deeper" / "s.toml"
    cal.write_file(s.matrix.workspace, suite, deep, "[expect.normal]\nmin_passed = 2\n")
    assert deep.read_text() == "[expect.normal]\nmin_passed = 2\n"


def test_still_failing_judges_teeth_with_require_cudnns_census_and_keeps_what_nothing_accepts(tmp_path):
    s = Stored(tmp_path, BASE.replace('modes = ["normal"]', 'modes = ["normal", "require_cudnn", "teeth"]'))
    toothless = (f"1 toothless test(s): dispatched {CUDNN} in require_cudnn but did not fail with the verbatim message "
                 "when MATH was forced: t::tl")
    s.store("normal", {"t::f": {"outcome": "failed", "message": "E"}}, verdict=Status.FAIL)
    s.store("require_cudnn", {"t::ok": {"outcome": "passed", "sdpa": [CUDNN]}, "t::tl": {"outcome": "passed", "sdpa": [CUDNN]}},
            dispatch=Dispatch({"t::ok": [CUDNN], "t::tl": [CUDNN]}))
    s.store("teeth", {"t::ok": {"outcome": "failed", "message": TEETH_MESSAGE}, "t::tl": {"outcome": "passed"}},
            verdict=Status.FAIL, reasons=[toothless])
    out = s.calibrate()
    still = [line for line in out.lines if line.startswith("still failing")]
    assert still == [f"still failing after calibration: {CELL}-normal: nothing passed"]


def test_calibrate_leaves_the_matrix_keys_alone_and_chooses_cells_by_selector(tmp_path, monkeypatch):
    text = TWO_CELLS + "\n[suite.s.expect.normal]\nmin_passed = 1\n"
    s = Stored(tmp_path, text)
    s.store("normal", NORMAL, cell="gpu-3.99-x")
    (tmp_path / "mine.toml").write_text("# someone's\n")
    asked = appcal.CalibrateArgs(write=tmp_path / "mine.toml", from_dirs=[s.results], force=True)
    out = appcal.calibrate(s.matrix, ["gpu-3.99-x"], asked, Voice.plain())
    assert out.written == {"s": tmp_path / "mine.toml"}
    assert out.lines[0] == ("not written: normal min_passed: [suite.s.expect.normal] in the matrix file sets it (a key "
                            "is set in one file only)")
    assert "min_passed" not in (tmp_path / "mine.toml").read_text()
    monkeypatch.setattr(gather, "run_cell", lambda *a, **k: [])
    with pytest.raises(cal.CalibrateError) as err:
        appcal.calibrate(s.matrix, ["gpu-3.11-x"], appcal.CalibrateArgs(), Voice.plain())
    assert str(err.value) == ("nothing to calibrate: no mode run of the chosen cells left a result to read (the reasons "
                              "are above)")


def test_calibrate_refuses_a_file_it_would_replace_unread_and_merges_the_matrix_rules_when_it_judges(tmp_path):
    text = TWO_CELLS + '\n[suite.s.expect.normal]\nknown_failures = [{ test = "^t::f$", reason = "inline" }]\n'
    s = Stored(tmp_path, text)
    s.store("normal", NORMAL, verdict=Status.FAIL)
    (tmp_path / "expect").mkdir()
    (tmp_path / "expect" / "s.toml").write_text("# not the suite's own file\n")
    with pytest.raises(cal.CalibrateError, match="exists and is not the expect file of"):
        s.calibrate()
    out = s.calibrate(force=True)
    assert not [line for line in out.lines if line.startswith("still failing")]  # the matrix's rule accepts t::f
    assert ("kept stale rule" not in " ".join(out.lines)) and any(
        line.startswith("not written: normal known_failures") for line in out.lines)


def test_a_suites_own_file_that_is_empty_is_calibrated_over(tmp_path):
    own = BASE.replace('pythonpath = [".."]', 'pythonpath = [".."]\nexpect_file = "e/s.toml"')
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "s.toml").write_text("")
    s = Stored(tmp_path, own)
    s.store("normal", {"t::ok": {"outcome": "passed"}})
    assert s.calibrate().written == {"s": tmp_path / "e" / "s.toml"}


# --- the runs calibrate makes, watched or not (mutmut maps only in-process tests, and the watched
# path is what `nox -s calibrate` takes on a terminal or with --progress)

RC_TEETH = BASE.replace('modes = ["normal"]', 'modes = ["normal", "teeth"]')


def _took(lines: list[str]) -> list[str]:
    return [re.sub(r"  \d+\.\d s  ", "  N s  ", line) for line in lines]


def test_a_watched_calibration_shows_every_run_of_every_round_and_keeps_pytest_and_the_details_off_the_screen(
        tmp_path, monkeypatch):
    s = Stored(tmp_path, RC_TEETH)
    runner = Runner(s, [{"t::ok": {"outcome": "passed"}}] * 2, teeth={"t::ok": {"outcome": "failed", "message": TEETH_MESSAGE}})
    monkeypatch.setattr(gather, "run_cell", runner)
    screen = io.StringIO()
    logged: list[str] = []
    echoed: list[str] = []
    out = appcal.calibrate(s.matrix, [], appcal.CalibrateArgs(), Voice.plain(log=logged.append, echo=echoed.append),
                           Display(screen))
    assert _took(screen.getvalue().splitlines()) == [
        f"start  {CELL}-normal  (1 of 4, no earlier run)", f"PASS   {CELL}-normal  1/0/0  no tier  N s  no gpu  [1/4]",
        f"start  {CELL}-teeth  (2 of 4, no earlier run)", f"PASS   {CELL}-teeth  0/0/0  no tier  N s  no gpu  [2/4]",
        f"start  {CELL}-normal  (3 of 4, no earlier run)", f"PASS   {CELL}-normal  1/0/0  no tier  N s  no gpu  [3/4]",
        f"start  {CELL}-teeth  (4 of 4, no earlier run)", f"PASS   {CELL}-teeth  0/0/0  no tier  N s  no gpu  [4/4]"]
    assert logged == [] and echoed == []  # pytest's output is in each run's pytest.log; the details in sweep.log
    assert (s.matrix.workspace.results_dir / "sweep.log").read_text() == f"ran {CELL} 1\nran {CELL} 2\n"
    assert [c[2] is not None for c in runner.calls] == [True, True]
    assert out.written == {"s": tmp_path / "expect" / "s.toml"}


def test_an_unwatched_calibration_logs_each_round_and_echoes_pytest_with_nothing_added(tmp_path, monkeypatch):
    s = Stored(tmp_path, RC_TEETH)
    runner = Runner(s, [{"t::ok": {"outcome": "passed"}}] * 2, teeth={"t::ok": {"outcome": "failed", "message": TEETH_MESSAGE}})
    monkeypatch.setattr(gather, "run_cell", runner)
    logged: list[str] = []
    echoed: list[str] = []
    appcal.calibrate(s.matrix, [], appcal.CalibrateArgs(), Voice.plain(log=logged.append, echo=echoed.append))
    python = check(cells_of(s.matrix)[0], s.matrix.workspace).interpreter  # type: ignore[union-attr]
    assert logged == [f"calibrate: {CELL} (normal, teeth), run 1 of 2", f"ran {CELL} 1",
                      f"calibrate: {CELL} (normal, teeth), run 2 of 2", f"ran {CELL} 2"]
    assert echoed == [f"{CELL}-normal: {python} -m pytest", f"{CELL}-teeth: {python} -m pytest"] * 2
    # the whole suite (no posargs), and no census carried over from an earlier round into the next
    assert runner.asked == [([], {}), ([], {})] and [c[2] for c in runner.calls] == [None, None]
    assert sorted(p.name for p in s.matrix.workspace.results_dir.glob("*.json")) == [f"{CELL}-normal.json",
                                                                                     f"{CELL}-teeth.json"]


def test_what_calibrate_says_while_it_runs_reaches_its_output(tmp_path, monkeypatch):
    text = BASE.replace('pythonpath = [".."]', 'pythonpath = [".."]\nexpect_file = "e/s.toml"')
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "s.toml").write_text("")
    s = Stored(tmp_path, text)
    (tmp_path / "e" / "s.toml").unlink()  # not written yet: the runs are judged by the matrix's tables
    monkeypatch.setattr(gather, "run_cell", Runner(s, [{"t::ok": {"outcome": "passed"}}] * 2, stopped=(1,)))
    out = appcal.calibrate(s.matrix, [], appcal.CalibrateArgs(), Voice.plain())
    assert out.lines[:2] == [
        f"{CELL}: {tmp_path / 'e' / 's.toml'} does not exist yet: the run is judged by [suite.s.expect] alone",
        f"not calibrated: {CELL}-normal: the run was interrupted (SIGINT)"]
    assert out.written == {"s": tmp_path / "e" / "s.toml"}


CANNOT_RUN = BASE.replace("[torch.none]", '[ort.w]\nwheel = "nowhere.whl"\n\n[torch.none]').replace(
    'pythons = ["', 'pythons = ["3.99", "').replace(
    "include = [{", 'include = [{ python = "3.99", ort = "w", torch = "none", libs = "x" }, {')


def test_a_cell_named_that_cannot_run_here_stops_calibrate_naming_every_problem(tmp_path, monkeypatch):
    s = Stored(tmp_path, CANNOT_RUN)
    runner = Runner(s, [{"t::ok": {"outcome": "passed"}}] * 2)
    monkeypatch.setattr(gather, "run_cell", runner)
    with pytest.raises(cal.CalibrateError) as err:
        appcal.calibrate(s.matrix, ["gpu-3.99-x"], appcal.CalibrateArgs(), Voice.plain())
    assert re.fullmatch(r"gpu-3\.99-x cannot run on this host: pairing\.include\[0\]\.python: no python 3\.99 for "
                        r"gpu-3\.99-x: [^;]*; ort\.w\.wheel: \S+/nowhere\.whl does not exist", str(err.value))
    assert runner.calls == []  # nothing ran
    out = appcal.calibrate(s.matrix, [], appcal.CalibrateArgs(), Voice.plain())  # no selector: skipped, said, the rest calibrated
    assert out.lines[0].startswith("skipped: gpu-3.99-x cannot run on this host: pairing.include[0].python: ")
    assert [c[0] for c in runner.calls] == [CELL, CELL] and out.written == {"s": tmp_path / "expect" / "s.toml"}


# --- which cells make a suite whole, and the rules each calibration keeps or drops

TWO_SUITES = BASE.replace("include = [{", f'include = [{{ python = "{PY}", ort = "cpu", torch = "none", libs = "y", '
                          'suite = "t" }, {').replace(
    "[suite.s]", f'[libs.y]\nnone = true\n\n[suite.t]\nroot = "{ROOT}"\nfiles = ["test_allpass.py"]\npythonpath = [".."]\n\n'
    '[suite.s]').replace(
    '[suite.s]\nroot', '[suite.s]\nexpect_file = "e/s.toml"\nroot')
OLD = '[expect.normal]\nknown_failures = [{ test = "^t::gone$", reason = "old" }]\n'


def _own(tmp: Path, text: str, old: str = OLD) -> Stored:
    (tmp / "e").mkdir()
    (tmp / "e" / "s.toml").write_text(old)
    return Stored(tmp, text)


def test_a_suite_without_results_is_not_written_and_the_others_are_judged_by_their_own_cells(tmp_path):
    s = _own(tmp_path, TWO_SUITES)
    assert [(c.name, c.suite.id) for c in cells_of(s.matrix)] == [("gpu-3.11-y", "t"), (CELL, "s")]
    s.store("normal", {"t::ok": {"outcome": "passed"}})
    out = s.calibrate()
    assert out.written == {"s": tmp_path / "e" / "s.toml"}
    # suite s is complete (its one cell calibrated): gpu-3.11-y runs normal too, but for suite t
    assert out.lines == [f"no result: gpu-3.11-y has no usable result in {s.results}",
                         "not written: [suite.t]: none of its cells left a result to calibrate from",
                         f"dropped stale rule: normal known_failures '^t::gone$' (old): it matched nothing in {CELL}",
                         f"wrote {tmp_path / 'e' / 's.toml'}: normal: min_passed 1"]
    assert not (tmp_path / "expect").exists()


def test_calibrating_some_cells_of_a_suite_keeps_the_rules_only_the_others_can_judge(tmp_path):
    text = TWO_CELLS.replace('modes = ["normal", "teeth"]', 'modes = ["normal"]').replace(
        '[suite.s]\nroot', '[suite.s]\nexpect_file = "e/s.toml"\nroot')
    seen_here = f'observed = [{{ cell = "{CELL}", ort = "1.32.0", date = "2026-11-01" }}]'
    s = _own(tmp_path, text, OLD + f'tiers = [{{ test = "^t::was$", only = ["{CUDNN}"], reason = "cudnn", {seen_here} }}]\n')
    s.store("normal", {"t::ok": {"outcome": "passed"}})
    out = appcal.calibrate(s.matrix, [CELL], appcal.CalibrateArgs(from_dirs=[s.results]), Voice.plain())
    assert out.lines == [
        f"dropped stale rule: normal tiers '^t::was$' (cudnn): it matched nothing in {CELL}",  # seen only here: judged
        f"kept stale rule: normal known_failures '^t::gone$' (old): it matched nothing in {CELL} (some cells of the "
        "suite were not calibrated)",  # seen nowhere in particular: gpu-3.99-x may still need it
        f"wrote {tmp_path / 'e' / 's.toml'}: normal: min_passed 1, 1 known_failures"]
    written = (tmp_path / "e" / "s.toml").read_text()
    assert "t::gone" in written and "t::was" not in written


def test_a_function_whose_passed_case_dispatched_nothing_gets_no_tier_rule_and_calibrate_says_why(tmp_path):
    s = Stored(tmp_path, BASE)
    s.store("normal", {"t::fn[a]": {"outcome": "passed", "sdpa": [CUDNN]}, "t::fn[b]": {"outcome": "passed"}})
    out = s.calibrate()
    assert out.lines[0] == ("not written: tier rule for t::fn: 1 of its passed case(s) dispatched nothing (e.g. "
                            "t::fn[b]), so any rule would fail them")
    assert "tiers" not in (tmp_path / "expect" / "s.toml").read_text()


def test_a_known_flaky_rule_is_judged_by_the_runs_of_its_own_mode(tmp_path):
    text = RC_TEETH.replace('[suite.s]\nroot', '[suite.s]\nexpect_file = "e/s.toml"\nroot')
    s = _own(tmp_path, text, '[expect.normal]\nknown_flaky = [{ test = "^t::fl$", outcomes = ["failed", "passed"], '
                             'reason = "sometimes" }]\n')
    s.store("normal", {"t::ok": {"outcome": "passed"}, "t::fl": {"outcome": "passed"}})
    s.store("teeth", {"t::ok": {"outcome": "failed", "message": TEETH_MESSAGE}})  # teeth does not run t::fl
    out = s.calibrate()
    assert not [line for line in out.lines if "stale" in line]
    normal = (tmp_path / "e" / "s.toml").read_text().split("[expect.teeth]")[0]
    assert 'test = "^t::fl$"' in normal and f'cell = "{CELL}"' in normal.split("known_flaky")[1]


def test_teeth_with_nothing_to_cover_is_still_failing_after_calibration(tmp_path):
    s = Stored(tmp_path, BASE.replace('modes = ["normal"]', 'modes = ["normal", "require_cudnn", "teeth"]'))
    s.store("require_cudnn", {"t::ok": {"outcome": "passed", "sdpa": ["MATH"]}}, dispatch=Dispatch({"t::ok": ["MATH"]}))
    s.store("teeth", {"t::ok": {"outcome": "failed", "message": TEETH_MESSAGE}})
    out = s.calibrate()
    assert (f"still failing after calibration: {CELL}-teeth: require_cudnn dispatched no CUDNN_FLASH_ATTENTION test: teeth "
            "has nothing to cover") in out.lines  # no expectation accepts it: the teeth run proves nothing


def test_the_file_is_made_beside_its_target_whatever_the_system_temp_dir(tmp_path, monkeypatch):
    s = Stored(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))  # $TMPDIR elsewhere, or gone: never used
    target = tmp_path / "e" / "s.toml"
    cal.write_file(s.matrix.workspace, s.matrix.suites["s"], target, "[expect.normal]\nmin_passed = 3\n")
    assert target.read_text() == "[expect.normal]\nmin_passed = 3\n" and [p.name for p in target.parent.iterdir()] == ["s.toml"]


def test_a_result_of_a_mode_this_version_does_not_know_is_left_unread(tmp_path):
    s = Stored(tmp_path)
    s.store("normal", NORMAL)
    s.store("future", NORMAL)  # a newer tool's mode, in a shared results dir
    said: list[str] = []
    got = gather.read(cells_of(s.matrix), [s.results], Voice.plain(say=said.append))
    assert [x.mode for x in got] == ["normal"] and said == []


def test_the_expect_file_is_utf8_as_toml_requires_under_a_locale_that_is_not(tmp_path):
    s = Stored(tmp_path, BASE)
    s.store("normal", {"t::ok": {"outcome": "passed"}, "t::test_é": {"outcome": "failed", "message": "AssertionError: 1 ≠ 2"}})
    old = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # a legacy locale: Python's default text encoding is ASCII then
    try:
        if sys.flags.utf8_mode or locale.getpreferredencoding(False).lower().replace("-", "") == "utf8":
            pytest.skip("this interpreter writes UTF-8 under every locale (UTF-8 mode): nothing to tell apart")
        s.calibrate()
    finally:
        locale.setlocale(locale.LC_CTYPE, old)
    text = (tmp_path / "expect" / "s.toml").read_bytes().decode("utf-8")
    assert '{ test = "^t::test_é$", reason = "AssertionError: 1 ≠ 2"' in text

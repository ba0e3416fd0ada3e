"""teeth_scope = "cudnn": teeth runs only the tests require_cudnn saw dispatch cuDNN, plus those known_toothless
names, from this nox process's or this sweep's census, and from this venv; without one it refuses to run.

The fixture suite (tests/fixtures/suites/scope) has 9 tests in three places: two that bite, one that
dispatches cuDNN and checks values only, four that dispatch nothing (one of them named by
known_toothless), a file of plain tests only, and a cuDNN test in a dir the suite lists as a dir.
"""
import json
import os
import subprocess
import sys

from helpers import CELL, REPO, SUITES

SCOPE = SUITES / "scope"
FILES = ["test_scope.py", "test_other.py", "sub"]
PYTHONPATH = (".", "../canary", "..")
EXPECT = """
[suite.s.expect.teeth]
known_toothless = [{ test = "values_only", reason = "checks values only" },
                   { test = "named_but_plain", reason = "named on purpose: kept though it dispatched nothing" }]
"""
KEPT = ["sub/test_sub.py::test_sub_bites", "test_scope.py::test_bites[a]", "test_scope.py::test_bites[b]",
        "test_scope.py::test_named_but_plain", "test_scope.py::test_values_only"]
MODES = ("normal", "require_cudnn", "teeth")
NO_CENSUS = (f'teeth_scope = "cudnn" needs the census of {CELL}-require_cudnn from this nox process or sweep, in this '
             f"venv, and there is none: run it first (nox -s {CELL}, or nox -s {CELL}-require_cudnn {CELL}-teeth), or "
             'set teeth_scope = "all"')


def write(harness, scope="cudnn", suite_extra="", expect=EXPECT):
    return harness.write(FILES, root=SCOPE, modes=MODES, expect=expect, pythonpath=PYTHONPATH,
                         suite_extra=f'teeth_scope = "{scope}"\n{suite_extra}')


def test_a_scoped_teeth_runs_only_the_cudnn_tests_and_those_known_toothless_names(harness):
    write(harness)
    run = harness.nox("-s", CELL)
    assert run.proc.returncode == 0, run.output[-3000:]
    teeth, rc = run.result("teeth"), run.result("require_cudnn")
    assert sorted(teeth["outcomes"]) == KEPT and teeth["counts"]["collected"] == 5
    assert rc["counts"]["collected"] == 9
    cov = teeth["teeth_coverage"]
    assert (cov["scope"], cov["selected"], cov["checked"], cov["bitten"]) == ("cudnn", 5, True, 3)
    assert cov["declared_toothless"] == ["test_scope.py::test_values_only"]
    assert str(SCOPE / "test_other.py") not in teeth["command"]  # a file with nothing kept is not even imported
    assert str(SCOPE / "sub") in teeth["command"] and str(SCOPE / "test_scope.py") in teeth["command"]
    assert f"{CELL}-teeth: teeth_scope cudnn: 5 test(s) of 9 from {CELL}-require_cudnn run {rc['run_id']}" in run.output

    write(harness, scope="all")  # every test, and the result says so
    unscoped = harness.nox("-s", CELL).result("teeth")
    assert unscoped["counts"]["collected"] == 9 and unscoped["teeth_coverage"]["scope"] == "all"
    assert "selected" not in unscoped["teeth_coverage"]


def test_a_scoped_teeth_without_this_process_census_refuses_to_run(harness):
    """The results dir holds a require_cudnn result of the same venv, from an earlier nox: it is not this one's."""
    write(harness)
    assert harness.nox("-s", CELL).proc.returncode == 0
    run = harness.nox("-s", f"{CELL}-teeth")
    assert run.proc.returncode != 0
    r = run.result("teeth")
    assert r["verdict"] == "fail" and r["reasons"] == [NO_CENSUS]
    assert r["command"] == [] and r["counts"]["collected"] == 0  # pytest never started: nothing ran silently
    assert r["teeth_coverage"] == {"checked": False, "scope": "cudnn"}
    assert open(r["log"]).read() == f"ort-gpu-matrix: not run: {NO_CENSUS}\n"
    assert f"nox >   reason: {NO_CENSUS}\n" in run.output


def test_a_scoped_teeth_with_nothing_to_cover_fails_and_says_so(harness):
    write(harness, suite_extra='provider_options = { sdpa_kernel = "16" }', expect="")  # MATH everywhere
    run = harness.nox("-s", CELL)
    r = run.result("teeth")
    assert r["verdict"] == "fail" and r["command"] == []
    assert r["reasons"] == [f'teeth_scope = "cudnn": {CELL}-require_cudnn dispatched no CUDNN_FLASH_ATTENTION test and '
                            "known_toothless names none of its tests: teeth has nothing to run"]


def _sweep(harness, *args, env=None):
    full = {**os.environ, "MATRIX_TOML": str(harness.matrix), "MATRIX_RESULTS": str(harness.results),
            "MATRIX_VENVS": str(harness.venvs), "MATRIX_BASELINES": str(harness.tmp / "baselines"), **(env or {})}
    full.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", "--", *args],
                          env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)


def test_a_gpus_sweep_gives_teeth_the_census_of_its_own_require_cudnn_and_never_an_older_one(harness):
    """teeth runs in a child of its own, under xdist here: its parent names the require_cudnn run of this sweep.
    A sweep of teeth alone finds the results dir's require_cudnn result and does not take it."""
    write(harness, suite_extra='pytest_args = ["-n", "2"]')
    proc = _sweep(harness, "--gpus", "0,1")
    assert proc.returncode == 0, proc.stdout[-3000:]
    teeth = json.loads((harness.results / f"{CELL}-teeth.json").read_text())
    assert sorted(teeth["outcomes"]) == KEPT and teeth["teeth_coverage"]["selected"] == 5
    assert teeth["teeth_coverage"]["checked"] and teeth["verdict"] == "pass", teeth["reasons"]
    assert set(teeth["counts"].items()) >= {("collected", 5), ("failed", 3), ("passed", 2)}

    alone = _sweep(harness, "--gpus", "0", "--select", f"{CELL}-teeth")
    assert alone.returncode != 0
    teeth = json.loads((harness.results / f"{CELL}-teeth.json").read_text())
    assert teeth["reasons"] == [NO_CENSUS] and teeth["command"] == []


def _child(harness, *census):
    env = {**os.environ, "MATRIX_TOML": str(harness.matrix), "MATRIX_RESULTS": str(harness.results),
           "MATRIX_VENVS": str(harness.venvs)}
    args = [a for ref in census for a in ("--census", ref)]
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", "--", "--child",
                           "--select", f"{CELL}-teeth", *args], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    return proc, json.loads((harness.results / f"{CELL}-teeth.json").read_text())


def test_a_named_census_counts_only_from_the_same_venv_and_only_as_a_require_cudnn_run(harness):
    write(harness)
    assert harness.nox("-s", f"{CELL}-require_cudnn").proc.returncode == 0
    rc = json.loads((harness.results / f"{CELL}-require_cudnn.json").read_text())
    ref = f"{CELL}-require_cudnn={rc['run_id']}"
    proc, teeth = _child(harness, ref)  # the run as it was stored: taken
    assert teeth["verdict"] == "pass" and teeth["teeth_coverage"]["selected"] == 5, proc.stdout[-3000:]

    stored = harness.results / "runs" / f"{CELL}-require_cudnn" / rc["run_id"] / "result.json"
    forged = json.loads(stored.read_text())
    forged["venv"]["fingerprint"]["tools"] = ["pytest>=8"]  # made in a venv that is not teeth's
    stored.write_text(json.dumps(forged))
    proc, teeth = _child(harness, ref)
    assert teeth["reasons"] == [NO_CENSUS] and teeth["command"] == [], proc.stdout[-3000:]

    elsewhere = harness.results / "runs" / f"{CELL}-normal" / rc["run_id"]  # the same file, under another name
    elsewhere.mkdir(parents=True)
    (elsewhere / "result.json").write_text(stored.read_text())
    for bad, why in [(f"../../{CELL}-require_cudnn={rc['run_id']}", "expected SESSION=RUN_ID"),
                     (f"{CELL}-require_cudnn=../{rc['run_id']}", "expected SESSION=RUN_ID"),
                     (f"{CELL}-require_cudnn=20261130T061203Z-00000000", "cannot be read"),
                     (f"{CELL}-normal={rc['run_id']}", f"holds {CELL}-require_cudnn run {rc['run_id']} (require_cudnn), "
                                                        f"not {CELL}-normal={rc['run_id']}")]:
        proc, teeth = _child(harness, bad)
        assert why in proc.stdout and teeth["reasons"] == [NO_CENSUS], proc.stdout[-3000:]


def test_a_scoped_teeth_is_never_compared_with_an_unscoped_one_as_fewer_tests(harness):
    write(harness, scope="all")
    assert _sweep(harness, "--save-baseline", "unscoped").returncode == 0
    write(harness)
    proc = _sweep(harness, "--baseline", "unscoped", "--save-baseline", "scoped")
    data = json.loads((harness.results / "sweep.json").read_text())
    assert proc.returncode == 0 and data["regressions"] == [], proc.stdout[-3000:]
    saved = json.loads((harness.tmp / "baselines" / "scoped.json").read_text())
    assert saved["cells"][CELL]["teeth"]["teeth_scope"] == "cudnn"
    assert "teeth_scope" not in saved["cells"][CELL]["normal"]

    write(harness, suite_extra='pytest_args = ["-k", "not test_bites"]')  # scoped on both sides: still compared
    proc = _sweep(harness, "--baseline", "scoped")
    data = json.loads((harness.results / "sweep.json").read_text())
    assert {"kind": "count", "cell": CELL, "mode": "teeth", "test": "collected", "before": 5, "after": 3} \
        in data["regressions"], proc.stdout[-3000:]


def test_an_unknown_teeth_scope_is_named_with_the_fix(harness):
    harness.write(FILES, root=SCOPE, suite_extra='teeth_scope = "cudnnn"')
    run = harness.nox("-l")
    assert run.proc.returncode == 2
    assert (f"{harness.matrix}: suite.s.teeth_scope: 'cudnnn' is not a teeth scope (did you mean `cudnn`?)\n"
            "    fix: use one of: known, all, cudnn\n") in run.output


def test_a_teeth_scope_is_resolved_once_and_retires_the_last_result_only_once_its_census_came(harness, tmp_path,
                                                                                              monkeypatch):
    """teeth.py, in process: a census in this process resolves the scope as it is made, and the session's current
    result is retired then. One its parent hands over in a file leaves that result current until the file is
    written; the scope then resolves on it, once: the prior run, the node ids, the -n, each computed once."""
    import time

    from helpers import result

    from ort_gpu_matrix.config.loader import load_matrix
    from ort_gpu_matrix.config.overrides import Overrides
    from ort_gpu_matrix.drive import teeth
    from ort_gpu_matrix.drive.context import CellRuns
    from ort_gpu_matrix.drive.handoff import Handoff
    from ort_gpu_matrix.envs.venvs import Venv
    from ort_gpu_matrix.execute.request import Kept, ModeRun
    from ort_gpu_matrix.judge.counts import Dispatch
    from ort_gpu_matrix.plan.cells import cells_of
    from ort_gpu_matrix.store import results
    from ort_gpu_matrix.store.results import VenvInfo
    from ort_gpu_matrix.util.voice import Voice

    write(harness)
    matrix = load_matrix(harness.matrix, Overrides(None, harness.results, harness.venvs, (), False, False))
    (cell,) = cells_of(matrix)
    fp = {"tools": ["pytest"]}
    run = ModeRun(cell, "teeth", None, Venv(tmp_path, tmp_path, tmp_path, fp), matrix.workspace)
    bites, values, plain = "test_scope.py::test_bites[a]", "test_scope.py::test_values_only", "test_scope.py::test_plain"
    census = result("require_cudnn", {bites: "passed", values: "passed", plain: "passed"}, name=cell.name,
                    venv=VenvInfo("/v", fp), run_id=results.new_run_id(time.time()),
                    dispatch=Dispatch(tests={bites: ["CUDNN_FLASH_ATTENTION"], values: ["MATH"], plain: ["MATH"]}))
    current = results.current_path(harness.results, run.session)
    calls = {"teeth_selection": 0, "few_workers": 0, "retire_current": 0}

    def counted(module, name):
        real = getattr(module, name)

        def wrapper(*args):
            calls[name] += 1
            return real(*args)
        monkeypatch.setattr(module, name, wrapper)

    for module, name in ((teeth, "teeth_selection"), (teeth, "few_workers"), (results, "retire_current")):
        counted(module, name)
    monkeypatch.setenv("MATRIX_CORES", "8")

    def scope_of(**kw):
        current.parent.mkdir(parents=True, exist_ok=True)
        current.write_text("{}")  # the session's last result
        calls.update(dict.fromkeys(calls, 0))
        voice = Voice.plain(log=said.append)
        return teeth.TeethScope.open(CellRuns(cell, None, matrix.workspace, ("-n", "4"), voice=voice, **kw), run)

    said = []
    here = scope_of(earlier={census.session: census})
    assert here.file is None and here.came and not current.exists()  # resolved, and retired, as it was made
    assert (here.prior, here.keep, here.refusal, here.workers) == (census, [bites, values], None, ["-n", "2"])
    here.announce()
    assert calls == {"teeth_selection": 1, "few_workers": 1, "retire_current": 1}, calls

    stored = results.store(harness.results, census, {}, current=False)
    handoff = Handoff(Voice.plain())
    try:
        later = scope_of(earlier={}, census_files={census.session: handoff.path(run.session)})
        assert later.file is not None and not later.came and current.exists()  # it waits: its last result stays
        assert calls == {"teeth_selection": 0, "few_workers": 0, "retire_current": 0}, calls
        handoff.give(run.session, stored)
        assert later.kept() == Kept([bites, values], ["-n", "2"]) and not current.exists()
        assert (later.prior, later.dispatch) == (stored, stored.dispatch)
        assert calls == {"teeth_selection": 1, "few_workers": 1, "retire_current": 1}, calls
    finally:
        handoff.close()
    kept = f"{run.session}: teeth_scope cudnn: 2 test(s) of 3 from {census.session} run {census.run_id}"
    assert said == [kept, f"{run.session}: 2 test(s) to run: -n 2 instead of -n 4", kept], said

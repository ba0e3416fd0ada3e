"""require_cudnn runs only the tests it can change and carries the rest from normal, through the real nox.

The fixture suite (tests/fixtures/suites/carry) reads ORT_TEST_REQUIRE_CUDNN_SDPA in every way the census must
see (by name, in a child process, through a copy of the environment, at import) and fails where it is set: each
must run, and fail, in require_cudnn. The plain tests are carried from normal; the one that skips runs again.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import CELL, REPO, SUITES
from test_one_gpu import fake_gpu

CARRY = SUITES / "carry"
FILES = ["test_readers.py", "test_at_import.py"]
READERS = {f"test_readers.py::{n}" for n in ("test_by_get", "test_by_item", "test_by_getenv", "test_in_a_subprocess",
                                             "test_through_a_copy")} | {"test_at_import.py::test_import_reader"}
CARRIED = {*(f"test_readers.py::test_plain[{n}]" for n in (1, 2, 3)), "test_readers.py::test_other_variable",
           "test_readers.py::test_reads_where_marked", "test_readers.py::test_fails_once"}
RAN = READERS | {"test_at_import.py::test_same_module", "test_readers.py::test_skips"}
EXPECT = """
[suite.s.expect.normal]
min_passed = 11
allowed_skips = ["no such device here"]

[suite.s.expect.require_cudnn]
allowed_skips = ["no such device here"]
"""


def write(harness, suite_extra="", root=CARRY):
    return harness.write(FILES, root=root, modes=("normal", "require_cudnn"), expect=EXPECT, pythonpath=(".",),
                         suite_extra=suite_extra)


def failed(result):
    return {n for n, o in result["outcomes"].items() if o == "failed"}


def test_require_cudnn_runs_what_can_change_and_carries_the_rest_from_this_normal_run(harness):
    write(harness)
    run = harness.nox("-s", CELL)
    normal, req = run.result("normal"), run.result("require_cudnn")
    assert normal["verdict"] == "pass", normal["reasons"]
    sel = req["selection"]
    assert not sel["full"] and set(sel["carried"]) == CARRIED, sel
    assert sel["carried_from"] == sel["chosen_by"] == f"{CELL}-normal {normal['run_id']}"
    # every reader ran, and failed on the canary; the skipping test ran again; nothing else ran
    assert failed(req) == READERS, req["outcomes"]
    assert req["verdict"] == "fail" and f"{len(READERS)} unexpected failure(s)" in " ".join(req["reasons"])
    ran = set(req["outcomes"]) - set(sel["carried"])
    assert ran == RAN
    # the carried outcomes are normal's, counted with the run's own
    assert all(req["outcomes"][n] == normal["outcomes"][n] == "passed" for n in CARRIED)
    assert req["counts"]["collected"] == normal["counts"]["collected"] == len(RAN | CARRIED)
    assert sel["tests_digest"] == normal["selection"]["tests_digest"] and len(sel["tests_digest"]) == 64
    assert f"{len(RAN)} test(s) ran that may change under ORT_TEST_REQUIRE_CUDNN_SDPA" in run.output
    junit = (harness.results / "runs" / f"{CELL}-require_cudnn" / req["run_id"] / "junit.xml").read_text()
    assert "test_plain" not in junit and "test_by_get" in junit  # pytest itself ran only what was left


@pytest.mark.parametrize("how", ["flag", "suite"])
def test_full_runs_every_test_and_says_why(harness, how):
    write(harness, suite_extra="full = true\n" if how == "suite" else "")
    run = harness.nox("-s", CELL, *(["--", "--full"] if how == "flag" else []))
    req = run.result("require_cudnn")
    assert req["selection"]["full"] and "carried" not in req["selection"]
    assert req["selection"]["why"] == ("every test ran: --full" if how == "flag"
                                        else "every test ran: suite s sets full = true")
    assert failed(req) == READERS and len(req["outcomes"]) == len(RAN | CARRIED)


def test_require_cudnn_alone_has_no_normal_to_carry_from_and_runs_everything(harness):
    write(harness)
    assert harness.nox("-s", CELL).proc.returncode != 0  # a normal of this venv now lies in the results dir
    req = harness.nox("-s", f"{CELL}-require_cudnn").result("require_cudnn")
    assert req["selection"]["full"] and "no normal run of this cell in this nox process" in req["selection"]["why"]
    assert len(req["outcomes"]) == len(RAN | CARRIED)


def test_overlapped_modes_choose_by_the_stored_census_and_check_it_against_this_normal(harness, tmp_path):
    """On one GPU the modes run at once as children: require_cudnn cannot wait for this normal to choose, so it
    chooses by the last stored normal of the same venv and test files, and carries from this one once its parent
    hands it over, checked against this one's own census. A test that reads the canary now, and did not then, is
    named and fails the mode; a changed test file means no census and the whole mode."""
    env = {**fake_gpu(tmp_path), "CARRY_MARKER_FILE": str(tmp_path / "marker")}
    write(harness)
    first = harness.nox("-s", CELL, env=env)
    assert "overlapping" in first.output, first.output[-2000:]
    sel, first_normal = first.result("require_cudnn")["selection"], first.result("normal")["run_id"]
    assert sel["full"] and "no census to choose by (no normal run stored)" in sel["why"]

    second = harness.nox("-s", CELL, env=env)
    normal, req = second.result("normal"), second.result("require_cudnn")
    assert req["selection"].get("chosen_by") == f"{CELL}-normal {first_normal}", (req["selection"], second.output[-4000:])
    assert req["selection"]["carried_from"] == f"{CELL}-normal {normal['run_id']}"
    assert set(req["selection"]["carried"]) == CARRIED and failed(req) == READERS
    child_log = (harness.results / "sweep-logs" / f"{CELL}-require_cudnn.log").read_text()
    assert f"{CELL}-require_cudnn: waiting for {CELL}-normal to carry outcomes from" in child_log

    (tmp_path / "marker").write_text("")  # from now on test_reads_where_marked reads the canary
    third = harness.nox("-s", CELL, env=env).result("require_cudnn")
    marked = "test_readers.py::test_reads_where_marked"
    assert marked not in third["selection"]["carried"] and marked not in third["outcomes"]
    reason = next(r for r in third["reasons"] if "cannot be carried" in r)
    assert f"{marked}: it read ORT_TEST_REQUIRE_CUDNN_SDPA" in reason and "the next run chooses" in reason

    fourth = harness.nox("-s", CELL, env=env).result("require_cudnn")  # chosen by the third's normal: it runs
    assert marked not in fourth["selection"].get("carried", [marked]) and fourth["outcomes"][marked] == "failed", fourth["selection"]

    copy = tmp_path / "suite"
    copy.mkdir()
    for name in FILES:
        (copy / name).write_text((CARRY / name).read_text())
    write(harness, root=copy)  # the same tests, elsewhere: the venv is the same, the files are not the census's
    (copy / "test_at_import.py").write_text((CARRY / "test_at_import.py").read_text() + "\n# edited\n")
    fifth = harness.nox("-s", CELL, env=env).result("require_cudnn")
    assert fifth["selection"]["full"] and "ran other test files" in fifth["selection"]["why"]


def test_a_stored_result_of_an_older_schema_reads_as_one_that_ran_everything(harness):
    write(harness)
    harness.nox("-s", CELL)
    path = harness.results / f"{CELL}-require_cudnn.json"
    data = json.loads(path.read_text())
    for key in ("selection", "reads"):
        data.pop(key, None)
    data["schema_version"] = 6
    path.write_text(json.dumps(data))
    from ort_gpu_matrix.store.results import load
    old = load(path)
    assert old.selection is None and not old.reads.taken


TIER = CARRY / "tier"
BITES = {"test_tier.py::test_bites[a]", "test_tier.py::test_bites[b]"}
PLAIN = {f"test_tier.py::test_plain[{n}]" for n in (1, 2, 3)} | {f"test_tier.py::test_dispatches_where_marked[{w}]"
                                                                  for w in "ab"}


def write_tier(harness):
    return harness.write(["test_tier.py"], root=TIER, modes=("normal", "require_cudnn", "teeth"),
                         pythonpath=(".", "../../canary", "../.."))


def test_a_known_teeth_runs_the_tier_tests_of_the_runs_on_record_and_leaves_out_the_rest(harness):
    write_tier(harness)
    run = harness.nox("-s", CELL)
    assert run.proc.returncode == 0, run.output[-3000:]
    teeth = run.result("teeth")
    assert set(teeth["outcomes"]) == BITES and set(teeth["selection"]["left_out"]) == PLAIN
    cov = teeth["teeth_coverage"]
    assert (cov["scope"], cov["checked"], cov["tier_tests"], cov["bitten"]) == ("known", True, 2, 2)
    assert f"{CELL}-normal {run.result('normal')['run_id']}" in teeth["selection"]["chosen_by"]

    full = harness.nox("-s", CELL, "--", "--full").result("teeth")
    assert set(full["outcomes"]) == BITES | PLAIN
    assert (full["selection"]["full"], full["selection"]["why"]) == (True, "every test ran: --full")


def test_overlapped_a_known_teeth_starts_beside_the_pair_cuts_by_the_record_and_is_judged_by_this_require_cudnn(
        harness, tmp_path):
    """On one GPU the modes run at once as children. On a first run teeth starts after require_cudnn (no run of it
    on record) and cuts by that run's census. From then on it starts beside the pair: it cuts by the runs on record
    and its tests run at once, while normal still runs (require_cudnn ends only when normal does); it is judged by
    this run's require_cudnn once stored. A test that dispatches cuDNN for the first time in this very run was
    left out: teeth names it and fails, and the next run keeps it, and it bites. --full starts no teeth early."""
    # memory for three runs even where none has a peak on record (each then counts as a quarter of the GPU)
    env = {**fake_gpu(tmp_path, free="139000"), "TIER_MARKER_FILE": str(tmp_path / "marker"), "MATRIX_CORES": "6"}
    write_tier(harness)
    first = harness.nox("-s", CELL, env=env)
    assert first.proc.returncode == 0 and "overlapping" in first.output, first.output[-3000:]
    assert "may start while" not in first.output  # no last teeth run: it starts after require_cudnn
    teeth = first.result("teeth")
    assert set(teeth["outcomes"]) == BITES and set(teeth["selection"]["left_out"]) == PLAIN
    assert teeth["teeth_coverage"]["checked"] and teeth["teeth_coverage"]["bitten"] == 2

    second = harness.nox("-s", CELL, env={**env, "TIER_SLOW_S": "4"})  # normal outlasts teeth
    assert second.proc.returncode == 0, second.output[-3000:]
    assert f"{CELL}-teeth: may start while {CELL}-require_cudnn runs" in second.output, second.output[-3000:]
    teeth, req = second.result("teeth"), second.result("require_cudnn")
    assert set(teeth["outcomes"]) == BITES and set(teeth["selection"]["left_out"]) == PLAIN
    assert teeth["teeth_coverage"]["checked"] and teeth["teeth_coverage"]["bitten"] == 2
    child = (harness.results / "sweep-logs" / f"{CELL}-teeth.log").read_text()
    assert f"{CELL}-teeth: started beside {CELL}-require_cudnn: " in child, child[-3000:]
    assert f"its tests ran; waiting for the census of {CELL}-require_cudnn" in child, child[-3000:]
    timings = json.loads((harness.results / teeth["bundle"] / "report.json").read_text())["timings"]
    stored = (harness.results / req["bundle"] / "result.json").stat().st_mtime
    firsts = [m["first_test_start"] for m in timings.values() if m.get("first_test_start")]
    assert firsts and min(firsts) < stored  # its tests ran while require_cudnn (and normal) still ran

    for which, tier, said in (("a", "CUDNN_FLASH_ATTENTION", "teeth did not run them"),  # its own tier: not bitten
                              ("b", "FLASH_ATTENTION", "deciding before that run was stored")):  # may fail under MATH
        marked = f"test_tier.py::test_dispatches_where_marked[{which}]"
        (tmp_path / f"marker.{which}").write_text(tier)  # it dispatches that tier now: no run on record saw it
        third = harness.nox("-s", CELL, env=env)
        teeth = third.result("teeth")
        assert third.proc.returncode != 0 and teeth["verdict"] == "fail", third.output[-3000:]
        assert marked not in teeth["outcomes"] and marked in teeth["selection"]["left_out"]
        assert [r for r in teeth["reasons"] if marked in r] == [r for r in teeth["reasons"] if said in r] != [], \
            teeth["reasons"]
    (tmp_path / "marker.b").unlink()  # [a] dispatches cuDNN, and is on record now: teeth keeps it, and it bites
    marked = "test_tier.py::test_dispatches_where_marked[a]"
    fourth = harness.nox("-s", CELL, env=env)
    assert fourth.proc.returncode == 0, fourth.output[-3000:]
    teeth = fourth.result("teeth")
    assert teeth["outcomes"][marked] == "failed" and teeth["teeth_coverage"]["bitten"] == 3

    full = harness.nox("-s", CELL, "--", "--full", env=env)  # every test runs: teeth would compete, not wait
    assert full.proc.returncode == 0, full.output[-3000:]
    assert "may start while" not in full.output and "overlapping: 2 mode run(s)" in full.output, full.output[-3000:]
    assert full.result("teeth")["selection"] == {"full": True, "why": "every test ran: --full",
                                                 "tests_digest": teeth["selection"]["tests_digest"]}


def test_the_junit_file_says_what_a_mode_carried_and_from_which_run(harness):
    from helpers import junit_cases
    from junitparser import JUnitXml

    write(harness)
    out = harness.tmp / "junit.xml"
    harness.nox("-s", "sweep", "--", "--confirm", "0", "--junit-xml", str(out))
    normal = json.loads((harness.results / f"{CELL}-normal.json").read_text())
    cases = junit_cases(out)
    source = f"{CELL}-normal {normal['run_id']}"
    for test in CARRIED:
        assert cases[(f"{CELL}-require_cudnn", test)][2]["carried_from"] == [source], test
    for test in RAN:
        assert "carried_from" not in cases[(f"{CELL}-require_cudnn", test)][2], test
    suites = {s.name: {p.name: p.value for p in s.properties()} for s in JUnitXml.fromfile(str(out))}
    assert suites[f"{CELL}-require_cudnn"]["carried"] == f"{len(CARRIED)} from {source}"
    assert "carried" not in suites[f"{CELL}-normal"] and "selection" not in suites[f"{CELL}-normal"]


def test_a_carried_regression_is_confirmed_by_a_real_rerun_and_no_carried_test_goes_missing(harness, tmp_path):
    """test_fails_once fails once, in normal, then passes: require_cudnn carries that failure. Swept against a
    baseline where it passed, both modes' regressions are rerun: require_cudnn's rerun runs the test for real, and
    the judging again keeps every carried outcome (none reads as gone)."""
    write(harness)
    env = {"MATRIX_BASELINES": str(tmp_path / "baselines")}
    assert harness.nox("-s", "sweep", "--", "--save-baseline", "b", "--confirm", "0", env=env).proc.returncode != 0
    env["CARRY_FAIL_ONCE"] = str(tmp_path / "failed-once")
    run = harness.nox("-s", "sweep", "--", "--baseline", "b", "--gate", "regressions", "--confirm", "1", env=env)
    req = run.result("require_cudnn")
    test = "test_readers.py::test_fails_once"
    assert test in req["selection"]["carried"]
    tests = {t["test"]: t for t in req["confirmation"]["tests"]}
    assert test in tests and tests[test]["unconfirmed"], req["confirmation"]
    assert req["outcomes"][test] == "passed" and set(req["outcomes"]) >= CARRIED | RAN
    assert run.proc.returncode == 0, run.output[-3000:]


def _child_of(session):
    """The pid of the nox child that runs `session` (`--select <session>` on its command line), or None."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if any(a == "--select" and b == session for a, b in zip(argv, argv[1:], strict=False)):
            return int(pid)
    return None


def test_an_early_known_teeth_whose_require_cudnn_stored_nothing_fails_naming_what_it_left_out(harness, tmp_path):
    """Nothing checked the cut it ran on: never a pass (the require_cudnn child is SIGKILLed as its test runs)."""
    env = {**fake_gpu(tmp_path, free="139000"), "TIER_MARKER_FILE": str(tmp_path / "marker"), "MATRIX_CORES": "6"}
    harness.write(["test_tier.py", "test_stops_its_runner.py"], root=TIER, modes=("normal", "require_cudnn", "teeth"),
                  pythonpath=(".", "../../canary", "../.."))
    assert harness.nox("-s", CELL, env=env).proc.returncode == 0
    (tmp_path / "marker.kill").write_text("")
    second = harness.nox("-s", CELL, env={**env, "TIER_SLOW_S": "2"})
    assert f"{CELL}-teeth: may start while" in second.output, second.output[-3000:]
    teeth = second.result("teeth")
    assert teeth["verdict"] == "fail" and teeth["selection"]["left_out"], teeth
    reason = next(r for r in teeth["reasons"] if "census came to check" in r)
    assert all(n in reason for n in teeth["selection"]["left_out"]), reason


@pytest.mark.parametrize("mode, waiting, said", [
    ("teeth", "waiting for the census", "interrupted while it waited for its require_cudnn census"),
    ("require_cudnn", "to carry outcomes from", "the run was interrupted while it waited for it")])
def test_sigterm_while_a_run_waits_for_a_handed_over_run_stores_it_as_stopped(harness, tmp_path, mode, waiting, said):
    """Its tests ran; the wait after them (teeth for its census, require_cudnn for the normal it carries from) is a
    run's wait too: SIGTERM there stores the run, failed with a reason, as Ctrl-C does, instead of losing it."""
    env = {**fake_gpu(tmp_path, free="139000"), "TIER_MARKER_FILE": str(tmp_path / "marker"), "MATRIX_CORES": "6"}
    write_tier(harness)
    first = harness.nox("-s", CELL, env=env)
    assert first.proc.returncode == 0, first.output[-3000:]
    before = first.result(mode)["run_id"]
    log = harness.results / "sweep-logs" / f"{CELL}-{mode}.log"
    log.unlink()  # the first run's require_cudnn waited for its normal too: only this run's log says when to stop
    full = {**os.environ, "MATRIX_TOML": str(harness.matrix), "MATRIX_RESULTS": str(harness.results),
            "MATRIX_VENVS": str(harness.venvs), **env, "TIER_SLOW_S": "15"}
    proc = subprocess.Popen([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", CELL], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not (log.exists() and waiting in log.read_text()):
            time.sleep(0.2)
        child = _child_of(f"{CELL}-{mode}")
        assert child is not None, log.read_text()[-2000:] if log.exists() else f"no {mode} log"
        os.kill(child, signal.SIGTERM)
        out = proc.communicate(timeout=300)[0]
    finally:
        proc.kill()
    stored = json.loads((harness.results / f"{CELL}-{mode}.json").read_text())
    assert stored["run_id"] != before and stored["verdict"] == "fail", out[-3000:]
    assert any(said in r for r in stored["reasons"]), stored["reasons"]

"""Flakes told from regressions, on CPU, with real nox, pytest and venvs (the `flaky` fixture suite).

The suite's test_every_other fails on every even call; its call count lives in a file under the
test's own tmp_path, named to the suite through its `env` (FLAKY_STATE), so each test seeds the
phase it needs. A sweep reruns what regressed (`--confirm`, default 2) before it counts; calibrate
runs each mode twice (`--runs`, default 2) and writes known_flaky for what differed.

What a rerun and a known_flaky rule may conclude is also pinned where the flaky suite cannot reach: a rerun
that shows another change, a change unconfirmed against one baseline and new against another (the `tiers`
suite's scheduled test, through the harness), and in-process, a flaky rule beside a tier rule and calibrate
growing a flaky rule.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import PY, REPO, SUITES, matrix_head, once_per_run, suite_head

from ort_gpu_matrix.config.model import FlakyRule, PassExpect, TierRule
from ort_gpu_matrix.judge.counts import TestResult as T
from ort_gpu_matrix.judge.counts import count
from ort_gpu_matrix.judge.verdicts import judge_counts

CELL = f"f-{PY}-x"
SESSION = f"{CELL}-normal"
FLAKE = "test_flaky.py::test_every_other"
MATRIX = matrix_head(prefix="f", suite="fl", modes=["normal"]) + suite_head("fl", ["test_flaky.py"]) + """{suite_extra}
env = {{ FLAKY_STATE = "{state}"{env} }}
{expect}
"""
KNOWN = """[suite.fl.expect.normal]
known_failures = [{ test = "test_stable_long_failure|test_long_id", reason = "stable" }]
"""


class Box:
    def __init__(self, root: Path, venvs: Path):
        self.root, self.venvs = root, venvs
        self.matrix, self.results, self.baselines = root / "matrix.toml", root / "results", root / "baselines"
        self.state = root / "calls"

    def write(self, env: str = "", suite_extra: str = "", expect: str = KNOWN) -> None:
        self.matrix.write_text(MATRIX.format(py=PY, root=SUITES / "flaky", state=self.state, env=env,
                                             suite_extra=suite_extra, expect=expect))

    def calls(self, n: int) -> None:
        """The flake's call count so far: the next run is call n + 1 (it fails when that is even)."""
        self.state.write_text(str(n))

    def nox(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "MATRIX_TOML": str(self.matrix), "MATRIX_RESULTS": str(self.results),
               "MATRIX_VENVS": str(self.venvs), "MATRIX_BASELINES": str(self.baselines)}
        env.pop("GITHUB_STEP_SUMMARY", None)
        return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args], env=env,
                              cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)

    def sweep_json(self) -> dict:
        return json.loads((self.results / "sweep.json").read_text())

    def result(self) -> dict:
        return json.loads((self.results / f"{SESSION}.json").read_text())


@pytest.fixture(scope="module")
def base(tmp_path_factory, venvs) -> Path:
    """A sweep in which the flake passed (call 1), saved as baseline `base`: once per run, copied by each test."""
    def build(root: Path) -> None:
        box = Box(root, venvs)
        box.write()
        box.calls(0)
        run = box.nox("-s", "sweep", "--", "--save-baseline", "base")
        assert run.returncode == 0, run.stdout[-3000:]
        assert json.loads((box.baselines / "base.json").read_text())["cells"][CELL]["normal"]["tests"][FLAKE] == "passed"

    return once_per_run(tmp_path_factory, "flaky-base", build) / "baselines"


def _box(tmp_path: Path, venvs: Path, base: Path) -> Box:
    box = Box(tmp_path, venvs)
    shutil.copytree(base, box.baselines)
    return box


def test_a_flake_alone_is_unconfirmed_and_the_gate_stays_green(tmp_path, venvs, base):
    box = _box(tmp_path, venvs, base)
    box.write()
    box.calls(1)  # this sweep's first run is call 2: the flake fails; the rerun (call 3) passes
    run = box.nox("-s", "sweep", "--", "--baseline", "base", "--gate", "regressions")
    assert run.returncode == 0, run.stdout[-4000:]
    doc = box.sweep_json()
    assert doc["sweep_version"] == 3 and doc["confirm"] == 2
    assert doc["regressions"] == []
    assert doc["unconfirmed"] == [{"cell": CELL, "mode": "normal", "test": FLAKE, "checks": ["test", "unexpected"],
                                   "runs": ["failed", "passed"]}]
    # the mode's verdict and counts follow the reruns; the first run's own verdict stays in the result
    r = box.result()
    assert r["schema_version"] == 7 and r["verdict"] == "pass" and r["outcomes"][FLAKE] == "passed"
    rec = r["confirmation"]
    assert rec["first_verdict"] == "fail" and rec["first_counts"]["failed"] == 3 and r["counts"]["failed"] == 2
    assert any("unexpected failure" in x for x in rec["first_reasons"])
    (rerun,) = rec["reruns"]  # the flake cleared in rerun 1: nothing left to rerun a second time
    assert rerun["selected"] == 1 and rerun["problems"] == []
    bundle = Path(rerun["bundle"])  # a mode run like any other: probe report, audit, log, in a bundle of its own
    assert {p.name for p in bundle.iterdir()} == {"result.json", "report.json", "pytest.log", "junit.xml"}
    again = json.loads((bundle / "result.json").read_text())
    assert again["outcomes"] == {FLAKE: "passed"} and again["libraries"]["audits"]
    assert "ort_matrix_probe.plugin" in again["command"] and again["session"] == SESSION
    assert not again["workdir"] or not Path(again["workdir"]).exists()  # its private dir is gone
    assert json.loads((box.results / f"{SESSION}.json").read_text())["run_id"] == r["run_id"]  # never current
    assert "not reproduced (test, unexpected); runs: failed | passed" in run.stdout
    md = (box.results / "report.md").read_text()
    html = (box.results / "report.html").read_text()
    assert "## Not reproduced (1)" in md and "failed \\| passed" in md  # escaped for Markdown
    assert "Not reproduced (1)" in html and "test_every_other" in html
    assert "not reproduced (1), listed apart, failing no gate:" in run.stdout


def test_a_real_tier_change_and_a_real_failure_are_confirmed(tmp_path, venvs, base):
    box = _box(tmp_path, venvs, base)
    box.write(env=', FLAKY_BREAK = "1"', suite_extra='provider_options = { sdpa_kernel = "16" }')
    box.calls(1)  # the flake fails first, then passes
    run = box.nox("-s", "sweep", "--", "--baseline", "base", "--gate", "regressions")
    assert run.returncode != 0, run.stdout[-4000:]
    doc = box.sweep_json()
    kinds = {(c["kind"], c["test"]) for c in doc["regressions"]}
    assert kinds == {("verdict", None), ("test", "test_flaky.py::test_breakable"),
                     ("tier", "test_flaky.py::test_tier"), ("count", "passed")}, doc["regressions"]
    assert [u["test"] for u in doc["unconfirmed"]] == [FLAKE]
    rec = doc["confirmation"][SESSION]
    assert len(rec["reruns"]) == 2  # both reruns ran: the real ones reproduced every time
    by_test = {t["test"]: t for t in rec["tests"]}
    assert by_test["test_flaky.py::test_breakable"]["runs"] == ["failed", "failed", "failed"]
    assert by_test["test_flaky.py::test_breakable"]["unconfirmed"] == []
    assert by_test["test_flaky.py::test_tier"]["runs"] == ["passed MATH ep=CUDA ops.CUDA=Identity"] * 3  # the stand-in CUDA EP served it
    assert [r["selected"] for r in rec["reruns"]] == [3, 2]  # the flake cleared in rerun 1 and left
    assert "2 regression(s)" not in run.stdout and "sweep FAILED (gate regressions)" in run.stdout


def test_confirm_0_counts_the_flake_as_it_was_first_seen(tmp_path, venvs, base):
    box = _box(tmp_path, venvs, base)
    box.write()
    box.calls(1)
    run = box.nox("-s", "sweep", "--", "--baseline", "base", "--gate", "regressions", "--confirm", "0")
    assert run.returncode != 0
    doc = box.sweep_json()
    assert ("test", FLAKE) in {(c["kind"], c["test"]) for c in doc["regressions"]}
    assert doc["unconfirmed"] == [] and doc["confirmation"] == {}


def test_calibrate_writes_known_flaky_for_the_flake_and_short_known_failures(tmp_path, venvs):
    box = Box(tmp_path, venvs)
    box.write(suite_extra='expect_file = "expect/fl.toml"', expect="")
    box.calls(0)  # run 1 is call 1 (passes), run 2 is call 2 (fails)
    cal = box.nox("-s", "calibrate", "--")
    assert cal.returncode == 0, cal.stdout[-4000:]
    assert f"flaky: normal {FLAKE}: passed, failed" in cal.stdout
    path = tmp_path / "expect" / "fl.toml"
    text = path.read_text()
    longest = max(text.splitlines(), key=len)
    assert len(longest) <= 300, longest
    e = tomllib.loads(text)["expect"]["normal"]
    (flaky,) = e["known_flaky"]
    assert flaky["test"] == "^test_flaky\\.py::test_every_other$"
    assert flaky["outcomes"] == ["failed", "passed"] and flaky.get("tiers", []) == []
    assert [r.split(": ", 1)[1] for r in flaky["runs"]] == ["passed", "failed"]
    assert flaky["reason"].startswith("differed between runs (passed, failed): AssertionError: call 2")
    failing = {r["test"]: r["reason"] for r in e["known_failures"]}
    assert not any("every_other" in t for t in failing)  # a flake is never a known failure
    long_reason = failing["^test_flaky\\.py::test_stable_long_failure$"]
    assert long_reason.startswith("AssertionError: void onnxruntime::contrib::cuda::Attention<T, T,")
    assert len(long_reason) == 200 and long_reason.endswith("…")
    assert any("q" * 400 in t for t in failing)  # a 400-character node id, on lines of at most 300
    # the file accepts what it saw: the next two runs (the flake passing, then failing) both pass
    for _ in range(2):
        run = box.nox("-s", CELL)
        assert run.returncode == 0, run.stdout[-3000:]
    # and a sweep whose only change from its baseline is that flake is no regression either
    box.calls(0)
    assert box.nox("-s", "sweep", "--", "--save-baseline", "cal", "--confirm", "0").returncode == 0
    box.calls(1)
    run = box.nox("-s", "sweep", "--", "--baseline", "cal", "--gate", "regressions", "--confirm", "0")
    assert run.returncode == 0, run.stdout[-3000:]
    assert box.sweep_json()["regressions"] == []
    # outside its set, a known-flaky test fails the verdict: the rule lists what it may do, nothing more
    path.write_text(text.replace('outcomes = ["failed", "passed"]', 'outcomes = ["passed"]'))
    box.calls(1)
    run = box.nox("-s", CELL)
    assert run.returncode != 0
    assert (f"1 known-flaky test(s) did what their rule does not list: {FLAKE} failed (no tier): known_flaky lists "
            "passed (no tier)") in run.stdout


def test_calibrate_refuses_a_single_run(tmp_path, venvs):
    box = Box(tmp_path, venvs)
    box.write(suite_extra='expect_file = "expect/fl.toml"', expect="")
    cal = box.nox("-s", "calibrate", "--", "--runs", "1")
    assert cal.returncode != 0
    assert "--runs 1: a flake is told from a failure only by running each mode at least twice" in cal.stdout
    assert not (tmp_path / "results").exists() and not (tmp_path / "expect").exists()


# ---------------------------------------------------------------- what a rerun and a known_flaky rule may conclude

def test_a_known_flaky_case_within_its_set_is_judged_by_its_flaky_rule_not_by_its_functions_tier_rule():
    """calibrate leaves a flaky case out of its function's tier rule, so the rule must not judge it either:
    case 3 may run EFFICIENT (its known_flaky rule says so) though its siblings' rule says FLASH only."""
    rules = (TierRule("test_past_flash", ("FLASH_ATTENTION",), "flash"),)
    flaky = (FlakyRule("test_past_flash_3$", ("passed",), ("EFFICIENT_ATTENTION", "FLASH_ATTENTION"), "unstable"),)
    tests = [T("t.py::test_past_flash_0", "passed", "", ("FLASH_ATTENTION",)),
             T("t.py::test_past_flash_3", "passed", "", ("EFFICIENT_ATTENTION",))]
    found = judge_counts(PassExpect(tiers=rules, known_flaky=flaky), tests, count(None, tests, 2))
    assert found.reasons == [] and found.tier_breaks == [] and found.stale == []
    # outside its flaky set it is judged (by the flaky rule), and a sibling that breaks the tier rule still does
    tests[1] = T("t.py::test_past_flash_3", "passed", "", ("MATH",))
    tests.append(T("t.py::test_past_flash_4", "passed", "", ("EFFICIENT_ATTENTION",)))
    found = judge_counts(PassExpect(tiers=rules, known_flaky=flaky), tests, count(None, tests, 3))
    assert [b.nodeid for b in found.tier_breaks] == ["t.py::test_past_flash_4"], found.tier_breaks
    assert any("test_past_flash_3" in r and "MATH" in r for r in found.reasons), found.reasons


def test_a_rerun_that_clears_one_change_but_shows_another_does_not_stand_for_the_test(harness, tmp_path):
    """Baseline: passed on FLASH. The first run: passed on EFFICIENT (a tier regression). The one rerun: failed
    on FLASH. The tier change did not reproduce, so it is unconfirmed; the failure was seen once, in a rerun,
    and never rerun: it must not become the test's outcome, a regression or a failing verdict."""
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


def test_a_change_that_did_not_reproduce_against_one_baseline_still_counts_against_another(harness, tmp_path):
    """Swept against baseline a (FLASH), the first run's MATH did not reproduce (the rerun gave FLASH): unconfirmed,
    so the gate holds. The same results reported against baseline b (EFFICIENT) show a tier change that no
    rerun was judged against: it is a regression there, not dropped by a's record."""
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
        (test, ["tier"], "passed FLASH_ATTENTION ep=CUDA ops.CUDA=Identity")]
    again_a = harness.nox("-s", "report", "--", str(harness.results), "--baseline", "a", "--gate", "regressions", env=env)
    assert again_a.proc.returncode == 0, again_a.output[-3000:]
    against_b = harness.nox("-s", "report", "--", str(harness.results), "--baseline", "b", "--gate", "regressions",
                            env=env)
    assert against_b.proc.returncode == 1, against_b.output[-3000:]
    assert "1 regression(s)" in against_b.output, against_b.output[-3000:]


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

"""Flakes told from regressions, on CPU, with real nox, pytest and venvs (the `flaky` fixture suite).

The suite's test_every_other fails on every even call; its call count lives in a file under the
test's own tmp_path, named to the suite through its `env` (FLAKY_STATE), so each test seeds the
phase it needs. A sweep reruns what regressed (`--confirm`, default 2) before it counts; calibrate
runs each mode twice (`--runs`, default 2) and writes known_flaky for what differed.
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
    assert r["schema_version"] == 5 and r["verdict"] == "pass" and r["outcomes"][FLAKE] == "passed"
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
    assert by_test["test_flaky.py::test_tier"]["runs"] == ["passed MATH ep=CUDA"] * 3  # the stand-in CUDA EP served it
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

"""A sweep whose candidate differs from its baseline only in the test order and one flake is green under
--gate regressions, and only the two guards (pollution undone, the flake confirmed) together make it so.

One cell runs, in one process (-n 0, so the `files` order is the run order), a polluter that leaves
ORT_DISABLE_FLASH_ATTENTION set, a victim whose tier follows it (tests/fixtures/suites/pollution), and
the flaky suite's test that fails every other call (tests/fixtures/suites/flaky). The baseline runs the
victim first and the flake passes; the candidate runs the polluter first and the flake fails once.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import PY, REPO, SUITES, matrix_head

CELL = f"o-{PY}-x"
VICTIM = "pollution/test_victim.py::test_attention"
FLAKE = "flaky/test_flaky.py::test_every_other"
MATRIX = matrix_head(prefix="o", suite="of", modes=["normal"]) + """[suite.of]
root = "{root}"
files = {files}
pythonpath = [".", "pollution", "canary"]
pytest_args = ["-n", "0", "-k", "not test_long_id and not test_tier and not test_breakable"]
isolation = "{isolation}"
env = {{ FLAKY_STATE = "{state}" }}
[suite.of.expect.normal]
known_failures = [{{ test = "test_stable_long_failure", reason = "stable" }}]
"""
VICTIM_FIRST = ["pollution/test_victim.py", "pollution/test_polluter.py", "flaky/test_flaky.py"]
POLLUTER_FIRST = ["pollution/test_polluter.py", "pollution/test_victim.py", "flaky/test_flaky.py"]


def _nox(root: Path, venvs: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MATRIX_TOML": str(root / "matrix.toml"), "MATRIX_RESULTS": str(root / "results"),
           "MATRIX_VENVS": str(venvs), "MATRIX_BASELINES": str(root / "baselines")}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args], env=env, cwd=root,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)


def _write(root: Path, files: list[str], isolation: str, calls: int) -> None:
    (root / "calls").write_text(str(calls))  # the flake's next run is call calls + 1: it fails when that is even
    (root / "matrix.toml").write_text(MATRIX.format(py=PY, root=SUITES, files=json.dumps(files), isolation=isolation,
                                                    state=root / "calls"))


@pytest.mark.parametrize("isolation, confirm, green", [("restore", "2", True), ("report", "0", False)],
                         ids=["isolation-and-confirmation-green", "neither-red"])
def test_order_and_one_flake_alone_pass_the_regressions_gate(tmp_path, venvs, isolation, confirm, green):
    _write(tmp_path, VICTIM_FIRST, "restore", calls=0)
    base = _nox(tmp_path, venvs, "-s", "sweep", "--", "--save-baseline", "base")
    assert base.returncode == 0, base.stdout[-3000:]
    recorded = json.loads((tmp_path / "baselines" / "base.json").read_text())["cells"][CELL]["normal"]["tests"]
    assert recorded[FLAKE] == "passed" and recorded[VICTIM].startswith("passed"), recorded

    _write(tmp_path, POLLUTER_FIRST, isolation, calls=1)  # the polluter runs first; the flake fails this time
    run = _nox(tmp_path, venvs, "-s", "sweep", "--", "--baseline", "base", "--gate", "regressions",
               "--confirm", confirm)
    doc = json.loads((tmp_path / "results" / "sweep.json").read_text())
    tiers = {c["test"] for c in doc["regressions"] if c["kind"] == "tier"}
    if green:
        assert run.returncode == 0, run.stdout[-4000:]
        assert doc["regressions"] == [], doc["regressions"]
        assert [u["test"] for u in doc["unconfirmed"]] == [FLAKE]
        result = json.loads((tmp_path / "results" / f"{CELL}-normal.json").read_text())
        assert result["dispatch"]["tests"][VICTIM] == ["FLASH_ATTENTION"]  # the mode's own environment
        assert any(p["test"] == "pollution/test_polluter.py::test_disables_flash" and p["undone"]
                   for p in result["pollution"])
    else:  # without the undo and the reruns, the same two differences fail the gate: a tier flip and a failure
        assert run.returncode != 0, run.stdout[-4000:]
        assert tiers == {VICTIM}, doc["regressions"]
        assert any(c["kind"] == "test" and c["test"] == FLAKE for c in doc["regressions"]), doc["regressions"]

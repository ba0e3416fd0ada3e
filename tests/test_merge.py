"""Results from many hosts: nox runs in separate processes, dirs and UTS namespaces (each its own hostname),
merged by `nox -s report`, which keeps each result's host, refuses two runs of one session unless --latest."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from helpers import CELL, PY, REPO, SUITES, Harness

NOX = [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py")]


def _run_on_host(h: Harness, host: str, results, session: str) -> None:
    """nox in a UTS namespace of its own, so the result records `host` as the machine it ran on."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to give each run its own hostname")
    env = {**os.environ, "MATRIX_TOML": str(h.matrix), "MATRIX_RESULTS": str(results), "MATRIX_VENVS": str(h.venvs)}
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
                           host, *NOX, "-s", session], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _report(h: Harness, *args):
    env = {**os.environ, "MATRIX_TOML": str(h.matrix), "MATRIX_RESULTS": str(h.tmp / "unused"), "MATRIX_VENVS": str(h.venvs)}
    return subprocess.run([*NOX, "-s", "report", "--", *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def two_hosts(harness):
    harness.write(["test_allpass.py"], root=SUITES / "verdicts")
    text = harness.matrix.read_text().replace("[libs.x]\nnone = true", "[libs.x]\nnone = true\n[libs.y]\nnone = true")
    harness.matrix.write_text(text)
    _run_on_host(harness, "runner-a", harness.tmp / "a", f"{CELL}-normal")
    _run_on_host(harness, "runner-b", harness.tmp / "b", f"t-{PY}-y-normal")
    return harness


def test_results_from_two_hosts_merge_with_a_host_column(two_hosts):
    h = two_hosts
    a = json.loads((h.tmp / "a" / f"{CELL}-normal.json").read_text())
    assert a["host"] == "runner-a"
    proc = _report(h, str(h.tmp / "a"), str(h.tmp / "b"), "--out", str(h.tmp / "out"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {line.split()[0]: line.split()[1] for line in proc.stdout.splitlines() if line.startswith("t-")}
    assert rows == {CELL: "runner-a", f"t-{PY}-y": "runner-b"}
    md = (h.tmp / "out" / "report.md").read_text()
    assert f"| {CELL} | runner-a | PASS 2/0/0 |" in md and f"| t-{PY}-y | runner-b | PASS 2/0/0 |" in md
    html = (h.tmp / "out" / "report.html").read_text()
    assert "<td>runner-a</td>" in html and "host runner-b" in html  # the grid's column, and the cell's provenance


def test_two_runs_of_one_session_are_refused_unless_latest(two_hosts):
    h = two_hosts
    _run_on_host(h, "runner-c", h.tmp / "c", f"{CELL}-normal")
    proc = _report(h, str(h.tmp / "a"), str(h.tmp / "c"))
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert f"{CELL}-normal: two results from different runs: {h.tmp / 'a' / (CELL + '-normal.json')}" in out
    assert "host runner-a" in out and "host runner-c" in out and "pass --latest to keep the newer" in out
    proc = _report(h, str(h.tmp / "a"), str(h.tmp / "c"), "--latest")
    assert proc.returncode == 0, out
    row = next(line for line in proc.stdout.splitlines() if line.startswith(CELL + " "))
    assert row.split()[1] == "runner-c"  # the newer run


def test_the_merge_of_two_runners_is_one_junit_file_with_both_hosts(two_hosts):
    """--junit-xml on `nox -s report` over two runners' artifacts: one file, a testsuite per cell and mode, each
    naming the host its run was on, as junitparser (not our code) reads it."""
    from junitparser import JUnitXml

    h = two_hosts
    target = h.tmp / "out" / "junit.xml"
    proc = _report(h, str(h.tmp / "a"), str(h.tmp / "b"), "--out", str(h.tmp / "out"), "--junit-xml", str(target))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    xml = JUnitXml.fromfile(str(target))
    hosts = {s.name: (s.hostname, [p.value for p in s.properties() if p.name == "host"]) for s in xml}
    assert hosts == {f"{CELL}-normal": ("runner-a", ["runner-a"]), f"t-{PY}-y-normal": ("runner-b", ["runner-b"])}
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (4, 0, 0, 0)  # test_allpass.py's two tests, twice
    assert {c.name for s in xml for c in s} == {"test_allpass.py::test_identity_runs",
                                                "test_allpass.py::test_identity_runs_again"}

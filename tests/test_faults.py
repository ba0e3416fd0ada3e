"""The fault table: one row per fault, and per guard that already stood, each injected for real.

Every row runs real nox against a real venv: real xdist workers that segfault, real signals sent
to a running nox, a real tmpfs that fills up, real concurrent nox processes. Each asserts the exact
reason the verdict (or the session) gives. Adding a fault means adding a row to FAULTS.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import CELL, CHECKOUT_ROOT, PY, REPO, SUITES, VENV, Harness, still_running

from ort_gpu_matrix.envs.venvs import FINGERPRINT

FAULTS_DIR = SUITES / "faults"
TEETH = "[suite.s.expect.teeth]\nmin_failures = 1\n"


@dataclass
class Row:
    """One fault: how to inject it, and the exact reason (or session message) it must produce."""

    id: str
    inject: Callable[[Harness], dict]  # returns the stored result of the faulty run
    # must be one of the result's reasons, exactly, or a line of the session's output; a callable gives it from
    # what the injection chose (a hang's timeout)
    reason: str | Callable[[Harness], str]
    check: Callable[[Harness, dict], None] = field(default=lambda h, r: None)


def _run(h: Harness, files, root=FAULTS_DIR, mode="normal", env=None, **kw) -> dict:
    h.write(files, root=root, modes=[mode], **kw)
    run = h.nox("-s", f"{CELL}-{mode}", env=env)
    h.last_output = run.output
    path = h.results / f"{CELL}-{mode}.json"
    return json.loads(path.read_text()) if path.exists() else {"reasons": [], "output": run.output}


def _signalled(sig: signal.Signals, twice: bool = False, file: str = "test_slow.py"):
    """Run a slow test under nox, send `sig` to nox once pytest has started it, and read what was stored."""

    def inject(h: Harness) -> dict:
        h.write(["test_allpass.py"], root=SUITES / "verdicts")  # an earlier PASS, which must not stay current
        assert h.nox("-s", f"{CELL}-normal").proc.returncode == 0
        mark = h.tmp / "started"
        tmpdir = h.tmp / "private-dirs"
        tmpdir.mkdir()
        h.write([file], root=FAULTS_DIR)
        env = {**os.environ, "MATRIX_TOML": str(h.matrix), "MATRIX_RESULTS": str(h.results),
               "MATRIX_VENVS": str(h.venvs), "FAULT_MARK": str(mark), "TMPDIR": str(tmpdir)}
        nox = subprocess.Popen([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", f"{CELL}-normal"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 120
        while not mark.exists():
            assert nox.poll() is None and time.time() < deadline, "the slow test never started"
            time.sleep(0.1)
        test_pid, test_pgid = map(int, mark.read_text().split())
        nox.send_signal(sig)
        sent = time.time()
        seen = _until_stopping(nox, sig) if twice else ""  # the second signal, once nox handled the first
        if twice:
            nox.send_signal(sig)
        out = seen + nox.communicate(timeout=60)[0]
        h.last_output = out
        h.stop_seconds = time.time() - sent
        h.exit_code = nox.returncode
        assert still_running([test_pid]) == [], "pytest's test process outlived nox"
        assert test_pgid != os.getpgid(0)
        assert list(tmpdir.iterdir()) == [], "the private dir leaked"
        path = h.results / f"{CELL}-normal.json"
        return json.loads(path.read_text()) if path.exists() else {"reasons": [], "output": out}

    return inject


def _until_stopping(nox: subprocess.Popen, sig: signal.Signals) -> str:
    """nox's output up to its line saying it stops pytest on `sig`: from then on a second signal is a second one,
    not one that overtook the first. nox ends within its grace period whatever it says, so this never waits longer."""
    seen = []
    for line in iter(nox.stdout.readline, ""):
        seen.append(line)
        if f"{sig.name}: stopping pytest" in line:
            return "".join(seen)
    raise AssertionError(f"nox ended without saying it stops pytest on {sig.name}:\n" + "".join(seen)[-3000:])


def _check_interrupted(sig_name: str):
    def check(h: Harness, r: dict) -> None:
        assert h.exit_code != 0
        assert r["verdict"] == "fail" and r["stopped"] == f"interrupted ({sig_name})"
        assert sum(f"{sig_name}: stopping pytest" in line for line in h.last_output.splitlines()) == 1
        log = Path(r["log"]).read_text()
        assert "test_slow.py" in log and f"ort-gpu-matrix: interrupted ({sig_name})" in log
    return check


def _check_second_ctrl_c(h: Harness, r: dict) -> None:
    assert h.stop_seconds < 8, f"a second Ctrl-C took {h.stop_seconds:.1f} s (the grace period is 10 s)"
    assert h.exit_code == 128 + signal.SIGINT


def _concurrent(h: Harness) -> dict:
    """Two nox runs of one session at once: the second waits, each keeps its own bundle."""
    h.write(["test_allpass.py"], root=SUITES / "verdicts", suite_extra='pytest_args = ["-p", "no:randomly"]')
    env = {**os.environ, "MATRIX_TOML": str(h.matrix), "MATRIX_RESULTS": str(h.results), "MATRIX_VENVS": str(h.venvs)}
    cmd = [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", f"{CELL}-normal"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    h.last_output = "\n".join(outs)
    return json.loads((h.results / f"{CELL}-normal.json").read_text())


def _check_concurrent(h: Harness, r: dict) -> None:
    bundles = sorted((h.results / "runs" / f"{CELL}-normal").iterdir())
    assert len(bundles) == 2
    for bundle in bundles:
        stored = json.loads((bundle / "result.json").read_text())
        assert stored["bundle"] == str(bundle) and stored["log"] == str(bundle / "pytest.log")
        assert (bundle / "pytest.log").read_text().count("test session starts") == 1
    # the current result is the newer run: the one stored last (two runs can start within one second, and a
    # run id orders by the second, then by its random part)
    newer = max(bundles, key=lambda b: (b / "result.json").stat().st_mtime_ns)
    assert r["run_id"] == newer.name


def _disk_full(h: Harness) -> dict:
    """The results dir on a 512 KiB tmpfs, in a mount namespace of its own: a PASS first, then a full disk."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to mount a tmpfs for the disk-full row")
    h.write(["test_allpass.py"], root=SUITES / "verdicts")
    h.results.mkdir()
    script = f"""
set -e
mount -t tmpfs -o size=512k tmpfs {h.results}
{sys.executable} -m nox -f {REPO / 'noxfile.py'} -s {CELL}-normal > {h.tmp}/first.out 2>&1
cp -r {h.results}/. {h.tmp}/after-first
head -c $(( $(df --output=avail -B1 {h.results} | tail -1) - 4096 )) /dev/zero > {h.results}/filler || true
{sys.executable} -m nox -f {REPO / 'noxfile.py'} -s {CELL}-normal > {h.tmp}/second.out 2>&1 || echo "exit $?" >> {h.tmp}/second.out
ls -A {h.results} > {h.tmp}/listing
ls -A {h.results}/runs/{CELL}-normal > {h.tmp}/bundles
"""
    env = {**os.environ, "MATRIX_TOML": str(h.matrix), "MATRIX_RESULTS": str(h.results), "MATRIX_VENVS": str(h.venvs)}
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first = json.loads((h.tmp / "after-first" / f"{CELL}-normal.json").read_text())
    assert first["verdict"] == "pass"
    h.last_output = (h.tmp / "second.out").read_text()
    h.listing = (h.tmp / "listing").read_text().split()
    h.bundles = (h.tmp / "bundles").read_text().split()
    return {"reasons": [], "first": first}


def _check_disk_full(h: Harness, r: dict) -> None:
    assert "exit 1" in h.last_output.splitlines()[-1]
    assert f"{CELL}-normal.json" not in h.listing, "the earlier PASS still looks current"
    assert h.bundles == [r["first"]["run_id"]], "a half-written bundle was left behind"
    assert "Traceback" not in h.last_output


def _two_builds(h: Harness) -> dict:
    """Two nox processes that both need a venv that is not built yet: one builds, the other waits and reuses it."""
    h.venvs = h.tmp / "own-venvs"
    h.write(["test_allpass.py"], root=SUITES / "verdicts")
    h.matrix.write_text(h.matrix.read_text().replace('backend = "uv|virtualenv"', 'backend = "virtualenv"'))  # slow
    env = {**os.environ, "MATRIX_TOML": str(h.matrix), "MATRIX_RESULTS": str(h.results), "MATRIX_VENVS": str(h.venvs)}
    first = subprocess.Popen([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", f"{CELL}-normal"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _until_building(first, h.venvs / VENV)
    env2 = {**env, "MATRIX_RESULTS": str(h.tmp / "results-2")}
    second = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", f"{CELL}-normal"],
                            env=env2, capture_output=True, text=True, timeout=300)
    out1 = first.communicate(timeout=300)[0]
    h.last_output = out1 + second.stdout + second.stderr
    assert first.returncode == 0 and second.returncode == 0, h.last_output
    return json.loads((h.tmp / "results-2" / f"{CELL}-normal.json").read_text())


def _until_building(first: subprocess.Popen, venv: Path) -> None:
    """Return once `first` is building `venv` (it exists, without the fingerprint a finished build writes last),
    so the second run comes while the build is under way; fail if `first` ends or finishes its build first."""
    deadline = time.monotonic() + 300  # only a bound against a run that hangs: the loop ends on an event
    while not (venv.is_dir() and not (venv / FINGERPRINT).exists()):
        assert first.poll() is None and not (venv / FINGERPRINT).exists(), \
            "the first run ended, or built its venv, before this saw its build under way"
        assert time.monotonic() < deadline, f"the first run did not start building {venv} within 300 s"
        time.sleep(0.01)


def _check_two_builds(h: Harness, r: dict) -> None:
    assert h.last_output.count("built venv") == 1, h.last_output
    assert "reusing venv" in h.last_output
    assert r["verdict"] == "pass"


HANG_TIMEOUTS = (4, 16, 64)  # the suite timeouts a hang row runs under, the next only where the last came too soon


def _hangs(suite_extra: str = ""):
    """Run test_hang.py until the suite's timeout stops it while test_forever hangs, which is what the row is about.

    The timeout counts from pytest's start, and on a busy machine pytest (and its xdist workers) may take longer
    than that to reach the test: the timeout then stops a run that never hung. test_forever writes its mark as it
    starts hanging, so a run stopped without the mark injected nothing; it runs again under the next, longer
    timeout. Whether the fault happened is read from the mark, never guessed from how fast pytest starts; the
    last timeout only bounds a machine too busy to start pytest at all."""

    def inject(h: Harness) -> dict:
        mark = h.tmp / "hung"
        for timeout in HANG_TIMEOUTS:
            r = _run(h, ["test_hang.py"], suite_extra=f"timeout = {timeout}\n{suite_extra}", env={"FAULT_MARK": str(mark)})
            if mark.exists():
                h.timeout, h.hung_pid = timeout, int(mark.read_text())
                return r
            assert r.get("stopped") == f"timed out after {timeout} s", ("a run ended before test_forever hung", r)
        pytest.fail(f"test_forever never started hanging before the suite's timeout stopped pytest, under every "
                    f"timeout tried ({', '.join(map(str, HANG_TIMEOUTS))} s): pytest took longer than that to reach it")

    return inject


def _hang_reason(h: Harness) -> str:
    return f"timed out after {h.timeout} s; running: test_hang.py::test_forever"


def _stale_build_dir(h: Harness) -> dict:
    h.venvs = h.tmp / "own-venvs"  # the shared dir serves the other worker too, whose runs would remove it first
    leftover = h.venvs / f".{VENV}.build.abc123"
    (leftover / "bin").mkdir(parents=True)
    h.leftover = leftover
    return _run(h, ["test_allpass.py"], root=SUITES / "verdicts")


def _umask(h: Harness) -> dict:
    h.write(["test_allpass.py"], root=SUITES / "verdicts")
    env = {**os.environ, "MATRIX_TOML": str(h.matrix), "MATRIX_RESULTS": str(h.results), "MATRIX_VENVS": str(h.venvs)}
    subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", f"{CELL}-normal"], env=env,
                   capture_output=True, timeout=300, preexec_fn=lambda: os.umask(0o077))
    return json.loads((h.results / f"{CELL}-normal.json").read_text())


def _check_umask(h: Harness, r: dict) -> None:
    current = h.results / f"{CELL}-normal.json"
    assert stat.S_IMODE(current.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(r["bundle"]).stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(r["log"]).stat().st_mode) == 0o600


def _reserved_env(h: Harness) -> dict:
    h.write(["test_allpass.py"], root=SUITES / "verdicts", suite_extra='env = { PYTHONPATH = "/tmp", ORT_MATRIX_REPORT = "x" }')
    run = h.nox("-l")
    h.last_output = run.output
    assert run.proc.returncode == 2
    return {"reasons": []}


def _damaged_venv(h: Harness) -> dict:
    h.venvs = h.tmp / "own-venvs"
    _run(h, ["test_allpass.py"], root=SUITES / "verdicts")
    site = h.venvs / VENV / "lib" / f"python{PY}" / "site-packages"
    (site / "onnxruntime" / "__init__.py").unlink()
    return _run(h, ["test_allpass.py"], root=SUITES / "verdicts")


def _console_script(h: Harness) -> dict:
    r = _run(h, ["test_allpass.py"], root=SUITES / "verdicts")
    proc = subprocess.run([str(Path(r["venv"]["path"]) / "bin" / "pytest"), "--version"], capture_output=True, text=True)
    h.last_output = proc.stdout + proc.stderr
    assert proc.returncode == 0, h.last_output
    return r


def _suite_requirements(h: Harness) -> dict:
    """Two pairings whose suites need different packages: two venvs, and alternating rebuilds nothing."""
    h.write(["test_allpass.py"], root=SUITES / "verdicts", suite_extra='requirements = ["iniconfig"]')
    text = h.matrix.read_text() + f'\n[suite.t]\nroot = "{SUITES / "verdicts"}"\nfiles = ["test_allpass.py"]\npythonpath = [".."]\n'
    text = text.replace('[libs.x]\nnone = true', '[libs.x]\nnone = true\n[libs.y]\nnone = true')
    text += f'\n[pairing]\ninclude = [{{ python = "{PY}", ort = "cpu", torch = "none", libs = "x" }}, ' \
            f'{{ python = "{PY}", ort = "cpu", torch = "none", libs = "y", suite = "t" }}]\n'
    h.matrix.write_text(text)
    outs = [h.nox("-s", f"{CELL}-normal").output, h.nox("-s", f"t-{PY}-y-normal").output,
            h.nox("-s", f"{CELL}-normal").output]
    h.last_output = outs[-1]
    x = json.loads((h.results / f"{CELL}-normal.json").read_text())
    y = json.loads((h.results / f"t-{PY}-y-normal.json").read_text())
    assert x["venv"]["path"] != y["venv"]["path"]
    assert Path(y["venv"]["path"]).name == VENV and Path(x["venv"]["path"]).name.startswith(f"{VENV}-r")
    return x


FAULTS = [
    # faults found by the reliability probe: each gave a wrong PASS or lost a result before
    Row("xdist worker segfaults", lambda h: _run(h, ["test_crash.py"], suite_extra='pytest_args = ["-n", "2"]'),
        "1 unexpected failure(s): test_crash.py::test_segfault error: worker crashed running "
        "test_crash.py::test_segfault (worker "),  # then 'gw0' or 'gw1', whichever ran it
    Row("pytest.exit(returncode=0) early", lambda h: _run(h, ["test_exit_early.py"]), "5 collected, 1 with an outcome"),
    Row("conftest rewrites the report", lambda h: _run(h, ["test_one_fails.py"], root=SUITES / "faults_rewrite"),
        "the probe's report was changed after the probe wrote it (its sha256 is not the one the probe sent): "
        "the tests' own code edited it"),
    Row("conftest edits the probe's memory", lambda h: _run(h, ["test_one_fails.py"], root=SUITES / "faults_memory"),
        "the probe's report and pytest's junit file disagree (failed: the probe 0, junit 1)"),
    Row("conftest changes the exit code", lambda h: _run(h, ["test_fine.py"], root=SUITES / "faults_exitcode"),
        "pytest exited 1 but no failure was recorded"),
    Row("a thread prints a dispatch line during a CPU run",
        lambda h: _run(h, ["test_thread_tokens.py"], mode="require_cudnn",
                       expect='[suite.s.expect.require_cudnn]\nrequire_kernel = "CUDNN_FLASH_ATTENTION"\n'),
        "no test dispatched CUDNN_FLASH_ATTENTION (seen: no SdpaKernel token at all)",
        lambda h, r: r["warnings"] == ["1 SdpaKernel token(s) printed while no session that asked for the CUDA EP "
                                       "was running were not counted (CUDNN_FLASH_ATTENTION)"] or pytest.fail(r["warnings"])),
    Row("a test hangs", _hangs(), _hang_reason),
    Row("a test outlives the suite's test_timeout", lambda h: _run(h, ["test_hang.py"], suite_extra="test_timeout = 2"),
        "1 unexpected failure(s): test_hang.py::test_forever failed: Failed: Timeout (>2.0s) from pytest-timeout."),
    Row("a test hangs in an xdist worker", _hangs('pytest_args = ["-n", "2"]'), _hang_reason,
        lambda h, r: still_running([h.hung_pid]) == [] or pytest.fail("the hung xdist worker outlived the run")),
    Row("SIGTERM to nox", _signalled(signal.SIGTERM), "interrupted (SIGTERM); running: test_slow.py::test_slow",
        _check_interrupted("SIGTERM")),
    Row("Ctrl-C (SIGINT) to nox", _signalled(signal.SIGINT), "interrupted (SIGINT); running: test_slow.py::test_slow",
        _check_interrupted("SIGINT")),
    Row("a second Ctrl-C", _signalled(signal.SIGINT, twice=True, file="test_deaf.py"),
        "SIGINT: stopping pytest", _check_second_ctrl_c),
    Row("disk full while storing", _disk_full, "nothing of this run was kept", _check_disk_full),
    Row("two runs of one session at once", _concurrent, "waiting for another run of it to finish", _check_concurrent),
    Row("two builds of one venv at once", _two_builds, "reusing venv", _check_two_builds),
    Row("a stale .build dir", _stale_build_dir, "left by an unfinished build",
        lambda h, r: not h.leftover.exists() or pytest.fail("the .build dir is still there")),
    Row("umask 077", _umask, "", _check_umask),
    Row("a logged command with a space", lambda h: _run(h, ["test_allpass.py"], root=SUITES / "verdicts",
                                                       suite_extra='pytest_args = ["-k", "allpass or nothing"]'),
        "-k 'allpass or nothing'"),
    Row("suite.env sets the harness's variables", _reserved_env,
        "suite.s.env.ORT_MATRIX_REPORT: is set by the harness itself (ORT_MATRIX_* variables carry the probe's "
        "channels and options)"),
    Row("suites that need different packages", _suite_requirements, "reusing venv"),
    Row("a console script in a built venv", _console_script, "pytest "),
    Row("a damaged venv", _damaged_venv, "it is damaged: onnxruntime/__init__.py is missing (listed in "),
    # guards that stood before: still rows, so the table is the one list of what is caught
    Row("every test skips, pytest exits 0", lambda h: _run(h, ["test_allskip.py"], root=SUITES / "verdicts"),
        "nothing passed (2 skipped)"),
    Row("nothing collected", lambda h: _run(h, ["test_nothing_here.py"], root=SUITES / "verdicts"),
        "nothing was collected (pytest exit 5): the suite's files hold no tests pytest can find"),
    Row("the canary does not bite", lambda h: _run(h, ["test_allpass.py"], root=SUITES / "verdicts", mode="teeth",
                                                  expect=TEETH),
        "canary has no teeth: nothing failed with MATH forced"),
    Row("too many warnings", lambda h: _run(h, ["test_warns.py"], root=SUITES / "verdicts",
                                           suite_extra='pytest_args = ["--max-warnings=0"]'),
        "pytest failed the run for too many warnings (exit 6, pytest >= 9.1)"),
    Row("an ORT source dir shadows the wheel",
        lambda h: _run(h, ["test_shadow.py"], root=CHECKOUT_ROOT / "onnxruntime" / "test" / "python" / "transformers",
                       pythonpath=[".", "../../../.."]),
        f"onnxruntime was imported from {CHECKOUT_ROOT}/onnxruntime/__init__.py, not from the pairing's venv "),
    Row("PYTEST_ADDOPTS in the caller's shell", lambda h: _run(h, ["test_allpass.py"], root=SUITES / "verdicts",
                                                             env={"PYTEST_ADDOPTS": "-k nothing_matches"}), ""),
]


def _matches(reason: str, r: dict, output: str) -> bool:
    if not reason:
        return True
    in_reasons = any(x == reason or (reason.endswith(" ") and x.startswith(reason)) for x in r.get("reasons", []))
    return in_reasons or any(reason in line for line in output.splitlines())


@pytest.mark.parametrize("row", FAULTS, ids=[row.id for row in FAULTS])
def test_fault(harness, row):
    harness.last_output = ""
    r = row.inject(harness)
    reason = row.reason(harness) if callable(row.reason) else row.reason
    assert _matches(reason, r, harness.last_output), (r.get("reasons"), harness.last_output[-3000:])
    row.check(harness, r)
    if row.id == "PYTEST_ADDOPTS in the caller's shell":
        assert r["verdict"] == "pass" and r["counts"]["passed"] == 2

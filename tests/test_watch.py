"""A sweep you can watch: real `nox -s sweep` and `nox -s calibrate` runs, without a terminal and under a real
pseudo-terminal (a Ctrl-C included, as a real SIGINT to the foreground process group)."""
from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import CELL, REPO, SUITES, still_running

KNOWN = '[suite.s.expect.normal]\nknown_failures = [{ test = "tracked", reason = "tracked on purpose" }]\n'
HEADER = re.compile(r"test session starts|^platform linux|^rootdir:|^collected \d+ item|PASSED|"
                    r"^\S*test_\w+\.py [.FsExX]+", re.M)


def _ours(output: str) -> str:
    """The output without the failing log's quoted tail (`       | ...`), which quotes pytest on purpose."""
    return "\n".join(ln for ln in output.splitlines() if not ln.startswith("       | "))


def _lines(output: str, session: str) -> tuple[list[str], list[str]]:
    starts = [ln for ln in output.splitlines() if re.match(rf"start  {re.escape(session)}  \(", ln)]
    ends = [ln for ln in output.splitlines() if re.match(rf"(PASS|FAIL) +{re.escape(session)}  ", ln)]
    return starts, ends


def test_a_sweep_without_a_terminal_prints_one_start_and_one_end_line_per_run_and_the_failing_log(harness):
    harness.write(["test_allpass.py", "test_broken.py"], modes=("normal", "require_cudnn"), expect=KNOWN)
    run = harness.nox("-s", "sweep")
    out = run.output
    assert run.proc.returncode != 0, out
    assert "\x1b" not in out, "no control codes without a terminal"
    for mode, told in (("normal", "unexpected 1; expected 1 known failure"), ("require_cudnn", "unexpected 2")):
        starts, ends = _lines(out, f"{CELL}-{mode}")
        assert len(starts) == 1 and len(ends) == 1, out
        assert ends[0].startswith("FAIL") and re.search(
            rf" 3/2/0 \({told}\)  no tier  \d+\.\d s  no gpu  \[\d/2\]$", ends[0]), ends
    assert not HEADER.search(_ours(out)), "pytest's own output stays in pytest.log"
    # the failing run: its reasons, its log's path, and that log's last lines, verbatim
    result = run.result("normal")
    log = Path(result["log"])
    assert f"       log: {log} (last 10 lines):" in out
    tail = [ln for ln in log.read_text().splitlines() if ln.strip()][-10:]
    shown = out.split(f"       log: {log} (last 10 lines):\n", 1)[1].splitlines()[:10]
    assert shown == [f"       | {ln}" for ln in tail]
    assert "test session starts" in log.read_text()  # pytest's output went there, whole
    assert "       reason: 1 unexpected failure(s): test_broken.py::test_new_regression" in out
    # the final table stays
    assert re.search(rf"^{re.escape(CELL)}\s+\S+\s+FAIL 3/2/0", out, re.M), out


def test_verbose_streams_pytest_and_forcecolor_colours_the_verdict_without_cursor_codes(harness):
    harness.write(["test_allpass.py"], modes=("normal",))
    verbose = harness.nox("-s", "sweep", "--", "--verbose").output
    assert "test session starts" in verbose and not _lines(verbose, f"{CELL}-normal")[0]
    coloured = harness.nox("--forcecolor", "-s", "sweep").output
    assert f"\x1b[32mPASS\x1b[0m   {CELL}-normal  2/0/0" in coloured, coloured
    assert not re.search(r"\x1b\[\?25[lh]|\x1b\[2K|\x1b\[\d*A", coloured), "colour only: no cursor movement"
    plain = harness.nox("-s", "sweep", env={"NO_COLOR": "1"}).output
    assert "\x1b" not in plain and f"PASS   {CELL}-normal  2/0/0" in plain


def test_calibrate_prints_one_line_per_run_too(harness):
    harness.write(["test_allpass.py", "test_broken.py"], modes=("normal",))
    out = harness.nox("-s", "calibrate").output
    starts, ends = _lines(out, f"{CELL}-normal")
    # calibrate runs each mode twice by default (--runs 2): a start and an end line for each run, counted apart
    assert len(starts) == 2 and len(ends) == 2, out
    assert [re.search(r"\((\d of \d),", ln).group(1) for ln in starts] == ["1 of 2", "2 of 2"], out
    assert [ln.endswith(f"[{i}/2]") for i, ln in enumerate(ends, 1)] == [True, True], out
    assert not HEADER.search(_ours(out)), out
    assert "wrote" in out or "expect" in out  # calibrate's own lines stay


SLEEPY = """
[suite.s]
root = "{root}"
files = ["test_sleep.py"]
env = {{ SLOT_LOG = "{log}", SLOT_SLEEP = "{sleep}" }}
"""


def _pty_sweep(harness, *args: str) -> tuple[subprocess.Popen, int]:
    """nox with its stdout and stderr on a real pseudo-terminal, leading a process group as a shell's job does."""
    master, slave = pty.openpty()
    env = {**os.environ, "MATRIX_TOML": str(harness.matrix), "MATRIX_RESULTS": str(harness.results),
           "MATRIX_VENVS": str(harness.venvs), "TERM": "xterm", "COLUMNS": "160"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", *args],
                            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    return proc, master


def _plain(raw: bytes) -> str:
    """What a person reads on the terminal, near enough: the colour and cursor codes taken out."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw.decode(errors="replace"))


def _read(master: int, until, timeout: float) -> bytes:
    got = b""
    deadline = time.time() + timeout
    while time.time() < deadline and not until(got):
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            got += chunk
    return got


def test_a_sweep_on_a_terminal_shows_one_live_line_and_ends_cleanly_on_ctrl_c(harness, tmp_path):
    marks = tmp_path / "slot.log"
    harness.write(["test_sleep.py"], root=SUITES / "slots", modes=("normal",),
                  suite_extra=f'env = {{ SLOT_LOG = "{marks}", SLOT_SLEEP = "{{sleep}}" }}')
    text = harness.matrix.read_text()
    harness.matrix.write_text(text.replace("{sleep}", "1"))
    proc, master = _pty_sweep(harness)  # a first, short run: now the sweep knows how long this run takes
    first = _read(master, lambda b: False, 300)
    assert proc.wait(timeout=60) == 0, first.decode(errors="replace")
    os.close(master)
    assert b"\x1b[?25l" in first and first.rfind(b"\x1b[?25h") > first.rfind(b"\x1b[?25l"), "cursor shown again"
    live = _plain(first)
    assert re.search(r"sweep .*0/1 runs .*0:00:0\d .*left: no run has a recorded duration yet", live), live
    assert f"PASS   {CELL}-normal  1/0/0" in live

    harness.matrix.write_text(text.replace("{sleep}", "60"))
    marks.unlink()
    proc, master = _pty_sweep(harness)
    seen = _read(master, lambda b: marks.exists() and b"left ~" in b and b"running" in b, 300)
    shown = _plain(seen)
    assert marks.exists(), shown
    assert re.search(rf"start  {re.escape(CELL)}-normal  \(1 of 1, last took \d+\.\d s\)", shown), shown
    assert re.search(r"0/1 runs .*left ~0:0\d .*running " + re.escape(f"{CELL}-normal"), shown), shown
    assert shown.count("start  ") == 1
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal's Ctrl-C sends to its foreground job
    rest = _read(master, lambda b: False, 60)
    code = proc.wait(timeout=30)
    os.close(master)
    after = _plain(rest)
    assert code != 0
    assert re.search(rf"FAIL   {re.escape(CELL)}-normal  \d+/\d+/\d+ .*\[1/1\]", after), after
    assert "reason: interrupted (SIGINT)" in after
    whole = seen + rest
    assert whole.rfind(b"\x1b[?25h") > whole.rfind(b"\x1b[?25l"), "the cursor is shown again after Ctrl-C"
    assert "Traceback" not in after
    # nothing is left running: the test's own process ended with the sweep
    events = [json.loads(ln) for ln in marks.read_text().splitlines()]
    pids = sorted({e["pid"] for e in events})
    assert still_running(pids) == [], "the test's process outlived the sweep"

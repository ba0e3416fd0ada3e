"""One mode run: pytest in a private 0700 dir, supervised, with every witness of what happened gathered.

The test process gets exactly what the recipe needs (testenv.py). It runs in a
process group of its own, so a timeout or a Ctrl-C stops all of it, xdist
workers included, and never leaves it running into a removed dir. The run
gathers, separately: pytest's exit code, the probe's report and the digest the
probe sent through a pipe, the junit file, and the progress file that names the
tests that were running when a run was stopped. The verdict weighs them.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from packaging.version import Version

import ort_matrix_probe
from ort_matrix_probe.epcensus import KINDS
from ort_matrix_probe.isolation import ISOLATION_ENV  # the suite's isolation: restore, report or off
from ort_matrix_probe.isolation import MODES as ISOLATIONS
from ort_matrix_probe.keepwait import WAIT_ENV
from ort_matrix_probe.schema import READS_REPORTS, ProbeReport

from ..envs.venvs import Venv, importable
from ..host.gpumem import PeakSampler
from ..host.host import Resolved
from ..plan.cells import Cell
from ..util.fs import copy_atomic, write_atomic
from ..util.orphans import die_with_parent
from .testenv import mode_env

PROBE = "ort_matrix_probe"
PROBE_PLUGIN = f"{PROBE}.plugin"
PROBE_SOURCE = Path(ort_matrix_probe.__file__).parent
KEEP_ENV = "ORT_MATRIX_KEEP"  # the probe reads the node ids to keep from this file (a JSON list)
WAIT_BOUND_S = 86400  # a teeth started early: how long its processes may wait for the keep file
STOP_GRACE_S = 10.0  # after SIGINT, how long pytest may take to write its report before SIGKILL


@dataclass(frozen=True)
class KeepLater:
    """The node ids of a teeth started early (issue 24): `basis` (its last run's) narrows the files it starts on;
    `resolve()` blocks until require_cudnn's census is stored and returns what to keep, or None: not to run."""

    basis: Sequence[str]
    resolve: Callable[[], Sequence[str] | None]
    workers: Callable[[Sequence[str]], list[str]]  # the -n arguments a run of these node ids gets (few_workers)


class EarlyAbandoned(Exception):
    """A teeth started early was stopped before any test ran: it has no census, or its census needs other
    files than it started on (`keep`: what it needs). The caller decides what to run instead."""

    def __init__(self, keep: Sequence[str] | None, waited_s: float) -> None:
        super().__init__("no census" if keep is None else "the census needs other test files")
        self.keep, self.waited_s = keep, waited_s


class Interrupted(KeyboardInterrupt):
    """SIGTERM, turned into what nox already handles for Ctrl-C: stop this session and the rest."""


@dataclass(frozen=True)
class Progress:
    """What the probe's progress file says: items collected, tests started and not yet ended."""

    collected: int | None = None
    started: tuple[str, ...] = ()
    running: tuple[str, ...] = ()


@dataclass
class RunOutcome:
    exit_code: int | None  # None: the run was stopped before pytest ended on its own
    workdir: Path
    log: Path
    junit: Path
    report_path: Path
    report: ProbeReport | None
    report_sha256: str | None  # of the file as the engine read it
    report_problem: str | None
    digest: str | None  # what the probe sent through the pipe
    progress: Progress
    env: dict[str, str]
    started: float
    duration_s: float
    command: list[str] = field(default_factory=list)
    stopped: str | None = None  # "interrupted (SIGINT)", "timed out after 5 s"
    interrupt: KeyboardInterrupt | None = None  # re-raised once the result is stored
    gpu_memory: dict[str, object] | None = None  # its peak GPU memory, where nvidia-smi could tell (gpumem.py)
    given: dict[str, str] = field(default_factory=dict)  # set over this process's environment: a slot's GPU


def install_probe(venv: Venv) -> None:
    """Copy the probe package into the venv: the test process imports it from there, never from this repo."""
    target = venv.site_packages / PROBE
    target.mkdir(parents=True, exist_ok=True)
    sources = {p.name for p in PROBE_SOURCE.glob("*.py")}
    for name in sorted(sources):
        copy_atomic(PROBE_SOURCE / name, target / name)
    for stale in target.glob("*.py"):
        if stale.name not in sources:
            stale.unlink()


def _stop_group(proc: subprocess.Popen[str], grace: float) -> None:
    """SIGINT to the whole group (pytest writes its report on it), SIGKILL whatever is left after `grace`."""
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGINT:
                os.killpg(proc.pid, signal.SIGKILL)  # workers that outlived their controller
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def _pump(stream: object, sink: object, echo: Callable[[str], None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        sink.write(line)  # type: ignore[attr-defined]
        sink.flush()  # type: ignore[attr-defined]
        echo(line.rstrip("\n"))


def _read_progress(path: Path) -> Progress:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return Progress()
    collected = None
    started: list[str] = []
    ended: set[str] = set()
    for line in lines:
        event, _, value = line.partition("\t")
        if event == "collected" and value.isdigit():
            collected = max(collected or 0, int(value))
        elif event == "start":
            started.append(value)
        elif event == "end":
            ended.add(value)
    return Progress(collected, tuple(started), tuple(n for n in dict.fromkeys(started) if n not in ended))


def _read_digest(fd: int) -> str | None:
    os.set_blocking(fd, False)
    chunks = []
    try:
        while True:
            block = os.read(fd, 4096)
            if not block:
                break
            chunks.append(block)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    text = b"".join(chunks).decode(errors="replace").strip()
    return text or None


class _Signals:
    """While a run is in progress: SIGTERM raises Interrupted; once stopping, a second signal exits at once."""

    def __init__(self) -> None:
        self.saved: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            self.saved[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._terminate)
        return self

    @staticmethod
    def _terminate(signum: int, frame: FrameType | None) -> None:
        raise Interrupted("SIGTERM")

    def stopping(self, proc: subprocess.Popen[str], workdir: Path) -> None:
        """From now on a second SIGINT or SIGTERM kills the group, removes the private dir and exits."""
        def at_once(signum: int, frame: FrameType | None) -> None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            shutil.rmtree(workdir, ignore_errors=True)
            os._exit(128 + signum)

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved.setdefault(sig, signal.getsignal(sig))
                signal.signal(sig, at_once)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def not_started(workdir: Path, why: str) -> RunOutcome:
    """The outcome of a run that was refused before pytest started: nothing ran, and its log says why."""
    log = workdir / "pytest.log"
    log.write_text(f"ort-gpu-matrix: not run: {why}\n")
    return RunOutcome(None, workdir, log, workdir / "junit.xml", workdir / "report.json", None, None, None, None,
                      Progress(), {}, time.time(), 0.0)


def narrowed(files: Sequence[str], root: str, keep: Sequence[str]) -> list[str]:
    """The test files (or dirs) that hold a kept node id: the others need not even be imported.

    Node ids are relative to the root (pytest runs with --rootdir there). A file outside the root is
    kept, since its ids cannot be told apart; and if nothing matched at all, every file is kept (the
    probe's selection still applies).
    """
    wanted = {nodeid.split("::", 1)[0] for nodeid in keep}
    out = []
    for f in files:
        rel = os.path.relpath(f, root).replace(os.sep, "/")
        if rel.startswith("../") or rel in wanted or any(w.startswith(rel.rstrip("/") + "/") for w in wanted):
            out.append(f)
    return out or list(files)


def run_mode(cell: Cell, r: Resolved, venv: Venv, mode: str, workdir: Path, posargs: Sequence[str],
             echo: Callable[[str], None] = print, say: Callable[[str], None] = print,
             keep: Sequence[str] | None = None, given: Mapping[str, str] | None = None,
             started_group: Callable[[int], None] | None = None, later: KeepLater | None = None) -> RunOutcome:
    """Run pytest for one mode in `workdir` (a private dir the caller removes), and gather the witnesses.

    `started_group`: told pytest's process group id once it exists, so that a caller running this in a
    thread (confirm.py's overlapped reruns), where no signal arrives, can stop it on the main thread's interrupt.

    `keep`: run only these node ids (a scoped teeth). They go to the probe in a file, which keeps
    exactly those items at collection, in every xdist worker alike: no node id is parsed as a
    command-line argument, and no command line grows with the number of tests.
    `given`: set over this process's environment before the mode's own, as a slot sets its GPU (gpus.slot_env):
    a confirmation rerun in the sweep's process runs under the GPU of the run it confirms.
    `later` (instead of `keep`): a teeth started early. pytest starts on the files of `later.basis` and its
    processes wait after collection (keepwait.py) while this waits for `later.resolve()`, then the keep file is
    written and the tests run; the run's start, duration and timeout count from that moment. Where there is no
    census, or it needs other files, pytest is stopped before any test and EarlyAbandoned raised.
    """
    install_probe(venv)
    ini = workdir / "pytest.ini"
    ini.write_text("[pytest]\n")
    junit, log, report_path, progress = (workdir / "junit.xml", workdir / "pytest.log", workdir / "report.json",
                                         workdir / "progress.tsv")
    digest_r, digest_w = os.pipe()
    channels = {"ORT_MATRIX_REPORT": str(report_path), "ORT_MATRIX_PROGRESS": str(progress),
                "ORT_MATRIX_DIGEST_FD": str(digest_w), ISOLATION_ENV: cell.suite.isolation, **({"ORT_MATRIX_LOADER": r.loader_spec} if r.loader_spec else {})}
    files = list(r.test_files)
    selection = workdir / "keep.json"
    if keep is not None:
        selection.write_text(json.dumps(sorted(keep)))
        channels[KEEP_ENV] = str(selection)
        files = narrowed(files, r.suite_root, keep)
    elif later is not None:
        channels[KEEP_ENV] = str(selection)
        # bounded only against an engine that died without stopping them (they die with it): require_cudnn may
        # wait for its session's lock, then run up to its own timeout
        channels[WAIT_ENV] = str(WAIT_BOUND_S)
        files = narrowed(files, r.suite_root, later.basis)
    suite = cell.suite
    env, applied = mode_env(mode, suite.provider_options, suite.env, r.preload, r.pythonpath, venv.path, channels,
                            {**os.environ, **(given or {})})
    safe_path = ["-P"] if Version(cell.python) >= Version("3.11") else []  # older: PYTHONSAFEPATH is moot, cwd is private
    plugins = ["-p", PROBE_PLUGIN]
    if importable(venv.site_packages, "xdist"):  # autoload is off: -n needs xdist loaded by name
        plugins += ["-p", "xdist.plugin"]
    if suite.test_timeout is not None:
        plugins += ["-p", "pytest_timeout", f"--timeout={suite.test_timeout}"]
    for name in suite.plugins:
        plugins += ["-p", name]
    cmd = [str(venv.python), *safe_path, "-m", "pytest", *plugins, "-c", str(ini), "--rootdir", r.suite_root,
           "--confcutdir", r.suite_root, "-o", f"cache_dir={workdir / '.pytest_cache'}",
           f"--junitxml={junit}", *suite.pytest_args, *posargs, *files]
    say(f"$ {shlex.join(cmd)}")
    started = time.time()
    stopped: str | None = None
    interrupt: KeyboardInterrupt | None = None
    code: int | None = None
    with _Signals() as signals, log.open("w") as sink:
        try:
            proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace", pass_fds=(digest_w,),
                                    start_new_session=True, preexec_fn=functools.partial(die_with_parent, os.getpid()))
        finally:
            os.close(digest_w)
        if started_group is not None:
            started_group(proc.pid)
        pump = threading.Thread(target=_pump, args=(proc.stdout, sink, echo), daemon=True)
        sampler = PeakSampler(proc.pid, env.get("CUDA_VISIBLE_DEVICES"))
        try:  # from here on, any interrupt stops the group that now exists, however early it comes
            pump.start()
            with sampler:
                if later is not None:
                    _hand_over(later, proc, selection, files, r.suite_root, list(r.test_files), say)
                    started = time.time()  # the tests start now: what came before was require_cudnn's time
                code = proc.wait(timeout=suite.timeout)
        except subprocess.TimeoutExpired:
            stopped = f"timed out after {suite.timeout} s"
            say(f"{stopped}: stopping pytest's process group (pid {proc.pid})")
            _stop_group(proc, STOP_GRACE_S)
        except KeyboardInterrupt as exc:
            name = "SIGTERM" if isinstance(exc, Interrupted) else "SIGINT"
            stopped, interrupt = f"interrupted ({name})", exc
            signals.stopping(proc, workdir)
            say(f"{name}: stopping pytest (pid {proc.pid}) and writing the result; "
                "a second Ctrl-C exits at once")
            _stop_group(proc, STOP_GRACE_S)
        except EarlyAbandoned as exc:  # pytest was stopped before any test: nothing here is a run's witness
            pump.join(timeout=30)
            os.close(digest_r)
            sink.write(f"\nort-gpu-matrix: stopped before any test ({exc}) after {exc.waited_s} s of waiting\n")
            raise
        pump.join(timeout=30)
        if stopped:
            sink.write(f"\nort-gpu-matrix: {stopped} after {time.time() - started:.1f} s\n")
    duration = time.time() - started
    report, sha, problem = _read_report(report_path)
    return RunOutcome(code, workdir, log, junit, report_path, report, sha, problem, _read_digest(digest_r),
                      _read_progress(progress), applied, started, round(duration, 3), cmd, stopped, interrupt,
                      sampler.result(), dict(given or {}))


def _hand_over(later: KeepLater, proc: subprocess.Popen[str], selection: Path, files: Sequence[str], root: str,
               every: Sequence[str], say: Callable[[str], None]) -> None:
    """Wait for the census; write the keep file, or stop pytest (before any test) and raise EarlyAbandoned: where
    a run of what it keeps would collect other files, or get another -n, than this one started with."""
    waiting = time.time()
    keep = later.resolve()
    waited = round(time.time() - waiting, 3)
    same_n = keep is not None and later.workers(keep) == later.workers(later.basis)
    if keep is not None and narrowed(every, root, keep) == list(files) and same_n:
        write_atomic(selection, json.dumps(sorted(keep)))  # renamed into place: a process never reads half of it
        say(f"census handed over after {waited} s of waiting: {len(keep)} test(s) to keep")
        return
    _stop_group(proc, STOP_GRACE_S)
    raise EarlyAbandoned(keep, waited)


# The report's top-level keys and their JSON types: anything else is not a report this engine reads.
_REPORT_SHAPE: dict[str, type | tuple[type, ...]] = {
    "report_version": int, "exitstatus": int, "duration_s": (int, float), "collected": dict, "tests": dict,
    "collection": list, "audits": list, "outside_tests_sdpa": list, "unattributed_sdpa": list, "provenance": dict,
    "isolation": str, "pollution": list}


def report_problem(report: object) -> str | None:
    """Why `report` cannot be judged, or None: the file is written inside the test process, so it is checked."""
    if not isinstance(report, dict):
        return "the probe's report is not a JSON object"
    for key, kind in _REPORT_SHAPE.items():
        if not isinstance(report.get(key), kind):
            return f"the probe's report is malformed: {key!r} is missing or has the wrong type"
    if report["report_version"] not in READS_REPORTS:
        return (f"the probe's report has report_version {report['report_version']}, this engine reads "
                f"{', '.join(map(str, READS_REPORTS))}")
    for nodeid, entry in report["tests"].items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sdpa"), list)
                and isinstance(entry.get("message"), str) and entry.get("outcome") in _OUTCOMES):
            return f"the probe's report is malformed: the entry of {nodeid!r}"
        if not isinstance(entry.get("ep", []), list) or not all(_ep_use(u) for u in entry.get("ep", [])):
            return f"the probe's report is malformed: the EP census of {nodeid!r}"
    for key, needed in (("audits", ("by_name", "cudnn_copies")), ("collection", ("nodeid", "outcome", "message"))):
        if not all(isinstance(e, dict) and all(k in e for k in needed) for e in report[key]):
            return f"the probe's report is malformed: an entry of {key!r}"
    if report["isolation"] not in ISOLATIONS:
        return f"the probe's report is malformed: 'isolation' is {report['isolation']!r}, not one of {ISOLATIONS}"
    if not all(_pollution_entry(e) for e in report["pollution"]):
        return "the probe's report is malformed: an entry of 'pollution'"
    return None


def _pollution_entry(e: object) -> bool:
    """One polluter as the probe writes it (isolation.py); anything else in the file came from elsewhere."""
    def text_or_none(v: object) -> bool:
        return v is None or isinstance(v, str)

    return (isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("test", "scope", "process"))
            and isinstance(e.get("undone"), bool) and isinstance(e.get("later_tests"), int)
            and not isinstance(e.get("later_tests"), bool) and isinstance(e.get("changes"), list)
            and all(isinstance(c, dict) and isinstance(c.get("what"), str) and isinstance(c.get("name"), str)
                    and text_or_none(c.get("before")) and text_or_none(c.get("after")) for c in e["changes"]))


def _ep_use(u: object) -> bool:
    """One CUDA-asking session as the probe's census writes it (epcensus.py)."""
    def names(v: object) -> bool:
        return isinstance(v, list) and all(isinstance(x, str) for x in v)

    return (isinstance(u, dict) and isinstance(u.get("session"), int) and names(u.get("asked"))
            and names(u.get("served")) and isinstance(u.get("runs"), dict)
            and all(isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 0
                    for k, n in u["runs"].items())
            and u.get("fallback", KINDS[0]) in KINDS
            and all(isinstance(u.get(k, ""), str) for k in ("reason", "error")))


_OUTCOMES = (None, "passed", "failed", "skipped", "error", "xfailed", "xpassed")


def _read_report(path: Path) -> tuple[ProbeReport | None, str | None, str | None]:
    """The report, the sha256 of its bytes, and why it cannot be judged (if it cannot)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None, None, None
    try:
        report = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, hashlib.sha256(data).hexdigest(), "the probe's report is not valid JSON"
    problem = report_problem(report)
    return (None if problem else report), hashlib.sha256(data).hexdigest(), problem


def remove_workdir(workdir: Path) -> None:
    shutil.rmtree(workdir, ignore_errors=True)

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
import json
import os
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

import ort_matrix_probe
from ort_matrix_probe.isolation import ISOLATION_ENV  # the suite's isolation: restore, report or off
from ort_matrix_probe.keepwait import WAIT_ENV
from ort_matrix_probe.schema import DROP_ENV, KEEP_ENV, ProbeReport  # files of node ids to keep, or not to run

from ..envs.venvs import Venv, importable
from ..host.gpumem import PeakSampler
from ..util.fs import copy_atomic, write_atomic
from ..util.orphans import die_with_parent
from ..util.voice import Voice
from .group import STOP_GRACE_S, Interrupted, Signals, stop_group
from .probe_report import read_report
from .request import KeepLater, Launch, ModeRun
from .testenv import mode_env

PROBE = "ort_matrix_probe"
PROBE_PLUGIN = f"{PROBE}.plugin"
PROBE_SOURCE = Path(ort_matrix_probe.__file__).parent

WAIT_BOUND_S = 86400  # a teeth started early: how long its processes may wait for the keep file


class EarlyAbandoned(Exception):
    """A teeth started early was stopped before any test ran: it has no census, or its census needs other
    files than it started on (`keep`: what it needs). The caller decides what to run instead."""

    def __init__(self, keep: Sequence[str] | None, waited_s: float, why: str) -> None:
        super().__init__(why)
        self.keep, self.waited_s = keep, waited_s


@dataclass(frozen=True)
class ProbeProgress:
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
    progress: ProbeProgress
    env: dict[str, str]
    started: float
    duration_s: float
    command: list[str] = field(default_factory=list)
    stopped: str | None = None  # "interrupted (SIGINT)", "timed out after 5 s"
    interrupt: KeyboardInterrupt | None = None  # re-raised once the result is stored
    gpu_memory: dict[str, object] | None = None  # its peak GPU memory, where nvidia-smi could tell (gpumem.py)
    given: dict[str, str] = field(default_factory=dict)  # set over this process's environment: a slot's GPU
    dropped: int = 0  # node ids the engine told the probe not to run (Launch.drop): all of them gone, pytest exits 5


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


def _pump(stream: object, sink: object, voice: Voice) -> None:
    for line in stream:  # type: ignore[attr-defined]
        sink.write(line)  # type: ignore[attr-defined]
        sink.flush()  # type: ignore[attr-defined]
        voice.echo(line.rstrip("\n"))


def _read_progress(path: Path) -> ProbeProgress:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ProbeProgress()
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
    return ProbeProgress(collected, tuple(started), tuple(n for n in dict.fromkeys(started) if n not in ended))


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


def not_started(workdir: Path, why: str) -> RunOutcome:
    """The outcome of a run that was refused before pytest started: nothing ran, and its log says why."""
    log = workdir / "pytest.log"
    log.write_text(f"ort-gpu-matrix: not run: {why}\n")
    return RunOutcome(None, workdir, log, workdir / "junit.xml", workdir / "report.json", None, None, None, None,
                      ProbeProgress(), {}, time.time(), 0.0)


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


@dataclass(frozen=True)
class _Files:
    """The paths of one run's witnesses inside its private dir."""

    workdir: Path

    @property
    def ini(self) -> Path:
        return self.workdir / "pytest.ini"

    @property
    def junit(self) -> Path:
        return self.workdir / "junit.xml"

    @property
    def log(self) -> Path:
        return self.workdir / "pytest.log"

    @property
    def report(self) -> Path:
        return self.workdir / "report.json"

    @property
    def progress(self) -> Path:
        return self.workdir / "progress.tsv"

    @property
    def selection(self) -> Path:
        return self.workdir / "keep.json"

    @property
    def dropped(self) -> Path:
        return self.workdir / "drop.json"


def _channels(run: ModeRun, files: _Files, digest_w: int, launch: Launch) -> tuple[dict[str, str], list[str]]:
    """What the probe is told (where to write, what to keep) and the test files pytest starts on."""
    r = run.resolved
    channels = {"ORT_MATRIX_REPORT": str(files.report), "ORT_MATRIX_PROGRESS": str(files.progress),
                "ORT_MATRIX_DIGEST_FD": str(digest_w), ISOLATION_ENV: run.cell.suite.isolation,
                **({"ORT_MATRIX_LOADER": r.loader_spec} if r.loader_spec else {})}
    tests = list(r.test_files)
    if launch.drop:
        files.dropped.write_text(json.dumps(sorted(launch.drop)))
        channels[DROP_ENV] = str(files.dropped)
    if launch.keep is not None:
        files.selection.write_text(json.dumps(sorted(launch.keep)))
        channels[KEEP_ENV] = str(files.selection)
        tests = narrowed(tests, r.suite_root, launch.keep)
    elif launch.later is not None:
        channels[KEEP_ENV] = str(files.selection)
        # bounded only against an engine that died without stopping them (they die with it): require_cudnn may
        # wait for its session's lock, then run up to its own timeout
        channels[WAIT_ENV] = str(WAIT_BOUND_S)
        tests = narrowed(tests, r.suite_root, launch.later.basis)
    return channels, tests


def _command(run: ModeRun, files: _Files, posargs: Sequence[str], tests: Sequence[str]) -> list[str]:
    suite, venv, root = run.cell.suite, run.venv, run.resolved.suite_root
    safe_path = ["-P"] if Version(run.cell.python) >= Version("3.11") else []  # older: PYTHONSAFEPATH is moot, cwd is private
    plugins = ["-p", PROBE_PLUGIN]
    if importable(venv.site_packages, "xdist"):  # autoload is off: -n needs xdist loaded by name
        plugins += ["-p", "xdist.plugin"]
    if suite.test_timeout is not None:
        plugins += ["-p", "pytest_timeout", f"--timeout={suite.test_timeout}"]
    for name in suite.plugins:
        plugins += ["-p", name]
    return [str(venv.python), *safe_path, "-m", "pytest", *plugins, "-c", str(files.ini), "--rootdir", root,
            "--confcutdir", root, "-o", f"cache_dir={files.workdir / '.pytest_cache'}",
            f"--junitxml={files.junit}", *suite.pytest_args, *posargs, *tests]


@dataclass
class _Supervisor:
    """Waits for one pytest process group: the handover of an early teeth first, then its end, a timeout or
    an interrupt, which stop the whole group. What it saw is kept on it for the outcome."""

    run: ModeRun
    files: _Files
    launch: Launch
    tests: list[str]
    voice: Voice
    started: float = field(default_factory=time.time)
    code: int | None = None
    stopped: str | None = None
    interrupt: KeyboardInterrupt | None = None
    gpu_memory: dict[str, object] | None = None

    def wait(self, proc: subprocess.Popen[str], pump: threading.Thread, signals: Signals, gpu: str | None) -> None:
        suite, log = self.run.cell.suite, self.voice.log
        sampler = PeakSampler(proc.pid, gpu)
        try:  # from here on, any interrupt stops the group that now exists, however early it comes
            pump.start()
            with sampler:
                if self.launch.later is not None:
                    self.hand_over(self.launch.later, proc)
                    self.started = time.time()  # the tests start now: what came before was require_cudnn's time
                self.code = proc.wait(timeout=suite.timeout)
        except subprocess.TimeoutExpired:
            self.stopped = f"timed out after {suite.timeout} s"
            log(f"{self.stopped}: stopping pytest's process group (pid {proc.pid})")
            stop_group(proc, STOP_GRACE_S)
        except KeyboardInterrupt as exc:
            name = "SIGTERM" if isinstance(exc, Interrupted) else "SIGINT"
            self.stopped, self.interrupt = f"interrupted ({name})", exc
            signals.stopping(proc, self.files.workdir)
            log(f"{name}: stopping pytest (pid {proc.pid}) and writing the result; a second Ctrl-C exits at once")
            stop_group(proc, STOP_GRACE_S)
        finally:
            pump.join(timeout=30)
        self.gpu_memory = sampler.result()

    def hand_over(self, later: KeepLater, proc: subprocess.Popen[str]) -> None:
        """Wait for the census; write the keep file, or stop pytest (before any test) and raise EarlyAbandoned:
        where a run of what it keeps would collect other files, or get another -n, than this one started with."""
        waiting = time.time()
        kept = later.resolve()
        waited = round(time.time() - waiting, 3)
        keep = None if kept is None else kept.ids
        same_n = kept is not None and list(kept.workers) == list(later.workers)
        r = self.run.resolved
        if keep is not None and narrowed(list(r.test_files), r.suite_root, keep) == list(self.tests) and same_n:
            write_atomic(self.files.selection, json.dumps(sorted(keep)))  # renamed into place: never read half
            self.voice.log(f"census handed over after {waited} s of waiting: {len(keep)} test(s) to keep")
            return
        stop_group(proc, STOP_GRACE_S)
        raise EarlyAbandoned(keep, waited, "no census" if keep is None else "the census needs another -n"
                             if not same_n else "the census needs other test files")


def run_mode(run: ModeRun, workdir: Path, posargs: Sequence[str], voice: Voice,
             launch: Launch | None = None) -> RunOutcome:
    """Run pytest for one mode in `workdir` (a private dir the caller removes), and gather the witnesses."""
    launch = launch or Launch()
    install_probe(run.venv)
    files = _Files(workdir)
    files.ini.write_text("[pytest]\n")
    digest_r, digest_w = os.pipe()
    channels, tests = _channels(run, files, digest_w, launch)
    suite, r = run.cell.suite, run.resolved
    env, applied = mode_env(run.mode, suite, r, run.venv.path, channels, {**os.environ, **launch.given})
    cmd = _command(run, files, posargs, tests)
    voice.log(f"$ {shlex.join(cmd)}")
    watch = _Supervisor(run, files, launch, tests, voice)
    with Signals() as signals, files.log.open("w") as sink:
        try:
            proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace", pass_fds=(digest_w,),
                                    start_new_session=True, preexec_fn=functools.partial(die_with_parent, os.getpid()))
        finally:
            os.close(digest_w)
        if launch.started_group is not None:
            launch.started_group(proc.pid)
        try:
            watch.wait(proc, threading.Thread(target=_pump, args=(proc.stdout, sink, voice), daemon=True), signals,
                       env.get("CUDA_VISIBLE_DEVICES"))
        except EarlyAbandoned as exc:  # pytest was stopped before any test: nothing here is a run's witness
            os.close(digest_r)
            sink.write(f"\nort-gpu-matrix: stopped before any test ({exc}) after {exc.waited_s} s of waiting\n")
            raise
        if watch.stopped:
            sink.write(f"\nort-gpu-matrix: {watch.stopped} after {time.time() - watch.started:.1f} s\n")
    duration = time.time() - watch.started
    report, sha, problem = read_report(files.report)
    return RunOutcome(watch.code, workdir, files.log, files.junit, files.report, report, sha, problem,
                      _read_digest(digest_r), _read_progress(files.progress), applied, watch.started,
                      round(duration, 3), cmd, watch.stopped, watch.interrupt, watch.gpu_memory,
                      dict(launch.given), len(launch.drop))


def remove_workdir(workdir: Path) -> None:
    shutil.rmtree(workdir, ignore_errors=True)

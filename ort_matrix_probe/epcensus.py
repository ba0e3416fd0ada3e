"""Which execution provider served each session that asked for the CUDA EP, and how many runs each served.

A CUDA test can pass on the CPU with nothing raised, in three ways, and its values still match:
- ORT's C++ layer skips a CUDA EP whose library does not load, logs why on fd 2, and builds the
  session on the CPU;
- ORT's Python `InferenceSession` catches the EP error of a CUDA session and retries it on the CPU;
- `Session.run` catches `EPFail`, switches the session to the CPU and runs it again.
So the census asks ORT itself. It wraps the one method every session is built through
(`_create_inference_session`: from `__init__`, `set_providers` and both fallbacks) and every run entry
point, and keeps, per test, each session that asked for the CUDA EP which the test built or ran: what
it asked for, what served it (`get_providers()`), why the CUDA EP did not serve (ORT's own words where
it said any) and how many runs each EP served. A session that never asked for the CUDA EP costs one
attribute lookup per call.
"""
from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from . import placement
from .fdtap import FdTap
from .schema import REASON_CHARS, first_line

CUDA_EP = "CUDAExecutionProvider"
RUN_METHODS = ("run", "run_with_iobinding", "run_with_ort_values", "run_with_ortvaluevector", "run_async")
PROVIDER_LIB = "libonnxruntime_providers_cuda.so"
_STATE = "_ort_matrix_ep"  # the Tracked record on each session object that asked for the CUDA EP

# how the CUDA EP came not to serve a session that asked for it
NOT_IN_BUILD = "not_in_build"  # the wheel has no CUDA EP (the CPU wheel)
NOT_LOADED = "not_loaded"  # ORT's C++ layer skipped it and served the CPU, nothing raised
RETRIED = "retried"  # ORT's Python wrapper caught the creation's EP error and retried on the CPU
RUN_FALLBACK = "run_fallback"  # Session.run caught EPFail and switched the session to the CPU
KINDS = (NOT_IN_BUILD, NOT_LOADED, RETRIED, RUN_FALLBACK)
_ORT_SAID = re.compile(r"(Failed to (?:load library|create CUDAExecutionProvider).*)")
_LOG_ERROR = re.compile(r"\[[EF]:onnxruntime:[^\]]*\]\s*(.*)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def provider_names(providers: Any) -> list[str]:
    """The EP names of a providers argument in any of its forms (names, (name, options) pairs)."""
    out = []
    for p in providers or ():
        if isinstance(p, str):
            out.append(p)
        elif isinstance(p, (tuple, list)) and p and isinstance(p[0], str):
            out.append(p[0])
    return out


def ort_log_reason(data: bytes) -> str | None:
    """ORT's own line for a CUDA EP it skipped: the library that would not load, else its first error."""
    text = _ANSI.sub("", data.decode("utf-8", "replace"))
    said = [m.group(1) for m in map(_ORT_SAID.search, text.splitlines()) if m]
    said.sort(key=lambda line: "providers_cuda" not in line and CUDA_EP not in line)  # the CUDA EP's own first
    if said:
        return said[0].strip()[:REASON_CHARS]
    errors = [m.group(1) for m in map(_LOG_ERROR.search, text.splitlines()) if m and m.group(1).strip()]
    return errors[0].strip()[:REASON_CHARS] if errors else None


_LOAD_REASONS: dict[str, str] = {}
_TRY_LOAD = "import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\nexcept OSError as exc:\n    print(exc)\n"


def load_reason(capi_dir: str) -> str:
    """Why the CUDA EP's library does not load, asked of the dynamic loader (ORT logged nothing we read).

    Asked in a child process with this one's environment, once per process: a load that succeeds must not
    map the CUDA provider and its cuBLAS and cuDNN into the test process (the library audit reads its maps)."""
    if capi_dir in _LOAD_REASONS:
        return _LOAD_REASONS[capi_dir]
    lib = os.path.join(capi_dir, PROVIDER_LIB)
    if not os.path.exists(lib):
        said = f"{CUDA_EP} is listed as available but {PROVIDER_LIB} is not in {capi_dir}"[:REASON_CHARS]
    else:
        try:
            err = subprocess.run([sys.executable, "-c", _TRY_LOAD, lib], capture_output=True, text=True,
                                 timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            err = ""
        # dlerror's words, as ORT's own log line quotes them: the two group as one reason
        said = first_line(f"Failed to load library {PROVIDER_LIB} with error: {err}") if err else (
            f"{CUDA_EP} did not serve the session and ORT logged no reason on fd 2 (its log severity may hide it); "
            f"{PROVIDER_LIB} itself loads")[:REASON_CHARS]
    _LOAD_REASONS[capi_dir] = said
    return said


class Tracked:
    """One session that asked for the CUDA EP: what it asked for, what serves it, and any fallback."""

    __slots__ = ("sid", "asked", "served", "error", "fallback", "reason", "native", "placements", "placed", "unseen")

    def __init__(self, sid: int, asked: list[str]) -> None:
        self.sid, self.asked = sid, asked
        self.served: list[str] | None = None  # None: no creation has succeeded yet
        self.error: str | None = None  # the first line of what the last failed creation raised
        self.fallback: str | None = None  # one of KINDS while the session is fallen back
        self.reason: str | None = None  # ORT's words for it; resolved late for NOT_LOADED (see reason_of)
        self.native: list[bytes] = []  # fd 2 while a CUDA creation ran
        self.placements: list[placement.Placement] = []  # each build's node placement (placement.py), in order
        self.placed: int | None = None  # the index in placements of the build serving now; None: unseen
        self.unseen: str | None = None  # why the serving build's placement is unknown (None: seen, or not asked)

    @property
    def serving(self) -> str:
        """The EP a run is counted for: the CUDA EP when it is among the served, else the first served."""
        if not self.served:
            return "none"
        return CUDA_EP if CUDA_EP in self.served else self.served[0]


class Use:
    """What one test did with one tracked session: its runs per EP, and the fallback it met."""

    __slots__ = ("runs", "fallback", "placed", "unseen")

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.fallback: str | None = None
        self.placed: dict[int, int] = {}  # a placement the test met (its index in Tracked.placements) -> its runs
        self.unseen: str | None = None  # why a build the test met has no placement


class EpCensus:
    """One pytest session's census of CUDA-asking sessions, attributed to the test that is current."""

    def __init__(self, current: Callable[[], str], nodes: bool = True) -> None:
        self.current = current
        self.nodes = nodes  # the node census: each CUDA-asking session's placement per node (placement.py)
        self.uses: dict[str, dict[int, Use]] = {}
        self.sessions: dict[int, Tracked] = {}
        self.capi_dir: str | None = None
        self._c: Any = None  # ORT's C module: asked what the build offers when a session is built
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._waiting: list[Tracked] = []  # creations whose fd 2 window is open
        self._tap = FdTap(self._on_fd2, fd=2, tee=True)

    def bind(self, module: ModuleType) -> None:
        """ORT's module that defines InferenceSession: where its capi dir is, and what the build offers."""
        self.capi_dir = os.path.dirname(os.path.abspath(str(module.__file__)))
        self._c = getattr(module, "C", None)

    def _available(self) -> list[str]:
        try:
            return [str(p) for p in self._c.get_available_providers()]
        except Exception:  # an ORT without it: nothing is known to be available
            return []

    def _use(self, t: Tracked) -> Use:
        per_test = self.uses.setdefault(self.current(), {})
        use = per_test.get(t.sid)
        if use is None:
            use = per_test[t.sid] = Use()
        return use

    def _met(self, t: Tracked, runs: int = 0) -> Use:
        """The current test's use of `t`, with the placement serving now and `runs` more of it: the test met it,
        run or not."""
        use = self._use(t)
        if t.placed is not None:
            use.placed[t.placed] = use.placed.get(t.placed, 0) + runs
        elif t.unseen is not None:
            use.unseen = use.unseen or t.unseen
        return use

    def _ask(self, session: Any) -> str | None:
        """Ask ORT to record the coming build's placement; why it will not, where it will not."""
        return placement.ask(session, getattr(self._c, "SessionOptions", None)) if self.nodes else None

    def _placed(self, t: Tracked, session: Any, refused: str | None) -> None:
        """Read the placement of the build that just succeeded (or keep why it cannot be read). Only a build the
        CUDA EP serves has one worth keeping: another's every node is on the EP serving it, and the fallback that
        made it so is the EP census's to name."""
        if not self.nodes or CUDA_EP not in (t.served or ()):
            t.placed = t.unseen = None
            return
        seen = refused if refused is not None else placement.read(session)
        if isinstance(seen, str):
            t.placed, t.unseen = None, seen
        else:
            t.placements.append(seen)
            t.placed, t.unseen = len(t.placements) - 1, None

    def _on_fd2(self, data: bytes, cuda: bool) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, []
        if data:
            for t in waiting:
                t.native.append(data)

    @contextmanager
    def _fd2(self, t: Tracked) -> Iterator[None]:
        with self._lock:
            self._waiting.append(t)
        self._tap.enter(True)
        try:
            yield
        finally:
            self._tap.exit()

    def _fell_back(self, t: Tracked, kind: str, reason: str | None) -> None:
        t.fallback, t.reason = kind, reason
        self._use(t).fallback = kind

    def wrap_create(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """`_create_inference_session(self, providers, provider_options, ...)`, watched."""
        def create(session: Any, providers: Any, *args: Any, **kwargs: Any) -> Any:
            names = provider_names(providers)
            t: Tracked | None = getattr(session, _STATE, None)
            if CUDA_EP not in names:
                if t is None:
                    return original(session, providers, *args, **kwargs)
                return self._away_from_cuda(t, names, session, original, providers, *args, **kwargs)
            if t is None:
                t = Tracked(next(self._ids), names)
                self.sessions[t.sid] = t
                try:
                    setattr(session, _STATE, t)
                except AttributeError:
                    return original(session, providers, *args, **kwargs)
            t.asked = names
            self._use(t)  # the test that built it asked for CUDA, whether or not it ever runs it
            refused = self._ask(session)
            with self._fd2(t):
                try:
                    out = original(session, providers, *args, **kwargs)
                except BaseException as exc:
                    t.error = first_line(exc) or type(exc).__name__
                    raise
            t.served, t.error = _providers_of(session), None
            self._placed(t, session, refused)
            self._met(t)
            if CUDA_EP in t.served:
                t.fallback = t.reason = None
                t.native = []  # served: its creation's log explains nothing
            elif CUDA_EP not in (available := self._available()):
                listed = ", ".join(available) or "none"
                self._fell_back(t, NOT_IN_BUILD, f"{CUDA_EP} is not in this build (available: {listed})"[:REASON_CHARS])
            else:
                self._fell_back(t, NOT_LOADED, None)  # ORT's log line is read once its window closes
            return out

        return create

    def _away_from_cuda(self, t: Tracked, names: list[str], session: Any, original: Callable[..., Any],
                        *args: Any, **kwargs: Any) -> Any:
        """A tracked session rebuilt without the CUDA EP: ORT's retry of a failed creation, Session.run's
        EPFail fallback, or the test's own set_providers (no fallback: it asked for what it got)."""
        handled = sys.exc_info()[1]
        in_run = self._running().get(t.sid, 0) > 0  # this thread is inside a run of it: Session.run's fallback
        retried, was = t.served is None and t.error is not None, t.served
        refused = self._ask(session)
        out = original(session, *args, **kwargs)
        t.served = _providers_of(session)
        self._placed(t, session, refused)
        self._met(t)
        if retried:
            self._fell_back(t, RETRIED, t.error)
        elif in_run and was and CUDA_EP in was:
            said = first_line(handled) if handled is not None else ""
            self._fell_back(t, RUN_FALLBACK, said or f"set_providers({names}) during a run")
        else:
            t.asked = names
        return out

    def wrap_run(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """A run entry point, counted once per outermost call that returned, for the EP serving then."""
        def run(session: Any, *args: Any, **kwargs: Any) -> Any:
            t: Tracked | None = getattr(session, _STATE, None)
            if t is None:
                return original(session, *args, **kwargs)
            running = self._running()
            outermost = not any(running.values())  # a run entry point that calls another counts once
            running[t.sid] = running.get(t.sid, 0) + 1
            try:
                out = original(session, *args, **kwargs)
            finally:
                running[t.sid] -= 1
            if outermost:
                use = self._met(t, runs=1)
                ep = t.serving
                use.runs[ep] = use.runs.get(ep, 0) + 1
                if ep != CUDA_EP and t.fallback:
                    use.fallback = use.fallback or t.fallback
            return out

        return run

    def _running(self) -> dict[int, int]:
        """This thread's runs in progress, per tracked session."""
        running: dict[int, int] | None = getattr(self._local, "running", None)
        if running is None:
            running = self._local.running = {}
        return running

    def reason_of(self, t: Tracked) -> str | None:
        """ORT's reason for a fallback: resolved the first time it is asked, once fd 2 has been read."""
        if t.fallback == NOT_LOADED and t.reason is None:
            said = ort_log_reason(b"".join(t.native))
            t.reason = said or (load_reason(self.capi_dir) if self.capi_dir else "ORT gave no reason")
            t.native = []
        return t.reason

    def fold(self, key: str, into: str) -> None:
        """What was gathered under `key` (a subtest) added to `into` (its test): runs summed, first fallback kept."""
        for sid, use in self.uses.pop(key, {}).items():
            mine = self.uses.setdefault(into, {}).setdefault(sid, Use())
            for ep, n in use.runs.items():
                mine.runs[ep] = mine.runs.get(ep, 0) + n
            mine.fallback = mine.fallback or use.fallback
            for index, n in use.placed.items():
                mine.placed[index] = mine.placed.get(index, 0) + n
            mine.unseen = mine.unseen or use.unseen

    def take(self, test: str, keep: bool = False) -> list[dict[str, Any]]:
        """The test's entries (schema.EpUse), in the order it met its sessions; forgotten here unless `keep`."""
        out = []
        for sid, use in (self.uses.get(test, {}) if keep else self.uses.pop(test, {})).items():
            t = self.sessions[sid]
            entry: dict[str, Any] = {"session": sid, "asked": list(t.asked), "served": list(t.served or []),
                                     "runs": dict(use.runs)}
            if use.fallback:
                entry["fallback"], entry["reason"] = use.fallback, self.reason_of(t) or ""
            if t.served is None and t.error:
                entry["error"] = t.error
            if use.placed:
                entry["nodes"] = nodes_of(t, use)
            if use.unseen:
                entry["nodes_unseen"] = use.unseen
            out.append(entry)
        return out


def nodes_of(t: Tracked, use: Use) -> list[dict[str, Any]]:
    """Each node of the CUDA-served placements a test met, with the runs it made while each served (schema.NodeUse).
    A build the CUDA EP did not serve keeps no placement (every node of it is on the EP serving it), so a node
    that Session.run's fallback moved appears with the runs of its CUDA build alone; the EP census counts the rest."""
    runs: dict[tuple[str, str, str], int] = {}
    for index, n in use.placed.items():
        for ep, op, name in t.placements[index]:
            runs[(op, name, ep)] = runs.get((op, name, ep), 0) + n
    return [{"op": op, "name": name, "ep": ep, "runs": n} for (op, name, ep), n in runs.items()]


def _providers_of(session: Any) -> list[str]:
    try:
        return [str(p) for p in session.get_providers()]
    except Exception:  # a session whose creation failed half-way
        return []

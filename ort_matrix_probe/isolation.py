"""Pollution: process state a test changed and did not undo, named and (by default) undone.

A test that sets `os.environ["ORT_DISABLE_FLASH_ATTENTION"]` and never restores it changes the tier
of every later test of its process, so a verdict would depend on which tests xdist happened to run
before which. CPython's own runner saves the process state around each test, restores it and names
the test that changed it (ENV_CHANGED); this does the same inside the test process.

What is watched, and why (each is cheap to read and to put back):
- `os.environ`, whole: ORT reads its switches (ORT_DISABLE_FLASH_ATTENTION, ORT_ENABLE_ATTENTION_KERNEL_
  DEBUG_INFO, ...) with getenv when it builds a kernel, and os.environ writes go through putenv. The
  mode's own variables (ORT_TEST_REQUIRE_CUDNN_SDPA, the suite's env) are in it like any other;
  only PYTEST_CURRENT_TEST, which pytest itself sets and clears around every phase, is left out.
  A test that calls C setenv or os.putenv directly is not seen: os.environ cannot see it either.
- ORT's process-wide logger settings: severity, verbosity and the logger callback. The wheel has
  setters only (no getter in 1.32), so the setters are wrapped the moment the tests import
  onnxruntime (never imported from here) and the last value set is the state; "never set" is ORT's
  default (severity 2, verbosity 0, the platform logger), which is what a restore puts back.
- The working directory: not a dispatch switch, but ORT's tests load models and write files by
  relative path, so a test that chdirs and stays there changes what later tests open.
Not watched: sys.path and sys.modules (import-time state that collection already fixed for every
order), torch's backend flags (they pick torch's kernels, not ORT's; the probe may not import torch).

What counts, by pytest's scopes (its SetupState): a change made while a class-, module-, package- or
session-scoped fixture was set up (unittest's setUpClass and setup_module are such fixtures) belongs
to that scope: it holds for the scope's tests and is judged when the scope is torn down, at the
teardown of its last item (the scopes `nextitem` does not need). A setUpClass/tearDownClass pair that
cleans up is therefore no pollution. Anything else a test leaves behind, through its function-scoped
fixtures or its body, is the test's. A change left when a scope is torn down is named for that
scope's node id if its setup made it, else for the item whose teardown ran last (a scope's teardown
cannot be told apart from its last item's).

The state tests run under is the one after collection (import-time changes hold in every order,
since every process collects every file), plus the changes of the scopes that are set up.
`isolation` (ORT_MATRIX_ISOLATION): "restore" (default) names and undoes, "report" names only,
"off" does neither and costs nothing.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .onimport import AfterImport
from .schema import PollutionEntry, StateChange

ISOLATION_ENV = "ORT_MATRIX_ISOLATION"
MODES = ("restore", "report", "off")
CUT = 200  # characters of one value a report keeps: a PATH-sized variable must not fill it
LOGGER_DEFAULTS = {"severity": 2, "verbosity": 0}
_SETTERS = ("set_default_logger_severity", "set_default_logger_verbosity", "set_default_logger_callback")
_MARK = "_ort_matrix_isolation"
PYTEST_OWN = frozenset({"PYTEST_CURRENT_TEST"})  # pytest sets and clears it around every phase itself

State = dict[str, str | None]  # "env:NAME" / "cwd" / "ort_logger:severity" -> its value (None: unset)


def mode_of(value: str | None) -> str:
    """The isolation mode the harness asked for (unset: restore); anything else is a usage error."""
    mode = value or "restore"
    if mode not in MODES:
        raise ValueError(f"{ISOLATION_ENV}={value!r}: expected one of {', '.join(MODES)}")
    return mode


def cut(value: str | None) -> str | None:
    if value is None or len(value) <= CUT:
        return value
    return f"{value[:CUT]}… ({len(value)} characters)"


class OrtLogger:
    """ORT's default-logger settings as last set through its Python API, with the setters to put them back."""

    def __init__(self) -> None:
        self.state: dict[str, str | None] = {"severity": None, "verbosity": None, "callback": None}
        self.callbacks: dict[str, Any] = {}  # label -> the callable, so a restore can reinstall it
        self.original: dict[str, Any] = {}
        self.patched: list[tuple[ModuleType, str, Any]] = []
        self.finder: AfterImport | None = None

    def arm(self) -> None:
        module = sys.modules.get("onnxruntime")
        if module is not None:
            self._patch(module)
        else:
            self.finder = AfterImport("onnxruntime", self._patch, once=False).arm()

    def disarm(self) -> None:
        if self.finder is not None:
            self.finder.disarm()
        for module, name, original in self.patched:
            setattr(module, name, original)
        self.patched.clear()

    def _patch(self, package: ModuleType) -> None:
        targets = [package, sys.modules.get("onnxruntime.capi._pybind_state")]
        for name in _SETTERS:
            original = getattr(package, name, None)
            while original is not None and getattr(original, _MARK, False):
                original = getattr(original, "__wrapped__", None)
            if original is None:
                continue
            self.original[name] = original
            wrapper = self._wrapper(name, original)
            for module in targets:
                if module is not None and hasattr(module, name):
                    self.patched.append((module, name, getattr(module, name)))
                    setattr(module, name, wrapper)

    def _wrapper(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            self._record(name, args, kwargs)
            return result

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(wrapper, _MARK, True)
        wrapper.__name__ = name
        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    def _record(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        def arg(i: int, key: str, default: Any) -> Any:
            return args[i] if len(args) > i else kwargs.get(key, default)

        if name == "set_default_logger_callback":
            callback = arg(0, "callback", None)
            if callback is None:
                self.state["callback"] = None
                return
            label = f"{getattr(callback, '__qualname__', type(callback).__name__)} at {id(callback):#x}"
            self.callbacks[label] = callback
            self.state["callback"] = label
            self.state["severity"] = str(int(arg(1, "severity", LOGGER_DEFAULTS["severity"])))
        else:
            key = "severity" if name.endswith("severity") else "verbosity"
            self.state[key] = str(int(arg(0, key, 0)))

    def snapshot(self) -> State:
        return {f"ort_logger:{k}": v for k, v in self.state.items()}

    def restore(self, target: State) -> None:
        """Back to `target`'s settings, the callback first (installing one sets the severity)."""
        want = {k: target.get(f"ort_logger:{k}") for k in self.state}
        if want["callback"] != self.state["callback"] and "set_default_logger_callback" in self.original:
            self.original["set_default_logger_callback"](self.callbacks.get(want["callback"] or ""))
        for key in ("severity", "verbosity"):
            setter = self.original.get(f"set_default_logger_{key}")
            value = want[key]
            if setter is not None and (value != self.state[key] or want["callback"] != self.state["callback"]):
                setter(int(value) if value is not None else LOGGER_DEFAULTS[key])
        self.state.update(want)


def snapshot(logger: OrtLogger) -> State:
    state: State = {f"env:{k}": v for k, v in os.environ.items() if k not in PYTEST_OWN}
    try:
        state["cwd"] = os.getcwd()
    except OSError:
        state["cwd"] = None  # removed under the process
    state.update(logger.snapshot())
    return state


def changed(before: State, after: State) -> dict[str, tuple[str | None, str | None]]:
    return {k: (before.get(k), after.get(k)) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}


def put_back(target: State, logger: OrtLogger) -> None:
    now = snapshot(logger)
    for key, (_, want) in changed(now, target).items():
        what, _, name = key.partition(":")
        if what == "env":
            if want is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = want
        elif key == "cwd" and want is not None:
            try:
                os.chdir(want)
            except OSError:
                pass  # the dir is gone: nothing to go back to
    logger.restore(target)


@dataclass
class _Frame:
    """A scope (class, module, ...) set up now, with what its fixtures' setups changed: key -> (before, after)."""

    node: Any
    scope: str
    changes: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)


@dataclass
class _Open:
    entry: PollutionEntry
    left: dict[str, str | None]  # key -> the value it left


def _change(key: str, before: str | None, after: str | None) -> StateChange:
    what, _, name = key.partition(":")
    return {"what": what, "name": name or what, "before": cut(before), "after": cut(after)}


class Isolation:
    """One test process's watch: a snapshot around each test, the scopes set up, the polluters found."""

    def __init__(self, mode: str, process: str) -> None:
        self.mode, self.process = mode, process
        self.logger = OrtLogger()
        self.base: State | None = None  # after collection: what every test starts from
        self.pre: State = {}
        self.item: Any = None
        self.frames: list[_Frame] = []
        self.fresh: list[tuple[str, str | None]] = []  # (key, after) that scoped setups made during this item
        self.entries: list[PollutionEntry] = []
        self.open: list[_Open] = []
        if mode != "off":
            self.logger.arm()

    @property
    def on(self) -> bool:
        return self.mode != "off"

    def close(self) -> None:
        self.logger.disarm()

    def start(self, item: Any) -> None:
        if not self.on:
            return
        now = snapshot(self.logger)
        if self.base is None:
            self.base = now
        for o in list(self.open):
            if self.mode == "restore" or any(now.get(k) == v for k, v in o.left.items()):
                o.entry["later_tests"] += 1
            else:
                self.open.remove(o)  # something else changed it since: no later test runs under it
        self.pre, self.item, self.fresh = now, item, []

    def fixture_before(self, scope: str, node: Any) -> State | None:
        """A fixture of a wider scope than the test is about to be set up: what the state was."""
        if not self.on or self.item is None or scope == "function" or node is self.item or node is None:
            return None
        return snapshot(self.logger)

    def fixture_after(self, scope: str, node: Any, before: State | None) -> None:
        if before is None:
            return
        delta = changed(before, snapshot(self.logger))
        if not delta:
            return
        frame = next((f for f in self.frames if f.node is node), None)
        if frame is None:
            frame = _Frame(node, scope)
            self.frames.append(frame)
            chain = self.item.listchain()
            self.frames.sort(key=lambda f: next((i for i, n in enumerate(chain) if n is f.node), len(chain)))
        for key, (old, new) in delta.items():
            first = frame.changes.get(key, (old, new))[0]
            frame.changes[key] = (first, new)
            self.fresh.append((key, new))

    def finish(self, item: Any, nextitem: Any) -> None:
        """After the item's teardown (and of the scopes nextitem does not need): judge, then undo."""
        if not self.on:
            return
        chain, following = item.listchain(), (nextitem.listchain() if nextitem is not None else [])
        alive = set()
        for mine, theirs in zip(chain, following, strict=False):
            if mine is not theirs:
                break
            alive.add(id(mine))
        torn = [f for f in self.frames if id(f.node) not in alive]
        self.frames = [f for f in self.frames if id(f.node) in alive]
        now = snapshot(self.logger)
        target = dict(self.pre)
        for key, new in self.fresh:
            target[key] = new
        for frame in reversed(torn):  # innermost first: an outer scope's "before" is the last word
            for key, (old, _) in frame.changes.items():
                target[key] = old
        by_owner: dict[tuple[str, str], dict[str, tuple[str | None, str | None]]] = {}
        for key, pair in changed(target, now).items():
            owner = next((f for f in reversed(torn) if key in f.changes), None)
            owned = (owner.node.nodeid or "<session>", owner.scope) if owner else (item.nodeid, "function")
            by_owner.setdefault(owned, {})[key] = pair
        undo = self.mode == "restore"
        for (who, scope), pairs in by_owner.items():
            entry: PollutionEntry = {"test": who, "scope": scope, "process": self.process, "undone": undo,
                                     "later_tests": 0, "changes": [_change(k, b, a) for k, (b, a) in pairs.items()]}
            self.entries.append(entry)
            self.open.append(_Open(entry, {k: a for k, (_, a) in pairs.items()}))
        if undo and self.base is not None:
            expected = dict(self.base)
            for frame in self.frames:
                for key, (_, new) in frame.changes.items():
                    expected[key] = new
            put_back(expected, self.logger)
        self.item = None

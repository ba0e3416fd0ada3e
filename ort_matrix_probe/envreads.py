"""Which tests read the variables a mode changes: the census that lets a mode leave a test out.

require_cudnn differs from normal only in ORT_TEST_REQUIRE_CUDNN_SDPA. A test that never reads it runs as it
did in normal, so the engine may carry its outcome over instead of running it again, but only where the
test is known not to read it. Every read of a watched name (ORT_MATRIX_WATCH_ENV, a JSON list) is seen
here, through `os.environ`'s own class, and counted:
- `os.environ[name]`, `.get`, `os.getenv`, `name in os.environ` (all go through `__getitem__`): that name;
- iterating, copying or printing the whole environment (`dict(os.environ)`, `.copy()`, `.items()`, `{**...}`,
  `repr`), and starting a child process that sees it (subprocess, `os.system`, `os.fork`, multiprocessing,
  `os.posix_spawn`): a read of everything, "*". Which children see it, and when one counts for every test,
  is childstarts.py's rule. An iteration by reviewed library code that keeps only the names under a prefix
  (tqdm's, at torch's import) reads only the watched names under it: envfilters.py.

A read belongs to the test running it; inside a fixture wider than a function, to every test of that
fixture's class or module (a session or package fixture: every test); while a module is collected (its
import, its parametrization), to every test of that module; anywhere else (a conftest's import, a plugin's
start), to every test. Reads by pytest, its plugins and the probe itself are not the tests' and are not
counted, unless the tests' code called them (pytester.run): the caller is told by its file.

Not seen, and said so in the guide: C code that calls getenv or starts a child itself (libc's `system`), a
process started before pytest, and a value a test caches (a module global, functools.cache) is seen only in
the test that first read it.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from . import childstarts, envfilters
from .schema import EVERYTHING, WATCH_ENV, EnvReads

ALL = ""  # the scope of a read that belongs to every test
_OWN = ("_pytest", "pytest", "pluggy", "xdist", "execnet", "ort_matrix_probe", "pytest_timeout",
        "pytest_rerunfailures", "_distutils_hack")


def watched() -> frozenset[str]:
    """The names the engine asked about; empty where it asked about none (no census taken)."""
    try:
        names = json.loads(os.environ.get(WATCH_ENV) or "[]")
    except ValueError:
        return frozenset()
    return frozenset(n for n in names if isinstance(n, str)) if isinstance(names, list) else frozenset()


def _library_dirs() -> tuple[str, ...]:
    """Where the standard library and installed packages live: code there reads on behalf of its caller. Every
    site-packages or dist-packages dir on sys.path counts, not only this venv's own: a venv that reaches another
    one's packages through a .pth file (torch from an image's venv) runs pytest, pluggy and xdist from there."""
    paths = sysconfig.get_paths()
    found = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}
    found |= {os.path.realpath(p) for p in sys.path
              if p and os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages")}
    return tuple(sorted((p.rstrip(os.sep) + os.sep for p in found), key=len, reverse=True))  # site-packages first


_LIBRARIES = _library_dirs()
_PROBE = os.path.dirname(os.path.realpath(__file__)) + os.sep  # wherever the probe was imported from


@functools.lru_cache(maxsize=1024)
def _caller_kind(path: str) -> str | None:
    """"own" for pytest, its plugins and the probe; "library" for the standard library and installed packages,
    which read on behalf of whoever called them; None for the tests' own code (the suite's files, conftests)."""
    if path == __file__ or path.startswith("<"):  # this module's watch; frozen stdlib modules, code a library compiled ("<string>": execnet's worker)
        return "library"
    real = os.path.realpath(path)
    if real.startswith(_PROBE):
        return "own"
    for lib in _LIBRARIES:
        if real.startswith(lib):
            top = real[len(lib):].split(os.sep, 1)[0].removesuffix(".py")
            return "own" if top in _OWN else "library"
    return None


def _callsite() -> str | None:
    """Where a read came from ("file:line" of the tests' code that made it, or the first library frame where no
    test code is on the stack); None where pytest, a plugin or the probe made it, even through a library, and
    no test code called them. pytest called by a test (pytester.run, a fixture's helper) reads for that test."""
    frame = sys._getframe(2)
    first: str | None = None
    own = False
    while frame is not None:
        kind = _caller_kind(frame.f_code.co_filename)
        if kind is None:
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        if kind == "own":
            own = True
        elif frame.f_code.co_filename not in (__file__, childstarts.__file__):
            first = first or f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None if own else first  # a library's own thread: counted, since nothing says whose it is


class Reads:
    """This process's reads: per test (`tests`), and per wider scope (`scopes`: a node id prefix, or ALL), each
    with the names read and where the first read of each came from. `where()` says what is running now."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        # (kind, node, the collected module's file or None): before any hook, a conftest's import
        self.where: Callable[[], tuple[str, str, str | None]] = lambda: ("scope", ALL, None)
        self.tests: dict[str, set[str]] = {}
        self.scopes: dict[str, dict[str, str]] = {}
        self.children: list[tuple[int, str]] = []  # (pid, where) of the children the running test started

    def saw(self, name: str, child: bool = False) -> str | None:
        """Count a read where it belongs; the site it came from, None where it is not the tests'."""
        site = _callsite()
        if site is None:
            return None
        kind, node, module = self.where()
        if kind == "test":
            self.tests.setdefault(node, set()).add(name)
            return site
        if module is not None and not child and os.path.realpath(site.rsplit(":", 1)[0]) != module:
            # a helper read it as a module was collected: its value may sit in that helper, shared by every module
            # that imports it; the exited child process of a helper is the collected module's (guide: limits)
            node = ALL
        self.scopes.setdefault(node, {}).setdefault(name, site)
        return site

    def started(self, pid: int | None, site: str) -> None:
        """A child that sees the environment, started by a test: checked as the test ends (`take`)."""
        if pid is not None and self.where()[0] == "test":
            self.children.append((pid, site))

    def take(self, nodeid: str) -> list[str]:
        """The names a test read, once, as it ends (they travel on its report). A child it started that still runs
        may serve the tests after it (a forkserver, a kept pool): a read of everything, for every test."""
        left = [site for pid, site in self.children if childstarts.alive(pid)]
        self.children.clear()
        if left:
            self.scopes.setdefault(ALL, {}).setdefault(EVERYTHING, f"{left[0]} (a child process started there "
                                                                   "outlived its test)")
        return sorted(self.tests.pop(nodeid, ()))

    def scoped(self) -> list[dict[str, Any]]:
        """The reads that belong to more than one test: {scope (a node id prefix, "" for all), names, where}."""
        return [{"scope": scope, "names": sorted(names), "where": [names[n] for n in sorted(names)]}
                for scope, names in sorted(self.scopes.items())]


def _environ_class(base: type, reads: Reads, decode: Callable[[Any], str]) -> type:
    class Watched(base):  # type: ignore[misc]
        """os.environ as it was, with every read of a watched name, and of everything, told to `reads`."""

        def __getitem__(self, key: Any) -> Any:
            name = decode(key)
            if name in reads.names:
                caller = sys._getframe(1)
                keeps = envfilters.kept(caller, self, reads.names) if envfilters.view_of(caller, self) else None
                if keeps is None or name in keeps:  # a reviewed filter's view fetched it, and drops it: no read
                    reads.saw(name)
            return super().__getitem__(key)

        def __iter__(self) -> Iterator[Any]:
            keeps = envfilters.kept(sys._getframe(1), self, reads.names)
            for name in [EVERYTHING] if keeps is None else sorted(keeps):
                reads.saw(name)
            keys: Iterator[Any] = super().__iter__()
            return keys

        def __repr__(self) -> str:
            reads.saw(EVERYTHING)
            return str(super().__repr__())

    Watched.__name__ = Watched.__qualname__ = base.__name__  # what a test that prints type(os.environ) sees
    Watched.__module__ = base.__module__
    return Watched


def _child(reads: Reads, fn: Callable[..., Any], env_of: Callable[..., object]) -> Callable[..., Any]:
    """A way a child process starts, counted by what the child sees (childstarts.py): this process's environment,
    whole, is a read of everything; an environment of its own is not, what was put there was counted then."""
    @functools.wraps(fn)
    def starting(*args: Any, **kwargs: Any) -> Any:
        site = reads.saw(EVERYTHING, child=True) if childstarts.whole(env_of(args, kwargs)) else None
        started = fn(*args, **kwargs)
        if site is not None and childstarts.serves_tests(args):
            reads.started(childstarts.pid_of(started), site)
        return started
    return starting


def arm(reads: Reads) -> Callable[[], None]:
    """Watch os.environ (and os.environb) and the ways a child process starts; returns the undo."""
    undo: list[Callable[[], None]] = []
    envs: list[tuple[Any, Callable[[Any], str]]] = [(os.environ, lambda k: k if isinstance(k, str) else "")]
    if hasattr(os, "environb"):
        envs.append((os.environb, lambda k: k.decode(errors="replace") if isinstance(k, bytes) else ""))
    for env, decode in envs:
        base = type(env)
        env.__class__ = _environ_class(base, reads, decode)
        undo.append(functools.partial(setattr, env, "__class__", base))
    import _posixsubprocess  # multiprocessing starts its children through it, subprocess through its own name for it
    import subprocess
    c = childstarts
    for owner, name, env_of in ((_posixsubprocess, "fork_exec", c.env_of_fork_exec),
                                (subprocess, "_fork_exec", c.env_of_fork_exec), (os, "system", c.inherits),
                                (os, "fork", c.inherits), (os, "forkpty", c.inherits),
                                (os, "posix_spawn", c.env_of_spawn), (os, "posix_spawnp", c.env_of_spawn)):
        fn = getattr(owner, name, None)
        if fn is not None:
            setattr(owner, name, _child(reads, fn, env_of))
            undo.append(functools.partial(setattr, owner, name, fn))

    def disarm() -> None:
        for step in reversed(undo):
            step()
    return disarm


ENV_READS_PROP = "ort_matrix.env_reads"  # on a test's teardown report: the watched names it read
_WORKER_KEY = "ort_matrix_env_reads"


class Census:
    """The hooks that say what runs now, so each read lands on its test or its scope, and that bring every
    process's reads to the controller: a test's on its teardown report, the wider ones through xdist's
    workeroutput. Registered as a plugin of its own next to the probe's."""

    def __init__(self, reads: Reads) -> None:
        self.reads = reads
        self.test: str | None = None
        # the scopes open now, innermost last: a collector's (with its module's file) or a wide fixture's
        self.stack: list[tuple[str, str | None]] = []
        self.gathered: list[dict[str, Any]] = []  # the workers' wider reads, as each went down
        reads.where = self.where

    def where(self) -> tuple[str, str, str | None]:
        if self.stack:
            return ("scope", *self.stack[-1])
        return ("test", self.test, None) if self.test is not None else ("scope", ALL, None)

    @staticmethod
    def _prefix(node: Any) -> str:
        """The node id prefix a collector or a wide fixture's node stands for: a module's or a class's; ALL else."""
        nodeid = str(getattr(node, "nodeid", ""))
        return nodeid if ".py" in nodeid else ALL

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector: Any) -> Any:
        path = getattr(collector, "path", None)
        module = os.path.realpath(str(path)) if path is not None and str(path).endswith(".py") else None
        self.stack.append((self._prefix(collector), module))  # a module's import and parametrization: its tests'
        try:
            yield
        finally:
            self.stack.pop()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Any:
        scope = str(getattr(fixturedef, "scope", "function"))
        wide = scope != "function"
        if wide:  # its value serves every test of its scope: a class's or module's, or every test
            node = getattr(request, "node", None) if scope in ("class", "module") else None
            self.stack.append((self._prefix(node) if node is not None else ALL, None))
        try:
            yield
        finally:
            if wide:
                self.stack.pop()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
        self.test = item.nodeid
        try:
            return (yield)
        finally:
            self.test = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        outcome = yield
        rep = outcome.get_result()
        if rep.when == "teardown":
            rep.user_properties.append((ENV_READS_PROP, self.reads.take(item.nodeid)))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any) -> None:
        output = getattr(session.config, "workeroutput", None)
        if output is not None:
            output[_WORKER_KEY] = json.dumps(self.reads.scoped())

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        sent = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if error is not None or sent is None:  # a worker that died took its wide reads with it: assume every one
            gone = f"worker {getattr(getattr(node, 'gateway', None), 'id', '?')} went down: its census is lost"
            self.gathered.append({"scope": ALL, "names": [EVERYTHING], "where": [gone]})
        self.gathered += json.loads(sent or "[]")

    def report(self) -> EnvReads:
        """The report's `env_reads`: the names watched, and every process's reads wider than a test."""
        merged: dict[str, dict[str, str]] = {}
        for entry in [*self.gathered, *self.reads.scoped()]:
            names = merged.setdefault(str(entry["scope"]), {})
            for i, name in enumerate(entry["names"]):
                names.setdefault(str(name), str(entry["where"][i]))
        return {"watched": sorted(self.reads.names),
                "scopes": [{"scope": s, "names": sorted(n), "where": [n[k] for k in sorted(n)]}
                           for s, n in sorted(merged.items())]}


_ARMED = pytest.StashKey[tuple[Census, Callable[[], None]]]()


def start(config: pytest.Config) -> None:
    """Arm the census in this process before any conftest is imported; nothing where no name is watched."""
    names = watched()
    if names and _ARMED not in config.stash:
        census = Census(Reads(names))
        config.stash[_ARMED] = (census, arm(census.reads))


def register(config: pytest.Config) -> Census | None:
    """The census of this pytest session, registered as a plugin; None where none is taken."""
    start(config)  # a process whose initial conftests were loaded before the probe's hook could arm it
    armed = config.stash.get(_ARMED, None)
    if armed is None:
        return None
    config.pluginmanager.register(armed[0], "ort_matrix_probe.envreads")
    return armed[0]


def stop(config: pytest.Config) -> None:
    """os.environ and the process starters as they were; the census unregistered."""
    armed = config.stash.get(_ARMED, None)
    if armed is None:
        return
    census, disarm = armed
    disarm()
    if config.pluginmanager.is_registered(census):
        config.pluginmanager.unregister(census)
    del config.stash[_ARMED]

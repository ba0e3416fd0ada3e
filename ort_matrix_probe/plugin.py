"""The pytest hooks of the probe.

Loaded with `-p ort_matrix_probe.plugin` in every test process, xdist workers
included. pytest_configure makes one `Probe` per pytest session, keeps it in
config.stash and registers it as a plugin, so every hook reaches that
session's state and nothing lives in module globals. Each worker keeps its own
census and audit; the controller gathers the workers' audits and writes the
one report.

What the engine gets from here, and through which channel:
- the report (ORT_MATRIX_REPORT), written at the end of the session;
- its sha256, written to a pipe the engine opened (ORT_MATRIX_DIGEST_FD), so a
  report rewritten afterwards, by a conftest or anything else, is caught;
- a progress file (ORT_MATRIX_PROGRESS), one line as each test starts and
  ends, so a run that hangs or is killed still says which tests were running.

Subtests (subtests.py): each subtest's report carries its id, tiers and EP uses from the process that ran it,
and the report keeps them under its test. The variables ORT_MATRIX_ENV_NAMES names are read back in every
process once collection ends, so the result records the environment the tests really had.

And what it gets from the engine: with ORT_MATRIX_KEEP or ORT_MATRIX_DROP, a file
of the node ids to run or not to run (selection.py). With
ORT_MATRIX_ISOLATION (restore, report, off), how the process state around each
test is watched and put back (isolation.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import IO, Any, Generator

import pytest

from . import envreads, selection
from . import report as reporting
from .audit import audit, imported_version
from .epcensus import EpCensus
from .fdtap import FdTap, tiers_in
from .isolation import ISOLATION_ENV, Isolation, mode_of
from .loader import LOADER_ENV, recheck
from .loader import apply as apply_loader
from .ortpatch import Patch, arm
from .provenance import provenance
from .quiet import QUIET_ENV
from .report import EP_PROP, INJECT_PROP, SDPA_PROP, SUBTEST_PROP, UNATTRIBUTED_PROP
from .schema import REPORT_VERSION, Audit, CollectionEntry, PollutionEntry, ProbeReport, TestEntry
from .subtests import Scopes, arm_unittest, is_subtest, wrap_fixture
from .syspath import Prediction, predict
from .timings import Marks

REPORT_ENV = "ORT_MATRIX_REPORT"
DIGEST_FD_ENV = "ORT_MATRIX_DIGEST_FD"
PROGRESS_ENV = "ORT_MATRIX_PROGRESS"
OPTIONS_ENV = "ORT_MATRIX_CUDA_OPTIONS"
ENV_NAMES_ENV = "ORT_MATRIX_ENV_NAMES"  # a JSON list: the variables whose values the report records, as seen here
EP_CENSUS_ENV = "ORT_MATRIX_EP_CENSUS"  # "off": no EP census (bench/ep_census.py measures what it costs)
NODE_CENSUS_ENV = "ORT_MATRIX_NODE_CENSUS"  # "off": the EP census without node placement (bench/ep_census.py --what nodes)
OUTSIDE = "<outside any test>"
_AUDIT_KEY = "ort_matrix_audit"
_POLLUTION_KEY = "ort_matrix_pollution"
_TIMINGS_KEY = "ort_matrix_timings"
_ENV_KEY = "ort_matrix_env"


def _forced_options() -> dict[str, str]:
    forced = json.loads(os.environ.get(OPTIONS_ENV) or "{}")
    return {str(k): str(v) for k, v in forced.items()}


class Probe:
    """One pytest session's census, outcomes and audits, with the hooks that fill them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.time()
        self.current = OUTSIDE  # the test whose runs print now
        self.pending_sdpa: dict[str, list[str]] = {}
        self.unattributed: dict[str, list[str]] = {}  # printed while only CPU sessions ran
        self.injected: dict[str, int] = {}
        self.tests: dict[str, TestEntry] = {}
        self.collection: list[CollectionEntry] = []
        self.collected: dict[str, int] = {}  # per collecting process: "controller" or an xdist worker id
        self.audits: list[Audit] = []
        self.pollution: list[PollutionEntry] = []  # gathered from the workers (xdist)
        self.progress: IO[str] | None = None
        self.marks = Marks()  # where this process's start went (timings.py)
        self.isolation_s, self.isolation_tests = 0.0, 0  # time spent in isolation.py's hooks, and how many tests
        self.marks.mark("configured")
        self.timings: dict[str, dict[str, float | None]] = {}  # the workers' marks, by worker id
        self.digest_fd: int | None = None
        if not self.is_worker:
            path = os.environ.get(PROGRESS_ENV)
            self.progress = open(path, "a", buffering=1) if path else None  # closed at unconfigure
            fd = os.environ.pop(DIGEST_FD_ENV, None)  # the tests need not see it
            self.digest_fd = int(fd) if fd else None
        try:  # before anything is patched or loaded: a refused session leaves the process as it was
            mode = mode_of(os.environ.get(ISOLATION_ENV))
        except ValueError as exc:
            raise pytest.UsageError(f"ort_matrix_probe: {exc}") from None
        # applied before the initial conftests (which may import onnxruntime), else now
        loaded: tuple[dict[str, Any] | None, Callable[[], None]] = (
            config.stash.get(LOADER, None) or apply_loader(os.environ.get(LOADER_ENV)))
        self.loader, self.unload = loaded
        self.env = _watched_env()  # read again once collection has imported every conftest (collection_finish)
        self.envs: dict[str, dict[str, str | None]] = {}  # the xdist workers', as each read its own
        self.scopes = Scopes(lambda: self.current, self._fold)
        self.calls: dict[str, Any] = {}  # each running test's call report, read again once pytest is done with it
        self.census = None if os.environ.get(EP_CENSUS_ENV) == "off" else EpCensus(
            self.scopes.key, nodes=os.environ.get(NODE_CENSUS_ENV) != "off")
        self.disarm = arm(Patch(_forced_options(), FdTap(self.on_fd1), self.on_injection, self.census,
                                os.environ.get(QUIET_ENV) == "1"))
        self.undo_subtests = arm_unittest(self.scopes)
        self.isolation = Isolation(mode, self.process_name)
        self.env_reads: envreads.Census | None = None  # registered beside it (pytest_configure)

    def on_fd1(self, data: bytes, cuda: bool) -> None:
        target = self.pending_sdpa if cuda else self.unattributed
        target.setdefault(self.scopes.key(), []).extend(tiers_in(data))

    def _fold(self, key: str, test: str) -> None:
        """A subtest closed: what it gathered that no report of its own took now belongs to its test."""
        for gathered in (self.pending_sdpa, self.unattributed):
            tiers = gathered.pop(key, None)
            if tiers:
                gathered.setdefault(test, []).extend(tiers)
        if self.census is not None:
            self.census.fold(key, test)

    def _attach_subtest(self, report: Any) -> None:
        """A subtest's report, where it ran: its id, and the tiers and EP uses gathered while it was open,
        carried in its user_properties (xdist brings them to the controller); its test keeps them too."""
        key = self.scopes.innermost(report.nodeid)
        tiers = self.pending_sdpa.get(key, []) if key else []
        ep = self.census.take(key, keep=True) if key and self.census else []
        report.user_properties.append(
            (SUBTEST_PROP, {"id": self.scopes.name(report), "sdpa": list(tiers), "ep": ep, "scoped": key is not None}))
        if key:
            self._fold(key, report.nodeid)

    def on_injection(self) -> str:
        self.injected[self.current] = self.injected.get(self.current, 0) + 1
        return self.current

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    @property
    def process_name(self) -> str:
        if self.is_worker:
            return str(self.config.workerinput.get("workerid", "worker"))  # type: ignore[attr-defined]
        return "controller"

    def _mark(self, event: str, nodeid: str) -> None:
        if self.progress is not None:
            self.progress.write(f"{event}\t{nodeid}\n")

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        selection.apply(config, items, self.marks.mark)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        self.marks.mark("collection_start")

    # collection: counted where it happens, so an early exit cannot hide how much was there
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.marks.mark("collected")
        self.env = _watched_env()  # what the tests will start with: after every conftest, before any test
        if not self.is_worker:
            self.collected["controller"] = len(session.items)
            self._mark("collected", str(len(session.items)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected[str(getattr(node, "gateway", node).id)] = len(ids)
        self._mark("collected", str(len(ids)))

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.marks.mark("first_test_start")
        self._mark("start", nodeid)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.marks.mark("first_test_end")
        self.marks.mark("last_test_end", again=True)
        self._mark("end", nodeid)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
        self.current = item.nodeid
        t = time.perf_counter()
        self.isolation.start(item)
        self.isolation_s += time.perf_counter() - t
        yield
        t = time.perf_counter()
        self.isolation.finish(item, nextitem)  # after its teardown, and that of the scopes nextitem does not need
        self.isolation_s += time.perf_counter() - t
        self.isolation_tests += 1
        self.scopes.forget(item.nodeid)
        self.current = OUTSIDE

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Generator[None, Any, None]:
        scope, node = str(getattr(fixturedef, "scope", "function")), getattr(request, "node", None)
        t = time.perf_counter()
        before = self.isolation.fixture_before(scope, node)
        self.isolation_s += time.perf_counter() - t
        outcome = yield
        t = time.perf_counter()
        self.isolation.fixture_after(scope, node, before)
        self.isolation_s += time.perf_counter() - t
        if getattr(fixturedef, "argname", None) == "subtests" and outcome.excinfo is None:
            wrap_fixture(outcome.get_result(), self.scopes)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Generator[None, Any, None]:
        outcome = yield
        rep = outcome.get_result()
        if rep.when == "teardown":  # the tiers travel with the report, so xdist brings them to the controller
            rep.user_properties.append((SDPA_PROP, self.pending_sdpa.pop(item.nodeid, [])))
            rep.user_properties.append((INJECT_PROP, self.injected.pop(item.nodeid, 0)))
            rep.user_properties.append((UNATTRIBUTED_PROP, self.unattributed.pop(item.nodeid, [])))
            rep.user_properties.append((EP_PROP, self.census.take(item.nodeid) if self.census else []))

    @pytest.hookimpl(tryfirst=True)  # before xdist's worker sends it: a subtest's properties must travel with it
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        subtest = is_subtest(report)
        if subtest and not any(name == SUBTEST_PROP for name, _ in report.user_properties):
            self._attach_subtest(report)
        elif not subtest and report.when == "call":
            self.calls[report.nodeid] = report  # pytest may still turn it failed for its subtests (read at teardown)
            if getattr(report, "outcome", None) == "rerun":
                self.scopes.forget(report.nodeid)  # the attempt to come numbers its repeated subtests afresh
        reporting.record(self.tests, report)
        if report.when == "teardown":
            call = self.calls.pop(report.nodeid, None)
            reporting.settle(self.tests[report.nodeid], call.outcome if call is not None else None)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        entry = reporting.collection_entry(report)
        if entry is not None:
            self.collection.append(entry)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        payload = getattr(node, "workeroutput", {}).get(_AUDIT_KEY)
        if payload:
            self.audits.append(json.loads(payload))
        self.pollution += json.loads(getattr(node, "workeroutput", {}).get(_POLLUTION_KEY) or "[]")
        marks = getattr(node, "workeroutput", {}).get(_TIMINGS_KEY)
        if marks:
            self.timings[str(getattr(node, "gateway", node).id)] = json.loads(marks)
        env = getattr(node, "workeroutput", {}).get(_ENV_KEY)
        if env:
            self.envs[str(getattr(node, "gateway", node).id)] = json.loads(env)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        recheck(self.loader)
        self.marks.mark("finished")
        # what watching and undoing cost this process (issue 22's bench reads it): seconds, and tests watched
        self.marks.marks["isolation_s"] = round(self.isolation_s, 6)
        self.marks.marks["isolation_tests"] = float(self.isolation_tests)
        if self.is_worker:
            self.config.workeroutput[_TIMINGS_KEY] = json.dumps(self.marks.to_dict())  # type: ignore[attr-defined]
            self.config.workeroutput[_AUDIT_KEY] = json.dumps(  # type: ignore[attr-defined]
                {**audit(), "loader": self.loader, "process": self.process_name})
            self.config.workeroutput[_POLLUTION_KEY] = json.dumps(self.isolation.entries)  # type: ignore[attr-defined]
            self.config.workeroutput[_ENV_KEY] = json.dumps(self.env)  # type: ignore[attr-defined]
            return
        if not getattr(self.config.option, "numprocesses", None):
            self.audits.append({**audit(), "loader": self.loader, "process": "controller"})  # it ran the tests
        path = os.environ.get(REPORT_ENV)
        if path:
            data = reporting.write(path, self.report(exitstatus))
            self._send_digest(hashlib.sha256(data).hexdigest())

    def _send_digest(self, digest: str) -> None:
        if self.digest_fd is None:
            return
        try:
            os.write(self.digest_fd, f"{digest}\n".encode())
            os.close(self.digest_fd)
        except OSError:
            pass  # the engine then finds no digest and says so
        self.digest_fd = None

    def report(self, exitstatus: int) -> ProbeReport:
        unattributed = [t for tiers in self.unattributed.values() for t in tiers]
        unattributed += [t for e in self.tests.values() for t in e.get("unattributed", [])]
        report: ProbeReport = {"report_version": REPORT_VERSION, "exitstatus": int(exitstatus),
                "duration_s": round(time.time() - self.started, 3), "collected": self.collected,
                "tests": self.tests, "collection": self.collection, "audits": self.audits,
                "outside_tests_sdpa": self.pending_sdpa.get(OUTSIDE, []), "unattributed_sdpa": unattributed,
                "provenance": {**provenance(), "ort_imported_version": self._imported_version()},
                "isolation": self.isolation.mode, "pollution": [*self.pollution, *self.isolation.entries],
                "timings": {"controller": self.marks.to_dict(), **self.timings},
                "env": self.envs[min(self.envs)] if self.envs else self.env,  # a process that ran the tests
                "envs": {"controller": self.env, **self.envs},
                "subtests_verbosity": _subtests_verbosity(self.config),
                "node_census": self.census is not None and self.census.nodes}
        if self.env_reads is not None:
            report["env_reads"] = self.env_reads.report()
        return report

    def _imported_version(self) -> str | None:
        """onnxruntime.__version__ as the tests' processes saw it, read after they imported it."""
        seen = [a.get("onnxruntime_version") for a in self.audits]
        return next((v for v in seen if v), None) or imported_version()

    def close(self) -> None:
        self.undo_subtests()
        self.isolation.close()
        self.disarm()
        self.unload()
        if self.progress is not None:
            self.progress.close()


def _subtests_verbosity(config: pytest.Config) -> int | None:
    """pytest's verbosity for subtests (>= 9): at 0 its summary line counts only the failing ones."""
    kind = getattr(pytest.Config, "VERBOSITY_SUBTESTS", None)
    if kind is None:
        return None
    try:
        return int(config.get_verbosity(kind))
    except (ValueError, TypeError, AttributeError):
        return None


def _watched_env() -> dict[str, str | None]:
    """The variables the engine asked about, as this process has them: what the tests really got."""
    try:
        names = json.loads(os.environ.get(ENV_NAMES_ENV) or "[]")
    except ValueError:
        names = []
    return {str(n): os.environ.get(str(n)) for n in names if isinstance(n, str)}


PROBE = pytest.StashKey[Probe]()
LOADER = pytest.StashKey[tuple[Any, Any]]()  # (the loader's record, its undo): built at run time on the test venv's Python


def _future_sys_path(early_config: pytest.Config) -> Prediction:
    """The sys.path pytest will give the tests: its targets' package roots and the ini pythonpath added."""
    ns = early_config.known_args_namespace
    try:
        ini_path = [str(p) for p in early_config.getini("pythonpath")]
    except (ValueError, KeyError):
        ini_path = []
    confcutdir = getattr(ns, "confcutdir", None) or str(early_config.rootpath)
    return predict(getattr(ns, "file_or_dir", None) or [], getattr(ns, "importmode", "prepend"), ini_path, confcutdir)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """The libs set's loader, in every test process (xdist workers too) before any conftest, test
    module or torch is imported: only the plugins named with -p have been imported by now."""
    early_config.stash[LOADER] = apply_loader(os.environ.get(LOADER_ENV), _future_sys_path(early_config))
    envreads.start(early_config)  # the tests' reads of the watched variables, seen from their first conftest on


def pytest_configure(config: pytest.Config) -> None:
    probe = Probe(config)
    config.stash[PROBE] = probe
    config.pluginmanager.register(probe, "ort_matrix_probe.session")
    probe.env_reads = envreads.register(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    probe = config.stash.get(PROBE, None)
    if probe is not None:
        probe.close()
        config.pluginmanager.unregister(probe)
    envreads.stop(config)

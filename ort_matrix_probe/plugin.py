"""The pytest hooks of the probe.

Loaded with `-p ort_matrix_probe.plugin` in every test process, xdist workers
included. pytest_configure makes one `Probe` per pytest session, keeps it in
config.stash and registers it as a plugin, so every hook reaches that
session's state and nothing lives in module globals. Each worker keeps its own
census and audit; the controller gathers the workers' audits and writes the
one report (its path comes in ORT_MATRIX_REPORT, outside the tests' cwd).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from typing import Any

import pytest

from . import report as reporting
from .audit import audit
from .fdtap import Fd1Tap, tiers_in
from .ortpatch import Patch, arm
from .provenance import provenance
from .schema import REPORT_VERSION, Audit, CollectionEntry, ProbeReport, TestEntry

REPORT_ENV = "ORT_MATRIX_REPORT"
OPTIONS_ENV = "ORT_MATRIX_CUDA_OPTIONS"
SDPA_PROP = "ort_matrix.sdpa"
INJECT_PROP = "ort_matrix.injections"
OUTSIDE = "<outside any test>"
_AUDIT_KEY = "ort_matrix_audit"


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
        self.injected: dict[str, int] = {}
        self.tests: dict[str, TestEntry] = {}
        self.collection: list[CollectionEntry] = []
        self.audits: list[Audit] = []
        self.disarm = arm(Patch(_forced_options(), Fd1Tap(self.on_fd1), self.on_injection))

    def on_fd1(self, data: bytes) -> None:
        self.pending_sdpa.setdefault(self.current, []).extend(tiers_in(data))

    def on_injection(self) -> None:
        self.injected[self.current] = self.injected.get(self.current, 0) + 1

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
        self.current = item.nodeid
        yield
        self.current = OUTSIDE

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Generator[None, Any, None]:
        outcome = yield
        rep = outcome.get_result()
        if rep.when == "teardown":  # the tiers travel with the report, so xdist brings them to the controller
            rep.user_properties.append((SDPA_PROP, self.pending_sdpa.pop(item.nodeid, [])))
            rep.user_properties.append((INJECT_PROP, self.injected.pop(item.nodeid, 0)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        reporting.record(self.tests, report, SDPA_PROP, INJECT_PROP)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        entry = reporting.collection_entry(report)
        if entry is not None:
            self.collection.append(entry)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        payload = getattr(node, "workeroutput", {}).get(_AUDIT_KEY)
        if payload:
            self.audits.append(json.loads(payload))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            self.config.workeroutput[_AUDIT_KEY] = json.dumps(audit())  # type: ignore[attr-defined]
            return
        if not getattr(self.config.option, "numprocesses", None):
            self.audits.append(audit())  # no xdist: this process ran the tests
        path = os.environ.get(REPORT_ENV)
        if path:
            reporting.write(path, self.report(exitstatus))

    def report(self, exitstatus: int) -> ProbeReport:
        return {"report_version": REPORT_VERSION, "exitstatus": int(exitstatus),
                "duration_s": round(time.time() - self.started, 3), "tests": self.tests,
                "collection": self.collection, "audits": self.audits,
                "outside_tests_sdpa": self.pending_sdpa.get(OUTSIDE, []), "provenance": provenance()}


PROBE = pytest.StashKey[Probe]()


def pytest_configure(config: pytest.Config) -> None:
    probe = Probe(config)
    config.stash[PROBE] = probe
    config.pluginmanager.register(probe, "ort_matrix_probe.session")


def pytest_unconfigure(config: pytest.Config) -> None:
    probe = config.stash.get(PROBE, None)
    if probe is not None:
        probe.disarm()
        config.pluginmanager.unregister(probe)

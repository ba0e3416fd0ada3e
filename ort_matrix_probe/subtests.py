"""Which subtest is open, so that what runs inside `with self.subTest(...)` is that subtest's.

pytest >= 9 reports each subtest apart: a report of its own, with its test's node id and the
subtest's message and params (`context`). Tiers and EP uses are gathered while code runs, not when a
report is made, so the probe has to know which subtest is open at that moment. It wraps the two ways
in, both public API: unittest's `TestCase.subTest` and the `subtests` fixture's `test()`. Each open
subtest gets a key of its own; the fd tap and the EP census attribute to the innermost open key, and
the subtest's report takes what was gathered under it. Whatever a subtest gathered and no report took
(pytest 8, where a subtest is not reported apart) goes to its test when it closes.

Ids are made here, in the process that ran the test, from the live message and params: under xdist
the controller only sees the params' reprs, so an id made there would read differently.
"""
from __future__ import annotations

import itertools
import unittest
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .schema import stable_text, subtest_description, subtest_id

KEY_SEP = "\x00"  # a test's node id, this, the subtest's serial: never a node id of its own


class Scopes:
    """The subtests open in this process, innermost last; `fold` hands what one gathered to its test."""

    def __init__(self, current: Callable[[], str], fold: Callable[[str, str], None]) -> None:
        self.current = current  # the test running now
        self.fold = fold  # (subtest key, test node id): what is still gathered under the key goes to the test
        self.open: list[str] = []
        self._serial = itertools.count(1)
        self._names: dict[str, dict[str, int]] = {}  # per test: descriptions seen, to number repeats

    def key(self) -> str:
        """Where what runs now is gathered: the innermost open subtest, else the test itself."""
        return self.open[-1] if self.open else self.current()

    def innermost(self, nodeid: str) -> str | None:
        key = self.open[-1] if self.open else None
        return key if key is not None and key.startswith(nodeid + KEY_SEP) else None

    @contextmanager
    def opened(self) -> Iterator[None]:
        test = self.current()
        key = f"{test}{KEY_SEP}{next(self._serial)}"
        self.open.append(key)
        try:
            yield
        finally:
            self.open.remove(key)
            self.fold(key, test)

    def name(self, report: Any) -> str:
        """The subtest's id, from its live report; a repeat within one test is numbered (#2, #3)."""
        description = describe(report)
        seen = self._names.setdefault(report.nodeid, {})
        seen[description] = seen.get(description, 0) + 1
        n = seen[description]
        return subtest_id(report.nodeid, description if n == 1 else f"{description} #{n}")

    def forget(self, nodeid: str) -> None:
        self._names.pop(nodeid, None)


def describe(report: Any) -> str:
    """The description pytest prints for a subtest, asked of the report where it was made (pytest 9.2 keeps
    params as reprs, 9.1 as objects: its own words read the same in both), made stable (schema.stable_text)."""
    own = getattr(report, "_sub_test_description", None)
    if callable(own):
        try:
            return stable_text(str(own()))
        except Exception:  # a pytest whose private helper changed: our own rendering of the same
            pass
    context = report.context
    return subtest_description(getattr(context, "msg", None), dict(getattr(context, "kwargs", None) or {}))


def is_subtest(report: Any) -> bool:
    """A subtest's report: pytest's SubtestReport (and pytest-subtests' SubTestReport) carry a context."""
    context = getattr(report, "context", None)
    return context is not None and hasattr(context, "kwargs") and hasattr(context, "msg")


def arm_unittest(scopes: Scopes) -> Callable[[], None]:
    """unittest's TestCase.subTest, wrapped so its body runs with its scope open. Returns the undo."""
    original = unittest.TestCase.__dict__["subTest"]

    @contextmanager
    def subTest(self: unittest.TestCase, *args: Any, **params: Any) -> Iterator[None]:  # noqa: N802
        with scopes.opened(), original(self, *args, **params):
            yield

    subTest.__wrapped__ = original  # type: ignore[attr-defined]
    unittest.TestCase.subTest = subTest  # type: ignore[method-assign]

    def undo() -> None:
        if unittest.TestCase.__dict__.get("subTest") is subTest:
            unittest.TestCase.subTest = original  # type: ignore[method-assign]

    return undo


class _Opened:
    """A subtests-fixture context manager with its scope open around it, exit and report included."""

    def __init__(self, inner: Any, scopes: Scopes) -> None:
        self.inner, self.scopes = inner, scopes
        self.scope: Any = None

    def __enter__(self) -> Any:
        self.scope = self.scopes.opened()
        self.scope.__enter__()
        try:
            return self.inner.__enter__()
        except BaseException:
            self.scope.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self.inner.__exit__(*exc)
        finally:
            self.scope.__exit__(None, None, None)


def wrap_fixture(value: Any, scopes: Scopes) -> None:
    """The `subtests` fixture's value, its test() wrapped in place (its own, not its class's)."""
    test = getattr(value, "test", None)
    if test is None or getattr(test, "_ort_matrix_wrapped", False):
        return

    def opened(*args: Any, **kwargs: Any) -> _Opened:
        return _Opened(test(*args, **kwargs), scopes)

    opened._ort_matrix_wrapped = True  # type: ignore[attr-defined]
    try:
        value.test = opened
    except (AttributeError, TypeError):
        pass  # a fixture value that will not take it: its subtests' tiers then go to their test

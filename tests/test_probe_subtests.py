"""The probe and subtests, through pytester: real pytest 9 runs, a real onnxruntime (CPU) session whose runs print
their tier on fd 1, with and without xdist. What runs inside `with self.subTest(...)` or `subtests.test(...)` is
that subtest's, and its test's too; ids are made where the test ran, so both runs give the same ones."""
import json

import onnxruntime  # noqa: F401  (imported once, here: pytester drops modules a test imports)
import pytest
from helpers import REPO
from test_probe import TINYORT

PLUGIN = ("-p", "ort_matrix_probe.plugin", "-p", "no:cacheprovider")

CASES = '''
import unittest
from tinyort import session, feed


class TestOps(unittest.TestCase):
    def test_loop(self):
        shared = session(b"MATH")  # built by the test itself, run inside each subtest
        for i, tier in enumerate((b"CUDNN_FLASH_ATTENTION", b"FLASH_ATTENTION")):
            with self.subTest("case", i=i):
                session(tier).run(None, feed())
                shared.run(None, feed())
                self.assertNotEqual(i, 1, "the second case fails")

    def test_nested_and_repeated(self):
        with self.subTest(outer=1):
            session(b"EFFICIENT_ATTENTION").run(None, feed())
            with self.subTest(inner=2):
                session(b"MATH").run(None, feed())
        for _ in range(2):
            with self.subTest():  # no message, no params: pytest's "(<subtest>)", numbered on repeat
                pass

    def test_tiers_outside_any_subtest(self):
        session(b"FLASH_ATTENTION").run(None, feed())
        with self.subTest(k="v"):
            pass


def test_fixture(subtests):
    for n in range(2):
        with subtests.test(msg="m", n=n):
            session(b"CUDNN_FLASH_ATTENTION").run(None, feed())
'''


@pytest.fixture
def run(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("ORT_MATRIX_CUDA_OPTIONS", raising=False)
    pytester.makepyfile(tinyort=TINYORT, test_cases=CASES)

    def go(*args):
        report = pytester.path / f"report{len(args)}.json"
        monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
        result = pytester.runpytest_subprocess(*PLUGIN, *args)
        return result, json.loads(report.read_text())
    return go


def subtests_of(report):
    return {sid: (s["outcome"], s["sdpa"]) for t in report["tests"].values() for sid, s in t.get("subtests", {}).items()}


def test_each_subtest_has_its_outcome_and_what_ran_inside_it(run):
    result, report = run()
    result.assert_outcomes(failed=1, passed=4)  # pytest counts the failing subtest; its unittest test reads passed
    subs = subtests_of(report)
    assert subs["test_cases.py::TestOps::test_loop [case] (i=0)"] == ("passed", ["CUDNN_FLASH_ATTENTION", "MATH"])
    assert subs["test_cases.py::TestOps::test_loop [case] (i=1)"] == ("failed", ["FLASH_ATTENTION", "MATH"])
    loop = report["tests"]["test_cases.py::TestOps::test_loop"]
    assert loop["outcome"] == "failed" and loop["by_subtests"] and loop["pytest_outcome"] == "passed"
    assert loop["message"] == "contains 1 failed subtest"
    assert loop["sdpa"] == ["CUDNN_FLASH_ATTENTION", "MATH", "FLASH_ATTENTION", "MATH"]  # its subtests' are its too
    # the EP census of the shared session: built by the test, one run in each subtest, all of them the test's
    shared = [u for u in loop["ep"] if u["runs"].get("CPUExecutionProvider") == 2]
    assert len(shared) == 1, loop["ep"]
    first = report["tests"]["test_cases.py::TestOps::test_loop"]["subtests"]["test_cases.py::TestOps::test_loop [case] (i=0)"]
    assert sorted(sum(u["runs"].values()) for u in first["ep"]) == [1, 1]  # its own session's run and the shared one's


def test_nesting_repeats_and_tiers_outside_subtests(run):
    _, report = run()
    subs = subtests_of(report)
    nested = "test_cases.py::TestOps::test_nested_and_repeated"
    assert subs[f"{nested} (inner=2, outer=1)"] == ("passed", ["MATH"])  # the innermost open subtest's own
    assert subs[f"{nested} (outer=1)"] == ("passed", ["EFFICIENT_ATTENTION"])
    assert f"{nested} (<subtest>)" in subs and f"{nested} (<subtest>) #2" in subs
    outside = report["tests"]["test_cases.py::TestOps::test_tiers_outside_any_subtest"]
    assert outside["sdpa"] == ["FLASH_ATTENTION"] and outside["outcome"] == "passed"
    assert subs["test_cases.py::TestOps::test_tiers_outside_any_subtest (k='v')"] == ("passed", [])


def test_the_subtests_fixture_and_a_test_pytest_fails_for_them(run):
    _, report = run()
    fixture = report["tests"]["test_cases.py::test_fixture"]
    assert fixture["outcome"] == "passed" and "pytest_outcome" not in fixture
    assert list(fixture["subtests"]) == ["test_cases.py::test_fixture [m] (n=0)", "test_cases.py::test_fixture [m] (n=1)"]
    assert fixture["sdpa"] == ["CUDNN_FLASH_ATTENTION"] * 2


def test_xdist_gives_the_same_ids_outcomes_and_tiers(run):
    _, alone = run()
    _, spread = run("-n", "2")
    assert subtests_of(spread) == subtests_of(alone)
    assert {n: t["sdpa"] for n, t in spread["tests"].items()} == {n: t["sdpa"] for n, t in alone["tests"].items()}


def test_the_report_records_the_watched_environment_as_the_process_had_it(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("ORT_MATRIX_ENV_NAMES", json.dumps(["EMPTY_ONE", "SET_ONE", "UNSET_ONE"]))
    monkeypatch.setenv("EMPTY_ONE", "")
    monkeypatch.setenv("SET_ONE", "x")
    monkeypatch.delenv("UNSET_ONE", raising=False)
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(pytester.path / "r.json"))
    pytester.makepyfile(test_a="def test_a(): pass")
    pytester.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=1)
    env = json.loads((pytester.path / "r.json").read_text())["env"]
    assert env == {"EMPTY_ONE": "", "SET_ONE": "x", "UNSET_ONE": None}

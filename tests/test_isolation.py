"""The probe's isolation (ort_matrix_probe/isolation.py) through pytester: real pytest processes, real ORT.

Scopes as pytest's SetupState tears them down, the ORT logger settings the wheel cannot read back,
the cwd, and the three modes. The harness end to end (nox, results, reports) is in test_pollution.py.
"""
import json

import onnxruntime  # noqa: F401  imported once, here: pytester drops modules a test imports
import pytest
from helpers import REPO, SUITES

PLUGIN = ("-p", "ort_matrix_probe.plugin", "-p", "no:cacheprovider")


@pytest.fixture
def probe(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{REPO}:{SUITES}")
    report = pytester.path / "report.json"
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
    monkeypatch.delenv("ORT_MATRIX_CUDA_OPTIONS", raising=False)
    monkeypatch.delenv("ORT_FIXTURE_X", raising=False)

    def run(mode="restore", *args):
        monkeypatch.setenv("ORT_MATRIX_ISOLATION", mode)
        result = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:randomly", *args)
        return result, json.loads(report.read_text())

    return pytester, run


SCOPES = '''
import os
import pytest

def setup_module():
    os.environ["ORT_FIXTURE_MODULE"] = "set by setup_module"  # never torn down

@pytest.fixture(scope="module")
def clean_module_switch():
    os.environ["ORT_FIXTURE_X"] = "module"
    yield
    del os.environ["ORT_FIXTURE_X"]

def test_one(clean_module_switch):
    assert os.environ["ORT_FIXTURE_X"] == "module"

def test_two(clean_module_switch):
    assert os.environ["ORT_FIXTURE_X"] == "module" and os.environ["ORT_FIXTURE_MODULE"]

def test_changes_what_the_module_set(clean_module_switch):
    os.environ["ORT_FIXTURE_X"] = "changed by a test"

def test_three(clean_module_switch):
    assert os.environ["ORT_FIXTURE_X"] == "module", "the module's own value is back for the next test"
'''


def test_a_scope_owns_what_its_setup_set_and_is_judged_when_torn_down(probe):
    pytester, run = probe
    pytester.makepyfile(test_scopes=SCOPES, test_after="import os\ndef test_after():\n    assert 'ORT_FIXTURE_MODULE' not in os.environ\n")
    result, report = run("restore", "test_scopes.py", "test_after.py")
    result.assert_outcomes(passed=5)
    by = {(p["test"], p["scope"]): p for p in report["pollution"]}
    assert set(by) == {("test_scopes.py::test_changes_what_the_module_set", "function"), ("test_scopes.py", "module")}
    assert by[("test_scopes.py", "module")]["changes"] == [
        {"what": "env", "name": "ORT_FIXTURE_MODULE", "before": None, "after": "set by setup_module"}]
    test = by[("test_scopes.py::test_changes_what_the_module_set", "function")]
    assert test["changes"] == [{"what": "env", "name": "ORT_FIXTURE_X", "before": "module", "after": "changed by a test"}]
    assert test["undone"] and test["later_tests"] == 2 and test["process"] == "controller"
    assert report["isolation"] == "restore"


def test_report_names_without_undoing_and_counts_the_tests_that_ran_under_it(probe):
    pytester, run = probe
    pytester.makepyfile(test_scopes=SCOPES)
    result, report = run("report", "test_scopes.py")
    result.assert_outcomes(passed=3, failed=1)  # test_three sees the test's value: nothing was undone
    (test,) = [p for p in report["pollution"] if p["scope"] == "function"]
    assert not test["undone"] and test["later_tests"] == 1


def test_off_watches_nothing(probe):
    pytester, run = probe
    pytester.makepyfile(test_scopes=SCOPES)
    result, report = run("off", "test_scopes.py")
    result.assert_outcomes(passed=3, failed=1)
    assert report["pollution"] == [] and report["isolation"] == "off"


LOGGER = '''
import os
import onnxruntime as ort
from tinyort import run_identity

def test_turns_the_logger_verbose():
    ort.set_default_logger_severity(0)

def test_later_session_logs_quietly(capfd):
    run_identity()
    err = capfd.readouterr().err
    assert "[I:onnxruntime" not in err, "ORT's default logger is still verbose"

def test_changes_dir(tmp_path):
    os.chdir(tmp_path)
'''


def test_ort_logger_settings_and_the_cwd_are_named_and_put_back(probe):
    pytester, run = probe
    pytester.makepyfile(test_logger=LOGGER)
    result, report = run("restore", "test_logger.py")
    result.assert_outcomes(passed=3)
    changes = {p["test"].split("::")[1]: p["changes"] for p in report["pollution"]}
    assert changes["test_turns_the_logger_verbose"] == [
        {"what": "ort_logger", "name": "severity", "before": None, "after": "0"}]
    (cwd,) = changes["test_changes_dir"]
    assert cwd["what"] == "cwd" and cwd["before"] == str(pytester.path)
    # the guard's own teeth: without the undo, the later session logs verbosely
    result, _ = run("report", "test_logger.py")
    result.assert_outcomes(passed=2, failed=1)


def test_a_huge_value_is_cut_in_the_report(probe):
    pytester, run = probe
    pytester.makepyfile(test_huge="import os\ndef test_huge():\n    os.environ['ORT_FIXTURE_X'] = 'v' * 5000\n")
    _, report = run("restore")
    (change,) = report["pollution"][0]["changes"]
    assert len(change["after"]) < 300 and change["after"].endswith("(5000 characters)")


def test_a_bad_isolation_value_is_a_usage_error(probe):
    pytester, run = probe
    pytester.makepyfile(test_x="def test_x(): pass\n")
    pytester.path.joinpath("report.json").write_text("{}")
    result, _ = run("strict")
    assert result.ret == 4
    assert "ORT_MATRIX_ISOLATION='strict': expected one of restore, report, off" in result.stderr.str()

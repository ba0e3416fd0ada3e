"""The typed Result: what a nox run stores is what a reader gets back, a foreign version is refused, and a result
stored again after its reruns never displaces a newer run of its session."""
import json

import pytest
from helpers import CELL, PY, SUITES, Harness

from ort_gpu_matrix.judge.verdicts import Status, TeethCoverage
from ort_gpu_matrix.store.results import SCHEMA_VERSION, Result, ResultError, load
from ort_gpu_matrix.util import codec


@pytest.fixture(scope="module")
def stored(tmp_path_factory, venvs):
    """One real teeth run through nox (require_cudnn first, so coverage is checked) to read back."""
    h = Harness(tmp_path_factory.mktemp("results"), venvs)
    h.write(["test_canary.py"], root=SUITES / "canary", modes=["require_cudnn", "teeth"],
            expect="[suite.s.expect.teeth]\nmin_failures = 3\n"
                   'known_toothless = [{ test = "values_only", reason = "value-only" }]\n')
    run = h.nox("-s", f"t-{PY}-x")
    return run


def test_a_stored_result_reads_back_equal_and_typed(stored):
    path = stored.results_dir / f"{CELL}-teeth.json"
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    result = load(path)
    assert result.verdict is Status.PASS and result.passed
    assert isinstance(result.teeth_coverage, TeethCoverage) and result.teeth_coverage.bitten == 3
    assert result.counts.failed == 3
    assert result.to_dict() == data  # nothing lost or added on the way through the types


def test_an_unknown_schema_version_is_refused_with_the_file_named(stored, tmp_path):
    path = stored.results_dir / f"{CELL}-teeth.json"
    data = json.loads(path.read_text())
    for version in (SCHEMA_VERSION + 1, None):
        data["schema_version"] = version
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(data))
        with pytest.raises(ResultError, match=rf"^{bad}: schema_version {version!r} is not one"):
            load(bad)


def test_a_file_that_is_not_a_result_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(ResultError, match=f"^{bad}: cannot be read as a result"):
        load(bad)
    bad.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "session": "s"}))
    with pytest.raises(ResultError, match=f"^{bad}: "):
        load(bad)


def test_unchecked_coverage_is_one_key():
    assert codec.encode(TeethCoverage()) == {"checked": False, "scope": "all"}
    assert Result.__dataclass_fields__["schema_version"].default == SCHEMA_VERSION


def test_a_result_written_before_stale_rules_existed_still_reads(stored, tmp_path):
    data = json.loads((stored.results_dir / f"{CELL}-teeth.json").read_text())
    assert data["stale_rules"] == []  # the run's rules all matched
    del data["stale_rules"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert load(old).stale_rules == []


def test_a_version_1_result_still_reads_without_flaky_sets_or_confirmation(stored, tmp_path):
    data = json.loads((stored.results_dir / f"{CELL}-teeth.json").read_text())
    data["schema_version"] = 1
    del data["known_flaky"], data["confirmation"]
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(data))
    result = load(old)
    # read, it is today's shape (results.from_dict; test_pollution.py says the same of isolation)
    assert result.schema_version == SCHEMA_VERSION and result.known_flaky == {} and result.confirmation is None


def test_a_version_3_teeth_coverage_reads_as_a_count_of_cudnn_tests(stored, tmp_path):
    """Versions 1 to 3 counted cuDNN tests (`cudnn_tests`); 4 names the tier teeth took away."""
    data = json.loads((stored.results_dir / f"{CELL}-teeth.json").read_text())
    cov = data["teeth_coverage"]
    assert cov["checked"] and cov["tier"] == "CUDNN_FLASH_ATTENTION" and cov["tier_tests"] > 0
    old_cov = {k: v for k, v in cov.items() if k not in ("tier", "tier_tests")}
    old = tmp_path / "v3.json"
    old.write_text(json.dumps({**data, "schema_version": 3, "teeth_coverage": {**old_cov, "cudnn_tests": 7}}))
    read = load(old).teeth_coverage
    assert read is not None and (read.tier, read.tier_tests, read.bitten) == ("CUDNN_FLASH_ATTENTION", 7, cov["bitten"])
    new = tmp_path / "v4.json"  # a version 4 result is read as written: nothing renamed
    new.write_text(json.dumps({**data, "teeth_coverage": {**cov, "tier": "FLASH_ATTENTION"}}))
    assert load(new).teeth_coverage.tier == "FLASH_ATTENTION"


def test_an_amended_result_never_replaces_a_newer_run_that_became_current_meanwhile(harness):
    """A confirmation re-stores each amended result; if another run of the session stored a newer result while the
    reruns ran, that newer one stays current, and the amended copy goes to its own bundle only."""
    import dataclasses

    from ort_gpu_matrix.store import results as store

    session = f"{CELL}-normal"
    assert harness.run(["test_allpass.py"], session=session).proc.returncode == 0
    older = store.load(harness.results / f"{session}.json")
    assert harness.run(["test_allpass.py"], session=session).proc.returncode == 0
    newer = store.load(harness.results / f"{session}.json")
    assert newer.run_id != older.run_id
    amended = dataclasses.replace(older, reasons=["amended"])
    assert store.store_amended(harness.results, amended) is False
    assert json.loads((harness.results / f"{session}.json").read_text())["run_id"] == newer.run_id
    assert json.loads((harness.results / "runs" / session / older.run_id / "result.json").read_text())["reasons"] == [
        "amended"]
    assert store.store_amended(harness.results, dataclasses.replace(newer, reasons=["amended too"])) is True
    assert json.loads((harness.results / f"{session}.json").read_text())["reasons"] == ["amended too"]


def test_an_amended_result_never_replaces_a_newer_run_stored_by_another_version(tmp_path):
    """The current result is another run's even when this version cannot read it (another schema version, a hand
    edit): its run id decides, so an older amended verdict never replaces a newer run's, whatever wrote it."""
    from helpers import result

    from ort_gpu_matrix.store import results as store

    amended = result("normal", {"t::a": "passed"}, run_id="OLDRUN", bundle=None)
    current = store.current_path(tmp_path, amended.session)
    current.write_text(json.dumps({"schema_version": 99, "run_id": "NEWRUN", "session": amended.session}))
    assert store.store_amended(tmp_path, amended) is False
    assert json.loads(current.read_text())["run_id"] == "NEWRUN"
    current.write_text("{ cut short")  # not JSON: no run stands there, so the amended result becomes current
    assert store.store_amended(tmp_path, amended) is True
    assert json.loads(current.read_text())["run_id"] == "OLDRUN"

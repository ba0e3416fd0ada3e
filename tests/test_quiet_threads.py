"""A suite's quiet_threads through a real nox cell on CPU: the test process gets OMP_WAIT_POLICY=PASSIVE and ORT
sessions with their spinning off, and the result records both variables, by default and with `true`; with `false`,
neither."""
import pytest
from helpers import CELL, SUITES, Harness


@pytest.mark.parametrize("key, quiet", [("", True), ("quiet_threads = true\n", True), ("quiet_threads = false\n", False)],
                         ids=["default", "true", "false"])
def test_quiet_threads_reach_the_test_process_and_the_result(tmp_path, venvs, key, quiet):
    h = Harness(tmp_path, venvs)
    h.write(["test_quiet.py"], root=SUITES / "quiet", suite_extra=f'env = {{ QUIET_EXPECTED = "{int(quiet)}" }}\n' + key)
    run = h.nox("-s", CELL)
    assert run.proc.returncode == 0, run.output[-4000:]
    r = run.result("normal")
    assert r["counts"]["passed"] == 1, r["reasons"]
    assert r["env"].get("OMP_WAIT_POLICY") == ("PASSIVE" if quiet else None)
    assert r["env"].get("ORT_MATRIX_QUIET_THREADS") == ("1" if quiet else None)

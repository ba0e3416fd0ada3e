"""What a cell's run promises and no broader test pins down: one test per promise (sweeps have theirs in
test_sweep_promises.py).

Each runs the real harness (real nox, real venvs, real pytest) against a small fixture suite
(tests/fixtures/suites/run_promises), or, for the stored result's atomicity, the real store() on a real
filesystem watched by an audit hook in a subprocess. Each docstring opens with the id of the fault it catches,
as docs/mutations-kept.md lists it.
"""
import json
import os
import subprocess
import sys

from helpers import CELL, PY, REPO, SUITES

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.drive.census import prior_of as _prior
from ort_gpu_matrix.plan.cells import cells_of
from ort_gpu_matrix.store.results import load

PROMISES = SUITES / "run_promises"
CANARY = SUITES / "canary"
CUDNN = "CUDNN_FLASH_ATTENTION"
NOT_CONCURRENT = 'pytest_args = ["-k", "not concurrent"]'  # its 0.55 s overlap check is not what these test


def test_teeth_message_is_matched_exactly(harness):
    """teeth-message-substring: a failure whose first line only contains the canary's message has not bitten."""
    r = harness.run(["test_near_miss.py"], root=PROMISES, modes=["teeth"]).result("teeth")
    assert r["counts"]["failed"] == 2
    assert r["verdict"] == "fail"
    (reason,) = r["reasons"]
    assert reason.startswith("1 failure(s) other than the canary's: test_near_miss.py::test_near_miss failed: "
                             "AssertionError: 'CUDNN_FLASH_ATTENTION' != 'MATH' (raised by a helper"), reason


def test_dispatch_rules_apply_only_to_dispatch_tests(harness):
    """dispatch-tests-ignored: tests outside dispatch_tests may dispatch a kernel the rule forbids."""
    expect = ('[suite.s.expect.normal]\nforbid_kernels = ["CUDNN_FLASH_ATTENTION"]\n'
              'dispatch_tests = "no_ort_at_all"\n')
    r = harness.run(["test_canary.py"], root=CANARY, expect=expect, suite_extra=NOT_CONCURRENT).result("normal")
    assert r["dispatch"]["tests_per_tier"] == {CUDNN: 3}  # the forbidden kernel did run, outside the scope
    assert r["verdict"] == "pass", r["reasons"]


def test_setup_and_teardown_errors_are_counted_as_errors(harness):
    """teardown-errors-dropped, probe-setup-failure-as-failed: both are errors, each named in the verdict."""
    r = harness.run(["test_phases.py"], root=PROMISES).result("normal")
    c = r["counts"]
    assert (c["passed"], c["failed"], c["errors"]) == (2, 0, 2), c
    assert r["verdict"] == "fail"
    assert r["reasons"] == ["2 unexpected failure(s): test_phases.py::test_setup_breaks error: RuntimeError: setup broke; "
                            "test_phases.py::test_teardown_breaks::teardown error: RuntimeError: teardown broke"]


def test_an_xfail_is_not_a_failure(harness):
    """xfail-judged-as-failure: an xfail (and a plain XPASS) passes the verdict."""
    r = harness.run(["test_xfail.py"], suite_extra='pytest_args = ["-k", "not strict"]').result("normal")
    c = r["counts"]
    assert (c["passed"], c["xfailed"], c["xpassed"], c["failed"]) == (1, 1, 1, 0)
    assert r["verdict"] == "pass", r["reasons"]


def _env_run(harness, tmp_path, fake_libs, test):
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "planted_module.py").write_text("PLANTED = True\n")
    env = {"PYTHONPATH": str(planted), "LD_PRELOAD": str(fake_libs["cudart"]), "PLANTED_LIB": str(fake_libs["cudart"])}
    return harness.run(["test_env.py"], root=PROMISES, pythonpath=[], env=env,
                       suite_extra=f'pytest_args = ["-k", "{test}"]').result("normal")


def test_an_empty_pythonpath_drops_the_inherited_one(harness, tmp_path, fake_libs):
    """pythonpath-inherited, ld-preload-inherited: pythonpath = [] and no pinned libs mean none, not the caller's."""
    r = _env_run(harness, tmp_path, fake_libs, "inherited")
    assert r["counts"]["passed"] == 2
    assert r["verdict"] == "pass", r["reasons"]
    assert r["env"]["PYTHONPATH"] is None and r["env"]["LD_PRELOAD"] is None  # unset in the test process


def test_the_test_process_runs_in_its_private_dir(harness, tmp_path, fake_libs):
    """cwd-is-suite-root: the test process's cwd is its private 0700 dir, never the suite root."""
    r = _env_run(harness, tmp_path, fake_libs, "cwd")
    assert r["counts"]["passed"] == 1
    assert r["verdict"] == "pass", r["reasons"]


def test_plugin_autoload_is_off_in_the_test_process(harness, tmp_path, fake_libs):
    """plugin-autoload-on: pytest's plugin autoload is off in the test process."""
    r = _env_run(harness, tmp_path, fake_libs, "autoload")
    assert r["counts"]["passed"] == 1
    assert r["verdict"] == "pass", r["reasons"]


STORE_WATCHED = """
import json, sys
from pathlib import Path

target = sys.argv[3] + "/" + sys.argv[2]
seen = []

def hook(event, args):
    if event == "open" and str(args[0]) == target:
        seen.append(["open", str(args[1]), args[2]])
    elif event == "os.rename" and str(args[1]) == target:
        seen.append(["rename", str(args[0])])

sys.addaudithook(hook)
from ort_gpu_matrix.store import results
results.store(Path(sys.argv[3]), results.load(Path(sys.argv[1])), {})
print(json.dumps(seen))
"""


def test_the_current_result_appears_only_by_rename(harness, tmp_path):
    """result-written-in-place, write-json-in-place: <session>.json is never opened for writing; a complete
    temp file beside it is renamed over it, so a reader sees no file or the whole result, never half of one."""
    run = harness.run(["test_allpass.py"])
    source = run.results_dir / f"{CELL}-normal.json"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run([sys.executable, "-c", STORE_WATCHED, str(source), source.name, str(elsewhere)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(proc.stdout)
    assert [e[0] for e in events] == ["rename"], events
    assert os.path.dirname(events[0][1]) == str(elsewhere)  # the temp file was beside the target
    copy, original = load(elsewhere / source.name), load(source)
    assert (copy.run_id, copy.verdict, copy.counts) == (original.run_id, original.verdict, original.counts)


def test_teeth_ignores_a_require_cudnn_result_of_another_venv(harness):
    """teeth-prior-other-venv: a require_cudnn census counts for teeth only from a venv of the same fingerprint."""
    harness.write(["test_canary.py"], root=CANARY, modes=["require_cudnn"], suite_extra=NOT_CONCURRENT)
    run = harness.nox("-s", CELL)
    prior = load(run.results_dir / f"{CELL}-require_cudnn.json")
    assert prior.dispatch.tier_tests(CUDNN)  # a census worth reading
    (cell,) = cells_of(load_matrix(harness.matrix))
    earlier = {prior.session: prior}
    same = dict(prior.venv.fingerprint)
    assert _prior(earlier, cell, "teeth", same) == prior  # the control: same venv, read
    other = {**same, "tools": [*same["tools"], "iniconfig"]}
    assert _prior(earlier, cell, "teeth", other) is None


def test_teeth_never_reads_an_older_require_cudnn_result(harness):
    """teeth-prior-older-run: a require_cudnn result of an earlier nox run, still current on disk, is not read."""
    harness.write(["test_canary.py"], root=CANARY, modes=["require_cudnn", "teeth"], suite_extra=NOT_CONCURRENT)
    first = harness.nox("-s", f"{CELL}-require_cudnn")
    assert first.result("require_cudnn")["dispatch"]["tests_per_tier"] == {CUDNN: 3}
    r = harness.nox("-s", f"{CELL}-teeth").result("teeth")
    assert r["teeth_coverage"] == {"checked": False, "scope": "known"}
    assert "teeth coverage not checked: no up-to-date require_cudnn result for this pairing" in r["warnings"]


def test_min_passed_is_a_minimum(harness):
    """min-passed-off-by-one: two passed, min_passed = 3."""
    r = harness.run(["test_allpass.py"], expect="[suite.s.expect.normal]\nmin_passed = 3\n").result("normal")
    assert r["counts"]["passed"] == 2
    assert r["reasons"] == ["only 2 passed, min_passed is 3"]


def test_require_cudnn_makes_gated_tests_fail_instead_of_skip(harness):
    """require-cudnn-flag-off: with MATH forced, the dispatch-gated tests fail in require_cudnn, never skip."""
    r = harness.run(["test_canary.py"], root=CANARY, modes=["require_cudnn"],
                    suite_extra=NOT_CONCURRENT + '\nprovider_options = { sdpa_kernel = "16" }').result("require_cudnn")
    c = r["counts"]
    assert (c["failed"], c["skipped"]) == (2, 0), c
    assert r["env"]["ORT_TEST_REQUIRE_CUDNN_SDPA"] == "1"


def test_teeth_forces_math_over_the_suites_provider_options(harness):
    """suite-options-override-teeth: a suite's sdpa_kernel never overrides the MATH teeth forces."""
    r = harness.run(["test_canary.py"], root=CANARY, modes=["teeth"],
                    suite_extra=NOT_CONCURRENT + '\nprovider_options = { sdpa_kernel = "8", device_id = "0" }',
                    expect="[suite.s.expect.teeth]\nmin_failures = 2\n").result("teeth")
    assert json.loads(r["env"]["ORT_MATRIX_CUDA_OPTIONS"]) == {"sdpa_kernel": "16", "device_id": "0"}
    assert r["counts"]["failed"] == 2
    assert r["verdict"] == "pass", r["reasons"]


def test_a_truncated_file_rebuilds_the_venv(harness, tmp_path):
    """damage-size-unchecked: a file of onnxruntime cut short (right name, wrong size) is damage."""
    harness.venvs = tmp_path / "own-venvs"
    harness.write(["test_allpass.py"])
    assert harness.nox("-s", CELL).result("normal")["verdict"] == "pass"
    init = harness.venvs / f"t-{PY}-cpu-none" / "lib" / f"python{PY}" / "site-packages" / "onnxruntime" / "__init__.py"
    size = init.stat().st_size
    head = init.read_bytes()[: size // 2]
    init.unlink()  # a new file: the venv's may be a hard link into an installer's cache
    init.write_bytes(head)
    run = harness.nox("-s", CELL)
    assert f"it is damaged: onnxruntime/__init__.py has {size // 2} bytes, RECORD says {size}" in run.output, \
        run.output[-2000:]
    assert run.result("normal")["verdict"] == "pass"
    assert init.stat().st_size == size

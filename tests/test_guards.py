"""The guards that keep a green run honest, each proven inside a real test process."""
import os
import stat

from helpers import CELL, SUITES
from helpers import CHECKOUT_ROOT as CHECKOUT


def test_checkout_source_dir_does_not_shadow_the_wheel(harness):
    """The suite sits inside an ORT checkout whose onnxruntime/ is a source dir."""
    root = CHECKOUT / "onnxruntime" / "test" / "python" / "transformers"
    run = harness.run(["test_shadow.py"], root=root, pythonpath=["."])
    r = run.result("normal")
    assert r["verdict"] == "pass", (r["reasons"], run.output[-3000:])
    assert r["counts"]["passed"] == 1
    (audit,) = r["libraries"]["audits"]
    assert audit["onnxruntime_file"].startswith(r["venv"]["path"])


def test_planted_sitecustomize_is_never_executed(harness, tmp_path):
    """A sitecustomize.py in the dir that holds the private temp dirs must not run.

    The caller's shell even has that dir on PYTHONPATH: the test process must not inherit it.
    """
    parent = tmp_path / "shared-tmp"
    parent.mkdir()
    marker = tmp_path / "PLANTED_RAN"
    # Only the test process has ORT_MATRIX_REPORT; nox itself may import the plant, the tests must not.
    (parent / "sitecustomize.py").write_text(
        f"import os\nPLANTED = True\nif os.environ.get('ORT_MATRIX_REPORT'):\n    open({str(marker)!r}, 'w').write('ran')\n")
    run = harness.run(["test_guards.py"], root=SUITES / "guards", env={"TMPDIR": str(parent), "PYTHONPATH": str(parent), "MATRIX_KEEP_WORKDIR": "1"},
                      suite_extra='pytest_args = ["-k", "sitecustomize"]')
    r = run.result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    workdir = r["workdir"]
    assert os.path.dirname(workdir) == str(parent), "the private dir was not made where the plant is"
    assert stat.S_IMODE(os.stat(workdir).st_mode) == 0o700
    assert not marker.exists(), "the planted sitecustomize ran"


def test_pinned_libraries_are_mapped_in_the_test_process(harness, fake_libs):
    libs = f'cudart = "{fake_libs["cudart"]}"\ncudnn = "{fake_libs["cudnn"]}"'
    run = harness.run(["test_guards.py"], root=SUITES / "guards", libs=libs,
                      suite_extra='pytest_args = ["-k", "mapped"]')
    r = run.result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    assert r["counts"]["passed"] == 1
    assert r["env"]["LD_PRELOAD"] == f"{fake_libs['cudart']}:{fake_libs['cudnn_real']}"
    assert r["env"]["LD_LIBRARY_PATH"] == str(fake_libs["cudart"].parent)


def test_sdpa_kernel_injection_reaches_every_provider_form(harness):
    """The documented knob forces sdpa_kernel=16 in normal mode, exactly as teeth does."""
    run = harness.run(["test_guards.py"], root=SUITES / "guards",
                      suite_extra='pytest_args = ["-k", "injection"]\nprovider_options = { sdpa_kernel = "16" }',
                      expect="[suite.s.expect.normal]\nmin_passed = 5\n")
    r = run.result("normal")
    assert r["verdict"] == "pass", (r["reasons"], run.output[-3000:])
    assert r["counts"]["passed"] == 5


def test_inherited_environment_does_not_leak_into_the_test_process(harness, tmp_path):
    """PYTHONPATH or LD_PRELOAD from the caller's shell never reach the tests."""
    run = harness.run(["test_guards.py"], root=SUITES / "guards", env={"PYTHONPATH": str(tmp_path),
                      "LD_PRELOAD": "", "PYTEST_ADDOPTS": "-k nothing_matches_this"},
                      suite_extra='pytest_args = ["-k", "sitecustomize"]')
    r = run.result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    assert r["env"]["PYTHONPATH"] == str(SUITES)
    assert run.proc.returncode == 0 and CELL in run.output


def test_libs_found_by_search_are_pinned_by_real_path(harness, fake_libs, tmp_path):
    libs = f'search = ["{tmp_path}/empty", "{fake_libs["cudnn"].parent}"]'
    (tmp_path / "empty").mkdir()
    r = harness.run(["test_guards.py"], root=SUITES / "guards", libs=libs,
                    suite_extra='pytest_args = ["-k", "mapped"]').result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    assert r["env"]["LD_PRELOAD"] == f"{fake_libs['cudart']}:{fake_libs['cudnn_real']}"


def test_search_that_finds_nothing_names_the_key(harness, tmp_path):
    harness.write(["test_allpass.py"], libs=f'search = ["{tmp_path}"]')
    run = harness.nox("-s", CELL)
    assert run.proc.returncode != 0
    assert f"libs.x.search: no libcudart.so.* in ['{tmp_path}']" in run.output
    assert f"libs.x.search: no libcudnn.so.9 in ['{tmp_path}']" in run.output

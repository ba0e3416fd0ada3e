"""The library audit: what a by-name load resolves to inside the test process, with real .so files."""
from helpers import CHECKOUT_ROOT, FAKE_CUDNN, SUITES, build_so

GUARDS = SUITES / "guards"


def _run(harness, libs, fake_libs, load_torch=True):
    env = f'env = {{ FAKE_TORCH_CUDNN = "{fake_libs["torch_cudnn"]}" }}' if load_torch else ""
    return harness.run(["test_libs.py"], root=GUARDS, libs=libs, suite_extra=env).result("normal")


def test_pinned_cudnn_wins_and_torchs_copy_is_a_warning(harness, fake_libs):
    r = _run(harness, f'cudart = "{fake_libs["cudart"]}"\ncudnn = "{fake_libs["cudnn"]}"', fake_libs)
    assert r["verdict"] == "pass", r["reasons"]
    (audit,) = r["libraries"]["audits"]
    assert r["env"]["LD_PRELOAD"].endswith(str(fake_libs["cudnn_real"]))  # the real path, not the symlink
    assert audit["by_name"]["cudnn"] == {"soname": "libcudnn.so.9", "file": str(fake_libs["cudnn_real"]), "version": 91400}
    assert audit["by_name"]["cudart"]["file"] == str(fake_libs["cudart"])
    assert audit["by_name"]["cudart"]["version"] == 13000
    assert {c["file"]: c["file_version"] for c in audit["cudnn_copies"]} == {
        str(fake_libs["cudnn_real"]): "9.14.0", str(fake_libs["torch_cudnn"]): "9.19.0"}
    (warning,) = r["warnings"]
    assert warning == (f"2 copies of cuDNN mapped in one test process: {fake_libs['cudnn_real']} (9.14.0), "
                       f"{fake_libs['torch_cudnn']} (9.19.0)")


def test_without_a_pin_torchs_copy_serves_by_name(harness, fake_libs):
    r = _run(harness, "none = true", fake_libs)
    assert r["verdict"] == "pass", r["reasons"]
    (audit,) = r["libraries"]["audits"]
    assert audit["by_name"]["cudnn"]["file"] == str(fake_libs["torch_cudnn"])
    assert audit["by_name"]["cudnn"]["version"] == 91900


def test_a_pin_that_does_not_win_by_name_fails(harness, fake_libs, tmp_path):
    """cuDNN 8 pinned where ORT loads libcudnn.so.9 by name: torch's copy serves, and the verdict says so."""
    cudnn8 = build_so(tmp_path / "cudnn8" / "libcudnn.so.8", "libcudnn.so.8", FAKE_CUDNN % 8900)
    r = _run(harness, f'cudnn = "{cudnn8}"', fake_libs)
    assert r["verdict"] == "fail"
    (reason,) = r["reasons"]
    assert reason == (f"by-name libcudnn.so.9 resolved to {fake_libs['torch_cudnn']} (version 91900), "
                      f"not the pinned {cudnn8}")


def test_onnxruntime_from_a_source_dir_fails_the_audit(harness):
    """A suite that puts the checkout root on its pythonpath imports the source dir: caught twice."""
    root = CHECKOUT_ROOT / "onnxruntime" / "test" / "python" / "transformers"
    r = harness.run(["test_shadow.py"], root=root, pythonpath=[".", "../../../.."]).result("normal")
    assert r["verdict"] == "fail"
    assert any(x.startswith(f"onnxruntime was imported from {CHECKOUT_ROOT}/onnxruntime/__init__.py, not from the pairing's venv")
               for x in r["reasons"]), r["reasons"]

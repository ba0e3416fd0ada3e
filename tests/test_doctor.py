"""`nox -s doctor`, plain `nox`, and the host checks a pinned library gets, with real .so files built by cc."""
import os
import re
import subprocess
import sys

import pytest
from helpers import CELL, FAKE_CUDART, FAKE_CUDNN, PY, REPO, SUITES, build_so, matrix_head, suite_head


@pytest.fixture(scope="module")
def pip_libs(tmp_path_factory):
    """A cuDNN unpacked from a pip wheel outside any site-packages, a torch environment bundling another."""
    d = tmp_path_factory.mktemp("piplibs")
    cudnn = build_so(d / "cudnn912" / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % 91200)
    info = d / "cudnn912" / "nvidia_cudnn_cu13-9.12.0.46.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cudnn-cu13\nVersion: 9.12.0.46\n")
    cudart = build_so(d / "cuda" / "libcudart.so.13", "libcudart.so.13", FAKE_CUDART % 13000)
    site = d / "torchenv" / "lib" / f"python{PY}" / "site-packages"
    build_so(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % 91900)
    (site / "nvidia_cudnn_cu13-9.19.0.56.dist-info").mkdir()
    (site / "nvidia_cudnn_cu13-9.19.0.56.dist-info" / "METADATA").write_text("Name: nvidia-cudnn-cu13\nVersion: 9.19.0.56\n")
    return {"cudnn": cudnn, "cudart": cudart, "torchenv": d / "torchenv"}


DOCTOR_MATRIX = matrix_head(
    pythons=None, suite="s", modes=["normal"], torch={"none": "skip = true", "env": 'environment = "{torchenv}"'},
    libs={"pip": 'cudart = "{cudart}"\ncudnn = "{cudnn}"', "plain": "none = true"}) + """[pairing]
include = [
  {{ python = "{py}", ort = "cpu", torch = "env", libs = "pip" }},
  {{ python = "{py}", ort = "cpu", torch = "none", libs = "plain" }},
  {{ python = "3.99", ort = "cpu", torch = "none", libs = "plain" }},
]
""" + suite_head("s", ["test_allpass.py"], [".."])


def _doctor_matrix(harness, pip_libs, root=SUITES / "verdicts"):
    harness.matrix.write_text(DOCTOR_MATRIX.format(py=PY, root=root, **{k: str(v) for k, v in pip_libs.items()}))


def test_doctor_shows_pairings_libraries_torch_venvs_and_interpreters(harness, pip_libs, tmp_path):
    _doctor_matrix(harness, pip_libs)
    harness.venvs = tmp_path / "own-venvs"  # doctor builds nothing; the shared dir may hold a venv of this name
    run = harness.nox("-s", "doctor")
    out = run.output
    assert run.proc.returncode == 0, out
    assert f"matrix: {harness.matrix}" in out
    assert f"gpu-{PY}-pip: runnable here" in out and f"gpu-{PY}-plain: runnable here" in out
    assert ("gpu-3.99-plain: not runnable here: pairing.include[2].python: no python 3.99 for gpu-3.99-plain: none on "
            "PATH, in pyenv's versions, in /usr/bin or among uv's pythons (install it: ") in out
    assert f"sessions: gpu-{PY}-pip, gpu-{PY}-pip-normal" in out
    # a pip cuDNN outside any site-packages: its version from the dist-info beside it, and what it reports
    assert f"{pip_libs['cudnn']} (version 9.12.0.46; reports 91200)" in out
    assert f"{pip_libs['cudart']} (version unknown; reports 13000)" in out
    assert "GPUs: none" in out
    assert "env: " in out and "bundles cudnn 9.19.0.56" in out
    assert f"warning: gpu-{PY}-pip pins cuDNN 9.12.0.46 but torch brings 9.19.0.56" in out
    assert f"gpu-{PY}-plain: absent (" in out
    assert re.search(rf"python {re.escape(PY)}: /\S+python\S* \(from (PATH|pyenv|/usr/bin|the python running nox)\)\n", out)
    assert re.search(r"python 3.99: none on PATH, in pyenv's versions, in /usr/bin or among uv's pythons; install it: "
                     r"(pyenv install 3.99 or )?uv python install 3.99\n", out), out
    assert "doctor: 2 cell(s) can run here" in out


def test_doctor_says_when_a_venv_is_up_to_date_and_why_it_is_stale(harness, pip_libs, tmp_path):
    _doctor_matrix(harness, pip_libs)
    harness.venvs = tmp_path / "own-venvs"
    assert harness.nox("-s", f"gpu-{PY}-plain").proc.returncode == 0
    out = harness.nox("-s", "doctor").output
    assert f"gpu-{PY}-plain: up to date ({harness.venvs}" in out, out
    harness.matrix.write_text(harness.matrix.read_text().replace('with = ["onnx==1.20.1"]', 'with = ["onnx==1.19.1"]'))
    out = harness.nox("-s", "doctor").output
    assert f"gpu-{PY}-plain: stale: fingerprint of {harness.venvs}" in out and "(changed: with)" in out, out


def test_doctor_fails_only_for_a_matrix_no_host_could_run(harness, pip_libs, tmp_path):
    _doctor_matrix(harness, pip_libs, root=tmp_path / "no-such-suite")
    run = harness.nox("-s", "doctor")
    assert run.proc.returncode != 0
    assert "the matrix cannot run on any host" in run.output
    assert f"suite.s.root: {tmp_path / 'no-such-suite'} is not a directory" in run.output


def test_plain_nox_runs_doctor_then_every_runnable_cell(harness):
    harness.write(["test_allpass.py"])
    run = harness.nox()
    assert run.proc.returncode == 0, run.output[-3000:]
    assert run.output.index("Running session doctor") < run.output.index(f"Running session {CELL}")
    assert run.result("normal")["verdict"] == "pass"


def test_plain_nox_fails_when_no_cell_can_run_here(harness, tmp_path):
    harness.write(["test_allpass.py"], libs=f'cudart = "{tmp_path}/libcudart.so.13"')
    listing = harness.nox("-l").output
    assert "* nothing-to-run" in listing and f"- {CELL} " in listing
    run = harness.nox()
    assert run.proc.returncode != 0
    assert "no cell of" in run.output and "can run on this host" in run.output
    assert not harness.results.exists()


@pytest.mark.parametrize("kind, expected", [
    ("text", "is not an ELF file: ld.so would skip it and pin nothing"),
    ("object", "is an ELF ET_REL, not a shared library"),
    ("soname", "is a shared library with soname libcudnn.so.9, not libcudart.so.<N>"),
])
def test_a_pinned_file_must_be_a_shared_library_with_a_fitting_soname(harness, tmp_path, kind, expected):
    pin = tmp_path / "pin" / "libcudart.so.13"
    pin.parent.mkdir()
    if kind == "text":
        pin.write_text("not a library\n")
    elif kind == "object":
        src = tmp_path / "o.c"
        src.write_text(FAKE_CUDART % 13000)
        subprocess.run(["cc", "-c", "-fPIC", "-o", str(pin), str(src)], check=True)
    else:
        build_so(pin, "libcudnn.so.9", FAKE_CUDNN % 91400)
    harness.write(["test_allpass.py"], libs=f'cudart = "{pin}"')
    run = harness.nox("-s", CELL)
    assert run.proc.returncode != 0
    assert f"libs.x.cudart: {pin} {expected}" in run.output, run.output
    assert "building venv" not in run.output and not harness.results.exists()


def test_a_pin_for_another_machine_is_refused_before_building(harness, tmp_path):
    """A real libcudart.so.13 built for another CPU: ld.so would say "cannot be preloaded ... ignored" and run on."""
    pin = build_so(tmp_path / "pin" / "libcudart.so.13", "libcudart.so.13", FAKE_CUDART % 13000)
    data = bytearray(pin.read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
    pin.write_bytes(bytes(data))
    harness.write(["test_allpass.py"], libs=f'cudart = "{pin}"')
    run = harness.nox("-s", CELL)
    assert run.proc.returncode != 0
    assert f"libs.x.cudart: {pin} is built for EM_AARCH64, this host runs EM_X86_64" in run.output, run.output
    assert not harness.results.exists()


def test_the_audit_fails_a_pin_that_was_never_mapped():
    """The last line of defence behind the host checks: whatever the reason, a pin absent from the maps fails."""
    from ort_gpu_matrix.judge.libraries import library_audit

    by_name = {"cudart": {"soname": "libcudart.so.13", "file": "/usr/lib/libcudart.so.13.0.96", "version": 13000},
               "cudnn": {"soname": "libcudnn.so.9", "file": "/opt/x/libcudnn.so.9", "version": 91400}}
    audit = {"pid": 7, "mapped": ["/usr/lib/libcudart.so.13.0.96"], "cudnn_copies": [], "by_name": by_name,
             "onnxruntime_file": None, "preload": ["/usr/lib/libcudart.so.13.0.96", "/opt/x/libcudnn.so.9"],
             "process": "controller"}
    report = {"audits": [audit], "tests": {"t.py::a": {"process": "controller"}}}
    _, reasons, _ = library_audit(report, ("/usr/lib/libcudart.so.13.0.96", "/opt/x/libcudnn.so.9"), "/venv")
    assert reasons == ["the pinned /opt/x/libcudnn.so.9 was never mapped in the test process (pid 7): "
                       "ld.so skipped it, so nothing was pinned"]
    _, reasons, _ = library_audit(report, ("/usr/lib/libcudart.so.13.0.96",), "/venv")
    assert reasons == []


def test_nox_list_gives_the_reason_next_to_each_cell_it_cannot_run(harness, tmp_path):
    harness.write(["test_allpass.py"], libs=f'cudnn = "{tmp_path}/nope/libcudnn.so.9"')
    listing = harness.nox("-l").output
    assert f"[not runnable here: {tmp_path}/nope/libcudnn.so.9 does not exist on this host]" in listing


def test_doctor_on_the_shipped_matrix_names_every_cell():
    """The shipped matrix on this machine: doctor runs, names every cell, and exits 0."""
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "doctor"],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={k: v for k, v in os.environ.items() if not k.startswith("MATRIX_")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for cell in ("gpu-3.11-cu129", "gpu-3.12-cu129", "gpu-3.12-cu130", "gpu-3.12-h200", "gpu-3.12-unpinned",
                 "gpu-3.12-h200pip"):
        assert f"  {cell}: " in proc.stdout


@pytest.mark.parametrize("args, env, coloured", [
    (["--forcecolor"], {}, True),
    (["--nocolor"], {}, False),
    ([], {"NO_COLOR": "1"}, False),
    ([], {}, False),  # not a tty
])
def test_verdicts_follow_nox_colour_settings_and_every_session_ends_with_one(harness, args, env, coloured):
    harness.write(["test_allpass.py"])
    run = harness.nox("-s", CELL, *args, env=env)
    last_lines = [line for line in run.output.splitlines() if line.startswith("verdict ")]
    assert last_lines, run.output
    assert ("\x1b[32mPASS\x1b[0m" in last_lines[-1]) is coloured, last_lines
    assert last_lines[-1].replace("\x1b[32m", "").replace("\x1b[0m", "") == f"verdict PASS: {CELL}, 1 mode(s)"
    assert "(uv, 4 packages)…" in run.output or "reusing venv" in run.output


def test_doctor_does_not_fail_for_a_variable_this_shell_lacks(harness, pip_libs):
    """root = "${ORT_SRC}/..." unset here is this host's problem, not the matrix's."""
    _doctor_matrix(harness, pip_libs, root="${MATRIX_TEST_DOCTOR_UNSET}/suite")
    run = harness.nox("-s", "doctor")
    assert run.proc.returncode == 0, run.output
    assert "uses ${MATRIX_TEST_DOCTOR_UNSET}, which is not set" in run.output

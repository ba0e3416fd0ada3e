"""matrix.toml: validation before anything is built, session names, listing and tags."""
import json
import os
import re
import subprocess
import sys

import pytest
from helpers import CELL, PY, REPO, SUITES, matrix_head, suite_head

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.plan.cells import cells_of
from ort_gpu_matrix.util.errors import MatrixError


def _problems(path):
    with pytest.raises(MatrixError) as info:
        cells_of(load_matrix(path))
    return info.value.problems


@pytest.mark.parametrize("edit, key, words", [
    (('[libs.x]', '[libs.x]\ncudnnn = "/x"'), "libs.x.cudnnn", "unknown key"),
    (('[torch.none]\nskip = true', '[torch.none]\nskip = true\n[pairing]\ninclude = [{ python = "PY", ort = "ort999", torch = "none", libs = "x" }]'),
     "pairing.include[0].ort", "`ort999` is not a declared ort id"),
    (('suite = "s"\n', ''), "pairing (combination 0).suite", "the pairing has no suite"),
    (('suite = "s"\n', 'suite = "nope"\n'), "matrix.suite", "`nope` is not a declared suite id"),
    (('root = ', 'rooot = '), "suite.s.rooot", "unknown key"),
    (('[ort.cpu]\nrequirement', '[ort.cpu]\nwheel = "x.whl"\nrequirement'), "ort.cpu", "needs exactly one of requirement, wheel"),
    (('backend = "uv|virtualenv"', 'backend = "uv|conda"'), "matrix.backend", "`conda` is not a venv backend"),
    (('pythonpath = ', 'pytest_args = ["-q"]\npythonpath = '), None, None),
])
def test_structural_errors_name_file_key_and_fix(harness, edit, key, words):
    path = harness.write(["test_allpass.py"])
    path.write_text(path.read_text().replace(edit[0], edit[1], 1).replace('"PY"', f'"{PY}"'))
    if key is None:  # the control: a valid edit loads
        assert [c.name for c in cells_of(load_matrix(path))] == [CELL]
        return
    problems = _problems(path)
    assert any(p.key == key and words in p.problem and p.fix and p.file == str(path) for p in problems), problems


def test_bad_regex_and_bad_toml_are_reported(harness):
    path = harness.write(["test_allpass.py"], expect='[suite.s.expect.normal]\nallowed_skips = ["(unclosed"]\n')
    assert any(p.key == "suite.s.expect.normal.allowed_skips[0]" for p in _problems(path))
    path.write_text("[matrix\nprefix = 1")
    assert _problems(path)[0].key == "(syntax)"


def test_nox_prints_the_problems_without_a_traceback(harness):
    path = harness.write(["test_allpass.py"])
    path.write_text(path.read_text().replace('[libs.x]', '[libs.x]\nbogus = 1'))
    run = harness.nox("-l")
    assert run.proc.returncode == 2
    assert f"{path}: libs.x.bogus: unknown key" in run.output
    assert "fix: remove it" in run.output
    assert "Traceback" not in run.output


def test_missing_library_file_fails_the_session_before_building(harness, tmp_path):
    harness.write(["test_allpass.py"], libs=f'cudnn = "{tmp_path}/nowhere/libcudnn.so.9"')
    run = harness.nox("-s", CELL)
    assert run.proc.returncode != 0
    assert f"libs.x.cudnn: {tmp_path}/nowhere/libcudnn.so.9 does not exist on this host" in run.output
    assert "Traceback" not in run.output and "uv venv" not in run.output
    assert not (harness.results).exists()


def test_unset_variable_in_a_path_is_named(harness, tmp_path):
    harness.write(["test_allpass.py"], root="${ORT_MATRIX_TEST_UNSET}/x")
    run = harness.nox("-s", CELL)
    assert "suite.s.root: uses ${ORT_MATRIX_TEST_UNSET}, which is not set" in run.output


def _names_of(tmp_path, pythons, orts, torches, libs, pairing):
    """Session names of a matrix made of ids alone: every ORT and torch is a placeholder."""
    head = matrix_head(pythons=pythons, suite="s", ort={o: 'requirement = "onnxruntime"' for o in orts},
                       torch={t: "skip = true" for t in torches}, libs=libs)
    (tmp_path / "m.toml").write_text(head + f"[pairing]\n{pairing}\n\n"
                                     + suite_head("s", ["verdicts/test_allpass.py"], None, root=str(SUITES)))
    return [c.name for c in cells_of(load_matrix(tmp_path / "m.toml"))]


def test_names_grow_only_where_they_collide(tmp_path):
    entries = [("a", "t1", "l1"), ("a", "t1", "l2"), ("b", "t1", "l2"), ("b", "t2", "l2")]
    include = ", ".join(f'{{ python = "{PY}", ort = "{o}", torch = "{t}", libs = "{lib}" }}' for o, t, lib in entries)
    names = _names_of(tmp_path, [PY], ["a", "b"], ["t1", "t2"], ["l1", "l2"], f"include = [{include}]")
    assert names == [f"gpu-{PY}-l1", f"gpu-{PY}-l2-a", f"gpu-{PY}-l2-b-t1", f"gpu-{PY}-l2-b-t2"]


def test_product_minus_exclude(tmp_path):
    names = _names_of(tmp_path, [PY, "3.99"], ["a"], ["t"], ["l1", "l2"], 'exclude = [{ python = "3.99", libs = "l2" }]')
    assert names == [f"gpu-{PY}-l1", f"gpu-{PY}-l2", "gpu-3.99-l1"]


def test_listing_tags_and_defaults(harness):
    harness.write(["test_allpass.py"], modes=["normal", "require_cudnn", "teeth"])
    listing = harness.nox("-l").output
    for mode in ("normal", "require_cudnn", "teeth"):
        assert re.search(rf"- {CELL}-{mode} \[{mode},{PY},cpu,none,x\] -> {mode} mode: python {PY}", listing), listing
    assert re.search(rf"\* {CELL} \[cells\] -> all modes \(normal, require_cudnn, teeth\)", listing), listing
    teeth = harness.nox("-l", "-t", "teeth").output
    assert re.findall(r"^\* (\S+)", teeth, re.M) == [f"{CELL}-teeth"]


def test_a_cell_this_host_cannot_run_is_listed_but_not_default(harness, tmp_path):
    harness.write(["test_allpass.py"], libs=f'cudart = "{tmp_path}/libcudart.so.13"')
    listing = harness.nox("-l").output
    assert re.search(rf"- {CELL} \[cells\] .*\[not runnable here: {tmp_path}/libcudart.so.13 does not exist on "
                     r"this host\]", listing), listing


def test_shipped_matrix_describes_the_release_matrix():
    """cu129 on two pythons, cu130, the H200 image and its unpinned twin, pip CUDA 12 and 13 (a driver is all they
    need of the host), ORT's attention tests on the H200 with a pip cuDNN, and a CPU cell for the running python."""
    matrix = load_matrix(REPO / "matrix.toml")
    cells = {c.name: c for c in cells_of(matrix)}
    assert list(cells) == ["gpu-3.11-cu129", "gpu-3.12-cu129", "gpu-3.12-cu130", "gpu-3.12-h200", "gpu-3.12-unpinned",
                           "gpu-3.12-pip12", "gpu-3.12-pip13", "gpu-3.12-cu128", "gpu-3.12-cu128attn",
                           "gpu-3.12-h200pip", "gpu-3.12-h200cuda", f"gpu-{PY}-cpu"]
    # CUDA 12 from pip wheels alone: ORT's newest CUDA 12 build on PyPI, PyPI's cu128 torch, the runtime and cuDNN
    # that torch requires, each suite with its own calibrated expect file. ORT 1.26.0 runs no cuDNN SDPA: the dispatch
    # cell's teeth takes away FLASH_ATTENTION, which its gate requires; ORT's own tests print no tier there: no teeth
    for name, suite, modes in (("gpu-3.12-cu128", "dispatch_cu12", ("normal", "require_cudnn", "teeth")),
                               ("gpu-3.12-cu128attn", "ort_attention_cu12", ("normal", "require_cudnn"))):
        c = cells[name]
        assert (c.ort.requirement, c.torch.requirement, c.torch.index_url) == ("onnxruntime-gpu==1.26.0", "torch==2.8.0", None)
        assert c.libs.pip == ("nvidia-cuda-runtime-cu12==12.8.90", "nvidia-cudnn-cu12==9.10.2.21")
        assert c.modes == modes and c.suite.id == suite and c.suite.expect_file
    teeth = cells["gpu-3.12-cu128"].suite.expect["teeth"]
    assert (teeth.tier, teeth.canary) == ("FLASH_ATTENTION", "AssertionError: 'FLASH_ATTENTION' != 'MATH'")
    assert cells["gpu-3.12-cu128"].suite.env["DISPATCH_CANARY_TIER"] == teeth.tier  # the gate requires what teeth takes
    assert cells["gpu-3.12-pip12"].ort.index_url and cells["gpu-3.12-pip12"].torch.index_url.endswith("/cu129")
    assert not cells["gpu-3.12-pip13"].ort.index_url and cells["gpu-3.12-pip13"].torch.index_url.endswith("/cu130")
    attention = cells["gpu-3.12-h200pip"]
    assert attention.suite.id == "ort_attention" and attention.suite.root.startswith("${ORT_SOURCE}/")
    assert attention.libs.loader == "ort_preload_dlls" and attention.torch.environment == "/opt/torch/.venv"
    cuda = cells["gpu-3.12-h200cuda"]  # ORT's CUDA attention tests, judged by tier rules; no teeth (none asserts a tier)
    assert cuda.suite.id == "ort_cuda_attention" and cuda.modes == ("normal",)
    assert cuda.suite.files == ("test_gqa_cuda.py", "test_flash_attn_cuda.py", "test_mha_flash_attn.py")
    assert cuda.suite.pytest_args[-2:] == ("-k", "not test_flash_attn_cuda.py")
    assert cells["gpu-3.11-cu129"].torch.index_url == "https://download.pytorch.org/whl/cu129"
    assert cells["gpu-3.12-cu130"].torch.index_url == "https://download.pytorch.org/whl/cu130"
    assert cells["gpu-3.11-cu129"].libs.search and cells["gpu-3.12-cu130"].libs.search
    assert cells["gpu-3.11-cu129"].ort.index_url  # ORT's CUDA 12 build is not the one on PyPI
    assert cells["gpu-3.12-h200"].libs.cudnn and cells["gpu-3.12-unpinned"].libs.none


def test_the_cpu_cell_takes_the_running_python(tmp_path):
    """python = "this": plain `nox` does something real on any machine, whatever its python."""
    text = (REPO / "matrix.toml").read_text().replace('root = "suites/dispatch"', f'root = "{REPO}/suites/dispatch"')
    (tmp_path / "m.toml").write_text(text)
    (cpu,) = [c for c in cells_of(load_matrix(tmp_path / "m.toml")) if c.libs.id == "cpu"]
    assert cpu.python == PY and cpu.name == f"gpu-{PY}-cpu"


def test_shipped_cpu_pairing_runs_the_builtin_suite_on_cpu(harness):
    """The default matrix's smoke pairing: GPU tests skip with a reason, CPU value tests pass."""
    harness.matrix = REPO / "matrix.toml"
    run = harness.nox("-s", f"gpu-{PY}-cpu")
    r = json.loads((harness.results / f"gpu-{PY}-cpu-normal.json").read_text())
    assert r["verdict"] == "pass", (r["reasons"], run.output[-2000:])
    assert r["counts"]["passed"] == 5 and r["counts"]["failed"] == 0
    assert r["provenance"]["ort"]["version"] == "1.32.0"


def test_without_ort_source_nox_list_says_how_to_set_it():
    """The shipped ORT attention suite lies under ${ORT_SOURCE}: unset, `nox -l` tells how to set it."""
    env = {k: v for k, v in os.environ.items() if k != "ORT_SOURCE" and not k.startswith("MATRIX_")}
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-l"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("- gpu-3.12-h200pip [cells]")]
    assert "uses ${ORT_SOURCE}, which is not set: set ORT_SOURCE to an ORT checkout (the dir holding VERSION_NUMBER)" \
        in line

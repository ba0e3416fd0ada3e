"""`ort-gpu-matrix` as a user gets it: installed for real into a fresh venv, run in empty directories."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import PY, once_per_run
from test_driver import fake_smi
from test_layout import package_sources

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.plan.cells import cells_of

CPU_CELL = f"gpu-{PY}-cpu"


@pytest.fixture(scope="session")
def tool(tmp_path_factory) -> Path:
    """`pip install .` of this checkout into a fresh venv (uv when there is one); the venv's bin dir.
    It builds from a fresh copy of the package's sources (test_layout.package_sources says why), once per run."""
    return once_per_run(tmp_path_factory, "tool", _install) / "venv" / "bin"


def _install(d: Path) -> None:
    src = package_sources(d / "src")
    venv = d / "venv"
    uv = shutil.which("uv")
    if uv:
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(src)], check=True)
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(src)], check=True)


def _env(extra: dict | None = None) -> dict:
    """The caller's environment without anything that would point the tool at this checkout or another matrix."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MATRIX_") and k not in ("PYTHONPATH", "ORT_SOURCE")}
    return {**env, **(extra or {})}


def run(tool: Path, *args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(tool / "ort-gpu-matrix"), *args], cwd=cwd, env=_env(env), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)


def site_packages(tool: Path) -> Path:
    (site,) = (tool.parent / "lib").glob("python*/site-packages")
    return site


def test_init_then_the_tool_runs_the_cpu_cell_green_in_an_empty_directory(tool, wheelhouse, tmp_path):
    work = tmp_path / "empty"
    work.mkdir()
    init = run(tool, "init", cwd=work)
    assert init.returncode == 0, init.stdout
    assert f"wrote {work / 'matrix.toml'}" in init.stdout and f"{CPU_CELL}: runnable here" in init.stdout
    assert sorted(p.name for p in work.iterdir()) == ["matrix.toml"]  # nothing else, no temporary file left
    offline = {"MATRIX_OFFLINE": "1", "MATRIX_WHEELHOUSE": str(wheelhouse)}
    proc = run(tool, cwd=work, env=offline)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"verdict PASS: {CPU_CELL}, 1 mode(s)" in proc.stdout and "* doctor: success" in proc.stdout
    # results and venvs beside the user's matrix, never in the installed package
    result = json.loads((work / ".matrix" / "results" / f"{CPU_CELL}-normal.json").read_text())
    assert result["verdict"] == "pass" and result["counts"]["passed"] >= 5
    assert result["venv"]["path"].startswith(str(work / ".matrix" / "venvs"))
    packaged_suite = site_packages(tool) / "ort_gpu_matrix" / "suites" / "dispatch" / "test_dispatch.py"
    assert str(packaged_suite) in result["command"]  # the built-in suite, from the package
    assert not [p for p in site_packages(tool).rglob("*") if p.name in (".matrix", ".nox", "results")]

    listing = run(tool, "-l", cwd=work)
    assert listing.returncode == 0, listing.stdout
    assert f"* {CPU_CELL} [cells]" in listing.stdout and "* doctor" in listing.stdout
    noxfile = site_packages(tool) / "ort_gpu_matrix" / "sessions" / "noxfile.py"
    assert f"Sessions defined in {noxfile}" in listing.stdout  # the installed sessions, not this checkout's


def test_matrix_option_and_arguments_pass_through_to_nox_and_the_session(tool, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert run(tool, "init", "--matrix", "other.toml", cwd=tmp_path / "a").returncode == 0
    other = tmp_path / "a" / "other.toml"
    doctor = run(tool, "--matrix", "../a/other.toml", "-s", "doctor", cwd=tmp_path / "b")
    assert doctor.returncode == 0, doctor.stdout
    assert f"matrix: {other}" in doctor.stdout and f"results: {tmp_path / 'a' / '.matrix' / 'results'}" in doctor.stdout
    exported = run(tool, f"--matrix={other}", "-s", "matrix", "--", "--github", cwd=tmp_path / "b")
    assert exported.returncode == 0, exported.stdout
    (line,) = [ln for ln in exported.stdout.splitlines() if ln.startswith("{")]
    data = json.loads(line)  # the session printed what `-- --github` asked for
    assert [e["session"] for e in data["include"]] == [CPU_CELL]
    bad = run(tool, "--matrix", str(other), "-s", "matrix", "--", "--github", "--nope", cwd=tmp_path / "b")
    assert bad.returncode != 0 and "unrecognized arguments: --nope" in bad.stdout
    assert not list((tmp_path / "b").iterdir())  # nothing is written where the tool runs, only beside the matrix


def test_init_never_overwrites_a_file(tool, tmp_path):
    first = run(tool, "init", cwd=tmp_path)
    assert first.returncode == 0, first.stdout
    before = (tmp_path / "matrix.toml").read_bytes()
    again = run(tool, "init", cwd=tmp_path)
    assert again.returncode == 2
    assert again.stdout == (f"ort-gpu-matrix init: {tmp_path / 'matrix.toml'} already exists; init never overwrites "
                            "a file\n    fix: remove it first, or write another: ort-gpu-matrix init --matrix other.toml\n")
    assert (tmp_path / "matrix.toml").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["matrix.toml"]


def test_without_a_matrix_the_tool_says_how_to_get_one(tool, tmp_path):
    proc = run(tool, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == (f"ort-gpu-matrix: no matrix.toml in {tmp_path}\n    fix: `ort-gpu-matrix init` writes one "
                           "for this host, or pass --matrix PATH\n")
    missing = run(tool, "--matrix", "nope.toml", "-l", cwd=tmp_path)
    assert missing.returncode == 2 and f"--matrix {tmp_path / 'nope.toml'}: no such file" in missing.stdout
    assert not list(tmp_path.iterdir())


def test_the_directory_it_runs_in_cannot_shadow_the_installed_package(tool, tmp_path):
    """`python -m` puts the cwd on sys.path; the tool runs nox with -P so a checkout-like dir changes nothing."""
    for pkg in ("ort_gpu_matrix", "sessions"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text(f"raise SystemExit('imported the {pkg} of the cwd')\n")
    assert run(tool, "init", cwd=tmp_path).returncode == 0
    proc = run(tool, "-l", cwd=tmp_path)
    assert proc.returncode == 0 and "imported the" not in proc.stdout, proc.stdout
    assert f"* {CPU_CELL} [cells]" in proc.stdout


def test_a_users_own_noxfile_registers_the_same_sessions(tool, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    assert run(tool, "init", cwd=project).returncode == 0
    (project / "noxfile.py").write_text("import nox\nfrom ort_gpu_matrix.sessions import register\n\n"
                                        'register(nox, "matrix.toml")\n')
    proc = subprocess.run([str(tool / "python"), "-m", "nox", "-f", str(project / "noxfile.py"), "-l"], cwd=tmp_path,
                          env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout
    assert f"* {CPU_CELL} [cells]" in proc.stdout and "- sweep" in proc.stdout  # matrix.toml beside the noxfile
    top = subprocess.run([str(tool / "python"), "-c", "import sessions"], cwd=tmp_path, env=_env(), capture_output=True)
    assert top.returncode != 0  # installed as ort_gpu_matrix.sessions only


def test_init_writes_pip_cells_for_the_cuda_majors_the_driver_serves(tool, tmp_path):
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    new = run(tool, "init", cwd=tmp_path / "new", env=fake_smi(tmp_path / "bin580", "580.95.05"))
    old = run(tool, "init", cwd=tmp_path / "old", env=fake_smi(tmp_path / "bin535", "535.104.05"))
    assert new.returncode == 0 and old.returncode == 0, (new.stdout, old.stdout)
    by_name = {c.name: c for c in cells_of(load_matrix(tmp_path / "new" / "matrix.toml"))}
    assert {f"gpu-{PY}-pip12", f"gpu-{PY}-pip13", CPU_CELL} <= set(by_name)
    assert by_name[f"gpu-{PY}-pip13"].libs.pip == ("nvidia-cuda-runtime==13.0.96", "nvidia-cudnn-cu13==9.19.0.56")
    assert by_name[f"gpu-{PY}-pip13"].ort.requirement == "onnxruntime-gpu==1.31.1"
    assert by_name[f"gpu-{PY}-pip12"].ort.index_url.endswith("/onnxruntime-cuda-12/pypi/simple/")
    assert f"gpu-{PY}-pip13: runnable here" in new.stdout  # the fake driver serves it; nothing else is checked yet
    assert "#   NVIDIA driver: 580.95.05, serves CUDA 12, CUDA 13" in (tmp_path / "new" / "matrix.toml").read_text()
    old_cells = {c.name for c in cells_of(load_matrix(tmp_path / "old" / "matrix.toml"))}
    assert f"gpu-{PY}-pip12" in old_cells and f"gpu-{PY}-pip13" not in old_cells
    assert "#   NVIDIA driver: 535.104.05, serves CUDA 12\n" in (tmp_path / "old" / "matrix.toml").read_text()


def test_init_adds_ort_s_attention_tests_when_ort_source_is_set(tool, tmp_path):
    checkout = tmp_path / "onnxruntime"
    tests = checkout / "onnxruntime" / "test" / "python" / "transformers" / "test_onnx_attention"
    tests.mkdir(parents=True)
    (tests / "test_gqa.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "work").mkdir()
    env = {"ORT_SOURCE": str(checkout), **fake_smi(tmp_path / "bin", "580.95.05")}
    proc = run(tool, "init", cwd=tmp_path / "work", env=env)
    assert proc.returncode == 0, proc.stdout
    text = (tmp_path / "work" / "matrix.toml").read_text()
    assert '[suite.ort_attention]\nroot = "${ORT_SOURCE}/onnxruntime/test/python/transformers"\n' \
           'files = ["test_onnx_attention/test_*.py"]\n' in text
    matrix = load_matrix(tmp_path / "work" / "matrix.toml")
    on_attention = [c for c in cells_of(matrix) if c.suite.id == "ort_attention"]
    assert {c.libs.id for c in on_attention} == {"pip12", "pip13"} and all(c.modes == ("normal",) for c in on_attention)
    listing = run(tool, "-l", cwd=tmp_path / "work", env=env)
    assert listing.returncode == 0 and "ort_attention" in listing.stdout, listing.stdout


def test_a_gpu_slot_sweep_starts_its_children_with_the_packaged_noxfile(tool, wheelhouse, tmp_path):
    """--gpus runs each mode run as `nox -f <noxfile> -s sweep -- --child`: the noxfile must be the one that registered."""
    assert run(tool, "init", cwd=tmp_path).returncode == 0
    offline = {"MATRIX_OFFLINE": "1", "MATRIX_WHEELHOUSE": str(wheelhouse)}
    proc = run(tool, "-s", "sweep", "--", "--gpus", "0", cwd=tmp_path, env=offline)
    assert proc.returncode == 0, proc.stdout[-3000:]
    child_log = (tmp_path / ".matrix" / "results" / "sweep-logs" / f"{CPU_CELL}-normal.log").read_text()  # one per mode run
    assert f"{CPU_CELL}-normal: PASS" in child_log, child_log[-2000:]
    sweep = json.loads((tmp_path / ".matrix" / "results" / "sweep.json").read_text())
    assert sweep["ok"] and [c["verdict"] for c in sweep["cells"]] == ["pass"]
    # the installed bisect session follows that sweep: with no baseline it has nothing to follow, and says so
    bisect = run(tool, "-s", "bisect", "--", "--between", "1.32.0", "1.32.0", cwd=tmp_path, env=offline)
    assert bisect.returncode != 0 and "has no confirmed regressions" in bisect.stdout, bisect.stdout[-3000:]
    assert "Traceback" not in bisect.stdout


@pytest.mark.parametrize("argv, expected", [
    ([], (None, None, [])),
    (["-l"], (None, None, ["-l"])),
    (["--matrix", "m.toml", "-s", "sweep", "--", "--baseline", "b", "--matrix", "x"],
     ("m.toml", None, ["-s", "sweep", "--", "--baseline", "b", "--matrix", "x"])),  # after --: the session's
    (["--matrix=m.toml", "init"], ("m.toml", "init", [])),
    (["init", "--matrix", "m.toml"], ("m.toml", "init", [])),
    (["-s", "init"], (None, None, ["-s", "init"])),  # a session named init is nox's business
])
def test_the_command_line_splits_into_ours_and_nox_s(argv, expected):
    from ort_gpu_matrix.app.cli import parse

    assert parse(argv) == expected


@pytest.mark.parametrize("argv, words", [
    (["--matrix"], "--matrix needs a path"),
    (["-f", "noxfile.py"], "-f: ort-gpu-matrix runs its own noxfile"),
    (["--noxfile=x.py"], "runs its own noxfile"),
    (["init", "-l"], "init takes only --matrix, not -l"),
])
def test_a_command_line_it_cannot_run_is_refused_with_the_fix(argv, words):
    from ort_gpu_matrix.app.cli import UsageError, parse

    with pytest.raises(UsageError, match=words) as info:
        parse(argv)
    assert "\n    fix: " in str(info.value)


def test_help_shows_ours_then_nox_s(tool, tmp_path):
    proc = run(tool, "--help", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: ort-gpu-matrix [--matrix PATH]")
    assert "--sessions" in proc.stdout and not list(tmp_path.iterdir())

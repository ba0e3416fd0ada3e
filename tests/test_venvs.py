"""One venv per pairing: shared by the modes, reused while the fingerprint holds, rebuilt whole."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import CELL, ORT_CPU, PY, REPO, SUITES, VENV


def test_modes_share_one_venv_and_an_unchanged_fingerprint_installs_nothing(harness):
    harness.write(["test_allpass.py"], modes=["normal", "teeth"], expect="[suite.s.expect.teeth]\nmin_failures = 1\n")
    first = harness.nox("-s", CELL)
    a, b = first.result("normal"), first.result("teeth")
    assert a["venv"]["path"] == b["venv"]["path"] == str(harness.venvs / VENV)
    assert first.output.count("pip install") <= 1  # built at most once (another test may have built it)
    second = harness.nox("-s", CELL)
    assert "reusing venv" in second.output and "pip install" not in second.output


def test_a_changed_fingerprint_rebuilds_in_a_fresh_dir(harness, tmp_path):
    venvs = tmp_path / "own-venvs"
    harness.venvs = venvs
    harness.write(["test_allpass.py"])
    harness.nox("-s", CELL)
    stamp = venvs / VENV / "ort-matrix-fingerprint.json"
    before = json.loads(stamp.read_text())["fingerprint"]
    marker = venvs / VENV / "left-by-old-venv"
    marker.write_text("x")
    harness.write(["test_allpass.py"], matrix_extra='tools = ["pytest>=8", "pytest-xdist", "iniconfig"]')
    run = harness.nox("-s", CELL)
    assert "fingerprint of" in run.output and "changed: rebuilding" in run.output
    after = json.loads(stamp.read_text())["fingerprint"]
    assert after["tools"][-1] == "iniconfig" and "iniconfig" not in before["tools"]
    assert not marker.exists()
    assert run.result("normal")["verdict"] == "pass"


def test_a_failed_build_leaves_no_half_venv(harness, tmp_path):
    venvs = tmp_path / "own-venvs"
    harness.venvs = venvs
    harness.write(["test_allpass.py"], ort="onnxruntime==0.0.0.does.not.exist")
    run = harness.nox("-s", CELL)
    assert run.proc.returncode != 0
    assert "failed with exit" in run.output and "Traceback" not in run.output
    assert [p.name for p in venvs.iterdir()] == [".locks"]  # no target, no half-built venv
    assert not harness.results.exists()


def test_fingerprint_records_what_was_asked(harness):
    harness.write(["test_allpass.py"], matrix_extra="offline = false")
    fp = harness.nox("-s", CELL).result("normal")["venv"]["fingerprint"]
    assert fp["ort"] == ORT_CPU and fp["with"] == ["onnx==1.20.1"] and fp["offline"] is False
    assert fp["torch"] == {"requirement": None, "index_url": None, "environment": None, "skip": True}


def test_torch_environment_is_seen_through_a_pth_file(harness, tmp_path):
    env = tmp_path / "torch-env"
    site = env / "lib" / f"python{PY}" / "site-packages"
    (site / "onnxruntime").mkdir(parents=True)
    (site / "torch_env_probe.py").write_text('WHERE = "torch environment"\n')
    (site / "onnxruntime" / "__init__.py").write_text("FROM_TORCH_ENV = True\n")
    harness.venvs = tmp_path / "own-venvs"
    harness.write(["test_torch_env.py"], root=SUITES / "guards",
                  expect="[suite.s.expect.normal]\nmin_passed = 2\n")
    path = harness.matrix
    path.write_text(path.read_text().replace("[torch.none]\nskip = true", f'[torch.none]\nenvironment = "{env}"'))
    r = harness.nox("-s", CELL).result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    pth = harness.venvs / VENV / "lib" / f"python{PY}" / "site-packages" / "_ort_matrix_torch_env.pth"
    assert pth.read_text().strip() == str(site)


def test_pairings_that_differ_only_in_libs_share_one_venv(harness, fake_libs):
    harness.write(["test_allpass.py"])
    text = harness.matrix.read_text().replace("[libs.x]\nnone = true", f'[libs.x]\nnone = true\n[libs.y]\ncudnn = "{fake_libs["cudnn"]}"')
    harness.matrix.write_text(text)
    run = harness.nox("-s", CELL, f"t-{PY}-y")
    assert run.proc.returncode == 0, run.output[-2000:]
    x = json.loads((harness.results / f"{CELL}-normal.json").read_text())
    y = json.loads((harness.results / f"t-{PY}-y-normal.json").read_text())
    assert x["venv"]["path"] == y["venv"]["path"] == str(harness.venvs / VENV)
    assert x["env"]["LD_PRELOAD"] is None and y["env"]["LD_PRELOAD"] == str(fake_libs["cudnn_real"])


def test_offline_installs_only_from_the_wheelhouse(harness, tmp_path, wheelhouse):
    harness.venvs = tmp_path / "own-venvs"
    harness.write(["test_allpass.py"], matrix_extra=f'offline = true\nwheelhouse = ["{wheelhouse}"]')
    run = harness.nox("-s", CELL)
    assert f"--no-index --find-links {wheelhouse}" in run.output
    assert run.result("normal")["verdict"] == "pass"


def test_offline_without_the_wheels_fails_instead_of_reaching_an_index(harness, tmp_path):
    harness.venvs = tmp_path / "own-venvs"
    (tmp_path / "empty").mkdir()
    harness.write(["test_allpass.py"], matrix_extra="offline = true")
    run = harness.nox("-s", CELL, env={"MATRIX_WHEELHOUSE": str(tmp_path / "empty")})
    assert run.proc.returncode != 0
    assert f"ort.cpu.requirement: offline, and no wheel for {ORT_CPU} in {tmp_path / 'empty'}" in run.output
    assert "--no-index" not in run.output  # refused before any installer ran
    assert not (tmp_path / "own-venvs").exists() or [p.name for p in (tmp_path / "own-venvs").iterdir()] == [".locks"]


def test_a_local_wheel_is_installed_and_its_sha256_recorded(harness, tmp_path, wheelhouse):
    import hashlib

    (wheel,) = wheelhouse.glob("onnxruntime-*.whl")
    harness.venvs = tmp_path / "own-venvs"
    harness.write(["test_allpass.py"])
    harness.matrix.write_text(harness.matrix.read_text().replace(f'requirement = "{ORT_CPU}"', f'wheel = "{wheel}"'))
    r = harness.nox("-s", CELL).result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert r["provenance"]["ort_wheel_sha256"] == sha == r["venv"]["fingerprint"]["ort_sha256"]
    assert r["provenance"]["ort"]["version"] == "1.32.0"


def test_a_rebuild_names_the_fingerprint_fields_that_changed(harness, tmp_path):
    harness.venvs = tmp_path / "own-venvs"
    harness.write(["test_allpass.py"])
    assert "it does not exist yet" in harness.nox("-s", CELL).output
    harness.write(["test_allpass.py"], matrix_extra='tools = ["pytest>=8", "pytest-xdist", "iniconfig"]\noffline = false')
    run = harness.nox("-s", CELL)
    assert "changed: rebuilding (changed: tools)" in run.output, run.output[-2000:]


def test_changed_fields_are_dotted_for_nested_keys():
    from ort_gpu_matrix.envs.venvs import changed_fields

    old = {"ort": "a", "torch": {"index_url": "x", "skip": True}, "with": []}
    new = {"ort": "a", "torch": {"index_url": "y", "skip": True}, "with": [], "tools": ["pytest"]}
    assert changed_fields(old, new) == ["tools", "torch.index_url"]
    assert changed_fields(new, new) == []


def test_uv_is_found_through_its_package_when_not_on_path(monkeypatch, tmp_path):
    import uv

    from ort_gpu_matrix.envs.venvs import find_uv

    monkeypatch.setenv("PATH", str(tmp_path))  # an empty dir: no uv on PATH
    assert find_uv() == str(uv.find_uv_bin())


def test_the_default_dot_matrix_dir_is_marked_as_a_cache(harness, tmp_path):
    """Results left at their default land in .matrix/, which says it is a cache to backup tools and git."""
    harness.write(["test_allpass.py"])
    env = {k: v for k, v in os.environ.items() if k != "MATRIX_RESULTS"}
    env.update(MATRIX_TOML=str(harness.matrix), MATRIX_VENVS=str(harness.venvs))
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", CELL], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:]
    cache = tmp_path / ".matrix"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (cache / "results" / f"{CELL}-normal.json").is_file()
    assert not (harness.venvs / "CACHEDIR.TAG").exists()  # a venvs dir of the user's choosing is left alone


def test_xdist_that_a_torch_environment_provides_is_loaded(harness, tmp_path):
    """Autoload is off, so -n works only if xdist is loaded by name, also when it comes through the .pth
    (the H200 image's torch env brings pytest-xdist; pip then installs no copy of its own)."""
    import execnet
    import xdist

    env = tmp_path / "torch-env"
    site = env / "lib" / f"python{PY}" / "site-packages"
    site.mkdir(parents=True)
    for module in (xdist, execnet):
        (site / module.__name__).symlink_to(os.path.dirname(module.__file__))
    harness.venvs = tmp_path / "own-venvs"
    harness.write(["test_allpass.py"], matrix_extra='tools = ["pytest>=8"]', suite_extra='pytest_args = ["-n", "2"]')
    path = harness.matrix
    path.write_text(path.read_text().replace("[torch.none]\nskip = true", f'[torch.none]\nenvironment = "{env}"'))
    run = harness.nox("-s", CELL)
    r = run.result("normal")
    assert r["verdict"] == "pass", (r["reasons"], run.output[-2000:])
    assert "-p xdist.plugin" in " ".join(r["command"])
    assert not (harness.venvs / VENV / "lib" / f"python{PY}" / "site-packages" / "xdist").exists()


def _lying_wheel(where: Path) -> Path:
    """A real wheel of a pytest-* dist whose RECORD states a wrong size: every fresh install of it is 'damaged'."""
    import zipfile

    where.mkdir(parents=True, exist_ok=True)
    wheel = where / "pytest_lying-1.0-py3-none-any.whl"
    info = "pytest_lying-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pytest_lying/__init__.py", "X = 1\n")
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: pytest-lying\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"pytest_lying/__init__.py,,999\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return where


def test_a_venv_damaged_right_after_its_build_fails_instead_of_rebuilding_forever(harness, tmp_path):
    """Once the installer itself gives a damaged venv (a damaged cache, a lying wheel), rebuilding cannot help."""
    harness.venvs = tmp_path / "own-venvs"
    wheels = _lying_wheel(tmp_path / "wheels")
    harness.write(["test_allpass.py"], matrix_extra=f'wheelhouse = ["{wheels}"]',
                  suite_extra='requirements = ["pytest-lying"]')
    run = harness.nox("-s", CELL)
    assert run.proc.returncode != 0
    assert "is unusable right after a fresh build (it is damaged: pytest_lying/__init__.py has 6 bytes, RECORD says 999" \
        in run.output, run.output[-2000:]
    assert "uv cache clean" in run.output and "Traceback" not in run.output
    assert run.output.count("$ ") <= 3, run.output  # one build (venv, install), not a loop


def test_uv_installs_copies_so_damage_in_a_venv_never_reaches_the_cache(harness, tmp_path):
    """uv's default hardlinks would share one inode between the venv and uv's cache (and every other venv)."""
    harness.venvs = tmp_path / "own-venvs"
    harness.write(["test_allpass.py"])
    run = harness.nox("-s", CELL)
    assert "--link-mode=copy" in run.output, run.output[-2000:]
    init = harness.venvs / VENV / "lib" / f"python{PY}" / "site-packages" / "onnxruntime" / "__init__.py"
    assert init.stat().st_nlink == 1


def test_a_run_keeps_its_bytecode_in_the_venv_and_leaves_none_beside_the_sources(harness, tmp_path):
    """Bytecode is cached (a test process that compiles pytest, numpy and ORT from source every time starts
    slowly) but never written beside the sources: an ORT checkout stays as it was. The caller's
    PYTHONDONTWRITEBYTECODE=1 (this project's CI machines set it) changes neither."""
    root = tmp_path / "suite"
    shutil.copytree(SUITES / "verdicts", root)
    shutil.copy(SUITES / "tinyort.py", tmp_path / "tinyort.py")
    harness.write(["test_allpass.py"], root=root)
    run = harness.nox("-s", CELL, env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert run.result("normal")["verdict"] == "pass", run.output[-2000:]
    assert not list(tmp_path.rglob("__pycache__")) and not list(tmp_path.rglob("*.pyc"))
    cache = harness.venvs / VENV / ".pycache"
    mirror = cache / str(root).lstrip("/")
    assert list(mirror.glob("test_allpass.cpython-*-pytest-*.pyc")), sorted(p.name for p in cache.rglob("*.pyc"))[:20]
    site = cache / str(harness.venvs / VENV).lstrip("/") / "lib" / f"python{PY}" / "site-packages"
    assert (site / "_pytest" / f"main.cpython-{PY.replace('.', '')}.pyc").is_file()

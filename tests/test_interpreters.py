"""Interpreters where users keep them: PATH, pyenv's versions (selected or not), /usr/bin, uv's managed pythons.

Each test runs the real nox with a PATH that holds no python at all (nox itself is started as
`sys.executable -m nox`), so only the place under test can answer. `nox -l` and the doctor say where
each interpreter was found; a version found nowhere gets the command that would install it.
"""
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CELL, PY

MICRO = f"{PY}.{sys.version_info.micro}"


def _no_python_path(tmp_path: Path) -> str:
    """A PATH with no python on it (and no pyenv shims)."""
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    return str(empty)


def _fake_pyenv(tmp_path: Path) -> Path:
    """A pyenv root whose {PY}.N holds the running interpreter, with a newer-looking decoy that lies about its version."""
    root = tmp_path / "pyenv"
    exe = root / "versions" / MICRO / "bin" / f"python{PY}"
    exe.parent.mkdir(parents=True)
    exe.symlink_to(sys.executable)
    decoy = root / "versions" / f"{PY}.999" / "bin" / f"python{PY}"  # a script: asked, and it answers 2.7
    decoy.parent.mkdir(parents=True)
    decoy.write_text("#!/bin/sh\necho 2.7\n")
    decoy.chmod(0o755)
    (root / "version").write_text("system\n")  # nothing selected: pyenv's shims would not run it
    return root


def _listed(listing: str, session: str) -> str:
    (line,) = [ln for ln in listing.splitlines() if re.match(rf"[*-] {re.escape(session)} ", ln)]
    return line


def test_a_pyenv_version_that_is_not_selected_is_found_and_the_cell_runs_on_it(harness, tmp_path):
    root = _fake_pyenv(tmp_path)
    found = root / "versions" / MICRO / "bin" / f"python{PY}"
    harness.venvs = tmp_path / "own-venvs"  # the fingerprint names the interpreter: keep the shared venv as it is
    harness.write(["test_allpass.py"])
    env = {"PATH": _no_python_path(tmp_path), "PYENV_ROOT": str(root)}
    listing = harness.nox("-l", env=env).output
    line = _listed(listing, CELL)
    assert line.startswith(f"* {CELL} ") and f"python {PY} (from pyenv)," in line, listing
    doctor = harness.nox("-s", "doctor", env=env).output
    assert f"  python {PY}: {found} (from pyenv)\n" in doctor, doctor
    run = harness.nox("-s", CELL, env=env)
    assert run.proc.returncode == 0, run.output[-3000:]
    result = run.result("normal")
    assert result["verdict"] == "pass", result["reasons"]
    assert result["venv"]["fingerprint"]["interpreter"] == str(found)  # the venv was built from pyenv's python
    assert f"--python {found} " in run.output  # and uv was handed that path


def test_usr_bin_or_the_python_running_nox_when_path_and_pyenv_have_none(harness, tmp_path):
    harness.write(["test_allpass.py"])
    env = {"PATH": _no_python_path(tmp_path), "PYENV_ROOT": str(tmp_path / "no-pyenv")}
    listing = harness.nox("-l", env=env).output
    usr = Path(f"/usr/bin/python{PY}")
    place = "/usr/bin" if usr.is_file() and subprocess.run(
        [usr, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip() == PY else "the python running nox"
    assert f"python {PY} (from {place})," in _listed(listing, CELL), listing


def _other_python() -> tuple[str, str] | None:
    """A real interpreter of another X.Y, not in /usr/bin, to stand for one uv installed: (its path, its version)."""
    versions = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for exe in sorted(versions.glob("*/bin/python3.*")):
        xy = exe.name.removeprefix("python")
        if not re.fullmatch(r"3\.[0-9]+", xy) or xy == PY or Path(f"/usr/bin/python{xy}").exists():
            continue
        out = subprocess.run([exe, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.startswith(xy + "."):
            return str(exe), out.stdout.strip()
    return None


def test_a_python_uv_manages_is_found_by_asking_uv(harness, tmp_path):
    other = _other_python()
    if other is None or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("needs a second python version outside /usr/bin (one pyenv installed) to stand for uv's")
    exe, full = other
    xy = ".".join(full.split(".")[:2])
    installs = tmp_path / "uv-pythons"  # laid out as uv lays out what `uv python install` fetched
    managed = installs / f"cpython-{full}-linux-{platform.machine()}-gnu" / "bin" / f"python{xy}"
    managed.parent.mkdir(parents=True)
    managed.symlink_to(exe)
    harness.write(["test_allpass.py"])
    harness.matrix.write_text(harness.matrix.read_text().replace(f'"{PY}"', f'"{xy}"'))
    env = {"PATH": _no_python_path(tmp_path), "PYENV_ROOT": str(tmp_path / "no-pyenv"),
           "UV_PYTHON_INSTALL_DIR": str(installs)}
    listing = harness.nox("-l", env=env).output
    assert f"python {xy} (from uv)," in _listed(listing, f"t-{xy}-x"), listing
    doctor = harness.nox("-s", "doctor", env=env).output
    assert f"  python {xy}: {managed} (from uv)\n" in doctor, doctor


@pytest.mark.parametrize("pyenv, command", [
    (False, "uv python install 3.99"),
    (True, "pyenv install 3.99 or uv python install 3.99"),
])
def test_a_version_found_nowhere_gets_the_command_that_would_install_it(harness, tmp_path, pyenv, command):
    root = _fake_pyenv(tmp_path) if pyenv else tmp_path / "no-pyenv"
    harness.venvs = tmp_path / "own-venvs"
    harness.write(["test_allpass.py"])
    harness.matrix.write_text(harness.matrix.read_text().replace(f'"{PY}"', '"3.99"'))
    env = {"PATH": _no_python_path(tmp_path), "PYENV_ROOT": str(root)}
    why = ("no python 3.99 for t-3.99-x: none on PATH, in pyenv's versions, in /usr/bin or among uv's pythons "
           f"(install it: {command})")
    line = _listed(harness.nox("-l", env=env).output, "t-3.99-x")
    assert line.startswith("- t-3.99-x ") and line.endswith(f"[not runnable here: {why}]"), line
    assert "python 3.99," in line  # found nowhere: no place named
    doctor = harness.nox("-s", "doctor", env=env).output
    assert f"  python 3.99: none on PATH, in pyenv's versions, in /usr/bin or among uv's pythons; install it: {command}\n" \
        in doctor, doctor
    run = harness.nox("-s", "t-3.99-x", env=env)
    assert run.proc.returncode != 0
    assert f"{harness.matrix}: matrix.pythons[0]: {why}\n    fix: {command}, or drop 3.99 from the matrix" in run.output
    assert "building venv" not in run.output and not harness.results.exists()
    assert not harness.venvs.exists() or [p.name for p in harness.venvs.iterdir()] == [".locks"]


def test_the_listing_names_where_each_python_was_found_without_asking_uv_when_it_need_not(harness, tmp_path):
    """uv costs a process: a python found in a cheaper place never reaches it. A uv that logs its calls proves it."""
    log = tmp_path / "uv-calls"
    bindir = Path(_no_python_path(tmp_path))
    (bindir / "uv").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit 2\n')
    (bindir / "uv").chmod(0o755)
    root = _fake_pyenv(tmp_path)
    harness.write(["test_allpass.py"])
    harness.matrix.write_text(harness.matrix.read_text().replace(f'pythons = ["{PY}"]', f'pythons = ["{PY}", "3.99"]'))
    listing = harness.nox("-l", env={"PATH": str(bindir), "PYENV_ROOT": str(root)}).output
    assert f"python {PY} (from pyenv)," in _listed(listing, f"t-{PY}-x"), listing
    assert "pyenv install 3.99 or uv python install 3.99" in _listed(listing, "t-3.99-x"), listing
    # asked once, for 3.99 alone, never to download, and only for pythons uv itself installed
    assert log.read_text().splitlines() == ["python find --system --managed-python --no-python-downloads 3.99"]

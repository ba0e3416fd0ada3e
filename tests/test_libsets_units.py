"""libsets.ensure in-process, against wheels built here (offline, --find-links): what a set must hold to be
accepted, when it is reused and when reinstalled (where mutmut's mutants of envs/libsets.py meet a test without
a nox run). File names decide what a library is (elf.kind), so the wheels hold small text files."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from helpers import ORT_CPU, matrix_head, suite_head
from test_index import _write_wheel

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.config.model import Libs
from ort_gpu_matrix.envs import libsets
from ort_gpu_matrix.envs.venvs import BuildError, find_uv
from ort_gpu_matrix.util.voice import Voice


def wheel(house: Path, name: str, files: list[str]) -> str:
    dist = name.replace("-", "_")
    info = f"{dist}-1.0.dist-info"
    content = {f: f"{f}\n".encode() for f in files}
    content[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    content[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    _write_wheel(house / f"{dist}-1.0-py3-none-any.whl", content, info)
    return f"{name}==1.0"


@pytest.fixture
def env(tmp_path, monkeypatch):
    house = tmp_path / "house"
    house.mkdir()
    monkeypatch.setenv("MATRIX_VENVS", str(tmp_path / "venvs"))
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_x.py").write_text("def test_x(): pass\n")
    head = matrix_head(pythons=["3.12"], suite="s", offline=True, wheelhouse=[str(house)],
                       ort={"cpu": f'requirement = "{ORT_CPU}"'})
    (tmp_path / "matrix.toml").write_text(head + suite_head("s", ["test_x.py"], None, root=str(tmp_path / "suite")))
    return load_matrix(tmp_path / "matrix.toml"), house


def place(matrix):
    return matrix.settings.offline, matrix.workspace.venvs_dir


def ensure(matrix, house, pip, log=None):
    logged = []
    where = libsets.ensure(Libs(id="p", pip=tuple(pip)), (str(house),), *place(matrix), Voice.plain(log=logged.append))
    return where, logged


RUNTIME = "nvidia/cuda_runtime/lib/libcudart.so.13"
CUDNN = "nvidia/cudnn/lib/libcudnn.so.9"


def test_a_set_naming_nvidia_cudnn_that_holds_no_libcudnn_is_refused(env):
    matrix, house = env
    pip = [wheel(house, "nvidia-cuda-runtime-cu13", [RUNTIME]),
           wheel(house, "nvidia-cudnn-cu13", ["nvidia/cudnn/lib/libcudnn_ops.so.9"])]
    with pytest.raises(BuildError, match=r"libs set p: the wheels .* hold no nvidia/\*/lib/libcudart.so.\* or "
                                         r"nvidia/cudnn/lib/libcudnn.so.\*: name NVIDIA library wheels in pip"):
        ensure(matrix, house, pip)
    assert not libsets.target(Libs(id="p", pip=tuple(pip)), (str(house),), *place(matrix)).exists()  # nothing half-kept


def test_nvidia_cudnn_is_recognised_with_underscores_and_capitals(env):
    matrix, house = env
    runtime = wheel(house, "nvidia-cuda-runtime-cu13", [RUNTIME])
    wheel(house, "nvidia-cudnn-cu13", ["nvidia/cudnn/lib/libcudnn_ops.so.9"])
    for spelled in ("NVIDIA_cudnn_cu13==1.0", "nvidia_cudnn-cu13==1.0"):
        with pytest.raises(BuildError):
            ensure(matrix, house, [runtime, spelled])


def test_a_set_of_wheels_without_any_library_is_refused(env):
    matrix, house = env
    with pytest.raises(BuildError, match="hold no"):
        ensure(matrix, house, [wheel(house, "nvidia-nothing", ["nvidia/nothing/lib/readme.txt"])])


def test_a_runtime_only_set_is_accepted_pinned_and_reused(env):
    matrix, house = env
    pip = [wheel(house, "nvidia-cuda-runtime-cu13", [RUNTIME, "nvidia/cuda_runtime/lib/libcudart.so.13.0.1"])]
    where, logged = ensure(matrix, house, pip)
    assert libsets.files_in(where) == (str((where / RUNTIME).resolve()),)
    recorded = json.loads((where / libsets.FINGERPRINT).read_text())
    assert recorded == {"fingerprint": {"pip": pip, "wheelhouse": [str(house)], "offline": True},
                        "files": [str((where / RUNTIME).resolve())]}
    assert len(logged) == 1 and logged[0].startswith("installing libs set p (1 wheels)… $ ")
    cmd = shlex.split(logged[0].split("$ ", 1)[1])
    assert cmd[:3] == [find_uv(), "pip", "install"] and "--target" in cmd and "--no-index" in cmd  # uv, offline
    assert libsets.state(Libs(id="p", pip=tuple(pip)), (str(house),), *place(matrix)) == f"installed ({where})"
    again, logged = ensure(matrix, house, pip)
    assert again == where and logged == [f"reusing libs set p ({where})"]


def test_cudnn_and_runtime_are_pinned_in_load_order_the_shortest_name_first(env):
    matrix, house = env
    pip = [wheel(house, "nvidia-cudnn-cu13", [CUDNN, "nvidia/cudnn/lib/libcudnn.so.9.1.0",
                                               "nvidia/cudnn/lib/libcudnn_ops.so.9"]),
           wheel(house, "nvidia-cuda-runtime-cu13", ["nvidia/cuda_runtime/lib/libcudart.so.13.0", RUNTIME])]
    where, _ = ensure(matrix, house, pip)
    assert libsets.files_in(where) == (str((where / RUNTIME).resolve()), str((where / CUDNN).resolve()))


def test_a_set_whose_recorded_files_changed_or_are_gone_is_reinstalled(env):
    matrix, house = env
    pip = [wheel(house, "nvidia-cudnn-cu13", [CUDNN])]
    where, _ = ensure(matrix, house, pip)
    (where / CUDNN).unlink()
    again, logged = ensure(matrix, house, pip)
    assert logged[0] == f"reinstalling libs set p: its files are not the ones it was installed with ({where})"
    assert (again / CUDNN).is_file()
    fp = json.loads((where / libsets.FINGERPRINT).read_text())
    (where / libsets.FINGERPRINT).write_text(json.dumps({**fp, "files": fp["files"] + ["/gone/libcudart.so.13"]}))
    assert ensure(matrix, house, pip)[1][0].startswith("reinstalling")
    (where / libsets.FINGERPRINT).write_text(json.dumps({**fp, "files": []}))
    assert ensure(matrix, house, pip)[1][0].startswith("reinstalling")
    (where / libsets.FINGERPRINT).write_text("not json")
    assert ensure(matrix, house, pip)[1][0].startswith("reinstalling")
    (where / libsets.FINGERPRINT).write_text(json.dumps({**fp, "files": "x"}))
    assert ensure(matrix, house, pip)[1][0].startswith("reinstalling")


def test_a_failed_install_names_the_step_and_leaves_nothing(env):
    matrix, house = env
    with pytest.raises(BuildError, match=r"libs set p: `.*` failed with exit \d+:\n"):
        ensure(matrix, house, ["nvidia-not-in-the-house==1.0"])
    assert not any((matrix.workspace.venvs_dir / ".libs").glob("p-*/"))


def test_the_target_changes_with_every_fingerprint_field(env):
    matrix, house = env
    a = libsets.target(Libs(id="p", pip=("a==1",)), (str(house),), *place(matrix))
    assert a.parent == matrix.workspace.venvs_dir / ".libs" and a.name.startswith("p-") and len(a.name) == 14
    assert libsets.target(Libs(id="p", pip=("a==2",)), (str(house),), *place(matrix)) != a
    assert libsets.target(Libs(id="p", pip=("a==1",)), (), *place(matrix)) != a
    assert libsets.state(Libs(id="p", pip=("a==1",)), (str(house),), *place(matrix)) == f"not installed yet ({a})"


def test_the_shortest_path_wins_whatever_its_dir_is_called(tmp_path):
    for rel in ("nvidia/cuda_runtime/lib/libcudart.so.13", "nvidia/z/lib/libcudart.so.13",
                "nvidia/cudnn/lib/libcudnn.so.10", "nvidia/cudnn/lib/libcudnn.so.9"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    assert libsets.files_in(tmp_path) == (str(tmp_path / "nvidia/z/lib/libcudart.so.13"),
                                          str(tmp_path / "nvidia/cudnn/lib/libcudnn.so.9"))


def test_a_fingerprint_whose_files_are_no_list_is_reinstalled_and_the_lock_sits_beside_the_set(env):
    matrix, house = env
    pip = [wheel(house, "nvidia-cudnn-cu13", [CUDNN])]
    where, _ = ensure(matrix, house, pip)
    assert Path(str(where) + ".lock").exists()
    fp = json.loads((where / libsets.FINGERPRINT).read_text())
    (where / libsets.FINGERPRINT).write_text(json.dumps({**fp, "files": {f: 1 for f in fp["files"]}}))
    assert ensure(matrix, house, pip)[1][0].startswith("reinstalling")


def test_a_failed_install_shows_the_installers_last_lines_stderr_included(env):
    import shlex
    import subprocess
    matrix, house = env
    logged: list[str] = []
    with pytest.raises(BuildError) as err:
        libsets.ensure(Libs(id="p", pip=("nvidia-not-in-the-house==1.0",)), (str(house),), *place(matrix),
                       Voice.plain(log=logged.append))
    assert not any((matrix.workspace.venvs_dir / ".libs").glob("p-*/"))  # nothing left
    cmd = shlex.split(logged[-1].split("$ ", 1)[1])
    again = subprocess.run(cmd, capture_output=True, text=True)  # the same install: uv says why on stderr
    lines = (again.stdout + again.stderr).splitlines()
    assert again.returncode != 0 and any("nvidia-not-in-the-house" in x for x in again.stderr.splitlines())
    assert str(err.value) == (f"libs set p: `{shlex.join(cmd[:4])} ...` failed with exit {again.returncode}:\n"
                              + "\n".join(lines[-15:]))
    assert cmd[:4] == [find_uv(), "pip", "install", "--link-mode=copy"]


def test_a_requirement_the_installer_cannot_parse_is_a_build_error_naming_the_step(env):
    """A typo in pip (`=` for `==`) fails before the installer makes the set's dir: still a BuildError that
    names the set and the step, not a traceback from cleaning up a dir that is not there."""
    matrix, house = env
    with pytest.raises(BuildError, match=r"libs set p: `.*` failed with exit \d+:\n.*nvidia-cudnn-cu13=9\.1"):
        ensure(matrix, house, ["nvidia-cudnn-cu13=9.1"])
    assert not any((matrix.workspace.venvs_dir / ".libs").glob("p-*/"))


def sdist_that_fails_to_build(house: Path, name: str, lines: int) -> str:
    """An sdist whose in-tree build backend prints `lines` numbered lines and fails: a long installer output."""
    import io
    import tarfile
    dist = name.replace("-", "_")
    files = {
        "pyproject.toml": f'[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
                          f'[project]\nname = "{name}"\nversion = "1.0"\n',
        "backend.py": f"import sys\ndef build_wheel(*a, **k):\n    for i in range({lines}):\n"
                      f"        print(f'backend line {{i}}', file=sys.stderr)\n    raise SystemExit(3)\n",
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
    }
    with tarfile.open(house / f"{dist}-1.0.tar.gz", "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{dist}-1.0/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return f"{name}==1.0"


def test_a_long_installer_failure_is_cut_to_its_last_fifteen_lines(env):
    matrix, house = env
    with pytest.raises(BuildError) as err:
        ensure(matrix, house, [sdist_that_fails_to_build(house, "nvidia-loud", 40)])
    head, *tail = str(err.value).split("\n")
    assert head.startswith("libs set p: `") and head.endswith("failed with exit 1:")
    assert len(tail) == 15 and "backend line 39" in str(err.value) and "backend line 0\n" not in str(err.value)
    assert not any((matrix.workspace.venvs_dir / ".libs").glob("p-*/"))

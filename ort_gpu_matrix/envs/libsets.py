"""pip-installed libraries sets: NVIDIA wheels installed once into a cache dir of their own, reused by fingerprint.

Most users get cuDNN from pip (torch bundles nvidia-cudnn-cu13, onnxruntime-gpu[cudnn] pulls it), so a
libs set may name wheels instead of files. They go into `<venvs>/.libs/<id>-<hash>` with `pip install
--target` (never into a test venv, so one set serves every pairing that uses it), under a file lock,
fingerprint written last as for venvs. The files pinned are the wheels' nvidia/*/lib libraries: the first
libcudart.so.<N> and libcudnn.so.<N> found there.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from filelock import FileLock

from ..config.model import Libs
from ..host.elf import kind
from ..util.fs import write_json
from ..util.voice import Voice
from .venvs import BuildError, find_uv, index_args

FINGERPRINT = "ort-matrix-libset.json"
PATTERNS = (("cudart", "nvidia/*/lib/libcudart.so.[0-9]*"), ("cudnn", "nvidia/cudnn/lib/libcudnn.so.[0-9]*"))


def fingerprint(libs: Libs, wheelhouse: tuple[str, ...], offline: bool) -> dict[str, Any]:
    return {"pip": list(libs.pip), "wheelhouse": list(wheelhouse), "offline": offline}


def target(libs: Libs, wheelhouse: tuple[str, ...], offline: bool, venvs_dir: Path) -> Path:
    digest = hashlib.sha256(json.dumps(fingerprint(libs, wheelhouse, offline), sort_keys=True).encode()).hexdigest()
    return venvs_dir / ".libs" / f"{libs.id}-{digest[:12]}"


def files_in(where: Path) -> tuple[str, ...]:
    """The libraries a set pins, in load order (runtime first), as real paths."""
    found = []
    for _, pattern in PATTERNS:
        hits = sorted(glob.glob(str(where / pattern)), key=lambda p: (len(p), p))  # libcudnn.so.9 before .so.9.x
        if hits:
            found.append(os.path.realpath(hits[0]))
    return tuple(found)


def state(libs: Libs, wheelhouse: tuple[str, ...], offline: bool, venvs_dir: Path) -> str:
    where = target(libs, wheelhouse, offline, venvs_dir)
    return f"installed ({where})" if (where / FINGERPRINT).is_file() else f"not installed yet ({where})"


def _recorded_files(where: Path) -> list[str]:
    try:
        files = json.loads((where / FINGERPRINT).read_text()).get("files")
    except (OSError, json.JSONDecodeError, AttributeError):
        return []
    return [str(f) for f in files] if isinstance(files, list) else []


def ensure(libs: Libs, wheelhouse: tuple[str, ...], offline: bool, venvs_dir: Path, voice: Voice) -> Path:
    """The set's install dir, installed first if needed; raises BuildError naming the failed step."""
    where = target(libs, wheelhouse, offline, venvs_dir)
    where.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(where) + ".lock"):
        if (where / FINGERPRINT).is_file():
            recorded = _recorded_files(where)
            if recorded and recorded == list(files_in(where)) and all(os.path.isfile(f) for f in recorded):
                voice.log(f"reusing libs set {libs.id} ({where})")
                return where
            voice.log(f"reinstalling libs set {libs.id}: its files are not the ones it was installed with ({where})")
        shutil.rmtree(where, ignore_errors=True)  # what an unfinished install left
        uv = find_uv()
        cmd = ([uv, "pip", "install", "--link-mode=copy", "--python", sys.executable] if uv else
               [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        cmd += ["--no-deps", "--target", str(where), *index_args(offline, wheelhouse), *libs.pip]
        voice.log(f"installing libs set {libs.id} ({len(libs.pip)} wheels)… $ {shlex.join(cmd)}")
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            shutil.rmtree(where, ignore_errors=True)
            tail = "\n".join(proc.stdout.splitlines()[-15:])
            raise BuildError(f"libs set {libs.id}: `{shlex.join(cmd[:4])} ...` failed with exit {proc.returncode}:\n{tail}")
        wants_cudnn = any(s.lower().replace("_", "-").startswith("nvidia-cudnn") for s in libs.pip)
        found = files_in(where)
        if not found or (wants_cudnn and not any(kind(f) == "cudnn" for f in found)):
            shutil.rmtree(where, ignore_errors=True)
            raise BuildError(f"libs set {libs.id}: the wheels {list(libs.pip)} hold no nvidia/*/lib/libcudart.so.* "
                             "or nvidia/cudnn/lib/libcudnn.so.*: name NVIDIA library wheels in pip")
        write_json(where / FINGERPRINT, {"fingerprint": fingerprint(libs, wheelhouse, offline),
                                         "files": list(files_in(where))})
        return where

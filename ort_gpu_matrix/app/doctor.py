"""`nox -s doctor`: what this host has for the matrix, on one screen, before anything is built.

It reads, never installs: each pairing and whether it can run here (and why not), each libs set
with real paths and the versions the libraries report through ctypes, the GPUs, each torch
environment's bundled CUDA/cuDNN against the pinned ones (the shadowing risk), each venv's state,
and the interpreters. It fails only for problems no host could fix (a suite's files, a local wheel
that is missing): a cell that needs a GPU host is not a failure on a laptop.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import ort_matrix_probe
from ort_matrix_probe.audit import file_version

from ..config.model import Matrix
from ..envs import libsets
from ..envs.venvs import state
from ..host import driver
from ..host.elf import kind
from ..host.host import Resolved, check, pinned_files
from ..host.pythons import LOOKED, install_command, locate
from ..plan.cells import Cell, cells_of
from ..util.errors import MatrixError, anywhere


@dataclass
class DoctorReport:
    """What `nox -s doctor` prints (`lines`), the problems no host could fix, and the cells this host can run."""

    lines: list[str] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)  # problems no host could fix
    runnable: list[str] = field(default_factory=list)

    def add(self, line: str = "") -> None:
        self.lines.append(line)


def reported_version(path: str) -> str | None:
    """The probe's reported_version, asked in a fresh process: in one process a cuDNN 9 shim answers
    from the sub-libraries loaded first, so a second set would report the first set's version (seen on
    the H200: 9.28 reported 91400)."""
    probe_root = str(Path(ort_matrix_probe.__file__).parent.parent)
    ask = (f"import sys; sys.path.insert(0, {probe_root!r}); "
           "from ort_matrix_probe.audit import reported_version as v; print(v(sys.argv[1]) or '')")
    try:
        out = subprocess.run([sys.executable, "-c", ask, path], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = out.stdout.strip()
    return value if out.returncode == 0 and value else None


def describe_lib(path: str) -> str:
    real = os.path.realpath(path)
    shipped, reports = file_version(real), reported_version(real)
    where = path if real == path else f"{path} -> {real}"
    return f"{where} (version {shipped or 'unknown'}; reports {reports or 'nothing'})"


def gpus() -> list[str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()]
    return [f"GPU {r[0]}: {r[1]}, compute capability {r[2]}, driver {r[3]}" for r in rows if len(r) == 4]


def torch_libs(site: str) -> dict[str, tuple[str, str | None]]:
    """The CUDA runtime and cuDNN a torch environment bundles: name -> (file, version)."""
    found = {}
    for name, pattern in (("cudnn", "nvidia/cudnn/lib/libcudnn.so.*"), ("cudart", "nvidia/*/lib/libcudart.so.*")):
        hits = sorted(glob.glob(os.path.join(glob.escape(site), pattern)))
        if hits:
            found[name] = (hits[0], file_version(os.path.realpath(hits[0])))
    return found


def _major_minor(version: str | None) -> str | None:
    if not version:
        return None
    parts = version.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else version


def _problems(err: MatrixError) -> str:
    return "; ".join(f"{p.key}: {p.problem}" for p in err.problems)


def why_not(err: MatrixError) -> str:
    """One short line for `nox -l`."""
    return "; ".join(p.problem for p in err.problems)


def driver_section(rep: DoctorReport, cells: list[Cell], checked: dict[str, Resolved | MatrixError]) -> None:
    """The NVIDIA driver, which CUDA majors it serves, and what each CUDA cell needs of it."""
    found = driver.installed()
    rep.add()
    rep.add("NVIDIA driver")
    majors = sorted(driver.MIN_DRIVER.items())
    if found.version is None:
        rep.add(f"  none ({found.why_none}): cells that run a CUDA build of ORT cannot run here")
    else:
        serves = [f"{m}.x (>= {v})" for m, v in majors if driver.as_tuple(v) <= driver.as_tuple(found.version)]
        short = [f"{m}.x (needs >= {v})" for m, v in majors if driver.as_tuple(v) > driver.as_tuple(found.version)]
        rep.add(f"  {found.version} (nvidia-smi): serves CUDA {', '.join(serves) or 'none of ours'}"
                + (f"; too old for CUDA {', '.join(short)}" if short else ""))
    by_major: dict[int, list[tuple[str, bool]]] = {}  # each CUDA major's cells: (name, runnable here)
    for c in cells:
        if not driver.is_cuda_build(c):
            continue
        r = checked[c.name]
        pinned, site = ((), None) if isinstance(r, MatrixError) else (r.preload, r.torch_site)
        need = driver.needed(c, pinned, site)
        if need is None:
            rep.add(f"  {c.name}: a CUDA build of ORT, no CUDA major named by its parts: any driver")
            continue
        ok = found.version is not None and driver.as_tuple(found.version) >= driver.as_tuple(need[0])
        rep.add(f"  {c.name}: CUDA {need[1]}, needs >= {need[0]} ({need[2]}: {need[3]}): "
                + ("ok" if ok else "not here"))
        by_major.setdefault(need[1], []).append((c.name, ok and not isinstance(r, MatrixError)))
        mixed = sorted({m for m, _, _ in driver.cuda_majors(c, pinned, site)})
        if len(mixed) > 1:
            rep.add(f"    its parts name CUDA {' and '.join(map(str, mixed))}: one of them serves the other's build")
    _per_major(rep, by_major)


def _per_major(rep: DoctorReport, by_major: dict[int, list[tuple[str, bool]]]) -> None:
    """Which cells of each CUDA major this host can run: a release engineer sweeps CUDA 12 and 13 builds on one
    host with one driver, and a major none of whose cells can run is a hole in that sweep."""
    for major in sorted(by_major):
        named = by_major[major]
        runs = [n for n, ok in named if ok]
        rep.add(f"  CUDA {major} cells (driver >= {driver.MIN_DRIVER[major]}): {len(runs)} of {len(named)} can run "
                f"here" + (f": {', '.join(runs)}" if runs else ""))


Checked = dict[str, Resolved | MatrixError]


def _pairings(rep: DoctorReport, cells: list[Cell], checked: Checked) -> None:
    rep.add("pairings")
    for c in cells:
        r = checked[c.name]
        sessions = ", ".join([c.name, *(c.mode_session(m) for m in c.modes)])
        if isinstance(r, MatrixError):
            rep.add(f"  {c.name}: not runnable here: {_problems(r)}")
            fatal = [p for p in r.problems if anywhere(p)]
            rep.fatal += [f"{c.name}: {p.key}: {p.problem} (fix: {p.fix})" for p in fatal]
        else:
            rep.add(f"  {c.name}: runnable here")
            rep.runnable.append(c.name)
        rep.add(f"    sessions: {sessions}")


def _libs_sets(rep: DoctorReport, matrix: Matrix, cells: list[Cell], checked: Checked) -> dict[str, str | None]:
    """Each libs set and the files it pins here; returns the cuDNN version each set pins, by set."""
    rep.add("libs sets")
    pinned_versions: dict[str, str | None] = {}

    def listed(libs_id: str, files: Sequence[str]) -> None:
        for f in files:
            rep.add(f"    {describe_lib(f)}")
            if kind(f) == "cudnn":
                pinned_versions[libs_id] = file_version(f)

    where_of = (matrix.settings.offline, matrix.workspace.venvs_dir)
    for libs_id, libs in matrix.libs.items():
        user = next((c for c in cells if c.libs.id == libs_id), None)
        loader = "" if libs.loader == "preload" else f" (loader {libs.loader})"
        if libs.none:
            rep.add(f"  {libs_id}: pins nothing{loader}")
        elif libs.pip:
            wheelhouse = next((r.wheelhouse for c in cells if c.libs.id == libs_id
                               and not isinstance(r := checked[c.name], MatrixError)), ())
            rep.add(f"  {libs_id}: pip {', '.join(libs.pip)}{loader}: {libsets.state(libs, wheelhouse, *where_of)}")
            where = libsets.target(libs, wheelhouse, *where_of)
            listed(libs_id, libsets.files_in(where) if (where / libsets.FINGERPRINT).is_file() else ())
        elif user is None:
            rep.add(f"  {libs_id}: no pairing uses it")
        elif problems := (found := pinned_files(user, matrix.workspace))[1]:
            rep.add(f"  {libs_id}: not usable here: {'; '.join(p.problem for p in problems)}")
        else:
            rep.add(f"  {libs_id}:")
            listed(libs_id, found[0])
    return pinned_versions


def _torches(rep: DoctorReport, matrix: Matrix, cells: list[Cell], checked: Checked,
             pinned_versions: dict[str, str | None]) -> None:
    rep.add("torch environments")
    for t in matrix.torch.values():
        if t.skip:
            rep.add(f"  {t.id}: no torch")
            continue
        users = [c for c in cells if c.torch.id == t.id]
        site = next((r.torch_site for c in users if not isinstance(r := checked[c.name], MatrixError)
                     and r.torch_site), None)
        if t.requirement:
            rep.add(f"  {t.id}: {t.requirement} (installed into each venv{', from ' + t.index_url if t.index_url else ''})")
            continue
        if site is None:
            rep.add(f"  {t.id}: {t.environment} not found here")
            continue
        bundled = torch_libs(site)
        listed = ", ".join(f"{k} {v[1] or 'version unknown'} ({v[0]})" for k, v in bundled.items()) or "no CUDA libraries"
        rep.add(f"  {t.id}: {t.environment}: bundles {listed}")
        torch_cudnn = _major_minor(bundled.get("cudnn", (None, None))[1])
        for c in users:
            pinned = _major_minor(pinned_versions.get(c.libs.id))
            if torch_cudnn and pinned and torch_cudnn != pinned:
                rep.add(f"    warning: {c.name} pins cuDNN {pinned_versions[c.libs.id]} but torch brings "
                        f"{bundled['cudnn'][1]}: both get mapped, and a by-name load may get torch's (the audit checks)")


def _venvs_and_pythons(rep: DoctorReport, matrix: Matrix, cells: list[Cell], checked: Checked) -> None:
    rep.add("venvs")
    for c in cells:
        r = checked[c.name]
        rep.add(f"  {c.name}: " + ("cannot be checked: the cell is not runnable here" if isinstance(r, MatrixError)
                                   else state(c, r, matrix.workspace.venvs_dir)))
    rep.add()
    rep.add("interpreters")
    for version in sorted({c.python for c in cells}, key=lambda v: tuple(int(x) for x in v.split("."))):
        python = locate(version)
        rep.add(f"  python {version}: " + (f"{python.path} (from {python.found})" if python
                                           else f"{LOOKED}; install it: {install_command(version)}"))


def run(matrix: Matrix) -> DoctorReport:
    rep = DoctorReport()
    cells = cells_of(matrix)
    checked: Checked = {c.name: check(c, matrix.workspace) for c in cells}
    rep.add(f"matrix: {matrix.path}")
    rep.add(f"results: {matrix.workspace.results_dir}   venvs: {matrix.workspace.venvs_dir}")
    rep.add()
    _pairings(rep, cells, checked)
    rep.add()
    pinned_versions = _libs_sets(rep, matrix, cells, checked)
    rep.add()
    found = gpus()
    rep.add("GPUs:" + (" none (no nvidia-smi, or it lists none)" if not found else ""))
    for g in found:
        rep.add(f"  {g}")
    driver_section(rep, cells, checked)
    rep.add()
    _torches(rep, matrix, cells, checked, pinned_versions)
    rep.add()
    _venvs_and_pythons(rep, matrix, cells, checked)
    return rep

"""Which libraries served a run's tests, as each test process mapped them: a pin is proved, not assumed.

ld.so skips a preload it cannot load and runs on, a by-name load can find another copy, and a source
dir can shadow the wheel; the numbers come out the same either way, so the audit of every test
process is read here and any gap is a reason.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ort_matrix_probe.schema import Audit, ProbeReport

from ..host.elf import kind


@dataclass(frozen=True)
class Libraries:
    """The pinned files, one audit per test process, and which process ran each test: what served a test is what
    its own process mapped (a cell's workers can differ, and a libs comparison names the stack per test)."""

    pinned: dict[str, str | None] = field(default_factory=dict)
    audits: list[Audit] = field(default_factory=list)
    processes: dict[str, str] = field(default_factory=dict)  # node id -> "controller" or its xdist worker


def library_audit(report: ProbeReport | None, preload: tuple[str, ...], venv: str) -> tuple[Libraries, list[str], list[str]]:
    """What served the tests: mapped files, by-name resolution, where onnxruntime came from."""
    audits = list(report["audits"]) if report else []
    reasons: list[str] = []
    warnings: list[str] = []
    pinned = {name: next((p for p in preload if kind(p) == name), None) for name in ("cudnn", "cudart")}
    processes = {n: str(e["process"]) for n, e in report["tests"].items() if e.get("process")} if report else {}
    if report is not None:
        ran = set(processes.values())
        missing = sorted(ran - {str(a.get("process")) for a in audits})
        if missing:  # its tests ran with libraries nobody checked: pins, the wheel's source
            reasons.append(f"no library audit came back from test process(es) {', '.join(missing)}: "
                           "what served their tests is unknown")
    venv_real = os.path.realpath(venv)
    major = cuda_major(ort_cuda_version(report))
    for a in audits:
        by_name: dict[str, Any] = dict(a.get("by_name", {}))
        for lib, want in pinned.items():
            got = by_name.get(lib, {})
            if want and got.get("file") != want:
                reasons.append(f"by-name {got.get('soname')} resolved to {got.get('file')} "
                               f"(version {got.get('version')}), not the pinned {want}")
        mapped = {os.path.realpath(m) for m in a.get("mapped", [])}
        for want in preload:  # ld.so skips a preload it cannot load, says so on stderr, and runs on
            if os.path.realpath(want) not in mapped:
                how = ("ld.so skipped it" if want in a.get("preload", []) else
                       f"the libs set's loader ({(a.get('loader') or {}).get('loader', 'preload')}) did not load it")
                reasons.append(f"the pinned {want} was never mapped in the test process (pid {a.get('pid')}):"
                               f" {how}, so nothing was pinned")
        loaded = a.get("loader") or {}
        if loaded.get("error"):
            reasons.append(f"loader {loaded.get('loader')} failed in the test process: {loaded['error']}")
        if loaded.get("onnxruntime_already_imported"):
            reasons.append(f"loader {loaded.get('loader')}: onnxruntime was imported before the probe could act")
        reasons += _preload_dlls_reasons(loaded, venv_real)
        ort_file = a.get("onnxruntime_file")
        if ort_file and not ort_file.startswith(venv_real + os.sep):
            reasons.append(f"onnxruntime was imported from {ort_file}, not from the pairing's venv {venv_real} "
                           "(a source dir shadows the wheel)")
        found = _other_major(a, major)
        (reasons if found and preload else warnings).extend(found)
        if preload and major is not None:  # the cell pins its set: a copy nobody can place is worth a word
            warnings += [f"the CUDA major of the {x['library']} {x['file']} mapped in the CUDA {major} cell's test "
                         f"process (pid {a.get('pid')}) could not be told: neither its wheel nor the library says"
                         for x in a.get("stack", []) if x.get("cuda_major") is None]
        copies = a.get("cudnn_copies", [])
        if len({c["file"] for c in copies}) > 1:
            listed = ", ".join(f"{c['file']} ({c['file_version'] or 'version unknown'})" for c in copies)
            warnings.append(f"{len(copies)} copies of cuDNN mapped in one test process: {listed}")
    return Libraries(pinned, audits, processes), sorted(set(reasons)), sorted(set(warnings))


def ort_cuda_version(report: ProbeReport | None) -> str | None:
    """The cuda_version the cell's ORT was built with (its build_and_package_info), as the probe read it."""
    provenance: Any = report.get("provenance") if report else None  # a hand-made or old report may lack it
    ort: dict[str, Any] = dict((provenance or {}).get("ort") or {})
    return ort.get("cuda_version")


def cuda_major(version: object) -> int | None:
    """A CUDA version's major ("12.8": 12, "13": 13), or None where it names none (a CPU build's None, "")."""
    head = str(version or "").split(".")[0]
    return int(head) if head.isdigit() else None


def _other_major(audit: Audit, major: int | None) -> list[str]:
    """Each CUDA runtime, cuBLAS or cuDNN of another CUDA major than the ORT build mapped in a test process: a
    CUDA 13 cuBLAS serving a CUDA 12 cell runs, and gives the same numbers, on another stack than the cell names.
    Named with the file of the cell's own major beside it, where one was mapped too. A warning where the cell
    pins nothing (whatever the loader found is what it tests), a failure where it pins its set."""
    if major is None:
        return []
    libs = [x for x in audit.get("stack", []) if x.get("cuda_major") is not None]
    out = []
    for x in libs:
        if x["cuda_major"] == major:
            continue
        own = [y["file"] for y in libs if y["library"] == x["library"] and y["cuda_major"] == major]
        out.append(f"a CUDA {x['cuda_major']} {x['library']} served the CUDA {major} cell's test process "
                   f"(pid {audit.get('pid')}): {x['file']} ({x.get('version') or 'version unknown'})"
                   + (f", beside its CUDA {major} {', '.join(own)}" if own else
                      f", and no CUDA {major} {x['library']} was mapped"))
    return out


def _preload_dlls_reasons(loaded: dict[str, Any], venv_real: str) -> list[str]:
    """What the ort_preload_dlls loader promised and did not keep: called first, before any torch,
    on the venv's wheel, which is still what the tests' own sys.path resolves to at the end."""
    if loaded.get("loader") != "ort_preload_dlls":
        return []
    out = []
    if not loaded.get("called") and not loaded.get("error"):
        out.append("loader ort_preload_dlls: preload_dlls was never called")
    if loaded.get("torch_already_imported"):
        out.append("loader ort_preload_dlls: torch was imported before preload_dlls ran (by a -p plugin), "
                   "so torch's cuDNN may win a by-name load")
    at_end = loaded.get("resolved_at_end")
    if at_end and not at_end.startswith(venv_real + os.sep):
        out.append(f"loader ort_preload_dlls: at the session's end the tests' sys.path resolves onnxruntime to "
                   f"{at_end}, not to the pairing's venv (a source dir shadows the wheel; the loader's early "
                   "import hid it)")
    return out

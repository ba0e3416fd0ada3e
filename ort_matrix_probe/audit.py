"""Which CUDA and cuDNN files really serve this process.

torch bundles its own cuDNN, and on a GPU host both copies end up mapped, so a
file list alone proves nothing: what matters is what a by-name load, as ORT
does it, resolves to now. Usable outside pytest too (a doctor can call it).
"""
from __future__ import annotations

import ctypes
import glob
import os
import re
import sys

from .schema import Audit, CudnnCopy, LibraryHit, StackLibrary

_WANTED = re.compile(r"/lib(cudart|cudnn[a-z_]*|cublas[A-Za-z]*|onnxruntime_providers_cuda)\.so")
_CUDNN_SHIM = re.compile(r"/libcudnn\.so(\.[0-9]+)*$")


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def by_name(sonames: list[str], symbol: str) -> LibraryHit:
    """What dlopen(<soname>) gives this process now, with the version it reports."""
    for soname in sonames:
        try:
            lib = ctypes.CDLL(soname)
        except OSError:
            continue
        fn = getattr(lib, symbol)
        info = _DlInfo()
        ctypes.CDLL(None).dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info))
        version: int | None
        if symbol == "cudnnGetVersion":
            fn.restype = ctypes.c_size_t
            version = int(fn())
        else:
            out = ctypes.c_int(0)
            version = int(out.value) if fn(ctypes.byref(out)) == 0 else None
        path = os.path.realpath(info.dli_fname.decode()) if info.dli_fname else None
        return {"soname": soname, "file": path, "version": version}
    return {"soname": sonames[0] if sonames else None, "file": None, "version": None, "error": "not found"}


def mapped_files() -> list[str]:
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    found.append(parts[5].strip())
    except OSError:
        pass
    return sorted(set(found))


def _owner(path: str, pattern: str) -> str | None:
    """The dist-info of the pip dist that ships `path`: the one, in the dirs above it, whose RECORD lists it; else
    the first that matches `pattern` (a wheel unpacked without its RECORD). Two majors can share one
    site-packages (nvidia_cublas 13 beside nvidia_cublas_cu12), so a name alone may name the other's."""
    parent, first = os.path.dirname(path), None
    for _ in range(5):
        for info in sorted(glob.glob(os.path.join(glob.escape(parent), f"{pattern}.dist-info"))):
            first = first or info
            try:
                with open(os.path.join(info, "RECORD")) as f:
                    listed = {line.split(",", 1)[0] for line in f}
            except OSError:
                continue
            if os.path.relpath(path, parent) in listed:
                return info
        parent = os.path.dirname(parent)
    return first


def _dist_pattern(path: str) -> str:
    return ("nvidia_cudnn*" if "/libcudnn" in path else "nvidia_cublas*" if "/libcublas" in path
            else "nvidia_cuda_runtime*")


def file_version(path: str) -> str | None:
    """The version a file was shipped as: from its name, or from the pip dist that owns it (torch's copy)."""
    named = re.search(r"\.so\.(\d+\.\d+(?:\.\d+)*)$", path)
    if named:
        return named.group(1)
    info = _owner(path, _dist_pattern(path))
    if info is None:
        return None
    try:
        with open(os.path.join(info, "METADATA")) as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def reported_version(path: str) -> int | None:
    """What the library at `path` says it is: cudnnGetVersion, or cudaRuntimeGetVersion for a runtime.

    A cuDNN 9 shim answers from whichever sub-libraries this process loaded first, so a caller that
    reads several copies asks each in a process of its own (the doctor does)."""
    try:
        lib = ctypes.CDLL(path)
        if os.path.basename(path).startswith("libcudnn"):
            fn = lib.cudnnGetVersion
            fn.restype = ctypes.c_size_t
            return int(fn())
        out = ctypes.c_int(0)
        return int(out.value) if lib.cudaRuntimeGetVersion(ctypes.byref(out)) == 0 else None
    except (OSError, AttributeError):
        return None


_STACK = re.compile(r"/lib(cudart|cublas|cublasLt)\.so\.([0-9]+)")
_CUDNN_WHEEL = re.compile(r"nvidia_cudnn_cu([0-9]+)-")


def cudnn_cuda_major(path: str) -> int | None:
    """The CUDA major a cuDNN copy was built for. cuDNN is 9 for CUDA 12 and 13 alike, so its own major says
    nothing of which CUDA stack it belongs to. In order: the -cuNN of the NVIDIA wheel that ships it; what
    cudnnGetCudartVersion says (12080: 12) through its own libcudnn_graph.so.9, beside it, asked by full path
    (the shim answers from whichever copy's sub-libraries this process loaded first); through the file itself
    only where it has no sub-library beside it."""
    info = _owner(path, "nvidia_cudnn*")
    m = _CUDNN_WHEEL.search(os.path.basename(info)) if info else None
    if m:
        return int(m.group(1))
    graph = os.path.join(os.path.dirname(path), "libcudnn_graph.so.9")
    for candidate in ([graph] if os.path.exists(graph) else []) or [path]:
        try:
            fn = ctypes.CDLL(candidate).cudnnGetCudartVersion
            fn.restype = ctypes.c_size_t
            built_for = int(fn())
        except (OSError, AttributeError):
            continue
        if built_for:
            return built_for // 1000
    return None


def stack(mapped: list[str]) -> list[StackLibrary]:
    """The CUDA runtime, cuBLAS (and cuBLASLt) and cuDNN copies mapped in this process, each with the CUDA
    major it belongs to (from its soname; a cuDNN's from the runtime it was built for), its shipped version and
    its file: the judge holds each against the CUDA major of the ORT build the cell runs."""
    out: list[StackLibrary] = []
    for path in mapped:
        m = _STACK.search(path)
        if m:
            out.append({"library": m.group(1), "file": path, "cuda_major": int(m.group(2)),
                        "version": file_version(path)})
        elif _CUDNN_SHIM.search(path):
            out.append({"library": "cudnn", "file": path, "cuda_major": cudnn_cuda_major(path),
                        "version": file_version(path)})
    return out


def _cudnn_copy(path: str) -> CudnnCopy:
    return {"file": path, "file_version": file_version(path), "reports": reported_version(path)}


def audit() -> Audit:
    mapped = mapped_files()
    preload = [p for p in os.environ.get("LD_PRELOAD", "").split(":") if p]
    cudart_names = [re.sub(r"(\.so\.\d+).*", r"\1", os.path.basename(p)) for p in preload if "libcudart.so" in p]
    cudart_names = cudart_names or ["libcudart.so.13", "libcudart.so.12", "libcudart.so.11"]
    ort = sys.modules.get("onnxruntime")
    ort_file = getattr(ort, "__file__", None) if ort is not None else None
    return {
        "pid": os.getpid(),
        "mapped": [p for p in mapped if _WANTED.search(p)],
        "cudnn_copies": [_cudnn_copy(p) for p in mapped if _CUDNN_SHIM.search(p)],
        "stack": stack([p for p in mapped if _WANTED.search(p)]),
        "by_name": {"cudnn": by_name(["libcudnn.so.9"], "cudnnGetVersion"),
                    "cudart": by_name(cudart_names, "cudaRuntimeGetVersion")},
        "onnxruntime_file": os.path.realpath(ort_file) if ort_file else None,
        "onnxruntime_version": imported_version(),
        "preload": preload,
    }


def imported_version() -> str | None:
    """The imported onnxruntime's own __version__, read from sys.modules: never imported for it."""
    version = getattr(sys.modules.get("onnxruntime"), "__version__", None)
    return str(version) if version is not None else None

"""pytest plugin that the harness loads with `-p ort_matrix_plugin` in every test venv.

It is copied into the venv's site-packages as a standalone module (it must not
import the harness). It does four things, none of which edit the tests:

* forces CUDA EP provider options (teeth: sdpa_kernel=16) into every
  InferenceSession and every set_providers call, whatever form the providers
  were given in;
* records, per test, the `SdpaKernel=<TIER>` tokens ORT prints on native fd 1,
  by tapping fd 1 around InferenceSession.run, even when a test captures fd 1
  itself (the test still sees its bytes);
* audits, inside the test process, which CUDA/cuDNN files are mapped and what a
  by-name load resolves to;
* writes one JSON report (controller only, xdist-aware) with every outcome.
"""
from __future__ import annotations

import ast
import ctypes
import glob
import importlib.abc
import importlib.metadata
import json
import os
import re
import sys
import threading
import time
from typing import Any

import pytest

REPORT_ENV = "ORT_MATRIX_REPORT"
OPTIONS_ENV = "ORT_MATRIX_CUDA_OPTIONS"
CUDA_EP = "CUDAExecutionProvider"
SDPA_PROP = "ort_matrix.sdpa"
INJECT_PROP = "ort_matrix.injections"
_COLLECTION = "<outside any test>"
_TARGET = "onnxruntime.capi.onnxruntime_inference_collection"
_TOKEN = re.compile(rb"SdpaKernel=([A-Z_]+)")
_ANSI = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")

# What the plugin passed to InferenceSession, newest last: tests of the harness read it.
INJECTIONS: list[dict[str, Any]] = []
_sdpa: dict[str, list[str]] = {}
_injected: dict[str, int] = {}
_current = _COLLECTION


# ---- provider option injection -------------------------------------------------------------

def inject_options(providers: Any, provider_options: Any, forced: dict[str, str]) -> tuple[Any, Any]:
    """Merge `forced` into the CUDA EP's options for all three ways of naming providers."""
    if not providers:
        return providers, provider_options
    if provider_options is not None:
        names = [p if isinstance(p, str) else p[0] for p in providers]
        opts = [dict(o or {}) for o in provider_options]
        for i, name in enumerate(names):
            if name == CUDA_EP and i < len(opts):
                opts[i].update(forced)
        return list(providers), opts
    out = []
    for p in providers:
        if isinstance(p, str) and p == CUDA_EP:
            out.append((p, dict(forced)))
        elif isinstance(p, (tuple, list)) and len(p) == 2 and p[0] == CUDA_EP:
            out.append((p[0], {**dict(p[1] or {}), **forced}))
        else:
            out.append(p)
    return out, None


def _patch_providers(cls: type, name: str, forced: dict[str, str]) -> None:
    """Wrap a method that takes providers (__init__, set_providers) so `forced` reaches the CUDA EP."""
    import inspect

    original = getattr(cls, name)
    if getattr(original, "_ort_matrix", False):
        return
    signature = inspect.signature(original)

    def wrapper(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        providers = bound.arguments.get("providers")
        options = bound.arguments.get("provider_options")
        new_providers, new_options = inject_options(providers, options, forced)
        if new_providers is not providers:
            bound.arguments["providers"] = new_providers
            bound.arguments["provider_options"] = new_options
            INJECTIONS.append({"test": _current, "via": name, "given": {"providers": providers, "provider_options": options},
                               "passed": {"providers": new_providers, "provider_options": new_options}})
            _injected[_current] = _injected.get(_current, 0) + 1
        return original(*bound.args, **bound.kwargs)

    wrapper._ort_matrix = True  # type: ignore[attr-defined]
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(cls, name, wrapper)


# ---- native fd 1 tap ---------------------------------------------------------------------

def _flush_native() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


class Fd1Tap:
    """One shared redirection of fd 1 for overlapping runs, reference counted.

    The first run in opens it and the last one out restores fd 1, records the
    tokens and writes the bytes back to whatever fd 1 was before (pytest's
    capture, or a pipe of the test's own). Only open and close take the lock,
    so concurrent run() calls stay concurrent.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = -1
        self._reader: threading.Thread | None = None
        self._chunks: list[bytes] = []

    @staticmethod
    def _drain(fd: int, chunks: list[bytes]) -> None:
        while True:
            block = os.read(fd, 65536)
            if not block:
                break
            chunks.append(block)
        os.close(fd)

    def enter(self) -> None:
        with self._lock:
            if self._depth == 0:
                sys.stdout.flush()
                _flush_native()
                r, w = os.pipe()
                self._saved = os.dup(1)
                os.dup2(w, 1)
                os.close(w)
                self._chunks = []
                self._reader = threading.Thread(target=self._drain, args=(r, self._chunks), daemon=True)
                self._reader.start()
            self._depth += 1

    def exit(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth:
                return
            _flush_native()
            os.dup2(self._saved, 1)
            os.close(self._saved)
            assert self._reader is not None
            self._reader.join()
            data = b"".join(self._chunks)
            tiers = [t.decode() for t in _TOKEN.findall(_ANSI.sub(b"", data))]
            _sdpa.setdefault(_current, []).extend(tiers)
            view = memoryview(data)
            while view:
                view = view[os.write(1, view):]


_TAP = Fd1Tap()


def _tapped(method):
    def wrapper(*args, **kwargs):
        _TAP.enter()
        try:
            return method(*args, **kwargs)
        finally:
            _TAP.exit()

    wrapper._ort_matrix = True  # type: ignore[attr-defined]
    wrapper.__wrapped__ = method  # type: ignore[attr-defined]
    return wrapper


def _patch_module(module: Any) -> None:
    forced = json.loads(os.environ.get(OPTIONS_ENV) or "{}")
    if forced:
        forced = {k: str(v) for k, v in forced.items()}
        _patch_providers(module.InferenceSession, "__init__", forced)
        _patch_providers(module.InferenceSession, "set_providers", forced)
    cls = getattr(module, "Session", module.InferenceSession)
    for name in ("run", "run_with_iobinding"):
        method = getattr(cls, name, None)
        if method is not None and not getattr(method, "_ort_matrix", False):
            setattr(cls, name, _tapped(method))


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patch ORT the moment the tests import it, never import it ourselves.

    Importing onnxruntime from the plugin would hide the source-dir shadow: the
    tests must resolve `import onnxruntime` exactly as they would alone.
    """

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch_module(module)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


# ---- audit: which libraries really serve this process --------------------------------------

class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _by_name(sonames: list[str], symbol: str) -> dict[str, Any]:
    """What dlopen(<soname>) gives this process now, with the version it reports."""
    for soname in sonames:
        try:
            lib = ctypes.CDLL(soname)
        except OSError:
            continue
        fn = getattr(lib, symbol)
        info = _DlInfo()
        ctypes.CDLL(None).dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info))
        if symbol == "cudnnGetVersion":
            fn.restype = ctypes.c_size_t
            version = int(fn())
        else:
            out = ctypes.c_int(0)
            rc = fn(ctypes.byref(out))
            version = int(out.value) if rc == 0 else None
        path = os.path.realpath(info.dli_fname.decode()) if info.dli_fname else None
        return {"soname": soname, "file": path, "version": version}
    return {"soname": sonames[0] if sonames else None, "file": None, "version": None, "error": "not found"}


def _mapped() -> list[str]:
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


def _file_version(path: str) -> str | None:
    """The version a file was shipped as: from its name, or from the pip dist that owns it (torch's copy)."""
    named = re.search(r"\.so\.(\d+\.\d+(?:\.\d+)*)$", path)
    if named:
        return named.group(1)
    head, sep, _ = path.partition("/site-packages/")
    for meta in sorted(glob.glob(f"{head}{sep}nvidia_cudnn*.dist-info/METADATA")) if sep else ():
        with open(meta) as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    return None


def audit() -> dict[str, Any]:
    mapped = _mapped()
    wanted = re.compile(r"/lib(cudart|cudnn[a-z_]*|cublas[A-Za-z]*|onnxruntime_providers_cuda)\.so")
    preload = [p for p in os.environ.get("LD_PRELOAD", "").split(":") if p]
    cudart_names = [os.path.basename(p) for p in preload if "libcudart.so" in p]
    cudart_names = [re.sub(r"(\.so\.\d+).*", r"\1", n) for n in cudart_names] or [
        "libcudart.so.13", "libcudart.so.12", "libcudart.so.11"]
    ort = sys.modules.get("onnxruntime")
    copies = []
    for path in mapped:
        if re.search(r"/libcudnn\.so(\.[0-9]+)*$", path):
            entry: dict[str, Any] = {"file": path, "file_version": _file_version(path), "reports": None}
            try:
                fn = ctypes.CDLL(path).cudnnGetVersion
                fn.restype = ctypes.c_size_t
                entry["reports"] = int(fn())  # a cuDNN 9 shim forwards to whichever sub-libraries are loaded
            except (OSError, AttributeError):
                pass
            copies.append(entry)
    return {
        "pid": os.getpid(),
        "mapped": [p for p in mapped if wanted.search(p)],
        "cudnn_copies": copies,
        "by_name": {"cudnn": _by_name(["libcudnn.so.9"], "cudnnGetVersion"),
                    "cudart": _by_name(cudart_names, "cudaRuntimeGetVersion")},
        "onnxruntime_file": os.path.realpath(ort.__file__) if ort is not None and getattr(ort, "__file__", None) else None,
        "preload": preload,
    }


# ---- provenance: read from the venv's metadata, importing nothing -------------------------

def _constants(path: Any) -> dict[str, Any]:
    try:
        tree = ast.parse(open(path).read())
    except (OSError, SyntaxError):
        return {}
    out = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        if isinstance(value, ast.Constant):
            out.update({t.id: value.value for t in targets if isinstance(t, ast.Name)})
    return out


def provenance() -> dict[str, Any]:
    info: dict[str, Any] = {"python": sys.version.split()[0], "python_executable": sys.executable}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("onnxruntime") and "ort" not in info:
            build = _constants(dist.locate_file("onnxruntime/capi/build_and_package_info.py"))
            info["ort"] = {"distribution": dist.metadata["Name"], "version": dist.version,
                           "package_name": build.get("package_name"), "cuda_version": build.get("cuda_version"),
                           "cudnn_version": build.get("cudnn_version")}
        elif name == "torch" and "torch" not in info:
            version = _constants(dist.locate_file("torch/version.py"))
            info["torch"] = {"version": dist.version, "cuda": version.get("cuda")}
    info.setdefault("ort", None)
    info.setdefault("torch", None)
    return info


# ---- pytest hooks --------------------------------------------------------------------------

def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    config._ort_matrix = {"tests": {}, "collection": [], "audits": [], "started": time.time()}  # type: ignore[attr-defined]
    module = sys.modules.get(_TARGET)
    if module is not None:
        _patch_module(module)
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    global _current
    _current = nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any):
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown":
        report.user_properties.append((SDPA_PROP, list(_sdpa.pop(item.nodeid, []))))
        report.user_properties.append((INJECT_PROP, _injected.pop(item.nodeid, 0)))


def _message(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return re.sub(r"^Skipped: ", "", str(longrepr[2]))
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return str(crash.message)
    text = str(longrepr or "").strip().splitlines()
    return text[-1] if text else ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    state = _STATE.get("state")
    if state is None:
        return
    entry = state["tests"].setdefault(report.nodeid, {"outcome": None, "message": "", "sdpa": [], "duration_s": 0.0})
    entry["duration_s"] = round(entry["duration_s"] + getattr(report, "duration", 0.0), 4)
    wasxfail = hasattr(report, "wasxfail")
    if report.when in ("setup", "call") and report.skipped:
        entry["outcome"] = "xfailed" if wasxfail else "skipped"
        entry["message"] = str(report.wasxfail) if wasxfail else _message(report)
    elif report.when in ("setup", "call") and report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["message"] = _message(report)
    elif report.when == "call":
        entry["outcome"] = "xpassed" if wasxfail else "passed"
    elif report.when == "teardown":
        if report.failed:
            entry["teardown_error"] = _message(report)
        for name, value in report.user_properties:
            if name == SDPA_PROP:
                entry["sdpa"] = list(value)
            elif name == INJECT_PROP:
                entry["injections"] = int(value)


_STATE: dict[str, Any] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _STATE["state"] = session.config._ort_matrix  # type: ignore[attr-defined]


def pytest_collectreport(report: pytest.CollectReport) -> None:
    state = _STATE.get("state")
    if state is not None and report.failed:
        state["collection"].append({"nodeid": report.nodeid, "outcome": "error", "message": _message(report)})
    elif state is not None and report.skipped:
        state["collection"].append({"nodeid": report.nodeid, "outcome": "skipped", "message": _message(report)})


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    state = _STATE.get("state")
    payload = getattr(node, "workeroutput", {}).get("ort_matrix_audit")
    if state is not None and payload:
        state["audits"].append(json.loads(payload))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config._ort_matrix  # type: ignore[attr-defined]
    if _COLLECTION in _sdpa:
        state["outside_tests_sdpa"] = _sdpa[_COLLECTION]
    if _is_worker(config):
        config.workeroutput["ort_matrix_audit"] = json.dumps(audit())  # type: ignore[attr-defined]
        return
    if not getattr(config.option, "numprocesses", None):
        state["audits"].append(audit())  # no xdist: this process ran the tests
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    report = {"exitstatus": int(exitstatus), "duration_s": round(time.time() - state["started"], 3),
              "tests": state["tests"], "collection": state["collection"], "audits": state["audits"],
              "outside_tests_sdpa": state.get("outside_tests_sdpa", []), "provenance": provenance()}
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1, default=repr)
    os.replace(tmp, path)

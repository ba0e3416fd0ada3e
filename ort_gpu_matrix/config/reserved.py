"""The environment variables the harness sets for every run, which a suite's `env` may not name.

Declared with the configuration, because the loader rejects a suite that names one before anything is
built; the test process's environment (execute/testenv.py) sets them.
"""
from __future__ import annotations

HARNESS_PREFIX = "ORT_MATRIX_"
# Set by the harness for every run; the fix a user gets for each when a suite's env names it.
RESERVED_FIX = {
    "PYTHONPATH": "list the dirs in the suite's pythonpath",
    "LD_PRELOAD": "pin libraries with a [libs.<id>] set",
    "LD_LIBRARY_PATH": "pin libraries with a [libs.<id>] set",
    "ORT_TEST_REQUIRE_CUDNN_SDPA": "the require_cudnn and teeth modes set it; choose modes instead",
    "ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO": "every mode sets it: the census needs it",
    "PATH": "the venv's bin comes first; the rest is the caller's PATH",
    "VIRTUAL_ENV": "it is the pairing's venv",
    "PYTHONSAFEPATH": "every run sets it, so the cwd never shadows the wheel",
    "PYTHONNOUSERSITE": "every run sets it",
    "PYTHONPYCACHEPREFIX": "every run keeps its bytecode in the venv, never beside the sources",
    "PYTHONDONTWRITEBYTECODE": "every run keeps its bytecode in the venv (PYTHONPYCACHEPREFIX), never beside the sources",
    "PYTEST_ADDOPTS": "use the suite's pytest_args",
    "PYTEST_PLUGINS": "use the suite's plugins",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "autoload is off; name plugins in the suite's plugins",
}


def reserved(name: str) -> str | None:
    """Why `name` belongs to the harness, or None if a suite may set it."""
    if name.startswith(HARNESS_PREFIX):
        return f"{HARNESS_PREFIX}* variables carry the probe's channels and options"
    if name in RESERVED_FIX:
        return "the harness sets it for every run"
    return None

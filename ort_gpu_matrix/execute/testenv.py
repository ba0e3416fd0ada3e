"""The environment of the test process: exactly what a mode needs, nothing inherited by accident.

No inherited PYTHONPATH/LD_PRELOAD/PYTEST_ADDOPTS (they would change what the
tests import and load), the pairing's libraries pinned, the mode's switches set,
and the probe's channels named. The variables set here are the harness's own:
a suite's `env` may not override them (the loader rejects them by name).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from ort_matrix_probe.quiet import QUIET_ENV
from ort_matrix_probe.schema import WATCH_ENV

from ..config.model import Suite
from ..config.modes import CANARY_ENV, WATCHED, spec
from ..config.reserved import HARNESS_PREFIX
from ..host.host import Resolved

# Dropped from the caller's environment: each would change what the test process imports or loads.
SCRUBBED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "LD_PRELOAD", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
            "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "ORT_TEST_REQUIRE_CUDNN_SDPA",
            "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
# Where a run's Python keeps its bytecode: a tree of its own inside the venv, never a __pycache__ beside the
# sources, so a run leaves nothing in an ORT checkout or a suite dir. Forbidding bytecode instead (as the
# harness once did) made every test process compile pytest, numpy, ORT's Python and the suite from source
# before any test ran. The cache lives and dies with its venv.
PYCACHE = ".pycache"


ENV_NAMES = "ORT_MATRIX_ENV_NAMES"  # the probe reports these variables as the test process has them
ALWAYS_WATCHED = ("CUDA_VISIBLE_DEVICES",)  # decides the GPU whoever set it: a slot, the caller or the suite


def mode_env(mode: str, suite: Suite, resolved: Resolved, venv: Path, channels: Mapping[str, str],
             inherited: Mapping[str, str] = os.environ) -> tuple[dict[str, str], dict[str, str]]:
    """The full environment of the test process, and what the harness and the suite set in it (the probe
    reports those variables back as the process had them: the result records that, not this).

    A harness value that is empty is not set (no LD_PRELOAD without pinned libraries). A suite's value is set
    exactly as written, the empty string included: `CUDA_VISIBLE_DEVICES = ""` hides the GPU, which leaving it
    unset would not."""
    mode_spec = spec(mode)
    preload, pythonpath, suite_env = resolved.preload, resolved.pythonpath, suite.env
    options = {**suite.provider_options, **mode_spec.forced_options}
    applied = {
        "LD_PRELOAD": ":".join(preload),
        "LD_LIBRARY_PATH": ":".join(dict.fromkeys(os.path.dirname(p) for p in preload)),
        "PYTHONPATH": ":".join(pythonpath),
        "ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO": "1",
        "ORT_MATRIX_CUDA_OPTIONS": json.dumps(options),
        **({CANARY_ENV: "1"} if mode_spec.require_cudnn else {}),
        **({"OMP_WAIT_POLICY": "PASSIVE", QUIET_ENV: "1"} if suite.quiet_threads else {}),
    }
    applied = {**{k: v for k, v in applied.items() if v}, **suite_env}
    env = {k: v for k, v in inherited.items() if k not in SCRUBBED and not k.startswith(HARNESS_PREFIX)}
    env.update(applied)
    env.update({
        "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
        "PYTHONSAFEPATH": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONPYCACHEPREFIX": str(venv / PYCACHE),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        WATCH_ENV: json.dumps(WATCHED),  # every mode counts the tests' reads of them: the census a carry reads
        ENV_NAMES: json.dumps(sorted({*applied, *ALWAYS_WATCHED, "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH"})),
        **channels,
    })
    return env, applied

"""Fixtures and hooks only: one venv per test session, real nox runs against small matrices. What tests import
lives in helpers.py (tests/test_helpers.py keeps it so)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FAKE_CUDART, FAKE_CUDNN, ONNX, ORT_CPU, Harness, build_so, once_per_run, run_dir

# A shell without job control starts a background command (`pytest ... &`, a CI step's `&`) with SIGINT
# ignored, and an ignored signal stays ignored across exec: every nox the tests start would then shrug off the
# Ctrl-C the interrupt tests send it, and those tests would time out. The tests send it on purpose, so they give
# their children the default back (a handler of ours is reset to the default at exec; SIG_IGN is not).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A machine may forbid bytecode (PYTHONDONTWRITEBYTECODE=1, as this project's CI machines do): every nox the
# tests start would then compile the engine from source again. The tests let it be cached (in the checkout's
# git-ignored __pycache__ dirs); the test processes the engine starts keep theirs in their venv either way.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

pytest_plugins = ["pytester"]
collect_ignore = ["fixtures"]  # suites the harness runs, never collected here


@pytest.fixture(autouse=True)
def _mutmut_stats_stay_in_process(monkeypatch):
    """Under mutmut's stats run (MUTANT_UNDER_TEST=stats) a child Python that imports the mutated tree would look
    for mutmut's config in its own cwd and fail; its hits are never recorded anyway. The test process keeps the
    mode (mutmut holds it in-process too), children lose it. A mutant's name is still inherited by children, so
    a mutant reaches the probe a subprocess loads (docs/mutations.md)."""
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        monkeypatch.delenv("MUTANT_UNDER_TEST")


@pytest.fixture(scope="session")
def venvs(tmp_path_factory) -> Path:
    """Built venvs, shared by every test of this run and by its xdist workers: the first run builds, the rest
    reuse. The engine's own locks let two workers' runs share them (a build under the exclusive lock, runs under
    the shared one); a test that needs a venv of another fingerprint builds it in its own dir ("own-venvs"), so the
    shared one is never rebuilt under another worker's test."""
    return run_dir(tmp_path_factory, "venvs")


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory) -> Path:
    """Every wheel the test venv needs, fetched once per run, so installs can run with --no-index."""
    return once_per_run(tmp_path_factory, "wheelhouse", lambda d: subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(d),
         ORT_CPU, ONNX, "pytest>=8", "pytest-xdist"], check=True))


def _fingerprints(venvs: Path) -> dict[str, dict]:
    out = {}
    for f in venvs.glob("*/ort-matrix-fingerprint.json"):
        try:
            out[f.parent.name] = json.loads(f.read_text())
        except (OSError, ValueError):
            pass  # being rebuilt right now, under the engine's lock
    return out


@pytest.fixture(autouse=True)
def _the_shared_venvs_keep_their_fingerprints(request):
    """The shared venvs serve both xdist workers at once: a test that rebuilt one with another fingerprint would make
    the other worker's tests rebuild it back, or see a venv they did not ask for. Every fingerprint a shared venv
    held is recorded for the whole run (under .fingerprints-seen/), and a second one fails the test that finds it,
    naming the fields that changed: that test, or one before it, needs its own venvs dir."""
    if "venvs" not in request.fixturenames:
        yield
        return
    from ort_gpu_matrix.envs.venvs import changed_fields

    shared = request.getfixturevalue("venvs")
    seen = shared / ".fingerprints-seen"
    seen.mkdir(exist_ok=True)
    before = _fingerprints(shared)
    yield
    problems = []
    for name, fp in [*sorted(before.items()), *sorted(_fingerprints(shared).items())]:
        record = seen / f"{name}.json"
        try:
            with open(record, "x") as f:  # the first fingerprint seen in this run wins
                json.dump(fp, f)
            continue
        except FileExistsError:
            pass
        try:
            first = json.loads(record.read_text())
        except ValueError:
            continue  # the other worker is writing it this instant
        if first != fp:
            problems.append(f"{name} (changed: {', '.join(changed_fields(first, fp))})")
    assert not problems, (f"the shared venv(s) {'; '.join(problems)} held another fingerprint earlier in this run: "
                          f"this test or one before it rebuilt it; a test that needs another fingerprint builds in its "
                          f"own dir (harness.venvs = tmp_path / 'own-venvs')")


@pytest.fixture
def harness(tmp_path: Path, venvs: Path) -> Harness:
    return Harness(tmp_path, venvs)


@pytest.fixture(scope="session")
def fake_libs(tmp_path_factory) -> dict[str, Path]:
    """Stand-ins for the system CUDA runtime and cuDNN, and for torch's bundled cuDNN."""
    d = tmp_path_factory.mktemp("libs")
    real = build_so(d / "system" / "libcudnn.so.9.14.0", "libcudnn.so.9", FAKE_CUDNN % 91400)
    (d / "system" / "libcudnn.so.9").symlink_to(real.name)  # as a distro lays it out
    site = d / "torch-env" / "site-packages"
    torch_cudnn = build_so(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", "libcudnn.so.9", FAKE_CUDNN % 91900)
    (site / "nvidia_cudnn_cu13-9.19.0.dist-info").mkdir()
    (site / "nvidia_cudnn_cu13-9.19.0.dist-info" / "METADATA").write_text("Name: nvidia-cudnn-cu13\nVersion: 9.19.0\n")
    return {
        "cudart": build_so(d / "system" / "libcudart.so.13", "libcudart.so.13", FAKE_CUDART % 13000),
        "cudnn": d / "system" / "libcudnn.so.9",
        "cudnn_real": real,
        "torch_cudnn": torch_cudnn,
    }

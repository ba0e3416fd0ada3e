"""The matrix.toml model: every table, key, type, default and doc, declared once.

The loader validates a file against these declarations and the JSON Schema is
generated from them, so the format, the checks and the schema cannot drift.
A key is a dataclass field made with `key()`; fields made otherwise (ids,
where an entry was declared) are not TOML keys. Types say how a key is read:
str, bool, int, tuple[str, ...], dict[str, str] or tuple[Rule, ...].
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from .kernels import CUDNN, teeth_message
from .keys import KeySpec as KeySpec
from .keys import key as key
from .keys import keys_of as keys_of
from .overrides import Workspace
from .rules import FLAKY_OUTCOMES as FLAKY_OUTCOMES
from .rules import OP_PATTERN as OP_PATTERN
from .rules import TIER_PATTERN as TIER_PATTERN
from .rules import CpuOpsRule as CpuOpsRule
from .rules import CudaOpsRule as CudaOpsRule
from .rules import CudaRunsRule as CudaRunsRule
from .rules import FallbackRule as FallbackRule
from .rules import FlakyRule as FlakyRule
from .rules import Observation as Observation
from .rules import Rule as Rule
from .rules import TierRule as TierRule

DEFAULT_TOOLS = ("pytest>=8", "pytest-xdist")
BACKENDS = ("uv", "virtualenv", "venv")
ID_PATTERN = r"[A-Za-z0-9_.]+"
LOADERS = ("preload", "ort_preload_dlls", "torch_first")
TEETH_SCOPES = ("known", "all", "cudnn")
ISOLATIONS = ("restore", "report", "off")  # ort_matrix_probe/isolation.py
CPU_NODES = ("warn", "fail")
# ORT places shape computations on the CPU on purpose (its CPU-preferred nodes: the small int64 subgraphs that feed
# a kernel's CPU inputs, such as Reshape's shape). It picks them by walking the graph, which the node census cannot
# see, so a suite names them by op type. The default names only the ops whose output is always a shape: Gather,
# Concat, Cast, Where and the like do the model's own work as often (a float8 Cast is what a test targets), and
# one of them on the CPU is worth a warning until a person says otherwise (shape_ops, or allowed_cpu_ops).
SHAPE_OPS = ("Shape", "Size")


@dataclass(frozen=True)
class NodePolicy:
    """How a node on the CPU inside a CUDA-served session is judged, from the suite's keys (cpu_nodes, shape_ops):
    the loader hands it to every mode's expectations, so each judge of a run (the verdict, its reruns, calibrate)
    reads the same policy."""

    cpu_nodes: str = "warn"
    shape_ops: tuple[str, ...] = SHAPE_OPS
PYTHON_PATTERN = r"[0-9]+\.[0-9]+|this"  # "this": the interpreter running nox, so a smoke cell runs anywhere
THIS_PYTHON = "this"
# A suite root that begins with it lies under the source tree of the pairing's [ort.<id>]: each ORT build
# runs the tests of its own release. A root without it is one tree for every build.
ORT_SOURCE_REF = "{ort.source}"
_ANY_BACKEND = "|".join(BACKENDS)


@dataclass(frozen=True)
class Settings:
    """[matrix]: what every pairing shares."""

    prefix: str = key("cell session names start with it", "gpu", example='"gpu"', pattern=f"^{ID_PATTERN}$")
    pythons: tuple[str, ...] = key("python versions, used when [pairing] has no include", (), example='["3.12"]',
                                   pattern=f"^(?:{PYTHON_PATTERN})$")
    backend: str = key("venv backends, the first one available wins", "uv|virtualenv", example='"uv|virtualenv"',
                       pattern=f"^({_ANY_BACKEND})(\\|({_ANY_BACKEND}))*$")
    wheelhouse: tuple[str, ...] = key("extra --find-links dirs; ${VAR} expanded, relative to the matrix file", ())
    offline: bool = key("installs never touch an index (--no-index)", False)
    suite: str | None = key("the suite a pairing runs unless it names another", None, example='"dispatch"')
    modes: tuple[str, ...] | None = key("the modes every pairing runs (absent: all)", None,
                                        example='["normal", "require_cudnn", "teeth"]')
    tools: tuple[str, ...] = key("installed in every venv", DEFAULT_TOOLS)
    runner: tuple[str, ...] | None = key("CI runner label(s) for cells whose libs set names none (default: "
                                         "ubuntu-latest)", None, one_or_list=True, example='"ubuntu-latest"')

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(self.backend.split("|"))


# Tests that belong to a release: `source` on [ort.<id>] names the ORT checkout whose tests belong to
# that build. A suite uses it by beginning its root with {ort.source}
# (root = "{ort.source}/onnxruntime/test/python/transformers"), so a release sweep runs each release's
# own tests; a root without it is one tree for every build, as before. Why a placeholder in root rather
# than a key of its own: root stays the one place that says where the tests are, read the same way in
# both cases, with the per-cell part visible in it. It may only begin the root (it stands for a
# directory, never for text inside a path), and pairing such a suite with an [ort.<id>] that has no
# source is refused when the matrix is loaded.
@dataclass(frozen=True)
class Ort:
    """[ort.<id>]: an ORT build under test."""

    FORMS: ClassVar[tuple[tuple[str, ...], ...]] = (("requirement",), ("wheel",))
    REQUIRES: ClassVar[dict[str, tuple[str, ...]]] = {"index_url": ("requirement",)}  # key -> keys it needs
    id: str = ""
    requirement: str | None = key("a pip requirement", None, example='"onnxruntime-gpu==1.31.1"')
    index_url: str | None = key("the index the requirement comes from (with requirement only), e.g. ORT's own "
                                "feed for a CUDA build PyPI does not carry", None,
                                example='"https://example.org/onnxruntime-cuda-12/pypi/simple/"')
    wheel: str | None = key("a local .whl (relative to the matrix file) or a URL", None)
    with_: tuple[str, ...] = key("installed beside it", (), toml="with", example='["onnx==1.20.1"]')
    source: str | None = key("the ORT source checkout this build's tests come from (the dir holding VERSION_NUMBER); "
                             "a suite root that begins with {ort.source} lies under it; ${VAR} expanded, relative to "
                             "the matrix file", None, example='"${ORT_SOURCE}"')


@dataclass(frozen=True)
class Torch:
    """[torch.<id>]: the torch a pairing installs or reuses, or none."""

    FORMS: ClassVar[tuple[tuple[str, ...], ...]] = (("requirement",), ("environment",), ("skip",))
    REQUIRES: ClassVar[dict[str, tuple[str, ...]]] = {"index_url": ("requirement",)}  # key -> keys it needs
    id: str = ""
    requirement: str | None = key("a pip requirement", None, example='"torch==2.11.0"')
    index_url: str | None = key("the index the requirement comes from (with requirement only)", None,
                                example='"https://download.pytorch.org/whl/cu130"')
    environment: str | None = key("reuse a preinstalled torch environment, seen through a .pth file", None)
    skip: bool = key("no torch in this pairing", False)


@dataclass(frozen=True)
class Libs:
    """[libs.<id>]: the system CUDA runtime and cuDNN to pin."""

    FORMS: ClassVar[tuple[tuple[str, ...], ...]] = (("cudart", "cudnn"), ("search",), ("pip",), ("none",))
    id: str = ""
    cudart: str | None = key("the CUDA runtime file to pin", None)
    cudnn: str | None = key("the cuDNN file to pin", None)
    search: tuple[str, ...] = key("dirs: the first libcudart.so.* / libcudnn.so.9 there are pinned", ())
    pip: tuple[str, ...] = key("NVIDIA library wheels, installed once into a cache dir of this set's own (not the "
                               "test venv); their nvidia/*/lib files are pinned", (),
                               example='["nvidia-cudnn-cu13==9.12.0.46"]')
    none: bool = key("pin nothing", False)
    loader: str = key("how the test process gets the libraries: preload (LD_PRELOAD), ort_preload_dlls "
                      "(onnxruntime.preload_dlls(directory=the set) before any test module or torch is imported; "
                      "with pip), torch_first (import torch before onnxruntime; with none)", "preload",
                      example='"preload"', pattern=f"^({'|'.join(LOADERS)})$")
    runner: tuple[str, ...] | None = key("CI runner label(s) that have these libraries (nox -s matrix -- --github)",
                                         None, one_or_list=True, example='["self-hosted", "cuda13"]')


@dataclass(frozen=True)
class DispatchExpect:
    """What every mode checks: known failures, known flakes and the dispatch rules."""

    known_failures: tuple[Rule, ...] = key("failures and errors that do not fail the verdict", ())
    known_flaky: tuple[FlakyRule, ...] = key("tests that may take any outcome and tier their rule lists; anything "
                                             "else fails the verdict, and a change within the set is no regression",
                                             ())
    require_kernel: str | None = key("at least one test (in dispatch_tests) dispatched it", None,
                                     example='"CUDNN_FLASH_ATTENTION"')
    forbid_kernels: tuple[str, ...] = key("no test in dispatch_tests dispatched these", ())
    dispatch_tests: str | None = key("regex on node ids the two rules apply to (default: all)", None, regex=True)
    allowed_fallbacks: tuple[FallbackRule, ...] = key(
        "tests that may be served by another EP after asking for the CUDA EP, with ORT's reason (every other "
        "fallback fails the mode); on a wheel without the CUDA EP, allow \"^CUDAExecutionProvider is not in this "
        "build\"", ())
    cuda_runs: tuple[CudaRunsRule, ...] = key("tests that must make CUDA runs: each test that passed and matches a "
                                              "rule made at least `min` runs the CUDA EP served", ())
    cuda_ops: tuple[CudaOpsRule, ...] = key("ops that must run on the CUDA EP: each test that passed and matches a "
                                            "rule ran every op it lists, and only on the CUDA EP (node census)", ())
    allowed_cpu_ops: tuple[CpuOpsRule, ...] = key("ops the tests a rule matches may run on the CPU inside a session "
                                                  "the CUDA EP serves (no warning, and no failure under cpu_nodes = "
                                                  "\"fail\")", ())
    nodes: NodePolicy = field(default_factory=NodePolicy)  # the suite's cpu_nodes and shape_ops (not a key here)


@dataclass(frozen=True)
class PassExpect(DispatchExpect):
    """[suite.<id>.expect.normal] and .require_cudnn: the tests must pass."""

    min_passed: int = key("at least this many tests pass", 1, minimum=0)
    allowed_skips: tuple[str, ...] = key("regexes on skip reasons that are expected", (), regex=True)
    tiers: tuple[TierRule, ...] = key("tier rules: each test that passed and matches a rule dispatched at least one "
                                      "tier and only tiers the rule lists; a test several rules match must satisfy "
                                      "every one (not read in teeth, where MATH is forced)", ())


@dataclass(frozen=True)
class TeethExpect(DispatchExpect):
    """[suite.<id>.expect.teeth]: with MATH forced, the canary must bite."""

    tier: str = key("the tier forcing MATH takes away: every test that dispatched it in require_cudnn must bite. "
                    "ORT's tests require cuDNN; a suite whose gate requires another tier names it (the built-in "
                    "dispatch suite reads DISPATCH_CANARY_TIER from [suite.<id>].env)", CUDNN,
                    pattern=TIER_PATTERN, example='"FLASH_ATTENTION"')
    message: str | None = key("the exact first line a bitten test fails with (default: AssertionError: '<tier>' != "
                              "'MATH')", None, example="\"AssertionError: 'CUDNN_FLASH_ATTENTION' != 'MATH'\"")
    min_failures: int = key("at least this many tests fail with the message (a canary of 0 bites nothing)", 1,
                            minimum=1)
    known_toothless: tuple[Rule, ...] = key("tests that dispatched the tier and are known not to bite", ())

    @property
    def canary(self) -> str:
        """The message a bite must be: the one set, or the one the tier's canary fails with."""
        return self.message if self.message is not None else teeth_message(self.tier)


@dataclass(frozen=True)
class Suite:
    """[suite.<id>]: a set of pytest files and what each mode expects of them."""

    id: str = ""
    root: str = key("the tests' dir, relative to the matrix file; ${VAR} expanded; may begin with {ort.source} "
                    "(the pairing's ORT source tree)", "", required=True, example='"suites/dispatch"')

    @property
    def from_ort_source(self) -> bool:
        """The root lies under the pairing's ORT source: it is resolved per cell, not once per suite."""
        return self.root.startswith(ORT_SOURCE_REF)
    files: tuple[str, ...] = key("test files relative to root; globs allowed", (), required=True,
                                 example='["test_*.py"]')
    pythonpath: tuple[str, ...] = key("the test process's whole PYTHONPATH, relative to root", (".",))
    pytest_args: tuple[str, ...] = key("extra pytest arguments", ())
    requirements: tuple[str, ...] = key("extra packages for this suite's venvs", ())
    env: dict[str, str] = key("extra environment for the test process (not the harness's own variables)", {})
    provider_options: dict[str, str] = key("CUDA EP options forced into every session, in every mode", {})
    plugins: tuple[str, ...] = key("pytest plugins to load with -p (plugin autoload is off; xdist is loaded "
                                   "when installed)", (), example='["pytest_timeout"]')
    timeout: int = key("seconds a whole mode run may take before its process group is stopped", 3600, minimum=1)
    test_timeout: int | None = key("seconds one test may take (pytest-timeout, installed when set)", None,
                                   minimum=1)
    expect_file: str | None = key("a TOML file of [expect.<mode>] tables, relative to the matrix file, merged "
                                  "under this suite's own expect tables (a key may be set in only one of them); "
                                  "nox -s calibrate writes it", None, example='"expect/dispatch.toml"')
    teeth_scope: str = key('which tests teeth runs: "known" (the default): those that dispatched any tier but MATH '
                           "(forcing MATH takes every one away) in any run of the cell on record (this run's "
                           "require_cudnn, this process's normal, and the last stored ones), those known_toothless or "
                           "known_failures names and those no run has seen yet, or every test where no run is on "
                           'record; "all": every test; "cudnn": only those that dispatched the teeth tier '
                           "(expect.teeth.tier) in this venv's require_cudnn run of the same nox process or sweep, plus "
                           "those known_toothless names: fewer, but a test of another fast tier that fails under MATH "
                           "goes unseen", "known", example='"all"', pattern=f"^({'|'.join(TEETH_SCOPES)})$")
    full: bool = key("run every test in every mode, as `--full` does: require_cudnn carries no outcome from normal, "
                     "even where the census of reads says a test cannot change (for tests that read "
                     "ORT_TEST_REQUIRE_CUDNN_SDPA in a way the census cannot see: from C, or read once and cached)",
                     False)
    quiet_threads: bool = key("idle threads sleep instead of spinning in every mode: OMP_WAIT_POLICY=PASSIVE "
                              "(unless env sets it) and every ORT session's intra- and inter-op spinning off (unless "
                              "the test sets it). How a waiting thread waits, never what a kernel computes: a test "
                              "process that waits on the GPU then frees the cores a cell's other runs share (on the "
                              "device, a cell went from 2.2x a bare run's CPU time to 0.9x); false leaves threads as "
                              "ORT and OpenMP do", True)
    isolation: str = key('what the probe does with process state a test changed and did not undo (os.environ, '
                         "ORT's logger settings, the cwd): \"restore\" names the polluter and puts the state back "
                         'before the next test, so no tier depends on test order; "report" names it only; "off" '
                         "does neither", "restore", example='"restore"', pattern=f"^({'|'.join(ISOLATIONS)})$")
    cpu_nodes: str = key('a node that ran on the CPU inside a session the CUDA EP served, that no cuda_ops or '
                         'allowed_cpu_ops rule covers and that is not one of shape_ops: "warn" names it in the '
                         'verdict\'s warnings, "fail" fails the mode', "warn", example='"fail"',
                         pattern=f"^({'|'.join(CPU_NODES)})$")
    shape_ops: tuple[str, ...] = key("ops ORT may place on the CPU on purpose (its CPU-preferred shape computations): "
                                     "never warned about, and left out of the cuda_ops rules calibrate writes",
                                     SHAPE_OPS, pattern=OP_PATTERN, example='["Shape", "Gather"]')
    slots_per_gpu: int | None = key("the most of this suite's mode runs that share one GPU at once (1: one after "
                                    "another); unset: decided from the GPU's free memory and the cores (room.py). "
                                    "A --slots-per-gpu above it is cut to it", None, minimum=1)
    expect: dict[str, DispatchExpect] = field(default_factory=dict)  # per mode, read by the loader

    @property
    def node_policy(self) -> NodePolicy:
        return NodePolicy(self.cpu_nodes, self.shape_ops)

    @property
    def installs(self) -> tuple[str, ...]:
        """What this suite adds to its venvs: its requirements, and pytest-timeout when it sets test_timeout."""
        return self.requirements + (("pytest-timeout",) if self.test_timeout is not None else ())


@dataclass(frozen=True)
class IncludeEntry:
    """One entry of pairing.include."""

    python: str | None = key('a python version, or "this" (the X.Y of the python running nox, found like any other)', None, required=True,
                             example='"3.12"', pattern=f"^(?:{PYTHON_PATTERN})$")
    ort: str | None = key("an [ort.<id>]", None, required=True, pattern=f"^{ID_PATTERN}$")
    torch: str | None = key("a [torch.<id>]", None, required=True, pattern=f"^{ID_PATTERN}$")
    libs: str | None = key("a [libs.<id>]", None, required=True, pattern=f"^{ID_PATTERN}$")
    suite: str | None = key("a [suite.<id>] (default: matrix.suite)", None, pattern=f"^{ID_PATTERN}$")
    modes: tuple[str, ...] | None = key("the modes of this pairing (default: matrix.modes)", None)


@dataclass(frozen=True)
class ExcludeEntry:
    """One entry of pairing.exclude: any subset of the axes."""

    python: str | None = key("a python version", None)
    ort: str | None = key("an ort id", None)
    torch: str | None = key("a torch id", None)
    libs: str | None = key("a libs id", None)
    suite: str | None = key("a suite id", None)


@dataclass(frozen=True)
class Pairing:
    python: str
    ort: str
    torch: str
    libs: str
    suite: str
    modes: tuple[str, ...]
    key: str  # where it was declared, for error messages


@dataclass(frozen=True)
class Matrix:
    path: Path
    settings: Settings
    ort: dict[str, Ort]
    torch: dict[str, Torch]
    libs: dict[str, Libs]
    suites: dict[str, Suite]
    pairings: tuple[Pairing, ...]
    workspace: Workspace

    @property
    def base(self) -> Path:
        return self.path.parent

    def expect_path(self, suite: Suite) -> Path | None:
        return expect_path(self.base, suite)


def expect_path(base: Path, suite: Suite) -> Path | None:
    """The suite's expect_file, resolved against the matrix file's dir (None: it names none)."""
    return None if suite.expect_file is None else (base / suite.expect_file).resolve()

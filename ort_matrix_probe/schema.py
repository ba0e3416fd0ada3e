"""The shape of the probe's report, defined once: the probe writes it, the engine reads it.

TypedDicts rather than classes, because the report crosses a process boundary
as JSON and the probe must stay importable on the test venv's Python.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from typing import NotRequired

REPORT_VERSION = 6  # 2: isolation and pollution (2026-12); 3: each test's EP census ("ep"); 4: subtests, env;
# 5: each CUDA-served session's node placement ("nodes", "nodes_unseen" in an EP use);
# 6: the census of reads of the watched variables (env_reads: the report's, and each test's)
READS_REPORTS = (2, 3, 4, 5, 6)  # a version 2 report reads as one with no EP census: nothing asked, nothing judged
KEEP_ENV = "ORT_MATRIX_KEEP"  # a file of the node ids to run, a JSON list (selection.py)
DROP_ENV = "ORT_MATRIX_DROP"  # a file of the node ids not to run: their outcomes are carried from another run
WATCH_ENV = "ORT_MATRIX_WATCH_ENV"  # a JSON list: the variables whose reads the probe counts (envreads.py)
EVERYTHING = "*"  # a read of every variable: the environment iterated, copied, or inherited by a child process
SUBTEST_PLACEHOLDER = "(<subtest>)"  # a subtest with neither a message nor params, as pytest names it
_DESCRIPTION_CHARS = 300  # a description is cut here: an id stays a line a person can read
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # an object's address: different in every process
REASON_CHARS = 200  # ORT's words for a fallback or an unseen placement: a first line, cut here


def first_line(text: object) -> str:
    """The first non-blank line of `text`, stripped and cut to REASON_CHARS: a reason a report keeps."""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0][:REASON_CHARS] if lines else ""


def subtest_description(msg: object, params: dict[str, Any]) -> str:
    """A subtest's description as pytest prints it (`[msg] (i=3, dtype='fp16')`), made stable: an object's
    address is dropped and a long repr cut, so one subtest reads the same in every run and every process."""
    parts = [] if msg is None else [f"[{msg}]"]
    if params:
        parts.append(f"({', '.join(f'{name}={value!r}' for name, value in params.items())})")
    return stable_text(" ".join(parts) or SUBTEST_PLACEHOLDER)


def stable_text(description: str) -> str:
    """A description without what differs between processes (an object's address), at most _DESCRIPTION_CHARS."""
    text = _ADDRESS.sub("", description)
    return text if len(text) <= _DESCRIPTION_CHARS else text[:_DESCRIPTION_CHARS - 3] + "..."


def subtest_id(nodeid: str, description: str) -> str:
    """A subtest's id: its test's node id, a space, its description (`f.py::T::test [msg] (i=3)`)."""
    return f"{nodeid} {description}"


def parent_of(nodeid: str) -> str | None:
    """The test a subtest id belongs to, or None for any other id.

    A pytest node id has no space outside the brackets of its parameters after its file part; a subtest's
    description starts after the first such space, with `[` or `(`. Read without the report, so that an id
    alone (in a baseline, a rule's match, a rerun's selection) says whether it names a subtest."""
    start = nodeid.find("::")
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(nodeid)):
        ch = nodeid[i]
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        elif ch == " " and depth == 0:
            return nodeid[:i] if nodeid[i + 1:i + 2] in ("[", "(") else None
    return None


class NodeUse(TypedDict):
    """One node of a build the CUDA EP served, as ORT placed it (placement.py), with the test's runs of that build."""

    op: str  # its op type, domain first unless ONNX's own (`Unique`, `com.microsoft.MoE`)
    name: str  # the node's name in the graph ORT partitioned (the test's, before the fusions each EP makes)
    ep: str  # the EP ORT placed it on
    runs: int  # the test's runs of the session while that build served it (0: built, never run by this test)


class EpUse(TypedDict):
    """One session that asked for the CUDA EP, as one test built or ran it (epcensus.py)."""

    session: int  # numbered per test process, in the order sessions first asked for the CUDA EP
    asked: list[str]  # the EP names it asked for, in order
    served: list[str]  # get_providers() as the test ended ([]: no creation succeeded)
    runs: dict[str, int]  # this test's runs that returned, per EP serving then ("none": no EP)
    fallback: NotRequired[str]  # not_in_build, not_loaded, retried, run_fallback: the CUDA EP did not serve
    reason: NotRequired[str]  # ORT's words for it, first line, at most 200 characters
    error: NotRequired[str]  # its creation raised this and nothing served it (the test went on regardless)
    nodes: NotRequired[list[NodeUse]]  # the placement of each build the CUDA EP served that the test met (version 5)
    nodes_unseen: NotRequired[str]  # why such a build's placement is unknown (an ORT before 1.24, the test's say)


class SubtestEntry(TypedDict):
    """One subtest (unittest's `self.subTest`, pytest's `subtests` fixture) as pytest >= 9 reports it."""

    outcome: str  # passed failed skipped xfailed
    message: str  # the first line a person reads: a skip reason, or the failure's message
    sdpa: list[str]  # the tiers printed while it was the innermost subtest open
    duration_s: float
    ep: NotRequired[list[EpUse]]  # the CUDA-asking sessions built or run while it was open
    # reported with no scope of its own open (unittest under Python < 3.11 reports subtests after the test ends):
    # what ran inside it is its test's only
    unscoped: NotRequired[bool]


class TestEntry(TypedDict):
    # passed failed skipped error xfailed xpassed; None until the test has one. A test with a failing subtest is
    # failed, whatever pytest called it (under pytest 9 a unittest test with failing subtests reads passed)
    outcome: str | None
    message: str
    sdpa: list[str]  # every SdpaKernel tier the test's runs printed, in order
    duration_s: float
    teardown_error: NotRequired[str]
    injections: NotRequired[int]
    unattributed: NotRequired[list[str]]  # tiers printed during the test while only CPU sessions ran
    reruns: NotRequired[int]  # failed attempts pytest-rerunfailures ran again
    rerun_messages: NotRequired[list[str]]  # the last few of their messages
    process: NotRequired[str]  # "controller", or the xdist worker ("gw0") that ran it
    ep: NotRequired[list[EpUse]]  # its sessions that asked for the CUDA EP (report version 3)
    # its subtests by id (subtest_id), in the order they ended; the test's sdpa and ep include theirs (version 4)
    subtests: NotRequired[dict[str, SubtestEntry]]
    pytest_outcome: NotRequired[str]  # what pytest itself said, where the probe says otherwise (version 4)
    by_subtests: NotRequired[bool]  # failed through its failing subtests only, not by its own code (version 4)
    env_reads: NotRequired[list[str]]  # the watched variables it read ("*": every one), where any (version 6)


class CollectionEntry(TypedDict):
    nodeid: str
    outcome: str  # error or skipped
    message: str


class LibraryHit(TypedDict):
    soname: str | None
    file: str | None
    version: int | None
    error: NotRequired[str]


class ByName(TypedDict):
    cudnn: LibraryHit
    cudart: LibraryHit


class CudnnCopy(TypedDict):
    file: str
    file_version: str | None  # as shipped: from the file name or the owning dist-info
    reports: int | None  # what cudnnGetVersion says through this copy


class StackLibrary(TypedDict):
    library: str  # cudart, cublas, cublasLt or cudnn
    file: str
    cuda_major: int | None  # from the soname (libcublas.so.12: 12); a cuDNN's from cudnnGetCudartVersion
    version: str | None  # as shipped: from the file name or the owning dist-info


class Audit(TypedDict):
    pid: int
    mapped: list[str]
    cudnn_copies: list[CudnnCopy]
    by_name: ByName
    onnxruntime_file: str | None
    onnxruntime_version: NotRequired[str | None]  # its __version__, read from sys.modules (reports since 2026-12)
    preload: list[str]
    loader: NotRequired[dict[str, Any] | None]  # what the libs set's loader did in this process (loader.py)
    process: NotRequired[str]  # "controller", or the xdist worker id: matched against the tests it ran
    stack: NotRequired[list[StackLibrary]]  # each CUDA runtime, cuBLAS and cuDNN copy mapped (reports since 2026-12)


class OrtProvenance(TypedDict):
    distribution: str
    version: str
    package_name: str | None
    cuda_version: str | None
    cudnn_version: str | None


class TorchProvenance(TypedDict):
    version: str
    cuda: str | None


class ProvenanceReport(TypedDict):
    python: str
    python_executable: str
    ort: OrtProvenance | None  # from the dist-info: what is installed
    torch: TorchProvenance | None
    # onnxruntime.__version__ in the test process, read after the tests (or the loader) imported it;
    # None when nothing imported it. Optional: reports before it was added lack it.
    ort_imported_version: NotRequired[str | None]


class StateChange(TypedDict):
    what: str  # env, cwd, ort_logger
    name: str  # the variable (env), the setting (ort_logger: severity, verbosity, callback), or "cwd"
    before: str | None  # None: unset (env) or never set (ort_logger); values over 200 characters are cut
    after: str | None


class PollutionEntry(TypedDict):
    """A change of the watched process state that was not undone (isolation.py)."""

    test: str  # the test's node id, or the node id of the class/module/session whose setup made it
    scope: str  # function (the test itself), class, module, package, session
    process: str  # "controller", or the xdist worker id
    changes: list[StateChange]
    undone: bool  # isolation "restore": put back before the next test
    later_tests: int  # later tests of its process: run under the change (report), or kept from it (restore)


class EnvScope(TypedDict):
    """Reads of watched variables that belong to more than one test (envreads.py)."""

    scope: str  # a node id prefix (a module's or a class's), or "" for every test
    names: list[str]  # the names read ("*": every one)
    where: list[str]  # "file:line" of the first read of each name


class EnvReads(TypedDict):
    watched: list[str]  # the names the engine asked about (ORT_MATRIX_WATCH_ENV)
    scopes: list[EnvScope]


class ProbeReport(TypedDict):
    report_version: int
    exitstatus: int
    duration_s: float
    collected: dict[str, int]  # items collected, per collecting process (the controller, or each xdist worker)
    tests: dict[str, TestEntry]
    collection: list[CollectionEntry]
    audits: list[Audit]
    outside_tests_sdpa: list[str]
    unattributed_sdpa: list[str]  # tiers printed while only sessions without the CUDA EP ran: never counted
    provenance: ProvenanceReport
    isolation: str  # restore, report or off (ORT_MATRIX_ISOLATION)
    pollution: list[PollutionEntry]  # in the order found, per process
    # where each process's start went (timings.py), by "controller" or worker id; optional, so no version bump:
    # engines that predate it ignore it, and reports that predate it read as having none
    timings: NotRequired[dict[str, dict[str, float | None]]]
    # the watched variables as a process that ran the tests had them once collection ended (None: unset), read
    # from os.environ in that process, not from the config (version 4; ORT_MATRIX_ENV_NAMES names them)
    env: NotRequired[dict[str, str | None]]
    envs: NotRequired[dict[str, dict[str, str | None]]]  # the same, per process: "controller" and each xdist worker
    node_census: NotRequired[bool]  # the node census was taken (version 5; false: ORT_MATRIX_NODE_CENSUS=off)
    env_reads: NotRequired[EnvReads]  # taken where the engine watched a name (version 6; absent: not taken)
    subtests_verbosity: NotRequired[int | None]  # pytest >= 9's for subtests: at 0 its summary omits passing ones

"""A baseline: what a sweep found, per cell and mode, kept small enough to commit and to diff.

A release engineer saves the last release's sweep as `baselines/<name>.json` and compares the next
release's sweep against it. Only what a comparison needs is kept: the verdict, the counts, each
test's outcome with the tiers it dispatched and, when it asked for the CUDA EP, the EPs that served
its runs and the ops that ran on each of them (one line per test), the teeth coverage, a summary of the library
audit and the provenance. Keys are sorted, so a re-saved baseline diffs cleanly.
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote

from ..judge.eps import CUDA_EP, short_eps
from ..judge.nodes import NodeRun, own
from ..judge.verdicts import Status
from ..util import codec
from ..util.codec import Textual, stored
from ..util.errors import UserError
from ..util.fs import write_atomic
from .results import Result

# 2: each test's line names the EPs that served it (ep=CUDA) when it asked for the CUDA EP; 3: and the ops that ran
# on each EP (ops.CUDA=Add,Relu ops.CPU=Unique), from the run's node census
BASELINE_VERSION = 3
READS = (1, 2, 3)  # a line before 2 has no ep= token, one before 3 no ops. token: nothing known, no `ep` change named
OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
QUOTED = re.compile(r"[A-Za-z0-9_.:~%-]+")  # an op or EP name as a line writes it: anything else percent-quoted
CUDA = CUDA_EP.removesuffix("ExecutionProvider")  # as a line names the CUDA EP (short_eps)
UNSEEN = "ops=unseen"  # a line's token for a test some of whose CUDA-served builds' placement was unseen
OpsByEp = tuple[tuple[str, tuple[str, ...]], ...]  # (short EP, the ops that ran on it, sorted), CUDA first


class BaselineError(UserError):
    """A baseline that cannot be read or written; the message names the file and the fix."""


@dataclass(frozen=True)
class TestLine(Textual):
    """One test of a mode record, stored as one line (`passed CUDNN_FLASH_ATTENTION ep=CUDA ops.CUDA=Add reruns=1`),
    so a baseline diffs as one line per test."""

    outcome: str
    tiers: tuple[str, ...] = ()  # the set of tiers it dispatched, sorted
    reruns: int = 0
    # the EPs that served its runs, short (CUDA, CPU), CUDA first; () it asked for the CUDA EP and made no run;
    # None: it asked for no CUDA session, or the line predates the census
    eps: tuple[str, ...] | None = None
    # per EP, the ops that ran there in its CUDA-served builds (judge/nodes.py), outside its subtests; () none seen:
    # no node census, no such build, or its placement unseen
    ops: OpsByEp = ()
    unseen: bool = False  # some CUDA-served build's placement was unseen (`ops=unseen`): what ops hold is not all

    def encode(self) -> str:
        ep = [] if self.eps is None else [f"ep={','.join(self.eps) or 'none'}"]
        ops = [f"ops.{_quoted(ep)}={','.join(map(_quoted, names))}" for ep, names in self.ops]
        ops += [UNSEEN] if self.unseen else []
        return " ".join([self.outcome, *self.tiers, *ep, *ops, *([f"reruns={self.reruns}"] if self.reruns else [])])

    @classmethod
    def decode(cls, text: str) -> TestLine:
        """`passed CUDNN_FLASH_ATTENTION ep=CUDA ops.CUDA=Add reruns=1`; anything else is refused with what was wrong."""
        outcome, *rest = text.split() or [""]
        if outcome not in OUTCOMES:
            raise ValueError(f"{outcome!r} is not an outcome ({', '.join(OUTCOMES)})")
        reruns = [t.split("=", 1)[1] for t in rest if t.startswith("reruns=")]
        if len(reruns) > 1 or (reruns and not reruns[0].isdigit()):
            raise ValueError(f"{text!r}: reruns= must be given once, as a whole number")
        eps = [t.split("=", 1)[1] for t in rest if t.startswith("ep=")]
        if len(eps) > 1 or (eps and not re.fullmatch(r"none|[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*", eps[0])):
            raise ValueError(f"{text!r}: ep= must be given once, as EP names joined by commas (CUDA,CPU) or none")
        tiers = tuple(t for t in rest if not t.startswith(("reruns=", "ep=", "ops.", "ops=")))
        if any(t.startswith("ops=") and t != UNSEEN for t in rest):
            raise ValueError(f"{text!r}: ops= is written only as {UNSEEN}")
        if not all(re.fullmatch(r"[A-Z][A-Z0-9_]*", t) for t in tiers):
            raise ValueError(f"{text!r}: tiers are written as SdpaKernel names (CUDNN_FLASH_ATTENTION, MATH)")
        served = None if not eps else () if eps[0] == "none" else tuple(eps[0].split(","))
        ops = _ops_of(text, [t for t in rest if t.startswith("ops.")])
        return cls(outcome, tiers, int(reruns[0]) if reruns else 0, served, ops, UNSEEN in rest)

    def ran_on(self, op: str) -> tuple[str, ...]:
        """The short EPs `op` ran on, CUDA first; () where it did not run, or nothing was seen."""
        return tuple(ep for ep, names in self.ops if op in names)


def _quoted(name: str) -> str:
    """An op or EP name as one token of a line: `com.microsoft.Gelu` as it is, any other character percent-quoted."""
    return quote(name, safe=":", errors="surrogatepass")


def _ops_of(text: str, tokens: list[str]) -> OpsByEp:
    """`ops.CUDA=Add,Relu` tokens read back, each EP once, each name as it was before quoting."""
    out: dict[str, tuple[str, ...]] = {}
    for token in tokens:
        ep, _, names = token.removeprefix("ops.").partition("=")
        parts = names.split(",")
        if not QUOTED.fullmatch(ep) or not all(QUOTED.fullmatch(p) for p in parts) or _unquoted(ep) in out:
            raise ValueError(f"{text!r}: ops.EP=OP,OP names each EP once, with the ops that ran on it joined by commas "
                             "(ops.CUDA=Add,Relu), other characters %-quoted")
        out[_unquoted(ep)] = tuple(sorted({_unquoted(p) for p in parts}))
    return _ordered(out)


def _unquoted(token: str) -> str:
    return unquote(token, errors="surrogatepass")


def _ordered(ops: dict[str, tuple[str, ...]]) -> OpsByEp:
    """CUDA first, then by name, as short_eps orders a line's EPs."""
    return tuple(sorted(ops.items(), key=lambda kv: (kv[0] != CUDA, kv[0])))


def ops_by_ep(nodes: list[NodeRun]) -> OpsByEp:
    """The ops that ran (a run or more) on each EP, by its short name (`CUDA`, `CPU`), from a test's node census. A
    node without an op type or an EP name (no ORT gives one) says nothing of where an op ran: it is left out."""
    ran: dict[str, set[str]] = {}
    for n in nodes:
        ep = n.ep.removesuffix("ExecutionProvider")
        if n.runs > 0 and n.op and ep:
            ran.setdefault(ep, set()).add(n.op)
    return _ordered({ep: tuple(sorted(names)) for ep, names in ran.items()})


@dataclass(frozen=True)
class _LibraryJSON:
    """The library summary as stored: checked on load, so a comparison never meets a list where a dict was."""

    pinned: dict[str, str] = field(default_factory=dict)
    cudnn_copies: list[str] = field(default_factory=list)
    cudnn_by_name: list[str] = field(default_factory=list)
    cudart_by_name: list[str] = field(default_factory=list)
    cuda_stack: list[str] = field(default_factory=list)
    cuda_stacks: list[list[str]] = field(default_factory=list)
    stack_of: dict[str, int] = field(default_factory=dict)


def _teeth_lists(teeth: Any) -> str | None:
    return "needs the lists bitten and toothless" if teeth is not None and set(teeth) != {"bitten", "toothless"} else None


@dataclass(frozen=True)
class ModeRecord:
    """One cell's mode as a baseline keeps it. `library` and `provenance` stay plain summaries (a key a hand-made
    record leaves out is None to a comparison), checked on load against the shape they are written in."""

    verdict: Status
    counts: dict[str, int]
    tests: dict[str, TestLine]
    # bitten and toothless test ids, when coverage was checked
    teeth: dict[str, list[str]] | None = field(default=None, metadata=stored(rule=_teeth_lists))
    # by-name cudnn and cudart (file and version), the cuDNN copies mapped
    library: dict[str, Any] = field(default_factory=dict, metadata=stored(shape=_LibraryJSON | None))
    provenance: dict[str, Any] = field(default_factory=dict,
                                       metadata=stored(shape=dict[str, str | float | None] | None))
    # "cudnn": teeth ran only require_cudnn's cuDNN tests, so its counts are not the suite's
    teeth_scope: str = field(default="all", metadata=stored(shape=Literal["all", "cudnn", "known"], omit_default=True))
    # restore, report or off: whether the run's tiers could depend on test order (pollution.py). "unknown":
    # saved before isolation existed (an optional key, so older baselines still read and older readers skip it)
    isolation: str = field(default="unknown", metadata=stored(shape=Literal["restore", "report", "off", "unknown"]))
    # its run carried an EP census (results of schema 3): only then does a line without ep= mean "asked for no
    # CUDA session"; from older results, or baselines saved before it, nothing is known and no ep change is named
    ep_census: bool = field(default=False, metadata=stored(omit_default=True))
    # its run carried a node census (results whose EP census holds nodes): only then do its lines' ops. tokens say
    # where each op ran; from older results or baselines nothing is known and no per-op ep change is named
    node_census: bool = field(default=False, metadata=stored(omit_default=True))
    # what its run did not run: tests whose outcomes it carried from normal (and the run they came from), and
    # tests a teeth left out (drive/carry.py, knowncut.py); its lines hold the carried outcomes as they came
    carried: int = field(default=0, metadata=stored(omit_default=True))
    carried_from: str | None = field(default=None, metadata=stored(omit_default=True))
    left_out: int = field(default=0, metadata=stored(omit_default=True))

    @classmethod
    def of(cls, r: Result) -> ModeRecord:
        tiers, ep = r.dispatch.tests, r.ep.tests
        mine = own({n: e.nodes for n, e in ep.items()})  # a test's lines hold its own ops, not its subtests' again
        tests = {n: TestLine(o, tuple(sorted(set(tiers.get(n, [])))), r.reruns.get(n, 0),
                             short_eps(ep[n].runs) if n in ep else None, ops_by_ep(mine[n]) if n in ep else (),
                             n in ep and bool(ep[n].nodes_unseen))
                 for n, o in r.outcomes.items()}
        cov = r.teeth_coverage
        teeth = None
        if cov is not None and cov.checked:
            teeth = {"bitten": sorted(cov.bitten_tests),
                     "toothless": sorted([*cov.declared_toothless, *cov.undeclared_toothless])}
        sel = r.selection
        return cls(r.verdict, dict(vars(r.counts)), tests, teeth, library_summary(r), provenance_summary(r),
                   cov.scope if cov is not None else "all", r.isolation, r.ep.taken, r.ep.nodes_taken,
                   len(sel.carried) if sel else 0, sel.carried_from if sel else None, len(sel.left_out) if sel else 0)


def library_summary(r: Result) -> dict[str, Any]:
    """What served the tests, across the run's test processes: the by-name resolutions and the cuDNN copies."""
    by_name: dict[str, set[str]] = {"cudnn": set(), "cudart": set()}
    copies: set[str] = set()
    stack: set[str] = set()
    for audit in r.libraries.audits:
        stack.update(stack_line(x) for x in audit.get("stack", []))
        names: dict[str, Any] = dict(audit.get("by_name", {}))
        for lib in by_name:
            hit: dict[str, Any] = names.get(lib) or {}
            if hit.get("file"):
                by_name[lib].add(f"{hit['file']} ({hit.get('version')})")
        for c in audit.get("cudnn_copies", []):
            copies.add(f"{c['file']} ({c.get('file_version') or 'version unknown'})")
    stacks, stack_of = stacks_served(r)
    return {"pinned": {k: v for k, v in r.libraries.pinned.items() if v}, "cudnn_copies": sorted(copies),
            **{f"{lib}_by_name": sorted(files) for lib, files in by_name.items()}, "cuda_stack": sorted(stack),
            "cuda_stacks": stacks, **({"stack_of": stack_of} if stack_of else {})}


@dataclass(frozen=True)
class _BaselineJSON:
    """A baseline file as stored: its version beside the records."""

    baseline_version: int
    cells: dict[str, dict[str, ModeRecord]]
    name: str = ""
    created: str = ""


def stack_line(x: Any) -> str:
    """`cudnn CUDA 12 9.10.2 (/…/libcudnn.so.9)`: one CUDA library a test process mapped, as reports show it."""
    return f"{x['library']} CUDA {x.get('cuda_major') or '?'} {x.get('version') or 'version unknown'} ({x['file']})"


def stacks_served(r: Result) -> tuple[list[list[str]], dict[str, int]]:
    """The distinct CUDA stacks the run's test processes mapped, and which one served each test (node id -> index),
    kept only where they differ (the stack most tests had first): with one stack, it served every test. A process that ran no test (the xdist
    controller) is left out; a result from before tests named their process keeps every audit."""
    ran = set(r.libraries.processes.values())
    per_process = {str(a.get("process") or f"#{i}"): tuple(sorted({stack_line(x) for x in a.get("stack", [])}))
                   for i, a in enumerate(r.libraries.audits) if not ran or str(a.get("process")) in ran}
    served = Counter(per_process[p] for p in r.libraries.processes.values() if p in per_process)
    distinct = sorted(set(per_process.values()), key=lambda s: (-served[s], s))  # L1: the stack most tests had
    index = {s: i for i, s in enumerate(distinct)}
    of = {n: index[per_process[p]] for n, p in sorted(r.libraries.processes.items()) if p in per_process}
    return [list(s) for s in distinct], (of if len(distinct) > 1 else {})


def provenance_summary(r: Result) -> dict[str, Any]:
    p = r.provenance
    ort: dict[str, Any] = dict(p.ort or {})
    torch: dict[str, Any] = dict(p.torch or {})
    return {"ort": f"{ort.get('distribution')} {ort.get('version')}" if ort else None,
            "ort_cuda": ort.get("cuda_version"), "ort_wheel_sha256": p.ort_wheel_sha256,
            "torch": f"{torch.get('version')} (cuda {torch.get('cuda')})" if torch else None,
            "python": p.python, "host": r.host}


@dataclass(frozen=True)
class Baseline:
    cells: dict[str, dict[str, ModeRecord]]  # cell name -> mode -> record
    name: str = ""
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @classmethod
    def of(cls, results: list[Result], name: str = "") -> Baseline:
        cells: dict[str, dict[str, ModeRecord]] = {}
        for r in results:
            cells.setdefault(r.cell.name, {})[r.mode] = ModeRecord.of(r)
        return cls(cells, name)

    def to_json(self) -> str:
        data = codec.encode(_BaselineJSON(BASELINE_VERSION, self.cells, self.name, self.created))
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    def save(self, path: Path) -> None:
        try:
            write_atomic(path, self.to_json())
        except OSError as exc:
            raise BaselineError(f"{path}: cannot be written ({exc.strerror or exc})") from None

    @classmethod
    def load(cls, path: Path) -> Baseline:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise BaselineError(f"{path}: no such baseline; save one with `nox -s sweep -- --save-baseline NAME`") from None
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BaselineError(f"{path}: cannot be read as a baseline ({exc})") from None
        if not isinstance(data, dict) or data.get("baseline_version") not in READS:
            version = data.get("baseline_version") if isinstance(data, dict) else None
            raise BaselineError(f"{path}: baseline_version {version!r} is not one this ort-gpu-matrix reads "
                                f"({', '.join(map(str, READS))}); re-save it from the results it was made from")
        try:
            read = codec.decode(_BaselineJSON, data)
        except codec.CodecError as exc:
            raise BaselineError(f"{path}: is not a well-formed baseline: {exc}; "
                                "re-save it with `nox -s sweep -- --save-baseline NAME`") from None
        return cls(read.cells, read.name, read.created)

    def merged_over(self, earlier: Baseline) -> tuple[Baseline, list[str]]:
        """This sweep's records over an earlier baseline's: what this sweep did not run is kept, and named."""
        cells = {c: dict(modes) for c, modes in earlier.cells.items()}
        kept = sorted(f"{c} {m}" for c, modes in earlier.cells.items() for m in modes
                      if m not in self.cells.get(c, {}))
        for c, modes in self.cells.items():
            cells.setdefault(c, {}).update(modes)
        return Baseline(cells, self.name, self.created), kept

    def modes(self) -> set[tuple[str, str]]:
        return {(c, m) for c, modes in self.cells.items() for m in modes}


def baselines_dir(matrix_file: Path) -> Path:
    """MATRIX_BASELINES, else baselines/ beside the matrix file: baselines are files users commit."""
    env = os.environ.get("MATRIX_BASELINES")
    return Path(env).resolve() if env else matrix_file.parent / "baselines"


def resolve_baseline(name_or_file: str, matrix_file: Path) -> Path:
    """For --baseline (read only): a path as given if it names a .json file, else baselines/<name>.json."""
    p = Path(name_or_file)
    if p.suffix == ".json" or os.sep in name_or_file:
        return p.resolve()
    return baselines_dir(matrix_file) / f"{check_name(name_or_file, '--baseline')}.json"


def check_name(name: str, option: str = "--save-baseline") -> str:
    """A baseline name is a name: it becomes baselines/NAME.json and can point nowhere else."""
    if not NAME.fullmatch(name) or ".." in name:
        raise BaselineError(f"{option} {name!r}: a baseline name is letters, digits, '.', '_', '+' and '-', starting "
                            "with a letter or digit (no '/', no '..', not empty); it is saved as baselines/NAME.json")
    return name


def save_path(name: str, matrix_file: Path) -> Path:
    """Where --save-baseline NAME writes: baselines/NAME.json, and nowhere else."""
    return baselines_dir(matrix_file) / f"{check_name(name)}.json"

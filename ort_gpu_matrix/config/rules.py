"""The rules an expectation lists: each a regex on test ids, what it accepts or demands, and why.

A subtest's id extends its test's (`f.py::T::test [msg] (i=3)`), so a regex searched in ids would match every
subtest of each test it matches. Each rule covers the subtests of a test it matches only with `subtests = true`;
a regex that matches a subtest's id but not its test's names the subtest and covers it (judge/covers.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from .keys import key

SUBTESTS_DOC = ("also cover the subtests of each test the regex matches (a regex that matches only a subtest's id "
                "covers that subtest anyway)")


@dataclass(frozen=True)
class Observation:
    """Where and when `nox -s calibrate` saw what a rule accepts: the review trail of a calibrated rule."""

    cell: str = key("the cell (session name) it was seen in", "", required=True, example='"gpu-3.12-h200"')
    ort: str = key("the ORT version the run reported", "", required=True, example='"1.31.1"')
    date: str = key("the day the run started (UTC), as YYYY-MM-DD", "", required=True, example='"2026-11-30"')


@dataclass(frozen=True)
class Rule:
    """A regex on node ids and why it is tolerated."""

    test: str = key("a regex searched in the node id", "", required=True, regex=True)
    reason: str = key("why", "", required=True)
    observed: tuple[Observation, ...] = key("where calibrate saw it (cell, ORT version, date); a rule that matches "
                                            "nothing is stale only in the cells it was seen in", ())
    subtests: bool = key(SUBTESTS_DOC, False)


TIER_PATTERN = r"^[A-Z0-9_]+$"  # a tier as ORT prints it and the probe records it (any name: the list is open)


@dataclass(frozen=True)
class TierRule:
    """A regex on node ids and the tiers the tests it matches must dispatch."""

    test: str = key("a regex searched in the node id; every test that passed and matches it is judged", "",
                    required=True, regex=True, example='"TestMemoryEfficientGQA::"')
    only: tuple[str, ...] = key("the tiers a matching test may dispatch, as ORT prints them (any name, XQA too); "
                                "it must dispatch at least one of them and nothing else", (), required=True,
                                minimum=1, pattern=TIER_PATTERN, example='["EFFICIENT_ATTENTION"]')
    reason: str = key("why: what the tests are meant to run, or a finding to report upstream", "")
    observed: tuple[Observation, ...] = key("where calibrate saw it (cell, ORT version, date); a rule that matches "
                                            "no test that passed is stale only in the cells it was seen in", ())
    subtests: bool = key(SUBTESTS_DOC, False)


@dataclass(frozen=True)
class FallbackRule:
    """A test allowed to be served by another EP after asking for the CUDA EP, and for which of ORT's reasons."""

    test: str = key("a regex searched in the node id", "", required=True, regex=True, example='"test_moe_"')
    error: str = key("a regex searched in ORT's reason for the fallback (its EP error, or the library that would "
                     "not load); a fallback with another reason still fails", "", required=True, regex=True,
                     example='"^CUDAExecutionProvider is not in this build"')
    reason: str = key("why it is tolerated", "", required=True)
    observed: tuple[Observation, ...] = key("where calibrate saw it (cell, ORT version, date); a rule that matches "
                                            "no fallback is stale only in the cells it was seen in", ())
    subtests: bool = key(SUBTESTS_DOC, False)


@dataclass(frozen=True)
class CudaRunsRule:
    """Tests that must make CUDA runs: a pass with fewer proves nothing about the GPU."""

    test: str = key("a regex searched in the node id; every test that passed and matches it is judged", "",
                    required=True, regex=True, example='"TestMoE::"')
    min: int = key("runs the CUDA EP served, at least, in each matching test that passed", 1, minimum=1)
    reason: str = key("why: what the tests are meant to run on", "")
    observed: tuple[Observation, ...] = key("where calibrate saw it (cell, ORT version, date); a rule that matches "
                                            "no test that passed is stale only in the cells it was seen in", ())
    subtests: bool = key(SUBTESTS_DOC, False)


OP_PATTERN = r"^[A-Za-z0-9_.:-]+$"  # an op as the node census names it: its type, after its domain unless ONNX's own


@dataclass(frozen=True)
class CudaOpsRule:
    """Ops that must run on the CUDA EP, and there alone, in the tests a rule matches.

    ORT places a node with no CUDA kernel for its type, version or dtype on the CPU without a word, and the test
    still passes."""

    test: str = key("a regex searched in the node id; every test that passed and matches it is judged", "",
                    required=True, regex=True, example='"TestMoE::"')
    ops: tuple[str, ...] = key("the ops (`Unique`; another domain's after it: `com.microsoft.MoE`) that must run, and "
                               "run on the CUDA EP only, in each matching test that passed", (), required=True,
                               minimum=1, pattern=OP_PATTERN, example='["com.microsoft.MoE"]')
    reason: str = key("why: what the tests are meant to run on", "")
    observed: tuple[Observation, ...] = key("where calibrate saw it (cell, ORT version, date); a rule that matches "
                                            "no test that passed is stale only in the cells it was seen in", ())
    subtests: bool = key(SUBTESTS_DOC, False)


@dataclass(frozen=True)
class CpuOpsRule:
    """Ops a test may run on the CPU inside a session the CUDA EP serves (a person's decision, never calibrate's)."""

    test: str = key("a regex searched in the node id", "", required=True, regex=True, example='"test_unique_"')
    ops: tuple[str, ...] = key("the ops its CUDA sessions may run on the CPU EP", (), required=True, minimum=1,
                               pattern=OP_PATTERN, example='["Unique"]')
    reason: str = key("why it is tolerated (ORT has no CUDA kernel for it, say)", "", required=True)
    observed: tuple[Observation, ...] = key("where calibrate saw it (cell, ORT version, date); a rule that matches "
                                            "no CPU node is stale only in the cells it was seen in", ())
    subtests: bool = key(SUBTESTS_DOC, False)


FLAKY_OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")


@dataclass(frozen=True)
class FlakyRule:
    """A test whose outcome or tiers differed between runs of one mode: every outcome and tier it showed."""

    test: str = key("a regex searched in the node id", "", required=True, regex=True)
    outcomes: tuple[str, ...] = key("every outcome it may take (passed, failed, skipped, error, xfailed, xpassed)",
                                    (), required=True, example='["passed", "failed"]',
                                    pattern=f"^({'|'.join(FLAKY_OUTCOMES)})$")
    tiers: tuple[str, ...] = key("every SdpaKernel tier it may dispatch (each run's tiers must be among them)", (),
                                 example='["EFFICIENT_ATTENTION", "FLASH_ATTENTION"]')
    reason: str = key("why (calibrate writes the first line of a failure, cut to about 200 characters)", "",
                      required=True)
    runs: tuple[str, ...] = key("what each calibrated run gave, as evidence for review (not judged)", ())
    observed: tuple[Observation, ...] = key("where calibrate saw it (cell, ORT version, date); a rule that matches "
                                            "nothing is stale only in the cells it was seen in", ())
    subtests: bool = key(SUBTESTS_DOC, False)

"""The three modes: what each one sets in the test process and which expect table it reads, in one place.

- normal: the kernel debug line on; the tests must pass.
- require_cudnn: ORT_TEST_REQUIRE_CUDNN_SDPA=1 too, so dispatch-gated tests fail
  instead of skipping green.
- teeth: MATH forced (sdpa_kernel=16) as well; the canary must bite every test
  that dispatched cuDNN in require_cudnn, with exactly the verbatim message.
How each is judged is the judge's (judge/verdicts.py, `outcome_judge`): configuration never pulls in judging.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .kernels import MATH, only
from .model import DispatchExpect, PassExpect, TeethExpect


class Mode(enum.StrEnum):
    NORMAL = "normal"
    REQUIRE_CUDNN = "require_cudnn"
    TEETH = "teeth"


CANARY_ENV = "ORT_TEST_REQUIRE_CUDNN_SDPA"


@dataclass(frozen=True)
class ModeSpec:
    require_cudnn: bool  # sets ORT_TEST_REQUIRE_CUDNN_SDPA=1
    forced_options: dict[str, str]  # CUDA EP options merged over the suite's provider_options
    expect_type: type[DispatchExpect]  # the [suite.<id>.expect.<mode>] table
    coverage_from: Mode | None = None  # the mode whose census this mode's coverage is checked against
    # the mode this one differs from only in `changes` (variables it sets): a test that reads none of them runs as
    # it did there, and its outcome may be carried from there instead of run again (drive/carry.py)
    carries_from: Mode | None = None
    changes: tuple[str, ...] = ()


SPECS: dict[Mode, ModeSpec] = {
    Mode.NORMAL: ModeSpec(False, {}, PassExpect),
    Mode.REQUIRE_CUDNN: ModeSpec(True, {}, PassExpect, carries_from=Mode.NORMAL, changes=(CANARY_ENV,)),
    Mode.TEETH: ModeSpec(True, {"sdpa_kernel": only(MATH)}, TeethExpect,
                         coverage_from=Mode.REQUIRE_CUDNN),
}
MODES: tuple[str, ...] = tuple(m.value for m in Mode)  # canonical order: teeth reads require_cudnn's census
# the variables whose reads every run's probe counts (envreads.py): what the census that lets a mode carry reads
WATCHED: tuple[str, ...] = tuple(sorted({name for s in SPECS.values() for name in s.changes}))


def spec(mode: str) -> ModeSpec:
    return SPECS[Mode(mode)]

"""Where a test's work ran, baseline against now: the EPs that served it, and the EPs each of its ops ran on.

The EP census says which EP served each session a test built (judge/eps.py); the node census says which EP
each op of a CUDA-served build ran on (judge/nodes.py). A baseline line keeps both (store/baseline.py), and
a test that kept its outcome has moved off the GPU when either moved: the CUDA EP no longer serves it at
all (a test-level move), or it still does but an op that ran on the CUDA EP alone now runs on another EP
too or instead, or that ran on CUDA and on another EP and now on that one alone (a per-op move: ORT placed the
node on the CPU for want of a kernel, without a word). One cause is named once: where the test-level move is named,
its ops are not named again. A test whose placement was seen on one side and unseen on the other is one move of
its own (`node placement seen -> node placement unseen`): its ops cannot be compared, and a sweep that can no
longer see must not read as one that saw nothing move.

ORT's CPU-preferred shape ops (config.model.SHAPE_OPS: Shape, Gather, Cast...) are never compared per op. A
baseline keeps no suite policy, so the default list is used, not a suite's own `shape_ops`: ORT moves these
between EPs on purpose from one release to the next, and a per-op move of one says nothing of the GPU work.
A suite that widens its shape_ops still sees a per-op move of an op it added there; that is the safer side.
"""
from __future__ import annotations

import enum

from ..config.model import SHAPE_OPS
from ..store.baseline import CUDA, TestLine

Move = tuple[str | None, str, str]  # (the op, None for the test as a whole; before; after), as a change shows them


class Seen(enum.IntEnum):
    """What both sides of a comparison carried: nothing of EPs, an EP census, or a node census as well."""

    NOTHING = 0
    EPS = 1
    NODES = 2


def eps_text(eps: tuple[str, ...] | None) -> str:
    """What served a test's runs, as a change shows it: `CPU`, `CUDA, CPU`, `no run`, `no CUDA session`."""
    if eps is None:
        return "no CUDA session"
    return ", ".join(eps) or "no run"


def op_text(line: TestLine, op: str) -> str:
    """Where an op ran, as a change shows it: `CUDA`, `CPU`, `CUDA, CPU`, or `not run`."""
    return ", ".join(line.ran_on(op)) or "not run"


def moves(bt: TestLine, at: TestLine, seen: Seen) -> tuple[list[Move], list[Move]]:
    """A test's moves off the CUDA EP (regressions) and back onto it (improvements), when it kept its outcome."""
    if seen < Seen.EPS or bt.outcome != at.outcome or bt.eps is None:
        return [], []
    before, after = CUDA in bt.eps, at.eps is not None and CUDA in at.eps
    shown = (None, eps_text(bt.eps), eps_text(at.eps))
    if before != after:  # the test as a whole: its ops moved with it, and are not named again
        return ([shown], []) if before else ([], [shown])
    if seen < Seen.NODES:
        return [], []
    if bt.unseen != at.unseen and (bt.ops or at.ops):  # what was judged by node is no longer, or is again
        move: Move = (None, _placement(bt), _placement(at))
        return ([move], []) if at.unseen else ([], [move])
    worse: list[Move] = []
    better: list[Move] = []
    for op in sorted({op for _, names in (*bt.ops, *at.ops) for op in names} - set(SHAPE_OPS)):
        was, now = set(bt.ran_on(op)), set(at.ran_on(op))
        if _off_cuda(was, now):
            worse.append((op, op_text(bt, op), op_text(at, op)))
        elif _off_cuda(now, was):
            better.append((op, op_text(bt, op), op_text(at, op)))
    return worse, better


def _off_cuda(was: set[str], now: set[str]) -> bool:
    """An op that ran on the CUDA EP and now runs where it did not (another EP beside or instead of CUDA), or has
    lost CUDA while it still runs elsewhere (CUDA and CPU before, the CPU alone now)."""
    return CUDA in was and bool(now) and bool(now - was - {CUDA} or CUDA not in now)


def _placement(line: TestLine) -> str:
    """A line's node census as a change names it, where its placement was seen on one side only."""
    return "node placement unseen" if line.unseen else "node placement seen"


def back_on_cuda(line: TestLine | None, op: str) -> bool:
    """Whether a rerun shows `op` ran on the CUDA EP alone: only that clears a per-op move (drive/confirm.py)."""
    return line is not None and line.ran_on(op) == (CUDA,)

"""Library code that iterates the environment but keeps only the names under a prefix: not a read of everything.

The census's rule (envreads.py) counts an iteration of os.environ as a read of every name, since the code that
iterates may keep any of them. One case costs a whole module on the H200: torch 2.11's import loads tqdm, whose
`envwrap` runs, at tqdm's import,

    (k[i:].lower(), v) for k, v in os.environ.items() if k.startswith(prefix)

and keeps only `TQDM_*` names. Counted as everything, it made every test of the first module that imports torch
run again in require_cudnn (121 tests where 56 read the canary).

A site here is exempted only where the code that iterates is the reviewed one, checked on the frame itself:
- its file ends with the reviewed path, and its code object's qualified name is the reviewed one;
- the source of the expression iterating holds the reviewed filter's text, read from the file as it is (a
  version that stopped filtering, or filters otherwise, is counted as everything again);
- the prefix it filters by is read from the frame's own locals, not assumed, and a watched name under that prefix
  is a read of that name (the code keeps it).
The values an `.items()` or `.values()` view fetches for such an iteration (`__getitem__` called by the view's
own frame) belong to the same iteration and are judged with it.

Stdlib only, like the rest of the probe.
"""
from __future__ import annotations

import linecache
import os
from dataclasses import dataclass
from types import FrameType


@dataclass(frozen=True)
class PrefixFilter:
    """A reviewed site: a file (its path's tail), the qualified names its code object has had, and the local that
    holds the prefix."""

    path: str
    qualnames: tuple[str, ...]
    line: str  # what the iterating expression holds, spaces aside
    prefix_local: str
    why: str


FILTERS: tuple[PrefixFilter, ...] = (
    # tqdm 4.70: a generator expression; 4.66 to 4.67: a dict comprehension, inlined into envwrap on Python 3.12
    PrefixFilter(os.path.join("tqdm", "utils.py"),
                 ("envwrap.<locals>.<genexpr>", "envwrap.<locals>.<dictcomp>", "envwrap"),
                 "for k, v in os.environ.items() if k.startswith(prefix)", "prefix",
                 "tqdm's envwrap keeps only its own `TQDM_*` variables; torch's import loads tqdm"),
)
# frames between the iterating code and os.environ: the mapping views' and os's own, from a file or frozen
_VIEWS = (os.sep + "_collections_abc.py", "<frozen _collections_abc>")
_BETWEEN = (*_VIEWS, os.sep + "os.py", "<frozen os>")


def _outside(frame: FrameType | None) -> FrameType | None:
    """The first frame from `frame` up that is not a mapping view's or os's own."""
    while frame is not None and frame.f_code.co_filename.endswith(_BETWEEN):
        frame = frame.f_back
    return frame


def _running(frame: FrameType) -> str:
    """The source text of the expression `frame` runs now (its instruction's span), spaces aside; "" where unknown."""
    code = frame.f_code
    try:
        first, last, col, end_col = list(code.co_positions())[frame.f_lasti // 2]
    except (AttributeError, IndexError):  # Python without positions: nothing is exempted
        return ""
    if first is None or last is None or col is None or end_col is None:
        return ""
    linecache.checkcache(code.co_filename)  # the file as it is now
    lines = [linecache.getline(code.co_filename, n) for n in range(first, last + 1)]
    if not lines:
        return ""
    lines[-1] = lines[-1][:end_col]  # columns count UTF-8 bytes; the reviewed lines are ASCII
    lines[0] = lines[0][col:]
    return " ".join(" ".join(lines).split())


def _prefix_of(frame: FrameType | None) -> str | None:
    """The prefix a reviewed filter at `frame` keeps; None where the frame is no reviewed filter, or its line is
    no longer the reviewed expression, or its prefix is not a str."""
    if frame is None:
        return None
    code = frame.f_code
    for site in FILTERS:
        if code.co_filename.endswith(os.sep + site.path) and getattr(code, "co_qualname", "") in site.qualnames:
            prefix = frame.f_locals.get(site.prefix_local)
            if site.line in _running(frame) and isinstance(prefix, str) and prefix:
                return prefix
    return None


def kept(frame: FrameType | None, watched: frozenset[str]) -> frozenset[str] | None:
    """For an iteration of the environment whose nearest frame is `frame`: None where it is no reviewed prefix
    filter (a read of everything); else the watched names it keeps (those under its prefix), maybe none."""
    prefix = _prefix_of(_outside(frame))
    if prefix is None:
        return None
    return frozenset(n for n in watched if n.startswith(prefix))


def fetched_by_view(frame: FrameType | None) -> bool:
    """Whether a `__getitem__` at `frame` is a mapping view fetching a value for the iteration that drives it."""
    return frame is not None and frame.f_code.co_filename.endswith(_VIEWS) and frame.f_code.co_name == "__iter__"

"""Library code that iterates the environment but keeps only the names under a prefix: not a read of everything.

The census's rule (envreads.py) counts an iteration of os.environ as a read of every name, since the code that
iterates may keep any of them. One case costs a whole module on the H200: torch 2.11's import loads tqdm, whose
`envwrap` runs, at tqdm's import,

    env_overrides.update((k[i:].lower(), v) for k, v in os.environ.items() if k.startswith(prefix))

and keeps only `TQDM_*` names. Counted as everything, it made every test of the first module that imports torch
run again in require_cudnn (121 tests where 56 read the canary).

A site here is exempted only where the code that iterates is the reviewed code, checked on the frame itself:
- its file ends with the reviewed path, and its code object's qualified name is the reviewed one;
- the whole source of that code object, read from the file as it is now (spaces aside), is exactly the reviewed
  text: a filter widened by one `or`, a copy that keeps everything, or any other change is everything again
  (tqdm before 4.70, whose envwrap used a dict comprehension, is not reviewed and counts as everything);
- it iterates os.environ itself, or through one mapping view of it (`.items()`, `.keys()`, `.values()`) that
  the reviewed code called directly; a view of another mapping, or a view called by other code in between,
  is not the reviewed iteration;
- the prefix it filters by is read from the frame's own locals, not assumed, and a watched name under that
  prefix is a read of that name (the code keeps it).
The values a view fetches for that iteration (`__getitem__` called by the view's own frame) are judged with it.

Stdlib only, like the rest of the probe.
"""
from __future__ import annotations

import linecache
import os
from dataclasses import dataclass
from types import CodeType, FrameType


@dataclass(frozen=True)
class PrefixFilter:
    """A reviewed site: a file (its path's tail), a code object's qualified name and its whole source (spaces
    removed), and the local that holds the prefix it keeps."""

    path: str
    qualname: str
    source: str
    prefix_local: str
    why: str


FILTERS: tuple[PrefixFilter, ...] = (
    PrefixFilter(os.path.join("tqdm", "utils.py"), "envwrap.<locals>.<genexpr>",
                 "env_overrides.update((k[i:].lower(),v)fork,vinos.environ.items()ifk.startswith(prefix))", "prefix",
                 "tqdm 4.70's envwrap keeps only its own `TQDM_*` variables; torch's import loads tqdm"),
)
_VIEWS = (os.sep + "_collections_abc.py", "<frozen _collections_abc>")  # where the mapping views live


def _source(code: CodeType) -> str:
    """The source text a code object spans, from its file as it is now, whitespace removed; "" where unknown."""
    try:
        spans = [p for p in code.co_positions() if None not in p]
    except AttributeError:  # a Python without positions: nothing is exempted
        return ""
    if not spans:
        return ""
    first = min((p[0], p[2]) for p in spans)
    last = max((p[1], p[3]) for p in spans)
    linecache.checkcache(code.co_filename)
    lines = [linecache.getline(code.co_filename, n) for n in range(first[0], last[0] + 1)]  # type: ignore[arg-type, operator]
    if not lines or not lines[-1]:
        return ""
    lines[-1] = lines[-1][:last[1]]  # columns count UTF-8 bytes; the reviewed source is ASCII
    lines[0] = lines[0][first[1]:]
    return "".join("".join(lines).split())


def view_of(frame: FrameType | None, environ: object) -> bool:
    """Whether `frame` is a mapping view's `__iter__` over `environ` itself."""
    return (frame is not None and frame.f_code.co_filename.endswith(_VIEWS) and frame.f_code.co_name == "__iter__"
            and getattr(frame.f_locals.get("self"), "_mapping", None) is environ)


def _prefix_of(frame: FrameType | None) -> str | None:
    """The prefix the reviewed filter running at `frame` keeps; None where `frame` is no reviewed filter."""
    if frame is None:
        return None
    code = frame.f_code
    for site in FILTERS:
        if code.co_filename.endswith(os.sep + site.path) and getattr(code, "co_qualname", "") == site.qualname \
                and _source(code) == site.source:
            prefix = frame.f_locals.get(site.prefix_local)
            if isinstance(prefix, str) and prefix:
                return prefix
    return None


def kept(frame: FrameType | None, environ: object, watched: frozenset[str]) -> frozenset[str] | None:
    """For an iteration of `environ` whose caller is `frame` (or a value fetched for one): None where it is no
    reviewed prefix filter (a read of everything); else the watched names it keeps, those under its prefix."""
    if view_of(frame, environ):
        frame = frame.f_back if frame is not None else None
    prefix = _prefix_of(frame)
    if prefix is None:
        return None
    return frozenset(n for n in watched if n.startswith(prefix))

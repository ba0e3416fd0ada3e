"""Which cells and modes a `--select` (or a session's posargs) chooses: by cell, mode session or tag.

Planning, not running: calibrate chooses its cells the same way a sweep does, so the rule has one owner
below both of them.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..util.errors import UserError
from .cells import Cell


class SelectionError(UserError):
    """A --select that matches nothing; the message lists what exists."""



def select(cells: Sequence[Cell], selectors: Sequence[str]) -> list[tuple[Cell, tuple[str, ...]]]:
    """Cells and modes chosen by cell name, mode session name, or tag (a mode, an id of python/ort/torch/libs)."""
    if not selectors:
        return [(c, c.modes) for c in cells]
    chosen: dict[str, tuple[Cell, set[str]]] = {}
    for sel in selectors:
        hits = 0
        for c in cells:
            tags = {c.python, c.ort.id, c.torch.id, c.libs.id, "cells"}
            modes = ({m for m in c.modes if sel in (c.name, c.mode_session(m))} or
                     (set(c.modes) if sel in tags else {m for m in c.modes if m == sel}))
            if modes:
                hits += 1
                chosen.setdefault(c.name, (c, set()))[1].update(modes)
        if not hits:
            names = ", ".join(c.name for c in cells)
            raise SelectionError(f"--select {sel!r} matches no cell, mode session or tag; cells: {names}")
    return [(c, tuple(m for m in c.modes if m in modes)) for c, modes in chosen.values()]

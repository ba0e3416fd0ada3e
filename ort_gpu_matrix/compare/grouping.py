"""Changes grouped for a person: by kind, then by transition, with the cells, modes and tests under each.

A forced MATH fallback across a release sweep is 380 rows flat, and one change: 49 tests moved
CUDNN_FLASH_ATTENTION -> MATH in every cell. A group is one line that says so ("tier
CUDNN_FLASH_ATTENTION -> MATH: 49 test(s), 380 row(s), in 4 cell(s) x 2 mode(s)"), with its tests
listed under it, shortened by the prefix they share. sweep.json keeps every row; this is for reading.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .changes import REGRESSION_KINDS, Change, show


@dataclass
class ChangeGroup:
    """The changes of one kind and one transition (before -> after), with where they happened."""

    kind: str
    before: str
    after: str
    changes: list[Change] = field(default_factory=list)
    cells: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    tests: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # test -> (cell, mode) where it changed
    places: list[tuple[str, str]] = field(default_factory=list)  # (cell, mode) rows without a test
    # every (cell, mode) where one of its tests changed, kept as tests are added: asked once per listed test, a
    # set built from `tests` each time made a report of 20,000 rows take a minute
    tested_in: set[tuple[str, str]] = field(default_factory=set, repr=False)

    @property
    def rows(self) -> int:
        return len(self.changes)

    @property
    def transition(self) -> str:
        return f"{self.before} → {self.after}"

    def headline(self) -> str:
        what = f"{len(self.tests)} test(s), {self.rows} row(s)" if self.tests else f"{self.rows} row(s)"
        return (f"{self.kind} {self.transition}: {what} in {len(self.cells)} cell(s) x {len(self.modes)} mode(s) "
                f"({', '.join(self.modes)})")

    def everywhere(self, test: str) -> bool:
        """The test changed in every (cell, mode) of the group: listing where would add nothing."""
        return len(self.tests[test]) == len(self.tested_in)


# causes before consequences: a tier or library change usually explains the test and verdict changes below it
SHOWN_FIRST = ("tier", "teeth", "library", "verdict", "test", "count", "flaky")


def group(changes: Sequence[Change]) -> list[ChangeGroup]:
    """Groups by kind (SHOWN_FIRST, then the rest), then by size, largest first."""
    found: dict[tuple[str, str, str], ChangeGroup] = {}
    for c in changes:
        before, after = show(c.before), show(c.after)
        key_test = c.test if c.kind in ("count", "library") else None  # there `test` names the counter or the key
        kind = f"{c.kind} {key_test}" if key_test else c.check  # a per-op ep change: grouped by its op (`ep Relu`)
        g = found.setdefault((kind, before, after), ChangeGroup(kind, before, after))
        g.changes.append(c)
        if c.cell not in g.cells:
            g.cells.append(c.cell)
        if c.mode and c.mode not in g.modes:
            g.modes.append(c.mode)
        if c.test and not key_test:
            g.tests.setdefault(c.test, []).append((c.cell, c.mode or ""))
            g.tested_in.add((c.cell, c.mode or ""))
        else:
            g.places.append((c.cell, c.mode or ""))
    order = {k: i for i, k in enumerate(dict.fromkeys((*SHOWN_FIRST, *REGRESSION_KINDS)))}
    return sorted(found.values(), key=lambda g: (order.get(g.kind.split()[0], 99), -g.rows, g.kind, g.transition))


def shorten(names: Sequence[str]) -> tuple[str, list[str]]:
    """The prefix every name shares, cut at a `::` or `/`, and what is left of each name.

    A prefix that would leave a name empty is not taken.
    """
    if len(names) < 2:
        return "", list(names)
    first, last = min(names), max(names)
    i = 0
    while i < min(len(first), len(last)) and first[i] == last[i]:
        i += 1
    common = first[:i]
    cut = max(common.rfind("::") + 2 if "::" in common else 0, common.rfind("/") + 1)
    prefix = common[:cut]
    if not prefix or any(len(n) == len(prefix) for n in names):
        return "", list(names)
    return prefix, [n[len(prefix):] for n in names]

"""An expect file as TOML text: the tables `nox -s calibrate` writes and a suite's `expect_file` loads.

Written by hand rather than through a TOML library, so that the file reads as a reviewer wants it:
a header that says where it came from, one rule per line, and a comment beside each skip pattern
and count saying which cells showed it (allowed_skips is a list of plain regexes in the model, so
its provenance can only be a comment). Every string is escaped here, once: node ids and failure
messages are untrusted text, and a quote, a backslash or a control character in one must neither
break the file nor change what it says.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .config.model import Observation, Rule, TierRule

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _is_surrogate(ch: str) -> bool:
    return 0xD800 <= ord(ch) <= 0xDFFF


def string(text: str) -> str:
    """A TOML basic string that reads back as `text` (a lone surrogate, which no UTF-8 file can hold,
    becomes U+FFFD: only free text such as a reason can hold one, and regexes() below avoids it)."""
    out = []
    for ch in text:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:  # TOML allows no raw control character but tab
            out.append(f"\\u{ord(ch):04X}")
        elif _is_surrogate(ch):
            out.append("\\uFFFD")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def literal_regex(text: str) -> str:
    """A regex that matches exactly `text`, from start to end, and reads as the text where it can:
    spaces stay spaces, and a lone surrogate is a regex escape rather than a character."""
    escaped = re.escape(text).replace("\\ ", " ")
    return "^" + "".join(f"\\u{ord(c):04x}" if _is_surrogate(c) else c for c in escaped) + "$"


def comment(text: str) -> str:
    """Text for a TOML comment: one line, no control characters."""
    return "".join(" " if ord(c) < 0x20 or ord(c) == 0x7F or _is_surrogate(c) else c for c in text)


@dataclass(frozen=True)
class Skip:
    pattern: str
    note: str  # which cells skipped with it, for the comment beside it


@dataclass(frozen=True)
class Count:
    key: str  # min_passed, min_failures
    value: int
    note: str


@dataclass
class ModeTable:
    """One [expect.<mode>] table, in the order it is written."""

    mode: str
    kept: dict[str, str | int | tuple[str, ...]] = field(default_factory=dict)  # the old file's other keys, as they were
    counts: list[Count] = field(default_factory=list)
    skips: list[Skip] | None = None  # None: the key is not written
    rules: dict[str, list[Rule]] = field(default_factory=dict)  # known_failures, known_toothless -> rules
    tiers: list[TierRule] = field(default_factory=list)  # tier rules (tiercalibrate.py)

    @property
    def empty(self) -> bool:
        return not self.kept and not self.counts and self.skips is None and not self.rules and not self.tiers


def value(v: str | int | tuple[str, ...]) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(string(x) for x in v) + "]"
    return string(v) if isinstance(v, str) else str(v)


def _observed(obs: Sequence[Observation]) -> str:
    items = ", ".join(f"{{ cell = {string(o.cell)}, ort = {string(o.ort)}, date = {string(o.date)} }}" for o in obs)
    return f"[{items}]"


def _rule(rule: Rule) -> str:
    observed = f", observed = {_observed(rule.observed)}" if rule.observed else ""
    return f"    {{ test = {string(rule.test)}, reason = {string(rule.reason)}{observed} }},"


def _tier_rule(rule: TierRule) -> str:
    observed = f", observed = {_observed(rule.observed)}" if rule.observed else ""
    reason = f", reason = {string(rule.reason)}" if rule.reason else ""
    return f"    {{ test = {string(rule.test)}, only = {value(rule.only)}{reason}{observed} }},"


def render(header: Sequence[str], tables: Sequence[ModeTable]) -> str:
    lines = [f"# {comment(h)}" if h else "#" for h in header]
    for t in tables:
        if t.empty:
            continue
        lines += ["", f"[expect.{t.mode}]"]
        lines += [f"{k} = {value(v)}" for k, v in t.kept.items()]
        lines += [f"{c.key} = {c.value}  # {comment(c.note)}" for c in t.counts]
        if t.skips is not None:
            lines.append("allowed_skips = [")
            lines += [f"    {string(s.pattern)},  # {comment(s.note)}" for s in t.skips]
            lines.append("]")
        for key, rules in t.rules.items():
            lines.append(f"{key} = [")
            lines += [_rule(r) for r in rules]
            lines.append("]")
        if t.tiers:
            lines.append("tiers = [")
            lines += [_tier_rule(r) for r in t.tiers]
            lines.append("]")
    return "\n".join(lines) + "\n"

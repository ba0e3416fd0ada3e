"""An expect file as TOML text: the tables `nox -s calibrate` writes and a suite's `expect_file` loads.

Written by hand rather than through a TOML library, so that the file reads as a reviewer wants it:
a header that says where it came from, one rule per line, and a comment beside each skip pattern
and count saying which cells showed it (allowed_skips is a list of plain regexes in the model, so
its provenance can only be a comment). Every string is escaped here, once: node ids and failure
messages are untrusted text, and a quote, a backslash or a control character in one must neither
break the file nor change what it says.

No line is longer than LINE (300) characters, whatever the node ids and messages: a rule that does
not fit on one line makes its key a list of `[[expect.<mode>.<key>]]` tables, one field a line, and
a string that does not fit is a multi-line string continued with a backslash at each line's end
(which TOML joins back, without the breaks). Reasons are the failure's first line, cut to REASON
characters (`short`); the full message stays in the run's result. Rules only a person writes (allowed_fallbacks,
allowed_cpu_ops) are never calibrated, but a file calibrate rewrites keeps them, written back as they were read.
"""
from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

from .model import CpuOpsRule, CudaOpsRule, CudaRunsRule, FallbackRule, FlakyRule, Observation, Rule, TierRule

LINE = 300  # no line of an expect file is longer
REASON = 200  # a rule's reason: the failure's first line, cut to this
PIECE = 100  # characters of a long string per continued line

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


def short(text: str, limit: int = REASON) -> str:
    """A reason as a rule keeps it: the first line, cut to `limit` characters (the full text is in the result)."""
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _units(text: str) -> list[str]:
    """`text` as the escaped pieces string() writes, one per character, so a split never halves an escape."""
    return [string(ch)[1:-1] for ch in text]


def long_string(text: str, indent: str, room: int) -> str:
    """string(text) when it fits in `room`; else a multi-line basic string, each line ending in a backslash.
    A line never begins with a space: TOML's line-ending backslash would drop it."""
    plain = string(text)
    if len(plain) <= room:
        return plain
    lines: list[str] = []
    current = ""
    for unit in _units(text):
        if len(current) >= PIECE and not unit.startswith(" "):
            lines.append(current)
            current = ""
        current += unit
    lines.append(current)
    body = "\\\n".join(indent + line for line in lines)
    return '"""\\\n' + body + '"""'


def literal_regex(text: str) -> str:
    """A regex that matches exactly `text`, from start to end, and reads as the text where it can:
    spaces stay spaces, and a lone surrogate is a regex escape rather than a character."""
    escaped = re.escape(text).replace("\\ ", " ")
    return "^" + "".join(f"\\u{ord(c):04x}" if _is_surrogate(c) else c for c in escaped) + "$"


def comment(text: str) -> str:
    """Text for a TOML comment: one line, no control characters."""
    return "".join(" " if ord(c) < 0x20 or ord(c) == 0x7F or _is_surrogate(c) else c for c in text)


AnyRule = Rule | FlakyRule | TierRule | CudaRunsRule | CudaOpsRule | CpuOpsRule | FallbackRule
KeptRule = FallbackRule | CpuOpsRule  # rules only a person writes, which calibrate keeps from the old file as they were
# each rule kind's fields in the order they are written, and those written even when empty
_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {
    Rule: (("test", "reason", "observed"), ("test", "reason")),
    FlakyRule: (("test", "outcomes", "tiers", "reason", "runs", "observed"), ("test", "outcomes", "reason")),
    TierRule: (("test", "only", "reason", "observed"), ("test", "only", "reason")),
    CudaRunsRule: (("test", "min", "reason", "observed"), ("test", "min", "reason")),
    CudaOpsRule: (("test", "ops", "reason", "observed"), ("test", "ops", "reason")),
    CpuOpsRule: (("test", "ops", "reason", "observed"), ("test", "ops", "reason")),
    FallbackRule: (("test", "error", "reason", "observed"), ("test", "error", "reason")),
}


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
    kept_rules: dict[str, tuple[KeptRule, ...]] = field(default_factory=dict)  # its rules only a person writes
    counts: list[Count] = field(default_factory=list)
    skips: list[Skip] | None = None  # None: the key is not written
    rules: dict[str, list[Rule]] = field(default_factory=dict)  # known_failures, known_toothless -> rules
    tiers: list[TierRule] = field(default_factory=list)  # tier rules (calibrate/tiers.py)
    flaky: list[FlakyRule] = field(default_factory=list)  # known_flaky
    cuda_runs: list[CudaRunsRule] = field(default_factory=list)  # cuda_runs rules (calibrate/eps.py)
    cuda_ops: list[CudaOpsRule] = field(default_factory=list)  # cuda_ops rules (calibrate/ops.py)

    @property
    def empty(self) -> bool:
        return (not self.kept and not self.kept_rules and not self.counts and self.skips is None and not self.rules
                and not self.tiers and not self.flaky and not self.cuda_runs and not self.cuda_ops)


def value(v: str | int | tuple[str, ...], room: int = LINE) -> str:
    if isinstance(v, tuple):
        one = "[" + ", ".join(string(x) for x in v) + "]"
        if len(one) <= room:
            return one
        return "[\n" + "".join(f"    {long_string(x, '    ', LINE - 6)},\n" for x in v) + "]"
    return long_string(v, "", room) if isinstance(v, str) else str(v)


def _observed(obs: Sequence[Observation]) -> str:
    items = ", ".join(f"{{ cell = {string(o.cell)}, ort = {string(o.ort)}, date = {string(o.date)} }}" for o in obs)
    return f"[{items}]"


def _subtests(rule: AnyRule) -> str:
    return ", subtests = true" if rule.subtests else ""


def _rule(rule: Rule) -> str:
    observed = f", observed = {_observed(rule.observed)}" if rule.observed else ""
    return f"    {{ test = {string(rule.test)}{_subtests(rule)}, reason = {string(rule.reason)}{observed} }},"


def _tier_rule(rule: TierRule) -> str:
    observed = f", observed = {_observed(rule.observed)}" if rule.observed else ""
    reason = f", reason = {string(rule.reason)}" if rule.reason else ""
    return f"    {{ test = {string(rule.test)}{_subtests(rule)}, only = {value(rule.only)}{reason}{observed} }},"


def _cuda_rule(rule: CudaRunsRule) -> str:
    observed = f", observed = {_observed(rule.observed)}" if rule.observed else ""
    reason = f", reason = {string(rule.reason)}" if rule.reason else ""
    return f"    {{ test = {string(rule.test)}{_subtests(rule)}, min = {rule.min}{reason}{observed} }},"


def _one_line(rule: CudaOpsRule | KeptRule) -> str:
    """A rule on one line, each field it sets (and each one always written) in its kind's order."""
    names, always = _FIELDS[type(rule)]
    parts = []
    for name in names:
        v = getattr(rule, name)
        if name in always or v:
            shown = _observed(v) if name == "observed" else \
                "[" + ", ".join(string(x) for x in v) + "]" if isinstance(v, tuple) else string(v)
            parts.append(f"{name} = {shown}")
        if name == "test" and rule.subtests:
            parts.append("subtests = true")
    return "    { " + ", ".join(parts) + " },"


def _field(name: str, v: str | int | tuple[str, ...] | tuple[Observation, ...]) -> list[str]:
    room = LINE - len(name) - 3
    if isinstance(v, tuple) and v and isinstance(v[0], Observation):
        return [f"{name} = ["] + [f"    {_observed([o])[1:-1]}," for o in v] + ["]"]
    return f"{name} = {value(v, room)}".split("\n")  # type: ignore[arg-type]


def _table(mode: str, key: str, rule: AnyRule) -> list[str]:
    """One rule as a [[expect.<mode>.<key>]] table: one field a line, long strings continued."""
    out = ["", f"[[expect.{mode}.{key}]]"]
    fields, always = _FIELDS[type(rule)]
    for name in fields:
        v = getattr(rule, name)
        if name in always or v:
            out += _field(name, v)
        if name == "test" and rule.subtests:
            out.append("subtests = true")
    return out


def _flaky(rule: FlakyRule) -> str:
    parts = [f"test = {string(rule.test)}", *(["subtests = true"] if rule.subtests else []),
             f"outcomes = {value(rule.outcomes)}"]
    if rule.tiers:
        parts.append(f"tiers = {value(rule.tiers)}")
    parts.append(f"reason = {string(rule.reason)}")
    if rule.runs:
        parts.append(f"runs = {value(rule.runs)}")
    if rule.observed:
        parts.append(f"observed = {_observed(rule.observed)}")
    return "    { " + ", ".join(parts) + " },"


def _comments(text: str) -> list[str]:
    return [f"# {line}" for line in textwrap.wrap(comment(text), LINE - 2, break_long_words=True)] or ["#"]


def render(header: Sequence[str], tables: Sequence[ModeTable]) -> str:
    lines = [line for h in header for line in (_comments(h) if h else ["#"])]
    for t in tables:
        if t.empty:
            continue
        lines += ["", f"[expect.{t.mode}]"]
        lines += [line for k, v in t.kept.items() for line in f"{k} = {value(v, LINE - len(k) - 3)}".split("\n")]
        lines += [f"{c.key} = {c.value}  # {_note(c.note, 20)}" for c in t.counts]
        if t.skips is not None:
            lines.append("allowed_skips = [")
            for sk in t.skips:
                # room for the pattern beside its comma and the shortest note (20, _note): else a pattern
                # of about 270 characters kept on its line pushed the line past LINE
                pattern = long_string(sk.pattern, "    ", LINE - 29)
                lines += f"    {pattern},  # {_note(sk.note, len(pattern.splitlines()[-1]) + 9)}".split("\n")
            lines.append("]")
        apart: list[tuple[str, Sequence[AnyRule]]] = []
        every: list[tuple[str, Sequence[AnyRule], list[str]]] = [
            *((key, kept, [_one_line(r) for r in kept]) for key, kept in t.kept_rules.items()),
            *((key, rules, [_rule(r) for r in rules]) for key, rules in t.rules.items()),
            *([("known_flaky", t.flaky, [_flaky(r) for r in t.flaky])] if t.flaky else []),
            *([("tiers", t.tiers, [_tier_rule(r) for r in t.tiers])] if t.tiers else []),
            *([("cuda_runs", t.cuda_runs, [_cuda_rule(r) for r in t.cuda_runs])] if t.cuda_runs else []),
            *([("cuda_ops", t.cuda_ops, [_one_line(r) for r in t.cuda_ops])] if t.cuda_ops else [])]
        for key, rules, one_line in every:
            if all(len(x) <= LINE for x in one_line):
                lines += [f"{key} = [", *one_line, "]"]
            else:
                apart.append((key, rules))  # tables come after every plain key of [expect.<mode>]
        for key, rules in apart:
            for r in rules:
                lines += _table(t.mode, key, r)
    return "\n".join(lines) + "\n"


def _note(text: str, used: int) -> str:
    """A comment beside a value, cut so that its line stays within LINE."""
    room = max(LINE - used - 4, 20)
    note = comment(text)
    return note if len(note) <= room else note[:room - 1] + "…"

"""Untrusted text (test ids, reasons, log lines, paths) made safe for where it is shown.

Test ids and failure messages come from the code under test. In a terminal an ESC, OSC or `\\r` in
a test name could retitle the window or rewrite the line above; in Markdown a `|` splits a table
row and a `[`, a URL or an address makes a live link. Each form gets its own escaper here, and
every renderer uses them instead of its own replace() chain.
"""
from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def control(text: object) -> str:
    """Control characters as \\xNN: C0 (ESC, BEL, \\r, \\n, \\t), DEL and C1 (the 8-bit CSI and OSC)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def term(text: object) -> str:
    """For a terminal line."""
    return control(text)


_MD_PUNCT = re.compile(r"([\\`*_{}\[\]#+!~|])")


def md(text: object) -> str:
    """For Markdown, table cells included: one line, no column break, no code span, no link, no raw HTML.

    Backslash escapes stop emphasis, code spans and `[..](..)` links; `<`, `>` and `&` become entities
    (no raw HTML, no `<autolink>`); `:` before `//`, the dot of `www.` and `@` become numeric entities,
    which GitHub's bare-URL and e-mail autolinking never sees as such.
    """
    out = control(str(text))
    out = out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = _MD_PUNCT.sub(r"\\\1", out)
    out = re.sub(r":(?=//)", "&#58;", out)
    out = re.sub(r"(?i)(www)\.", r"\1&#46;", out)
    return out.replace("@", "&#64;")

"""Untrusted text (test ids, reasons, log lines, paths) made safe for where it is shown.

Test ids and failure messages come from the code under test. In a terminal an ESC, OSC or `\\r` in
a test name could retitle the window or rewrite the line above; in Markdown a `|` splits a table
row and a `[`, a URL or an address makes a live link. Each form gets its own escaper here, and
every renderer uses them instead of its own replace() chain.
"""
from __future__ import annotations

import re


def _code(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def term(text: object) -> str:
    """For a terminal line: every character Python does not call printable, as \\xNN, \\uNNNN or \\UNNNNNNNN.

    Beyond the control characters that covers what reorders or hides text without a byte of ESC:
    bidi overrides (U+202E turns `passed` around), zero-width characters (U+200B splits a name that
    looks whole) and the line and paragraph separators (U+2028, which some terminals break on).
    Letters of any script stay as they are; only the plain space is kept of the spaces.
    """
    return "".join(c if c.isprintable() else _code(c) for c in str(text))


_MD_PUNCT = re.compile(r"([\\`*_{}\[\]#+!~|])")


def md(text: object) -> str:
    """For Markdown, table cells included: one line, no column break, no code span, no link, no raw HTML.

    Backslash escapes stop emphasis, code spans and `[..](..)` links; `<`, `>` and `&` become entities
    (no raw HTML, no `<autolink>`); `:` before `//`, the dot of `www.` and `@` become numeric entities,
    which GitHub's bare-URL and e-mail autolinking never sees as such.
    """
    out = term(text)  # what is hidden or reordered in a terminal is in a rendered page too
    out = out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = _MD_PUNCT.sub(r"\\\1", out)
    out = re.sub(r":(?=//)", "&#58;", out)
    out = re.sub(r"(?i)(www)\.", r"\1&#46;", out)
    return out.replace("@", "&#64;")


def xml(text: object, lines: bool = False) -> str:
    """For XML (the JUnit file): what XML 1.0 cannot hold (NUL, ESC, a lone surrogate) and what hides or reorders
    text, as term() writes it; `lines` keeps line breaks and tabs, for a failure's body. The writer (ElementTree)
    escapes the markup (`<`, `&`, quotes): a character it would write raw and a parser refuses, it never sees."""
    if not lines:
        return term(text)
    return "\n".join("\t".join(term(part) for part in line.split("\t")) for line in str(text).split("\n"))

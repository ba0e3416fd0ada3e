"""Colour for verdict words, as nox decides it: --forcecolor / --nocolor, else NO_COLOR and whether stdout is a tty.

The sessions run inside nox's own process, so its command line is this process's argv.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence

_CODES = {"PASS": "32", "OK": "32", "FAIL": "31", "FAILED": "31", "ERROR": "31"}


def enabled(argv: Sequence[str] | None = None, environ: dict[str, str] | None = None, tty: bool | None = None) -> bool:
    argv = sys.argv if argv is None else argv
    environ = dict(os.environ) if environ is None else environ
    if "--nocolor" in argv or "--no-color" in argv:
        return False
    if "--forcecolor" in argv or "--force-color" in argv:
        return True
    if environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty() if tty is None else tty


def verdict(word: str, on: bool) -> str:
    """`word` in green or red when colour is on; unchanged otherwise (and for words it does not know)."""
    code = _CODES.get(word)
    return f"\033[{code}m{word}\033[0m" if on and code else word

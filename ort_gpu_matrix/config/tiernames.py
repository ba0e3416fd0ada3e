"""What a tier name in a tier rule may be: a name as ORT prints it after `SdpaKernel=`, from an open list.

The probe records any name of capitals, digits and `_` (XQA, a tier a later ORT adds), so a rule may
name any such name; only a name the probe could never record is refused, because a rule naming it
could never be met. A known name written in another case is the likely slip, and is named.
"""
from __future__ import annotations

import difflib
import re

from .kernels import KNOWN
from .model import TIER_PATTERN

XQA = "XQA"  # seen on the H200 in ORT's GQA tests (issue 25): not an sdpa_kernel bit, still a tier


def tier_name_problem(name: str) -> tuple[str, str] | None:
    """(problem, fix) for a tier name a rule cannot use, else None."""
    if re.fullmatch(TIER_PATTERN, name):
        return None
    known = (*KNOWN, XQA)
    near = [k for k in known if k.casefold() == name.strip().casefold()] or \
        difflib.get_close_matches(name.upper().replace(" ", "_"), known, n=1)
    shown = repr(name)
    if near:
        return (f"{shown} is not a tier name as ORT prints it (did you mean `{near[0]}`?)", f'write "{near[0]}"')
    return (f"{shown} is not a tier name as ORT prints it (capitals, digits and _, as after SdpaKernel=)",
            f"use a name from the report's tier table, e.g. {', '.join(known)}")

"""pytest's junit XML, read as a second witness of the counts.

pytest writes it from its own reports, apart from the probe, so a probe report
that was edited, or that missed a crashed worker, disagrees with it. Parsed with
defusedxml: the file is written inside the test process, so it is untrusted.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from defusedxml import ElementTree


@dataclass(frozen=True)
class JunitCounts:
    failures: int
    errors: int
    skipped: int  # pytest counts xfails as skipped here


class JunitError(Exception):
    """The file is missing or unreadable; the message says which."""


def read(path: Path) -> JunitCounts:
    try:
        root = ElementTree.parse(str(path)).getroot()
        if root is None:
            raise ValueError("empty document")
    except FileNotFoundError:
        raise JunitError(f"pytest wrote no junit file ({path.name})") from None
    except Exception as exc:  # defusedxml raises its own types, and ParseError
        raise JunitError(f"the junit file cannot be read ({type(exc).__name__}: {exc})") from None
    totals = {"failures": 0, "errors": 0, "skipped": 0}
    for suite in root.iter("testsuite"):
        for name in totals:
            try:
                totals[name] += int(suite.get(name, "0"))
            except ValueError:
                raise JunitError(f"the junit file's {name}={suite.get(name)!r} is not a number") from None
    return JunitCounts(**totals)

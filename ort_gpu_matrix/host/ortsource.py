"""Which ORT release a suite's tests come from, and whether the wheel under test is that release.

ORT's own tests from the main branch exercise features newer than a released wheel, and fail for it:
a skew between tests and wheel, not a regression. So a run records the source tree its tests lie
in (VERSION_NUMBER at an ORT checkout's root, and the commit when it is a git checkout) beside the
version the wheel reports in the test process, and a differing major.minor is a warning.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

VERSION_FILE = "VERSION_NUMBER"
_HEX = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class SourceTree:
    """An ORT checkout: its root, the release in its VERSION_NUMBER, and its commit (short) if a git checkout."""

    path: str
    version: str
    commit: str | None = None

    def label(self) -> str:
        return f"{self.version} ({self.commit})" if self.commit else self.version


def find(start: Path) -> SourceTree | None:
    """The ORT checkout `start` lies in: the nearest dir up that holds VERSION_NUMBER and an onnxruntime/ dir."""
    for d in (start, *start.parents):
        if (d / VERSION_FILE).is_file() and (d / "onnxruntime").is_dir():
            return read(d)
    return None


def read(root: Path) -> SourceTree | None:
    try:
        version = (root / VERSION_FILE).read_text(errors="replace").strip()
    except OSError:
        return None
    return SourceTree(str(root), version, commit(root)) if version else None


def commit(root: Path) -> str | None:
    """`git rev-parse --short HEAD` (no shell), else .git/HEAD read by hand (git missing, or it
    refuses a checkout another user owns); None when `root` is no git checkout."""
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10, stdin=subprocess.DEVNULL)
        if out.returncode == 0 and _HEX.fullmatch(out.stdout.strip()):
            return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return _head(root / ".git")


def _head(git: Path) -> str | None:
    try:
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            loose = git / ref
            if loose.is_file():
                head = loose.read_text().strip()
            else:
                packed = (git / "packed-refs").read_text().splitlines() if (git / "packed-refs").is_file() else []
                head = next((line.split()[0] for line in packed if line.endswith(f" {ref}")), "")
    except OSError:
        return None
    return head[:7] if _HEX.fullmatch(head) else None


def _major_minor(version: str) -> tuple[int, ...] | None:
    try:
        return Version(version).release[:2]
    except InvalidVersion:
        return None


def skew(source: SourceTree | None, wheel_version: str | None) -> str | None:
    """`tests from 1.33.0 (abc1234) against wheel 1.31.1` when their major.minor differ, else None."""
    if source is None or not wheel_version:
        return None
    tests, wheel = _major_minor(source.version), _major_minor(wheel_version)
    if tests is None or wheel is None or tests == wheel:
        return None
    return f"tests from {source.label()} against wheel {wheel_version}"

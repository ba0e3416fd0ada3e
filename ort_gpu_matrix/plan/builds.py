"""The ORT builds a bisect walks, in order from the good end to the bad end: versions on the index, every
release between two ends, or wheel files.

A release engineer names builds the way the index names them, so a version is checked against what the
cell's own index holds before anything is built: a typo must cost one line, not an hour of venvs. The
index is the cell's: its wheelhouse dirs (wheel file names), and unless the matrix is offline its index URL
(PEP 691 JSON, else the PEP 503 page), as pip would see it. Order is the user's to get right, so builds out of
order are refused rather than sorted: a bisect between ends given backwards answers another question.
"""
from __future__ import annotations

import dataclasses
import json
import re
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..config.model import ID_PATTERN, Ort
from ..util.errors import UserError

PYPI = "https://pypi.org/simple/"
SHOWN = 8  # versions named in an error


class BuildsError(UserError):
    """Builds that cannot be walked: the message is one line that names the input and the fix."""


@dataclass(frozen=True)
class Build:
    """One ORT build: a version from the index (`requirement`), or a wheel file."""

    version: str
    requirement: str | None = None
    wheel: str | None = None

    def ort(self, base: Ort) -> Ort:
        """The cell's [ort.<id>] with this build in it; its own id, so each build gets a venv of its own."""
        slug = re.sub(r"[^A-Za-z0-9_.]", "_", self.version)
        assert re.fullmatch(ID_PATTERN, slug)
        return dataclasses.replace(base, id=f"{base.id}.v{slug}", requirement=self.requirement, wheel=self.wheel)


def dist_of(ort: Ort) -> str:
    """The distribution the cell installs (onnxruntime-gpu), from its requirement or its wheel's name."""
    if ort.requirement:
        try:
            return canonicalize_name(Requirement(ort.requirement).name)
        except InvalidRequirement as exc:
            raise BuildsError(f"[ort.{ort.id}] requirement {ort.requirement!r}: {exc}") from None
    if ort.wheel:
        return str(_wheel(Path(ort.wheel).name)[0])
    raise BuildsError(f"[ort.{ort.id}] names neither a requirement nor a wheel: nothing to bisect over")


def _wheel(name: str) -> tuple[str, Version]:
    try:
        dist, version, _, _ = parse_wheel_filename(name)
    except (InvalidWheelFilename, InvalidVersion) as exc:
        raise BuildsError(f"{name}: not a wheel file name ({exc})") from None
    return str(dist), version


Fetch = Callable[[str], tuple[str, str]]  # url -> (content type, body)


def _fetch(url: str) -> tuple[str, str]:
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - the index the matrix names
        return resp.headers.get("Content-Type", ""), resp.read().decode("utf-8", "replace")


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self._in = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in = tag == "a"

    def handle_data(self, data: str) -> None:
        if self._in and data.strip():
            self.names.append(data.strip())

    def handle_endtag(self, tag: str) -> None:
        self._in = False


def index_versions(dist: str, index_url: str, fetch: Fetch = _fetch) -> set[Version]:
    """The versions of `dist` the index has wheels of (PEP 691 JSON, or the PEP 503 page)."""
    url = index_url.rstrip("/") + f"/{dist}/"
    try:
        kind, body = fetch(url)
    except OSError as exc:
        raise BuildsError(f"{url}: cannot list {dist}'s releases ({exc}); fix: check the index, or give wheel files "
                          "(or set MATRIX_OFFLINE=1 with a wheelhouse that holds them)") from None
    if "json" in kind:
        names = [f.get("filename", "") for f in json.loads(body).get("files", [])]
    else:
        parser = _Anchors()
        parser.feed(body)
        names = parser.names
    return {_wheel(n)[1] for n in names if n.endswith(".whl") and canonicalize_name(_wheel(n)[0]) == dist}


def house_versions(dist: str, dirs: Sequence[str]) -> dict[Version, str]:
    """The versions of `dist` with a wheel in the wheelhouse dirs, each with one of its files."""
    out: dict[Version, str] = {}
    for d in dirs:
        for f in sorted(Path(d).glob("*.whl")) if Path(d).is_dir() else []:
            try:
                name, version = _wheel(f.name)
            except BuildsError:
                continue
            if canonicalize_name(name) == dist:
                out.setdefault(version, str(f))
    return out


@dataclass(frozen=True)
class Index:
    """Where a cell's builds come from: its wheelhouse, and its index unless offline."""

    dist: str
    wheelhouse: tuple[str, ...]
    index_url: str | None  # None: offline
    fetch: Fetch = _fetch

    def versions(self) -> set[Version]:
        found = set(house_versions(self.dist, self.wheelhouse))
        if self.index_url is not None:
            found |= index_versions(self.dist, self.index_url, self.fetch)
        return found

    def where(self) -> str:
        return " and ".join(([f"the wheelhouse ({', '.join(self.wheelhouse)})"] if self.wheelhouse else [])
                            + ([self.index_url] if self.index_url else [])) or "no index (offline, no wheelhouse)"


def _shown(versions: Sequence[Version]) -> str:
    listed = ", ".join(map(str, versions[-SHOWN:]))
    return (f"… {listed}" if len(versions) > SHOWN else listed) or "none"


def _ordered(versions: Sequence[Version], given: str) -> None:
    for a, b in zip(versions, versions[1:], strict=False):
        if not a < b:
            fixed = " ".join(map(str, sorted(set(versions))))
            raise BuildsError(f"{given}: out of order at {a} then {b}: builds go from the good end to the bad end, "
                              f"oldest first; fix: {fixed}")


def from_versions(texts: Sequence[str], index: Index) -> list[Build]:
    """--versions: each must be a release the index has; at least two, oldest first."""
    given = "--versions " + " ".join(texts)
    versions = []
    for t in texts:
        try:
            versions.append(Version(t))
        except InvalidVersion:
            raise BuildsError(f"{given}: {t!r} is not a version; fix: write versions as the index does, e.g. "
                              "1.31.1") from None
    if len(versions) < 2:
        raise BuildsError(f"{given}: a bisect needs two builds at least, the good end and the bad end")
    _ordered(versions, given)
    known = index.versions()
    unknown = [v for v in versions if v not in known]
    if unknown:
        raise BuildsError(f"{given}: {index.dist} {', '.join(map(str, unknown))} is not on {index.where()} (it has "
                          f"{_shown(sorted(known))}); fix: name released versions, or give wheel files")
    return [_release(index, v) for v in versions]


def between(lo: str, hi: str, index: Index) -> list[Build]:
    """--between A B: A, B and every final release the index has between them, in order."""
    given = f"--between {lo} {hi}"
    try:
        a, b = Version(lo), Version(hi)
    except InvalidVersion as exc:
        raise BuildsError(f"{given}: {exc}; fix: write versions as the index does, e.g. 1.31.1") from None
    _ordered([a, b], given)
    known = index.versions()
    for end in (a, b):
        if end not in known:
            raise BuildsError(f"{given}: {index.dist} {end} is not on {index.where()} (it has "
                              f"{_shown(sorted(known))}); fix: name released versions")
    chosen = sorted(v for v in known if a <= v <= b and (v in (a, b) or not (v.is_prerelease or v.is_devrelease)))
    return [_release(index, v) for v in chosen]


def _release(index: Index, version: Version) -> Build:
    """A release by requirement: pip finds it on the index, or offline in the wheelhouse (--find-links)."""
    return Build(str(version), requirement=f"{index.dist}=={version}")


def from_wheels(paths: Sequence[Path], dist: str) -> list[Build]:
    """Wheel files, or a directory of them (nightlies): the cell's distribution only, in version order."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += [f for f in sorted(p.glob("*.whl")) if canonicalize_name(_wheel(f.name)[0]) == dist]
        elif p.is_file() and p.suffix == ".whl":
            name = canonicalize_name(_wheel(p.name)[0])
            if name != dist:
                raise BuildsError(f"{p}: a wheel of {name}, not of the cell's {dist}; fix: give {dist} wheels")
            files.append(p)
        else:
            raise BuildsError(f"{p}: no such wheel file or directory; fix: give .whl files or a dir that holds them")
    by_version = {_wheel(f.name)[1]: f for f in files}
    if len(by_version) < len(files):
        raise BuildsError(f"{' '.join(map(str, paths))}: two wheels of one version; fix: give one wheel per build")
    if len(by_version) < 2:
        raise BuildsError(f"{' '.join(map(str, paths))}: {len(by_version)} {dist} wheel(s): a bisect needs two "
                          "builds at least, the good end and the bad end")
    return [Build(str(v), wheel=str(by_version[v].resolve())) for v in sorted(by_version)]

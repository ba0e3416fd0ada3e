"""The require_cudnn census a teeth run reads: from this process, from a --gpus parent's hand-over, or from the store.

teeth checks its coverage against the require_cudnn census made moments before in the same venv,
passed forward in memory rather than read back from a results dir that another run may have
written. A `--gpus` sweep runs teeth in a child process of its own: its parent names the
require_cudnn run it saw that child's sibling store in this sweep (`census_from_store`), and the
child reads that run's own bundle, never the session's current file. Either way the census counts
only when it came from the same venv fingerprint.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..config.modes import Mode, spec
from ..plan.cells import Cell
from ..store import results
from ..store.results import Result
from ..util.escape import term
from .handoff import HandoffError, wait_ref


def prior_of(earlier: Mapping[str, Result], cell: Cell, mode: str, fingerprint: dict[str, object]) -> Result | None:
    source = spec(mode).coverage_from
    if source is None:
        return None
    prior = earlier.get(cell.mode_session(source.value))
    return prior if prior is not None and prior.venv.fingerprint == fingerprint else None


class Earlier(dict[str, Result]):
    """This process's results that a later mode reads (teeth's census), by session; and `later`: the
    require_cudnn sessions whose census a parent hands over while this process runs (a teeth started early,
    handoff.py), each with the file it comes in."""

    def __init__(self, found: Mapping[str, Result] | None = None, later: Mapping[str, Path] | None = None) -> None:
        super().__init__(found or {})
        self.later = dict(later or {})


def handed_over(args: Sequence[str]) -> dict[str, Path]:
    """`--census-file SESSION=PATH` arguments, by session (a parent's own, so a malformed one is a bug: it says so)."""
    out = {}
    for arg in args:
        session, sep, path = arg.partition("=")
        if not sep or not session or not path:
            raise CensusError(f"--census-file {arg!r}: expected SESSION=PATH (an argument a parent sweep gives)")
        out[session] = Path(path)
    return out


def later_of(earlier: Mapping[str, Result], cell: Cell, mode: str) -> Path | None:
    source = spec(mode).coverage_from
    if source is None or cell.suite.teeth_scope != "cudnn" or not isinstance(earlier, Earlier):
        return None
    return earlier.later.get(cell.mode_session(source.value))


def handed(path: Path, results_dir: Path, cell: Cell, mode: str, fingerprint: dict[str, object],
            log: Callable[[str], None]) -> Result | None:
    """The census the parent handed over, as `prior_of` would have it; None (and why, logged) where there is none."""
    session = cell.mode_session(mode)
    try:
        ref, why = wait_ref(path)  # unbounded: the parent always writes it, and this process dies with the parent
        if ref is None:
            log(f"{session}: no census was handed over: {term(why or '')}")  # read from a file: escaped
            return None
        found = census_from_store(results_dir, ref)
    except (HandoffError, CensusError) as exc:
        log(f"{session}: {exc}")
        return None
    return prior_of({found.session: found}, cell, mode, fingerprint)


class CensusError(Exception):
    """A --census reference that names no require_cudnn run in the results dir; the message says which."""


_RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$")


def census_from_store(results_dir: Path, ref: str) -> Result:
    """`SESSION=RUN_ID`: the require_cudnn run a --gpus parent saw its child store in this sweep, read from that
    run's own bundle. Its venv fingerprint is checked against teeth's own when teeth uses it (`prior_of`)."""
    session, sep, run_id = ref.partition("=")
    if not sep or not _RUN_ID.match(run_id) or not session or "/" in session or session.startswith("."):
        raise CensusError(f"--census {ref!r}: expected SESSION=RUN_ID, e.g. gpu-3.12-x-require_cudnn=20261130T061203Z-3fa2c1d8")
    path = results_dir / "runs" / session / run_id / "result.json"
    try:
        found = results.load(path)
    except results.ResultError as exc:
        raise CensusError(f"the require_cudnn census {ref} cannot be read: {exc}") from None
    if (found.session, found.run_id, found.mode) != (session, run_id, Mode.REQUIRE_CUDNN.value):
        raise CensusError(f"{path} holds {found.session} run {found.run_id} ({found.mode}), not {ref}")
    return found


def censuses(results_dir: Path, refs: Sequence[str], warn: Callable[[str], None]) -> dict[str, Result]:
    """The require_cudnn runs a --gpus parent named (`--census`), by session; one that cannot be read is left out
    with a warning, and the teeth that needed it then says it had no census."""
    found = {}
    for ref in refs:
        try:
            result = census_from_store(results_dir, ref)
        except CensusError as exc:
            warn(str(exc))
            continue
        found[result.session] = result
    return found

"""Where a teeth run's require_cudnn census comes from: this process's results, or a file its parent writes.

teeth checks its coverage against the require_cudnn census made moments before in the same venv,
passed forward rather than read back from a session's current file, which another run may have
written. It reaches a teeth run by one of two ways, and teeth.py's TeethScope decides which, once:
- this process's results (`earlier`): a run made here before it (a cell session, a serial sweep), or
  one a `--gpus` parent named as the child started (`--census SESSION=RUN_ID`, `censuses`): the
  require_cudnn run it saw that child's sibling store in this sweep, read from that run's own bundle;
- a file its parent writes once require_cudnn's child has exited (`--census-file SESSION=PATH`,
  handoff.py), for a scoped teeth started while require_cudnn still ran (earlyteeth.py): `handed`.
Either way the census counts only when it came from the same venv fingerprint (`prior_of`).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..config.modes import Mode, spec
from ..plan.cells import Cell
from ..store import results
from ..store.results import Result
from ..util.errors import UserError
from ..util.escape import term
from ..util.voice import Voice
from .handoff import HandoffError, wait_ref


def prior_of(earlier: Mapping[str, Result], cell: Cell, mode: str, fingerprint: dict[str, object]) -> Result | None:
    """The census `mode` reads among `earlier`: its require_cudnn's result, made in this venv; else None."""
    source = spec(mode).coverage_from
    if source is None:
        return None
    prior = earlier.get(cell.mode_session(source.value))
    return prior if prior is not None and prior.venv.fingerprint == fingerprint else None


def handed_over(args: Sequence[str]) -> dict[str, Path]:
    """`--census-file SESSION=PATH` arguments, by session (a parent's own, so a malformed one is a bug: it says so)."""
    out = {}
    for arg in args:
        session, sep, path = arg.partition("=")
        if not sep or not session or not path:
            raise CensusError(f"--census-file {arg!r}: expected SESSION=PATH (an argument a parent sweep gives)")
        out[session] = Path(path)
    return out


def later_of(files: Mapping[str, Path], cell: Cell, mode: str) -> Path | None:
    """The file a teeth's census is handed over in (`--census-file`), if its parent gave one: whatever its scope,
    a teeth given one waits for it (a teeth that ignored it would run without its census, coverage unchecked)."""
    source = spec(mode).coverage_from
    if source is None:
        return None
    return files.get(cell.mode_session(source.value))


def handed(path: Path, results_dir: Path, cell: Cell, mode: str,
           fingerprint: dict[str, object]) -> tuple[Result | None, str | None]:
    """The census the parent handed over in `path`, as `prior_of` would have it, waited for; or None and why."""
    found, why = handed_run(path, results_dir, Mode.REQUIRE_CUDNN)
    if found is None:
        return None, why
    prior = prior_of({found.session: found}, cell, mode, fingerprint)
    return (prior, None) if prior is not None else (None, f"{found.session} run {found.run_id} ran in another venv")


def handed_run(path: Path, results_dir: Path, mode: Mode) -> tuple[Result | None, str | None]:
    """The run of `mode` a parent handed over in `path` (a teeth's require_cudnn census, or the normal run a
    require_cudnn carries outcomes from), waited for and read from its own bundle; or None and why not."""
    try:
        ref, why = wait_ref(path)  # unbounded: the parent always writes it, and this process dies with the parent
        if ref is None:
            return None, f"none was handed over: {term(why or '')}"  # read from a file: escaped
        return census_from_store(results_dir, ref, mode), None
    except (HandoffError, CensusError) as exc:
        return None, str(exc)


class CensusError(UserError):
    """A --census reference that names no require_cudnn run in the results dir; the message says which."""


_RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$")


def census_from_store(results_dir: Path, ref: str, mode: Mode | None = None) -> Result:
    """`SESSION=RUN_ID`: the run of `mode` a --gpus parent saw its child store in this sweep (require_cudnn for a
    teeth, normal for a require_cudnn that carries), read from that run's own bundle. Its venv fingerprint is
    checked by whoever uses it (`prior_of`, carry.py's `usable`). `mode` None: either of the two."""
    session, sep, run_id = ref.partition("=")
    if not sep or not _RUN_ID.match(run_id) or not session or "/" in session or session.startswith("."):
        raise CensusError(f"--census {ref!r}: expected SESSION=RUN_ID, e.g. gpu-3.12-x-require_cudnn=20261130T061203Z-3fa2c1d8")
    path = results_dir / "runs" / session / run_id / "result.json"
    try:
        found = results.load(path)
    except results.ResultError as exc:
        raise CensusError(f"the require_cudnn census {ref} cannot be read: {exc}") from None
    modes = (mode.value,) if mode is not None else (Mode.NORMAL.value, Mode.REQUIRE_CUDNN.value)
    if (found.session, found.run_id) != (session, run_id) or found.mode not in modes:
        raise CensusError(f"{path} holds {found.session} run {found.run_id} ({found.mode}), not {ref}")
    return found


def censuses(results_dir: Path, refs: Sequence[str], voice: Voice) -> dict[str, Result]:
    """The require_cudnn runs a --gpus parent named (`--census`), by session; one that cannot be read is left out
    with a warning, and the teeth that needed it then says it had no census."""
    found = {}
    for ref in refs:
        try:
            result = census_from_store(results_dir, ref)
        except CensusError as exc:
            voice.warn(str(exc))
            continue
        found[result.session] = result
    return found

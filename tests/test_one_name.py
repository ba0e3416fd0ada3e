"""One name, one idea: no class name is defined in two modules of the engine (or its sessions), and no import
gives one of our classes another name.

Two classes called `Group` or `Seen` make a reader stop at every use and look up which one it is; a class
imported under another name (`Seen as Ran`) makes the same thing read as two. The guard counts the classes a
module defines at its top level (inside a module-level `if` or `try` too): those are the ones other modules
import. A class defined inside a function or another class is reached only through its enclosing name and is
never imported, so a reader meets it only where it is defined (render/live.py's progress columns).

ort_matrix_probe/ is a package of its own, copied into every test venv, and it writes the report the engine
reads. A name it shares with the engine is allowed only when it is listed below: the same record on both
sides of the report file, written by the probe and read by the engine.
"""
import ast
from collections.abc import Iterator
from pathlib import Path

from helpers import REPO

ENGINE = ("ort_gpu_matrix", "sessions")
PROBE = "ort_matrix_probe"

# name -> why the probe and the engine may both define it: one idea, seen from each side of the report file
SHARED_WITH_THE_PROBE = {
    "EpCensus": "which EP served each CUDA-asking test: taken by the probe, judged by the engine (judge/eps.py)",
    "StateChange": "a process-state change a test left behind: the report's entry and the engine's reading of it",
}


def _module(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level(body: list[ast.stmt]) -> Iterator[ast.ClassDef]:
    """The classes a module body defines, looking into its `if`, `try` and `with` blocks but not into a def."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield node
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)


def classes(root: Path, packages: tuple[str, ...]) -> dict[str, list[str]]:
    """Class name -> the modules that define it at top level, sorted."""
    found: dict[str, list[str]] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            for node in _top_level(ast.parse(path.read_text()).body):
                found.setdefault(node.name, []).append(_module(path, root))
    return found


def twice(defined: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: mods for name, mods in sorted(defined.items()) if len(mods) > 1}


def renamed_imports(root: Path, packages: tuple[str, ...], ours: set[str]) -> list[str]:
    """`module: from x import Class as Other` for each of our classes imported under another name."""
    out = []
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    out += [f"{_module(path, root)}: {a.name} as {a.asname}" for a in node.names
                            if a.asname and a.asname != a.name and a.name in ours]
    return out


def test_no_class_name_is_defined_in_two_modules_of_the_engine():
    assert twice(classes(REPO, ENGINE)) == {}


def test_no_class_of_ours_is_imported_under_another_name():
    ours = set(classes(REPO, (*ENGINE, PROBE)))
    assert renamed_imports(REPO, ENGINE, ours) == []


def test_the_probe_shares_only_the_listed_names_with_the_engine():
    engine, probe = classes(REPO, ENGINE), classes(REPO, (PROBE,))
    assert sorted(set(engine) & set(probe)) == sorted(SHARED_WITH_THE_PROBE)


def test_the_guards_see_a_name_defined_twice_and_a_renamed_import(tmp_path):
    pkg = tmp_path / "ort_gpu_matrix"
    (pkg / "plan").mkdir(parents=True)
    (pkg / "report").mkdir()
    (pkg / "plan" / "bisection.py").write_text("class Group:\n    pass\n\n\nclass Span:\n    pass\n")
    (pkg / "report" / "fallbacks.py").write_text(
        "from ..plan.bisection import Span as Stretch\n\nif True:\n    class Group:\n        pass\n\n\n"
        "def local():\n    class Span:\n        pass\n")
    defined = classes(tmp_path, ("ort_gpu_matrix",))
    assert twice(defined) == {"Group": ["ort_gpu_matrix.plan.bisection", "ort_gpu_matrix.report.fallbacks"]}
    assert renamed_imports(tmp_path, ("ort_gpu_matrix",), set(defined)) == [
        "ort_gpu_matrix.report.fallbacks: Span as Stretch"]

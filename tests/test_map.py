"""The map: every package says what it holds, and no comment, docstring or doc names a module no file bears.

A newcomer reads the tree through its prose. A module renamed or deleted leaves its old name behind in the
comments and docs that cited it, and the reader looks for a file that is not there. So every
`<name>.py`, `<dir>/<name>.py` and `ort_gpu_matrix.<package>.<module>` in the comments and docstrings of
the code, in README.md and in docs/ must name a file of this tree (a bare name in the packages' own code, a
file of the packages), or be a file of another project that the prose cites on purpose (OTHER_PROJECTS,
each with why). Strings are not read: the tests write files of every name.

docs/evidence/ is left out: it records runs as they were made, naming the modules of their day, and history
rewritten to today's names would no longer be a record.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO

CODE = ("ort_gpu_matrix", "ort_matrix_probe", "sessions", "bench", "mutations", "tests")
PACKAGES = ("ort_gpu_matrix", "ort_matrix_probe", "sessions")
DOCS = ("README.md", "docs/*.md", "docs/reference/*.md")

# Names of other projects' files, and example names that stand for a user's files, that the prose cites on
# purpose, as written there. An entry no scanned file names any more fails, so the list only shrinks.
OTHER_PROJECTS: dict[str, str] = {
    "xdist/remote.py": "pytest-xdist's worker side, cited for what it does to a worker's config",
    "sitecustomize.py": "Python's site hook, which a user's environment may hold; the tests plant one",
    "build_and_package_info.py": "onnxruntime's own module that states its build",
    "conftest.py": "pytest's per-directory plugin file, a suite's own",
    "f.py": "an example test file in a node id (f.py::test_a)",
    "t.py": "an example test file in a node id (t.py::test_a)",
    "planted_module.py": "a module a fixture suite's caller writes at run time, in a dir of its own",
    **dict.fromkeys(("test_gqa.py", "test_gqa_cuda.py", "test_mha.py", "test_mha_flash_attn.py",
                     "test_flash_attn_cuda.py", "test_moe.py", "test_scatternd.py", "test_tensorscatter_attention.py"),
                    "onnxruntime's own test files, which the suites run and the docs cite"),
}

# Files that another part of the same change creates, named here already: each entry goes once its file exists.
PENDING: dict[str, str] = {}

PY_NAME = re.compile(r"(?<![\w/.$}*<-])((?:[\w.-]+/)*[\w-]+\.py)(?![\w/])")
DOTTED = re.compile(r"\bort_gpu_matrix(?:\.\w+)+")
SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist"}


def _tree_files(root: Path) -> list[str]:
    """Every file of the tree, as a path relative to it (hidden and build dirs left out)."""
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.is_file() and not any(p.startswith(".") or p in SKIP_DIRS or p.endswith(".egg-info")
                                       for p in rel.parts[:-1]):
            out.append(rel.as_posix())
    return out


def prose_of_code(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python source: the prose in it, not its strings."""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                yield node.body[0].lineno, doc


def _resolves(name: str, files: list[str], where: str) -> bool:
    """A path names a file whose path ends with it; a bare name, in the packages' own code, a file of the
    packages (or the top of the tree), elsewhere a file anywhere in the tree."""
    parts = [p for p in name.split("/") if p not in (".", "..")]
    if parts[:2] in (["ort_gpu_matrix", "sessions"], ["ort_gpu_matrix", "suites"]):  # installed inside the package
        parts = parts[1:]
    if len(parts) > 1:
        tail = "/".join(parts)
        return any(f == tail or f.endswith("/" + tail) for f in files)
    if where.split("/")[0] in PACKAGES:
        files = [f for f in files if f.split("/")[0] in PACKAGES or "/" not in f]
    return any(f.rsplit("/", 1)[-1] == name for f in files)


def _dotted_resolves(name: str, files: list[str], root: Path = REPO) -> bool:
    """`ort_gpu_matrix.<...>`: the longest prefix that is a module or a package; past a package, only a
    name its __init__ defines. sessions/ and suites/ are installed inside the package (ort_gpu_matrix.sessions)."""
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in ("sessions", "suites"):
        parts = parts[1:]
    for n in range(len(parts), 0, -1):
        rel = "/".join(parts[:n])
        if f"{rel}.py" in files:
            return True
        if any(f.startswith(rel + "/") for f in files):
            return n == len(parts) or parts[n] in _defined(root / rel / "__init__.py")
    return False


def _defined(init: Path) -> set[str]:
    """The names a package's __init__ defines at its top."""
    if not init.exists():
        return set()
    tree = ast.parse(init.read_text())
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def _unknown(text: str, where: str, files: list[str], root: Path) -> list[str]:
    """The module names in `text` that no file bears (other projects' and pending ones aside)."""
    found = [name for m in PY_NAME.finditer(text) if (name := m.group(1)) not in OTHER_PROJECTS
             and name not in PENDING and not _resolves(name, files, where)]
    return found + [m.group(0) for m in DOTTED.finditer(text) if not _dotted_resolves(m.group(0), files, root)]


def _scanned(root: Path = REPO) -> list[Path]:
    """The code whose comments and docstrings are read, and the docs."""
    return sorted([p for top in CODE for p in (root / top).rglob("*.py")] + [p for g in DOCS for p in root.glob(g)])


def unknown_names(root: Path = REPO) -> list[str]:
    """`file:line: name` for every module name in the prose that no file bears: the comments and docstrings
    of the code (a file whose whole text names none is passed without parsing it), every line of the docs."""
    files = _tree_files(root)
    out = []
    for path in _scanned(root):
        where, text = path.relative_to(root).as_posix(), path.read_text()
        if path.suffix != ".py":
            out += [f"{where}:{line}: {name}" for line, piece in enumerate(text.splitlines(), 1)
                    for name in _unknown(piece, where, files, root)]
        elif _unknown(text, where, files, root):
            out += [f"{where}:{line}: {name}" for line, piece in prose_of_code(text)
                    for name in _unknown(piece, where, files, root)]
    return out


def test_no_comment_docstring_or_doc_names_a_module_no_file_bears():
    assert unknown_names() == []


def test_every_name_of_another_project_is_still_cited():
    texts = [p.read_text() for p in _scanned() if p != Path(__file__).resolve()]  # this file names them all
    assert [name for name in OTHER_PROJECTS if not any(name in t for t in texts)] == []


def test_a_pending_name_goes_once_its_file_exists():
    files = _tree_files(REPO)
    assert [name for name in PENDING if _resolves(name, files, "docs/design.md")] == []


def test_the_guard_reads_comments_and_docstrings_but_not_strings():
    src = '"""Module (a.py)."""\nx = "b.py"  # c.py\ndef f():\n    """d.py"""\n'
    assert sorted(t for _, t in prose_of_code(src)) == ["# c.py", "Module (a.py).", "d.py"]


def test_the_guard_tells_a_file_of_the_tree_from_a_gone_one():
    files = ["ort_gpu_matrix/judge/eps.py", "bench/run.py", "noxfile.py"]
    assert _resolves("judge/eps.py", files, "docs/design.md") and _resolves("eps.py", files, "tests/x.py")
    assert not _resolves("eprules.py", files, "docs/design.md")
    assert _resolves("run.py", files, "docs/design.md")  # bench's, from a doc
    assert not _resolves("run.py", files, "ort_gpu_matrix/drive/history.py")  # not a module of the packages
    assert _resolves("noxfile.py", files, "ort_gpu_matrix/app/cli.py")
    assert _dotted_resolves("ort_gpu_matrix.judge.eps.judge", files + ["ort_gpu_matrix/judge/__init__.py"])
    assert not _dotted_resolves("ort_gpu_matrix.judge.eprules", files + ["ort_gpu_matrix/judge/__init__.py"])


ALL_PACKAGES = sorted(p.parent for top in PACKAGES for p in (REPO / top).rglob("__init__.py"))


@pytest.mark.parametrize("package", ALL_PACKAGES, ids=[p.relative_to(REPO).as_posix() for p in ALL_PACKAGES])
def test_every_package_says_what_it_holds_and_why(package):
    """3 to 8 lines of its own, never only a pointer elsewhere; a top package (the engine, the probe, the
    sessions) names each of its parts on a line of its own, so it may take up to 20."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    lines = [line for line in doc.splitlines() if line.strip()]
    assert 3 <= len(lines) <= (20 if package.parent == REPO else 8), doc
    assert "see docs/design.md" not in doc, doc

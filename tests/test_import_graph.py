"""Data flows one way: no module of ours imports one that imports it back, however far round.

Every import counts, including those under `if TYPE_CHECKING:` and inside functions: a circle hidden
from the interpreter is still a circle for the reader, and the next edit that moves it to the top
turns it into an ImportError.
"""
import ast
from pathlib import Path

from conftest import REPO

PACKAGES = ("ort_gpu_matrix", "ort_matrix_probe", "sessions")


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.AST, here: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ours that one import statement names (`from . import x` names module x when it is one)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in known}
    if not isinstance(node, ast.ImportFrom):
        return set()
    if node.level:
        base = here.split(".") if is_package else here.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        module = ".".join([*base, *([node.module] if node.module else [])])
    else:
        module = node.module or ""
    found = {module} if module in known else set()
    found |= {f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known}
    return found


def import_graph(root: Path = REPO) -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (root / pkg).rglob("*.py")]
    known = {_module(p) for p in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        here = _module(path)
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            edges |= _targets(node, here, path.name == "__init__.py", known)
        # a module imports its package's __init__ on the way; that is not an edge a reader follows
        graph[here] = {e for e in edges if e != here and not here.startswith(e + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected set of two or more modules (Tarjan), sorted: every one is a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_graph_sees_the_imports_that_matter():
    """The guard below means something only if the graph holds the edges it should."""
    graph = import_graph()
    assert "ort_gpu_matrix.config.model" in graph["ort_gpu_matrix.config.pairings"]
    assert "ort_gpu_matrix.config.pairings" in graph["ort_gpu_matrix.config.loader"]
    assert "ort_gpu_matrix.render.escape" in graph["ort_gpu_matrix.harness"]  # from .render.escape import term
    assert "ort_gpu_matrix.scheduler" in graph["ort_gpu_matrix.sweep"]  # from . import scheduler
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(import_graph()) == []

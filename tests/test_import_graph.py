"""Data flows one way: no module of ours imports one that imports it back, however far round, and no
subpackage of the engine imports one that comes after it in LAYERS (data-flow order, docs/design.md).

Every import counts, including those under `if TYPE_CHECKING:` and inside functions: a circle hidden
from the interpreter is still a circle for the reader, and the next edit that moves it to the top
turns it into an ImportError.
"""
import ast
from pathlib import Path

from helpers import REPO

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
    assert "ort_gpu_matrix.util.escape" in graph["ort_gpu_matrix.drive.cell"]  # from ..util.escape import term
    assert "ort_gpu_matrix.drive.scheduler" in graph["ort_gpu_matrix.app.sweep"]  # from ..drive import scheduler
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(import_graph()) == []


# The engine's subpackages in data-flow order: each may import only those before it (and itself).
LAYERS = ("util", "config", "plan", "host", "envs", "execute", "judge", "store", "compare", "drive", "report",
          "calibrate", "app")


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "ort_gpu_matrix" or len(parts) < 2 or parts[1] not in LAYERS:
        return None
    return LAYERS.index(parts[1])


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of the engine that reaches a later layer: `importer -> imported`."""
    out = []
    for here, edges in sorted(graph.items()):
        own = _layer(here)
        if own is None:
            continue
        out += [f"{here} -> {e}" for e in sorted(edges) if (theirs := _layer(e)) is not None and theirs > own]
    return out


def test_upward_sees_an_import_that_climbs():
    assert upward({"ort_gpu_matrix.config.modes": {"ort_gpu_matrix.judge.verdicts", "ort_gpu_matrix.util.fs"}}) == [
        "ort_gpu_matrix.config.modes -> ort_gpu_matrix.judge.verdicts"]
    assert upward({"ort_gpu_matrix.app.cli": {"ort_gpu_matrix.config.loader"}, "sessions.sweep": {"ort_gpu_matrix.app.sweep"}}) == []


def test_no_subpackage_imports_a_later_one():
    assert upward(import_graph()) == []


# Layers that decide without acting: they read what the others made and start nothing (no process, no venv,
# no look at the host). Each may import only these layers, its own included; drive acts on what they decide.
PURE = {"compare": {"util", "config", "plan", "judge", "store", "compare"}}


def impure(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a pure layer that reaches a layer outside what it may import: `importer -> imported`."""
    out = []
    for here, edges in sorted(graph.items()):
        parts = here.split(".")
        own = parts[1] if parts[0] == "ort_gpu_matrix" and len(parts) > 1 else ""
        if own not in PURE:
            continue
        out += [f"{here} -> {e}" for e in sorted(edges)
                if e.startswith("ort_gpu_matrix.") and e.split(".")[1] not in PURE[own]]
    return out


def test_impure_sees_a_pure_layer_that_starts_something():
    graph = {"ort_gpu_matrix.compare.x": {"ort_gpu_matrix.host.room", "ort_gpu_matrix.judge.verdicts",
                                          "ort_gpu_matrix.compare.changes", "ort_matrix_probe.schema"},
             "ort_gpu_matrix.drive.confirm": {"ort_gpu_matrix.execute.mode_run"}}
    assert impure(graph) == ["ort_gpu_matrix.compare.x -> ort_gpu_matrix.host.room"]


def test_compare_is_pure_it_imports_nothing_that_drives_executes_builds_or_reads_the_host():
    assert impure(import_graph()) == []


def test_the_engine_top_holds_only_its_init_and_the_layers():
    top = REPO / "ort_gpu_matrix"
    loose = sorted(p.name for p in top.iterdir() if p.name != "__pycache__" and
                   not (p.name == "__init__.py" or (p.is_dir() and p.name in LAYERS)))
    assert loose == []
    assert sorted(p.name for p in top.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(LAYERS)


def test_the_design_docs_layout_lists_every_module_of_the_engine():
    text = (REPO / "docs" / "design.md").read_text()
    layout = text[text.index("## Layout"):]
    missing = [rel for p in sorted((REPO / "ort_gpu_matrix").rglob("*.py")) if p.name != "__init__.py"
               if (rel := p.relative_to(REPO / "ort_gpu_matrix").as_posix()) not in layout]
    assert missing == []


# The layers that hold the Matrix: it is loaded (config) and planned into cells (plan); the commands (app)
# start from it. Everything else gets a Cell, a Workspace, a ModeRun.
MATRIX_HOLDERS = {"config", "plan", "app"}


def takes_matrix(root: Path = REPO) -> list[str]:
    """Functions below the planning layer with a parameter named `matrix` or annotated with Matrix."""
    found = []
    for path in sorted((root / "ort_gpu_matrix").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        layer = rel.split("/")[1]
        if layer in MATRIX_HOLDERS or "/" not in rel[len("ort_gpu_matrix/"):]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            if any(a.arg == "matrix" or (a.annotation is not None and "Matrix" in ast.unparse(a.annotation))
                   for a in args):
                found.append(f"{rel}:{node.name}")
    return found


def test_below_the_planning_layer_no_function_takes_the_matrix():
    assert takes_matrix() == []


def test_the_matrix_guard_sees_a_function_that_takes_it(tmp_path):
    (tmp_path / "ort_gpu_matrix" / "drive").mkdir(parents=True)
    (tmp_path / "ort_gpu_matrix" / "app").mkdir()
    (tmp_path / "ort_gpu_matrix" / "drive" / "x.py").write_text(
        "def a(matrix):\n    pass\n\n\ndef b(m: 'Matrix'):\n    pass\n\n\ndef c(cell, workspace):\n    pass\n")
    (tmp_path / "ort_gpu_matrix" / "app" / "y.py").write_text("def d(matrix):\n    pass\n")
    assert takes_matrix(tmp_path) == ["ort_gpu_matrix/drive/x.py:a", "ort_gpu_matrix/drive/x.py:b"]

"""The tree says what the code does: the engine never imports nox, the probe never imports the engine."""
import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import REPO, once_per_run

ENGINE = REPO / "ort_gpu_matrix"
PROBE = REPO / "ort_matrix_probe"


def _imports(path: Path) -> set[str]:
    """Top-level names of every absolute import in a file; relative imports stay inside the package."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_engine_module_imports_nox():
    offenders = {str(p.relative_to(REPO)) for p in ENGINE.rglob("*.py") if "nox" in _imports(p)}
    assert offenders == set()
    # and at run time: importing every engine module pulls in no nox either
    modules = [".".join(p.relative_to(REPO).with_suffix("").parts) for p in ENGINE.rglob("*.py")]
    code = f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\nprint('nox' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_probe_imports_only_the_stdlib_and_pytest():
    allowed = set(sys.stdlib_module_names) | {"pytest", "__future__"}
    found = {str(p.relative_to(REPO)): _imports(p) - allowed for p in PROBE.glob("*.py")}
    assert {k: v for k, v in found.items() if v} == {}


def test_sessions_hold_session_definitions_and_nothing_of_the_engine():
    """Every module in sessions/ registers sessions; none defines judging, running or parsing. errors.py registers
    none: it is the one wrapper every registered body goes through, where an engine error becomes nox's status."""
    for path in (REPO / "sessions").glob("*.py"):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert "register" in defined or (path.name == "errors.py" and defined == {"user_errors"}), path
        assert not any(isinstance(n, ast.ClassDef) for n in tree.body), f"{path} defines a class"
        # the packaged noxfile calls register and nothing else of ours
        assert path.name != "noxfile.py" or _imports(path) <= {"importlib", "os", "sys", "nox"}, path


def test_no_module_beside_a_noxfile_shadows_the_stdlib():
    """nox puts a noxfile's directory first on sys.path: a session module named `bisect` beside the packaged noxfile
    made `import bisect` (packaging's, at import time) load our session module, and every child sweep died."""
    shadowing = {str(p.relative_to(REPO)) for d in (REPO / "sessions", REPO) for p in d.glob("*.py")
                 if p.stem in sys.stdlib_module_names}
    assert shadowing == set()


def package_sources(dest: Path) -> Path:
    """A fresh copy of what pyproject.toml packages. A build in the checkout would reuse its build/ dir,
    whose stale files hide a package missing from the list; and two test processes never build in one dir."""
    for name in ("ort_gpu_matrix", "ort_matrix_probe", "sessions", "suites"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", dest / "pyproject.toml")
    return dest


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> set[str]:
    def build(d: Path) -> None:
        src = package_sources(d / "src")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(d / "wheel"), str(src)],
                       check=True, capture_output=True)

    (wheel,) = (once_per_run(tmp_path_factory, "layout-wheel", build) / "wheel").glob("ort_gpu_matrix-*.whl")
    return set(zipfile.ZipFile(wheel).namelist())


def test_the_wheel_holds_the_engine_the_probe_the_sessions_and_the_suite_and_no_top_level_sessions(wheel_names):
    tops = {name.split("/")[0] for name in wheel_names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"ort_gpu_matrix", "ort_matrix_probe"}
    assert "ort_gpu_matrix/config/loader.py" in wheel_names and "ort_matrix_probe/plugin.py" in wheel_names
    # sessions/ and suites/ stay where the tree has them, and are installed inside the package
    assert {f"ort_gpu_matrix/sessions/{p.name}" for p in (REPO / "sessions").glob("*.py")} <= wheel_names
    assert "ort_gpu_matrix/sessions/noxfile.py" in wheel_names
    assert "ort_gpu_matrix/suites/dispatch/test_dispatch.py" in wheel_names
    assert "ort_gpu_matrix/report/render/templates/report.html.j2" in wheel_names


def test_every_module_of_the_tree_is_in_the_wheel(wheel_names):
    """pyproject.toml lists the packages (two are mapped from outside ort_gpu_matrix/): a new one must be added."""
    tree = {str(p.relative_to(REPO)) for d in ("ort_gpu_matrix", "ort_matrix_probe") for p in (REPO / d).rglob("*.py")}
    tree |= {"ort_gpu_matrix/" + str(p.relative_to(REPO)) for d in ("sessions", "suites") for p in (REPO / d).rglob("*.py")}
    assert tree - wheel_names == set()

"""The tree says what the code does: the engine never imports nox, the probe never imports the engine."""
import ast
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import REPO

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
    """Every module in sessions/ registers sessions; none defines judging, running or parsing."""
    for path in (REPO / "sessions").glob("*.py"):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert "register" in defined, path
        assert not any(isinstance(n, ast.ClassDef) for n in tree.body), f"{path} defines a class"


def test_the_wheel_holds_the_engine_and_the_probe_and_no_sessions_package(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
                   check=True, capture_output=True)
    (wheel,) = tmp_path.glob("ort_gpu_matrix-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"ort_gpu_matrix", "ort_matrix_probe"}
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "ort_gpu_matrix/config/loader.py" in names and "ort_matrix_probe/plugin.py" in names

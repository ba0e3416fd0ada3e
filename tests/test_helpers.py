"""The tests' own helpers: what test modules share comes from one module, helpers.py; conftest.py holds fixtures
and hooks alone and no module imports it (pytest loads it by path, and its name is not unique across a tree);
and the helper that reads nox's session lines accepts nox's own ending and nothing else."""
import ast

import pytest
from helpers import REPO, ends_line

TESTS = REPO / "tests"
CONFTEST_NAMES = {"pytest_plugins", "collect_ignore"}  # the module-level names pytest itself reads


def _imported(path) -> list[tuple[int, str]]:
    """(line, top-level module) of every import in the file, those inside functions too."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def test_no_module_imports_conftest():
    offenders = [f"tests/{p.name}:{line}" for p in sorted(TESTS.glob("*.py"))
                 for line, name in _imported(p) if name == "conftest"]
    assert not offenders, f"import these from helpers instead of conftest: {', '.join(offenders)}"


def test_the_helpers_are_one_module():
    """Beside the test modules stand conftest.py and helpers.py alone, and no dir of tests/ but the fixture
    suites holds Python: a second helpers module would be a second place to look."""
    others = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py")
                    if p.parts[len(TESTS.parts)] != "fixtures"
                    and not (p.parent == TESTS and (p.name.startswith("test_") or p.name in ("conftest.py", "helpers.py"))))
    assert not others, f"move these into tests/helpers.py (or name them test_*.py if they hold tests): {others}"


def _is_fixture(node: ast.FunctionDef) -> bool:
    def name(d):
        d = d.func if isinstance(d, ast.Call) else d
        return d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")
    return any(name(d) in ("fixture", "hookimpl") for d in node.decorator_list)


def test_conftest_holds_fixtures_and_hooks_only():
    """A public function, class or constant in conftest.py is a helper that a test module would have to import from
    conftest; its own private helpers (a leading underscore) serve its fixtures and stay."""
    tree = ast.parse((TESTS / "conftest.py").read_text())
    strays = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            if not (_is_fixture(node) or node.name.startswith(("pytest_", "_"))):
                strays.append(f"def {node.name}")
        elif isinstance(node, ast.ClassDef):
            strays.append(f"class {node.name}")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            strays += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in CONFTEST_NAMES]
    assert not strays, f"move these from conftest.py into tests/helpers.py: {strays}"


MESSAGE = "m.toml: suite.s.expect_file: expect/s.toml does not exist\n    fix: remove expect_file"


@pytest.mark.parametrize("out", [
    MESSAGE + "\n",
    MESSAGE + ".\n",
    MESSAGE + " (took 2 seconds).\n",  # what a slower CI machine printed
    "nox > Session x aborted: ort-gpu-matrix: 1 problem(s)\n" + MESSAGE + " (took a minute).\nnext\n",
])
def test_the_message_then_only_nox_ending_matches(out):
    assert ends_line(out, MESSAGE)


@pytest.mark.parametrize("out", [
    MESSAGE,  # no line break: the line may go on
    MESSAGE + "x\n",
    MESSAGE + " and more.\n",
    MESSAGE + " (took 2 seconds) more\n",
    MESSAGE + " (took 2\nseconds).\n",
    MESSAGE.replace("remove", "keep") + "\n",
])
def test_anything_else_after_the_message_does_not(out):
    assert not ends_line(out, MESSAGE)

"""One definition of each shared rule: a second copy is how the four canary checks, the
two teardown ids and the two terminal escapers came to disagree.

Each guard reads the engine's source with `ast` and names every place that breaks it. Each was
watched failing once, on the copy it was written against.
"""
from __future__ import annotations

import ast

from helpers import REPO

ENGINE = REPO / "ort_gpu_matrix"
OWNER = "ort_gpu_matrix/judge/outcomes.py"
ESCAPER = "ort_gpu_matrix/util/escape.py"


def _sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(REPO)): ast.parse(p.read_text()) for p in sorted(ENGINE.rglob("*.py"))}


def _assigned(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def where_assigned(name: str, sources: dict[str, ast.Module]) -> list[str]:
    return [path for path, tree in sources.items() if _assigned(tree, name)]


def where_literal(value: object, sources: dict[str, ast.Module]) -> list[str]:
    """Modules holding `value` as a literal (a tuple literal compares by its constants)."""
    found = []
    for path, tree in sources.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == value:
                found.append(path)
                break
            if isinstance(node, ast.Tuple | ast.Set) and all(isinstance(e, ast.Constant) for e in node.elts) \
                    and isinstance(value, tuple) and sorted(map(repr, (e.value for e in node.elts))) == sorted(map(repr, value)):
                found.append(path)
                break
    return found


def where_defined(predicate, sources: dict[str, ast.Module]) -> list[str]:
    return [f"{path}:{n.name}" for path, tree in sources.items() for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and predicate(n.name)]


def where_called(attr: str, sources: dict[str, ast.Module]) -> list[str]:
    return sorted({path for path, tree in sources.items() for n in ast.walk(tree)
                   if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr})


def canary_compares(sources: dict[str, ast.Module]) -> list[str]:
    """`first_line(...) == x` or `x == first_line(...)`: the canary's exact-line check written out."""
    found = []
    for path, tree in sources.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Compare) and any(isinstance(op, ast.Eq) for op in n.ops):
                sides = [n.left, *n.comparators]
                if any(isinstance(s, ast.Call) and getattr(s.func, "id", None) == "first_line" for s in sides):
                    found.append(f"{path}:{n.lineno}")
    return found


def test_failing_judged_and_teardown_are_defined_once():
    sources = _sources()
    for name in ("FAILING", "JUDGED", "TEARDOWN", "GONE"):
        assert where_assigned(name, sources) == [OWNER], name
    assert where_literal(("failed", "error"), sources) == [OWNER]
    assert where_literal("::teardown", sources) == [OWNER]


def test_one_listing_helper_and_one_canary_check():
    sources = _sources()
    assert where_defined(lambda name: "listing" in name, sources) == [f"{OWNER}:listing"]
    assert canary_compares(sources) == [f"{OWNER}:{_line_of_bites()}"]


def _line_of_bites() -> int:
    tree = ast.parse((REPO / OWNER).read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "bites"]
    (cmp,) = [n for n in ast.walk(fn) if isinstance(n, ast.Compare) and isinstance(n.ops[0], ast.Eq)
              and isinstance(n.left, ast.Name)]
    return cmp.lineno


def test_one_terminal_escaper():
    """isprintable() and a control-character class decide what a terminal shows; only util/escape.py may."""
    sources = _sources()
    assert where_called("isprintable", sources) == [ESCAPER]
    assert where_literal(r"[\x00-\x1f\x7f-\x9f]", sources) in ([], [ESCAPER])


def test_the_guards_see_a_copy(tmp_path):
    """Each guard finds the copy it exists for, written into a module beside the owner."""
    copy = ast.parse('FAILING = ("error", "failed")\nTEARDOWN = "::teardown"\n'
                     "def _listing(items):\n    return items\n"
                     "def bitten(t, m):\n    return first_line(t.message) == m\n"
                     "def shown(s):\n    return ''.join(c for c in s if c.isprintable())\n")
    sources = {**_sources(), "ort_gpu_matrix/drive/copy.py": copy}
    assert sorted(where_assigned("FAILING", sources)) == ["ort_gpu_matrix/drive/copy.py", OWNER]
    assert "ort_gpu_matrix/drive/copy.py" in where_literal(("failed", "error"), sources)
    assert "ort_gpu_matrix/drive/copy.py" in where_literal("::teardown", sources)
    assert "ort_gpu_matrix/drive/copy.py:_listing" in where_defined(lambda n: "listing" in n, sources)
    assert "ort_gpu_matrix/drive/copy.py:6" in canary_compares(sources)
    assert "ort_gpu_matrix/drive/copy.py" in where_called("isprintable", sources)


def test_the_one_escaper_escapes_what_reorders_or_hides_text():
    from ort_gpu_matrix.drive.readback import last_lines  # noqa: F401 - a child's log tail (readback.py) uses it too
    from ort_gpu_matrix.util.escape import md, term

    assert term("pa\u202essed") == "pa\\u202essed"  # a bidi override would show `passed` turned round
    assert term("a\u200bb") == "a\\u200bb"  # zero-width: a name that looks whole
    assert term("a\u2028b\u2029c") == "a\\u2028b\\u2029c"  # line and paragraph separators
    assert term("\x1b]0;x\x07\r") == "\\x1b]0;x\\x07\\x0d"
    assert term("\U000e0041") == "\\U000e0041"  # a tag character, outside the BMP
    assert term("é 中 ü") == "é 中 ü"  # letters of any script, and the plain space, as they are
    assert md("x\u202ey") == "x\\\\u202ey"  # Markdown starts from the terminal's escaping


def test_the_scheduler_log_tail_escapes_as_term_does(tmp_path):
    from ort_gpu_matrix.drive.readback import last_lines
    from ort_gpu_matrix.util.escape import term

    text = "ok \u202eemos\u200b \u00a0\x1b[1m"
    (tmp_path / "log").write_text(text + "\n")
    assert last_lines(tmp_path / "log") == term(text)

"""One voice: a run's output channels travel as one Voice (ort_gpu_matrix/util/voice.py), never as loose callables.

Thirty parameters typed `Callable[[str], None]` under the names log, say, echo and warn, and `print` as the
default of 24 of them, had let a line go to the terminal where its caller meant it to go elsewhere. The guard
walks every module of the engine and its sessions: no function parameter and no class field (a dataclass's)
is typed as a line callable, directly or through an alias of it (`Say = Callable[[str], None]`, or the Voice's
own `Line`), and no parameter or field defaults to `print`. util/voice.py, which defines the channels, is the
one module allowed them.
"""
import ast
from collections.abc import Iterator
from pathlib import Path

from helpers import REPO

ENGINE = ("ort_gpu_matrix", "sessions")
THE_VOICE = Path("ort_gpu_matrix") / "util" / "voice.py"
LINE = "Callable[[str], None]"
OWN_ALIASES = {"Line"}  # util/voice.py's name for a channel


def _is_line(node: ast.expr | None, aliases: set[str]) -> bool:
    """Whether an annotation is a line callable, alone or in a union (`... | None`), spelled out or aliased."""
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        return _is_line(ast.parse(node.value, mode="eval").body, aliases)
    if LINE in ast.unparse(node).replace(" ", "").replace(",", ", "):
        return True
    return any(isinstance(n, ast.Name) and n.id in aliases or isinstance(n, ast.Attribute) and n.attr in aliases
               for n in ast.walk(node))


def _is_print(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Name) and node.id == "print"


def _aliases(tree: ast.Module) -> set[str]:
    """The module's own names for a line callable: `Say = Callable[[str], None]` at top level."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not isinstance(node.value, ast.Constant) and _is_line(node.value, set()):
                found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return found


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[tuple[ast.arg, ast.expr | None]]:
    """Each parameter with its default (None where it has none)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    yield from zip(positional, defaults, strict=True)
    yield from zip(a.kwonlyargs, a.kw_defaults, strict=True)
    yield from ((x, None) for x in (a.vararg, a.kwarg) if x is not None)


def loose_voices(root: Path, packages: tuple[str, ...] = ENGINE) -> list[str]:
    """`module:line name` for each parameter or class field typed as a line callable or defaulting to print."""
    out = []
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root)
            if rel == THE_VOICE:
                continue
            tree = ast.parse(path.read_text())
            aliases = OWN_ALIASES | _aliases(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    out += [f"{rel}:{arg.lineno} {node.name}({arg.arg})" for arg, default in _params(node)
                            if _is_line(arg.annotation, aliases) or _is_print(default)]
                elif isinstance(node, ast.ClassDef):
                    out += [f"{rel}:{f.lineno} {node.name}.{ast.unparse(f.target)}" for f in node.body
                            if isinstance(f, ast.AnnAssign) and (_is_line(f.annotation, aliases) or _is_print(f.value))]
    return out


def test_no_engine_parameter_or_field_is_a_loose_channel_or_defaults_to_print():
    assert loose_voices(REPO) == []


def test_the_guard_sees_each_way_a_loose_channel_comes_back(tmp_path):
    pkg = tmp_path / "ort_gpu_matrix"
    (pkg / "util").mkdir(parents=True)
    (pkg / "drive").mkdir()
    (pkg / "util" / "voice.py").write_text("Line = Callable[[str], None]\n\n\ndef plain(log: Line = print) -> None:\n"
                                           "    pass\n")
    (pkg / "drive" / "loud.py").write_text(
        "from collections.abc import Callable\nfrom ..util.voice import Line, Voice\n\nSay = Callable[[str], None]\n\n\n"
        "def direct(cell: str, log: Callable[[str], None]) -> None: ...\n"
        "def aliased(say: Say | None = None) -> None: ...\n"
        "def theirs(*, warn: 'Line') -> None: ...\n"
        "def printing(voice: Voice, out=print) -> None: ...\n"
        "def fine(voice: Voice, test: Callable[[str], bool], n: int = 1) -> None: ...\n\n\n"
        "class Hooks:\n    voice: Voice\n    echo: Say = print\n    ended: Callable[[int], None] = len\n"
        "    later: object = print\n")
    assert loose_voices(tmp_path, ("ort_gpu_matrix",)) == [
        "ort_gpu_matrix/drive/loud.py:7 direct(log)", "ort_gpu_matrix/drive/loud.py:8 aliased(say)",
        "ort_gpu_matrix/drive/loud.py:9 theirs(warn)", "ort_gpu_matrix/drive/loud.py:10 printing(out)",
        "ort_gpu_matrix/drive/loud.py:16 Hooks.echo", "ort_gpu_matrix/drive/loud.py:18 Hooks.later"]

"""One user-error base, caught once per session.

Every exception class of the engine is either a UserError (util/errors.py: something a person can fix, shown
as its message) or one of the few internal signals listed here with the place that catches it. Sessions never
name an error type: each session body is wrapped once (sessions/errors.py), so an error raised by any layer
reaches the user as a message, and a new error class cannot be forgotten in one session's except list.
"""
import ast
import importlib
import inspect
import pkgutil

import pytest
from helpers import REPO

# class name -> who catches it, and why it is no user's to fix
INTERNAL = {
    "EarlyAbandoned": "drive/cell.py: a teeth started early gave up before any test ran; the run starts again",
    "RunsMissing": "sessions/cells.py: overlapped runs that stored nothing; the table still shows those that did",
    "JunitError": "drive/attempt.py: a missing junit file is a witness's reason in the verdict, not a crash",
    "HandoffError": "drive/census.py: a census that did not come is why the teeth has none, said in its result",
    "CodecError": "store/results.py: the keys of a stored record that do not fit; each reader adds its file and fix",
}


# (session module, error) -> why that module names it: outside any session body
OUTSIDE_A_BODY = {
    ("cells.py", "MatrixError"): "register(): a bad matrix at listing time stops nox with exit 2 before any session "
                                 "exists, printing every problem (nox -l must not list a broken matrix)",
}


def _engine_classes() -> dict[str, type]:
    import ort_gpu_matrix

    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(ort_gpu_matrix.__path__, "ort_gpu_matrix."):
        if info.name.startswith("ort_gpu_matrix.sessions"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and obj.__module__ == info.name and issubclass(obj, Exception):
                found[name] = obj
    return found


def untyped_errors(classes: dict[str, type], internal: dict[str, str]) -> list[str]:
    """The exception classes that are neither a UserError nor a listed internal signal."""
    from ort_gpu_matrix.util.errors import UserError

    return sorted(n for n, c in classes.items() if not issubclass(c, UserError) and n not in internal)


def named_in_except(source: str, names: set[str]) -> list[str]:
    """The error classes among `names` that an `except` clause of this source names."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            out += [c.id if isinstance(c, ast.Name) else c.attr for c in caught
                    if isinstance(c, (ast.Name, ast.Attribute)) and (c.id if isinstance(c, ast.Name) else c.attr) in names]
    return out


def test_every_engine_error_is_a_user_error_or_a_listed_internal_signal():
    classes = _engine_classes()
    assert untyped_errors(classes, INTERNAL) == [], "derive it from util.errors.UserError, or list it in INTERNAL"
    assert sorted(n for n in INTERNAL if n not in classes) == [], "an INTERNAL entry names no class: drop it"


def test_the_guard_sees_an_error_outside_the_base():
    class LooseError(Exception):
        pass

    assert untyped_errors({"LooseError": LooseError}, INTERNAL) == ["LooseError"]


def test_no_session_names_a_user_error_in_an_except_clause():
    from ort_gpu_matrix.util.errors import UserError

    users = {n for n, c in _engine_classes().items() if issubclass(c, UserError)}
    offenders = {p.name: [n for n in named_in_except(p.read_text(), users) if (p.name, n) not in OUTSIDE_A_BODY]
                 for p in sorted((REPO / "sessions").glob("*.py")) if p.name != "errors.py"}
    assert {k: v for k, v in offenders.items() if v} == {}, "sessions/errors.py's user_errors catches them once"


def test_the_guard_sees_an_except_clause_that_names_one():
    assert named_in_except("try:\n    x()\nexcept (ValueError, errors.MatrixError):\n    pass\n",
                           {"MatrixError"}) == ["MatrixError"]


@pytest.mark.parametrize("path", sorted(p.name for p in (REPO / "sessions").glob("*.py")))
def test_every_registered_session_body_is_wrapped_once(path):
    """Each function handed to nox.session is a `@user_errors(...)` body (or nothing-to-run, which only fails)."""
    tree = ast.parse((REPO / "sessions" / path).read_text())
    wrapped = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
               and any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "user_errors" for d in f.decorator_list)}
    registered = {c.args[0].id for c in ast.walk(tree) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Attribute) and c.func.attr == "session" and c.args
                  and isinstance(c.args[0], ast.Name)}
    bodies = {"fn": "session_body"}  # cells.py registers the bodies _bodies() returns
    unwrapped = {bodies.get(n, n) for n in registered} - wrapped - {"nothing_to_run"}
    assert unwrapped == set(), f"{path}: wrap with sessions/errors.py's @user_errors()"


def test_a_user_error_in_a_wrapped_body_becomes_the_sessions_error_message():
    import sys

    sys.path.insert(0, str(REPO))
    try:
        from sessions.errors import user_errors
    finally:
        sys.path.remove(str(REPO))
    from ort_gpu_matrix.plan.select import SelectionError

    class Session:
        said: list[str] = []

        def error(self, text: str) -> None:
            self.said.append(text)

    @user_errors("calibrate: ")
    def body(session):
        raise SelectionError("--select x matches nothing")

    @user_errors()
    def crash(session):
        raise KeyError("a bug keeps its traceback")

    session = Session()
    body(session)
    assert session.said == ["calibrate: --select x matches nothing"]
    with pytest.raises(KeyError):
        crash(session)
    assert body.__name__ == "body"  # nox lists the session by the body's name and docstring


def test_the_internal_signals_are_caught_where_the_list_says():
    for name, where in INTERNAL.items():
        path = where.split(":")[0]
        file = REPO / path if path.startswith("sessions/") else REPO / "ort_gpu_matrix" / path
        assert name in named_in_except(file.read_text(), {name}), f"{name} is not caught in {path}"

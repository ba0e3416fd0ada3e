"""The config model and loader, without nox: each mode reads only the keys it uses."""
import pytest
from helpers import SUITES, matrix_head, suite_head

from ort_gpu_matrix.config.kernels import TEETH_MESSAGE
from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.config.model import PassExpect, TeethExpect
from ort_gpu_matrix.util.errors import MatrixError

BASE = matrix_head(pythons=["3.12"], suite="s", ort={"a": 'requirement = "onnxruntime"'}, torch={"t": "skip = true"},
                   libs=["l"]) + suite_head("s", ["verdicts/test_allpass.py"], None, root=str(SUITES))


def _load(tmp_path, extra: str):
    path = tmp_path / "m.toml"
    path.write_text(BASE + extra)
    return load_matrix(path)


def _problems(tmp_path, extra: str):
    with pytest.raises(MatrixError) as info:
        _load(tmp_path, extra)
    return {p.key: p for p in info.value.problems}


@pytest.mark.parametrize("mode, key, uses", [
    ("normal", "known_toothless", "teeth"),
    ("require_cudnn", "min_failures", "teeth"),
    ("normal", "message", "teeth"),
    ("teeth", "allowed_skips", "normal"),
    ("teeth", "min_passed", "normal"),
])
def test_a_key_another_mode_uses_is_rejected_not_ignored(tmp_path, mode, key, uses):
    value = "[]" if key in ("known_toothless", "allowed_skips") else ('"x"' if key == "message" else "1")
    problems = _problems(tmp_path, f"[suite.s.expect.{mode}]\n{key} = {value}\n")
    p = problems[f"suite.s.expect.{mode}.{key}"]
    assert p.problem == f"unknown key here: {key} is read only by [suite.s.expect.{uses}]"
    assert p.fix.startswith(f"move it to [suite.s.expect.{uses}], or use one of: ")
    assert key not in p.fix.split("use one of: ")[1].split(", ")  # the mode's own keys are offered, not this one


def test_each_mode_gets_its_own_expectations_with_their_defaults(tmp_path):
    m = _load(tmp_path, '[suite.s.expect.teeth]\nmin_failures = 3\nknown_toothless = [{ test = "v", reason = "r" }]\n')
    expect = m.suites["s"].expect
    assert type(expect["normal"]) is PassExpect and type(expect["require_cudnn"]) is PassExpect
    assert type(expect["teeth"]) is TeethExpect
    assert expect["teeth"].min_failures == 3 and expect["teeth"].canary == TEETH_MESSAGE
    assert expect["teeth"].known_toothless[0].test == "v"
    assert expect["normal"].min_passed == 1


def test_dispatch_rules_are_accepted_in_every_mode(tmp_path):
    text = "".join(f'[suite.s.expect.{m}]\nforbid_kernels = ["MATH"]\ndispatch_tests = "cudnn"\n'
                   for m in ("normal", "require_cudnn", "teeth"))
    m = _load(tmp_path, text)
    assert all(e.forbid_kernels == ("MATH",) for e in m.suites["s"].expect.values())


def test_environment_overrides_are_read_once_into_the_matrix(tmp_path, monkeypatch):
    from ort_gpu_matrix.config.overrides import Overrides

    o = Overrides.from_environ({"MATRIX_WHEELHOUSE": "/w1:/w2", "MATRIX_OFFLINE": "1", "MATRIX_RESULTS": str(tmp_path / "r")})
    path = tmp_path / "m.toml"
    path.write_text(BASE)
    m = load_matrix(path, o)
    assert m.settings.wheelhouse == ("/w1", "/w2") and m.settings.offline is True
    assert m.workspace.results_dir == tmp_path / "r"
    assert m.workspace.venvs_dir == tmp_path / ".matrix" / "venvs"
    assert m.workspace.cache_dir == tmp_path / ".matrix"

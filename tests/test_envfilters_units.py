"""The census's reviewed prefix filters (ort_matrix_probe/envfilters.py), in this process: what makes an
iteration of the environment the reviewed one, and what does not. The real tqdm, through real pytest runs, is
tests/test_probe_envreads.py's."""
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ort_matrix_probe import envfilters

CANARY = "MY_CANARY"
WATCHED = frozenset({CANARY, "TQDM_X"})


class Env(Mapping):
    """A stand-in for os.environ, iterated through the mapping views as it is; each iteration records what the
    filter check said of its caller."""

    def __init__(self):
        self.seen = []

    def __iter__(self):
        self.seen.append(envfilters.kept(sys._getframe(1), self, WATCHED))
        return iter(["A"])

    def __getitem__(self, key):
        return "1"

    def __len__(self):
        return 1


REVIEWED = "(k[i:].lower(), v) for k, v in os.environ.items() if k.startswith(prefix))"


@pytest.mark.parametrize("line, keeps", [
    (REVIEWED, frozenset({"TQDM_X"})),
    (REVIEWED.replace("if k.startswith", "if not k.startswith"), None),  # filters otherwise
    (REVIEWED.replace("(prefix))", '(prefix) or k.endswith("_SDPA"))'), None),  # widened by an `or`
    ("(k, v) for k, v in os.environ.items())", None),  # keeps everything
    ("(k, v) for k, v in relay(os.environ) if k.startswith(prefix))", None),  # a view called by other code
], ids=["reviewed", "negated", "widened", "unfiltered", "relayed"])
@pytest.mark.parametrize("prefix", ["TQDM_", ""], ids=["prefix", "no-prefix"])
def test_a_reviewed_filter_is_exempted_only_while_its_source_and_prefix_are_the_reviewed_ones(tmp_path, line, keeps,
                                                                                             prefix):
    """The exemption rests on the reviewed code, read from the file as it is: a tqdm whose envwrap filters
    otherwise, keeps more, or reaches the environment through other code is a read of everything again; so is
    the reviewed code given an empty prefix, which keeps every name."""
    pkg = tmp_path / "tqdm"
    pkg.mkdir()
    source = (f"def envwrap(prefix):\n    i = len(prefix)\n    env_overrides = {{}}\n    env_overrides.update(\n"
              f"        {line}\n    return env_overrides\n\n\ndef relay(env):\n    return list(env.items())\n")
    path = pkg / "utils.py"
    path.write_text(source)
    env = Env()
    namespace = {"os": types.SimpleNamespace(environ=env)}
    exec(compile(source, str(path), "exec"), namespace)
    namespace["envwrap"](prefix)
    assert env.seen == [keeps if prefix else None]


def _genexpr_of(path: Path) -> types.CodeType:
    module = compile(path.read_text(), str(path), "exec")
    (envwrap,) = [c for c in module.co_consts if isinstance(c, types.CodeType) and c.co_name == "envwrap"]
    (genexpr,) = [c for c in envwrap.co_consts if isinstance(c, types.CodeType) and c.co_name == "<genexpr>"]
    return genexpr


def test_the_reviewed_source_is_the_installed_tqdms():
    """The reviewed text is what tqdm (pinned by the test extras) has: were tqdm to change envwrap, this says so
    here, before a device run counts its iteration as everything again."""
    tqdm = pytest.importorskip("tqdm")
    path = Path(tqdm.__file__).parent / "utils.py"
    (site,) = envfilters.FILTERS
    assert str(path).endswith(site.path)
    assert envfilters._source(_genexpr_of(path)) == site.source


def test_a_view_of_another_mapping_or_no_frame_is_not_the_reviewed_iteration():
    env, other = Env(), Env()
    frames = []

    class Probe(Mapping):
        def __iter__(self):
            frames.append(sys._getframe(1))
            return iter([])

        def __getitem__(self, key):
            raise KeyError(key)

        def __len__(self):
            return 0
    list(Probe().items())
    (view,) = frames
    assert not envfilters.view_of(view, env) and not envfilters.view_of(None, env)
    assert envfilters.kept(None, other, WATCHED) is None
    assert envfilters.kept(sys._getframe(), env, WATCHED) is None  # this test's own frame


def test_a_frame_of_the_views_module_that_is_no_mapping_view_is_not_one():
    """Sequence.__iter__ lives beside the mapping views and has no mapping: it is told apart, not a crash."""
    frames = []

    class Seq(Sequence):
        def __getitem__(self, i):
            frames.append(sys._getframe(1))
            raise IndexError(i)

        def __len__(self):
            return 0
    list(iter(Seq()))
    (frame,) = frames
    assert frame.f_code.co_name == "__iter__" and not envfilters.view_of(frame, Env())


def test_source_is_empty_where_the_file_cannot_be_read(tmp_path):
    code = compile("x = (k for k in y)\n", str(tmp_path / "gone.py"), "exec")
    assert envfilters._source(code) == ""
    (tmp_path / "there.py").write_text("x = (k\n     for k in y)\n")
    code = compile((tmp_path / "there.py").read_text(), str(tmp_path / "there.py"), "exec")
    assert envfilters._source(code) == "x=(kforkiny)"

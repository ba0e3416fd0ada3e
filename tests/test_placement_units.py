"""The probe's node census in this process, with the real CPU wheel: placement.py asks ORT to record each build's
placement and reads it back, and epcensus.py keeps it per test and counts its runs.

ORT is patched here as the plugin patches it (ortpatch.patch_module with a census of our own), so a session is
built through ORT's own Python layer, and a CUDA-served one meets the stand-in CUDA EP of the fixture suites
(tests/fixtures/suites/cudastandin.py): ORT's CPU wheel partitions the graph for real and records it because the
probe asked; the stand-in reports each node on the CUDA EP unless its op is one it has no kernel for. The last
tests run the plugin inline (pytester), so mutmut maps its hooks to the node census too.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort  # imported once, here: pytester drops modules an inline run imports
import onnxruntime.capi.onnxruntime_inference_collection as collection
import pytest
from helpers import SUITES
from test_probe import PLUGIN

from ort_matrix_probe import placement
from ort_matrix_probe.epcensus import _STATE, CUDA_EP, NOT_IN_BUILD, NOT_LOADED, RUN_FALLBACK, EpCensus
from ort_matrix_probe.fdtap import FdTap
from ort_matrix_probe.ortpatch import Patch, patch_module

CPU = "CPUExecutionProvider"
BOTH = [CUDA_EP, CPU]
X = np.array([1.0, 2.0, 2.0, 3.0], dtype=np.float32)


def _fixture_module(name: str):
    """A fixture suite's helper module, loaded from its file (the suites' dir is never put on sys.path here)."""
    spec = importlib.util.spec_from_file_location(f"_placement_units_{name}", SUITES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


standin = _fixture_module("cudastandin")
add_then = _fixture_module("tinyort").add_then


class Probe:
    """The real ORT, watched by one census as the plugin watches it; `test` is the test the census attributes to."""

    def __init__(self, nodes: bool = True) -> None:
        self.test = "t.py::test_a"
        self.census = EpCensus(lambda: self.test, nodes=nodes)
        self.restore = patch_module(collection, Patch({}, FdTap(lambda data, cuda: None), lambda: self.test,
                                                      self.census))

    def session(self, op: str = "Unique", options=None, providers=BOTH):
        return ort.InferenceSession(add_then(op), options, providers=list(providers))

    def take(self, test: str | None = None) -> list[dict]:
        return self.census.take(test or self.test)


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.delenv("CUDA_STANDIN_CPU_OPS", raising=False)
    standin.install("serve")
    p = Probe()
    yield p
    p.restore()
    standin.uninstall()


def node(op: str, name: str, ep: str, runs: int) -> dict:
    return {"op": op, "name": name, "ep": ep, "runs": runs}


# ---------------------------------------------------------------- placement.py alone

def test_an_op_is_named_by_its_type_in_onnxs_domain_and_after_its_domain_elsewhere():
    assert placement.op_name("", "Unique") == "Unique"
    assert placement.op_name("ai.onnx", "Unique") == "Unique"
    assert placement.op_name("com.microsoft", "Gelu") == "com.microsoft.Gelu"
    assert placement.op_name("ai.onnx.ml", "TreeEnsemble") == "ai.onnx.ml.TreeEnsemble"


def test_ask_adds_the_entry_to_the_options_given_and_to_fresh_ones_where_none_were():
    given = ort.SessionOptions()
    session = SimpleNamespace(_sess_options=given)
    assert placement.ask(session, ort.SessionOptions) is None
    assert session._sess_options is given and given.get_session_config_entry(placement.RECORD_KEY) == "1"
    bare = SimpleNamespace(_sess_options=None)
    assert placement.ask(bare, ort.SessionOptions) is None
    assert isinstance(bare._sess_options, ort.SessionOptions)
    assert bare._sess_options.get_session_config_entry(placement.RECORD_KEY) == "1"
    never = SimpleNamespace()  # no attribute at all: as before ORT's __init__ set it
    assert placement.ask(never, ort.SessionOptions) is None
    assert never._sess_options.get_session_config_entry(placement.RECORD_KEY) == "1"


def test_a_test_that_turned_recording_off_keeps_its_zero_and_is_told_so():
    options = ort.SessionOptions()
    options.add_session_config_entry(placement.RECORD_KEY, "0")
    assert placement.ask(SimpleNamespace(_sess_options=options), ort.SessionOptions) == placement.TURNED_OFF
    assert options.get_session_config_entry(placement.RECORD_KEY) == "0"
    assert placement.TURNED_OFF == "the test set session.record_ep_graph_assignment_info to 0 itself"
    other = ort.SessionOptions()
    other.add_session_config_entry(placement.RECORD_KEY, "2")  # any other value is not the test's "no"
    assert placement.ask(SimpleNamespace(_sess_options=other), ort.SessionOptions) is None
    assert other.get_session_config_entry(placement.RECORD_KEY) == "1"


def test_options_that_ask_already_are_left_as_they_are_so_ort_warns_of_no_overwrite(probe, capfd):
    options = ort.SessionOptions()
    for _ in range(2):  # the second build from the same options: ORT would warn that the entry was overwritten
        probe.session("Relu", options).run(None, {"x": X})
    assert "already exists" not in capfd.readouterr().err
    assert [n["op"] for u in probe.take() for n in u["nodes"]] == ["Add", "Relu", "Add", "Relu"]

    class Asked:
        def get_session_config_entry(self, key):
            return "1"

        def add_session_config_entry(self, key, value):
            raise AssertionError("set again")

    assert placement.ask(SimpleNamespace(_sess_options=Asked()), ort.SessionOptions) is None


def test_ask_without_options_or_a_way_to_make_them_says_why():
    assert placement.ask(SimpleNamespace(_sess_options=None), None) == placement.NO_API
    assert placement.NO_API.startswith("this ORT cannot report node placement (")

    def refuses():
        raise RuntimeError("no options here\nsecond line")

    assert placement.ask(SimpleNamespace(_sess_options=None), refuses) == "no options here"

    class Sealed:
        __slots__ = ()  # ORT's options cannot be set on it

    assert placement.ask(Sealed(), ort.SessionOptions).startswith("'Sealed' object has no attribute '_sess_options'")

    class Mute:
        def get_session_config_entry(self, key):
            raise RuntimeError("absent")

        def add_session_config_entry(self, key, value):
            raise ValueError("")  # a message of nothing: the type names it

    assert placement.ask(SimpleNamespace(_sess_options=Mute()), ort.SessionOptions) == "ValueError"

    def silent():
        raise KeyError()

    assert placement.ask(SimpleNamespace(_sess_options=None), silent) == "KeyError"


def test_read_gives_ep_op_and_name_per_node_with_the_domain_before_a_contrib_op():
    options = ort.SessionOptions()
    options.add_session_config_entry(placement.RECORD_KEY, "1")
    sess = ort.InferenceSession(add_then("Gelu"), options, providers=[CPU])
    assert placement.read(sess) == ((CPU, "Add", "add"), (CPU, "com.microsoft.Gelu", "gelu"))


def test_read_of_a_build_that_did_not_record_gives_orts_first_line():
    sess = ort.InferenceSession(add_then("Relu"), providers=[CPU])
    said = placement.read(sess)
    assert isinstance(said, str) and "must be set to \"1\"" in said and "\n" not in said, said


def test_read_of_an_ort_without_the_api_is_no_api():
    assert placement.read(SimpleNamespace(_sess=object())) == placement.NO_API
    assert placement.read(SimpleNamespace()) == placement.NO_API

    class Broken:
        def get_provider_graph_assignment_info(self):
            raise RuntimeError()

    assert placement.read(SimpleNamespace(_sess=Broken())) == "RuntimeError"


# ---------------------------------------------------------------- the census, on ORT's own Python layer

def test_a_cuda_served_session_reports_each_node_on_its_ep_with_the_runs_of_the_test(probe):
    options = ort.SessionOptions()
    sess = probe.session("Unique", options)
    assert options.get_session_config_entry(placement.RECORD_KEY) == "1"  # the test's own object
    for _ in range(2):
        sess.run(None, {"x": X})
    (entry,) = probe.take()
    assert entry["served"] == BOTH and entry["runs"] == {CUDA_EP: 2}
    assert entry["nodes"] == [node("Add", "add", CUDA_EP, 2), node("Unique", "unique", CPU, 2)]
    assert "nodes_unseen" not in entry and "fallback" not in entry
    assert probe.take() == []  # taken: forgotten


def test_a_session_built_without_options_gets_fresh_ones_that_record(probe):
    sess = probe.session("Gelu")
    assert sess.get_session_options().get_session_config_entry(placement.RECORD_KEY) == "1"
    (entry,) = probe.take()
    assert entry["nodes"] == [node("Add", "add", CUDA_EP, 0), node("com.microsoft.Gelu", "gelu", CUDA_EP, 0)]


def test_a_test_that_turned_recording_off_is_unseen_with_that_reason(probe):
    options = ort.SessionOptions()
    options.add_session_config_entry(placement.RECORD_KEY, "0")
    probe.session("Unique", options).run(None, {"x": X})
    assert options.get_session_config_entry(placement.RECORD_KEY) == "0"
    (entry,) = probe.take()
    assert "nodes" not in entry and entry["nodes_unseen"] == placement.TURNED_OFF and entry["runs"] == {CUDA_EP: 1}


def test_a_session_that_is_never_run_is_unseen_for_the_test_that_built_it(probe):
    options = ort.SessionOptions()
    options.add_session_config_entry(placement.RECORD_KEY, "0")
    probe.session("Unique", options)
    (entry,) = probe.take()
    assert entry["nodes_unseen"] == placement.TURNED_OFF and entry["runs"] == {}


def test_a_cpu_only_session_is_not_tracked(probe):
    options = ort.SessionOptions()
    sess = probe.session("Unique", options, providers=[CPU])
    sess.run(None, {"x": X})
    assert probe.take() == [] and not hasattr(sess, _STATE)
    with pytest.raises(RuntimeError, match="does not have configuration"):
        options.get_session_config_entry(placement.RECORD_KEY)  # not asked: the probe left its options alone


def test_a_build_the_cuda_ep_does_not_serve_records_no_nodes(probe):
    standin.install("log_and_skip")  # ORT's C++ layer skips the CUDA EP: the CPU serves, nothing raised
    probe.session("Unique").run(None, {"x": X})
    (entry,) = probe.take()
    assert entry["served"] == [CPU] and entry["fallback"] == NOT_LOADED and entry["runs"] == {CPU: 1}
    assert "nodes" not in entry and "nodes_unseen" not in entry


def test_a_wheel_without_the_cuda_ep_records_no_nodes():
    p = Probe()
    try:
        ort.InferenceSession(add_then("Unique"), providers=BOTH).run(None, {"x": X})
    finally:
        p.restore()
    (entry,) = p.take()
    assert entry["fallback"] == NOT_IN_BUILD and "nodes" not in entry and "nodes_unseen" not in entry


def test_runs_are_counted_per_placement_and_a_rebuild_is_read_again(probe, monkeypatch):
    sess = probe.session("Unique")
    sess.run(None, {"x": X})
    monkeypatch.setenv("CUDA_STANDIN_CPU_OPS", "")  # the next build places Unique on the CUDA EP
    sess.set_providers(BOTH)
    for _ in range(3):
        sess.run(None, {"x": X})
    sess.set_providers([CPU])  # the test's own move to the CPU: no placement kept for it
    sess.run(None, {"x": X})
    (entry,) = probe.take()
    assert entry["runs"] == {CUDA_EP: 4, CPU: 1} and "fallback" not in entry and "nodes_unseen" not in entry
    assert entry["nodes"] == [node("Add", "add", CUDA_EP, 4), node("Unique", "unique", CPU, 1),
                              node("Unique", "unique", CUDA_EP, 3)]
    assert len(sess.__dict__[_STATE].placements) == 2


def test_each_test_counts_its_own_runs_of_a_shared_session(probe):
    sess = probe.session("Unique")
    sess.run(None, {"x": X})
    probe.test = "t.py::test_b"
    sess.run(None, {"x": X})
    sess.run(None, {"x": X})
    probe.test = "t.py::test_c"  # meets it without running it: its placement, with no runs
    sess.set_providers(BOTH)
    assert probe.take("t.py::test_a")[0]["nodes"] == [node("Add", "add", CUDA_EP, 1), node("Unique", "unique", CPU, 1)]
    assert probe.take("t.py::test_b")[0]["nodes"] == [node("Add", "add", CUDA_EP, 2), node("Unique", "unique", CPU, 2)]
    (c,) = probe.take("t.py::test_c")
    assert c["nodes"] == [node("Add", "add", CUDA_EP, 0), node("Unique", "unique", CPU, 0)] and c["runs"] == {}


def test_fold_adds_a_subtests_node_runs_to_its_tests(probe):
    sess = probe.session("Unique")
    sess.run(None, {"x": X})
    probe.test = "t.py::test_a [sub]"
    sess.run(None, {"x": X})
    sess.run(None, {"x": X})
    probe.census.fold("t.py::test_a [sub]", "t.py::test_a")
    assert probe.take("t.py::test_a [sub]") == []
    (entry,) = probe.take("t.py::test_a")
    assert entry["runs"] == {CUDA_EP: 3}
    assert entry["nodes"] == [node("Add", "add", CUDA_EP, 3), node("Unique", "unique", CPU, 3)]


def test_fold_keeps_a_subtests_unseen_reason_and_the_tests_own_first():
    census = EpCensus(lambda: "t::a [s]")
    use = census._use(_tracked(census, placements=[]))
    use.unseen = "why"
    census.fold("t::a [s]", "t::a")
    assert census.uses["t::a"][1].unseen == "why"
    census.uses["t::a [s]"] = {1: type(use)()}
    census.uses["t::a [s]"][1].unseen = "another"
    census.fold("t::a [s]", "t::a")
    assert census.uses["t::a"][1].unseen == "why"


def _tracked(census, placements):
    from ort_matrix_probe.epcensus import Tracked

    t = Tracked(1, BOTH)
    t.placements = placements
    census.sessions[1] = t
    return t


def test_session_runs_fallback_keeps_the_cuda_builds_nodes_and_counts_the_run_on_the_cpu(probe):
    standin.install("fail_run")  # the CUDA build raises EPFail on run: ORT's Session.run rebuilds on the CPU
    sess = probe.session("Unique")
    sess.run(None, {"x": X})
    (entry,) = probe.take()
    assert entry["fallback"] == RUN_FALLBACK and entry["runs"] == {CPU: 1}
    assert entry["nodes"] == [node("Add", "add", CUDA_EP, 0), node("Unique", "unique", CPU, 0)]


def test_an_ort_without_the_api_is_no_api_on_every_cuda_served_build():
    """An ORT before 1.24: its C session has no get_provider_graph_assignment_info (simulated: a session object
    of our own, built through the census's wrapper as ORT's Python layer builds one)."""
    class Old:
        def get_providers(self):
            return self._providers

    def create(session, providers, *rest):
        session._providers = list(providers)
        session._sess = object()  # a C session without the method

    census = EpCensus(lambda: "t::a")
    census._c = SimpleNamespace(SessionOptions=ort.SessionOptions, get_available_providers=lambda: BOTH)
    built, ran = census.wrap_create(create), census.wrap_run(lambda session: 1)
    s = Old()
    built(s, BOTH)
    assert s._sess_options.get_session_config_entry(placement.RECORD_KEY) == "1"  # asked all the same
    ran(s)
    (entry,) = census.take("t::a")
    assert entry["nodes_unseen"] == placement.NO_API and "nodes" not in entry and entry["runs"] == {CUDA_EP: 1}
    unbound = EpCensus(lambda: "t::a")  # never bound to ORT's module: no options class to ask with
    unbound.wrap_create(create)(Old(), BOTH)
    assert unbound.take("t::a")[0]["nodes_unseen"] == placement.NO_API


def test_with_the_node_census_off_the_options_are_left_alone_and_nothing_is_placed():
    standin.install("serve")
    p = Probe(nodes=False)
    options = ort.SessionOptions()
    try:
        ort.InferenceSession(add_then("Unique"), options, providers=BOTH).run(None, {"x": X})
    finally:
        p.restore()
        standin.uninstall()
    (entry,) = p.take()
    assert entry["runs"] == {CUDA_EP: 1} and "nodes" not in entry and "nodes_unseen" not in entry
    with pytest.raises(RuntimeError, match="does not have configuration"):
        options.get_session_config_entry(placement.RECORD_KEY)


# ---------------------------------------------------------------- the plugin, inline

NODES_SUITE = '''
import unittest
import numpy as np
import onnxruntime as ort
import pytest
from placement_suite import add_then, standin

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
X = np.array([1.0, 2.0, 2.0, 3.0], dtype=np.float32)


@pytest.fixture(autouse=True)
def cuda():
    standin.install("serve")
    yield
    standin.uninstall()


def test_unique():
    sess = ort.InferenceSession(add_then("Unique"), providers=[CUDA, CPU])
    sess.run(None, {"x": X})
    sess.run(None, {"x": X})


class TestOps(unittest.TestCase):
    def test_each(self):
        standin.install("serve")
        try:
            sess = ort.InferenceSession(add_then("Gelu"), providers=[CUDA, CPU])
            sess.run(None, {"x": X})
            for i in range(2):
                with self.subTest(i=i):
                    sess.run(None, {"x": X})
        finally:
            standin.uninstall()
'''


def _inline(pytester, monkeypatch, census: str | None) -> dict:
    pytester.makepyfile(placement_suite=f"import sys\nstandin = sys.modules[{__name__!r}].standin\n"
                                        f"add_then = sys.modules[{__name__!r}].add_then\n")
    pytester.makepyfile(test_nodes=NODES_SUITE)
    report = pytester.path / "report.json"
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
    for name in ("ORT_MATRIX_PROGRESS", "ORT_MATRIX_KEEP", "ORT_MATRIX_DIGEST_FD", "ORT_MATRIX_CUDA_OPTIONS",
                 "CUDA_STANDIN_CPU_OPS", "ORT_MATRIX_EP_CENSUS"):
        monkeypatch.delenv(name, raising=False)
    if census is None:
        monkeypatch.delenv("ORT_MATRIX_NODE_CENSUS", raising=False)
    else:
        monkeypatch.setenv("ORT_MATRIX_NODE_CENSUS", census)
    pytester.inline_run(*PLUGIN).assertoutcome(passed=4)  # 2 tests, 2 subtests
    return json.loads(report.read_text())["tests"]


def test_the_plugin_reports_each_tests_nodes_with_its_subtests_runs_folded_in(pytester, monkeypatch):
    tests = _inline(pytester, monkeypatch, None)
    (unique,) = tests["test_nodes.py::test_unique"]["ep"]
    assert unique["nodes"] == [node("Add", "add", CUDA_EP, 2), node("Unique", "unique", CPU, 2)]
    (gelu,) = tests["test_nodes.py::TestOps::test_each"]["ep"]  # 1 run of its own and 1 in each subtest
    assert gelu["runs"] == {CUDA_EP: 3}
    assert gelu["nodes"] == [node("Add", "add", CUDA_EP, 3), node("com.microsoft.Gelu", "gelu", CUDA_EP, 3)]
    subtests = tests["test_nodes.py::TestOps::test_each"]["subtests"]  # each its own run, kept apart too
    assert [[n["runs"] for n in sub["ep"][0]["nodes"]] for sub in subtests.values()] == [[1, 1], [1, 1]]


def test_the_plugin_with_the_node_census_off_keeps_the_ep_census_alone(pytester, monkeypatch):
    tests = _inline(pytester, monkeypatch, "off")
    (unique,) = tests["test_nodes.py::test_unique"]["ep"]
    assert unique["runs"] == {CUDA_EP: 2} and "nodes" not in unique and "nodes_unseen" not in unique
    assert sys.modules.get("placement_suite") is None  # the inline run's modules are dropped after it

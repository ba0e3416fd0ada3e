"""A baseline made from Results built here, in-process: what a sweep records of each mode, its library and
provenance summaries, without the nox run that tests/test_sweep.py makes. mutmut maps these tests to
store/baseline.py's ModeRecord.of, Baseline.of and the two summaries."""
from __future__ import annotations

import json

import pytest
from helpers import result

from ort_gpu_matrix.judge.counts import Counts, Dispatch
from ort_gpu_matrix.judge.libraries import Libraries
from ort_gpu_matrix.judge.verdicts import Status, TeethCoverage
from ort_gpu_matrix.store.baseline import (
    Baseline,
    BaselineError,
    ModeRecord,
    library_summary,
    provenance_summary,
    stacks_served,
)
from ort_gpu_matrix.store.baseline import TestLine as Line
from ort_gpu_matrix.store.results import Provenance
from ort_gpu_matrix.util import codec

CUDNN, MATH = "CUDNN_FLASH_ATTENTION", "MATH"
AUDIT_A = {"by_name": {"cudnn": {"file": "/l/libcudnn.so.9", "version": 91400}, "cudart": {"file": None}},
           "cudnn_copies": [{"file": "/l/libcudnn.so.9", "file_version": "9.14.0"}, {"file": "/m/libcudnn.so.9"}]}
AUDIT_B = {"by_name": {"cudnn": {"file": "/l/libcudnn.so.9", "version": 91400},
                       "cudart": {"file": "/l/libcudart.so.13"}}, "cudnn_copies": [],
           "stack": [{"library": "cublas", "file": "/l/libcublas.so.13", "cuda_major": 13, "version": "13.1.0.3"},
                     {"library": "cudnn", "file": "/m/libcudnn.so.9", "cuda_major": None, "version": None}]}


def test_a_mode_record_keeps_each_tests_outcome_tiers_and_reruns():
    r = result("normal", {"t::a": "passed", "t::b": "failed", "t::c": "skipped"}, verdict=Status.FAIL,
               counts=Counts(collected=3, passed=1, failed=1, skipped=1),
               dispatch=Dispatch({"t::a": [MATH, CUDNN, MATH], "t::b": [CUDNN]}), reruns={"t::a": 2},
               isolation="restore")
    rec = ModeRecord.of(r)
    assert rec == ModeRecord("fail", {"collected": 3, "passed": 1, "failed": 1, "errors": 0, "skipped": 1, "xfailed": 0,
                                      "xpassed": 0, "subtests_passed": 0, "subtests_failed": 0, "subtests_skipped": 0,
                                      "subtests_xfailed": 0},
                             {"t::a": Line("passed", (CUDNN, MATH), 2), "t::b": Line("failed", (CUDNN,)),
                              "t::c": Line("skipped")}, None,
                             {"pinned": {}, "cudnn_copies": [], "cudnn_by_name": [], "cudart_by_name": [], "cuda_stack": [],
                              "cuda_stacks": []},
                             {"ort": None, "ort_cuda": None, "ort_wheel_sha256": None, "torch": None, "python": None,
                              "host": ""}, "all", "restore")


def test_teeth_coverage_is_recorded_only_when_it_was_checked():
    cov = TeethCoverage(checked=True, tier_tests=3, bitten=1, toothless=2, declared_toothless=["t::z"],
                        undeclared_toothless=["t::b"], bitten_tests=["t::y", "t::a"], scope="cudnn", selected=3)
    rec = ModeRecord.of(result("teeth", {"t::a": "failed"}, teeth_coverage=cov))
    assert rec.teeth == {"bitten": ["t::a", "t::y"], "toothless": ["t::b", "t::z"]} and rec.teeth_scope == "cudnn"
    unchecked = ModeRecord.of(result("teeth", {}, teeth_coverage=TeethCoverage(checked=False, scope="cudnn")))
    assert unchecked.teeth is None and unchecked.teeth_scope == "cudnn"


def test_the_library_summary_joins_every_processs_audit():
    r = result("normal", {}, libraries=Libraries({"libcudnn.so.9": "/p/libcudnn.so.9", "libcudart.so.13": None},
                                                 [AUDIT_A, AUDIT_B, {}]))  # type: ignore[list-item]
    assert library_summary(r) == {
        "pinned": {"libcudnn.so.9": "/p/libcudnn.so.9"},
        "cudnn_copies": ["/l/libcudnn.so.9 (9.14.0)", "/m/libcudnn.so.9 (version unknown)"],
        "cudnn_by_name": ["/l/libcudnn.so.9 (91400)"], "cudart_by_name": ["/l/libcudart.so.13 (None)"],
        "cuda_stack": ["cublas CUDA 13 13.1.0.3 (/l/libcublas.so.13)", "cudnn CUDA ? version unknown (/m/libcudnn.so.9)"],
        # a result from before tests named their process: every audit's stack is one of the run's
        "cuda_stacks": [[], ["cublas CUDA 13 13.1.0.3 (/l/libcublas.so.13)",
                             "cudnn CUDA ? version unknown (/m/libcudnn.so.9)"]]}


def test_each_test_is_served_by_its_own_processs_stack():
    """Two workers that mapped different stacks; the controller ran no test, so its audit serves none."""
    one = [{"library": "cudart", "file": "/a/libcudart.so.12", "cuda_major": 12, "version": "12.8.90"}]
    two = one + [{"library": "cublas", "file": "/b/libcublas.so.13", "cuda_major": 13, "version": "13.1"}]
    audits = [{"process": "gw0", "stack": one}, {"process": "gw1", "stack": two}, {"process": "controller", "stack": []}]
    r = result("normal", {}, libraries=Libraries({}, audits, {"t::a": "gw0", "t::b": "gw1", "t::c": "gw1"}))  # type: ignore[arg-type]
    assert stacks_served(r) == ([["cublas CUDA 13 13.1 (/b/libcublas.so.13)", "cudart CUDA 12 12.8.90 (/a/libcudart.so.12)"],
                                 ["cudart CUDA 12 12.8.90 (/a/libcudart.so.12)"]],
                                {"t::a": 1, "t::b": 0, "t::c": 0})  # the stack of the most tests first
    same = result("normal", {}, libraries=Libraries({}, audits[:1] + [{"process": "gw1", "stack": one}],
                                                    {"t::a": "gw0", "t::b": "gw1"}))  # type: ignore[arg-type]
    assert stacks_served(same) == ([["cudart CUDA 12 12.8.90 (/a/libcudart.so.12)"]], {})  # one stack served all


def test_the_provenance_summary_names_ort_torch_python_and_host():
    p = Provenance("3.11.9", "/v/bin/python", {"distribution": "onnxruntime-gpu", "version": "1.32.0", "package_name": None,
                                               "cuda_version": "13.0", "cudnn_version": None},
                   {"version": "2.9.0", "cuda": "12.8"}, "abc123")
    assert provenance_summary(result("normal", {}, provenance=p, host="h1")) == {
        "ort": "onnxruntime-gpu 1.32.0", "ort_cuda": "13.0", "ort_wheel_sha256": "abc123",
        "torch": "2.9.0 (cuda 12.8)", "python": "3.11.9", "host": "h1"}


def test_a_baseline_of_results_holds_every_cell_and_mode():
    rs = [result("normal", {"t::a": "passed"}), result("teeth", {"t::a": "failed"}),
          result("normal", {"t::b": "passed"}, name="c2")]
    b = Baseline.of(rs, "rel")
    assert b.name == "rel" and b.modes() == {("c1", "normal"), ("c1", "teeth"), ("c2", "normal")}
    assert b.cells["c2"]["normal"].tests == {"t::b": Line("passed")}
    assert b.cells["c1"]["teeth"] == ModeRecord.of(rs[1])


def test_a_baseline_is_written_as_sorted_one_space_json_and_reads_back_whole(tmp_path):
    rec = ModeRecord("pass", {"passed": 1, "collected": 1}, {"t::b": Line("passed"), "t::a": Line("failed", (MATH,))},
                     None, {"cudnn_by_name": ["/l/libcudnn.so.9 (91400)"]}, {"host": "h1"}, "all", "restore")
    b = Baseline({"c1": {"normal": rec}}, "rel", "2026-12-01T00:00:00+00:00")
    assert b.to_json() == "\n".join([
        "{", ' "baseline_version": 3,', ' "cells": {', '  "c1": {', '   "normal": {', '    "counts": {',
        '     "collected": 1,', '     "passed": 1', "    },", '    "isolation": "restore",', '    "library": {',
        '     "cudnn_by_name": [', '      "/l/libcudnn.so.9 (91400)"', "     ]", "    },", '    "provenance": {',
        '     "host": "h1"', "    },", '    "teeth": null,', '    "tests": {', '     "t::a": "failed MATH",',
        '     "t::b": "passed"', "    },", '    "verdict": "pass"', "   }", "  }", " },",
        ' "created": "2026-12-01T00:00:00+00:00",', ' "name": "rel"', "}", ""])
    b.save(tmp_path / "b.json")
    assert Baseline.load(tmp_path / "b.json") == b
    old = codec.decode(ModeRecord, {"verdict": "fail", "counts": {}, "tests": {}})  # saved before isolation and scope
    assert old == ModeRecord("fail", {}, {}, None, {}, {}, "all", "unknown")
    assert Baseline.of([]).name == "" and Baseline.of([], "x").name == "x"


def test_a_baseline_that_cannot_be_written_says_why(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(BaselineError) as err:
        Baseline({}, "n", "t").save(tmp_path / "dir.json")
    assert str(err.value) == f"{tmp_path / 'dir.json'}: cannot be written (Is a directory)"


def test_a_baseline_of_the_wrong_shape_is_refused_whole_and_a_bare_one_reads(tmp_path):
    def load(data):
        p = tmp_path / "b.json"
        p.write_text(json.dumps(data))
        return Baseline.load(p)

    mode = {"verdict": "pass", "counts": {}, "tests": {}}
    with pytest.raises(BaselineError) as err:
        load({"baseline_version": 1, "cells": {"c": {"normal": {**mode, "tests": ["t::a"]}}}})
    assert "is not a well-formed baseline: cells.c.normal.tests: " in str(err.value)
    three = {"t::a": "won", "t::b": "won", "t::c": "won"}
    with pytest.raises(BaselineError) as err:
        load({"baseline_version": 1, "cells": {"c": {"normal": {**mode, "tests": three}}}})
    assert str(err.value).endswith("cells.c.normal.tests.t::c: 'won' is not an outcome (passed, failed, skipped, error, "
                                   "xfailed, xpassed); re-save it with `nox -s sweep -- --save-baseline NAME`")
    bare = load({"baseline_version": 1, "cells": {"c": {"normal": mode}}})
    assert (bare.name, bare.created) == ("", "") and bare.cells["c"]["normal"].tests == {}


def test_a_reruns_field_holds_one_whole_number():
    with pytest.raises(ValueError, match="reruns= must be given once, as a whole number"):
        Line.decode("passed reruns=1=2")
    assert Line.decode("passed MATH reruns=12") == Line("passed", (MATH,), 12)


def test_a_record_names_each_tests_eps_and_says_the_census_was_taken():
    from ort_gpu_matrix.judge.eps import EpCensus, EpTest

    ep = EpCensus(taken=True, tests={"t::a": EpTest({"CPUExecutionProvider": 1, "CUDAExecutionProvider": 2}),
                                     "t::b": EpTest({})})
    rec = ModeRecord.of(result("normal", {"t::a": "passed", "t::b": "passed", "t::c": "passed"}, ep=ep))
    assert [rec.tests[n].eps for n in ("t::a", "t::b", "t::c")] == [("CUDA", "CPU"), (), None]
    assert rec.ep_census is True
    assert ModeRecord.of(result("normal", {"t::a": "passed"})).ep_census is False


def test_a_record_names_the_stack_that_served_each_test_where_the_processes_differ():
    def lib(name: str, version: str) -> dict:
        return {"library": name, "cuda_major": 12, "version": version, "file": f"/l/{name}-{version}.so"}

    audits = [{"process": "gw0", "stack": [lib("cudnn", "9.1")]}, {"process": "gw1", "stack": [lib("cudnn", "9.8")]},
              {"process": "controller", "stack": [lib("cudnn", "0.0")]}]  # ran no test: left out
    libraries = Libraries(audits=audits, processes={"t::a": "gw0", "t::b": "gw1", "t::c": "gw1"})
    summary = library_summary(result("normal", {"t::a": "passed", "t::b": "passed", "t::c": "passed"},
                                     libraries=libraries))
    nine_eight, nine_one = "cudnn CUDA 12 9.8 (/l/cudnn-9.8.so)", "cudnn CUDA 12 9.1 (/l/cudnn-9.1.so)"
    assert summary["cuda_stacks"] == [[nine_eight], [nine_one]]  # the stack most tests had first
    assert summary["stack_of"] == {"t::a": 1, "t::b": 0, "t::c": 0}
    one = Libraries(audits=audits[:1], processes={"t::a": "gw0"})
    assert "stack_of" not in library_summary(result("normal", {"t::a": "passed"}, libraries=one))

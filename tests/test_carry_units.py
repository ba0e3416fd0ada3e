"""carry.py's choice and reads.py's answers, in-process: which tests may change, and why; what a census covers."""
from ort_gpu_matrix.drive.carry import changing
from ort_gpu_matrix.judge.outcomes import TEARDOWN
from ort_gpu_matrix.judge.reads import ReadCensus, covers

CANARY = "ORT_TEST_REQUIRE_CUDNN_SDPA"


def census(tests=None, scopes=None, where=None):
    return ReadCensus(True, [CANARY], tests or {}, scopes or {}, where or {})


def test_a_test_with_a_space_in_its_parameter_is_a_test_and_a_teardown_error_is_its_tests():
    outcomes = {"f.py::test_a[x y]": "passed", f"f.py::test_b{TEARDOWN}": "error", "f.py::test_b": "passed",
                "f.py::T::test_c": "passed", "f.py::T::test_c (i=1)": "skipped"}
    why = changing(census({"f.py::test_a[x y]": [CANARY]}), outcomes, (CANARY,))
    assert why == {"f.py::test_a[x y]": f"it read {CANARY}", "f.py::T::test_c": "a subtest of it skipped there"}


def test_each_way_a_census_says_a_test_may_change():
    c = census({"f.py::t1": ["*"], "f.py::t2": ["OTHER"]}, {"g.py": [CANARY], "h.py::K": ["*"]},
               {"g.py": ["/x/g.py:3"], "h.py::K": ["/x/h.py:9"]})
    assert c.changes("f.py::t1", (CANARY,)).startswith("it read the whole environment")
    assert c.changes("f.py::t2", (CANARY,)) is None  # another variable: it cannot change
    assert c.changes("g.py::t", (CANARY,)) == f"{CANARY} was read at /x/g.py:3, for every test of g.py"
    assert c.changes("h.py::K::t", (CANARY,)).startswith("the whole environment")
    assert c.changes("h.py::Kx::t", (CANARY,)) is None  # another class: a prefix is a node id, not a string
    assert c.changes("f.py::t2", ("NOT_WATCHED",)) == "NOT_WATCHED was not watched"
    assert ReadCensus().changes("f.py::t", (CANARY,)) == "no census of its reads"
    assert census(scopes={"": [CANARY]}).wide("", (CANARY,)) == f"{CANARY} was read, for every test"
    assert covers("", "any.py::t") and covers("a.py", "a.py::t") and not covers("a.py", "a.py2::t")


def test_a_census_is_read_from_the_probe_report_as_it_stands():
    assert ReadCensus.of(None) == ReadCensus() and not ReadCensus.of(None).taken
    assert ReadCensus.of({"tests": {}}) == ReadCensus()  # a report of no census (version 5, or nothing watched)
    report = {"tests": {"f.py::b": {"env_reads": ["*", CANARY]}, "f.py::a": {"env_reads": []}, "f.py::c": {}},
              "env_reads": {"watched": ["Z", CANARY], "scopes": [
                  {"scope": "", "names": ["*"], "where": ["worker gw1 went down"]},
                  {"scope": "g.py", "names": [CANARY, "*"], "where": ["/x/g.py:2", "/x/g.py:5"]}]}}
    got = ReadCensus.of(report)
    assert got == ReadCensus(True, [CANARY, "Z"], {"f.py::b": ["*", CANARY]}, {"": ["*"], "g.py": [CANARY, "*"]},
                             {"": ["worker gw1 went down"], "g.py": ["/x/g.py:2", "/x/g.py:5"]})
    assert got.changes("g.py::t", (CANARY,)) == ("the whole environment (copied, iterated or inherited by a child "
                                                 "process) was read at worker gw1 went down, for every test")
    both = f"{CANARY} and the whole environment (copied, iterated or inherited by a child process)"
    assert got.wide("g.py", (CANARY,)) == f"{both} was read at /x/g.py:2, for every test of g.py"
    assert got.wide("g.py", ("Y",)).startswith("the whole environment") and got.wide("h.py", (CANARY,)) is None
    partial = ReadCensus(True, [CANARY], {}, {"g.py": [CANARY, "*"]}, {"g.py": ["/x/g.py:2"]})  # sites lost
    assert partial.wide("g.py", (CANARY,)) == f"{both} was read, for every test of g.py"
    assert got.changes("f.py::b", (CANARY,)) == f"it read {both}"

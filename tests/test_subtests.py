"""Subtests, end to end on CPU: real nox sessions over the fixture suite subtests/ (unittest `self.subTest` and
pytest's `subtests` fixture, each case a session that prints its tier), with and without xdist, under pytest 9
(the shared venvs) and pytest 8 (a venv of its own); then calibrate, a sweep against a baseline, and a suite's env."""
import json
import os
import subprocess
import sys

import pytest
from helpers import PY, REPO, SUITES, matrix_head, run_dir, suite_head
from test_bisect import series  # noqa: F401  (the fixture series of re-versioned CPU wheels)

CELL = f"t-{PY}-x"
DTYPES = "test_subtests.py::TestScatterLike::test_dtypes"
SHAPES = "test_subtests.py::TestScatterLike::test_one_session_many_runs"
FIXTURE = "test_fixture_subtests.py::test_fixture_cases"
FILES = ["test_subtests.py", "test_fixture_subtests.py"]


def matrix(tmp_path, modes=("normal",), env=None, extra="", files=FILES, tools=None, root=SUITES / "subtests"):
    env = {"SUBTESTS_BREAK": "", "SUBTESTS_SKIP": "", **(env or {})}
    text = (matrix_head(prefix="t", suite="s", modes=list(modes)) + suite_head("s", files)).format(py=PY, root=root)
    if tools is not None:
        text = text.replace("pythons = [", f"tools = {json.dumps(tools)}\npythons = [", 1)
    text += "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }\n" + extra
    (tmp_path / "m.toml").write_text(text)
    return tmp_path / "m.toml"


def nox(tmp_path, venvs, *args, env=None):
    full = {**os.environ, "MATRIX_TOML": str(tmp_path / "m.toml"), "MATRIX_RESULTS": str(tmp_path / "results"),
            "MATRIX_VENVS": str(venvs), "MATRIX_BASELINES": str(tmp_path / "baselines"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args], env=full,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)


def result(tmp_path, mode="normal"):
    return json.loads((tmp_path / "results" / f"{CELL}-{mode}.json").read_text())


def witnesses_agree(r):
    lying = [x for x in r["reasons"] if "disagree" in x or "no failure was recorded" in x or "with an outcome" in x]
    assert lying == [], r["reasons"]


def test_passing_subtests_pass_every_mode_each_judged_apart(tmp_path, venvs):
    matrix(tmp_path, modes=("normal", "require_cudnn", "teeth"))
    proc = nox(tmp_path, venvs, "-s", CELL)
    assert proc.returncode == 0, proc.stdout[-4000:]
    normal = result(tmp_path)
    c = normal["counts"]
    assert (c["passed"], c["failed"], c["subtests_passed"], c["subtests_failed"]) == (4, 0, 9, 0), c
    assert f"{DTYPES} (dtype='bf16', i=1)" in normal["outcomes"]
    assert normal["outcomes"][f"{FIXTURE} [case] (n=2)"] == "passed"
    # a session built outside the subtests and run in each: each run is its subtest's, none its test's own
    tiers = normal["dispatch"]["tests"]
    assert tiers[f"{SHAPES} [shape] (shape='small')"] == ["CUDNN_FLASH_ATTENTION"]
    assert SHAPES not in tiers and normal["dispatch"]["totals"] == {"CUDNN_FLASH_ATTENTION": 10}  # 9 subtests, 1 test
    teeth = result(tmp_path, "teeth")["teeth_coverage"]
    assert (teeth["tier_tests"], teeth["bitten"], teeth["toothless"]) == (10, 10, 0), teeth
    assert "subtests: 9 passed, 0 failed, 0 skipped" in proc.stdout


@pytest.mark.parametrize("workers", [(), ("-n", "2", "-v")], ids=["one process", "xdist, verbose"])
def test_a_failing_subtest_fails_its_test_and_is_named_by_its_id(tmp_path, venvs, workers):
    # verbose: pytest's summary line then counts passing and skipped subtests too, and the probe is checked on them
    args = f"pytest_args = {json.dumps(list(workers))}\n" if workers else ""
    matrix(tmp_path, env={"SUBTESTS_BREAK": "fp16/1;shape/large;fixture/2", "SUBTESTS_SKIP": "bf16/0"}, extra=args)
    proc = nox(tmp_path, venvs, "-s", CELL)
    assert proc.returncode != 0, proc.stdout[-4000:]
    r = result(tmp_path)
    witnesses_agree(r)
    c = r["counts"]
    assert (c["passed"], c["failed"], c["subtests_failed"], c["subtests_skipped"]) == (1, 3, 3, 1), c
    unexpected = next(x for x in r["reasons"] if "unexpected failure(s)" in x)
    assert unexpected.startswith("3 unexpected failure(s)")  # the subtests, not their tests again
    for sub in (f"{DTYPES} (dtype='fp16', i=1)", f"{SHAPES} [shape] (shape='large')", f"{FIXTURE} [case] (n=2)"):
        assert f"{sub} failed: AssertionError: this case broke" in unexpected
        assert r["outcomes"][sub] == "failed"
    assert r["outcomes"][DTYPES] == "failed"  # pytest 9 calls a unittest test with failing subtests passed
    assert any(f"{DTYPES} (dtype='bf16', i=0): no kernel for bf16/0" in x for x in r["reasons"])


def test_calibrate_writes_the_failing_subtests_and_the_next_run_is_green(tmp_path, venvs):
    broken = {"SUBTESTS_BREAK": "fp16/1;fixture/0;fixture/1;fixture/2"}
    matrix(tmp_path, env=broken, extra='expect_file = "expect/s.toml"\n')
    proc = nox(tmp_path, venvs, "-s", "calibrate", "--", CELL)
    assert proc.returncode == 0, proc.stdout[-4000:]
    text = (tmp_path / "expect" / "s.toml").read_text()
    # one subtest alone: a rule naming it; every subtest of a test failing the same way: one rule for the test
    assert '"^test_subtests\\\\.py::TestScatterLike::test_dtypes \\\\(dtype=\'fp16\', i=1\\\\)$"' in text, text
    assert '{ test = "^test_fixture_subtests\\\\.py::test_fixture_cases$", subtests = true,' in text, text
    again = nox(tmp_path, venvs, "-s", CELL)
    assert again.returncode == 0, again.stdout[-4000:]
    fixed = nox(tmp_path, venvs, "-s", CELL, env={})  # the same file, nothing broken: the rules do not go stale silently
    assert fixed.returncode == 0
    matrix(tmp_path, env={"SUBTESTS_BREAK": "fp16/1;fixture/0;fixture/1;fixture/2;bf16/1"},
           extra='expect_file = "expect/s.toml"\n')
    newly = nox(tmp_path, venvs, "-s", CELL)
    assert newly.returncode != 0 and f"{DTYPES} (dtype='bf16', i=1) failed" in newly.stdout  # a new one still fails


def test_a_rule_for_a_test_covers_its_subtests_only_when_it_says_so(tmp_path, venvs):
    rule = '[suite.s.expect.normal]\nknown_failures = [{{ test = "test_dtypes$", reason = "r"{more} }}]\n'
    matrix(tmp_path, env={"SUBTESTS_BREAK": "fp16/1"}, extra=rule.format(more=""))
    plain = nox(tmp_path, venvs, "-s", CELL)
    assert plain.returncode != 0 and f"{DTYPES} (dtype='fp16', i=1) failed" in plain.stdout, plain.stdout[-3000:]
    matrix(tmp_path, env={"SUBTESTS_BREAK": "fp16/1"}, extra=rule.format(more=", subtests = true"))
    said = nox(tmp_path, venvs, "-s", CELL)
    assert said.returncode == 0, said.stdout[-3000:]


def test_a_sweep_names_a_subtest_regression_and_confirms_it_by_rerunning_its_test(tmp_path, venvs):
    matrix(tmp_path)
    base = nox(tmp_path, venvs, "-s", "sweep", "--", "--save-baseline", "before")
    assert base.returncode == 0, base.stdout[-4000:]
    matrix(tmp_path, env={"SUBTESTS_BREAK": "bf16/1"})
    proc = nox(tmp_path, venvs, "-s", "sweep", "--", "--baseline", "before", "--confirm", "1")
    assert proc.returncode != 0, proc.stdout[-4000:]
    doc = json.loads((tmp_path / "results" / "sweep.json").read_text())
    tests = {(c["kind"], c["test"]) for c in doc["regressions"]}
    assert ("test", f"{DTYPES} (dtype='bf16', i=1)") in tests, doc["regressions"]
    assert f"confirm: {CELL}-normal: rerun 1 of 1, 1 test(s)" in proc.stdout  # the subtest's test, once
    assert "bf16', i=1)" in proc.stdout and "not reproduced" not in proc.stdout
    # a tier that changed inside a subtest, and a subtest's session served by the CPU now: each named by its id
    for env, kind in (({"FAKE_SDPA_TIER": "FLASH_ATTENTION"}, "tier"), ({"CUDA_STANDIN_MODE": "log_and_skip"}, "ep")):
        matrix(tmp_path, env=env)
        assert nox(tmp_path, venvs, "-s", "sweep", "--", "--baseline", "before", "--confirm", "0").returncode != 0
        changed = {c["test"] for c in json.loads((tmp_path / "results" / "sweep.json").read_text())["regressions"]
                   if c["kind"] == kind}
        assert {f"{DTYPES} (dtype='fp16', i=0)", f"{FIXTURE} [case] (n=1)"} <= changed, (kind, changed)


@pytest.fixture(scope="session")
def pytest8_venvs(tmp_path_factory):
    """Venvs with pytest 8, another fingerprint than the shared ones: built once per run, never in their dir."""
    return run_dir(tmp_path_factory, "venvs-pytest8")


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one process", "xdist"])
def test_under_pytest_8_a_failing_subtest_fails_its_whole_test(tmp_path, pytest8_venvs, workers):
    args = f"pytest_args = {json.dumps(list(workers))}\n" if workers else ""
    matrix(tmp_path, env={"SUBTESTS_BREAK": "fp16/0"}, files=["test_subtests.py"],
           tools=["pytest==8.4.2", "pytest-xdist"], extra=args)
    proc = nox(tmp_path, pytest8_venvs, "-s", CELL)
    assert proc.returncode != 0, proc.stdout[-4000:]
    r = result(tmp_path)
    witnesses_agree(r)
    assert r["counts"]["subtests_failed"] == 0 and r["counts"]["failed"] == 1
    assert f"{DTYPES} failed: AssertionError: this case broke" in proc.stdout  # the test: what pytest 8 reports
    assert "pytest-8.4.2" in " ".join(os.listdir(r["venv"]["path"] + f"/lib/python{PY}/site-packages"))


def test_a_suite_env_reaches_the_test_process_as_written_the_empty_string_included(tmp_path, venvs):
    log = tmp_path / "env.json"
    matrix(tmp_path, env={"SUBTESTS_ENV_LOG": str(log), "SUBTESTS_ENV_PROBE": "", "CUDA_VISIBLE_DEVICES": ""},
           files=["test_env.py"])
    proc = nox(tmp_path, venvs, "-s", CELL, env={"SUBTESTS_ENV_PROBE": "inherited", "CUDA_VISIBLE_DEVICES": "7"})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert json.loads(log.read_text()) == {"CUDA_VISIBLE_DEVICES": "", "SUBTESTS_ENV_PROBE": ""}
    r = result(tmp_path)
    assert r["env"]["CUDA_VISIBLE_DEVICES"] == "" and r["env"]["SUBTESTS_ENV_PROBE"] == ""  # read from the process
    assert r["env"]["LD_PRELOAD"] is None  # nothing pinned: the harness set none, and the process had none
    assert r["gpu"]["cuda_visible_devices"] == ""


@pytest.mark.parametrize("workers, process", [((), "controller"), (("-n", "2"), "gw0")], ids=["one process", "xdist"])
def test_an_env_the_test_process_did_not_get_as_set_fails_the_run(tmp_path, venvs, workers, process):
    log = tmp_path / "env.json"
    args = f"pytest_args = {json.dumps(list(workers))}\n" if workers else ""
    matrix(tmp_path, env={"SUBTESTS_ENV_LOG": str(log), "SUBTESTS_ENV_PROBE": ""}, files=["test_env_changed.py"],
           root=SUITES / "subtests_envconftest", extra=args)
    text = (tmp_path / "m.toml").read_text().replace('pythonpath = [', 'pythonpath = ["../subtests", ', 1)
    (tmp_path / "m.toml").write_text(text)
    proc = nox(tmp_path, venvs, "-s", CELL)
    assert proc.returncode != 0, proc.stdout[-4000:]
    r = result(tmp_path)
    assert any(x.startswith("the environment set for the test process did not reach it: ") and
               f"SUBTESTS_ENV_PROBE='' ({process} had 'changed by conftest')" in x for x in r["reasons"]), r["reasons"]
    assert r["env"]["SUBTESTS_ENV_PROBE"] == "changed by conftest"  # what the tests had, not what was meant


def test_a_sweep_gives_a_suite_that_sets_cuda_visible_devices_no_gpu_slot(tmp_path, venvs):
    log = tmp_path / "slots.jsonl"
    text = (matrix_head(prefix="t", suite="slots", modes=["normal"], libs=["a", "b"]) + suite_head("slots", [
        "test_sleep.py"]) + 'env = {{ SLOT_LOG = "{log}", SLOT_SLEEP = "0" }}\n' + suite_head("hidden", ["test_sleep.py"])
        + 'env = {{ SLOT_LOG = "{log}", SLOT_FAIL = "1", SLOT_SLEEP = "0", CUDA_VISIBLE_DEVICES = "" }}\n'
            ).format(py=PY, root=SUITES / "slots", log=log)
    text += "[pairing]\ninclude = [\n" + "".join(
        f'  {{ python = "{PY}", ort = "cpu", torch = "none", libs = "{libs}"{suite} }},\n'
        for libs, suite in (("a", ""), ("b", ', suite = "hidden"'))) + "]\n"
    (tmp_path / "m.toml").write_text(text)
    path = ":".join(d for d in os.environ["PATH"].split(":") if not os.path.exists(os.path.join(d, "nvidia-smi")))
    # cell b fails on purpose: its confirmation rerun (after the slots) must hide the GPU as its first run did
    proc = nox(tmp_path, venvs, "-s", "sweep", "--", "--gpus", "0", "--confirm", "1", env={"PATH": path})
    assert proc.returncode != 0 and f"confirm: t-{PY}-b-normal: rerun 1 of 1" in proc.stdout, proc.stdout[-4000:]
    assert (f"1 mode run(s) get no GPU slot: their suite sets CUDA_VISIBLE_DEVICES and decides their GPU itself "
            f"(t-{PY}-b-normal: '')") in proc.stdout, proc.stdout[-4000:]
    ends = [r["cuda_visible_devices"] for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "end"]
    assert sorted(ends) == ["", "", "0"], ends  # the slot's GPU for a; the suite's hidden one for b, run and rerun
    hidden = json.loads((tmp_path / "results" / f"t-{PY}-b-normal.json").read_text())
    assert hidden["env"]["CUDA_VISIBLE_DEVICES"] == "" and hidden["gpu"]["cuda_visible_devices"] == ""


def test_bisect_follows_a_subtest_to_the_build_that_broke_it(harness, series):  # noqa: F811  (the fixture)
    harness.venvs = harness.tmp / "own-venvs"  # these venvs hold the series' builds, which no other test has
    env = {"MATRIX_BASELINES": str(harness.tmp / "baselines"), "BISECT_ENV_PROBE": "inherited"}

    def write(version):
        harness.write(["test_series_subtests.py"], root=SUITES / "bisect", pythonpath=(".", ".."),
                      ort=f"onnxruntime=={version}", matrix_extra=f'offline = true\nwheelhouse = ["{series}"]',
                      suite_extra='env = { BISECT_ENV_PROBE = "" }')  # each step's run gets it as written too
    write("1.40.0")
    assert harness.nox("-s", "sweep", "--", "--save-baseline", "b0", env=env).proc.returncode == 0
    write("1.40.6")
    assert harness.nox("-s", "sweep", "--", "--baseline", "b0", env=env).proc.returncode != 0
    case = "test_series_subtests.py::TestCases::test_cases (i=1)"
    run = harness.nox("-s", "bisect", "--", "--between", "1.40.0", "1.40.6", env=env)
    assert run.proc.returncode == 0, run.output[-3000:]
    record = json.loads((harness.results / "bisect" / f"{CELL}-normal-regressions" / "bisect.json").read_text())
    assert case in record["followed"], record["followed"]
    located = {t: (g["last_good"], g["first_bad"]) for g in record["groups"] for t in g["tests"]}
    assert located[case] == ("1.40.1", "1.40.2"), located
    step = next(s for s in record["steps"] if s["build"]["version"] == "1.40.2")
    assert step["lines"][case][0] == "failed"  # judged by its own id, from a run of its test
    (stored,) = [json.loads(p.read_text()) for p in harness.results.rglob("result.json")
                 if p.parent.name == step["run_ids"][0]]
    assert stored["env"]["BISECT_ENV_PROBE"] == ""  # the suite's "" over the caller's value, in a bisect step

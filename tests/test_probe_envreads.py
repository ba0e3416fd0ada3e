"""The probe's census of reads of the watched variables, through pytester: real pytest runs, with and without xdist.

A read belongs to its test, to a wide fixture's scope, to the module being collected, or to every test; reading
the whole environment and starting a child process count as reading every variable ("*"). pytest's, its
plugins' and the probe's own reads are never the tests'."""
import json
import os

import pytest
from helpers import REPO

PLUGIN = ("-p", "ort_matrix_probe.plugin", "-p", "no:cacheprovider")
CANARY = "MY_CANARY"

CONFTEST = '''
import os
import pytest

@pytest.fixture(scope="module")
def module_flag():
    return os.environ.get("MY_CANARY")

@pytest.fixture(scope="session")
def session_flag():
    return os.getenv("MY_CANARY")

@pytest.fixture
def function_flag():
    return os.getenv("MY_CANARY")
'''

READERS = '''
import multiprocessing
import os
import subprocess
import sys
import unittest

import helper


def test_item():
    return os.environ["MY_CANARY"] if "MY_CANARY" in os.environ else None

def test_get():
    os.environ.get("MY_CANARY")

def test_getenv():
    os.getenv("MY_CANARY")

def test_in():
    assert ("MY_CANARY" in os.environ) in (True, False)

def test_bytes():
    os.environb.get(b"MY_CANARY")

def test_through_a_helper():
    helper.flag()

def test_copy():
    os.environ.copy()

def test_items():
    list(os.environ.items())

def test_subprocess():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_system():
    os.system("true")

def test_subprocess_own_env():  # the child holds only what it is given: nothing of os.environ
    subprocess.run([sys.executable, "-c", "pass"], check=True, env={"LC_ALL": "C"})

def test_subprocess_copied_env():  # ... unless it is given a copy of it: read as it is copied
    subprocess.run([sys.executable, "-c", "pass"], check=True, env={**os.environ, "LC_ALL": "C"})

def test_subprocess_named_env():
    subprocess.run([sys.executable, "-c", "pass"], check=True, env={"X": os.environ.get("MY_CANARY", "")})

def test_posix_spawn_inherits():
    os.waitpid(os.posix_spawn("/bin/true", ["true"], os.environ), 0)

def test_posix_spawn_own_env():
    os.waitpid(os.posix_spawn("/bin/true", ["true"], {"LC_ALL": "C"}), 0)

def test_find_library():  # torch's import does this: `ldconfig -p`, started with an environment of its own
    import ctypes.util
    ctypes.util.find_library("c")

def _child():
    pass

def test_multiprocessing():
    p = multiprocessing.get_context("spawn").Process(target=_child)
    p.start()
    p.join()

def test_other_variable():
    os.environ.get("HOME")
    os.environ["MY_OTHER"] = "1"
    del os.environ["MY_OTHER"]

def test_function_fixture(function_flag):
    pass

def test_module_fixture(module_flag):
    pass

def test_plain():
    pass


class TestClassWide(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.flag = os.environ.get("MY_CANARY")

    def test_one(self):
        pass


class TestSubtest(unittest.TestCase):
    def test_inside(self):
        with self.subTest(i=1):
            os.getenv("MY_CANARY")

    def test_quiet(self):
        with self.subTest(i=1):
            pass
'''

AT_IMPORT = '''
import os
FLAG = os.getenv("MY_CANARY")

def test_a():
    pass

def test_b():
    pass
'''

QUIET = '''
def test_quiet(session_flag):
    pass

def test_untouched():
    pass
'''

HELPER = '''
import os

def flag():
    return os.environ.get("MY_CANARY")
'''


@pytest.fixture
def run(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("ORT_MATRIX_WATCH_ENV", json.dumps([CANARY]))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # as the harness runs them: no stray plugin's reads
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_readers=READERS, test_at_import=AT_IMPORT, test_quiet=QUIET, helper=HELPER)

    def go(*args):
        report = pytester.path / f"report{len(args)}.json"
        monkeypatch.setenv("ORT_MATRIX_REPORT", str(report))
        result = pytester.runpytest_subprocess(*PLUGIN, "-p", "xdist.plugin", *args)
        return result, json.loads(report.read_text())
    return go


def reads_of(report):
    return {nodeid: t.get("env_reads", []) for nodeid, t in report["tests"].items()}


def scopes_of(report):
    return {s["scope"]: s["names"] for s in report["env_reads"]["scopes"]}


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_each_way_of_reading_is_counted_where_it_belongs(run, xdist):
    result, report = run(*xdist)
    result.assert_outcomes(passed=28)
    assert report["report_version"] == 6 and report["env_reads"]["watched"] == [CANARY]
    reads = reads_of(report)
    for name in ("test_item", "test_get", "test_getenv", "test_in", "test_bytes", "test_through_a_helper",
                 "test_function_fixture"):
        assert reads[f"test_readers.py::{name}"] == [CANARY], name
    for name in ("test_copy", "test_items", "test_subprocess", "test_system", "test_multiprocessing",
                 "test_subprocess_copied_env", "test_posix_spawn_inherits"):
        assert reads[f"test_readers.py::{name}"] == ["*"], name
    assert reads["test_readers.py::test_subprocess_named_env"] == [CANARY]
    for own in ("test_subprocess_own_env", "test_posix_spawn_own_env", "test_find_library"):
        assert reads[f"test_readers.py::{own}"] == [], own  # a child given an environment of its own
    assert reads["test_readers.py::TestSubtest::test_inside"] == [CANARY]  # a subtest's read is its test's
    for quiet in ("test_other_variable", "test_module_fixture", "test_plain", "TestClassWide::test_one",
                  "TestSubtest::test_quiet"):
        assert reads[f"test_readers.py::{quiet}"] == [], quiet
    assert all(r == [] for n, r in reads.items() if not n.startswith("test_readers.py"))
    scopes = scopes_of(report)
    assert scopes["test_at_import.py"] == [CANARY]  # read as the module was imported: every test of it
    assert scopes["test_readers.py"] == [CANARY]  # the module-scoped fixture's
    assert scopes["test_readers.py::TestClassWide"] == [CANARY]  # setUpClass: the class's
    assert scopes[""] == [CANARY], report["env_reads"]  # the session fixture's: every test
    assert set(scopes) == {"", "test_at_import.py", "test_readers.py", "test_readers.py::TestClassWide"}
    where = {s["scope"]: s["where"] for s in report["env_reads"]["scopes"]}
    assert where["test_at_import.py"][0].endswith("test_at_import.py:2")  # pytester drops the leading newline
    session_line = CONFTEST.strip().splitlines().index("def session_flag():") + 2
    assert where[""][0].endswith(f"conftest.py:{session_line}")


def test_a_conftest_read_at_its_import_belongs_to_every_test(run, pytester):
    pytester.makeconftest(CONFTEST + '\nos.environ.get("MY_CANARY")\n')
    result, report = run("test_quiet.py", "-k", "test_untouched")
    result.assert_outcomes(passed=1)
    assert scopes_of(report) == {"": [CANARY]}


def test_without_watched_names_no_census_is_taken_and_nothing_is_watched(run, monkeypatch):
    monkeypatch.delenv("ORT_MATRIX_WATCH_ENV")
    result, report = run("-k", "test_get or test_copy")  # test_get, test_getenv, test_copy
    result.assert_outcomes(passed=3)
    assert "env_reads" not in report
    assert all("env_reads" not in t for t in report["tests"].values())


def test_the_environment_is_the_same_object_and_behaves_as_before(pytester, monkeypatch):
    """The watch changes nothing a test sees: os.environ is the same object, its type's name the same, and writes,
    deletes and putenv go through as before; the watch is gone once pytest is done (pytest.main in-process)."""
    import os
    monkeypatch.setenv("ORT_MATRIX_WATCH_ENV", json.dumps([CANARY]))
    monkeypatch.setenv("ORT_MATRIX_REPORT", str(pytester.path / "r.json"))
    monkeypatch.delenv("ORT_MATRIX_CUDA_OPTIONS", raising=False)
    before, kind = id(os.environ), type(os.environ)
    pytester.makepyfile(test_same=f'''
import os, subprocess, sys
def test_same():
    assert id(os.environ) == {before} and type(os.environ).__name__ == "_Environ"
    os.environ["MY_CANARY"] = "1"
    assert os.getenv("MY_CANARY") == "1"
    out = subprocess.run([sys.executable, "-c", "import os; print(os.environ['MY_CANARY'])"], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "1"
    del os.environ["MY_CANARY"]
    assert "MY_CANARY" not in os.environ
''')
    result = pytester.runpytest_inprocess(*PLUGIN)
    result.assert_outcomes(passed=1)
    assert type(os.environ) is kind and id(os.environ) == before
    import subprocess
    assert subprocess._fork_exec.__module__ == "_posixsubprocess" and os.system.__module__ == "posix"


def test_a_helper_that_reads_at_import_counts_for_every_test_and_a_lost_worker_for_everything(run, pytester):
    """The helper module `common` reads the canary as the first module that imports it is collected; the second
    module shares the value without reading: so the read is every test's, not the first module's. A worker that dies takes its wide
    reads with it: the census then says everything was read, never less."""
    pytester.makepyfile(common='import os\nREQUIRE = os.environ.get("MY_CANARY") == "1"\n',
                        test_first="import common\n\ndef test_first():\n    assert not common.REQUIRE\n",
                        test_second="import common\n\ndef test_second():\n    assert not common.REQUIRE\n")
    result, report = run("test_first.py", "test_second.py")
    result.assert_outcomes(passed=2)
    assert scopes_of(report) == {"": [CANARY]}
    assert report["env_reads"]["scopes"][0]["where"][0].endswith("common.py:2")
    pytester.makepyfile(test_dies="import os\n\ndef test_dies():\n    os._exit(3)\n")
    result, report = run("test_dies.py", "test_first.py", "-n", "1")
    lost = report["env_reads"]["scopes"][0]
    assert lost["scope"] == "" and lost["names"][0] == "*" and "went down: its census is lost" in lost["where"][0]


KEPT = '''
import functools
import multiprocessing
import os
import subprocess
import sys


@functools.lru_cache(maxsize=None)
def base():
    return dict(os.environ)

def test_cache_fill():
    base()

def test_cache_used():  # a copy kept from the test before: its child sees the whole environment all the same
    subprocess.run([sys.executable, "-c", "pass"], check=True, env={**base(), "LC_ALL": "C"})

def test_own_small_env():
    subprocess.run([sys.executable, "-c", "pass"], check=True, env={"LC_ALL": "C"})

def test_through_pytester(pytester):  # pytest's own code, called by the test: the test's
    pytester.run(sys.executable, "-c", "pass")
'''

SERVER = '''
import multiprocessing
import os


def _get(q):
    q.put(os.environ.get("HOME"))

def _served():
    ctx = multiprocessing.get_context("forkserver")
    q = ctx.Queue()
    p = ctx.Process(target=_get, args=(q,))
    p.start()
    q.get()
    p.join()

def test_starts_the_server():
    _served()

def test_served_by_it():  # starts no child of its own: the server, kept since, forks it
    _served()
'''


def test_a_kept_copy_pytest_called_by_a_test_and_a_child_that_outlives_its_test_are_counted(run, pytester):
    """The ways a child sees the environment without the test that starts it reading it: a copy kept by a helper
    from an earlier test (an environment holding most of this process's counts as the whole), pytest's own code
    called by the test, and a server a test started and left running, which later tests use (every test)."""
    pytester.makepyfile(test_kept=KEPT, test_server=SERVER)
    result, report = run("test_kept.py", "-p", "pytester")
    result.assert_outcomes(passed=4)
    reads = reads_of(report)
    assert reads["test_kept.py::test_cache_fill"] == ["*"]
    assert reads["test_kept.py::test_cache_used"] == ["*"]
    assert reads["test_kept.py::test_own_small_env"] == []
    assert reads["test_kept.py::test_through_pytester"] == ["*"]
    assert "" not in scopes_of(report)  # no child outlived its test
    result, report = run("test_server.py")
    result.assert_outcomes(passed=2)
    assert scopes_of(report)[""] == ["*"], report["env_reads"]
    where = {s["scope"]: s["where"] for s in report["env_reads"]["scopes"]}[""][0]
    assert "(a child process started there outlived its test)" in where, where


def test_which_children_see_the_environment_and_which_still_run():
    """childstarts on its own: a copy of the environment in any of the shapes a starter takes it is the whole, a
    small one of its own is not; a zombie (exited, not reaped) no longer runs; the resource tracker serves no test."""
    import os
    import subprocess
    import sys
    import time

    from ort_matrix_probe import childstarts as c

    env = dict(os.environ)
    assert c.whole(c.INHERITED) and c.whole(env) and c.whole({k.encode(): v.encode() for k, v in env.items()})
    assert c.whole([f"{k}={v}".encode() for k, v in env.items()])
    assert not c.whole({"LC_ALL": "C", "LANG": "C"}) and not c.whole([b"LC_ALL=C"])
    items = sorted(env.items())
    assert len(items) >= 6, "this test needs a few variables in the environment"
    assert c.whole(dict(items[: (len(items) + 1) // 2]))  # half of it, a filtered copy: the whole
    assert not c.whole(dict(items[: (len(items) + 1) // 2 - 2]))  # less than half: its own
    assert not c.whole({k: v + "x" for k, v in items})  # the same names, other values: its own
    assert (c.pid_of(5), c.pid_of((7, 3)), c.pid_of(0), c.pid_of(True), c.pid_of(None)) == (5, 7, None, None, None)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert c.alive(child.pid)
        child.kill()
        deadline = time.monotonic() + 10
        while c.alive(child.pid) and time.monotonic() < deadline:  # a zombie until reaped: not running
            time.sleep(0.05)
        assert not c.alive(child.pid)
    finally:
        child.kill()
        child.wait()
    tracker = [sys.executable.encode(), b"-c", b"from multiprocessing.resource_tracker import main;main(5)"]
    assert not c.serves_tests((tracker,)) and c.serves_tests(([sys.executable, "-c", "pass"],))


def test_a_plugin_from_a_site_packages_dir_outside_this_venv_is_still_pytests_own(run, pytester, monkeypatch):
    """A venv that reaches another one's packages through a .pth file (the device's image torch) runs pytest's
    plugins from a site-packages dir its own sysconfig does not name: their reads are still not the tests'."""
    site = pytester.path / "elsewhere" / "site-packages"
    site.mkdir(parents=True)
    (site / "pytest_timeout.py").write_text(  # an own plugin's name; its hook reads the whole environment
        "import os\n\ndef pytest_collection_finish(session):\n    dict(os.environ)\n")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{REPO}")
    result, report = run("test_quiet.py", "-k", "test_untouched", "-p", "pytest_timeout")
    result.assert_outcomes(passed=1)
    assert scopes_of(report) == {}, report["env_reads"]  # the plugin's read of everything is not the tests'


TQDM_USER = '''
import tqdm  # its import runs envwrap, which iterates os.environ and keeps only TQDM_* names

def test_uses_tqdm():
    pass
'''

LOOK_ALIKE = '''
import os

def envwrap(prefix):  # the reviewed filter's shape and names, in the tests' own code and not tqdm's file
    return dict((k, v) for k, v in os.environ.items() if k.startswith(prefix))

WRAPPED = envwrap("TQDM_")

def test_look_alike():
    pass
'''


@pytest.mark.parametrize("watch", [[CANARY], [CANARY, "TQDM_WATCHED"]], ids=["canary", "under-the-prefix"])
def test_tqdm_keeping_only_its_own_prefix_is_no_read_of_everything_and_a_look_alike_is(run, pytester, monkeypatch,
                                                                                         watch):
    """torch's import loads tqdm, whose envwrap iterates os.environ for `TQDM_*` names alone (envfilters.py): the
    real tqdm, imported as a module is collected, reads none of the canary; a watched name under its prefix is
    read; the same code in a file of the tests' own is a read of everything."""
    pytest.importorskip("tqdm")
    monkeypatch.setenv("ORT_MATRIX_WATCH_ENV", json.dumps(watch))
    for name in watch:  # set, as in require_cudnn: the items view fetches each value it iterates over
        monkeypatch.setenv(name, "1")
    pytester.makepyfile(test_uses_tqdm=TQDM_USER, test_look_alike=LOOK_ALIKE)
    result, report = run("test_uses_tqdm.py", "test_look_alike.py")
    result.assert_outcomes(passed=2)
    scopes = scopes_of(report)
    assert "*" in scopes.get("test_look_alike.py", []), report["env_reads"]
    assert scopes.get("test_uses_tqdm.py") == (["TQDM_WATCHED"] if len(watch) > 1 else None), report["env_reads"]
    assert set(scopes) <= {"test_look_alike.py", "test_uses_tqdm.py"}, report["env_reads"]


RELAY = '''
import os
from collections.abc import Mapping

import tqdm.utils


class Relay(Mapping):  # what tqdm's envwrap iterates, relaying os.environ's values
    def __iter__(self):
        return iter(os.environ.values())  # driven later, by the view tqdm iterates

    def __getitem__(self, key):
        return key

    def __len__(self):
        return len(os.environ)


def test_relayed(monkeypatch):
    monkeypatch.setattr(tqdm.utils, "os", type("fake", (), {"environ": Relay()}))
    got = tqdm.utils.envwrap("TQDM_")(lambda **kw: kw)
    assert got is not None
'''


def test_the_reviewed_code_relaying_another_mapping_is_still_a_read_of_everything(run, pytester, monkeypatch):
    """tqdm's real envwrap iterating a mapping whose iteration relays os.environ's values: the reviewed frame is
    on the stack, but the view over os.environ was called by other code, so it is everything (the test's)."""
    pytest.importorskip("tqdm")
    monkeypatch.setenv(CANARY, "1")
    pytester.makepyfile(test_relay=RELAY)
    result, report = run("test_relay.py")
    result.assert_outcomes(passed=1)
    assert "*" in reads_of(report)["test_relay.py::test_relayed"], report

"""--junit-xml: the sweep as one JUnit file, read back by junitparser (a JUnit consumer, not the project's code).

Real sweeps through nox on the fixture suites with the CPU wheel: a baseline, then a sweep against it with a
regression, a known failure, a known flake, an EP fallback, a failing subtest, a crashed mode, two verdict-only
failures and hostile ids and reasons (six cells, one mode each). The file's testcases must fail exactly where the
sweep's verdicts and gate do, its counts must be the sweep's, and every hostile string must stay inert text.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import PY, REPO, SUITES, junit_cases, matrix_head, once_per_run, suite_head

CELLS = ("sw", "v", "skip", "crash", "sub", "h")
BROKEN = {"sw": 'env = {{ SWEEP_BREAK = "1", SWEEP_FLAKY = "{marker}", CUDA_STANDIN_MODE = "log_and_skip" }}\n',
          "sub": 'env = { SUBTESTS_BREAK = "fp16/1" }\n'}
HOSTILE_REASON = r"\u001b]0;owned\u0007 </skipped><forged/> \u202e"
SUITES_TEXT = {
    "sw": (SUITES / "sweep", "test_sweep.py", """
[suite.sw.expect.normal]
known_flaky = [{ test = "test_flaky$", outcomes = ["passed", "failed"], reason = "fails the first time" }]
"""),
    "v": (SUITES / "verdicts", "test_broken.py", """
[suite.v.expect.normal]
min_passed = 3
known_failures = [{ test = "test_tracked_regression", reason = "tracked: wrong on purpose" }]
"""),
    "skip": (SUITES / "verdicts", "test_allskip.py", '[suite.skip.expect.normal]\nallowed_skips = ["dispatched MATH"]\n'),
    "crash": (SUITES / "faults", "test_crash.py", ""),  # no xdist: the segfault takes pytest and the probe down
    "sub": (SUITES / "subtests", "test_subtests.py", ""),
    "h": (SUITES / "junit", "test_hostile.py", f"""
[suite.h.expect.normal]
known_failures = [{{ test = "test_known_hostile", reason = "{HOSTILE_REASON}" }}]
"""),
}
SW, V, SKIP, CRASH, SUB, H = (f"j-{PY}-{c}-normal" for c in CELLS)
DTYPES = "test_subtests.py::TestScatterLike::test_dtypes"


def _matrix(work: Path, broken: bool) -> Path:
    text = matrix_head(prefix="j", suite="sw", modes=["normal"], libs=list(CELLS)).format(py=PY)
    text += "[pairing]\ninclude = [\n" + "".join(
        f'  {{ python = "{PY}", ort = "cpu", torch = "none", libs = "{c}", suite = "{c}" }},\n' for c in CELLS) + "]\n"
    for c, (root, file, expect) in SUITES_TEXT.items():
        text += suite_head(c, [file], root=str(root))
        if broken and c in BROKEN:
            text += BROKEN[c].format(marker=work / "flaky-marker") if c == "sw" else BROKEN[c]
        text += expect + "\n"
    (work / "m.toml").write_text(text)
    return work / "m.toml"


def _nox(root: Path, work: str, *args: str, venvs: Path, session: str = "sweep", broken: bool = False,
         matrix_of: Path | None = None) -> subprocess.CompletedProcess:
    """`nox -s <session> -- args` in root/work, with its own matrix (or `matrix_of`'s) and root's baselines."""
    d = root / work
    d.mkdir(exist_ok=True)
    matrix = matrix_of / "m.toml" if matrix_of else _matrix(d, broken)
    env = {**os.environ, "MATRIX_TOML": str(matrix), "MATRIX_RESULTS": str(d / "results"),
           "MATRIX_VENVS": str(venvs), "MATRIX_BASELINES": str(root / "baselines")}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", session, "--", *args],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, cwd=d)


@pytest.fixture(scope="module")
def swept(tmp_path_factory, venvs) -> Path:
    """The baseline sweep (saved as `base`), then the sweep against it with every fault in; once per test run.
    --confirm 0: a rerun would change nothing here but the time taken."""
    def build(root: Path) -> None:
        base = _nox(root, "base", "--save-baseline", "base", "--confirm", "0", "--junit-xml", "junit.xml",
                    venvs=venvs)
        assert (root / "baselines" / "base.json").is_file(), base.stdout[-3000:]
        run = _nox(root, "main", "--baseline", "base", "--confirm", "0", "--junit-xml", "junit.xml", venvs=venvs,
                   broken=True)
        (root / "main" / "nox.txt").write_text(run.stdout)
        assert run.returncode != 0, run.stdout[-3000:]

    return once_per_run(tmp_path_factory, "junit-sweeps", build)


def _results(d: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (d / "results").glob("j-*.json")}


def test_each_mode_is_a_testsuite_and_its_counts_are_the_sweeps(swept):
    from junitparser import JUnitXml

    xml = JUnitXml.fromfile(str(swept / "main" / "junit.xml"))
    results = _results(swept / "main")
    suites = {s.name: s for s in xml}
    assert set(suites) == set(results) == {SW, V, SKIP, CRASH, SUB, H}
    md = (swept / "main" / "results" / "report.md").read_text()
    for session, r in results.items():
        s, c = suites[session], r["counts"]
        cases = [x for x in s if x.name != "(verdict)"]
        said = sum(c[k] for k in ("passed", "failed", "errors", "skipped", "xfailed", "xpassed", "subtests_passed",
                                  "subtests_failed", "subtests_skipped", "subtests_xfailed"))
        assert len(cases) == said == len(r["outcomes"]), session  # one testcase per test and subtest the sweep counted
        assert s.tests == len(list(s)) and s.failures + s.errors + s.skipped == sum(bool(x.result) for x in s)
        # the grid's `(unexpected N; expected M ...)`: every expected outcome is skipped, every unexpected one fails
        row = re.search(rf"\| {re.escape(r['cell']['name'])} \| [^|]+ \| ([^|]+) \|", md).group(1)
        unexpected = int(m.group(1)) if (m := re.search(r"unexpected (\d+)", row)) else 0
        expected = sum(int(n) for n in re.findall(r"(\d+) (?:known failure|known flaky|allowed skip)", row))
        assert sum(x.is_skipped for x in cases) == expected, (session, row)
        regressed = {ch["test"] for ch in json.loads((swept / "main" / "results" / "sweep.json").read_text())[
            "regressions"] if ch["cell"] == r["cell"]["name"] and ch["test"] in r["outcomes"]}
        fallen = {f["nodeid"] for f in r["ep"]["fallbacks"] if f["allowed_by"] is None}
        failing = {x.name for x in cases if x.result and not x.is_skipped}
        blamed_by_grid = {t for t, o in r["outcomes"].items()
                          if o in ("failed", "error", "skipped") and t not in (r["expected"] or {})}
        assert len(blamed_by_grid) == unexpected, (session, row)
        assert failing == blamed_by_grid | regressed | fallen, session
    assert xml.tests == sum(s.tests for s in suites.values()) and xml.failures == sum(s.failures for s in xml)


def test_each_outcome_reads_as_ci_expects(swept):
    cases = junit_cases(swept / "main" / "junit.xml")
    kind, msg, props = cases[(SW, "test_sweep.py::test_breakable")]
    assert kind == "failure" and msg == "regression against baseline base: test: passed -> failed"
    assert props["regression"] == ["test: passed -> failed"]
    kind, msg, props = cases[(SW, "test_sweep.py::test_cudnn_dispatch")]  # the fallback: a regression, and its why
    assert kind == "failure" and msg == "regression against baseline base: ep: CUDA -> CPU"
    assert props["ep"] == ["CPUExecutionProvider"] and props["tiers"] == ["CUDNN_FLASH_ATTENTION"]
    assert props["fallback"][0].startswith("asked for CUDAExecutionProvider, CPUExecutionProvider, served by "
                                           "CPUExecutionProvider (ORT's C++ layer skipped the CUDA EP")
    assert cases[(SW, "test_sweep.py::test_flaky")][:2] == ("skipped", "known flaky: fails the first time "
                                                           "(known_flaky 'test_flaky$')")
    assert cases[(SW, "test_sweep.py::test_steady")][0] == "passed"
    assert (SW, "(verdict)") not in cases  # its verdict's reasons and changes are all carried by its tests
    assert cases[(V, "test_broken.py::test_tracked_regression")][:2] == (
        "skipped", "known failure: tracked: wrong on purpose (known_failures 'test_tracked_regression')")
    kind, msg, _ = cases[(V, "test_broken.py::test_new_regression")]
    assert kind == "failure" and msg.endswith("test_broken.py::test_new_regression failed: AssertionError: nobody "
                                              "declared this one")
    assert cases[(V, "(verdict)")][:2] == ("failure", "only 1 passed, min_passed is 3")  # blamed on no test
    assert [k for (s, _), (k, _, _) in cases.items() if s == SKIP] == ["skipped", "skipped", "failure"]
    assert cases[(SKIP, "(verdict)")][1] == "nothing passed (2 skipped)"  # a verdict-only failure
    assert cases[(CRASH, "(verdict)")][:2] == ("error", "pytest ended with unexpected exit code -11")
    assert cases[(SUB, f"{DTYPES} (dtype='fp16', i=1)")][:2] == (
        "failure", "regression against baseline base: test: passed -> failed")
    assert cases[(SUB, f"{DTYPES} (dtype='fp16', i=0)")][0] == "passed"


def test_the_files_pass_or_fail_is_the_gates(swept):
    for work in ("base", "main"):
        doc = json.loads((swept / work / "results" / "sweep.json").read_text())
        red = [k for k, _, _ in junit_cases(swept / work / "junit.xml").values() if k in ("failure", "error")]
        assert doc["ok"] is False and red, work
    # --gate regressions over the baseline's own results: every mode fails as it failed there, so the gate is
    # green, and so is the file: what the verdicts blame is skipped as already failing
    run = _nox(swept, "regate", str(swept / "base" / "results"), "--baseline", "base", "--gate", "regressions",
               "--junit-xml", "j.xml", venvs=swept / "unused", session="report", matrix_of=swept / "base")
    assert run.returncode == 0, run.stdout[-3000:]
    cases = junit_cases(swept / "regate" / "j.xml")
    assert not [c for c, (k, _, _) in cases.items() if k in ("failure", "error")]
    kind, msg, _ = cases[(V, "test_broken.py::test_new_regression")]
    assert kind == "skipped" and msg.startswith("already failing in baseline base (--gate regressions): 1 unexpected")
    assert cases[(CRASH, "(verdict)")][:2] == ("skipped", "already failing in baseline base (--gate regressions): "
                                                          "pytest ended with unexpected exit code -11")


def test_hostile_ids_and_reasons_stay_inert(swept):
    raw = (swept / "main" / "junit.xml").read_bytes()
    assert not set(raw) & ({*range(0x20)} - {0x09, 0x0A, 0x0D}), "a character XML 1.0 cannot hold was written raw"
    cases = junit_cases(swept / "main" / "junit.xml")
    assert not [name for _, name in cases if "forged" in name]  # no markup became a testcase
    assert cases[(H, 'test_hostile.py::test_markup_id[<i x="1">&amp;]]></i>]')][0] == "passed"  # the id, as it was
    kind, msg, _ = cases[(H, "test_hostile.py::test_hostile_failure")]
    assert kind == "failure" and '</failure></testcase><testcase name="forged">' in msg  # text, never markup
    assert "\\x00\\x1b]0;owned\\x07" in msg and "\x1b" not in msg  # control characters as visible escapes
    kind, msg, _ = cases[(H, "test_hostile.py::test_known_hostile")]
    assert kind == "skipped" and msg == ("known failure: \\x1b]0;owned\\x07 </skipped><forged/> \\u202e "
                                         "(known_failures 'test_known_hostile')")
    kind, msg, _ = cases[(H, "test_hostile.py::test_hostile_skip")]
    assert kind == "failure" and msg.endswith("\\x0c\\u202e end")  # a form feed and a bidi override, shown


def test_names_are_stable_run_to_run(swept):
    """The baseline's file and the next sweep's name the same testsuites and testcases (only `(verdict)`
    comes and goes with what fails), so CI follows each test's history."""
    before, after = (set(junit_cases(swept / w / "junit.xml")) for w in ("base", "main"))
    assert before - {c for c in before if c[1] == "(verdict)"} == after - {c for c in after if c[1] == "(verdict)"}
    assert (SW, "(verdict)") not in before and (SKIP, "(verdict)") in before


def test_a_bad_path_is_refused_before_anything_runs_or_is_written(swept, tmp_path):
    (tmp_path / "a-file").write_text("")
    for session, target, why in (("sweep", tmp_path, f"{tmp_path} is a directory; nothing was run"),
                                 ("report", tmp_path / "a-file" / "j.xml",
                                  f"{tmp_path / 'a-file'} is not a directory; nothing was written")):
        args = [str(swept / "base" / "results")] if session == "report" else []
        run = _nox(tmp_path, session, *args, "--junit-xml", str(target), venvs=tmp_path / "venvs", session=session,
                   matrix_of=None if session == "sweep" else swept / "base")
        assert run.returncode != 0 and f"--junit-xml {target}: {why}. Fix: name a file in a directory you can " \
                                       "write" in run.stdout, run.stdout[-2000:]
        assert not list((tmp_path / session).rglob("*.json")) and not list((tmp_path / session).rglob("report.*"))


def test_every_character_xml_cannot_hold_is_made_inert_in_process():
    """In-process, what no fixture suite can make pytest carry: every C0 control, DEL, a lone surrogate (a file
    name read with surrogateescape) and U+FFFE, in a test id, a reason and the host. The file still writes and
    parses, and each reads back as escape.term() shows it."""
    from helpers import result
    from junitparser import JUnitXml

    from ort_gpu_matrix.judge.verdicts import Status
    from ort_gpu_matrix.report.model import build
    from ort_gpu_matrix.report.render import junitxml
    from ort_gpu_matrix.util.escape import term

    bad = "".join(map(chr, range(0x20))) + "\x7f\ud800\ufffe<&>\"'"
    test = f"t.py::test_x[{bad}]"
    r = result(outcomes={test: "failed", "t.py::ok": "passed"}, verdict=Status.FAIL, host=f"h{bad}",
               reasons=[f"1 unexpected failure(s): {test} failed: {bad}", f"a witness: {bad}"], expected={})
    text = junitxml.render(build([r]), {})
    text.encode()  # no lone surrogate left to refuse
    suite = next(iter(JUnitXml.fromstring(text.encode())))
    assert suite.hostname == term(f"h{bad}")
    names = {c.name: c for c in suite}
    assert set(names) == {term(test), "t.py::ok", "(verdict)"}
    assert names[term(test)].result[0].message == term(f"1 unexpected failure(s): {test} failed: {bad}")
    assert names["(verdict)"].result[0].message == term(f"a witness: {bad}")  # names no test: the verdict's own


def test_a_reason_names_a_test_itself_never_a_longer_id():
    from ort_gpu_matrix.report.render.junitxml import names

    reason = "2 skip(s): t.py::a: why; t.py::b [x] (i=1) failed; t.py::c[1]; t.py::d::e; x/t.py::f"
    assert [t for t in ("t.py::a", "t.py::b", "t.py::b [x] (i=1)", "t.py::c", "t.py::c[1]", "t.py::d", "t.py::d::e",
                        "py::a", "t.py::f") if names(reason, t)] == ["t.py::a", "t.py::b [x] (i=1)", "t.py::c[1]",
                                                                    "t.py::d::e"]


def test_what_did_not_run_fails_as_the_gate_does_in_process():
    """The gate's lines beyond the modes that ran, each with a testcase: a cell that could not run (an error), one
    this host cannot run (skipped), a baseline mode that did not run (a failure; skipped with --allow-missing), an
    interrupted sweep, a sweep that ran nothing; and a test gone since the baseline, failing under its own name."""
    from helpers import result
    from junitparser import JUnitXml

    from ort_gpu_matrix.compare.changes import Scope
    from ort_gpu_matrix.report.model import Sweep, build
    from ort_gpu_matrix.report.render import junitxml
    from ort_gpu_matrix.store.baseline import Baseline

    def read(report) -> dict[tuple[str, str], tuple[str, str]]:
        xml = JUnitXml.fromstring(junitxml.render(report, {}).encode())
        return {(s.name, c.name): (type(c.result[0]).__name__.lower() if c.result else "passed",
                                   c.result[0].message if c.result else "") for s in xml for c in s}

    before = Baseline.of([result(outcomes={"t::a": "passed", "t::b": "passed"}),
                          result(outcomes={"t::a": "passed"}, name="c4")], "b")
    now = result(outcomes={"t::a": "passed"})
    scope = Scope(frozenset({"c1", "c2", "c3", "c4"}), frozenset({("c1", "normal"), ("c4", "normal")}),
                  {"c4": "no result file among the inputs"})
    for allow in (False, True):
        report = build([now], before, "b", Sweep(skipped={"c3": "no GPU here"}, scope=scope, allow_missing=allow,
                                                 errors={"c2": "its venv did not build"}, interrupted="SIGINT"))
        cases = read(report)
        assert cases[("c1-normal", "t::b")] == ("failure", "regression against baseline b: test: passed -> gone")
        assert ("c1-normal", "(verdict)") not in cases  # its count drop is the sum of its tests' changes
        assert cases[("c2", "(run)")] == ("error", "could not run: its venv did not build")
        assert cases[("c3", "(run)")] == ("skipped", "not run: this host cannot run it: no GPU here")
        assert cases[("c4-normal", "(run)")] == (
            ("skipped", "in baseline b (pass), did not run: no result file among the inputs (allowed by --allow-missing)")
            if allow else ("failure", "in baseline b (pass), did not run: no result file among the inputs"))
        assert cases[("(sweep)", "(interrupted)")][0] == "error"
    assert read(build([]))[("(sweep)", "(nothing ran)")] == ("failure", "nothing ran")
    assert not [c for c, (k, _) in read(build([now])).items() if k != "passed"]  # green: nothing fails

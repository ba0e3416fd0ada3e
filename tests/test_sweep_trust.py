"""The sweep-trust table: hostile and careless input to the sweep, baseline and report layer, one row each.

Every row is a real `nox -s sweep` or `nox -s report` against real venvs, pytest runs and files, and
asserts three things: the exact message (or report text), the exit code, and that nothing asked for
was lost (the baseline untouched or saved, the report written, nothing run when the input was bad).
Adding a case means adding a row to ROWS.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import PY, REPO, SUITES, matrix_head, once_per_run, suite_head

MATRIX = matrix_head(prefix="h", suite="sw", libs=["a", "b"]) + """[libs.gone]
cudnn = "/nonexistent/ort-gpu-matrix/libcudnn.so.9"
[pairing]
include = [{cells}]
""" + suite_head("sw", ["test_sweep.py"]) + """{suite_extra}
[suite.sw.expect.teeth]
min_failures = 1
"""
A, B, GONE = f"h-{PY}-a", f"h-{PY}-b", f"h-{PY}-gone"
OLD = f"h-{PY}-old"  # a cell a baseline holds that the matrix no longer has


def cell(libs: str, modes: tuple[str, ...] = ("normal",)) -> str:
    return f'{{ python = "{PY}", ort = "cpu", torch = "none", libs = "{libs}", modes = {json.dumps(list(modes))} }}'


AB = (cell("a"), cell("b"))


@dataclass
class Run:
    code: int
    out: str


class Box:
    """One row's own dirs: a matrix, results, baselines (a copy of the base ones) and an output dir."""

    def __init__(self, root: Path, venvs: Path, base: Path | None):
        self.root, self.venvs = root, venvs
        self.matrix, self.results, self.baselines = root / "matrix.toml", root / "results", root / "baselines"
        self.out = root / "out"
        if base is not None:
            shutil.copytree(base / "baselines", self.baselines)
        self.write()

    def write(self, cells: tuple[str, ...] = AB, suite_extra: str = "", root: Path = SUITES / "sweep") -> None:
        self.matrix.write_text(MATRIX.format(py=PY, cells=", ".join(cells), suite_extra=suite_extra, root=root))

    def nox(self, session: str, *args: str, env: dict[str, str] | None = None) -> Run:
        full = {**os.environ, "MATRIX_TOML": str(self.matrix), "MATRIX_RESULTS": str(self.results),
                "MATRIX_VENVS": str(self.venvs), "MATRIX_BASELINES": str(self.baselines)}
        full.pop("GITHUB_STEP_SUMMARY", None)
        full.update(env or {})
        proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", session, "--", *args],
                              env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        return Run(proc.returncode, proc.stdout)

    def sweep(self, *args: str, env: dict[str, str] | None = None) -> Run:
        return self.nox("sweep", *args, env=env)

    def report(self, *args: str) -> Run:
        return self.nox("report", *args)

    def baseline(self, name: str = "base") -> dict:
        return json.loads((self.baselines / f"{name}.json").read_text())

    def sweep_json(self) -> dict:
        return json.loads((self.results / "sweep.json").read_text())

    def ran_nothing(self) -> None:
        assert not (self.results / "runs").exists(), "a cell ran although the input was refused"
        assert not (self.results / "sweep.json").exists()


@pytest.fixture(scope="module")
def base(tmp_path_factory, venvs) -> Path:
    """A green sweep of cells a and b, saved as baseline `base`, and its results (for report rows): once per run,
    read-only (each row works on a copy of its baselines)."""
    def build(root: Path) -> None:
        box = Box(root, venvs, None)
        run = box.sweep("--save-baseline", "base")
        assert run.code == 0, run.out[-3000:]
        assert set(box.baseline()["cells"]) == {A, B}

    return once_per_run(tmp_path_factory, "trust-base", build)


@dataclass
class Row:
    id: str
    act: Callable[[Box], Run]
    expect: str  # a substring of the output (exact message text)
    code: int
    check: Callable[[Box, Run], None] = field(default=lambda box, run: None)


def _edit_baseline(edit: Callable[[dict], None]) -> Callable[[Box], Run]:
    def act(box: Box) -> Run:
        data = box.baseline()
        edit(data)
        (box.baselines / "base.json").write_text(json.dumps(data))
        return box.sweep("--baseline", "base")
    return act


def _mode(data: dict, cell: str = A, mode: str = "normal") -> dict:
    return data["cells"][cell][mode]


def _set(path: list, value: object) -> Callable[[dict], None]:
    def edit(data: dict) -> None:
        target = _mode(data)
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


def _results_copy(box: Box, base: Path, edit: Callable[[dict], None] | None = None, every: bool = False) -> Path:
    """The base sweep's current results, copied (as CI artifacts would arrive), one of them (or `every` one) edited."""
    src = base / "results"
    dst = box.root / "artifacts"
    dst.mkdir()
    for f in src.glob("h-*.json"):
        data = json.loads(f.read_text())
        if edit is not None and (every or data["session"] == f"{A}-normal"):
            edit(data)
        (dst / f.name).write_text(json.dumps(data))
    return dst


HOSTILE = ("t.py::test[a|b`c`[x](http://evil.example/p)\r\nrow|2 <img src=x> me@evil.example www.evil.example "
           "\x1b]0;pwned\x07\x9b2J]")  # \x9b: the 8-bit CSI, a C1 control
HOSTILE_MD = ("t.py::test\\[a\\|b\\`c\\`\\[x\\](http&#58;//evil.example/p)\\\\x0d\\\\x0arow\\|2 &lt;img src=x&gt; "
              "me&#64;evil.example www&#46;evil.example \\\\x1b\\]0;pwned\\\\x07\\\\x9b2J\\]")


def _hostile_report(base: Path) -> Callable[[Box], Run]:
    def act(box: Box) -> Run:
        def edit(data: dict) -> None:
            data["outcomes"][HOSTILE] = "failed"
            data["dispatch"]["tests"][HOSTILE] = ["CUDNN_FLASH_ATTENTION"]
        arts = _results_copy(box, base, edit)
        return box.report(str(arts), "--baseline", "base", "--out", str(box.out))
    return act


def _md_is_inert(md: str) -> None:
    """No live link, autolink, raw HTML, control character or line break from untrusted text."""
    assert not re.search(r"(?<!\\)\]\(", md) and "://" not in md and "www." not in md and "<img" not in md
    assert "\r" not in md and "\x1b" not in md and "\x9b" not in md


def _check_hostile(box: Box, run: Run) -> None:
    md = (box.out / "report.md").read_text()
    assert f"    - {HOSTILE_MD}\n" in md, md
    _md_is_inert(md)
    assert "\x1b" not in run.out and "\x07" not in run.out and "\x9b" not in run.out
    assert "\r" not in run.out.replace("\r\n", "\n")
    assert "\\x1b]0;pwned\\x07\\x9b2J" in run.out  # shown, escaped, in the terminal report
    html = (box.out / "report.html").read_text()
    assert "<img src=x>" not in html and "&lt;img src=x&gt;" in html


def _hostile_reason(base: Path) -> Callable[[Box], Run]:
    def act(box: Box) -> Run:
        def edit(data: dict) -> None:
            data["verdict"], data["reasons"] = "fail", [HOSTILE]
        arts = _results_copy(box, base, edit)
        return box.report(str(arts), "--out", str(box.out))
    return act


def _check_hostile_reason(box: Box, run: Run) -> None:
    md = (box.out / "report.md").read_text()
    assert f"## Failing modes\n\n- **{A}-normal**: {HOSTILE_MD}\n" in md, md
    _md_is_inert(md)
    html = (box.out / "report.html").read_text()
    assert "<img src=x>" not in html and "&lt;img src=x&gt;" in html


def _link_report(base: Path, key: str, value: str) -> Callable[[Box], Run]:
    def act(box: Box) -> Run:
        arts = _results_copy(box, base, lambda d: d.__setitem__(key, value))
        return box.report(str(arts), "--out", str(box.out))
    return act


def _check_not_linked(value: str, why: str) -> Callable[[Box, Run], None]:
    def check(box: Box, run: Run) -> None:
        html = (box.out / "report.html").read_text()
        assert f'href="{value}' not in html and "href=\"file:" not in html
        assert f"<code>{value}</code> <span class=\"warn\">({why})</span>" in html, html[-4000:]
        assert 'href="../artifacts/runs/' not in html  # the bundle files are not in the copied artifacts dir
    return check


def _log_at(base: Path, where: Callable[[Box], Path]) -> Callable[[Box], Run]:
    """A result whose log is a real file at `where`, and the report built from the copied artifacts."""
    def act(box: Box) -> Run:
        arts = _results_copy(box, base, lambda d: d.__setitem__("log", str(where(box))))
        where(box).parent.mkdir(parents=True, exist_ok=True)
        where(box).write_text("a log\n")
        return box.report(str(arts), "--out", str(box.out))
    return act


def _not_linked_at(where: Callable[[Box], Path]) -> Callable[[Box, Run], None]:
    def check(box: Box, run: Run) -> None:
        _check_not_linked(str(where(box)), "not linked: outside the dirs this report was built from")(box, run)
    return check


def _beside(box: Box) -> Path:
    return box.root / "artifacts-old" / f"{A}-normal.log"  # a sibling whose name begins with the input dir's


def _climbs(box: Box) -> Path:
    return box.root / "artifacts" / ".." / f"{A}-normal.log"  # inside the input dir, until `..` is resolved


def _check_linked(box: Box, run: Run) -> None:
    html = (box.out / "report.html").read_text()
    assert f'<a href="../artifacts/{A}-normal.log">log</a>' in html, html[-3000:]


def _inside_link(base: Path) -> Callable[[Box], Run]:
    def act(box: Box) -> Run:
        def edit(data: dict) -> None:
            data["log"] = str(box.root / "artifacts" / f"{A}-normal.log")
        arts = _results_copy(box, base, edit)
        (arts / f"{A}-normal.log").write_text("a log\n")
        return box.report(str(arts), "--out", str(box.out))
    return act


def _saved_then(box: Box, first: tuple[str, ...], then: Callable[[Box], Run]) -> Run:
    run = box.sweep(*first)
    assert run.code == 0, run.out[-2000:]
    return then(box)


def _break(box: Box) -> None:
    box.write(suite_extra='env = { SWEEP_BREAK = "1" }')


def _unchanged_baseline(box: Box, run: Run) -> None:
    assert box.baseline() == json.loads((box.root.parent / "pristine.json").read_text())


def _poison(box: Box) -> Run:
    (box.root.parent / "pristine.json").write_text((box.baselines / "base.json").read_text())
    _break(box)
    return box.sweep("--baseline", "base", "--save-baseline", "base")


def _poison_accepted(box: Box) -> Run:
    _break(box)
    return box.sweep("--baseline", "base", "--save-baseline", "base", "--accept-regressions")


def _check_poison_accepted(box: Box, run: Run) -> None:
    assert _mode(box.baseline())["verdict"] == "fail"
    assert (box.results / "report.md").is_file() and box.sweep_json()["regressions"]


def _check_merged(box: Box, run: Run) -> None:
    data = box.baseline()
    assert set(data["cells"]) == {A, B}, "the baseline was shrunk"
    assert box.sweep_json()["cells"] == [{**box.sweep_json()["cells"][0], "cell": A}]


def _check_replaced(box: Box, run: Run) -> None:
    assert set(box.baseline()["cells"]) == {A}


def _outside(box: Box, run: Run) -> None:
    box.ran_nothing()
    assert not (box.root / "evil.json").exists() and not list(box.baselines.glob("*evil*"))


def _step_summary_dir(box: Box) -> Run:
    (box.root / "summary-dir").mkdir()
    return box.sweep("--save-baseline", "new", env={"GITHUB_STEP_SUMMARY": str(box.root / "summary-dir")})


def _step_summary_under_file(box: Box) -> Run:
    (box.root / "a-file").write_text("x")
    return box.sweep("--save-baseline", "new", env={"GITHUB_STEP_SUMMARY": str(box.root / "a-file" / "summary.md")})


def _check_nothing_lost(box: Box, run: Run) -> None:
    assert (box.results / "report.md").is_file() and (box.results / "report.html").is_file()
    assert box.sweep_json()["ok"] is True
    assert set(box.baseline("new")["cells"]) == {A, B}
    assert run.out.count("warning: GITHUB_STEP_SUMMARY=") == 2  # logged as it happened, and again at the end


def _report_keeps_sweep_json(box: Box) -> Run:
    run = box.sweep()
    assert run.code == 0, run.out[-2000:]
    (box.root / "sweep-before.json").write_text((box.results / "sweep.json").read_text())
    other = box.root / "other-results"
    shutil.copytree(box.results, other, ignore=shutil.ignore_patterns("sweep*.json", "report.*"))
    first = box.report(str(other), "--out", str(box.results))
    assert first.code == 0, first.out[-2000:]
    return box.report(str(other))


def _check_sweep_json_kept(box: Box, run: Run) -> None:
    assert (box.results / "sweep.json").read_text() == (box.root / "sweep-before.json").read_text()
    assert json.loads((box.results / "report.json").read_text())["cells"]


def _not_runnable(box: Box, *args: str) -> Run:
    box.write(cells=(cell("a"), cell("b"), cell("gone")))
    data = box.baseline()
    data["cells"][GONE] = data["cells"][B]  # the baseline has it: it ran on the host the baseline came from
    (box.baselines / "base.json").write_text(json.dumps(data))
    return box.sweep("--baseline", "base", *args)


def _check_missing_listed(box: Box, run: Run) -> None:
    data = box.sweep_json()
    assert [c["cell"] for c in data["missing"]] == [GONE]
    assert data["removed"] == [] and data["regressions"] == []
    assert "Did not run (in the baseline, chosen, no result) (1):" in run.out


def _removed_cell(box: Box) -> Run:
    data = box.baseline()
    data["cells"][OLD] = data["cells"][B]
    (box.baselines / "base.json").write_text(json.dumps(data))
    return box.sweep("--baseline", "base")


def _check_removed(box: Box, run: Run) -> None:
    data = box.sweep_json()
    assert [(c["cell"], c["mode"]) for c in data["removed"]] == [(OLD, "normal")]
    assert data["not_selected"] == [] and data["missing"] == [] and data["regressions"] == [] and data["ok"] is True


def _nothing_runnable(*args: str) -> Callable[[Box], Run]:
    def act(box: Box) -> Run:
        box.write(cells=(cell("gone"),))
        return box.sweep(*args)
    return act


def _check_nothing_ran(box: Box, run: Run) -> None:
    data = box.sweep_json()
    assert data["ok"] is False and data["why_failed"] == ["nothing ran"] and data["cells"] == []
    assert (box.results / "report.md").is_file() and not (box.baselines / "new.json").exists()


def _select_unrunnable(box: Box) -> Run:
    box.write(cells=(cell("a"), cell("gone")))
    return box.sweep("--select", GONE)


def _check_selected_unrunnable(box: Box, run: Run) -> None:
    data = box.sweep_json()
    assert list(data["errors"]) == [GONE] and data["skipped"] == {} and data["cells"] == []


def _check_not_selected(box: Box, run: Run) -> None:
    data = box.sweep_json()
    assert [(c["cell"], c["after"]) for c in data["not_selected"]] == [(B, "not selected")]
    assert data["removed"] == [] and data["regressions"] == [] and data["missing"] == []
    assert "Not selected (1)" in run.out and "Removed from the matrix (0)" in run.out


def _other_matrix(box: Box) -> Run:
    data = box.baseline()
    data["cells"] = {"gpu-3.12-cu130": data["cells"][A]}
    (box.baselines / "base.json").write_text(json.dumps(data))
    return box.sweep("--baseline", "base")


def _math_everywhere(box: Box) -> Run:
    box.write(cells=(cell("a", ("normal", "require_cudnn", "teeth")),),
              suite_extra='provider_options = { sdpa_kernel = "16" }\n[suite.sw.expect.require_cudnn]\n'
                          'known_failures = [{ test = "test_cudnn_dispatch", reason = "MATH forced" }]')
    return box.sweep()


def _check_math(box: Box, run: Run) -> None:
    teeth = json.loads((box.results / f"{A}-teeth.json").read_text())
    assert teeth["verdict"] == "fail"
    assert "require_cudnn dispatched no CUDNN_FLASH_ATTENTION test: teeth has nothing to cover" in teeth["reasons"]
    assert box.sweep_json()["improvements"] == []


def _broken_root(box: Box) -> Run:
    box.write(root=box.root / "no-such-suite")
    return box.sweep()


def _gate_regressions_preexisting(box: Box) -> Run:
    _break(box)
    run = box.sweep("--save-baseline", "failing")
    assert run.code == 1, run.out[-2000:]  # the failing run itself fails under the default gate
    return box.sweep("--baseline", "failing", "--gate", "regressions")


def _check_preexisting(box: Box, run: Run) -> None:
    data = box.sweep_json()
    assert data["ok"] is True and data["gate"] == "regressions"
    assert data["already_failing"] == [f"{A}-normal", f"{B}-normal"]
    md = (box.results / "report.md").read_text()
    assert "## Already failing in the baseline (2)" in md and "gate regressions: OK" in md
    assert "## Failing modes" not in md  # listed apart, not as failing


def _gate_new_cell(box: Box) -> Run:
    _break(box)
    assert box.sweep("--save-baseline", "failing").code == 1
    data = box.baseline("failing")
    del data["cells"][B]  # b is new to this baseline: its failure is not "already failing"
    (box.baselines / "failing.json").write_text(json.dumps(data))
    return box.sweep("--baseline", "failing", "--gate", "regressions")


def _check_new_cell(box: Box, run: Run) -> None:
    data = box.sweep_json()
    assert data["ok"] is False and data["already_failing"] == [f"{A}-normal"]
    assert [(c["cell"], c["mode"]) for c in data["added"]] == [(B, "normal")]
    md = (box.results / "report.md").read_text()
    assert f"## Failing modes\n\n- **{B}-normal**: " in md


def _gate_new(box: Box) -> Run:
    box.write(suite_extra='env = { SWEEP_BREAK = "1" }')
    assert box.sweep("--save-baseline", "failing").code == 1
    box.write(suite_extra='env = { SWEEP_BREAK = "1" }\npytest_args = ["-k", "not test_steady"]')
    return box.sweep("--baseline", "failing", "--gate", "regressions")


def _check_new_named(box: Box, run: Run) -> None:
    data = box.sweep_json()
    assert data["ok"] is False
    assert {(r["kind"], r["test"], r["after"]) for r in data["regressions"]} >= {
        ("test", "test_sweep.py::test_steady", "gone")}
    assert "test: " + A + " normal test_sweep.py::test_steady: passed -> gone" in run.out


def _select_twice(box: Box) -> Run:
    return box.sweep("--select", A, "--select", B)


def _check_both(box: Box, run: Run) -> None:
    assert sorted(c["cell"] for c in box.sweep_json()["cells"]) == [A, B]


def _tiers_as_text(box: Box) -> Run:
    box.write(suite_extra='provider_options = { sdpa_kernel = "16" }')
    return box.sweep("--baseline", "base")


def _check_tiers(box: Box, run: Run) -> None:
    md = (box.results / "report.md").read_text()
    html = (box.results / "report.html").read_text()
    # every mode passed, and yet the regressions make it red: every form says so
    assert md.startswith("# ort-gpu-matrix sweep: FAILED\n") and "sweep FAILED: 0 failing mode(s), 2 regression(s)" in run.out
    assert "tier CUDNN\\_FLASH\\_ATTENTION → MATH: 1 test(s), 2 row(s) in 2 cell(s) x 1 mode(s) (normal)" in md, md
    assert "['" not in md and "['" not in html and "[&#39;" not in html
    assert "tier CUDNN_FLASH_ATTENTION → MATH: 1 test(s)" in html


def _some_cells(base: Path) -> Callable[[Box], Run]:
    """test_breakable fails in both cells, test_steady only in a: one group, and steady says where."""
    def act(box: Box) -> Run:
        def edit(data: dict) -> None:
            data["outcomes"]["test_sweep.py::test_breakable"] = "failed"
            if data["session"] == f"{A}-normal":
                data["outcomes"]["test_sweep.py::test_steady"] = "failed"
        arts = _results_copy(box, base, edit, every=True)
        return box.report(str(arts), "--baseline", "base", "--out", str(box.out))
    return act


def _check_where(box: Box, run: Run) -> None:
    md = (box.out / "report.md").read_text()
    assert ("  - tests under `test\\_sweep.py::`:\n    - test\\_breakable\n"
            f"    - test\\_steady ({A} normal)\n") in md, md


def _poison_env(env: dict[str, str], *baseline: str) -> Callable[[Box], Run]:
    def act(box: Box) -> Run:
        (box.root.parent / "pristine.json").write_text((box.baselines / "base.json").read_text())
        _break(box)
        return box.sweep("--baseline", *(baseline or ["base"]), "--save-baseline", "base", env=env)
    return act


def _summary_appended(box: Box) -> Run:
    (box.root / "summary.md").write_text("earlier step\n")
    return box.sweep(env={"GITHUB_STEP_SUMMARY": str(box.root / "summary.md")})


def _check_appended(box: Box, run: Run) -> None:
    assert (box.root / "summary.md").read_text() == "earlier step\n" + (box.results / "report.md").read_text()


def _corrupt_target(box: Box) -> Run:
    (box.baselines / "target.json").write_text("{not json")
    return box.sweep("--save-baseline", "target")


def _file_as(env_key: str, *args: str) -> Callable[[Box], Run]:
    def act(box: Box) -> Run:
        (box.root / "a-file").write_text("keep me\n")
        env = {env_key: str(box.root / "a-file")} if env_key else {}
        return box.sweep(*(a.replace("{file}", str(box.root / "a-file")) for a in args), env=env)
    return act


def _kept_file(box: Box, run: Run) -> None:
    assert (box.root / "a-file").read_text() == "keep me\n"
    box.ran_nothing()


def _report_bad(base: Path, edit: Callable[[dict], None]) -> Callable[[Box], Run]:
    def act(box: Box) -> Run:
        arts = _results_copy(box, base, edit)
        return box.report(str(arts), "--out", str(box.out))
    return act


def _no_output(box: Box, run: Run) -> None:
    assert not box.out.exists(), "a report was written from input that was refused"


def ROWS(base: Path) -> list[Row]:  # noqa: N802  (rows need the base dir, so they are made per test session)
    teeth_keys = {"bitten": [], "toothless": [], "extra": []}
    return [
        # never lose what was asked for: files are checked, field types too, before any cell runs
        Row("baseline counts hold a string", _edit_baseline(_set(["counts", "passed"], "3")),
            f"cells.{A}.normal.counts.passed: expected an integer, found a string '3'", 1, lambda b, r: b.ran_nothing()),
        Row("baseline library is a list", _edit_baseline(_set(["library"], ["libcudnn.so.9"])),
            f"cells.{A}.normal.library: expected an object, found a list", 1, lambda b, r: b.ran_nothing()),
        Row("baseline test outcome misspelt", _edit_baseline(_set(["tests", "test_sweep.py::test_steady"], "pased")),
            "'pased' is not an outcome (passed, failed, skipped, error, xfailed, xpassed)", 1,
            lambda b, r: b.ran_nothing()),
        Row("baseline test line is a number", _edit_baseline(_set(["tests", "test_sweep.py::test_steady"], 1)),
            f"cells.{A}.normal.tests.test_sweep.py::test_steady: expected a string, found int 1", 1,
            lambda b, r: b.ran_nothing()),
        Row("baseline counts are true", _edit_baseline(_set(["counts", "collected"], True)),
            f"cells.{A}.normal.counts.collected: expected an integer, found true/false True", 1,
            lambda b, r: b.ran_nothing()),
        Row("baseline verdict unknown", _edit_baseline(_set(["verdict"], "maybe")),
            f"cells.{A}.normal.verdict: expected one of 'pass', 'fail', found 'maybe'", 1, lambda b, r: b.ran_nothing()),
        Row("baseline teeth with other keys", _edit_baseline(_set(["teeth"], teeth_keys)),
            f"cells.{A}.normal.teeth: needs the lists bitten and toothless", 1, lambda b, r: b.ran_nothing()),
        Row("baseline cells is a list", _edit_baseline(lambda d: d.__setitem__("cells", [])),
            "cells: expected an object, found a list", 1, lambda b, r: b.ran_nothing()),
        Row("baseline of a newer version", _edit_baseline(lambda d: d.__setitem__("baseline_version", 4)),
            "baseline_version 4 is not one this ort-gpu-matrix reads (1, 2, 3)", 1, lambda b, r: b.ran_nothing()),
        Row("baseline is not JSON", lambda b: ((b.baselines / "base.json").write_text("{"), b.sweep("--baseline", "base"))[1],
            "base.json: cannot be read as a baseline", 1, lambda b, r: b.ran_nothing()),
        Row("baseline from another matrix", _other_matrix,
            "holds no cell of", 1, lambda b, r: b.ran_nothing()),
        Row("report: a result's counts hold a string", _report_bad(base, lambda d: d["counts"].__setitem__("passed", "5")),
            "is not a well-formed result: counts.passed: expected an integer, found a string '5'", 1, _no_output),
        Row("report: a result's verdict unknown", _report_bad(base, lambda d: d.__setitem__("verdict", "maybe")),
            "verdict: expected one of 'pass', 'fail', found 'maybe'", 1, _no_output),
        Row("report: outcomes is a list", _report_bad(base, lambda d: d.__setitem__("outcomes", ["x"])),
            "outcomes: expected an object, found a list", 1, _no_output),
        # output paths, checked first
        Row("--out is a file", _file_as("", "--out", "{file}"), "is not a directory; nothing was run", 1, _kept_file),
        Row("--out under a file", _file_as("", "--out", "{file}/report"),
            "is not a directory, so", 1, _kept_file),
        Row("results dir is a file", _file_as("MATRIX_RESULTS"), "the results dir (MATRIX_RESULTS)", 1,
            lambda b, r: (b.root / "a-file").read_text() == "keep me\n" or pytest.fail("overwritten")),
        Row("baselines dir is a file", _file_as("MATRIX_BASELINES", "--save-baseline", "x"),
            "the baselines dir (MATRIX_BASELINES, else baselines/ beside the matrix)", 1, _kept_file),
        Row("step summary is a directory", _step_summary_dir, "could not be written (Is a directory)", 0,
            _check_nothing_lost),
        Row("step summary under a file", _step_summary_under_file, "could not be written (Not a directory)", 0,
            _check_nothing_lost),
        Row("the step summary is appended to", _summary_appended, "sweep OK", 0, _check_appended),
        # a baseline name is a name
        Row("--save-baseline ../evil", lambda b: b.sweep("--save-baseline", "../evil"),
            "--save-baseline '../evil': a baseline name is letters", 1, _outside),
        Row("--save-baseline a/b", lambda b: b.sweep("--save-baseline", "a/b"), "--save-baseline 'a/b'", 1, _outside),
        Row("--save-baseline .hidden", lambda b: b.sweep("--save-baseline", ".hidden"), "--save-baseline '.hidden'", 1,
            _outside),
        Row("--save-baseline empty", lambda b: b.sweep("--save-baseline", ""), "--save-baseline ''", 1, _outside),
        Row("--save-baseline x.json", lambda b: b.sweep("--save-baseline", "..json"), "--save-baseline '..json'", 1,
            _outside),
        # no baseline shrunk or overwritten silently
        Row("--select onto a bigger baseline updates it", lambda b: b.sweep("--select", A, "--save-baseline", "base"),
            f"updated 1 mode record(s), kept 1 this sweep did not run ({B} normal; --replace drops them)", 0,
            _check_merged),
        Row("--replace writes only this sweep", lambda b: b.sweep("--select", A, "--save-baseline", "base", "--replace"),
            "replaced (--replace)", 0, _check_replaced),
        Row("a corrupt baseline is not overwritten", _corrupt_target,
            "--save-baseline target would replace it: pass --replace", 1,
            lambda b, r: ((b.baselines / "target.json").read_text() == "{not json" or pytest.fail("overwritten"),
                          b.ran_nothing())),
        Row("--baseline X --save-baseline X with regressions", _poison,
            "baseline base was NOT saved: this sweep has 6 regression(s) against it", 1, _unchanged_baseline),
        Row("... baselines beside the matrix (no MATRIX_BASELINES)", _poison_env({"MATRIX_BASELINES": ""}),
            "baseline base was NOT saved: this sweep has 6 regression(s) against it", 1, _unchanged_baseline),
        Row("... --baseline given as the file's path", lambda b: _poison_env({}, str(b.baselines / "base.json"))(b),
            "baseline base was NOT saved: this sweep has 6 regression(s) against it", 1, _unchanged_baseline),
        Row("... with --accept-regressions", _poison_accepted, "baseline base updated 2 mode record(s)", 1,
            _check_poison_accepted),
        Row("--replace without --save-baseline", lambda b: b.sweep("--replace"),
            "--replace and --accept-regressions go with --save-baseline NAME", 1, lambda b, r: b.ran_nothing()),
        Row("report never replaces the results dir's sweep.json", _report_keeps_sweep_json, "report.json", 0,
            _check_sweep_json_kept),
        # repeated options add up; numbers are numbers
        Row("--select A --select B", _select_twice, "sweep OK: 0 failing mode(s)", 0, _check_both),
        Row("--rerun-failures -1", lambda b: b.sweep("--rerun-failures", "-1"),
            "argument --rerun-failures: '-1' is not a whole number >= 0", 1, lambda b, r: b.ran_nothing()),
        Row("--gate bogus", lambda b: b.sweep("--gate", "bogus"), "argument --gate: invalid choice: 'bogus'", 1,
            lambda b, r: b.ran_nothing()),
        Row("--gate regressions without a baseline", lambda b: b.sweep("--gate", "regressions"),
            "--gate regressions compares with a baseline: add --baseline NAME", 1, lambda b, r: b.ran_nothing()),
        # never green on nothing
        Row("a baseline cell not runnable here", lambda b: _not_runnable(b), "1 baseline mode(s) did not run", 1,
            _check_missing_listed),
        Row("... under --gate regressions", lambda b: _not_runnable(b, "--gate", "regressions"),
            "gate regressions: FAILED: 1 baseline mode(s) did not run", 1, _check_missing_listed),
        Row("... with --allow-missing", lambda b: _not_runnable(b, "--allow-missing"),
            "(1 baseline mode(s) did not run, allowed by --allow-missing)", 0, _check_missing_listed),
        Row("a baseline cell removed from the matrix", _removed_cell, "Removed from the matrix (1):", 0, _check_removed),
        Row("no cell can run here", _nothing_runnable(), "gate all: FAILED: nothing ran", 1, _check_nothing_ran),
        Row("... with --save-baseline", _nothing_runnable("--save-baseline", "new"),
            "baseline new was NOT saved: nothing ran", 1, _check_nothing_ran),
        Row("--select a cell this host cannot run", _select_unrunnable,
            f"{GONE}: could not run: cannot run on this host: libs.gone", 1, _check_selected_unrunnable),
        Row("a baseline cell not selected", lambda b: b.sweep("--baseline", "base", "--select", A),
            "gate all: OK", 0, _check_not_selected),
        Row("teeth with MATH forced everywhere", _math_everywhere, "teeth has nothing to cover", 1, _check_math),
        Row("a suite root that does not exist", _broken_root, "the matrix is broken for this cell: suite.sw.root:", 1,
            lambda b, r: b.ran_nothing() if not (b.results / "sweep.json").exists() else
            (b.sweep_json()["ok"] is False or pytest.fail("green"))),
        Row("--gate regressions: a failure already there", _gate_regressions_preexisting,
            "gate regressions: OK (2 mode(s) already failing in the baseline, listed apart)", 0, _check_preexisting),
        Row("--gate regressions: a new failure", _gate_new, "gate regressions: FAILED: 6 regression(s)", 1,
            _check_new_named),
        Row("--gate regressions: a new cell that fails", _gate_new_cell,
            "gate regressions: FAILED: 1 failing mode(s) not already failing in the baseline", 1, _check_new_cell),
        # hostile text stays text
        Row("a hostile test id in every report", _hostile_report(base), "test new → failed: 1 test(s)", 1,
            _check_hostile),
        Row("a hostile failure reason in every report", _hostile_reason(base), "report FAILED (gate all): 1 failing mode(s)",
            1, _check_hostile_reason),
        Row("a javascript: log", _link_report(base, "log", "javascript:alert(1)"), "written:", 0,
            _check_not_linked("javascript:alert(1)", "not linked: not an absolute file path")),
        Row("a data: junit", _link_report(base, "junit", "data:text/html,<b>x</b>"), "written:", 0,
            _check_not_linked("data:text/html,&lt;b&gt;x&lt;/b&gt;", "not linked: not an absolute file path")),
        Row("a log outside the inputs", _link_report(base, "log", "/etc/shadow"), "written:", 0,
            _check_not_linked("/etc/shadow", "not linked: outside the dirs this report was built from")),
        Row("a log inside the inputs is a relative link", _inside_link(base), "written:", 0, _check_linked),
        Row("a log in a dir named like the inputs", _log_at(base, _beside), "written:", 0, _not_linked_at(_beside)),
        Row("a log that climbs out with ..", _log_at(base, _climbs), "written:", 0, _not_linked_at(_climbs)),
        Row("tier lists as text", _tiers_as_text, "tier CUDNN_FLASH_ATTENTION → MATH", 1, _check_tiers),
        Row("a change in some cells says where", _some_cells(base), "test passed → failed: 2 test(s), 3 row(s)", 1,
            _check_where),
    ]


def _ids() -> list[str]:
    return [r.id for r in ROWS(Path("."))]


@pytest.mark.parametrize("row_id", _ids())
def test_trust(row_id, base, venvs, tmp_path):
    row = next(r for r in ROWS(base) if r.id == row_id)
    (tmp_path / "box").mkdir()
    box = Box(tmp_path / "box", venvs, base)
    run = row.act(box)
    assert row.expect in run.out, run.out[-4000:]
    assert run.code == row.code, run.out[-4000:]
    assert "Traceback" not in run.out, run.out[-4000:]
    row.check(box, run)


def test_the_table_covers_every_class():
    assert len(_ids()) >= 40 and len(set(_ids())) == len(_ids())


@pytest.mark.parametrize("n", [2000, 10000])
def test_a_flood_of_tier_regressions_stays_one_readable_group(n, base, venvs, tmp_path):
    """n tests moved CUDNN_FLASH_ATTENTION -> MATH in two cells: one group, a bounded report, every row kept."""
    (tmp_path / "box").mkdir()
    box = Box(tmp_path / "box", venvs, base)
    names = [f"test_onnx_attention/test_tensorscatter_attention.py::TestTensorScatter::test_case_{i:05d}"
             for i in range(n)]
    data = box.baseline()
    for c in (A, B):
        _mode(data, c)["tests"].update({t: "passed CUDNN_FLASH_ATTENTION" for t in names})
    (box.baselines / "base.json").write_text(json.dumps(data))

    def edit(d: dict) -> None:
        d["outcomes"].update({t: "passed" for t in names})
        d["dispatch"]["tests"].update({t: ["MATH"] for t in names})
    arts = _results_copy(box, base, edit)
    for f in arts.glob(f"{B}-normal.json"):  # cell b too
        d = json.loads(f.read_text())
        edit(d)
        f.write_text(json.dumps(d))
    summary = tmp_path / "summary.md"
    full = {**os.environ, "MATRIX_TOML": str(box.matrix), "MATRIX_RESULTS": str(box.results),
            "MATRIX_VENVS": str(venvs), "MATRIX_BASELINES": str(box.baselines), "GITHUB_STEP_SUMMARY": str(summary)}
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "report", "--", str(arts),
                           "--baseline", "base", "--out", str(box.out)], env=full, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:]
    md = (box.out / "report.md").read_text()
    head = f"tier CUDNN\\_FLASH\\_ATTENTION → MATH: {n} test(s), {2 * n} row(s) in 2 cell(s) x 1 mode(s) (normal)"
    assert md.count("- **tier ") == 1 and head in md, md[:3000]
    assert "  - tests under `test\\_onnx\\_attention/test\\_tensorscatter\\_attention.py::TestTensorScatter::`:" in md
    assert "    - test\\_case\\_00000\n" in md and f"    - and {n - 20} more (every row is in sweep.json)" in md
    assert "test\\_case\\_00020" not in md
    assert len(md.encode()) < 20_000 and summary.stat().st_size < 1024 * 1024
    assert len(json.loads((box.out / "report.json").read_text())["regressions"]) == 2 * n  # every row kept
    html = (box.out / "report.html").read_text()
    assert html.count("<summary>tier CUDNN_FLASH_ATTENTION → MATH") == 1 and "test_case_09999" in html or n < 10000

"""The release sweep on CPU: a baseline, then one injected regression of each kind, each named by its kind.

Three pairings (libs none, a pinned fake cuDNN 9.14, a pinned fake cuDNN 9.19) over a fixture suite
whose behaviour the matrix changes through `suite.env`, `provider_options` and `pytest_args`. Every
sweep is a real `nox -s sweep` with real venvs and real pytest runs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FAKE_CUDNN, PY, REPO, SUITES, build_so, matrix_head, once_per_run, suite_head

MATRIX = matrix_head(prefix="s", suite="sw", libs=["none"]) + """[libs.c914]
cudnn = "{c914}"
[libs.c919]
cudnn = "{c919}"
[pairing]
include = [
  {{ python = "{py}", ort = "cpu", torch = "none", libs = "none", modes = ["normal", "require_cudnn", "teeth"] }},
  {{ python = "{py}", ort = "cpu", torch = "none", libs = "c914", modes = ["normal"] }},
  {{ python = "{py}", ort = "cpu", torch = "none", libs = "c919", modes = ["normal"] }},
]
""" + suite_head("sw", ["test_sweep.py"]) + """{suite_extra}
[suite.sw.expect.teeth]
min_failures = 1
"""
CELL = f"s-{PY}-none"


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    """Two cuDNN stand-ins, once per run: the baseline sweep records their paths, so every worker uses these."""
    def path(d: Path, v: str) -> Path:
        return d / v / f"libcudnn.so.9.{v[1:]}.0"

    d = once_per_run(tmp_path_factory, "sweep-libs", lambda d: [
        build_so(path(d, v), "libcudnn.so.9", FAKE_CUDNN % int(v[1:] + "00")) for v in ("v914", "v919")])
    return {v: path(d, v) for v in ("v914", "v919")}


class Sweeper:
    def __init__(self, root: Path, venvs: Path, libs: dict[str, Path]):
        self.root, self.venvs, self.libs = root, venvs, libs
        self.baselines = root / "baselines"

    def sweep(self, name: str, *args: str, suite_extra: str = "", c914: str | None = None,
              env_extra: dict | None = None, venvs: Path | None = None) -> tuple[int, str, dict]:
        work = self.root / name
        work.mkdir()
        matrix = work / "matrix.toml"
        matrix.write_text(MATRIX.format(py=PY, root=SUITES / "sweep", c914=c914 or self.libs["v914"],
                                        c919=self.libs["v919"], suite_extra=suite_extra))
        env = {**os.environ, "MATRIX_TOML": str(matrix), "MATRIX_RESULTS": str(work / "results"),
               "MATRIX_VENVS": str(venvs or self.venvs), "MATRIX_BASELINES": str(self.baselines)}
        env.pop("GITHUB_STEP_SUMMARY", None)  # a CI runner's own summary file is not ours to write to
        env.update(env_extra or {})
        proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "sweep", "--", *args],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        sweep_json = work / "results" / "sweep.json"
        return proc.returncode, proc.stdout, json.loads(sweep_json.read_text()) if sweep_json.exists() else {}


@pytest.fixture(scope="module")
def sweeper(tmp_path_factory, venvs, libs):
    """The baseline sweep, once per run; each test sweeps in a dir of its own name beside it and only reads the
    baselines (a test that saves one uses a Sweeper of its own)."""
    def build(root: Path) -> None:
        s = Sweeper(root, venvs, libs)
        code, out, data = s.sweep("baseline", "--save-baseline", "release-1")
        assert code == 0 and data["ok"], out[-3000:]
        assert (s.baselines / "release-1.json").is_file()

    return Sweeper(once_per_run(tmp_path_factory, "sweeps", build), venvs, libs)


INJECTIONS = {
    "verdict": dict(suite_extra='env = { SWEEP_BREAK = "1" }'),
    "test": dict(suite_extra='env = { SWEEP_BREAK = "1" }'),
    "tier": dict(suite_extra='provider_options = { sdpa_kernel = "16" }'),
    "ep": dict(suite_extra='env = { CUDA_STANDIN_MODE = "log_and_skip" }'),
    "teeth": dict(suite_extra='env = { SWEEP_TOOTHLESS = "1" }'),
    "count": dict(suite_extra='pytest_args = ["-k", "not test_sometimes_gone"]'),
    "library": dict(c914="v919"),
    # --rerun-failures installs pytest-rerunfailures: another fingerprint, so a venv of its own (conftest's guard)
    "flaky": dict(suite_extra='env = { SWEEP_FLAKY = "{marker}" }', args=("--rerun-failures", "1"), own_venvs=True),
}


@pytest.mark.parametrize("kind", list(INJECTIONS))
def test_each_regression_kind_is_detected_and_named(sweeper, kind, tmp_path):
    spec = dict(INJECTIONS[kind])
    args = ("--baseline", "release-1", *spec.pop("args", ()))
    if "suite_extra" in spec:
        spec["suite_extra"] = spec["suite_extra"].replace("{marker}", str(tmp_path / "flaky-marker"))
    if "c914" in spec:
        spec["c914"] = str(sweeper.libs[spec["c914"]])
    if spec.pop("own_venvs", False):
        spec["venvs"] = tmp_path / "own-venvs"
    code, out, data = sweeper.sweep(f"inject-{kind}", *args, **spec)
    kinds = {r["kind"] for r in data["regressions"]}
    assert kind in kinds, (kinds, out[-3000:])
    assert code != 0 and data["ok"] is False
    assert f"\n  {kind}: " in out  # named in the terminal report, with its kind
    hit = next(r for r in data["regressions"] if r["kind"] == kind)
    assert set(hit) == {"kind", "cell", "mode", "test", "before", "after"}
    assert hit["before"] != hit["after"]


def test_the_exact_changes_of_a_tier_regression(sweeper):
    code, out, data = sweeper.sweep("tier-detail", "--baseline", "release-1",
                                    suite_extra='provider_options = { sdpa_kernel = "16" }')
    tiers = [r for r in data["regressions"] if r["kind"] == "tier"]
    assert {"kind": "tier", "cell": CELL, "mode": "normal", "test": "test_sweep.py::test_cudnn_dispatch",
            "before": ["CUDNN_FLASH_ATTENTION"], "after": ["MATH"]} in tiers
    assert "tier: " + CELL + " normal test_sweep.py::test_cudnn_dispatch: CUDNN_FLASH_ATTENTION -> MATH" in out


def test_a_clean_resweep_reports_no_regression(sweeper, tmp_path):
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    code, out, data = sweeper.sweep("clean", "--baseline", "release-1", env_extra={"GITHUB_STEP_SUMMARY": str(summary)})
    assert code == 0, out[-3000:]
    assert data["regressions"] == [] and data["ok"] is True
    assert "Regressions (0)" in out
    text = summary.read_text()  # appended, as CI tools do, never overwritten
    assert text.startswith("earlier step\n# ort-gpu-matrix sweep: OK\n")
    assert text[len("earlier step\n"):] == (sweeper.root / "clean" / "results" / "report.md").read_text()


def test_the_libs_comparison_names_each_cudnn(sweeper):
    code, out, data = sweeper.sweep("libs", "--baseline", "release-1")
    assert f"s-{PY}-c914 vs s-{PY}-c919, normal: cuDNN {sweeper.libs['v914']} (91400) vs {sweeper.libs['v919']} (91900)" in out
    md = (sweeper.root / "libs" / "results" / "report.md").read_text()
    assert "## Libs comparison" in md and "every test had the same outcome and tiers" in md


def test_the_html_report_shows_the_grid_the_regressions_and_escapes_test_names(sweeper):
    code, out, data = sweeper.sweep("html", "--baseline", "release-1", suite_extra='env = { SWEEP_BREAK = "1" }')
    html = (sweeper.root / "html" / "results" / "report.html").read_text()
    assert html.index("Regressions (") < html.index('<h2 id="grid">')  # regressions come first
    assert '<td class="fail">FAIL 5/1/0 (unexpected 1)</td>' in html  # the normal cell of the broken suite, its failure unexpected
    # one group for one change: test_breakable broke in every cell and mode that ran it (teeth leaves it out: it
    # never dispatched cuDNN)
    assert ("<summary>test passed → failed: 1 test(s), 4 row(s) in 3 cell(s) x 2 mode(s) (normal, require_cudnn)"
            "</summary>") in html
    assert f"<p>Cells: s-{PY}-c914, s-{PY}-c919, {CELL}</p>" in html
    # the picture: the broken test's cell in the normal column is red, outlined, and reads baseline -> now
    assert '<td class="t-fail s-unexpected changed" title="no tier (failed; unexpected)">passed → failed</td>' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # the filter box's own script, and no test name unescaped
    assert "https://" not in html and "http://" not in html  # self-contained: nothing fetched


def test_report_rebuilds_the_same_report_from_result_files(sweeper, tmp_path):
    code, out, data = sweeper.sweep("for-report")
    assert code == 0, out[-2000:]
    results = sweeper.root / "for-report" / "results"
    env = {**os.environ, "MATRIX_TOML": str(sweeper.root / "for-report" / "matrix.toml"), "MATRIX_BASELINES": str(sweeper.baselines),
           "MATRIX_RESULTS": str(tmp_path / "unused"), "MATRIX_VENVS": str(sweeper.venvs)}
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "report", "--", str(results),
                           "--baseline", "release-1", "--out", str(tmp_path / "out")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Regressions (0)" in proc.stdout and (tmp_path / "out" / "report.html").is_file()


def test_a_missing_baseline_is_named_before_anything_runs(sweeper):
    code, out, data = sweeper.sweep("nobaseline", "--baseline", "release-0")
    assert code != 0 and "release-0.json: no such baseline" in out
    assert not (sweeper.root / "nobaseline" / "results").exists()

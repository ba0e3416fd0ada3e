"""Evidence that stays small: no whole HTML report is committed, and those pages that had one say how
`nox -s report` makes it again from the committed result files, which it really does."""
import os
import re
import subprocess
import sys
import tarfile

import pytest
from helpers import REPO

EVIDENCE = REPO / "docs" / "evidence"


def test_no_whole_html_report_is_committed_in_the_evidence():
    assert sorted(str(p.relative_to(REPO)) for p in EVIDENCE.rglob("*.html")) == []


def test_every_evidence_page_with_a_report_says_how_to_make_its_html_again():
    for page in EVIDENCE.glob("*.md"):
        text = page.read_text()
        if re.search(r"report\.md", text):
            assert "nox -s report" in text and "## The HTML report" in text, page


@pytest.mark.parametrize("where, matrix, archive", [
    ("one-gpu/results", "matrix.toml", None),
    ("cudnn", "docs/evidence/cudnn-axis/matrix.toml", "cudnn-axis/run/results.tar.gz"),
    ("two-gpus/one", "docs/evidence/two-gpus/matrix.toml", "two-gpus/run2/runs.tar.gz"),
    ("tier-rules/judged", "matrix.toml", "tier-rules/results.tar.gz"),
    ("cuda12/results", "matrix.toml", "cuda12-cell/results.tar.gz"),
])
def test_nox_s_report_makes_the_html_again_from_the_committed_results(tmp_path, where, matrix, archive):
    if archive:
        with tarfile.open(EVIDENCE / archive) as tar:
            tar.extractall(tmp_path / where.split("/")[0], filter="data")
        inputs = tmp_path / where
    else:
        inputs = EVIDENCE / where
    env = {**os.environ, "MATRIX_TOML": str(REPO / matrix), "MATRIX_RESULTS": str(tmp_path / "results")}
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "report", "--",
                           str(inputs), "--out", str(tmp_path / "out")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="picture"' in html and "gpu-3.12-" in html
    if archive == "cuda12-cell/results.tar.gz":  # two CUDA majors: each differing test names the stack that served it
        assert "<th>served by</th>" in html and "<td>L1 | R1</td>" in html and "gpu-3.12-cu128 L1, 14 test(s):" in html


def test_the_subtests_evidence_report_shows_each_fallback_under_its_subtest(tmp_path):
    """docs/evidence/subtests-h200.md: the report made again from step A's results; two cells are red on purpose."""
    with tarfile.open(EVIDENCE / "subtests" / "results-a.tar.gz") as tar:
        tar.extractall(tmp_path / "st", filter="data")
    env = {**os.environ, "MATRIX_TOML": str(EVIDENCE / "subtests" / "matrix.toml"),
           "MATRIX_RESULTS": str(tmp_path / "results")}
    proc = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "report", "--",
                           str(tmp_path / "st"), "--out", str(tmp_path / "out")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1 and "2 failing mode(s)" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    md = (tmp_path / "out" / "report.md").read_text()
    assert ("| st-3.12-h200 | vm | PASS 12/4/8, subtests 80/8/0 (expected 8 known failure, 8 allowed skip, "
            "4 subtests expected) |") in md
    assert ("st-3.12-unpinned-normal onnxruntime\\_test\\_scatternd.py::TestScatterPerProvider::test\\_scatterels\\_cuda "
            "(dtype=&lt;class 'numpy.float16'&gt;, reduction='add', opset=16)") in md
    assert 'id="picture"' in (tmp_path / "out" / "report.html").read_text()

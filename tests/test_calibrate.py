"""`nox -s calibrate`: from a red first run to expectations that make the next run pass, and that do not rot.

Every scenario runs the real nox against the `calibrate` fixture suite (a canary that bites, a
toothless test, a known failure that `CAL_FIXED=1` fixes, a skip, hostile node ids and messages)
in real venvs with the CPU wheel. The writer's escaping is also checked on its own, with strings
no test id would carry.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import FAKE_CUDNN, PY, REPO, SUITES, build_so, matrix_head, suite_head

from ort_gpu_matrix.config.expectfile import ModeTable, Skip, literal_regex, render, string
from ort_gpu_matrix.config.model import Observation, Rule

CELL = f"c-{PY}-x"
PINNED = f"c-{PY}-p"
CANARY = "AssertionError: 'CUDNN_FLASH_ATTENTION' != 'MATH'"
MATRIX = matrix_head(prefix="c", suite="s") + """{libs}
[pairing]
include = [{pairings}]
""" + suite_head("s", ["test_calibrate.py"]) + """expect_file = "expect/s.toml"
{suite_extra}
"""
ALL_MODES = '{{ python = "{py}", ort = "cpu", torch = "none", libs = "x", modes = ["normal", "require_cudnn", "teeth"] }}'
NODE = "test_calibrate.py::"
BROKEN = "^test_calibrate\\.py::test_known_broken$"


class Calibration:
    """A matrix of its own in a temp dir, run through the real nox."""

    def __init__(self, root: Path, venvs: Path, suite_extra: str = "", libs: str = "", pairings: str = ALL_MODES):
        self.root, self.venvs = root, venvs
        self.matrix = root / "matrix.toml"
        self.results = root / "results"
        self.expect = root / "expect" / "s.toml"
        self.write(suite_extra, libs, pairings)

    def write(self, suite_extra: str = "", libs: str = "", pairings: str = ALL_MODES) -> None:
        self.matrix.write_text(MATRIX.format(py=PY, root=SUITES / "calibrate", libs=libs, suite_extra=suite_extra,
                                             pairings=pairings.format(py=PY)))

    def nox(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "MATRIX_TOML": str(self.matrix), "MATRIX_RESULTS": str(self.results),
               "MATRIX_VENVS": str(self.venvs)}
        env.pop("GITHUB_STEP_SUMMARY", None)
        return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args], env=env,
                              cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)

    def calibrate(self, *args: str) -> subprocess.CompletedProcess:
        return self.nox("-s", "calibrate", "--", *args)

    def data(self, path: Path | None = None) -> dict:
        return tomllib.loads((path or self.expect).read_text())["expect"]

    def result(self, session: str) -> dict:
        return json.loads((self.results / f"{session}.json").read_text())


def _tests(rules: list[dict]) -> list[str]:
    return [r["test"] for r in rules]


def test_calibrate_accepts_a_red_first_run_and_the_next_run_passes(tmp_path, venvs):
    c = Calibration(tmp_path, venvs)
    first = c.nox("-s", CELL)
    assert first.returncode != 0
    assert (f"{c.matrix}: suite.s.expect_file: {c.expect} does not exist\n"
            f"    fix: write it with `nox -s calibrate -- {CELL}` (or --write PATH), or remove expect_file") in first.stdout

    cal = c.calibrate(CELL)
    assert cal.returncode == 0, cal.stdout[-3000:]  # written: success, although every mode failed
    for mode in ("normal", "require_cudnn", "teeth"):
        assert f"\nFAIL   {CELL}-{mode}  " in cal.stdout  # one end line per run
    # the two cuDNN tests ran on the (stand-in) CUDA EP: a cuda_runs and a cuda_ops rule each, as a tier rule each
    assert (f"wrote {c.expect}: normal: min_passed 4, 1 allowed skip(s), 3 known_failures, 2 tiers, 2 cuda_runs, "
            "2 cuda_ops; ") in cal.stdout
    assert "still failing after calibration" not in cal.stdout and "refused" not in cal.stdout

    e = c.data()
    date = c.result(f"{CELL}-teeth")["started"][:10]
    # the two tests that dispatched cuDNN get a tier rule each (calibrate/tiers.py); teeth gets none
    assert [(r["test"].split("::")[1][:22], r["only"]) for r in e["normal"]["tiers"]] == [
        ("test_cudnn_bites(?:_[0", ["CUDNN_FLASH_ATTENTION"]), ("test_values_only_cudnn", ["CUDNN_FLASH_ATTENTION"])]
    assert "tiers" not in e["teeth"]
    seen = [{"cell": CELL, "ort": "1.32.0", "date": date}]
    toothless = e["teeth"]["known_toothless"]
    assert toothless == [{"test": "^test_calibrate\\.py::test_values_only_cudnn$", "observed": seen,
                          "reason": "dispatched CUDNN_FLASH_ATTENTION x1 in require_cudnn; passed with MATH forced"}]
    failing = {"test_known_broken": "AssertionError: shape \"(2,)\" != (3,) \\ at C:\\ort [skew]",
               "test_hostile_id[q\"uote\\\\back]": "AssertionError: hostile 'q\"uote\\\\back' \t tab",
               "test_hostile_id[re[gex](chars)*+?.$^]": "AssertionError: hostile 're[gex](chars)*+?.$^' \t tab"}
    for mode in ("normal", "require_cudnn", "teeth"):
        rules = e[mode]["known_failures"]
        if mode != "teeth":  # LD_PRELOAD holds no libcudnn here: test_only_pinned passes in every mode
            assert not any("only_pinned" in r["test"] for r in rules)
        by_id = {}
        for r in rules:
            (hit,) = [n for n in failing if re.search(r["test"], NODE + n)]  # anchored: one rule, one test
            by_id[hit] = r
            assert r["observed"] == seen
        assert {k: r["reason"] for k, r in by_id.items()} == failing, mode
    assert e["normal"]["allowed_skips"] == ['^needs a GPU: "CUDA" \\\\ not here \\(cpu\\) \\[1\\.0\\+\\]$']
    assert re.search(e["normal"]["allowed_skips"][0], 'needs a GPU: "CUDA" \\ not here (cpu) [1.0+]')
    assert (e["normal"]["min_passed"], e["require_cudnn"]["min_passed"], e["teeth"]["min_failures"]) == (4, 4, 1)
    assert "allowed_skips" not in e["teeth"] and "min_passed" not in e["teeth"]

    again = c.nox("-s", CELL, "--", "--full")  # every test in every mode: what calibrate --from can calibrate from
    assert again.returncode == 0, again.stdout[-3000:]
    assert f"verdict PASS: {CELL}, 3 mode(s)" in again.stdout
    assert "stale rule" not in again.stdout and c.result(f"{CELL}-normal")["stale_rules"] == []

    # --from: the same file from the results alone, running nothing
    written = c.expect.read_bytes()
    c.expect.unlink()
    replay = c.calibrate("--from", str(c.results))
    assert replay.returncode == 0, replay.stdout[-3000:]
    assert f"{CELL}-normal: " not in replay.stdout  # nothing ran
    assert c.expect.read_bytes() == written

    # a file calibrate did not merge is never replaced unread
    other = tmp_path / "mine.toml"
    other.write_text("# my notes\n")
    refused = c.calibrate("--from", str(c.results), "--write", str(other))
    assert refused.returncode != 0
    assert (f"calibrate: {other} exists and is not the expect file of [suite.s] (its expect_file is {c.expect}): "
            "calibrate would replace it without reading it; pass --force to replace it, or --write another path") \
        in refused.stdout
    assert other.read_text() == "# my notes\n"
    forced = c.calibrate("--from", "results", "--write", "mine.toml", "--force")  # relative to where nox ran
    assert forced.returncode == 0, forced.stdout[-3000:]
    assert c.data(other) == c.data()


def test_a_fixed_failure_is_a_stale_rule_in_the_run_the_sweep_and_the_next_calibration(tmp_path, venvs):
    c = Calibration(tmp_path, venvs)
    assert c.calibrate(CELL).returncode == 0
    text = c.expect.read_text()
    hostile = "reason = \"AssertionError: hostile 'q\\\"uote\\\\\\\\back' \\t tab\""
    assert text.count(hostile) == 3, text
    text = text.replace(hostile, 'reason = "tracked in issue 42"', 1)  # a person's edits
    c.expect.write_text(text.replace("[expect.normal]\n", '[expect.normal]\nrequire_kernel = "CUDNN_FLASH_ATTENTION"\n'))
    base = c.nox("-s", "sweep", "--", "--save-baseline", "before-fix")
    assert base.returncode == 0, base.stdout[-3000:]

    c.write('env = { CAL_FIXED = "1" }')  # the known failure is fixed
    swept = c.nox("-s", "sweep", "--", "--baseline", "before-fix")
    assert swept.returncode == 0, swept.stdout[-3000:]  # stale rules are warnings and improvements, never failures
    improvements = json.loads((c.results / "sweep.json").read_text())["improvements"]
    stale = [i for i in improvements if i["kind"] == "stale-rule"]
    assert [(i["cell"], i["mode"], i["test"], i["before"]) for i in stale] == [
        (CELL, mode, BROKEN, "known_failures") for mode in ("normal", "require_cudnn", "teeth")]
    # the kind of staleness, so that many stale rules group as one change; the rule's pattern names the test
    assert stale[0]["after"] == "no longer fails"
    assert f"stale-rule: {CELL} normal {BROKEN}: known_failures -> no longer fails" in swept.stdout
    for mode in ("normal", "require_cudnn", "teeth"):
        r = c.result(f"{CELL}-{mode}")
        assert r["verdict"] == "pass"
        assert [(s["mode"], s["key"], s["pattern"]) for s in r["stale_rules"]] == [(mode, "known_failures", BROKEN)]
        assert r["stale_rules"][0]["reason"] == "AssertionError: shape \"(2,)\" != (3,) \\ at C:\\ort [skew]"
        assert any(w.startswith(f"stale rule: known_failures {BROKEN!r} matched nothing in this run") for w in r["warnings"])

    again = c.calibrate(CELL)
    assert again.returncode == 0, again.stdout[-3000:]
    for mode in ("normal", "require_cudnn", "teeth"):
        assert f"dropped stale rule: {mode} known_failures {BROKEN!r} (" in again.stdout
        assert BROKEN not in _tests(c.data()[mode]["known_failures"])
    assert c.expect.read_text().count('reason = "tracked in issue 42"') == 1  # kept, as the person wrote it
    assert c.data()["normal"]["require_kernel"] == "CUDNN_FLASH_ATTENTION"  # a key calibrate does not write: kept
    assert c.data()["normal"]["min_passed"] == 5
    clean = c.nox("-s", CELL)
    assert clean.returncode == 0 and "stale rule" not in clean.stdout, clean.stdout[-3000:]
    # a run whose tests never had the chance to match (nothing collected) makes no rule stale
    empty = c.nox("-s", f"{CELL}-normal", "--", "-k", "nothing_has_this_name")
    r = c.result(f"{CELL}-normal")
    assert empty.returncode != 0 and r["pytest_exit_code"] == 5
    assert r["stale_rules"] == [] and not any("stale rule" in w for w in r["warnings"])


def test_calibrate_refuses_to_accept_the_canarys_own_failure(tmp_path, venvs):
    """MATH forced in every mode: in require_cudnn the gated test fails with the canary's message."""
    c = Calibration(tmp_path, venvs, 'provider_options = { sdpa_kernel = "16" }')
    cal = c.calibrate(CELL)
    assert cal.returncode == 0, cal.stdout[-3000:]
    assert (f"refused: {CELL}-require_cudnn {NODE}test_cudnn_bites failed with the canary's message "
            f"({CANARY!r}: a test that asked for cuDNN and got another tier); a known failure would hide the "
            "dispatch change the canary exists to catch") in cal.stdout
    assert (f"still failing after calibration: {CELL}-require_cudnn: 1 unexpected failure(s): "
            f"{NODE}test_cudnn_bites failed: {CANARY}") in cal.stdout
    e = c.data()
    for mode in ("normal", "require_cudnn", "teeth"):
        assert not any(re.search(t, NODE + "test_cudnn_bites") for t in _tests(e[mode]["known_failures"])), mode
    assert CANARY not in c.expect.read_text()
    run = c.nox("-s", CELL)
    assert run.returncode != 0
    assert c.result(f"{CELL}-require_cudnn")["verdict"] == "fail"  # the file hides nothing of it
    assert c.result(f"{CELL}-normal")["verdict"] == "pass"


def test_calibrate_never_writes_a_key_the_matrix_sets(tmp_path, venvs):
    c = Calibration(tmp_path, venvs, "[suite.s.expect.teeth]\nknown_toothless = []\n")
    cal = c.calibrate(CELL)
    assert cal.returncode == 0, cal.stdout[-3000:]
    assert ("not written: teeth known_toothless: [suite.s.expect.teeth] in the matrix file sets it (a key is set in "
            f"one file only); today it does not accept: {NODE}test_values_only_cudnn") in cal.stdout
    assert "known_toothless" not in c.data()["teeth"]
    assert f"still failing after calibration: {CELL}-teeth: 1 toothless test(s)" in cal.stdout
    listing = c.nox("-l")
    assert listing.returncode == 0, listing.stdout  # the file and the matrix load together


@pytest.fixture(scope="module")
def pinned_cudnn(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cal-libs")
    return build_so(d / "libcudnn.so.9.14.0", "libcudnn.so.9", FAKE_CUDNN % 91400)


def test_two_cells_of_a_suite_merge_as_a_union_each_rule_naming_its_cells(tmp_path, venvs, pinned_cudnn):
    pairings = ('{{ python = "{py}", ort = "cpu", torch = "none", libs = "x", modes = ["normal"] }}, '
                '{{ python = "{py}", ort = "cpu", torch = "none", libs = "p", modes = ["normal"] }}')
    c = Calibration(tmp_path, venvs, libs=f'[libs.p]\ncudnn = "{pinned_cudnn}"', pairings=pairings)
    cal = c.calibrate()
    assert cal.returncode == 0, cal.stdout[-3000:]
    rules = {r["test"]: [o["cell"] for o in r["observed"]] for r in c.data()["normal"]["known_failures"]}
    assert rules[BROKEN] == sorted([CELL, PINNED])
    assert rules["^test_calibrate\\.py::test_only_pinned$"] == [PINNED]  # seen in one cell only
    assert c.data()["normal"]["min_passed"] == 3  # the lower of the two cells' counts (4 and 3)

    plain = c.nox("-s", CELL)  # the pinned cell's rule matches nothing here, and is no rot here
    assert plain.returncode == 0, plain.stdout[-3000:]
    assert c.result(f"{CELL}-normal")["stale_rules"] == []

    partial = c.calibrate(CELL)  # one cell of two: what the other needs is kept
    assert partial.returncode == 0, partial.stdout[-3000:]
    assert "dropped" not in partial.stdout
    rules = {r["test"]: [o["cell"] for o in r["observed"]] for r in c.data()["normal"]["known_failures"]}
    assert rules["^test_calibrate\\.py::test_only_pinned$"] == [PINNED]


HOSTILE = ['a"b', "back\\slash", "new\nline", "tab\tand\rcr", "nul\x00del\x7f", "\x1b[31mansi\x1b[0m",
           "unicode é ß 漢字 🙂", "lone \ud800 surrogate", "re[gex](x)*+?.$^|{1}", "# not a comment", "'''", '"""',
           "trailing backslash \\", "\u2028line sep", "  spaces  "]


@pytest.mark.parametrize("text", HOSTILE, ids=[repr(t) for t in HOSTILE])
def test_the_writer_round_trips_hostile_text(text):
    obs = (Observation("c-3.12-x", "1.31.1+" + text, "2026-11-30"),)
    table = ModeTable("normal", skips=[Skip(literal_regex(text), "note " + text)],
                      rules={"known_failures": [Rule(literal_regex(text), text, obs)]})
    data = tomllib.loads(render(["header " + text, ""], [table]))
    (rule,) = data["expect"]["normal"]["known_failures"]
    (skip,) = data["expect"]["normal"]["allowed_skips"]
    want = text.replace("\ud800", "\ufffd")  # the one thing no UTF-8 file can hold
    assert rule["reason"] == want
    assert rule["observed"] == [{"cell": "c-3.12-x", "ort": "1.31.1+" + want, "date": "2026-11-30"}]
    for pattern in (rule["test"], skip):
        assert re.search(pattern, text), pattern  # the id itself, surrogate included
        assert not re.search(pattern, text + "x") and not re.search(pattern, "x" + text)
    assert tomllib.loads(f"s = {string(text)}")["s"] == want

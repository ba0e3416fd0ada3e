"""Teeth takes away the tier the suite names (expect.teeth.tier), not always cuDNN.

ORT's CUDA 12 build 1.26.0 runs no cuDNN attention: its fast tier is FLASH_ATTENTION, and the dispatch suite's gate
requires what DISPATCH_CANARY_TIER names. Real nox runs of a fixture suite whose CPU session prints a tier chosen by
its env (tests/fixtures/suites/canary_tier).
"""
from helpers import CELL, SUITES

SUITE = SUITES / "canary_tier"
MODES = ("normal", "require_cudnn", "teeth")
FLASH = "FLASH_ATTENTION"
ENV = f'env = {{ FAKE_SDPA_TIER = "{FLASH}", DISPATCH_CANARY_TIER = "{FLASH}" }}'


def write(harness, teeth: str, env: str = ENV):
    harness.write(["test_tier.py"], root=SUITE, modes=MODES, pythonpath=(".", "../canary", ".."), suite_extra=env,
                  expect=f"[suite.s.expect.teeth]\nmin_failures = 2\n{teeth}")


def test_teeth_bites_every_test_of_the_tier_the_suite_names(harness):
    write(harness, f'tier = "{FLASH}"\n')
    run = harness.nox("-s", CELL)
    assert run.proc.returncode == 0, run.output[-3000:]
    assert run.result("require_cudnn")["dispatch"]["tests_per_tier"] == {FLASH: 2}
    teeth = run.result("teeth")
    assert teeth["verdict"] == "pass" and sorted(teeth["outcomes"].values()) == ["failed", "failed"]
    cov = teeth["teeth_coverage"]
    assert (cov["tier"], cov["tier_tests"], cov["bitten"], cov["toothless"]) == (FLASH, 2, 2, 0)
    assert f"{FLASH} tests 2" not in run.output  # the table shortens known tiers
    assert "flash tests 2, bitten 2, toothless 0" in run.output


def test_teeth_left_on_cudnn_finds_nothing_to_cover_in_a_flash_build(harness):
    """The same build and gate with teeth's tier left at its default: no bite is the cuDNN canary's, and
    require_cudnn dispatched no cuDNN test, so teeth fails instead of passing on a bite it cannot vouch for."""
    write(harness, "")
    run = harness.nox("-s", CELL)
    teeth = run.result("teeth")
    assert run.proc.returncode != 0 and teeth["verdict"] == "fail"
    assert teeth["reasons"][0] == ("0 test(s) failed with exactly \"AssertionError: 'CUDNN_FLASH_ATTENTION' != "
                                   "'MATH'\", min_failures is 2")
    assert "require_cudnn dispatched no CUDNN_FLASH_ATTENTION test: teeth has nothing to cover" in teeth["reasons"]


def test_a_gate_that_requires_another_tier_than_teeth_takes_away_is_toothless(harness):
    """Teeth names FLASH but the suite's gate still requires cuDNN: require_cudnn fails its FLASH tests, and
    with MATH forced they fail with the cuDNN canary, not FLASH's: every FLASH test is toothless."""
    write(harness, f'tier = "{FLASH}"\n', env=f'env = {{ FAKE_SDPA_TIER = "{FLASH}" }}')
    teeth = harness.nox("-s", CELL).result("teeth")
    assert teeth["verdict"] == "fail" and teeth["teeth_coverage"]["undeclared_toothless"] == [
        "test_tier.py::test_gated[a]", "test_tier.py::test_gated[b]"]

"""The helper that reads nox's session lines accepts nox's own ending and nothing else."""

import pytest
from helpers import ends_line

MESSAGE = "m.toml: suite.s.expect_file: expect/s.toml does not exist\n    fix: remove expect_file"


@pytest.mark.parametrize("out", [
    MESSAGE + "\n",
    MESSAGE + ".\n",
    MESSAGE + " (took 2 seconds).\n",  # what CI's slower machine printed (stop 30)
    "nox > Session x aborted: ort-gpu-matrix: 1 problem(s)\n" + MESSAGE + " (took a minute).\nnext\n",
])
def test_the_message_then_only_nox_ending_matches(out):
    assert ends_line(out, MESSAGE)


@pytest.mark.parametrize("out", [
    MESSAGE,  # no line break: the line may go on
    MESSAGE + "x\n",
    MESSAGE + " and more.\n",
    MESSAGE + " (took 2 seconds) more\n",
    MESSAGE + " (took 2\nseconds).\n",
    MESSAGE.replace("remove", "keep") + "\n",
])
def test_anything_else_after_the_message_does_not(out):
    assert not ends_line(out, MESSAGE)

"""The JSON Schema comes from the model the loader validates with, and agrees with it."""
import json
import re
import tomllib

import jsonschema
import pytest
from helpers import REPO

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.config.schema import schema
from ort_gpu_matrix.util.errors import MatrixError


@pytest.fixture(scope="module")
def validator():
    jsonschema.Draft202012Validator.check_schema(schema())
    return jsonschema.Draft202012Validator(schema())


def test_the_committed_schema_is_the_generated_one():
    committed = json.loads((REPO / "matrix.schema.json").read_text())
    assert committed == schema(), "regenerate: python -m ort_gpu_matrix.config.schema > matrix.schema.json"


def _guide_example() -> str:
    """The guide's matrix with every key (it moved there from the README)."""
    text = (REPO / "docs" / "guide.md").read_text()
    (example,) = [b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "[matrix]" in b]
    return example


@pytest.mark.parametrize("source", ["shipped", "guide"])
def test_the_shipped_matrix_and_the_guide_example_are_valid(validator, source):
    text = (REPO / "matrix.toml").read_text() if source == "shipped" else _guide_example()
    assert list(validator.iter_errors(tomllib.loads(text))) == []


BAD = [
    ('[libs.x]\nnone = true\ncudnnn = "/x"', "libs.x.cudnnn"),
    ('[libs.x]\nnone = true\nsearch = ["/x"]', "libs.x"),
    ('[ort.a]\nrequirement = "onnxruntime"\nwheel = "x.whl"', "ort.a"),
    ('[torch.t]\nskip = false', "torch.t.skip"),
    ('[matrix]\nbackend = "uv|conda"', "matrix.backend"),
    ('[matrix]\nmodes = ["normal", "fast"]', "matrix.modes[1]"),
    ('[matrix]\nmodes = []', "matrix.modes"),
    ('[matrix]\nbackend = "uv|virtualen"', "matrix.backend"),
    ('[matrix]\npythons = ["3.12.1"]', "matrix.pythons[0]"),
    ('[libs.x]\nnone = true\nloader = "preloda"', "libs.x.loader"),
    ('[pairing]\ninclude = [{ python = "py3.12", ort = "a", torch = "t", libs = "x" }]', "pairing.include[0].python"),
    ('[pairing]\ninclude = [{ python = "3.12", ort = "a", torch = "t", libs = "x", modes = ["norml"] }]',
     "pairing.include[0].modes[0]"),
    ('[suite.s]\nroot = "x"\nfiles = ["t.py"]\n[suite.s.expect.normal]\nknown_toothless = []', "suite.s.expect.normal.known_toothless"),
    ('[suite.s]\nroot = "x"\nfiles = ["t.py"]\n[suite.s.expect.teeth]\nallowed_skips = []', "suite.s.expect.teeth.allowed_skips"),
    ('[suite.s]\nfiles = ["t.py"]', "suite.s.root"),
    ('[suite.s]\nroot = "x"\nfiles = ["t.py"]\n[suite.s.expect.teeth]\nmin_failures = -1', "suite.s.expect.teeth.min_failures"),
    ('[suite.s]\nroot = "x"\nfiles = ["t.py"]\nexpect_file = 1', "suite.s.expect_file"),
    ('[suite.s]\nroot = "x"\nfiles = ["t.py"]\n[suite.s.expect.normal]\nknown_failures = [{ test = "a", reason = "b", '
     'observed = [{ cell = "c", date = "2026-11-30" }] }]', "suite.s.expect.normal.known_failures[0].observed[0].ort"),
]


@pytest.mark.parametrize("text, key", BAD, ids=[k for _, k in BAD])
def test_schema_and_loader_reject_the_same_inputs(validator, tmp_path, text, key):
    data = tomllib.loads(text)
    assert list(validator.iter_errors(data)), f"the schema accepts {text!r}"
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    assert key in [p.key for p in info.value.problems], info.value.render()

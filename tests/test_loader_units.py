"""The adversarial table of tests/test_bad_inputs.py, read in-process by load_matrix: the same exact problems,
without a nox run per row, so mutmut can run it against every mutant of config/loader.py. The nox rows stay
the proof that the messages reach the user; these pin the loader's decisions, and a few more of their kind
(a TOML boolean where a whole number is wanted)."""
from __future__ import annotations

import pytest
from test_bad_inputs import BASE, ROWS, _fill

from ort_gpu_matrix.config.loader import load_matrix
from ort_gpu_matrix.util.errors import MatrixError

# Rows whose problem is found after loading (on the host, or at registration): load_matrix accepts them.
AFTER_LOAD = {'the same pairing twice', 'pin missing on this host', 'pin a text file', 'search finds nothing',
              'python not on this host', 'torch environment missing', 'local ORT wheel missing',
              'wheelhouse not a dir', 'suite root not a dir', 'suite files glob matches nothing',
              'pythonpath not a dir', 'unset variable', 'ort source missing on this host',
              'ort source without VERSION_NUMBER', 'ort source from an unset variable',
              'root under an unset ORT checkout variable', 'offline without the ORT wheel',
              "offline without a pip set's wheel", 'expect_file missing'}


def _matrix(tmp_path, text):
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "libcudart.so.13").write_text("not a library\n")
    (tmp_path / "emptyhouse").mkdir()
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(text)
    return matrix


@pytest.mark.parametrize("name, edit, expected", ROWS, ids=[r[0] for r in ROWS])
def test_the_loader_finds_exactly_the_rows_problems(tmp_path, name, edit, expected):
    matrix = _matrix(tmp_path, edit(BASE, tmp_path))
    if name in AFTER_LOAD:
        load_matrix(matrix)
        return
    with pytest.raises(MatrixError) as err:
        load_matrix(matrix)
    got = [str(p) for p in err.value.problems]
    want = []
    for row in expected:
        file, (key, problem, fix) = (_fill(row[0], tmp_path), row[1:]) if len(row) == 4 else (str(matrix), row)
        want.append(f"{file}: {_fill(key, tmp_path)}: {_fill(problem, tmp_path)}\n    fix: {_fill(fix, tmp_path)}")
    assert sorted(got) == sorted(want)
    assert str(err.value).startswith(f"ort-gpu-matrix: {len(want)} problem(s) found, nothing was built or run\n")


BOOL_FOR_INT = [
    ("[suite.s]\n", "timeout", "timeout = true", "suite.s.timeout", "must be a whole number >= 1, found True",
     "write timeout = 3600"),
    ("[suite.s]\n", "test_timeout", "test_timeout = false", "suite.s.test_timeout",
     "must be a whole number >= 1, found False", "write test_timeout = 1"),
    ("[suite.s]\n", "timeout", "timeout = 0", "suite.s.timeout", "must be a whole number >= 1, found 0",
     "write timeout = 3600"),
    ("[suite.s]\n", "timeout", "timeout = 1.5", "suite.s.timeout", "must be a whole number >= 1, found 1.5",
     "write timeout = 3600"),
]


@pytest.mark.parametrize("section, name, line, key, problem, fix", BOOL_FOR_INT, ids=[r[2] for r in BOOL_FOR_INT])
def test_a_boolean_or_a_fraction_is_no_whole_number(tmp_path, section, name, line, key, problem, fix):
    matrix = _matrix(tmp_path, _fill(BASE, tmp_path).replace(section, section + line + "\n", 1))
    with pytest.raises(MatrixError) as err:
        load_matrix(matrix)
    assert [str(p) for p in err.value.problems] == [f"{matrix}: {key}: {problem}\n    fix: {fix}"]


def test_the_least_whole_number_is_accepted(tmp_path):
    matrix = _matrix(tmp_path, _fill(BASE, tmp_path).replace("[suite.s]\n", "[suite.s]\ntimeout = 1\ntest_timeout = 1\n", 1))
    suite = load_matrix(matrix).suites["s"]
    assert (suite.timeout, suite.test_timeout) == (1, 1)


def test_suite_expect_merges_the_file_under_the_matrix_tables_and_names_every_problem(tmp_path):
    from ort_gpu_matrix.config.loader import suite_expect
    matrix = _matrix(tmp_path, _fill(BASE, tmp_path) + '\n[suite.s.expect.normal]\nmin_passed = 3\n'
                     '[suite.other.expect.normal]\nmin_passed = 9\n')
    good = tmp_path / "good.toml"
    good.write_text('[expect.normal]\nknown_failures = [{ test = "t::f", reason = "r" }]\n')
    expect = suite_expect(matrix, "s", good)
    assert expect["normal"].min_passed == 3 and [r.test for r in expect["normal"].known_failures] == ["t::f"]  # type: ignore[union-attr]
    assert suite_expect(matrix, "s", None)["normal"].known_failures == ()
    assert suite_expect(matrix, "nowhere", None)["normal"].min_passed == 1  # type: ignore[union-attr]
    both = tmp_path / "both.toml"
    both.write_text('[expect.normal]\nmin_passed = 2\nknown_failures = [{ test = "(", reason = "r" }]\n')
    with pytest.raises(MatrixError) as err:
        suite_expect(matrix, "s", both)
    assert sorted(str(p).split("\n")[0] for p in err.value.problems) == [
        f"{both}: expect.normal.known_failures[0].test: is not a valid regex (missing ), unterminated subpattern at position 0)",
        f"{matrix}: suite.s.expect.normal.min_passed: is set both here and in {both} (expect.normal.min_passed)"]
    bad = _matrix(tmp_path / "m2" if (tmp_path / "m2").mkdir() is None else tmp_path,
                  _fill(BASE, tmp_path) + '\n[suite.s.expect.normal]\nmin_passed = -1\n')
    with pytest.raises(MatrixError) as err:
        suite_expect(bad, "s", None)
    assert [str(p).split("\n")[0] for p in err.value.problems] == [
        f"{bad}: suite.s.expect.normal.min_passed: must be a whole number >= 0, found -1"]


def _problems(tmp_path, text):
    matrix = _matrix(tmp_path, text)
    try:
        load_matrix(matrix)
    except MatrixError as err:
        return [str(p).replace(str(tmp_path), "{tmp}") for p in err.problems]
    return []


@pytest.mark.parametrize("edit, want", [
    (lambda b: b.replace("[suite.s]\n", '[suite.s]\nteeth_scope = "cudn"\n'),
     ["suite.s.teeth_scope: 'cudn' is not a teeth scope (did you mean `cudnn`?)\n    fix: use one of: known, all, cudnn"]),
    (lambda b: b.replace("[suite.s]\n", '[suite.s]\nteeth_scope = "zzzz"\n'),
     ["suite.s.teeth_scope: 'zzzz' is not a teeth scope\n    fix: use one of: known, all, cudnn"]),
    (lambda b: b.replace("[suite.s]\n", '[suite.s]\nisolation = "restor"\n'),
     ["suite.s.isolation: 'restor' is not an isolation (did you mean `restore`?)\n    fix: use one of: restore, report, off"]),
    (lambda b: b.replace("[suite.s]\n", '[suite.s]\nisolation = "qqqq"\n'),
     ["suite.s.isolation: 'qqqq' is not an isolation\n    fix: use one of: restore, report, off"]),
    (lambda b: "[ort.cpu]" + b.split("[ort.cpu]")[1],  # no [matrix] table at all
     ['pairing.include[0].suite: the pairing has no suite\n    fix: set [matrix] suite = "<id>" or give the entry suite = "<id>"']),
    (lambda b: b.replace("skip = true", "skip = true\nenvironment = false"),  # false is a flag's only for a flag
     ['torch.none.environment: must be a string, found False\n    fix: write environment = "..."',
      "torch.none: needs exactly one of requirement, environment, skip (found environment, skip)\n    fix: keep one of: "
      "requirement, environment, skip"]),
    (lambda b: b + '\n[suite.s.expect.normal]\nknown_flaky = [{ test = "t", outcomes = ["qqq"], tiers = ["math", "MATH"], '
                   'reason = "r" }]\n',
     ["suite.s.expect.normal.known_flaky[0].outcomes[0]: `qqq` is not a pytest outcome\n    fix: use some of: passed, "
      "failed, skipped, error, xfailed, xpassed",
      'suite.s.expect.normal.known_flaky[0].tiers[0]: `math` is not an SdpaKernel tier name\n    fix: write tiers as ORT '
      'prints them, e.g. ["EFFICIENT_ATTENTION", "FLASH_ATTENTION"]']),
], ids=["teeth_scope near", "teeth_scope far", "isolation near", "isolation far", "no matrix table", "false environment",
        "known_flaky outcome and tier"])
def test_more_bad_values_get_their_exact_problems(tmp_path, edit, want):
    assert _problems(tmp_path, edit(_fill(BASE, tmp_path))) == [f"{{tmp}}/matrix.toml: {w}" for w in want]


def test_every_way_reading_the_toml_fails_names_the_file_and_the_fix(tmp_path):
    from ort_gpu_matrix.config.loader import read_toml
    (tmp_path / "d").mkdir()
    (tmp_path / "latin.toml").write_bytes(b'a = 1\nb = "\xe9"\n')
    (tmp_path / "bad.toml").write_text("a = \n")
    (tmp_path / "dup.toml").write_text("[x]\na = 1\na = 2\n")
    (tmp_path / "good.toml").write_text('a = "é"\n')
    got = {}
    for name in ("missing.toml", "d", "latin.toml", "bad.toml", "dup.toml"):
        with pytest.raises(MatrixError) as err:
            read_toml(tmp_path / name)
        got[name] = [str(p).replace(str(tmp_path), "{tmp}") for p in err.value.problems]
    assert got == {
        "missing.toml": ["{tmp}/missing.toml: (file): does not exist\n    fix: create it, or point MATRIX_TOML at your "
                         "matrix file"],
        "d": ["{tmp}/d: (file): is a directory, not a file\n    fix: point MATRIX_TOML at the .toml file itself, e.g. "
              "{tmp}/d/matrix.toml"],
        "latin.toml": ["{tmp}/latin.toml: (file): is not UTF-8 text (byte 0xe9 on line 2)\n    fix: save it as UTF-8, as "
                       "TOML requires"],
        "bad.toml": ["{tmp}/bad.toml: (syntax): is not valid TOML: Invalid value (at line 1, column 5)\n    fix: fix the "
                     "TOML syntax at that line"],
        "dup.toml": ["{tmp}/dup.toml: x.a: is set twice (lines 2 and 3)\n    fix: keep one of the two lines"]}
    assert read_toml(tmp_path / "good.toml") == {"a": "é"}


def test_values_are_shown_in_backticks_unless_they_need_quoting():
    from ort_gpu_matrix.config.reader import shown
    assert shown("abc") == "`abc`" and shown("a`b") == "'a`b'" and shown("a\nb") == "'a\\nb'" and shown("") == "''"


def test_suite_expect_of_a_matrix_without_suites_and_with_an_unknown_mode(tmp_path):
    from ort_gpu_matrix.config.loader import suite_expect
    bare = tmp_path / "bare.toml"
    bare.write_text("[matrix]\n")
    assert suite_expect(bare, "s", None)["normal"].min_passed == 1  # type: ignore[union-attr]
    odd = tmp_path / "odd.toml"
    odd.write_text("[suite.s.expect.bogus]\nx = 1\n")
    with pytest.raises(MatrixError) as err:
        suite_expect(odd, "s", None)
    assert [str(p).split("\n")[0].split(": ")[1] for p in err.value.problems] == ["suite.s.expect.bogus"]

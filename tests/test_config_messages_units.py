"""What the loader and its Reader tell a user about a bad matrix, in-process, where mutmut's mutants of
config/loader.py and config/reader.py meet them: each message names the file, the key and the fix, exactly.

The real loader reads real files in tmp_path; the one file tmp_path cannot give (one root may not read)
is a write-only sysctl, which the kernel refuses to read to root as well.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Optional

import pytest
from helpers import ORT_CPU, cpu_ort, matrix_head, suite_head, tables
from test_bad_inputs import BASE, PY, ROOT, _fill

from ort_gpu_matrix.config.loader import load_matrix, read_toml
from ort_gpu_matrix.config.model import key
from ort_gpu_matrix.config.reader import Reader
from ort_gpu_matrix.util.errors import MatrixError

ORT = tables("ort", cpu_ort())  # the [ort.cpu] table of BASE


def _write(tmp_path: Path, text: str) -> Path:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(text)
    return matrix


def _problems(tmp_path: Path, text: str) -> list[str]:
    """Every problem load_matrix reports, with tmp_path shown as {tmp}."""
    with pytest.raises(MatrixError) as err:
        load_matrix(_write(tmp_path, text))
    return [str(p).replace(str(tmp_path), "{tmp}") for p in err.value.problems]


def _base(tmp_path: Path) -> str:
    return _fill(BASE, tmp_path)


# read_toml: the ways reading can fail that test_loader_units' table does not reach

def test_a_file_no_one_may_read_names_the_file_and_the_chmod_that_fixes_it():
    # a write-only sysctl: the kernel refuses to read it to every user, root included (no DAC override)
    sysctl = Path("/proc/sys/vm/drop_caches")
    with pytest.raises(MatrixError) as err:
        read_toml(sysctl)
    assert [str(p) for p in err.value.problems] == [
        f"{sysctl}: (file): cannot be read (permission denied)\n    fix: chmod u+r {sysctl}"]


def test_a_path_through_a_file_or_too_long_says_why_it_cannot_be_read(tmp_path):
    (tmp_path / "matrix.toml").write_text("[matrix]\n")
    under_a_file = tmp_path / "matrix.toml" / "matrix.toml"  # MATRIX_TOML with one level too many
    too_long = tmp_path / ("m" * (os.pathconf(tmp_path, "PC_NAME_MAX") + 1))
    got = []
    for path in (under_a_file, too_long):
        with pytest.raises(MatrixError) as err:
            read_toml(path)
        got += [str(p) for p in err.value.problems]
    assert got == [f"{under_a_file}: (file): cannot be read (Not a directory)\n    fix: check the path and the disk",
                   f"{too_long}: (file): cannot be read (File name too long)\n    fix: check the path and the disk"]


def test_an_unreadable_expect_file_is_reported_with_the_matrix_own_problems(tmp_path):
    (tmp_path / "expect.toml").write_text("[expect.normal\n")
    text = _base(tmp_path).replace("[matrix]\n", '[matrix]\nprefix = "g p u"\n').replace(
        "[suite.s]\n", '[suite.s]\nexpect_file = "expect.toml"\n')
    assert _problems(tmp_path, text) == [
        "{tmp}/matrix.toml: matrix.prefix: may hold only letters, digits, '_' and '.'\n    fix: write prefix = \"gpu\"",
        "{tmp}/expect.toml: (syntax): is not valid TOML: Expected ']' at the end of a table declaration (at line 1, "
        "column 15)\n    fix: fix the TOML syntax at that line"]


# {ort.source} in a suite root, and the ORT entries that must then have a source

def test_a_root_that_is_the_ort_source_itself_loads(tmp_path):
    text = _base(tmp_path).replace(f'root = "{ROOT}"', 'root = "{ort.source}"').replace(
        ORT, ORT + f'source = "{tmp_path}"\n')
    suite = load_matrix(_write(tmp_path, text)).suites["s"]
    assert suite.root == "{ort.source}" and suite.from_ort_source


def test_a_second_ort_source_in_a_root_is_one_placed_after_its_start(tmp_path):
    text = _base(tmp_path).replace(f'root = "{ROOT}"', 'root = "{ort.source}/a/{ort.source}"').replace(
        ORT, ORT + 'source = "/x"\n')
    assert _problems(tmp_path, text) == [
        "{tmp}/matrix.toml: suite.s.root: has {ort.source} after its start: it stands for a whole directory\n"
        '    fix: write root = "{ort.source}/onnxruntime/test/python/transformers"']


def test_every_ort_entry_without_a_source_is_named_once_whatever_the_pairings_order(tmp_path):
    pairs = [("a", "plain", PY), ("a", "src", PY), ("a", "src", "this"), ("b", "src", PY), ("c", "src", PY)]
    include = ", ".join(f'{{ python = "{py}", ort = "{o}", torch = "none", libs = "x", suite = "{s}" }}'
                        for o, s, py in pairs)
    wheel = f'requirement = "{ORT_CPU}"'
    orts = {"a": wheel, "b": wheel, "c": f'{wheel}\nsource = "{tmp_path}"'}
    text = (matrix_head(pythons=[PY], modes=["normal"], ort=orts) + f"[pairing]\ninclude = [{include}]\n\n"
            + suite_head("plain", ["test_allpass.py"], None, root=ROOT)
            + suite_head("src", ["test_allpass.py"], None, root="{ort.source}/tests"))
    fix = ('add source = "${{ORT_SOURCE}}" to [ort.{o}] (an ORT checkout: the dir holding VERSION_NUMBER), '
           "or pair suite src only with ORT entries that have one")
    assert _problems(tmp_path, text) == [
        "{tmp}/matrix.toml: ort.a.source: is missing: suite.src.root begins with {ort.source} and pairing.include[1] "
        "pairs that suite with ort a\n    fix: " + fix.format(o="a"),
        "{tmp}/matrix.toml: ort.b.source: is missing: suite.src.root begins with {ort.source} and pairing.include[3] "
        "pairs that suite with ort b\n    fix: " + fix.format(o="b")]


# sections and tables of the wrong shape

def test_a_section_or_an_id_that_is_not_a_table_names_the_section_and_the_table_to_write(tmp_path):
    no_ort = _base(tmp_path).replace(ORT, "")
    assert _problems(tmp_path, "ort = 3\n" + no_ort) == [
        "{tmp}/matrix.toml: ort: must hold tables\n    fix: write [ort.<id>] tables",
        "{tmp}/matrix.toml: pairing.include[0].ort: `cpu` is not a declared ort id\n"
        "    fix: declare [ort.cpu] or use one of: (none declared)"]
    assert _problems(tmp_path, no_ort.replace("[torch.none]", "[ort]\ncpu = 3\n[torch.none]")) == [
        "{tmp}/matrix.toml: ort.cpu: must be a table\n    fix: write [ort.cpu]",
        "{tmp}/matrix.toml: pairing.include[0].ort: `cpu` is not a declared ort id\n"
        "    fix: declare [ort.cpu] or use one of: (none declared)"]
    matrix, rest = _base(tmp_path).split("[ort.cpu]")
    assert _problems(tmp_path, "matrix = 3\n[ort.cpu]" + rest)[0] == (
        "{tmp}/matrix.toml: matrix: must be a table, found int\n    fix: write it as [matrix] with keys")
    assert _problems(tmp_path, _base(tmp_path).replace("[suite.s]\n", "[suite.s]\nexpect = 3\n")) == [
        "{tmp}/matrix.toml: suite.s.expect: must be a table, found int\n    fix: write it as [suite.s.expect] with keys"]


def test_a_section_left_out_is_reported_as_the_id_the_pairing_lacks_not_as_a_bad_section(tmp_path):
    assert _problems(tmp_path, _base(tmp_path).replace("[libs.x]\nnone = true\n", "")) == [
        "{tmp}/matrix.toml: pairing.include[0].libs: `x` is not a declared libs id\n"
        "    fix: declare [libs.x] or use one of: (none declared)"]


# unknown keys

def test_every_key_of_another_modes_table_is_named_and_so_is_the_next_unknown_key(tmp_path):
    text = _base(tmp_path) + ('\n[suite.s.expect.normal]\nknown_toothless = [{ test = "t", reason = "r" }]\n'
                              "min_failures = 1\nzzz = 1\n")
    moved = "    fix: move it to [suite.s.expect.teeth], or use one of: "
    got = _problems(tmp_path, text)
    assert [p.split("\n")[0] for p in got] == [
        "{tmp}/matrix.toml: suite.s.expect.normal.known_toothless: unknown key here: known_toothless is read only by "
        "[suite.s.expect.teeth]",
        "{tmp}/matrix.toml: suite.s.expect.normal.min_failures: unknown key here: min_failures is read only by "
        "[suite.s.expect.teeth]",
        "{tmp}/matrix.toml: suite.s.expect.normal.zzz: unknown key"]
    assert got[0].split("\n")[1].startswith(moved) and got[1].split("\n")[1].startswith(moved)


def test_an_unknown_key_far_from_every_key_gets_no_guess(tmp_path):
    # `options` is 0.63 like `isolation`: a guess that far would send the user to the wrong key
    got = _problems(tmp_path, _base(tmp_path).replace("[suite.s]\n", '[suite.s]\noptions = "x"\n'))
    assert got == ["{tmp}/matrix.toml: suite.s.options: unknown key\n    fix: remove it, or use one of: cpu_nodes, "
                   "env, expect_file, files, full, isolation, plugins, provider_options, pytest_args, pythonpath, "
                   "quiet_threads, requirements, root, shape_ops, slots_per_gpu, teeth_scope, test_timeout, timeout"]


# values

def test_a_python_version_spelt_with_a_capital_python_prefix_is_guessed(tmp_path):
    text = _base(tmp_path).replace(f'pythons = ["{PY}"]', 'pythons = ["Python3.12", "PY3.13"]')
    assert _problems(tmp_path, text) == [
        "{tmp}/matrix.toml: matrix.pythons[0]: `Python3.12` is not a python version (did you mean `3.12`?)\n"
        '    fix: write "3.12"',
        "{tmp}/matrix.toml: matrix.pythons[1]: `PY3.13` is not a python version (did you mean `3.13`?)\n"
        '    fix: write "3.13"']


def test_a_list_of_strings_given_a_number_or_a_boolean_item_is_named_as_such(tmp_path):
    base = _base(tmp_path)
    assert _problems(tmp_path, base.replace(f'pythons = ["{PY}"]', "pythons = 3")) == [
        '{tmp}/matrix.toml: matrix.pythons: must be a list of strings, found 3\n    fix: write pythons = ["..."]']
    assert _problems(tmp_path, base.replace(f'pythons = ["{PY}"]', f'pythons = ["{PY}", true]')) == [
        f"{{tmp}}/matrix.toml: matrix.pythons: must be a list of strings, found ['{PY}', True]\n"
        '    fix: write pythons = ["..."]']


def test_suite_env_values_reach_the_suite_as_strings(tmp_path):
    text = _base(tmp_path).replace("[suite.s]\n", '[suite.s]\nenv = { MY_FLAG = "on", MY_COUNT = 3 }\n')
    assert load_matrix(_write(tmp_path, text)).suites["s"].env == {"MY_FLAG": "on", "MY_COUNT": "3"}


def test_a_pairing_entry_runs_exactly_the_modes_it_lists(tmp_path):
    text = _base(tmp_path).replace('libs = "x" }', 'libs = "x", modes = ["teeth"] }')
    assert [p.modes for p in load_matrix(_write(tmp_path, text)).pairings] == [("teeth",)]


# the Reader serves any model class: Optional hints, ints without a minimum, lists without an example

@dataclasses.dataclass(frozen=True)
class _Knobs:
    count: Optional[int] = key("how many", None)  # noqa: UP045 - the typing.Union spelling the reader also reads
    names: tuple[str, ...] = key("the names", (), minimum=1)


@dataclasses.dataclass(frozen=True)
class _Odd:
    ratio: float = key("a ratio", 1.0)


def test_the_reader_reads_a_model_written_with_optional_and_without_a_minimum_or_an_example():
    r = Reader("m.toml")
    assert r.entry({"count": 0}, "k", _Knobs) == _Knobs(count=0)
    assert r.problems == []
    assert r.entry({"count": -1, "names": []}, "k", _Knobs) == _Knobs(count=None, names=())
    assert [str(p) for p in r.problems] == [
        "m.toml: k.count: must be a whole number >= 0, found -1\n    fix: write count = 0",
        'm.toml: k.names: is empty: it needs at least 1 item(s)\n    fix: write names = ["..."] (the names)']


def test_a_model_key_of_a_type_the_reader_does_not_know_fails_naming_the_key():
    with pytest.raises(TypeError, match=r"^unsupported key type <class 'float'> for k\.ratio$"):
        Reader("m.toml").entry({"ratio": 0.5}, "k", _Odd)

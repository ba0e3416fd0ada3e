"""The expect file's writer and the baseline's reader in-process, asserting whole texts and whole messages
(so mutmut's mutants of config/expectfile.py and store/baseline.py meet a test without a calibrate or sweep run)."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ort_gpu_matrix.config import expectfile as ef
from ort_gpu_matrix.config.model import Observation, Rule
from ort_gpu_matrix.store.baseline import (
    Baseline,
    BaselineError,
    ModeRecord,
    baselines_dir,
    check_name,
    resolve_baseline,
    save_path,
)
from ort_gpu_matrix.store.baseline import TestLine as Line


def test_string_escapes_every_character_toml_needs():
    assert ef.string('a"b\\c\b\t\n\f\r\x00\x1f\x7f\ud800é') == '"a\\"b\\\\c\\b\\t\\n\\f\\r\\u0000\\u001F\\u007F\\uFFFDé"'
    assert ef.string(" ~\x20") == '" ~ "'
    for text in ('"\\\b\t\n\f\r\x01\x7f', "plain", "\udfff"):
        assert tomllib.loads(f"k = {ef.string(text)}")["k"] == text.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd")


def test_literal_regex_and_comment():
    assert ef.literal_regex("a b.c[1]") == "^a b\\.c\\[1\\]$"
    assert ef.literal_regex("x\ud800") == "^x\\ud800$"
    assert ef.comment("a\nb\x7fc\x1f\ud800 d\x20e") == "a b c   d e"


def test_value():
    assert ef.value(("a", 'b"')) == '["a", "b\\""]' and ef.value(()) == "[]"
    assert ef.value("x") == '"x"' and ef.value(3) == "3"


def test_render_writes_every_table_in_order():
    obs = (Observation("c1", "1.32.0", "2026-12-01"), Observation("c2", "1.32.0", "2026-12-02"))
    tables = [
        ef.ModeTable("normal", kept={"require_kernel": "MATH", "forbid_kernels": ("A",)},
                     counts=[ef.Count("min_passed", 3, "c1\n")], skips=[ef.Skip("no GPU", "c1, c2")],
                     rules={"known_failures": [Rule("t::a", 'r"', obs), Rule("t::b", "plain")]}),
        ef.ModeTable("empty"),
        ef.ModeTable("teeth", skips=[], rules={"known_toothless": []}),
    ]
    text = ef.render(["from calibrate", "", "line\x00two"], tables)
    assert text == "\n".join([
        "# from calibrate", "#", "# line two", "",
        "[expect.normal]", 'require_kernel = "MATH"', 'forbid_kernels = ["A"]', "min_passed = 3  # c1 ",
        "allowed_skips = [", '    "no GPU",  # c1, c2', "]",
        "known_failures = [",
        '    { test = "t::a", reason = "r\\"", observed = [{ cell = "c1", ort = "1.32.0", date = "2026-12-01" }, '
        '{ cell = "c2", ort = "1.32.0", date = "2026-12-02" }] },',
        '    { test = "t::b", reason = "plain" },', "]", "",
        "[expect.teeth]", "allowed_skips = [", "]", "known_toothless = [", "]"]) + "\n"
    assert tomllib.loads(text)["expect"]["normal"]["known_failures"][0]["observed"][1]["cell"] == "c2"
    assert ef.ModeTable("m").empty and not ef.ModeTable("m", skips=[]).empty
    assert not ef.ModeTable("m", kept={"a": 1}).empty and not ef.ModeTable("m", counts=[ef.Count("k", 1, "")]).empty
    assert not ef.ModeTable("m", rules={"known_failures": []}).empty
    assert ef.render([], []) == "\n"


def test_test_lines_encode_and_decode():
    assert Line("passed", ("A", "B"), 2).encode() == "passed A B reruns=2" and Line("failed").encode() == "failed"
    assert Line.decode("passed CUDNN_FLASH_ATTENTION MATH reruns=10") == Line("passed", ("CUDNN_FLASH_ATTENTION", "MATH"), 10)
    assert Line.decode("skipped") == Line("skipped")
    for bad, msg in (("", "'' is not an outcome"), ("won", "'won' is not an outcome"),
                     ("passed reruns=1 reruns=2", "reruns= must be given once, as a whole number"),
                     ("passed reruns=x", "reruns= must be given once"), ("passed reruns=", "reruns= must be given once"),
                     ("passed math", "tiers are written as SdpaKernel names"), ("passed 1A", "tiers are written")):
        with pytest.raises(ValueError, match=msg):
            Line.decode(bad)


def _data(**cell):
    return {"baseline_version": 1, "name": "b", "created": "2026-12-01T00:00:00+00:00",
            "cells": {"c": {"normal": {"verdict": "pass", "counts": {"collected": 1, "passed": 1},
                                       "tests": {"t::a": "passed MATH"}, **cell}}}}


def test_a_baseline_round_trips(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps(_data(teeth={"bitten": ["t::a"], "toothless": []}, teeth_scope="cudnn")))
    b = Baseline.load(p)
    rec = b.cells["c"]["normal"]
    assert (b.name, b.created) == ("b", "2026-12-01T00:00:00+00:00")
    assert rec == ModeRecord("pass", {"collected": 1, "passed": 1}, {"t::a": Line("passed", ("MATH",))},
                             {"bitten": ["t::a"], "toothless": []}, {}, {}, "cudnn")
    b.save(tmp_path / "again.json")
    assert Baseline.load(tmp_path / "again.json") == b
    assert json.loads(b.to_json())["cells"]["c"]["normal"]["teeth_scope"] == "cudnn"
    plain = Baseline({"c": {"normal": ModeRecord("pass", {}, {}, None, {}, {})}}, "n", "t")
    assert "teeth_scope" not in json.loads(plain.to_json())["cells"]["c"]["normal"]
    assert b.modes() == {("c", "normal")}


@pytest.mark.parametrize("text, message", [
    (None, "no such baseline; save one with `nox -s sweep -- --save-baseline NAME`"),
    ("{", "cannot be read as a baseline (Expecting property name"),
    ("[]", "baseline_version None is not one this ort-gpu-matrix reads (1, 2, 3); re-save it from the results it was made from"),
    (json.dumps({"baseline_version": 4}), "baseline_version 4 is not one"),
    (json.dumps(_data(tests={"t::a": "won", "t::b": "passed x", "t::c": "fine"}, teeth={"bitten": []})),
     "is not a well-formed baseline: cells.c.normal.tests.t::a: 'won' is not an outcome (passed, failed, skipped, "
     "error, xfailed, xpassed); cells.c.normal.tests.t::b: 'passed x': tiers are written as SdpaKernel names "
     "(CUDNN_FLASH_ATTENTION, MATH); cells.c.normal.tests.t::c: 'fine' is not an outcome (passed, failed, skipped, "
     "error, xfailed, xpassed); and 1 more; re-save it with `nox -s sweep -- --save-baseline NAME`"),
    (json.dumps(_data(teeth={"bitten": [], "toothless": [], "x": []})),
     "cells.c.normal.teeth: needs the lists bitten and toothless; re-save"),
    (json.dumps(_data(verdict="maybe")), "is not a well-formed baseline: "),
])
def test_a_bad_baseline_is_refused_naming_the_file_and_the_fix(tmp_path, text, message):
    p = tmp_path / "b.json"
    if text is not None:
        p.write_text(text)
    with pytest.raises(BaselineError) as err:
        Baseline.load(p)
    assert str(err.value).startswith(f"{p}: ") and message in str(err.value)


def test_merged_over_keeps_and_names_what_this_sweep_did_not_run():
    r1, r2 = ModeRecord("pass", {}, {}, None, {}, {}), ModeRecord("fail", {}, {}, None, {}, {})
    old = Baseline({"a": {"normal": r1, "teeth": r1}, "b": {"normal": r1}}, "old", "t0")
    new = Baseline({"a": {"normal": r2}, "c": {"normal": r2}}, "new", "t1")
    merged, kept = new.merged_over(old)
    assert kept == ["a teeth", "b normal"]
    assert merged == Baseline({"a": {"normal": r2, "teeth": r1}, "b": {"normal": r1}, "c": {"normal": r2}}, "new", "t1")
    assert old.cells["a"]["normal"] is r1  # the earlier one is not changed


def test_baseline_names_and_paths(tmp_path, monkeypatch):
    m = tmp_path / "matrix.toml"
    monkeypatch.delenv("MATRIX_BASELINES", raising=False)
    assert baselines_dir(m) == tmp_path / "baselines"
    assert save_path("v1.2_rc+1", m) == tmp_path / "baselines" / "v1.2_rc+1.json"
    assert resolve_baseline("main", m) == tmp_path / "baselines" / "main.json"
    assert resolve_baseline("x.json", m) == Path("x.json").resolve()
    assert resolve_baseline(str(tmp_path / "sub" / "x"), m) == tmp_path / "sub" / "x"
    monkeypatch.setenv("MATRIX_BASELINES", str(tmp_path / "elsewhere"))
    assert baselines_dir(m) == (tmp_path / "elsewhere").resolve()
    for bad in ("", "../x", "a/b", ".hidden", "a..b", "-x", "a b"):
        with pytest.raises(BaselineError, match=r"a baseline name is letters, digits"):
            check_name(bad)
    with pytest.raises(BaselineError) as err:
        check_name("a/b", "--baseline")
    assert str(err.value) == ("--baseline 'a/b': a baseline name is letters, digits, '.', '_', '+' and '-', starting "
                              "with a letter or digit (no '/', no '..', not empty); it is saved as baselines/NAME.json")
    with pytest.raises(BaselineError, match=r"^--baseline 'a\.\.b': "):
        resolve_baseline("a..b", m)
    with pytest.raises(BaselineError, match=r"^--save-baseline '\.\.'"):
        save_path("..", m)
    assert check_name("9") == "9"


def test_the_first_character_past_the_surrogates_is_kept():
    assert ef.string("\ue000\ud7ff") == '"\ue000\ud7ff"' and ef.literal_regex("\ue000") == "^\ue000$"
    assert ef.comment("\ue000") == "\ue000"


def test_rules_too_long_for_one_line_are_written_as_tables_after_the_plain_keys():
    from ort_gpu_matrix.config.model import FlakyRule, TierRule
    obs = (Observation("c1", "1.32.0", "2026-12-01"), Observation("c2", "1.32.0", "2026-12-02"))
    long = "AssertionError: " + "x" * 150 + " y" * 70  # 306 characters: no rule line holds it
    t = ef.ModeTable("normal", rules={"known_failures": [Rule("t::short", "r"), Rule("t::long", long, obs)]},
                     flaky=[FlakyRule("t::fl", ("failed", "passed"), ("MATH",), "comes and goes", ("failed", "passed MATH"),
                                      obs[:1]), FlakyRule("t::f2", ("passed",), (), "r")],
                     tiers=[TierRule("t::tier", ("MATH",), "", ())])
    continued = ('"""\\\n' + "AssertionError: " + "x" * 84 + "\\\n" + "x" * 66 + " y" * 17 + " \\\n"
                 + "y " * 50 + "\\\n" + "y y y" + '"""')  # 100 characters a line, each break before a non-space
    assert ef.render([], [t]) == "\n".join([
        "", "[expect.normal]", "known_flaky = [",
        '    { test = "t::fl", outcomes = ["failed", "passed"], tiers = ["MATH"], reason = "comes and goes", '
        'runs = ["failed", "passed MATH"], observed = [{ cell = "c1", ort = "1.32.0", date = "2026-12-01" }] },',
        '    { test = "t::f2", outcomes = ["passed"], reason = "r" },', "]",
        "tiers = [", '    { test = "t::tier", only = ["MATH"] },', "]", "",
        "[[expect.normal.known_failures]]", 'test = "t::short"', 'reason = "r"', "",
        "[[expect.normal.known_failures]]", 'test = "t::long"', f"reason = {continued}", "observed = [",
        '    { cell = "c1", ort = "1.32.0", date = "2026-12-01" },',
        '    { cell = "c2", ort = "1.32.0", date = "2026-12-02" },', "]", ""])
    assert tomllib.loads(ef.render([], [t]))["expect"]["normal"]["known_failures"][1]["reason"] == long
    t2 = ef.ModeTable("teeth", flaky=[FlakyRule("t::fl", ("failed",), (), long, ("failed",), obs)],
                      tiers=[TierRule("t::tier", ("MATH", "EFFICIENT_ATTENTION"), long, ())])
    text = ef.render([], [t2])
    assert text == "\n".join([
        "", "[expect.teeth]", "", "[[expect.teeth.known_flaky]]", 'test = "t::fl"', 'outcomes = ["failed"]',
        f"reason = {continued}", 'runs = ["failed"]', "observed = [",
        '    { cell = "c1", ort = "1.32.0", date = "2026-12-01" },',
        '    { cell = "c2", ort = "1.32.0", date = "2026-12-02" },', "]", "",
        "[[expect.teeth.tiers]]", 'test = "t::tier"', 'only = ["MATH", "EFFICIENT_ATTENTION"]', f"reason = {continued}", ""])
    got = tomllib.loads(text)["expect"]["teeth"]
    assert got["known_flaky"][0]["reason"] == long and got["tiers"][0]["reason"] == long


def test_a_long_string_is_continued_between_escapes_and_never_before_a_space():
    text = "a" * 99 + '"' + "b" * 99 + " " + "c" * 10
    got = ef.long_string(text, "  ", 50)
    assert got == '"""\\\n  ' + "a" * 99 + '\\"\\\n  ' + "b" * 99 + ' \\\n  ' + "c" * 10 + '"""'
    assert tomllib.loads(f"k = {got}")["k"] == text
    assert ef.long_string("short", "  ", 50) == '"short"'
    assert ef.long_string("x" * 48, "", 50) == '"' + "x" * 48 + '"' and ef.long_string("x" * 49, "", 50).startswith('"""')


def test_short_notes_and_comments_are_cut_to_their_room():
    assert ef.short("x" * 200) == "x" * 200 and ef.short("x" * 201) == "x" * 199 + "…"
    assert ef.short("  first\nsecond") == "first" and ef.short(" \n ") == "" and ef.short("abcd", 3) == "ab…"
    assert ef._note("n" * 276, 20) == "n" * 276 and ef._note("n" * 277, 20) == "n" * 275 + "…"
    assert ef._note("n" * 30, 290) == "n" * 19 + "…" and ef._note("n" * 20, 290) == "n" * 20  # never less than 20
    assert ef._comments("") == ["#"]
    assert ef._comments("w" * 300) == ["# " + "w" * 298, "# ww"]  # a long word is broken too
    assert ef._comments(("word " * 70).strip()) == ["# " + ("word " * 59).strip(), "# " + ("word " * 11).strip()]


def test_a_tier_rule_line_names_its_reason_and_observations_only_when_it_has_them():
    from ort_gpu_matrix.config.model import TierRule
    obs = (Observation("c1", "1.32.0", "2026-12-01"),)
    assert ef._tier_rule(TierRule("t::a", ("MATH", "X"))) == '    { test = "t::a", only = ["MATH", "X"] },'
    assert ef._tier_rule(TierRule("t::a", ("MATH",), "why", obs)) == (
        '    { test = "t::a", only = ["MATH"], reason = "why", observed = [{ cell = "c1", ort = "1.32.0", '
        'date = "2026-12-01" }] },')


def test_a_list_that_does_not_fit_its_room_is_one_item_a_line():
    one = '["aaaaaaaaaa", "bbbbbbbbbb"]'
    assert ef.value(("a" * 10, "b" * 10), len(one)) == one
    assert ef.value(("a" * 10, "b" * 10), len(one) - 1) == '[\n    "aaaaaaaaaa",\n    "bbbbbbbbbb",\n]'
    long = "w " * 160  # 320 characters: continued inside the list
    got = ef.value((long.strip(),), 10)
    assert got.startswith('[\n    """\\\n    w w') and got.endswith('"""' + ",\n]")
    assert tomllib.loads(f"k = {got}")["k"] == [long.strip()]
    name_room = ef.LINE - len("tiers") - 3
    fits = tuple(["X" * (name_room - 4)])  # ["X...X"] is exactly the room
    assert ef._field("tiers", fits) == [f'tiers = ["{fits[0]}"]']
    assert ef._field("tiers", (fits[0] + "X",)) == ["tiers = [", f'    "{fits[0]}X",', "]"]
    assert ef._field("reason", "") == ['reason = ""']


def test_render_keeps_lines_within_the_limit_and_every_required_field():
    from ort_gpu_matrix.config.model import TierRule
    kept = ef.ModeTable("normal", kept={"forbid_kernels": tuple("K" * 40 for _ in range(8))},
                        counts=[ef.Count("min_passed", 1, "n" * 400)], skips=[ef.Skip("s" * 310, "c1: 1 test(s)")],
                        tiers=[TierRule("t" * 300, ("MATH",))])
    text = ef.render(["h"], [kept])
    assert max(len(line) for line in text.splitlines()) <= ef.LINE
    lines = text.splitlines()
    assert lines[3:5] == ["forbid_kernels = [", f'    "{"K" * 40}",']
    assert lines[13] == "min_passed = 1  # " + "n" * 275 + "…"
    assert ef.render([""], []) == "#\n"
    table = text.split("[[expect.normal.tiers]]\n", 1)[1]
    assert table.endswith('\nonly = ["MATH"]\nreason = ""\n') and table.startswith('test = """\\\n' + "t" * 100)
    data = tomllib.loads(text)["expect"]["normal"]
    assert data["allowed_skips"] == ["s" * 310] and data["tiers"] == [{"test": "t" * 300, "only": ["MATH"], "reason": ""}]
    exact = ef.ModeTable("normal", rules={"known_failures": [Rule("x" * (ef.LINE - 32), "r")]})
    assert len(ef._rule(exact.rules["known_failures"][0])) == ef.LINE
    assert "known_failures = [" in ef.render([], [exact])  # a line of exactly LINE characters stays inline


def _longest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_a_kept_list_stays_on_its_line_exactly_while_the_line_fits():
    """A key kept from the old file (forbid_kernels) is written on one line of at most LINE characters, and one
    character more breaks it into one item a line; an item too long for its own line is continued."""
    room = ef.LINE - len("forbid_kernels = ")
    fits = ef.ModeTable("normal", kept={"forbid_kernels": ("K" * (room - 4),)})  # ["K...K"]: exactly the room
    assert ef.render([], [fits]).splitlines()[2] == f'forbid_kernels = ["{"K" * (room - 4)}"]'
    assert _longest(ef.render([], [fits])) == ef.LINE
    over = ef.ModeTable("normal", kept={"forbid_kernels": ("K" * (room - 3),)})
    assert ef.render([], [over]).splitlines()[2:5] == ["forbid_kernels = [", f'    "{"K" * (room - 3)}",', "]"]
    item = ef.LINE - len('    "",') - 1  # the longest item kept whole on its own line (a line of LINE - 1)
    both = ef.ModeTable("normal", kept={"forbid_kernels": ("A" * item, "B" * (item + 1))})
    text = ef.render([], [both])
    assert text.splitlines()[3] == f'    "{"A" * item}",' and text.splitlines()[4] == '    """\\'
    assert _longest(text) <= ef.LINE
    assert tomllib.loads(text)["expect"]["normal"]["forbid_kernels"] == ["A" * item, "B" * (item + 1)]


def test_a_skip_pattern_and_its_note_share_the_line_and_never_pass_the_limit():
    """The pattern stays on its line while it fits beside its comma and the shortest note; the note beside it
    is cut to the room left. A pattern of about 270 characters once pushed its line past LINE."""
    note_room = ef.LINE - len('    "no GPU",  # ') - 4
    whole, cut = "n" * note_room, "n" * (note_room + 1)
    t = ef.ModeTable("normal", skips=[ef.Skip("no GPU", whole), ef.Skip("no CPU", cut)])
    lines = ef.render([], [t]).splitlines()
    assert lines[3] == f'    "no GPU",  # {whole}'
    assert lines[4] == f'    "no CPU",  # {cut[:note_room - 1]}…'  # one character over: cut, and marked
    note = "c1: 1 test(s), c2: 1 test(s), c3: 1 test(s)"
    widest = ef.LINE - len('    "",  # ') - 20  # the longest pattern kept on its line: a 20-character note beside it
    for n in range(widest - 30, widest + 30):
        text = ef.render([], [ef.ModeTable("normal", skips=[ef.Skip("s" * n, note)])])
        assert _longest(text) <= ef.LINE, n
        assert (text.splitlines()[3].startswith('    """')) == (n > widest), n
        assert tomllib.loads(text)["expect"]["normal"]["allowed_skips"] == ["s" * n]


def test_a_rule_whose_regex_is_empty_keeps_its_test_key_in_the_table_form(tmp_path):
    """`test = ""` matches every test: a rule kept with it, written as a table (its reason is too long for one
    line), must load back as the same rule, not lose the key the loader requires."""
    from ort_gpu_matrix.config.loader import suite_expect
    long = "AssertionError: " + "x" * 300
    path = tmp_path / "expect.toml"
    path.write_text(ef.render([], [ef.ModeTable("normal", rules={"known_failures": [Rule("", long)]})]))
    (tmp_path / "matrix.toml").write_text("")
    assert '\ntest = ""\n' in path.read_text()
    assert suite_expect(tmp_path / "matrix.toml", "s", path)["normal"].known_failures == (Rule("", long),)

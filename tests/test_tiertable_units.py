"""The tier table (report/tiertable.py) and the CPU nodes section (report/render/cpunodes.py) in-process, on
hand-built Results: what each row counts and holds, which rows are shown and in what order, each column's text at
its edges, and the section's limits. tests/test_report_nodes_units.py shows both in every report form; these pin
what mutants of the two modules changed while those tests passed (docs/mutations.md, "Issue 48, second part")."""
from __future__ import annotations

from helpers import result

from ort_gpu_matrix.judge.counts import Dispatch
from ort_gpu_matrix.judge.eps import EpCensus, EpTest, Fallback
from ort_gpu_matrix.judge.nodes import NodeRun
from ort_gpu_matrix.judge.tiers import BreakRecord
from ort_gpu_matrix.report.model import build
from ort_gpu_matrix.report.render import cpunodes
from ort_gpu_matrix.report.tiertable import NONE, OP_CLIP, OPS_SHOWN, Row, cell, tier_table

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
F = "t.py::"


def rows_of(results, limit=100):
    return {r.function: r for r in tier_table(results, limit).rows}


def test_each_case_counts_once_per_tier_and_a_pass_that_dispatched_nothing_anywhere_is_silent():
    holder, sub = f"{F}T::test_s", f"{F}T::test_s [x]"  # its subtests ran what it ran: they are its cases
    own, own_sub = f"{F}T::test_own", f"{F}T::test_own [y]"  # it dispatched outside its subtest: a case too
    outcomes = {holder: "failed", sub: "passed", own: "passed", own_sub: "passed", f"{F}test_a[1]": "passed",
                f"{F}test_a[2]": "passed", f"{F}test_a[3]": "xpassed", f"{F}test_a[4]": "failed",
                f"{F}test_a[5]": "passed"}
    first = result("normal", outcomes, dispatch=Dispatch({sub: ["MATH"], own: ["CUDNN"],
                                                          f"{F}test_a[1]": ["MATH", "CUDNN", "MATH"]}))
    later = result("require_cudnn", {f"{F}test_a[5]": "passed"}, dispatch=Dispatch({f"{F}test_a[5]": ["MATH"]}))
    teeth = result("teeth", {f"{F}test_t": "passed"}, dispatch=Dispatch({f"{F}test_t": ["MATH"]}))
    table = tier_table([first, later, teeth], 100)
    rows = {r.function: r for r in table.rows}
    assert sorted(rows) == [f"{F}T::test_own", f"{F}T::test_s", f"{F}test_a"]  # teeth forces MATH: not read
    s, o, a = rows[f"{F}T::test_s"], rows[f"{F}T::test_own"], rows[f"{F}test_a"]
    assert (s.cases, s.by_tier, s.silent) == ({sub}, {"MATH": {sub}}, set())
    assert (o.cases, o.by_tier, o.silent) == ({own, own_sub}, {"CUDNN": {own}}, {own_sub})
    assert a.cases == {f"{F}test_a[{i}]" for i in range(1, 6)}
    assert a.by_tier == {"MATH": {f"{F}test_a[1]", f"{F}test_a[5]"}, "CUDNN": {f"{F}test_a[1]"}}
    assert a.silent == {f"{F}test_a[2]", f"{F}test_a[3]"}  # [4] failed; [5] dispatched in another run
    assert (a.count("MATH"), a.count("CUDNN"), a.count(NONE), a.count("FLASH")) == (2, 1, 2, 0)
    assert table.tiers == ["CUDNN", "MATH", NONE] and table.left_out == 0 and not table.ep
    assert (cell(a, "MATH", "✗"), cell(a, "FLASH", "✗")) == ("2", "-")
    a.marked.add("MATH")
    assert (cell(a, "MATH", "✗"), cell(a, "CUDNN", "✗")) == ("2 ✗", "1")


def test_no_tier_is_a_column_only_where_a_shown_row_has_a_silent_case_or_broke_a_rule_by_dispatching_nothing():
    table = tier_table([result("normal", {f"{F}test_a": "passed"}, dispatch=Dispatch({f"{F}test_a": ["MATH"]}))], 10)
    assert table.tiers == ["MATH"]


def test_broken_rows_come_first_and_the_rows_over_the_limit_are_counted():
    breaks = [BreakRecord("normal", f"{F}test_z", f"{F}test_z", ("MATH",), "test_z", ("CUDNN",))]
    r = result("normal", {f"{F}test_a": "passed", f"{F}test_z": "passed", f"{F}test_q": "passed"},
               dispatch=Dispatch({f"{F}test_a": ["MATH"], f"{F}test_z": ["MATH"]}), tier_breaks=breaks)
    table = tier_table([r], 1)  # test_q dispatched nothing, broke nothing and asked for no CUDA EP: not a row
    assert [row.function for row in table.rows] == [f"{F}test_z"] and table.left_out == 1
    table = tier_table([r], 5)
    assert [row.function for row in table.rows] == [f"{F}test_z", f"{F}test_a"] and table.left_out == 0


def _fallback(nodeid: str, allowed_by: str | None = None) -> Fallback:
    return Fallback(nodeid, "not_loaded", [CUDA, CPU], [CPU], "libcudnn.so.9: cannot open", allowed_by)


def _break(nodeid: str, function: str, dispatched: tuple[str, ...], rule: str) -> BreakRecord:
    return BreakRecord("normal", nodeid, function, dispatched, rule, ("CUDNN",))


def test_a_row_is_made_by_a_fallback_a_hollow_pass_or_a_break_alone_each_in_its_own_function():
    ep = EpCensus(True, {}, [_fallback(f"{F}test_f1[1]"), _fallback(f"{F}test_f2[1]", "test_f2")],
                  [f"{F}test_h1[1]", f"{F}test_h2"])
    breaks = [_break(f"{F}test_h1[1]", f"{F}test_h1", ("MATH", "CUDNN"), "test_h1"),
              _break(f"{F}test_h1[2]", f"{F}test_h1", (), "test_h1\\["),  # it dispatched nothing at all
              _break(f"{F}test_b[1]", f"{F}test_b", ("FLASH",), "test_b")]
    table = tier_table([result("normal", {}, ep=ep, tier_breaks=breaks)], 100)
    rows = {r.function: r for r in table.rows}
    # broken ones only: test_f2's fallback is allowed and test_h2 is hollow alone; none of them asked here
    assert [r.function for r in table.rows] == [f"{F}test_b", f"{F}test_f1", f"{F}test_h1"]
    f1, h1, b = rows[f"{F}test_f1"], rows[f"{F}test_h1"], rows[f"{F}test_b"]
    assert (f1.fell_back, f1.unallowed, f1.rules) == ({f"{F}test_f1[1]"}, {f"{F}test_f1[1]"}, set())
    assert (h1.hollow, h1.marked, h1.rules) == ({f"{F}test_h1[1]"}, {"MATH", NONE}, {"test_h1", "test_h1\\["})
    assert (b.marked, b.rules, b.hollow, b.fell_back) == ({"FLASH"}, {"test_b"}, set(), set())
    assert table.tiers == [NONE]
    allowed = tier_table([result("normal", {}, ep=EpCensus(True, {}, [_fallback(f"{F}test_f2[1]", "test_f2")]),
                                 tier_breaks=[_break(f"{F}test_f2[1]", f"{F}test_f2", ("MATH",), "r")])], 9).rows[0]
    assert (allowed.fell_back, allowed.unallowed) == ({f"{F}test_f2[1]"}, set())


def test_the_ep_columns_count_cuda_runs_over_cells_fallbacks_marked_where_unallowed_and_hollow_passes():
    def census(tests, fallbacks=(), hollow=()):
        return EpCensus(True, tests, list(fallbacks), list(hollow))

    first = result("normal", {}, ep=census(
        {f"{F}test_fb[1]": EpTest({CPU: 1}, 1), f"{F}test_fb[2]": EpTest({CPU: 1}, 1),
         f"{F}test_fb[3]": EpTest({}, 1), f"{F}test_ok[1]": EpTest({CPU: 2}, 1),
         f"{F}test_cuda[1]": EpTest({CUDA: 2}, 1), f"{F}test_cuda[2]": EpTest({CUDA: 1}, 1)},
        [_fallback(f"{F}test_fb[1]"), _fallback(f"{F}test_fb[2]", "test_fb"), _fallback(f"{F}test_ok[1]", "test_ok")],
        [f"{F}test_fb[3]"]))
    later = result("normal", {}, name="c2", ep=census({f"{F}test_cuda[1]": EpTest({CUDA: 3}, 1)}))
    plain = result("normal", {f"{F}test_plain": "passed"}, dispatch=Dispatch({f"{F}test_plain": ["MATH"]}))
    table = tier_table([first, later, plain], 100)
    rows = {r.function: r for r in table.rows}
    assert table.ep
    assert rows[f"{F}test_fb"].ep_cells("✗") == ("0", "2 ✗, 1 hollow", "unknown")
    assert rows[f"{F}test_ok"].ep_cells("✗") == ("0", "1", "unknown")
    assert rows[f"{F}test_cuda"].ep_cells("✗") == ("6", "-", "unknown")
    assert rows[f"{F}test_cuda"].asked == {f"{F}test_cuda[1]", f"{F}test_cuda[2]"}
    assert rows[f"{F}test_cuda"].unplaced == {f"{F}test_cuda[1]", f"{F}test_cuda[2]"}
    assert rows[f"{F}test_plain"].ep_cells("✗") == ("-", "-", "-")  # it asked for no CUDA EP


def test_a_subtest_of_the_census_is_its_tests_and_the_tests_after_it_are_still_read():
    tests = {f"{F}T::test_s [x]": EpTest({CUDA: 1}, 1), f"{F}test_b": EpTest({CUDA: 1}, 1)}
    rows = rows_of([result("normal", {}, ep=EpCensus(True, tests))])
    assert rows[f"{F}test_b"].asked == {f"{F}test_b"} and f"{F}T::test_s" not in rows


def test_the_ops_on_cpu_cell_clips_a_long_op_type_and_says_more_past_the_sixth():
    def cpu(*ops: str) -> str:
        return Row("f", asked={"x"}, placed={"x"}, cpu_ops=set(ops)).cpu_cell()

    fits, long = "A" * OP_CLIP, "B" * (OP_CLIP + 1)
    assert cpu(fits, long) == f"{fits}, {'B' * (OP_CLIP - 1)}…"
    six = [chr(ord("C") + i) for i in range(OPS_SHOWN)]
    assert cpu(*six) == ", ".join(six)
    assert cpu(*six, "Z") == ", ".join(six) + " +1 more"
    assert Row("f").cpu_cell() == "-"  # it asked for no CUDA EP


def test_two_nodes_seen_unplaced_are_both_counted():
    tests = {f"{F}test_u[1]": EpTest({CUDA: 1}, 1), f"{F}test_u[2]": EpTest({CUDA: 1}, 1),
             f"{F}test_u[3]": EpTest({CUDA: 1}, 1, nodes=[NodeRun("Add", "a", CUDA, 1)])}
    row = rows_of([result("normal", {}, ep=EpCensus(True, tests, nodes_taken=True))])[f"{F}test_u"]
    assert row.cpu_cell() == "-, 2 unseen" and row.placed == {f"{F}test_u[3]"}


def test_the_shape_ops_of_every_case_are_counted_apart_by_the_shape_ops_its_run_was_judged_with():
    tests = {f"{F}test_x[1]": EpTest({CUDA: 1}, 1, nodes=[NodeRun("Shape", "s", CPU, 1), NodeRun("Gather", "g", CPU, 1)]),
             f"{F}test_x[2]": EpTest({CUDA: 1}, 1, nodes=[NodeRun("Add", "a", CPU, 1)])}
    row = rows_of([result("normal", {}, ep=EpCensus(True, tests, nodes_taken=True))])[f"{F}test_x"]
    assert row.cpu_cell() == "Add, Gather +1 shape" and row.shape_cpu == {"Shape"}


# ---------------------------------------------------------------- the CPU nodes section

def _entry(*nodes: NodeRun, unseen: tuple[str, ...] = (), cuda: int = 1) -> EpTest:
    return EpTest({CUDA: cuda}, 1, [], list(nodes), list(unseen))


def _run(tests, name="c1", taken=True):
    return result("normal", {t: "passed" for t in tests}, name=name, ep=EpCensus(True, tests, nodes_taken=taken))


def test_a_test_holding_subtests_has_every_subtests_runs_taken_off_its_own():
    parent = f"{F}T::test_each"
    tests = {parent: _entry(NodeRun("Unique", "u", CPU, 5)), f"{parent} [a]": _entry(NodeRun("Unique", "u", CPU, 2)),
             f"{parent} [b]": _entry(NodeRun("Unique", "u", CPU, 2))}
    own = cpunodes.own_nodes(tests)
    assert own[parent] == [NodeRun("Unique", "u", CPU, 1)]


def test_a_node_placed_off_cuda_that_never_ran_is_not_listed():
    found = cpunodes.groups(build([_run({f"{F}test_b": _entry(NodeRun("Unique", "u", CPU, 0), NodeRun("Det", "d", CPU, 1))})]))
    assert [g.op for g in found] == ["Det"]


def test_a_long_op_type_is_clipped_in_its_group_heading():
    op = "com.x." + "O" * 115  # 121 characters
    (g,) = cpunodes.groups(build([_run({f"{F}test_o": _entry(NodeRun(op, "o", CPU, 1))})]))
    assert g.op == op[:119] + "…" and len(g.op) == 120


def test_groups_in_as_many_tests_are_ordered_by_their_node_count_then_their_op():
    found = cpunodes.groups(build([_run({f"{F}test_a": _entry(NodeRun("Zed", "z1", CPU, 1), NodeRun("Zed", "z2", CPU, 1),
                                                              NodeRun("Abs", "a", CPU, 1), NodeRun("Cos", "c", CPU, 1))})]))
    assert [g.op for g in found] == ["Zed", "Abs", "Cos"]


def test_a_group_lists_eight_nodes_and_says_how_many_more():
    def group(n: int) -> cpunodes.CpuNodeGroup:
        nodes = [NodeRun("Unique", f"u{i}", CPU, 1) for i in range(n)]
        return cpunodes.groups(build([_run({f"{F}test_u": _entry(*nodes)})]))[0]

    assert cpunodes.more(group(cpunodes.SHOWN)) is None
    assert cpunodes.more(group(cpunodes.SHOWN + 1)) == "and 1 more (every one is in the result files)"


def test_the_unseen_note_says_why_names_eight_runs_then_more_and_three_reasons():
    off = _run({f"{F}test_off": _entry(cuda=3)})  # a census taken, CUDA ran it, no node listed
    assert cpunodes.unseen(build([off])).endswith(f"(c1-normal): {cpunodes.CENSUS_OFF}")
    eight = [_run({f"{F}test_{i}": _entry(unseen=("old ORT",))}, name=f"c{i}") for i in range(cpunodes.SHOWN)]
    assert "c7-normal): old ORT" in cpunodes.unseen(build(eight))
    nine = eight + [_run({f"{F}test_9": _entry(unseen=("old ORT",))}, name="c9")]
    assert "c7-normal, ...): old ORT" in cpunodes.unseen(build(nine))
    four = _run({f"{F}test_{w}": _entry(unseen=(f"why {w}",)) for w in "abcd"})
    assert cpunodes.unseen(build([four])).endswith(": why a; why b; why c")


def test_the_unseen_note_is_clipped_at_600_characters():
    def note(reason: str) -> str:
        text = cpunodes.unseen(build([_run({f"{F}test_x": _entry(unseen=(reason,))})]))
        assert text is not None
        return text

    head = len(note("r")) - 1
    whole = note("r" * (600 - head))
    assert len(whole) == 600 and whole.endswith("rr")  # 600 fit
    clipped = note("r" * (601 - head))
    assert len(clipped) == 600 and clipped.endswith("r…")

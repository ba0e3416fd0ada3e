"""A bisect, as people read it: per group of tests the last good and first bad build, every step with its result
and time, and the time saved against the whole suite on every build; in the terminal, Markdown and HTML.

Test names, reasons and lines are untrusted text: the terminal form escapes control characters, the Markdown
form Markdown, and the HTML form is Jinja2 with autoescape, as the sweep's report is.
"""
from __future__ import annotations

import jinja2

from ...store.bisection import Bisection
from ...util.escape import md, term

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("ort_gpu_matrix.report.render", "templates"),
                          autoescape=True, undefined=jinja2.StrictUndefined)
LISTED = 20  # tests named per group


def verdict_line(b: Bisection) -> str:
    if b.problem:
        return f"bisect FAILED: {b.problem}"
    if b.interrupted:
        return f"bisect INTERRUPTED after {len(b.steps)} step(s): nox -s bisect -- ... --resume goes on from them"
    if b.left:
        return f"bisect FAILED: {len(b.left)} test(s) could not be placed by halving (they changed back)"
    unplaced = [g for g in b.groups if not g.located]
    if unplaced:
        return f"bisect FAILED: {len(unplaced)} group(s) end on builds that could not be tested: a range, not a build"
    if not b.groups:
        return "bisect FAILED: no change was located: the walk over the builds did not end"
    return f"bisect OK: every followed change located ({len(b.groups)} group(s))"


def _group_lines(b: Bisection) -> list[tuple[str, list[str]]]:
    out = []
    for i, g in enumerate(b.groups, 1):
        good, bad = b.builds[g.last_good].version, b.builds[g.first_bad].version
        head = f"group {i}: {len(g.tests)} test(s): last good {good}, first bad {bad}"
        if g.untested:
            head += f" (or one of {', '.join(b.builds[x].version for x in g.untested)}: could not be tested)"
        shown = [f"{t}: {b.followed.get(t, '')}" for t in g.tests[:LISTED]]
        if len(g.tests) > LISTED:
            shown.append(f"and {len(g.tests) - LISTED} more")
        out.append((head, shown))
    out += [(f"not placed: {t}: {why}", []) for t, why in sorted(b.left.items())]
    return out


def _step_lines(b: Bisection) -> list[str]:
    last = len(b.builds) - 1
    out = []
    for s in b.steps:
        role = " (good end)" if s.index == 0 else " (bad end)" if s.index == last else ""
        if s.skipped:
            what = f"untestable: {s.skipped}"
        else:
            counts = {v: sum(1 for x in s.verdicts.values() if x == v) for v in sorted(set(s.verdicts.values()))}
            what = ", ".join(f"{v} {n}" for v, n in counts.items())
        out.append(f"{s.build.version}{role}: {len(s.tests)} test(s) run, {what}, {s.seconds:.1f} s")
    return out


def cost_line(b: Bisection) -> str:
    ran = f"{len(b.steps)} step(s) over {len(b.builds)} build(s), {b.step_seconds:.1f} s of runs"
    if b.whole_suite_s is None or b.saved_seconds is None:
        return ran + "; the whole suite's time is not known (no stored run of the cell's mode to take it from)"
    whole = len(b.builds) * b.whole_suite_s
    return (ran + f"; the whole suite on every build: {len(b.builds)} x {b.whole_suite_s:.1f} s = {whole:.1f} s; "
            f"saved {b.saved_seconds:.1f} s")


def terminal(b: Bisection) -> str:
    lines = [f"bisect {b.cell} {b.mode}: {len(b.followed)} test(s) ({b.source}), {len(b.builds)} build(s): "
             f"{b.builds[0].version} .. {b.builds[-1].version}"]
    for head, tests in _group_lines(b):
        lines += [f"  {head}"] + [f"    {t}" for t in tests]
    lines += ["  steps:"] + [f"    {s}" for s in _step_lines(b)] + [f"  cost: {cost_line(b)}", verdict_line(b)]
    return "\n".join(term(x) for x in lines)


def markdown(b: Bisection) -> str:
    out = [f"# ort-gpu-matrix bisect: {md(b.cell)} {md(b.mode)}", "",
           f"{len(b.followed)} test(s) ({md(b.source)}), {len(b.builds)} build(s): "
           f"{md(b.builds[0].version)} .. {md(b.builds[-1].version)}", "", f"**{md(verdict_line(b))}**", ""]
    for head, tests in _group_lines(b):
        out += [f"- **{md(head)}**"] + [f"  - {md(t)}" for t in tests]
    out += ["", "## Steps", ""] + [f"- {md(s)}" for s in _step_lines(b)] + ["", f"Cost: {md(cost_line(b))}", ""]
    return "\n".join(out)


def html(b: Bisection) -> str:
    return _ENV.get_template("bisect.html.j2").render(b=b, groups=_group_lines(b), steps=_step_lines(b),
                                                     cost=cost_line(b), verdict=verdict_line(b))

"""The matrix.toml key reference (Markdown), generated from the model the loader and the JSON Schema use.

Every key's table, type, default and doc come from model.py, so the reference cannot drift from
what the loader accepts; tests/test_docs.py fails when the committed copy differs. Regenerate with

    python -m ort_gpu_matrix.config.reference > docs/reference/matrix-toml.md
"""
from __future__ import annotations

import types
import typing
from typing import Any

from .model import (
    CpuOpsRule,
    CudaOpsRule,
    CudaRunsRule,
    ExcludeEntry,
    FallbackRule,
    FlakyRule,
    IncludeEntry,
    KeySpec,
    Libs,
    Ort,
    Rule,
    Settings,
    Suite,
    TierRule,
    Torch,
    keys_of,
)
from .modes import SPECS

OUT = "docs/reference/matrix-toml.md"


def _type(s: KeySpec) -> str:
    hint = s.hint
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if s.one_or_list:
        return "string or list of strings"
    if hint is str:
        return "regex" if s.regex else "string"
    if hint is bool:
        return "boolean"
    if hint is int:
        return "integer" + (f" ≥ {s.minimum}" if s.minimum is not None else "")
    if origin is tuple and args[0] is str:
        kind = "list of regexes" if s.regex else "list of strings"
        return kind + (f", at least {s.minimum}" if s.minimum is not None else "")
    if origin is tuple:
        return f"list of {{ {', '.join(k.name for k in keys_of(args[0]))} }}"
    if origin is dict:
        return "table of strings"
    raise TypeError(f"no reference type for {hint!r}")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(s: KeySpec) -> str:
    if s.required:
        return "required"
    if s.default is None or (s.default == "" and s.hint is str):
        return "—"
    return f"`{_cell(_toml(s.default))}`"


def table(cls: type, title: str, intro: str = "") -> list[str]:
    """One model class: its doc, a row per key, and the rules that span keys (forms, requirements)."""
    doc = (cls.__doc__ or "").strip().split("\n")[0]
    doc = doc.split(": ", 1)[1] if doc.startswith("[") and ": " in doc else doc  # the heading names the table
    lines = [f"## `{title}`", "", doc[:1].upper() + doc[1:]]
    if intro:
        lines += ["", intro]
    lines += ["", "| key | type | default | what |", "| --- | --- | --- | --- |"]
    for s in keys_of(cls):
        doc = s.doc + (f" (e.g. `{_cell(s.example)}`)" if s.example and s.example != _toml(s.default) else "")
        lines.append(f"| `{s.name}` | {_type(s)} | {_default(s)} | {_cell(doc)} |")
    forms: tuple[tuple[str, ...], ...] = getattr(cls, "FORMS", ())
    if forms:
        lines += ["", "Exactly one form: " + "; ".join(" and/or ".join(f"`{k}`" for k in f) for f in forms) + "."]
    requires: dict[str, tuple[str, ...]] = getattr(cls, "REQUIRES", {})
    for k, needs in requires.items():
        lines += ["", f"`{k}` needs {', '.join(f'`{n}`' for n in needs)}."]
    return lines + [""]


def reference() -> str:
    out = [
        "# matrix.toml keys",
        "",
        "<!-- generated from ort_gpu_matrix/config/model.py: python -m ort_gpu_matrix.config.reference > "
        f"{OUT} -->",
        "",
        "Every key the loader reads, generated from the same model as `matrix.schema.json`, so it cannot "
        "drift from what `nox` accepts (a test fails when this file and the model differ). `<id>` is "
        "any name of letters, digits, `_` and `.`. Paths are relative to the matrix file and `${VAR}` is "
        "expanded in them; `${ORT_GPU_MATRIX_SUITES}` is always set, to the built-in suites shipped in the "
        "package. A worked example of every key is in [the guide](../guide.md#a-matrix-with-every-key).",
        "",
    ]
    out += table(Settings, "[matrix]")
    out += table(Ort, "[ort.<id>]")
    out += table(Torch, "[torch.<id>]")
    out += table(Libs, "[libs.<id>]")
    out += table(Suite, "[suite.<id>]", "Each mode's expectations go in a table of their own, below.")
    by_type: dict[type, list[str]] = {}
    for mode, spec in SPECS.items():
        by_type.setdefault(spec.expect_type, []).append(f"[suite.<id>.expect.{mode.value}]")
    for expect_type, titles in by_type.items():
        out += table(expect_type, "` and `".join(titles))
    return "\n".join(out + _rule_tables()).rstrip() + "\n"


def _rule_tables() -> list[str]:
    """The tables of the entries an expect table lists, and of pairing's include and exclude."""
    out = table(Rule, "known_failures / known_toothless entries")
    out += table(TierRule, "tiers entries", "Every test that passed and matches `test` must have dispatched at least "
                 "one tier, and only tiers in `only`. A test several rules match must satisfy each of them: the tiers "
                 "it may dispatch are the intersection of their `only` lists. A rule that matches no test that "
                 "passed is stale. Teeth does not read `tiers` (MATH is forced there); see "
                 "[the guide](../guide.md#tier-rules).")
    out += table(FlakyRule, "known_flaky entries",
                 "Written by `nox -s calibrate` for a test whose outcome or tiers differed between its runs. A long "
                 "entry is written as a `[[expect.<mode>.known_flaky]]` table, so no line of the file passes 300 "
                 "characters.")
    out += table(FallbackRule, "allowed_fallbacks entries",
                 "A test that asked for the CUDA EP and was served by another (ORT's Python wrapper retried its "
                 "session on the CPU, ORT's C++ layer skipped a CUDA EP that would not load, `Session.run` fell back "
                 "on `EPFail`, or the wheel has no CUDA EP) fails its mode unless a rule matches both its node id "
                 "and ORT's reason. A rule that matches no fallback is stale. See "
                 "[the guide](../guide.md#which-ep-served).")
    out += table(CudaRunsRule, "cuda_runs entries",
                 "Every test that passed and matches `test` must have made at least `min` runs that the CUDA EP "
                 "served; `nox -s calibrate` writes one per test function whose every passing case ran on CUDA. A "
                 "rule that matches no test that passed is stale.")
    out += table(CudaOpsRule, "cuda_ops entries",
                 "Every test that passed and matches `test` must have run each op in `ops`, and only on the CUDA EP: "
                 "ORT places a node with no CUDA kernel for its type, version or dtype on the CPU EP without a word, "
                 "so a test of it passes on the CPU inside a session `get_providers()` calls CUDA. An op is named by "
                 "its type, after its domain unless it is ONNX's own (`Unique`, `com.microsoft.MoE`). `nox -s "
                 "calibrate` writes one per test function, for the ops every passing case ran on CUDA, leaving out "
                 "the suite's `shape_ops`. A rule that matches no test that passed is stale. See "
                 "[the guide](../guide.md#which-ep-ran-each-op).")
    out += table(CpuOpsRule, "allowed_cpu_ops entries",
                 "A node that ran on the CPU inside a session the CUDA EP served is a warning (or, with the suite's "
                 "`cpu_nodes = \"fail\"`, a failure) unless its op is one of the suite's `shape_ops` or a rule "
                 "covers it: a `cuda_ops` rule that lists it (which fails the test instead), or one of these, which "
                 "accepts it. Calibrate never writes them: accepting a CPU kernel is a person's decision. A rule "
                 "that matches no such node is stale.")
    out += table(IncludeEntry, "[pairing] include = [{ ... }]",
                 "Without `include`, every combination of `matrix.pythons` × ort × torch × libs is a pairing.")
    out += table(ExcludeEntry, "[pairing] exclude = [{ ... }]",
                 "Removes the pairings that match every key given, from `include` or from the full product.")
    return out


def main() -> None:
    print(reference(), end="")


if __name__ == "__main__":
    main()

"""The lines most test matrices start with: [matrix], the CPU ORT wheel, no torch, libs sets that pin nothing;
and a fixture suite's first lines.

Written once so a test's matrix template holds only what the test is about (its suite, its pairings,
its expectations). The text is a template: `{py}` (and a suite's `{root}`) is left for the test's own `.format(py=PY, ...)`,
and nothing here has a brace of its own, so it survives that format untouched.
"""
from __future__ import annotations

import json
from collections.abc import Sequence

ORT_CPU = "onnxruntime==1.32.0"
ONNX = "onnx==1.20.1"


def matrix_head(prefix: str | None = None, suite: str | None = None, modes: Sequence[str] | None = None,
                libs: Sequence[str] = ("x",)) -> str:
    """`[matrix]` (prefix, pythons = ["{py}"], suite and modes where given), `[ort.cpu]`, `[torch.none]` and a
    `[libs.<id>] none = true` per id, one line each, after a leading newline as a triple-quoted template has."""
    lines = ["", "[matrix]"]
    if prefix is not None:
        lines.append(f'prefix = "{prefix}"')
    lines.append('pythons = ["{py}"]')
    if suite is not None:
        lines.append(f'suite = "{suite}"')
    if modes is not None:
        lines.append(f"modes = {json.dumps(list(modes))}")
    lines += ["[ort.cpu]", f'requirement = "{ORT_CPU}"', f'with = ["{ONNX}"]', "[torch.none]", "skip = true"]
    for libs_id in libs:
        lines += [f"[libs.{libs_id}]", "none = true"]
    return "\n".join(lines) + "\n"


def suite_head(name: str, files: Sequence[str], pythonpath: Sequence[str] = (".", "../canary", "..")) -> str:
    """`[suite.<name>]` with root = "{root}", its files and its pythonpath (by default the one a fixture suite
    that imports the canary's fake_sdpa uses), one line each."""
    return (f'[suite.{name}]\nroot = "{{root}}"\nfiles = {json.dumps(list(files))}\n'
            f"pythonpath = {json.dumps(list(pythonpath))}\n")

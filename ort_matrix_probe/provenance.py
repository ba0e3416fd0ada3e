"""What the test process has installed, read from metadata without importing it.

Importing onnxruntime or torch to ask their versions would load their native
libraries (and could pick a source dir), so the facts come from dist-info and
from the build_and_package_info / version modules parsed as text.
"""
from __future__ import annotations

import ast
import importlib.metadata
import sys
from typing import Any

from .schema import ProvenanceReport


def _constants(path: Any) -> dict[str, Any]:
    try:
        with open(path) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError):
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        if isinstance(value, ast.Constant):
            out.update({t.id: value.value for t in targets if isinstance(t, ast.Name)})
    return out


def provenance() -> ProvenanceReport:
    info: ProvenanceReport = {"python": sys.version.split()[0], "python_executable": sys.executable,
                              "ort": None, "torch": None}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("onnxruntime") and info["ort"] is None:
            build = _constants(dist.locate_file("onnxruntime/capi/build_and_package_info.py"))
            info["ort"] = {"distribution": dist.metadata["Name"], "version": dist.version,
                           "package_name": build.get("package_name"), "cuda_version": build.get("cuda_version"),
                           "cudnn_version": build.get("cudnn_version")}
        elif name == "torch" and info["torch"] is None:
            version = _constants(dist.locate_file("torch/version.py"))
            info["torch"] = {"version": dist.version, "cuda": version.get("cuda")}
    return info

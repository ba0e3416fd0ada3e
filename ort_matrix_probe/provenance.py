"""What the test process has installed, read from metadata without importing it.

Importing onnxruntime or torch to ask their versions would load their native
libraries (and could pick a source dir), so the facts come from dist-info and
from the build_and_package_info / version modules parsed as text.
"""
from __future__ import annotations

import ast
import glob
import importlib.metadata
import os
import sys
from pathlib import Path
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


def _dists(patterns: tuple[str, ...]) -> list[importlib.metadata.PathDistribution]:
    """The dists whose dist-info dir matches, in sys.path order (the one an import finds first comes
    first). Found by dir name: reading every METADATA of a torch environment takes a fifth of a second."""
    found = []
    for entry in sys.path:
        for pattern in patterns:
            found += [importlib.metadata.PathDistribution(Path(p)) for p in sorted(glob.glob(os.path.join(entry or ".", pattern)))]
    return found


def provenance() -> ProvenanceReport:
    info: ProvenanceReport = {"python": sys.version.split()[0], "python_executable": sys.executable,
                              "ort": None, "torch": None}
    for dist in _dists(("onnxruntime*.dist-info", "ort_nightly*.dist-info", "torch-*.dist-info")):
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith(("onnxruntime", "ort-nightly", "ort_nightly")) and info["ort"] is None:
            build = _constants(dist.locate_file("onnxruntime/capi/build_and_package_info.py"))
            info["ort"] = {"distribution": dist.metadata["Name"], "version": dist.version,
                           "package_name": build.get("package_name"), "cuda_version": build.get("cuda_version"),
                           "cudnn_version": build.get("cudnn_version")}
        elif name == "torch" and info["torch"] is None:
            version = _constants(dist.locate_file("torch/version.py"))
            info["torch"] = {"version": dist.version, "cuda": version.get("cuda")}
    return info

"""The docs: the key reference generated from the model, a short README, links that lead somewhere."""
import re
from pathlib import Path

import pytest
from helpers import REPO

from ort_gpu_matrix.config import reference

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs" / "reference").glob("*.md"))]


def test_the_committed_key_reference_is_the_generated_one():
    committed = (REPO / reference.OUT).read_text()
    assert committed == reference.reference(), f"regenerate: python -m ort_gpu_matrix.config.reference > {reference.OUT}"


def test_the_reference_names_every_key_of_the_model():
    """What the generator covers, checked against the loader's own key lists."""
    from ort_gpu_matrix.config.model import ExcludeEntry, IncludeEntry, Libs, Ort, Rule, Settings, Suite, Torch, keys_of
    from ort_gpu_matrix.config.modes import SPECS

    text = (REPO / reference.OUT).read_text()
    classes = [Settings, Ort, Torch, Libs, Suite, Rule, IncludeEntry, ExcludeEntry, *(s.expect_type for s in SPECS.values())]
    missing = [f"{c.__name__}.{k.name}" for c in classes for k in keys_of(c) if f"| `{k.name}` |" not in text]
    assert missing == []


def test_the_readme_is_short_and_keeps_the_commands_ci_runs():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    ci = (REPO / ".ci" / "run").read_text()
    test_command = "python3 -m pytest tests -n 3 --dist worksteal"
    assert f"\n    {test_command}\n" in readme and ci.rstrip().splitlines()[-1] == test_command
    assert "\n    python3 -m pip install -q . && python3 -m nox   # the main job\n" in readme
    assert "\n    ort-gpu-matrix init " in readme and "\n    ort-gpu-matrix  " in readme


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(), re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(REPO)) for d in DOCS])
def test_every_relative_link_and_anchor_leads_somewhere(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)  # links in code blocks are examples
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert broken == []


OLD_README_SECTIONS = {  # every section of the README before the docs split, and where it went
    "Two commands": "README.md", "What you see": "README.md", "Sessions": "docs/guide.md",
    "The release sweep and its gate": "docs/guide.md", "Running the matrix on CI": "docs/guide.md",
    "A matrix with every key": "docs/guide.md", "Choosing cuDNN and CUDA": "docs/guide.md",
    "Choosing the index": "docs/guide.md", "Environment variables": "docs/reference.md",
    "Result files": "docs/reference.md", "Venvs": "docs/design.md", "Each mode run": "docs/design.md",
    "Verdicts": "docs/design.md", "Speed": "docs/design.md", "The built-in dispatch suite": "docs/design.md",
    "Layout": "docs/design.md",
}


@pytest.mark.parametrize("heading, where", OLD_README_SECTIONS.items())
def test_no_section_of_the_old_readme_was_lost(heading, where):
    assert _slug(heading) in _anchors(REPO / where)

"""index_url for torch and ORT entries, against a real PEP 503 index served on 127.0.0.1 by http.server.

The index holds wheels the tests build: a tiny `torch 2.99.0+idx`, and the real onnxruntime CPU wheel
re-versioned to `1.32.0+idx`, beside ORT's own dependencies. PyPI has neither version, so a venv that
holds them got them from this index and nowhere else.
"""
import base64
import hashlib
import http.server
import re
import threading
import zipfile
from pathlib import Path

import pytest
from helpers import CELL, ORT_CPU, PY

INDEX_VERSION = "+idx"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(path: Path, files: dict[str, bytes], dist_info: str) -> None:
    rows = [f"{name},{_record_hash(data)},{len(data)}" for name, data in files.items()]
    rows.append(f"{dist_info}/RECORD,,")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{dist_info}/RECORD", "\n".join(rows) + "\n")


def tiny_torch(where: Path) -> Path:
    version = f"2.99.0{INDEX_VERSION}"
    info = f"torch-{version}.dist-info"
    wheel = where / f"torch-{version}-py3-none-any.whl"
    _write_wheel(wheel, {
        "torch/__init__.py": f"__version__ = {version!r}\n".encode(),
        "torch/version.py": f"__version__ = {version!r}\ncuda = None\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }, info)
    return wheel


def reversioned(wheel: Path, where: Path) -> Path:
    """The same wheel as version <v>+idx: its dist-info renamed, METADATA and RECORD rewritten."""
    name, version, rest = wheel.name.split("-", 2)
    new_version = version + INDEX_VERSION
    old_info, new_info = f"{name}-{version}.dist-info", f"{name}-{new_version}.dist-info"
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as z:
        for item in z.namelist():
            if item == f"{old_info}/RECORD":
                continue
            data = z.read(item)
            if item == f"{old_info}/METADATA":
                data = re.sub(rb"^Version: .*$", f"Version: {new_version}".encode(), data, count=1, flags=re.M)
            files[item.replace(old_info, new_info, 1) if item.startswith(old_info) else item] = data
    out = where / f"{name}-{new_version}-{rest}"
    _write_wheel(out, files, new_info)
    return out


def _normalized(wheel_name: str) -> str:
    return re.sub(r"[-_.]+", "-", wheel_name.split("-")[0]).lower()


def write_index(root: Path, wheels: list[Path]) -> None:
    """root/simple/<project>/index.html linking root/files/<wheel>#sha256=..., as PEP 503 lays it out."""
    files = root / "files"
    files.mkdir(parents=True)
    projects: dict[str, list[Path]] = {}
    for w in wheels:
        (files / w.name).write_bytes(w.read_bytes())
        projects.setdefault(_normalized(w.name), []).append(w)
    simple = root / "simple"
    simple.mkdir()
    (simple / "index.html").write_text("".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(projects)))
    for project, ws in projects.items():
        (simple / project).mkdir()
        links = "".join(f'<a href="../../files/{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">'
                        f"{w.name}</a>\n" for w in ws)
        (simple / project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")


class Served:
    def __init__(self, root: Path):
        self.requests: list[str] = []
        requests = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kw):
                super().__init__(*args, directory=str(root), **kw)

            def log_message(self, fmt, *args):
                requests.append(self.path)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory, wheelhouse):
    """ORT's CPU wheel and its dependencies from PyPI (once per test run); the index's own builds beside them."""
    d = wheelhouse
    (ort,) = d.glob("onnxruntime-*.whl")
    built = tmp_path_factory.mktemp("built")
    index_ort = reversioned(ort, built)
    torch = tiny_torch(built)
    return {"ort": ort, "index_ort": index_ort, "torch": torch, "deps": [w for w in d.glob("*.whl") if w != ort]}


@pytest.fixture
def index(tmp_path, wheels):
    root = tmp_path / "index"
    write_index(root, [wheels["index_ort"], wheels["torch"], *wheels["deps"]])
    served = Served(root)
    yield served
    served.server.shutdown()


def _matrix(harness, index_url: str, torch: bool, ort: bool):
    harness.venvs = harness.tmp / "own-venvs"
    harness.write(["test_allpass.py"])
    text = harness.matrix.read_text()
    if ort:
        text = text.replace(f'requirement = "{ORT_CPU}"\n', f'requirement = "{ORT_CPU}"\nindex_url = "{index_url}"\n')
    if torch:
        text = text.replace("[torch.none]\nskip = true", f'[torch.none]\nrequirement = "torch==2.99.0"\nindex_url = "{index_url}"')
    harness.matrix.write_text(text)


def _site(harness) -> Path:
    (venv,) = [p for p in harness.venvs.iterdir() if p.name != ".locks"]
    return venv / "lib" / f"python{PY}" / "site-packages"


def test_ort_comes_from_its_index_url_and_nowhere_else(harness, index, wheels):
    _matrix(harness, index.url, torch=False, ort=True)
    run = harness.nox("-s", CELL)
    r = run.result("normal")
    assert r["verdict"] == "pass", run.output[-3000:]
    assert r["provenance"]["ort"]["version"] == "1.32.0+idx"  # PyPI has no such version
    assert f"--index-url {index.url} {ORT_CPU}" in run.output
    assert f"/files/{wheels['index_ort'].name}" in index.requests
    assert r["venv"]["fingerprint"]["ort_index_url"] == index.url


def test_torch_comes_from_its_index_url(harness, index, wheels):
    _matrix(harness, index.url, torch=True, ort=False)
    run = harness.nox("-s", CELL)
    assert run.result("normal")["verdict"] == "pass", run.output[-3000:]
    assert f"--index-url {index.url} torch==2.99.0" in run.output
    assert f"/files/{wheels['torch'].name}" in index.requests
    assert (_site(harness) / "torch-2.99.0+idx.dist-info").is_dir()
    assert run.result("normal")["provenance"]["torch"]["version"] == "2.99.0+idx"


def test_offline_never_asks_an_index_url(harness, index, wheels, tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    for w in (wheels["index_ort"], wheels["torch"], *wheels["deps"]):
        (house / w.name).write_bytes(w.read_bytes())
    _matrix(harness, index.url, torch=True, ort=True)
    run = harness.nox("-s", CELL, env={"MATRIX_OFFLINE": "1", "MATRIX_WHEELHOUSE": str(house)})
    r = run.result("normal")
    assert r["verdict"] == "pass", run.output[-3000:]
    assert "--index-url" not in run.output and f"--no-index --find-links {house}" in run.output
    assert index.requests == []  # the index was never asked
    assert r["provenance"]["ort"]["version"] == "1.32.0+idx"
    assert r["provenance"]["torch"]["version"] == "2.99.0+idx"


def test_an_index_url_without_a_requirement_is_refused(harness):
    harness.write(["test_allpass.py"])
    text = harness.matrix.read_text().replace(f'requirement = "{ORT_CPU}"', 'wheel = "x.whl"\nindex_url = "http://x/simple/"')
    harness.matrix.write_text(text)
    run = harness.nox("-l")
    assert run.proc.returncode == 2
    assert "ort.cpu.index_url: only applies with `requirement`" in run.output

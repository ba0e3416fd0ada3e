#!/usr/bin/env bash
# DRAFT (h1, issue 22, pollution part; the lead finishes it with the flake part and the sweeps).
# On the nvidia-h200 device: ORT's test_gqa.py sets os.environ["ORT_DISABLE_FLASH_ATTENTION"] and never
# restores it; test_mha.py's tiers follow it. In one process (-n 0), so the order is the `files` order:
#   A. isolation = "report", gqa then mha: mha's tests dispatch EFFICIENT_ATTENTION, the polluter is named
#   B. isolation = "restore" (the default), gqa then mha
#   C. isolation = "restore", mha then gqa
# What proves it (summary.txt): B and C give test_mha.py the same tiers per test (FLASH and EFFICIENT as
# test_mha.py alone dispatches them), A differs from them; A, B and C each name a test_gqa.py test with
# `ORT_DISABLE_FLASH_ATTENTION (unset) -> '1'`, undone in B and C only.
# Needs /root/wheelhouse (as run-ort-attention-h200.sh) and ORT's test files in .ort-src/ (git-ignored, carried),
# test_mha.py among them. One cell (system cuDNN 9.14), normal mode only, to fit a device call.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and results}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs
export PYTHONUNBUFFERED=1
EV=docs/evidence/ort-attention
RES=/root/reproducible-results; rm -rf "$RES"
variant() {  # variant OUT ISOLATION FILES: the evidence matrix, one cell, normal only, one process, this order
  python3 - "$@" <<'PY'
import re, sys
out, isolation, files = sys.argv[1:]
t = open("docs/evidence/ort-attention/matrix.toml").read()
t = re.sub(r'modes = \[[^]]*\]', 'modes = ["normal"]', t, count=1)
t = re.sub(r'\n  \{ python = "3.12", ort = "rel", torch = "img", libs = "pip912" \},', "", t, count=1)
t = re.sub(r'\nfiles = \[[^]]*\]', f"\nfiles = {files}", t, count=1)
t = t.replace('pytest_args = ["-n", "8"]', f'pytest_args = ["-n", "0"]\nisolation = "{isolation}"', 1)
open(out, "w").write(t)
PY
}
GQA=test_onnx_attention/test_gqa.py MHA=test_mha.py  # adjust MHA to where test_mha.py lies under the suite root
variant $EV/mA.toml report "[\"$GQA\", \"$MHA\"]"
variant $EV/mB.toml restore "[\"$GQA\", \"$MHA\"]"
variant $EV/mC.toml restore "[\"$MHA\", \"$GQA\"]"
{
  for run in A B C; do
    echo "## $run"
    MATRIX_TOML=$EV/m$run.toml MATRIX_RESULTS=$RES/$run python3 -m nox -s gpu-3.12-sys914-normal
    echo "nox exit: $?"
  done
} 2>&1 | tee "$OUT/reproducible.log"
python3 - "$RES" <<'PY' | tee "$OUT/summary.txt"
import json, sys
from collections import Counter
tiers = {}
for run in "ABC":
    r = json.load(open(f"{sys.argv[1]}/{run}/gpu-3.12-sys914-normal.json"))
    mha = {t: v for t, v in r["dispatch"]["tests"].items() if "test_mha" in t}
    tiers[run] = {t: sorted(set(v)) for t, v in mha.items()}
    print(run, r["isolation"], "test_mha tests per tier:", dict(Counter(x for v in tiers[run].values() for x in v)))
    for p in r["pollution"]:
        print("  pollution:", p["test"], [(c["name"], c["before"], c["after"]) for c in p["changes"]],
              "undone" if p["undone"] else "not undone", p["later_tests"], "later")
print("B == C (restore: same tiers in either order):", tiers["B"] == tiers["C"])
print("A != B (report: the order effect is back):", tiers["A"] != tiers["B"])
PY
mkdir -p "$OUT/results"; cp -r "$RES"/* "$OUT/results/" 2>/dev/null

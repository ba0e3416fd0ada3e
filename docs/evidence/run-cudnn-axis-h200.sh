#!/usr/bin/env bash
# The cuDNN axis on the nvidia-h200 device kind: five ways to get cuDNN (docs/evidence/cudnn-axis/matrix.toml).
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.31.1 nvidia-cudnn-cu13==9.12.0.46 nvidia-cudnn-cu13==9.28.1.4 onnx==1.20.1 pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs PYTHONUNBUFFERED=1
export MATRIX_TOML=docs/evidence/cudnn-axis/matrix.toml MATRIX_RESULTS=/root/cudnn-axis
rm -rf "$MATRIX_RESULTS"
{
  python3 -m nox -s sweep -- --out "$OUT"; echo "nox -s sweep exit: $?"
  python3 -m nox -s doctor; echo "nox -s doctor exit: $?"
} > "$OUT/cudnn-axis.log" 2>&1
python3 - "$MATRIX_RESULTS" > "$OUT/audits.md" <<'PY'
import json, pathlib, sys
print("| session | verdict | LD_PRELOAD | loader | by-name cuDNN (version) | cuDNN copies mapped | reasons |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for p in sorted(pathlib.Path(sys.argv[1]).glob("gpu-*.json")):
    r = json.loads(p.read_text())
    audits = r["libraries"]["audits"]
    a = audits[0] if audits else {}
    bn = (a.get("by_name") or {}).get("cudnn") or {}
    copies = "; ".join(f"{c['file']} ({c.get('file_version')})" for c in a.get("cudnn_copies", []))
    loader = json.dumps(a.get("loader")) if a.get("loader") else "preload"
    reasons = "; ".join(r["reasons"])[:300] or "-"
    print(f"| {r['session']} | {r['verdict']} | {r['env'].get('LD_PRELOAD') or '-'} | {loader} | {bn.get('file')} ({bn.get('version')}) | {copies} | {reasons} |")
PY
tar -C "$MATRIX_RESULTS" -czf "$OUT/results.tar.gz" . 2>/dev/null
tail -n 30 "$OUT/cudnn-axis.log"; cat "$OUT/audits.md"

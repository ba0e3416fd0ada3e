#!/usr/bin/env bash
# The --gpus scheduler on the one-GPU nvidia-h200 device kind: the shipped matrix's H200 cells, --gpus all.
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.31.1 onnx==1.20.1 pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs PYTHONUNBUFFERED=1
export MATRIX_RESULTS=/root/one-gpu; rm -rf "$MATRIX_RESULTS"
{
  echo "## host"; nvidia-smi -L
  echo "## nox -s sweep -- --gpus all"
  python3 -m nox -s sweep -- --gpus all --out "$OUT"; echo "nox exit: $?"
  echo "## the GPU each result records"
  python3 - "$MATRIX_RESULTS" <<'PY'
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("gpu-*.json")):
    r = json.loads(p.read_text())
    print(f"{r['session']}: {r['verdict']}, gpu {json.dumps(r['gpu'])}")
PY
  echo "## sweep-timeline.json"; cat "$MATRIX_RESULTS/sweep-timeline.json"
} 2>&1 | tee "$OUT/one-gpu.log"
mkdir -p "$OUT/results"; cp "$MATRIX_RESULTS"/gpu-*.json "$MATRIX_RESULTS"/sweep.json "$MATRIX_RESULTS/sweep-timeline.json" "$OUT/results/"

#!/usr/bin/env bash
# The newcomer's path on the nvidia-h200 device kind: nox -l, nox -s doctor, then plain nox (doctor + every
# cell this host can run), with the shipped matrix, offline from the staged wheelhouse.
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.31.1 onnx==1.20.1 pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs MATRIX_RESULTS=/root/newcomer
export PYTHONUNBUFFERED=1
rm -rf "$MATRIX_RESULTS"
python3 -m nox -l > "$OUT/nox-l.txt" 2>&1; echo "nox -l exit: $?" >> "$OUT/nox-l.txt"
python3 -m nox -s doctor > "$OUT/doctor.txt" 2>&1; echo "nox -s doctor exit: $?" >> "$OUT/doctor.txt"
python3 -m nox > "$OUT/nox.txt" 2>&1; echo "nox exit: $?" >> "$OUT/nox.txt"
python3 -m nox -s doctor > "$OUT/doctor-after.txt" 2>&1; echo "nox -s doctor exit: $?" >> "$OUT/doctor-after.txt"
tail -5 "$OUT"/*.txt

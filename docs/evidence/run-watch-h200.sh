#!/usr/bin/env bash
# A sweep you can watch, on the one-GPU nvidia-h200 device kind: the shipped matrix's H200 cells, serial and
# --gpus all, once without a terminal (what CI logs get) and once under a pseudo-terminal (`script`), and how
# many bytes each printed (issue 23 saw 978 KB of pytest output from six mode runs).
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.31.1 onnx==1.20.1 pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools rich
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs PYTHONUNBUFFERED=1
export MATRIX_RESULTS=/root/watch; rm -rf "$MATRIX_RESULTS"
python3 -m nox -s sweep -- --out "$OUT/serial" > "$OUT/serial.log" 2>&1; echo "serial: nox exit $?"
python3 -m nox -s sweep -- --gpus all --out "$OUT/gpus" > "$OUT/gpus.log" 2>&1; echo "--gpus all: nox exit $?"
script -qec "python3 -m nox -s sweep -- --gpus all --out $OUT/tty" "$OUT/tty.typescript" > /dev/null; echo "tty: exit $?"
for f in serial gpus; do
  echo "## $f.log: $(wc -c < "$OUT/$f.log") bytes, $(grep -c '^start  ' "$OUT/$f.log") start lines," \
       "$(grep -cE '^(PASS|FAIL) +gpu-' "$OUT/$f.log") end lines, control codes: $(grep -c $'\x1b\[?25' "$OUT/$f.log")"
  grep -E '^(start  |PASS |FAIL )' "$OUT/$f.log"
done
echo "## tty: $(wc -c < "$OUT/tty.typescript") bytes; live lines drawn: $(grep -o 'runs .\{0,40\}left' "$OUT/tty.typescript" | wc -l)"

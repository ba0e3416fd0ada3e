#!/usr/bin/env bash
# bench/run.py on the nvidia-h200 device machine: the shipped H200 cell, offline, and pytest's start with the
# torch environment's plugins autoloaded or not. Needs /root/wheelhouse as for run-h200.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the JSON}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs PYTHONUNBUFFERED=1
nproc; command -v strace || echo "no strace on this host"
python3 bench/run.py --cell gpu-3.12-cu130 --repeat 5 --skip cold --autoload-python /opt/torch/.venv/bin/python3 \
  --out "$OUT/bench-h200.json" 2>&1 | tee "$OUT/bench-h200.txt"

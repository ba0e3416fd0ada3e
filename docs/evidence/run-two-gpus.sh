#!/usr/bin/env bash
# The two-GPU sweep on the nvidia-h200-x2 device kind (docs/evidence/two-gpus.md): 4 cells x 3 modes,
# the built-in suite under -n 4; --gpus 0 against --gpus 0,1 against the same pytest commands by hand.
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.30.0 onnxruntime-gpu==1.31.1 onnx==1.20.1 pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs PYTHONUNBUFFERED=1
export MATRIX_TOML=docs/evidence/two-gpus/matrix.toml
RES=/root/two-gpus; rm -rf "$RES"
EV=docs/evidence/two-gpus
walled() {  # walled NAME CMD...: run it, append "NAME<TAB>seconds<TAB>exit" to $OUT/walls.tsv
  local name=$1; shift
  local t0 t1 rc; t0=$(date +%s.%N); "$@"; rc=$?; t1=$(date +%s.%N)
  printf '%s\t%s\t%s\n' "$name" "$(awk "BEGIN{print $t1 - $t0}")" "$rc" >> "$OUT/walls.tsv"
  echo "== $name: exit $rc, $(awk "BEGIN{print $t1 - $t0}") s"
}
{
  echo "## host"; nvidia-smi -L; nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv,noheader
  for i in 1 2 3; do /usr/bin/time -f "nvidia-smi -L took %e s" nvidia-smi -L > /dev/null; done
  echo "## 0. warm-up: the venvs are built (two children wait on one venv's lock)"
  MATRIX_RESULTS=$RES/warm python3 -m nox -s sweep -- --gpus 0,1 --out "$OUT/warm"; echo "nox exit: $?"
  : > "$OUT/walls.tsv"
  echo "## 1. one GPU: --gpus 0"
  MATRIX_RESULTS=$RES/one walled "sweep --gpus 0" python3 -m nox -s sweep -- --gpus 0 --out "$OUT/one"
  echo "## 2. two GPUs: --gpus 0,1, then the anchor twice, then --gpus 0,1 again (ABBA)"
  MATRIX_RESULTS=$RES/two walled "sweep --gpus 0,1 #1" python3 -m nox -s sweep -- --gpus 0,1 --out "$OUT/two"
  echo "## 3. anchor: the same pytest commands by hand, one queue per GPU, started at once"
  walled "anchor #1" python3 $EV/anchor.py "$RES/two" --gpus 0,1 --out "$OUT/anchor1.json"
  walled "anchor #2" python3 $EV/anchor.py "$RES/two" --gpus 0,1 --out "$OUT/anchor2.json"
  MATRIX_RESULTS=$RES/two2 walled "sweep --gpus 0,1 #2" python3 -m nox -s sweep -- --gpus 0,1 --out "$OUT/two2"
} 2>&1 | tee "$OUT/two-gpus.log"
python3 $EV/summary.py --one "$RES/one" --two "$RES/two" --anchor "$OUT/anchor1.json" --walls "$OUT/walls.tsv" \
  | tee "$OUT/summary.md"
# everything else in one file (the device returns few files): results, timelines, per-cell logs
tar -C "$RES" -czf "$OUT/runs.tar.gz" --exclude='*/runs/*/report.json' one two two2

#!/usr/bin/env bash
# One GPU, whole cells (issue 24), on the one-GPU nvidia-h200 device kind: bench/one_gpu.py over ORT's attention
# tests (docs/evidence/one-gpu-cells/matrix.toml). It prints exactly the three claims:
#   one cell, three modes: A s overlapped vs B s bare: R x (target <= 1.8)
#   two-cell sweep on one GPU: A s vs B s serial: R x (target <= 0.65)
#   figures (verdicts, counts, outcomes, tiers, teeth coverage), overlapped vs serial: SAME | DIFFERENT: ...
# plus where each run's start goes (the probe's marks) and the room each run decided, with its reasons.
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.30.0 onnxruntime-gpu==1.31.1 onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools setuptools einops rich
# and ORT's attention test files under ORT_SOURCE (default .ort-src/, git-ignored, carried): see
# docs/evidence/ort-attention-h200.md. STEP=1: the cell (bare, serial, overlapped); STEP=2: the two-cell sweep
# and the scoped teeth at -n 8,4,2 (TEETH_WORKERS), and the one-GPU sweep with other arguments (SWEEP_VARIANTS,
# e.g. '--slots-per-gpu 4'); STEP=3: the cell with other arguments (VARIANTS, e.g. '--slots-per-gpu 1 -n 5').
# util-stepN.txt samples the CPU and the GPU every second (bench/util_phases.py). Each fits one device call; STEP=2 reuses STEP=1's venvs
# while the machine is warm. SUITE_EXTRA='isolation = ...' adds a line to the suite table (issue 22's key).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and results}"
: "${STEP:?set STEP to 1 or 2}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
export ORT_SOURCE=${ORT_SOURCE:-$PWD/.ort-src} MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse
export MATRIX_VENVS=/root/matrix-venvs BENCH_WORK=/root/one-gpu-cells PYTHONUNBUFFERED=1
M=docs/evidence/one-gpu-cells/matrix.toml
if [ -n "${SUITE_EXTRA:-}" ]; then
  python3 - "$SUITE_EXTRA" <<'PY'
import sys
p = "docs/evidence/one-gpu-cells/matrix.toml"
t = open(p).read()
open(p.replace("matrix.toml", "m-extra.toml"), "w").write(t.replace("[suite.ort_attention]\n", "[suite.ort_attention]\n" + sys.argv[1] + "\n", 1))
PY
  M=docs/evidence/one-gpu-cells/m-extra.toml
fi
CELL=gpu-3.12-sys914
# every second: the CPU's jiffies (/proc/stat's first line) and the GPU's utilization, to tell which one a schedule
# is bound by (bench/util_phases.py reads it against each sweep's timeline)
( while :; do echo "$(date +%s.%N) $(head -1 /proc/stat) $(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null | head -1)"; sleep 1; done ) > "$OUT/util-step$STEP.txt" 2>/dev/null &
SAMPLER=$!
{
  echo "## host"; nvidia-smi -L; nvidia-smi --query-gpu=index,memory.free,memory.total --format=csv; echo "cores: $(nproc)"
  echo "## ORT_SOURCE=$ORT_SOURCE"; ls "$ORT_SOURCE/onnxruntime/test/python/transformers/test_onnx_attention" || exit 1
  if [ "$STEP" = 1 ]; then
    rm -rf "$BENCH_WORK"
    echo "## step 1: one cell, three modes (bare pytest, nox -s $CELL -- --slots-per-gpu 1, nox -s $CELL)"
    python3 bench/one_gpu.py --matrix $M --cell $CELL --part cell --repeat "${REPEAT:-2}" --out "$OUT/one-gpu-cells-step1.json"
  elif [ "$STEP" = 3 ]; then
    echo "## step 3: the overlapped cell with other -n (VARIANTS, default '-n 4' '-n 6'), each warmed once"
    IFS=';' read -ra VS <<< "${VARIANTS:--n 4;-n 6}"
    VA=(); for v in "${VS[@]}"; do VA+=("--variant=$v"); done
    python3 bench/one_gpu.py --matrix $M --cell $CELL --part variants --repeat "${REPEAT:-1}" "${VA[@]}" \
      --out "$OUT/one-gpu-cells-step3.json"
  else
    echo "## step 2: the two-cell sweep, serial (in-process) vs --gpus 0 (auto slots); the scoped teeth at -n ${TEETH_WORKERS:-8,4,2}"
    IFS=';' read -ra SV <<< "${SWEEP_VARIANTS:-}"
    SVA=(); for v in "${SV[@]}"; do SVA+=("--sweep-variant=$v"); done
    python3 bench/one_gpu.py --matrix $M --cell $CELL --part sweep --sweep-cells gpu-3.12-sys914 gpu-3.12-t919 \
      --gpu 0 --repeat "${REPEAT:-1}" --teeth-workers "${TEETH_WORKERS-8,4,2}" "${SVA[@]}" --out "$OUT/one-gpu-cells-step2.json"
  fi
  echo "bench exit: $?"
  echo "## the room each overlapped run decided"
  grep -hE "(overlapping|one after another): [0-9]+ mode run|sweep: [0-9]+ mode run\(s\) at once per GPU" "$BENCH_WORK/bench.log" | sort | uniq -c
  echo "## each result's peak GPU memory"
  python3 - "$BENCH_WORK" <<'PY'
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("*/gpu-*.json")):
    r = json.loads(p.read_text())
    print(f"{p.parent.name}/{r['session']}: {r['verdict']}, {r['duration_s']} s, gpu_memory {json.dumps(r.get('gpu_memory'))}")
PY
} 2>&1 | tee "$OUT/one-gpu-cells-step$STEP.log"
kill $SAMPLER 2>/dev/null
cp "$BENCH_WORK/bench.log" "$OUT/bench-step$STEP.log" 2>/dev/null
tar -C "$BENCH_WORK" --exclude=venvs -czf "$OUT/results-step$STEP.tar.gz" . 2>/dev/null
rm -f docs/evidence/one-gpu-cells/m-extra.toml

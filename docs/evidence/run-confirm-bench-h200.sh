#!/usr/bin/env bash
# Issue 22's bench on the nvidia-h200 device: what confirmation costs a MATH-forced sweep, and what isolation
# costs per test and per mode run. ORT's newest attention tests (198, -n 8), the two cells of
# docs/evidence/reproducible/matrix.toml on onnxruntime-gpu 1.31.1, MATH forced (sdpa_kernel=16), against the
# committed 1.30.0 baseline (docs/evidence/reproducible/baselines/ort-1.30.0.json) under --gate regressions:
#   math0a  --confirm 0  (also warms the venv)
#   math2   --confirm 2  (the default: every tier regression rerun twice; a cell's modes rerun side by side)
#   math0b  --confirm 0  again
# The target: math2 <= 2 x the --confirm 0 sweep. Then bench/isolation.py on the normal results of math0b.
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.30.0 onnxruntime-gpu==1.31.1 onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools setuptools einops rich
# and ORT's test files in .ort-src/ (carry ".ort-src"). Run: OUT=... bash docs/evidence/run-confirm-bench-h200.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and results}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
R=/root/cb
rm -rf $R; mkdir -p $R/baselines $R/expect "$OUT"
cp expect/ort_attention.toml $R/expect/   # the shipped H200 calibration (issue 22), beside the matrix copy
cp docs/evidence/reproducible/baselines/ort-1.30.0.json $R/baselines/
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs
export MATRIX_BASELINES=$R/baselines PYTHONUNBUFFERED=1
python3 - $R/m.toml <<'PY'
import sys
t = open("docs/evidence/reproducible/matrix.toml").read()
for old, new in [("[suite.ort_attention]\n", '[suite.ort_attention]\nexpect_file = "expect/ort_attention.toml"\n'
                  'provider_options = { sdpa_kernel = "16" }\n'),
                 ("onnxruntime-gpu==1.30.0", "onnxruntime-gpu==1.31.1")]:
    assert old in t, old
    t = t.replace(old, new, 1)
open(sys.argv[1], "w").write(t)
PY
{
  for run in math0a:0 math2:2 math0b:0; do
    name=${run%%:*}; n=${run##*:}
    t0=$(date +%s.%N)
    MATRIX_TOML=$R/m.toml MATRIX_RESULTS=$R/res-$name timeout 280 python3 -m nox -s sweep -- \
      --baseline ort-1.30.0 --gate regressions --confirm $n --out $R/out-$name > $R/$name.log 2>&1
    rc=$?
    t1=$(date +%s.%N)
    python3 -c "import sys; print(f'sweep {sys.argv[1]} --confirm {sys.argv[2]}: exit {sys.argv[3]}, wall {float(sys.argv[5]) - float(sys.argv[4]):.1f} s')" $name $n $rc $t0 $t1
    grep -E "^confirm: .*(at once|rerun [0-9] of)|built venv|reusing venv" $R/$name.log | head -20
    tail -5 $R/$name.log
    mkdir -p "$OUT/$name"; cp $R/out-$name/sweep.json $R/out-$name/report.md "$OUT/$name/" 2>/dev/null; cp $R/$name.log "$OUT/$name/"
  done
  echo "## isolation cost (bench/isolation.py) on math0b's normal runs, and on math2's"
  python3 bench/isolation.py $R/res-math0b/gpu-3.12-sys914-normal.json $R/res-math0b/gpu-3.12-t919-normal.json \
    $R/res-math0b/gpu-3.12-sys914-require_cudnn.json
} 2>&1 | tee "$OUT/confirm-bench.log"

#!/usr/bin/env bash
# Node truth on the nvidia-h200 device (issue 48). Calls of one lease, STEP=A, B, C:
#   A. the issue's facts asked of onnxruntime-gpu 1.31.1 (node-truth/facts.py: Add -> Unique / Det / Relu, what
#      get_providers(), the default log, the placement API and the verbose log say); then ORT's CUDA op tests
#      (node-truth/matrix.toml, cell nt-3.12-h200) through the harness, the bare recipe beside it, and the report.
#   B. no false red: the shipped matrix's working cells (gpu-3.12-h200, gpu-3.12-unpinned, gpu-3.12-h200cuda, and
#      gpu-3.12-h200pip where its pip cuDNN is staged) and ORT's attention suite (nt-3.12-h200att) swept, saved as
#      baselines, swept again under --gate regressions.
#   D. this page's own two tests (node-truth/suite/test_placed.py) on ORT's CUDA build: Add -> Unique, whose Unique
#      the CUDA build places on the CPU, and Add -> Relu, each with a cuda_ops rule; the bare recipe beside it.
#   C. the cost: bench/ep_census.py --what nodes (the node census on and off, the EP census on both sides,
#      alternating) on A's two stored runs; bench/placement_ways.py on the GPU (each way of reading placement).
#   Q. the cost again with quiet threads as shipped (the default since issue 49): bench/ep_census.py --what nodes on
#      the stored normal run of below-floor's quiet attention cell, which run-below-floor-h200.sh STEP=D leaves in
#      /root/bench-below-floor-2cell (or QUIET_RESULT), REPEAT alternating pairs (default 8).
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.31.1 nvidia-cudnn-cu13==9.12.0.46 onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock \
#     defusedxml jinja2 pyelftools setuptools einops rich
#   (nvidia-cudnn-cu13 serves step B's gpu-3.12-h200pip only, and may be left out)
# and ORT's test files in .ort-src/ (git-ignored; carry ".ort-src"): docs/evidence/node-truth-h200.md lists them.
# Run: STEP=A OUT=... bash docs/evidence/run-node-truth-h200.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}" "${STEP:?set STEP to A, B or C}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs
export PYTHONUNBUFFERED=1
NTM=docs/evidence/node-truth/matrix.toml
RES=/root/nt-results
mkdir -p "$OUT"
if [ "$STEP" = A ]; then
rm -rf "$RES"
{
  echo "## A1. ORT's CUDA op tests through the harness (nt-3.12-h200: ORT 1.31.1, CUDA 13.0 and cuDNN 9.14 pinned)"
  t0=$SECONDS
  MATRIX_TOML=$NTM MATRIX_RESULTS=$RES timeout 280 python3 -m nox -s nt-3.12-h200 > "$OUT/nox-nt.log" 2>&1
  echo "nox -s nt-3.12-h200 exit: $? in $((SECONDS - t0)) s"
  sed -n '/^cell /,/^verdict /p' "$OUT/nox-nt.log" | cut -c1-1500 | head -40
  VENV=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['venv']['path'])" $RES/nt-3.12-h200-normal.json)
  echo "## A0. the issue's facts, asked of the cell's own venv (onnxruntime-gpu 1.31.1)"
  LD_PRELOAD=/usr/local/cuda-13.0/lib64/libcudart.so.13:/usr/lib/x86_64-linux-gnu/libcudnn.so.9 \
    timeout 120 "$VENV/bin/python" docs/evidence/node-truth/facts.py
  echo "## A2. the bare recipe beside it, per test and per subtest (same venv, same pinned libraries)"
  timeout 200 python3 docs/evidence/subtests/bare.py $RES/nt-3.12-h200-normal.json "$OUT/bare-nt.log"
  echo "## A4. ORT's attention suite through the harness (nt-3.12-h200att, normal)"
  t0=$SECONDS
  MATRIX_TOML=$NTM MATRIX_RESULTS=$RES timeout 200 python3 -m nox -s nt-3.12-h200att > "$OUT/nox-att.log" 2>&1
  echo "nox -s nt-3.12-h200att exit: $? in $((SECONDS - t0)) s"
  sed -n '/^cell /,/^verdict /p' "$OUT/nox-att.log" | cut -c1-700 | head -20
  echo "## A3. the report"
  MATRIX_TOML=$NTM timeout 100 python3 -m nox -s report -- $RES --out "$OUT/report" > "$OUT/report.txt" 2>&1
  echo "nox -s report exit: $?"
  sed -n '/nodes on the CPU/,/^$/p' "$OUT/report.txt" | cut -c1-300 | head -40
} 2>&1 | tee "$OUT/step-a.log"
cp $RES/nt-3.12-h200-normal.json $RES/nt-3.12-h200att-normal.json "$OUT/" 2>/dev/null
tar -C "$RES" --exclude='pytest.log' -czf "$OUT/results-a.tar.gz" . 2>/dev/null
fi
if [ "$STEP" = B ]; then
SHIPPED=/root/shipped-results
BASE=/root/shipped-baselines
CELLS="gpu-3.12-h200 gpu-3.12-unpinned gpu-3.12-h200cuda"
ls /root/wheelhouse/nvidia_cudnn_cu13-* >/dev/null 2>&1 && CELLS="$CELLS gpu-3.12-h200pip"  # its pip cuDNN staged
{
  echo "## B1. the shipped working cells ($CELLS) and ORT's attention suite: a sweep saved as a baseline"
  t0=$SECONDS
  MATRIX_RESULTS=$SHIPPED/first MATRIX_BASELINES=$BASE timeout 240 python3 -m nox -s sweep -- --select $CELLS \
    --save-baseline nt1 --confirm 0 > "$OUT/sweep-first.log" 2>&1
  echo "shipped, first sweep exit: $? in $((SECONDS - t0)) s"; tail -2 "$OUT/sweep-first.log"
  t0=$SECONDS
  MATRIX_TOML=$NTM MATRIX_RESULTS=$SHIPPED/att1 MATRIX_BASELINES=$BASE timeout 120 python3 -m nox -s sweep -- \
    --select nt-3.12-h200att --save-baseline att1 --confirm 0 > "$OUT/sweep-att-first.log" 2>&1
  echo "attention, first sweep exit: $? in $((SECONDS - t0)) s"; tail -2 "$OUT/sweep-att-first.log"
  echo "## B2. swept again against them, --gate regressions (expected: exit 0, no regression)"
  t0=$SECONDS
  MATRIX_RESULTS=$SHIPPED/second MATRIX_BASELINES=$BASE timeout 240 python3 -m nox -s sweep -- --select $CELLS \
    --baseline nt1 --gate regressions > "$OUT/sweep-second.log" 2>&1
  echo "shipped, second sweep exit: $? in $((SECONDS - t0)) s"
  grep -E "^(PASS|FAIL) |egression|sweep (OK|FAILED)|ran on the CPU" "$OUT/sweep-second.log" | cut -c1-400 | head -20
  t0=$SECONDS
  MATRIX_TOML=$NTM MATRIX_RESULTS=$SHIPPED/att2 MATRIX_BASELINES=$BASE timeout 120 python3 -m nox -s sweep -- \
    --select nt-3.12-h200att --baseline att1 --gate regressions > "$OUT/sweep-att-second.log" 2>&1
  echo "attention, second sweep exit: $? in $((SECONDS - t0)) s"
  grep -E "^(PASS|FAIL) |egression|sweep (OK|FAILED)|ran on the CPU" "$OUT/sweep-att-second.log" | cut -c1-400 | head -20
  cp "$BASE/nt1.json" "$BASE/att1.json" "$OUT/" 2>/dev/null
} 2>&1 | tee "$OUT/step-b.log"
tar -C "$SHIPPED" --exclude='pytest.log' -czf "$OUT/results-b.tar.gz" . 2>/dev/null
fi
if [ "$STEP" = D ]; then
{
  echo "## D1. this page's own tests on ORT's CUDA build (nt-3.12-h200own): Add -> Unique and Add -> Relu"
  t0=$SECONDS
  MATRIX_TOML=$NTM MATRIX_RESULTS=$RES timeout 200 python3 -m nox -s nt-3.12-h200own > "$OUT/nox-own.log" 2>&1
  echo "nox -s nt-3.12-h200own exit: $? in $((SECONDS - t0)) s"
  sed -n '/^cell /,/^verdict /p' "$OUT/nox-own.log" | cut -c1-900
  echo "## D2. the bare recipe beside it (same venv, same pinned libraries, no harness)"
  VENV=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['venv']['path'])" $RES/nt-3.12-h200own-normal.json)
  (cd docs/evidence/node-truth/suite && LD_PRELOAD=/usr/local/cuda-13.0/lib64/libcudart.so.13:/usr/lib/x86_64-linux-gnu/libcudnn.so.9 \
    timeout 100 "$VENV/bin/python" -m pytest -p no:cacheprovider -q test_placed.py 2>&1 | tail -3)
  cp $RES/nt-3.12-h200own-normal.json "$OUT/" 2>/dev/null
} 2>&1 | tee "$OUT/step-d.log"
fi
if [ "$STEP" = C ]; then
{
  echo "## C1. the node census on and off (bench/ep_census.py --what nodes), alternating pairs"
  timeout "${BENCH_S:-420}" python3 bench/ep_census.py --what nodes $RES/nt-3.12-h200att-normal.json $RES/nt-3.12-h200-normal.json \
    --repeat "${REPEAT:-5}" ${PREVIOUS:+--previous "$PREVIOUS"} --out "$OUT/node-census-bench.json"
  echo "## C2. each way of reading placement, on the GPU (bench/placement_ways.py)"
  VENV=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['venv']['path'])" $RES/nt-3.12-h200-normal.json)
  LD_PRELOAD=/usr/local/cuda-13.0/lib64/libcudart.so.13:/usr/lib/x86_64-linux-gnu/libcudnn.so.9 \
    timeout 150 "$VENV/bin/python" bench/placement_ways.py --providers CUDAExecutionProvider,CPUExecutionProvider --tail Unique --builds 30 \
    --out "$OUT/placement-ways.json"
} 2>&1 | tee "$OUT/step-c.log"
fi
if [ "$STEP" = Q ]; then
  QUIET_RESULT=${QUIET_RESULT:-/root/bench-below-floor-2cell/cell/bf-3.12-h200attquiet-normal.json}
  timeout "${BENCH_S:-540}" python3 bench/ep_census.py --what nodes "$QUIET_RESULT" --repeat "${REPEAT:-8}" \
    ${PREVIOUS:+--previous "$PREVIOUS"} --out "$OUT/node-census-bench-quiet.json" 2>&1 | tee "$OUT/step-q.log"
fi
if [ "$STEP" = E ]; then
{
  echo "## E. ORT's nested control-flow test (onnxruntime_test_python_nested_control_flow_op.py) through the harness"
  MATRIX_TOML=$NTM MATRIX_RESULTS=/root/nt-nested timeout 300 python3 -m nox -s sweep -- --select nt-3.12-h200nested --confirm 0
  echo "exit $?"
  cp /root/nt-nested/nt-3.12-h200nested-normal.json "$OUT/" 2>/dev/null
  echo "## the bare recipe in the same venv, the same libraries preloaded"
  VENV=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['venv']['path'])" /root/nt-nested/nt-3.12-h200nested-normal.json)
  (cd .ort-src/onnxruntime/test/python && LD_PRELOAD=/usr/local/cuda-13.0/lib64/libcudart.so.13:/usr/lib/x86_64-linux-gnu/libcudnn.so.9 \
    timeout 100 "$VENV/bin/python" -m pytest -p no:cacheprovider -rA onnxruntime_test_python_nested_control_flow_op.py 2>&1 | tail -6)
} 2>&1 | tee "$OUT/step-e.log"
fi
ls -la "$OUT"

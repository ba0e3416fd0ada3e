#!/usr/bin/env bash
# Subtests on the nvidia-h200 device (issue 46). Two calls of one lease, STEP=A then STEP=B:
#   A. docs/evidence/subtests/matrix.toml, ORT's subTest-based CUDA op tests (ScatterND, float8 casts,
#      MatMulNBits prepacked): calibrate the working CUDA 13 cell, run it again (green), the bare recipe beside it
#      per subtest; the same suite with the GPU hidden by the suite's env (CUDA_VISIBLE_DEVICES = ""), beside the
#      bare recipe with CUDA_VISIBLE_DEVICES= ; ORT's CUDA 12 build 1.23.2 on the CUDA 13 image with nothing
#      pinned (broken); then the report of the three.
#   B. no false red on the shipped cells: the engine before issue 46 (.old-main, `git archive ad2f7d1`) sweeps
#      gpu-3.12-h200, gpu-3.12-unpinned, gpu-3.12-h200pip and gpu-3.12-h200cuda and saves a baseline; this
#      engine sweeps them again against it under --gate regressions.
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.31.1 onnxruntime-gpu==1.23.2 nvidia-cudnn-cu13==9.12.0.46 \
#     onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools setuptools \
#     einops rich coloredlogs
#   (nvidia-cudnn-cu13 serves step B's gpu-3.12-h200pip only)
# and onnx 1.18.0 in .whl/ (git-ignored): pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux_2_17_x86_64 -d .whl onnx==1.18.0
# ORT's test files in .ort-src/ (git-ignored; carry ".ort-src"), the old engine in .old-main/ (carry it for B):
#   mkdir -p .old-main && git archive ad2f7d1 ort_gpu_matrix ort_matrix_probe sessions suites noxfile.py \
#     matrix.toml matrix.schema.json expect | tar -x -C .old-main
# Run: STEP=A OUT=... bash docs/evidence/run-subtests-h200.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}" "${STEP:?set STEP to A or B}"
[ -d .whl ] && cp .whl/*.whl /root/wheelhouse/  # onnx 1.18.0 for 1.23.2 (pip stages one onnx a call; carry .whl)
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs
export PYTHONUNBUFFERED=1
STM=docs/evidence/subtests/matrix.toml
RES=/root/st-results
mkdir -p "$OUT"
cell() {  # cell NAME [nox args...]: one cell session, its table and its reasons, cut for the page
  local name=$1; shift
  local t0=$SECONDS
  MATRIX_TOML=$STM MATRIX_RESULTS=$RES timeout 280 python3 -m nox -s "$name" "$@" > "$OUT/nox-$name.log" 2>&1
  echo "nox -s $name exit: $? in $((SECONDS - t0)) s"
  sed -n '/^cell /,/^verdict /p' "$OUT/nox-$name.log" | cut -c1-400 | head -40
}
if [ "$STEP" = A ]; then
rm -rf "$RES" docs/evidence/subtests/expect
{
  echo "## A1. calibrate the working cell (st-3.12-h200: ORT 1.31.1, the system CUDA 13.0 and cuDNN 9.14 pinned)"
  t0=$SECONDS
  MATRIX_TOML=$STM MATRIX_RESULTS=$RES timeout 280 python3 -m nox -s calibrate -- st-3.12-h200 > "$OUT/calibrate.log" 2>&1
  echo "nox -s calibrate exit: $? in $((SECONDS - t0)) s"
  grep -E "^(PASS|FAIL) |reason:|wrote |refused|not written" "$OUT/calibrate.log" | cut -c1-600
  mkdir -p "$OUT/expect" && cp docs/evidence/subtests/expect/ops.toml "$OUT/expect/" 2>/dev/null
  echo "## A2. the working cell again, judged by what calibrate wrote"
  cell st-3.12-h200
  echo "## A3. the bare recipe beside it, per test and per subtest (same venv, same pinned libraries)"
  timeout 200 python3 docs/evidence/subtests/bare.py $RES/st-3.12-h200-normal.json "$OUT/bare-h200.log"
  echo "## A4. the GPU hidden by the suite's env (CUDA_VISIBLE_DEVICES = \"\"), beside the bare recipe with CUDA_VISIBLE_DEVICES="
  cell st-3.12-hidden
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('result env CUDA_VISIBLE_DEVICES:', repr(r['env'].get('CUDA_VISIBLE_DEVICES')), '| gpu:', r['gpu'])" $RES/st-3.12-hidden-normal.json
  timeout 200 python3 docs/evidence/subtests/bare.py $RES/st-3.12-hidden-normal.json "$OUT/bare-hidden.log" CUDA_VISIBLE_DEVICES=
  echo "## A5. ORT's CUDA 12 build (1.23.2) on the CUDA 13 image, nothing pinned"
  cell st-3.12-unpinned
  timeout 200 python3 docs/evidence/subtests/bare.py $RES/st-3.12-unpinned-normal.json "$OUT/bare-unpinned.log"
  echo "## A6. the report of the three"
  MATRIX_TOML=$STM timeout 100 python3 -m nox -s report -- $RES --out "$OUT/report" > "$OUT/report.txt" 2>&1
  echo "nox -s report exit: $?"
  sed -n '/^Fallbacks/,/^$/p' "$OUT/report.txt" | cut -c1-300 | head -30
} 2>&1 | tee "$OUT/step-a.log"
tar -C "$RES" --exclude='pytest.log' -czf "$OUT/results-a.tar.gz" . 2>/dev/null
fi
if [ "$STEP" = B ]; then
SHIPPED=${SHIPPED:-/root/shipped-results}
BASE=${BASE:-/root/shipped-baselines}
CELLS=${CELLS:-gpu-3.12-h200 gpu-3.12-unpinned gpu-3.12-h200pip gpu-3.12-h200cuda}
{
  echo "## B1. the engine before issue 46 (ad2f7d1) sweeps the shipped working cells and saves a baseline"
  t0=$SECONDS
  (cd .old-main && MATRIX_RESULTS=$SHIPPED/before MATRIX_BASELINES=$BASE timeout 280 python3 -m nox -s sweep -- \
    --select $CELLS --save-baseline pre46 --confirm 0) > "$OUT/sweep-before.log" 2>&1
  echo "sweep (ad2f7d1) exit: $? in $((SECONDS - t0)) s"; grep -E "^(PASS|FAIL) |sweep (OK|FAILED)|baseline" "$OUT/sweep-before.log" | cut -c1-300
  echo "## B2. this engine sweeps them again against it, --gate regressions (expected: exit 0, no regression)"
  t0=$SECONDS
  MATRIX_RESULTS=$SHIPPED/after MATRIX_BASELINES=$BASE timeout 280 python3 -m nox -s sweep -- --select $CELLS \
    --baseline pre46 --gate regressions > "$OUT/sweep-after.log" 2>&1
  echo "sweep (this engine) exit: $? in $((SECONDS - t0)) s"
  grep -E "^(PASS|FAIL) |Regressions|regression|sweep (OK|FAILED)|gate" "$OUT/sweep-after.log" | cut -c1-300 | head -30
  cp "$BASE/pre46.json" "$OUT/baseline-pre46.json"
} 2>&1 | tee "$OUT/step-b.log"
tar -C "$SHIPPED" --exclude='pytest.log' -czf "$OUT/results-b.tar.gz" . 2>/dev/null
fi
ls -la "$OUT"

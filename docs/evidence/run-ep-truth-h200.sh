#!/usr/bin/env bash
# EP truth on the nvidia-h200 device (issue 32). Two calls of one lease, STEP=A then STEP=B:
#   A. docs/evidence/ep-truth/matrix.toml: ORT's CUDA 12 build (onnxruntime-gpu 1.23.2) beside the image's CUDA 13
#      torch, unpinned and with NVIDIA's cu12 runtime and cuDNN wheels pinned (no cuBLAS 12), on ORT's MoE,
#      float8 and ScatterND CUDA tests and on the attention suite; the same ops tests on the working cu13 cell
#      (1.31.1, the system CUDA 13.0 and cuDNN 9.14 pinned). Then the report, and the bare recipe (pytest by
#      hand in the same venvs, no harness) on the broken and the working cell.
#   B. no false red: the shipped matrix's working cells (gpu-3.12-h200, gpu-3.12-unpinned, gpu-3.12-h200pip)
#      swept, saved as a baseline, swept again under --gate regressions; then bench/ep_census.py (the census
#      on and off, alternating) on two stored runs of step A and B.
#   C. the census's cost alone: the working cu13 cell of step A run once, then bench/ep_census.py on it (REPEAT
#      times each way, default 2; BENCH_S its time limit); needs only onnxruntime-gpu==1.31.1 and the small wheels
#      staged. Again in the same lease with PREVIOUS=/root/ep-census-bench.json: more pairs, one summary.
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.23.2 onnxruntime-gpu==1.31.1 nvidia-cudnn-cu13==9.12.0.46 \
#     nvidia-cudnn-cu12==9.10.2.21 nvidia-cuda-runtime-cu12==12.9.79 onnx==1.18.0 onnx==1.20.1 parameterized \
#     pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools setuptools einops rich
# and ORT's test files in .ort-src/ (git-ignored; carry ".ort-src"): docs/evidence/ep-truth-h200.md lists them.
# Run: STEP=A OUT=... bash docs/evidence/run-ep-truth-h200.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}" "${STEP:?set STEP to A or B}"
[ -d .whl ] && cp .whl/*.whl /root/wheelhouse/  # onnxruntime-gpu 1.23.2's coloredlogs and humanfriendly (carry .whl)
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs
export PYTHONUNBUFFERED=1
EPM=docs/evidence/ep-truth/matrix.toml
RES=/root/ep-results
mkdir -p "$OUT"
bare() {  # bare CELL_RESULT_JSON LABEL: pytest by hand in the cell's venv, its files, no harness, nothing pinned
  timeout 200 python3 - "$1" "$2" "$OUT" <<'PY'
import json, os, re, subprocess, sys, time
result, label, out = sys.argv[1:]
r = json.load(open(result))
root = os.path.join(os.environ["ORT_SOURCE"], "onnxruntime/test/python")
py = os.path.join(r["venv"]["path"], "bin", "python")
files = ["transformers/test_moe_cuda.py", "onnxruntime_test_float8.py"]
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH")}
env.update({k: r["env"][k] for k in ("LD_PRELOAD", "LD_LIBRARY_PATH") if r["env"].get(k)},
           PYTHONPATH="transformers:.", ORT_TEST_CUDA_PLUGIN_EP="0")
start = time.monotonic()
p = subprocess.run([py, "-m", "pytest", "-n", "8", "-p", "no:cacheprovider", "-rfE", *files], cwd=root, env=env,
                   capture_output=True, text=True)
took = time.monotonic() - start
open(os.path.join(out, f"bare-{label}.log"), "w").write(p.stdout + p.stderr)
tail = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "(no output)"
loads = len(re.findall(r"Failed to load library", p.stdout + p.stderr))
print(f"bare {label}: pytest exit {p.returncode} in {took:.1f} s: {tail}; 'Failed to load library' lines: {loads}")
print(f"harness {label}: {r['counts']} in {r['duration_s']} s, verdict {r['verdict']}")
PY
}
if [ "$STEP" = A ]; then
rm -rf "$RES"
{
  echo "## A1. the four cells of $EPM (normal)"
  for cell in ep-3.12-unpinned-ort123-img-ops ep-3.12-pip12 ep-3.12-unpinned-ort123-img-attention ep-3.12-h200; do
    t0=$SECONDS
    MATRIX_TOML=$EPM MATRIX_RESULTS=$RES timeout 200 python3 -m nox -s $cell > "$OUT/nox-$cell.log" 2>&1
    echo "nox -s $cell exit: $? in $((SECONDS - t0)) s"
    grep -E "^(normal|mode) |verdict|asked for the CUDA EP|hollow|cuda_runs" "$OUT/nox-$cell.log" | cut -c1-400
  done
  echo "## A2. the report of those runs"
  MATRIX_TOML=$EPM python3 -m nox -s report -- $RES --out "$OUT/report" > "$OUT/report.txt" 2>&1
  echo "nox -s report exit: $?"
  sed -n '/^tiers by test function/,/^$/p;/^Fallbacks/,/^$/p' "$OUT/report.txt" | cut -c1-300
  echo "## A3. the bare recipe: pytest by hand in the same venvs (no harness)"
  bare $RES/ep-3.12-unpinned-ort123-img-ops-normal.json broken-unpinned
  bare $RES/ep-3.12-pip12-normal.json broken-pip12
  bare $RES/ep-3.12-h200-normal.json working-cu13
} 2>&1 | tee "$OUT/step-a.log"
tar -C "$RES" --exclude='pytest.log' -czf "$OUT/results-a.tar.gz" . 2>/dev/null
fi
if [ "$STEP" = B ]; then
SHIPPED=/root/shipped-results
BASE=/root/shipped-baselines
{
  echo "## B1. the shipped working cells: a sweep saved as a baseline"
  t0=$SECONDS
  MATRIX_RESULTS=$SHIPPED/first MATRIX_BASELINES=$BASE timeout 240 python3 -m nox -s sweep -- --select gpu-3.12-h200 \
    gpu-3.12-unpinned gpu-3.12-h200pip --save-baseline ep1 --confirm 0 > "$OUT/sweep-first.log" 2>&1
  echo "first sweep exit: $? in $((SECONDS - t0)) s"; tail -3 "$OUT/sweep-first.log"
  echo "## B2. swept again against it, --gate regressions (expected: exit 0, no regression)"
  t0=$SECONDS
  MATRIX_RESULTS=$SHIPPED/second MATRIX_BASELINES=$BASE timeout 240 python3 -m nox -s sweep -- --select gpu-3.12-h200 \
    gpu-3.12-unpinned gpu-3.12-h200pip --baseline ep1 --gate regressions > "$OUT/sweep-second.log" 2>&1
  echo "second sweep exit: $? in $((SECONDS - t0)) s"
  grep -E "^(PASS|FAIL) |Regressions|Fallbacks|hollow|sweep (OK|FAILED)" "$OUT/sweep-second.log" | cut -c1-300
  cp "$BASE/ep1.json" "$OUT/baseline-ep1.json"
  echo "## B3. the census on and off (bench/ep_census.py)"
  timeout 200 python3 bench/ep_census.py $SHIPPED/second/gpu-3.12-h200pip-normal.json $RES/ep-3.12-h200-normal.json \
    --repeat 3 --out "$OUT/ep-census-bench.json"
} 2>&1 | tee "$OUT/step-b.log"
tar -C "$SHIPPED" --exclude='pytest.log' -czf "$OUT/results-b.tar.gz" . 2>/dev/null
fi
if [ "$STEP" = C ]; then
{
  echo "## C. the census on and off on the working cu13 cell (bench/ep_census.py)"
  if [ ! -f $RES/ep-3.12-h200-normal.json ]; then  # a later call of the same lease reuses the cell's venv and result
    MATRIX_TOML=$EPM MATRIX_RESULTS=$RES timeout 150 python3 -m nox -s ep-3.12-h200 > "$OUT/nox-c.log" 2>&1
    echo "nox -s ep-3.12-h200 exit: $?"; grep -E "^normal " "$OUT/nox-c.log" | cut -c1-200
  fi
  # PREVIOUS: an earlier call's bench json (carried back in the repo copy): its pairs are added to this call's
  timeout "${BENCH_S:-300}" python3 bench/ep_census.py $RES/ep-3.12-h200-normal.json --repeat "${REPEAT:-2}" \
    ${PREVIOUS:+--previous "$PREVIOUS"} --out "$OUT/ep-census-bench.json"
  cp "$OUT/ep-census-bench.json" /root/ep-census-bench.json 2>/dev/null  # for the next call of the lease
} 2>&1 | tee "$OUT/step-c.log"
fi
ls -la "$OUT"

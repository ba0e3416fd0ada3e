#!/usr/bin/env bash
# Below the floor on the nvidia-h200 device machine (issue 49). Calls of one lease, STEP=A, B, C, D:
#   A. ORT's attention suite (below-floor/matrix.toml, cell bf-3.12-h200att: 198 tests, three modes): one cell run
#      (the census and the runs on record), then bench/below_floor.py: the cell against one bare require run of the
#      seed recipe, 5 alternating pairs, wall and CPU time, the --full cell beside them, the outcomes compared.
#   P. where a bare run's time goes (bench/fixed_costs.py: imports, collection, xdist's empty start at -n 2/4/8,
#      every test serially and at -n 8, with JUnit files), after one warm-up cell run and one --full run, whose
#      results' JSON files (each mode's tests, tiers and selection) come back as results-*.tgz.
#   S. how much of a run's CPU time is idle threads spinning: bench/fixed_costs.py's -n 8 run (the bare run) as it
#      is, with OMP_WAIT_POLICY=PASSIVE, with every ORT session's spinning off (--spin-off), with both, and with
#      OMP_NUM_THREADS=1 (one torch thread a process: measured, not a setting a cell may choose unasked).
#   R. the census's cut: bf-3.12-h200att run twice in a fresh results dir; each mode's counts and selection.
#   AQ. the same bench on bf-3.12-h200attquiet (quiet_threads: idle threads sleep in every mode), against the same
#      bare run a user makes (threads as ORT and OpenMP leave them).
#   A2. the same bench, 3 pairs, on bf-3.12-h200atttier: teeth over its tier only (teeth_scope "cudnn"), the cost
#      of the narrower teeth beside the default one, which keeps every test of any fast tier.
#   B. a suite at least 5x larger (below-floor/matrix.toml, cell bf-3.12-h200big: test_flash_attn_cuda.py cut by -k
#      to about 1,000 tests), the same bench a pair a call, since one pair may not fit a call's 10 minutes: first
#      STEP=B BIG_REPEAT=0 (the untimed warm-up only), then STEP=B PAIR=1, PAIR=2, ... in the same lease.
#   C. the gate: the 1.30.0 baseline swept (calibrated expectations), 1.31.1 against it under --gate regressions
#      (expected exit 0), then 1.31.1 with MATH forced (expected red, every regression confirmed).
#   D. a 2-cell sweep's cost: bf-3.12-h200attquiet (1.31.1) and bf-3.12-h200attquiet130 (1.30.0), quiet threads as
#      shipped, as one sweep (nox -s sweep -- --select both: on a GPU host its mode runs overlap, --gpus all unasked)
#      against the two cells' bare require runs one after another, and the same sweep with --gpus none (its mode
#      runs one after another, as every sweep without --gpus ran before; FULL=1: with --full instead), REPEAT
#      alternating rounds (default 2) after one untimed warm-up each.
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.30.0 onnxruntime-gpu==1.31.1 onnx==1.20.1 parameterized pytest-xdist nox \
#     virtualenv filelock defusedxml jinja2 pyelftools setuptools einops rich
# and ORT's test files in .ort-src/ (git-ignored; carry ".ort-src"): docs/evidence/node-truth-h200.md lists them.
# Run: STEP=A OUT=... bash docs/evidence/run-below-floor-h200.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}" "${STEP:?set STEP to P, S, R, A, AQ, A2, B, C or D}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs
export PYTHONUNBUFFERED=1 BENCH_WORK=/root/bench-below-floor
BFM=docs/evidence/below-floor/matrix.toml
mkdir -p "$OUT"
if [ "$STEP" = A ]; then
  timeout 540 python3 bench/below_floor.py --matrix $BFM --cell bf-3.12-h200att --repeat "${REPEAT:-5}" \
    $([ "${FULL:-1}" = 1 ] && echo --full) \
    --out "$OUT/below-floor-att.json" 2>&1 | tee "$OUT/step-a.log"
  for m in normal require_cudnn teeth; do  # what the last timed cell ran, and why
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); s=r['selection']; print(sys.argv[2], r['verdict'],
r['duration_s'], 's', r['counts']['collected'], 'collected;', s.get('why','')[:300])" \
      "$BENCH_WORK/cell/bf-3.12-h200att-$m.json" $m
  done 2>&1 | tee -a "$OUT/step-a.log"
fi
if [ "$STEP" = P ]; then
  timeout 200 python3 bench/below_floor.py --matrix $BFM --cell bf-3.12-h200att --repeat 0 --full 2>&1 | tee "$OUT/step-p.log"
  timeout 300 python3 bench/fixed_costs.py --matrix $BFM --cell bf-3.12-h200att --out "$OUT/fixed" 2>&1 | tee -a "$OUT/step-p.log"
  for side in cell full; do
    (cd "$BENCH_WORK/$side" && find . -name "*.json" | tar -czf "$OUT/results-$side.tgz" -T -)
  done
fi
if [ "$STEP" = S ]; then
  for v in base omp spin both omp1; do
    extra=()
    case $v in omp) extra=(--env OMP_WAIT_POLICY=PASSIVE);; spin) extra=(--spin-off);;
      both) extra=(--env OMP_WAIT_POLICY=PASSIVE --spin-off);; omp1) extra=(--env OMP_NUM_THREADS=1);; esac
    echo "## $v"
    timeout 150 python3 bench/fixed_costs.py --matrix $BFM --cell bf-3.12-h200att --out "$OUT/spin" --steps full \
      --tag $v "${extra[@]}"
  done 2>&1 | tee "$OUT/step-s.log"
  (cd "$OUT/spin" && tar -czf ../spin.tgz . && cd .. && rm -rf spin)
fi
if [ "$STEP" = R ]; then
  for i in 1 2; do
    MATRIX_TOML=$BFM MATRIX_RESULTS=/root/bf-cut timeout 200 python3 -m nox -s bf-3.12-h200att > "$OUT/cut-$i.log" 2>&1
    echo "cell run $i: exit $?"
    for m in normal require_cudnn teeth; do
      python3 -c "import json,sys; r=json.load(open(sys.argv[1])); s=r['selection']; print(sys.argv[2], r['verdict'],
r['duration_s'], 's', r['counts']['collected'], 'collected;', s.get('why','')[:300])" /root/bf-cut/bf-3.12-h200att-$m.json $m
    done
  done 2>&1 | tee "$OUT/step-r.log"
fi
if [ "$STEP" = AQ ]; then
  BENCH_WORK=/root/bench-below-floor-quiet timeout 540 python3 bench/below_floor.py --matrix $BFM \
    --cell bf-3.12-h200attquiet --repeat "${REPEAT:-5}" --out "$OUT/below-floor-att-quiet.json" 2>&1 | tee "$OUT/step-aq.log"
fi
if [ "$STEP" = A2 ]; then
  BENCH_WORK=/root/bench-below-floor-tier timeout 540 python3 bench/below_floor.py --matrix $BFM \
    --cell bf-3.12-h200atttier --repeat "${REPEAT:-3}" --out "$OUT/below-floor-att-tier.json" 2>&1 | tee "$OUT/step-a2.log"
fi
if [ "$STEP" = B ]; then
  BENCH_WORK=/root/bench-below-floor-big timeout 570 python3 bench/below_floor.py --matrix $BFM --cell bf-3.12-h200big \
    --repeat "${BIG_REPEAT:-1}" --out "$OUT/below-floor-big-${PAIR:-1}.json" 2>&1 | tee "$OUT/step-b-${PAIR:-1}.log"
fi
if [ "$STEP" = C ]; then
  BASE=$OUT/baselines RES=/root/below-floor-gate
  {
    echo "## C1. baseline: onnxruntime-gpu 1.30.0 (nt-3.12-h200att130)"
    MATRIX_TOML=$BFM MATRIX_RESULTS=$RES/b MATRIX_BASELINES=$BASE timeout 180 python3 -m nox -s sweep -- \
      --select bf-3.12-h200att130 --save-baseline att130 --confirm 0 > "$OUT/gate-base.log" 2>&1
    echo "exit $?"; tail -3 "$OUT/gate-base.log"
    echo "## C2. 1.31.1 against it, --gate regressions (expected exit 0)"
    MATRIX_TOML=$BFM MATRIX_RESULTS=$RES/c MATRIX_BASELINES=$BASE timeout 180 python3 -m nox -s sweep -- \
      --select bf-3.12-h200att131 --baseline att130 --gate regressions > "$OUT/gate-131.log" 2>&1
    echo "exit $?"; grep -E "egression|carried|left out|sweep" "$OUT/gate-131.log" | cut -c1-300 | head -20
    echo "## C3. 1.31.1 with MATH forced (expected red, every regression confirmed)"
    MATRIX_TOML=$BFM MATRIX_RESULTS=$RES/m MATRIX_BASELINES=$BASE timeout 200 python3 -m nox -s sweep -- \
      --select bf-3.12-h200attmath --baseline att130 --gate regressions > "$OUT/gate-math.log" 2>&1
    echo "exit $?"; grep -E "egression|confirm|sweep" "$OUT/gate-math.log" | cut -c1-300 | head -20
  } 2>&1 | tee "$OUT/step-c.log"
fi
if [ "$STEP" = D ]; then
  BENCH_WORK=/root/bench-below-floor-2cell timeout 570 python3 bench/below_floor.py --matrix $BFM \
    --cell bf-3.12-h200attquiet --cell bf-3.12-h200attquiet130 --repeat "${REPEAT:-2}" \
    $([ "${FULL:-0}" = 1 ] && echo --full || echo --serial) \
    --out "$OUT/below-floor-2cell.json" 2>&1 | tee "$OUT/step-d.log"
fi
ls -la "$OUT"

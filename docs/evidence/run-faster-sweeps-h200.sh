#!/usr/bin/env bash
# Faster sweeps (issue 19) on the nvidia-h200-x2 device kind: mode scheduling across two GPUs, against one GPU
# and against the same pytest commands started by hand; teeth_scope = "cudnn" against "all"; and, the
# fallback on one GPU, --slots-per-gpu 2 against one slot. Matrix: docs/evidence/faster-sweeps/matrix.toml
# (ORT's tensorscatter attention tests, 4 cells, 9 mode runs, pytest -n 8).
#
# Stage, from the project root on your machine:
#   ../shared/device/stage onnxruntime-gpu==1.31.1 onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools
# and ORT's attention test files in a git-ignored folder, as shared/device/README.md says ("ORT's own tests on the
# device"), carried with every call: ORT_SOURCE names it, and it holds
#   onnxruntime/test/python/transformers/test_onnx_attention/test_tensorscatter_attention.py
#
# Then one device call per stage, back to back on kind nvidia-h200-x2 (each stays under 10 minutes; state lives in
# /root/faster-sweeps while the machine stays warm, and each call returns its own logs and summary in $OUT):
#   run(command="bash .device-stage/bin/unstage.sh check && ORT_SOURCE=$PWD/ORT_DIR bash docs/evidence/run-faster-sweeps-h200.sh STAGE",
#       carry=[".device-stage/bin", "ORT_DIR"], kind="nvidia-h200-x2")
# with STAGE, in this order:
#   warm    build the venv; a sweep --gpus 0,1 that records each mode run's duration (the plan reads them)  ~3 min
#   ab      --gpus 0,1 then --gpus 0 (run it twice: A B A B)                                               ~3 min each
#   anchor  the first --gpus 0,1 sweep's pytest commands by hand, one queue per slot, twice                 ~3 min
#   scope   require_cudnn + teeth of one cell, teeth_scope all then cudnn, twice (A B A B)                   ~2 min
#   slots   on GPU 0 alone: --slots-per-gpu 2 then 1 slot (A B)                                              ~3 min
# Every stage ends with $OUT/summary.md: everything measured so far (docs/evidence/faster-sweeps/summary.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}"
: "${ORT_SOURCE:?set ORT_SOURCE to the staged ORT test tree (see the header)}"
STAGE=${1:?give a stage: warm, ab, anchor, scope or slots}
TS=$ORT_SOURCE/onnxruntime/test/python/transformers/test_onnx_attention/test_tensorscatter_attention.py
[ -f "$TS" ] || { echo "missing $TS: carry the staged ORT test files and point ORT_SOURCE at them"; exit 2; }
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools \
  || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs PYTHONUNBUFFERED=1 ORT_SOURCE
EV=docs/evidence/faster-sweeps
export MATRIX_TOML=$EV/matrix.toml
ST=/root/faster-sweeps; mkdir -p "$ST"; touch "$ST/walls.tsv"
timed() {  # timed NAME RESULTS CMD...: CMD with MATRIX_RESULTS=RESULTS, seeded with the warm-up's results (the plan
           # reads each run's last duration there); "NAME seconds exit RESULTS" goes to walls.tsv
  local name=$1 res=$2; shift 2
  local t0 t1 rc; rm -rf "$res"; [ -d "$ST/history" ] && cp -a "$ST/history" "$res"
  echo "$res" >> "$ST/made-$STAGE"
  t0=$(date +%s.%N); MATRIX_RESULTS=$res "$@"; rc=$?; t1=$(date +%s.%N)
  printf '%s\t%s\t%s\t%s\n' "$name" "$(awk "BEGIN{print $t1 - $t0}")" "$rc" "$res" >> "$ST/walls.tsv"
  echo "== $name: exit $rc, $(awk "BEGIN{print $t1 - $t0}") s"
}
n() { echo $(( $(grep -c "^$1 #" "$ST/walls.tsv") + 1 )); }  # the next number of a run of that name
nox_sweep() { python3 -m nox -s sweep -- "$@"; }
rm -f "$ST/made-$STAGE"
{
  echo "## stage $STAGE, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi -L
  case "$STAGE" in
    warm)
      rm -rf "$ST/warm" "$ST/history"; echo "$ST/warm" >> "$ST/made-$STAGE"
      MATRIX_RESULTS=$ST/warm nox_sweep --gpus 0,1 --out "$OUT/warm"; echo "nox exit: $?"
      cp -a "$ST/warm" "$ST/history" ;;
    ab)
      k=$(n two)
      timed "two #$k" "$ST/two$k" nox_sweep --gpus 0,1 --out "$OUT/two$k"
      timed "one #$k" "$ST/one$k" nox_sweep --gpus 0 --out "$OUT/one$k" ;;
    anchor)
      for _ in 1 2; do
        k=$(n anchor); t0=$(date +%s.%N)
        python3 $EV/anchor.py "$ST/two1" --out "$ST/anchor$k.json"; rc=$?; t1=$(date +%s.%N)
        printf '%s\t%s\t%s\t%s\n' "anchor #$k" "$(awk "BEGIN{print $t1 - $t0}")" "$rc" "$ST/two1" >> "$ST/walls.tsv"
        cp "$ST/anchor$k.json" "$OUT/"
      done ;;
    scope)
      sed 's/^teeth_scope = "all"$/teeth_scope = "cudnn"/' $EV/matrix.toml > $EV/matrix-cudnn.toml
      grep -q '^teeth_scope = "cudnn"$' $EV/matrix-cudnn.toml || { echo "matrix.toml no longer sets teeth_scope"; exit 2; }
      cell=gpu-3.12-cu130
      for _ in 1 2; do
        for scope in all cudnn; do
          k=$(n "scope $scope"); toml=$EV/matrix.toml; [ $scope = cudnn ] && toml=$EV/matrix-cudnn.toml
          MATRIX_TOML=$toml timed "scope $scope #$k" "$ST/scope-$scope$k" \
            nox_sweep --gpus 0 --select $cell-require_cudnn $cell-teeth --out "$OUT/scope-$scope$k"
        done
      done ;;
    slots)
      k=$(n slots2)
      timed "slots2 #$k" "$ST/slots2-$k" nox_sweep --gpus 0 --slots-per-gpu 2 --out "$OUT/slots2-$k"
      timed "slot1 #$k" "$ST/slot1-$k" nox_sweep --gpus 0 --out "$OUT/slot1-$k" ;;
    *) echo "unknown stage $STAGE"; exit 2 ;;
  esac
} 2>&1 | tee "$OUT/$STAGE.log"
cp "$ST/walls.tsv" "$OUT/"
python3 $EV/summary.py "$ST" > "$OUT/summary.md" 2>&1; cat "$OUT/summary.md"
# this stage's results, timelines and per-run logs in one file (the device returns few files); no probe reports
[ -f "$ST/made-$STAGE" ] && tar -czf "$OUT/$STAGE.tar.gz" --exclude='*/runs/*/report.json' $(sort -u "$ST/made-$STAGE")

#!/usr/bin/env bash
# Issue 35 on the nvidia-h200 device: `nox -s bisect` over real onnxruntime-gpu releases, in the cell of ORT's
# newest attention tests (gpu-3.12-h200pip, normal mode), following what a sweep against a baseline found.
#   PART=A  baseline 1.30.0, a sweep of 1.31.1 against it (the TestAttentionPresentKVCopySkip tests are its
#           improvements), then `bisect --improvement --between 1.30.0 1.31.1`: which release fixed them
#   PART=B  baseline 1.27.0, a sweep of 1.30.0 against it, then `bisect --between 1.27.0 1.30.0` on its
#           regressions and `bisect --improvement --between 1.27.0 1.30.0` on its improvements
# Each part is one call (under the device's 600 s). Needs /root/wheelhouse from
#   ../shared/device/stage onnxruntime-gpu==1.27.0 onnxruntime-gpu==1.28.0 onnxruntime-gpu==1.29.0 \
#       onnxruntime-gpu==1.30.0 onnxruntime-gpu==1.31.0 onnxruntime-gpu==1.31.1 nvidia-cudnn-cu13==9.12.0.46 \
#       onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools setuptools einops rich
# and ORT's test files in .ort-src/ (git-ignored, carried; docs/evidence/ort-src.md says which).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and results}"
: "${PART:?set PART to A or B}"
case $PART in A|B) ;; *) echo "PART must be A or B" >&2; exit 2 ;; esac
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/bis/venvs
export MATRIX_BASELINES=/root/bis/baselines PYTHONUNBUFFERED=1
R=/root/bis; mkdir -p "$R" "$OUT"
CELL=gpu-3.12-h200pip
variant() {  # variant VERSION: the shipped matrix with the attention cell's ORT (the first 1.31.1) at VERSION
  python3 - "matrix-$1.toml" "$1" <<'PY'
import re, sys
out, version = sys.argv[1:]
text, n = re.subn(r'onnxruntime-gpu==1\.31\.1', f'onnxruntime-gpu=={version}', open("matrix.toml").read(), count=1)
assert n == 1, "matrix.toml no longer names onnxruntime-gpu==1.31.1"
open(out, "w").write(text)
PY
}
timed() {  # timed LABEL CMD...: run, say its exit status and seconds
  local label=$1; shift; local t0=$SECONDS
  "$@"; local rc=$?
  echo "$label exit: $rc in $((SECONDS - t0)) s"
}
if [ "$PART" = A ]; then GOOD=1.30.0 BAD=1.31.1 BASELINE=ort-1.30.0; else GOOD=1.27.0 BAD=1.30.0 BASELINE=ort-1.27.0; fi
variant "$GOOD"; variant "$BAD"
RES=$R/res-$PART
rm -rf "$RES" "$MATRIX_BASELINES/$BASELINE.json"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  ls /root/wheelhouse | grep -E '^onnxruntime_gpu-' | sort -V
  echo "## 1. baseline: onnxruntime-gpu $GOOD, $CELL normal"
  MATRIX_TOML=matrix-$GOOD.toml MATRIX_RESULTS=$RES timed "sweep $GOOD" timeout 200 python3 -m nox -s sweep -- \
    --select $CELL-normal --save-baseline $BASELINE --out "$OUT/sweep-$GOOD" > "$OUT/sweep-$GOOD.log" 2>&1
  tail -n 12 "$OUT/sweep-$GOOD.log"
  echo "## 2. onnxruntime-gpu $BAD against it"
  MATRIX_TOML=matrix-$BAD.toml MATRIX_RESULTS=$RES timed "sweep $BAD" timeout 200 python3 -m nox -s sweep -- \
    --select $CELL-normal --baseline $BASELINE --gate regressions --out "$OUT/sweep-$BAD" > "$OUT/sweep-$BAD.log" 2>&1
  sed -n '/^Regressions\|^Improvements\|^What changed/,/^Fallbacks/p' "$OUT/sweep-$BAD.log" | head -60
  cp "$RES/sweep.json" "$OUT/sweep-$BAD/" 2>/dev/null
  python3 - "$RES/sweep.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for what in ("regressions", "improvements"):
    kinds = {}
    for c in s.get(what) or []:
        kinds[c.get("kind")] = kinds.get(c.get("kind"), 0) + 1
    print(f"sweep.json {what}: {kinds}")
PY
  case $PART in A) HOW=--improvement ;; *) HOW="none --improvement" ;; esac
  for how in $HOW; do
    [ "$how" = none ] && how=""
    echo "## 3. bisect ${how:-(regressions)} --between $GOOD $BAD"
    MATRIX_TOML=matrix-$BAD.toml MATRIX_RESULTS=$RES timed "bisect $how" timeout 240 python3 -m nox -s bisect -- \
      $how --between "$GOOD" "$BAD" --out "$OUT/bisect${how:+-improvements}" > "$OUT/bisect${how:+-improvements}.log" 2>&1
    grep -v "^nox > \(Running\|Session\)" "$OUT/bisect${how:+-improvements}.log" | tail -n 40
  done
} 2>&1 | tee "$OUT/part-$PART.log"
cp -r "$RES/bisect" "$OUT/records" 2>/dev/null
tar -C "$R" -czf "$OUT/results-$PART.tar.gz" "$(basename "$RES")" 2>/dev/null
exit 0

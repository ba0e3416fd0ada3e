#!/usr/bin/env bash
# ORT's own attention tests on the nvidia-h200 device: calibrate on 1.30.0, a sweep that saves the
# 1.30.0 baseline with the calibrated expectations, the 1.31.1 sweep gated on regressions, and 1.31.1
# with MATH forced (it must fail, with the tier regressions grouped).
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.30.0 onnxruntime-gpu==1.31.1 nvidia-cudnn-cu13==9.12.0.46 onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools setuptools einops
# and ORT's attention test files in .ort-src/ (git-ignored, carried): see docs/evidence/ort-attention-h200.md.
# STEP=1 runs calibrate and the baseline sweep, STEP=2 the two 1.31.1 sweeps (each fits one device call).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}"
: "${STEP:?set STEP to 1 or 2}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs
export MATRIX_BASELINES=/root/ort-attention-baselines PYTHONUNBUFFERED=1
EV=docs/evidence/ort-attention
RES=/root/ort-attention-results
variant() {  # variant OUT REGEX REPLACEMENT: the evidence matrix with one edit, beside it
  python3 - "$1" "$2" "$3" <<'PY'
import re, sys
out, pattern, new = sys.argv[1:]
text, n = re.subn(pattern, new, open("docs/evidence/ort-attention/matrix.toml").read(), count=1, flags=re.S)
assert n == 1, f"no longer matches {pattern!r}"
open(out, "w").write(text)
PY
}
EXPECT='[suite.ort_attention]\nexpect_file = "expect/ort_attention.toml"\n'
if [ "$STEP" = 1 ]; then
  rm -rf "$RES" "$MATRIX_BASELINES" $EV/expect
  variant $EV/m130.toml '\[suite\.ort_attention\]\n' "$EXPECT"
  {
    echo "## 1. calibrate: onnxruntime-gpu 1.30.0, both cells, all modes"
    MATRIX_TOML=$EV/m130.toml MATRIX_RESULTS=$RES/calibrate python3 -m nox -s calibrate
    echo "nox -s calibrate exit: $?"
    echo "## 2. the baseline: 1.30.0 with the calibrated expectations"
    MATRIX_TOML=$EV/m130.toml MATRIX_RESULTS=$RES/ort130 python3 -m nox -s sweep -- --save-baseline ort-1.30.0 --out $OUT/ort130
    echo "nox -s sweep exit: $?"
  } 2>&1 | tee "$OUT/step1.log"
  mkdir -p "$OUT/expect" "$OUT/baselines"; cp $EV/expect/ort_attention.toml "$OUT/expect/"; cp "$MATRIX_BASELINES"/*.json "$OUT/baselines/"
  cp "$RES/ort130/sweep.json" "$OUT/ort130/"
  tar -C "$RES" -czf "$OUT/results-step1.tar.gz" . 2>/dev/null
else
  variant $EV/m131.toml 'onnxruntime-gpu==1\.30\.0' 'onnxruntime-gpu==1.31.1'
  python3 - <<'PY'
import re
p = "docs/evidence/ort-attention/m131.toml"
t = open(p).read()
t = t.replace('[suite.ort_attention]\n', '[suite.ort_attention]\nexpect_file = "expect/ort_attention.toml"\n', 1)
open(p, "w").write(t)
open(p.replace("m131", "m131math"), "w").write(t.replace('[suite.ort_attention]\n', '[suite.ort_attention]\nprovider_options = { sdpa_kernel = "16" }\n', 1))
PY
  {
    echo "## 3. candidate: 1.31.1, same cell names, gated on regressions against the 1.30.0 baseline"
    MATRIX_TOML=$EV/m131.toml MATRIX_RESULTS=$RES/ort131 python3 -m nox -s sweep -- --baseline ort-1.30.0 --gate regressions --out $OUT/ort131
    echo "nox -s sweep exit: $?"
    echo "## 4. detection: 1.31.1 with MATH forced (sdpa_kernel=16), gated on regressions"
    MATRIX_TOML=$EV/m131math.toml MATRIX_RESULTS=$RES/math python3 -m nox -s sweep -- --baseline ort-1.30.0 --gate regressions --out $OUT/math
    echo "nox -s sweep exit: $? (expected 1)"
  } 2>&1 | tee "$OUT/step2.log"
  for d in ort131 math; do cp "$RES/$d/sweep.json" "$OUT/$d/"; done
  tar -C "$RES" --exclude='*/runs/*' -czf "$OUT/results-step2.tar.gz" ort131 math 2>/dev/null
fi
rm -f $EV/m130.toml $EV/m131.toml $EV/m131math.toml

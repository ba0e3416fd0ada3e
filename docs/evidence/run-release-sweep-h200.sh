#!/usr/bin/env bash
# A real release sweep on the nvidia-h200 device machine: onnxruntime-gpu 1.30.0 as the baseline, 1.31.1 as the
# candidate with the same cell names, then the candidate with MATH forced (the regressions must be found).
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.30.0 onnxruntime-gpu==1.31.1 onnx==1.20.1 pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs MATRIX_BASELINES=$OUT/baselines
export PYTHONUNBUFFERED=1
RES=/root/sweep-results; rm -rf "$RES"
variant() {  # variant NAME REGEX REPLACEMENT: the shipped matrix with one edit, beside it
  python3 - "matrix-$1.toml" "$2" "$3" <<'PY'
import re, sys
out, pattern, new = sys.argv[1:]
text, n = re.subn(pattern, new, open("matrix.toml").read(), count=1, flags=re.S)
assert n == 1, f"matrix.toml no longer matches {pattern!r}"
open(out, "w").write(text)
PY
}
variant ort130 'onnxruntime-gpu==1\.31\.1' 'onnxruntime-gpu==1.30.0'
variant forced-math '\[suite\.dispatch\]\n' '[suite.dispatch]\nprovider_options = { sdpa_kernel = "16" }\n'
{
  echo "## 1. baseline: onnxruntime-gpu 1.30.0"
  MATRIX_TOML=matrix-ort130.toml MATRIX_RESULTS=$RES/ort130 python3 -m nox -s sweep -- --save-baseline ort-1.30.0 --out $OUT/ort130
  echo "nox exit: $?"
  echo "## 2. candidate: onnxruntime-gpu 1.31.1, same cell names, against the 1.30.0 baseline"
  MATRIX_RESULTS=$RES/ort131 python3 -m nox -s sweep -- --baseline ort-1.30.0 --out $OUT/ort131
  echo "nox exit: $?"
  echo "## 3. detection: 1.31.1 with MATH forced (sdpa_kernel=16), against the 1.30.0 baseline"
  MATRIX_TOML=matrix-forced-math.toml MATRIX_RESULTS=$RES/math python3 -m nox -s sweep -- --baseline ort-1.30.0 --out $OUT/math
  echo "nox exit: $? (expected non-zero)"
} 2>&1 | tee "$OUT/release-sweep.log"
for d in ort130 ort131 math; do cp "$RES/$d/sweep.json" "$OUT/$d/"; done

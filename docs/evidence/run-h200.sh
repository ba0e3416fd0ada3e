#!/usr/bin/env bash
# Reproduces docs/evidence/h200.md on the nvidia-h200 device machine, through the harness itself.
# Needs /root/wheelhouse from ../shared/device/stage onnxruntime-gpu==1.31.1 onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock defusedxml
# Writes $OUT/h200.log and $OUT/results.tgz (every result JSON, log, junit and plugin report).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the log and results}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs PYTHONUNBUFFERED=1
RES=/root/matrix-results; rm -rf "$RES"; mkdir -p "$RES/variants"

variant() {  # variant NAME REGEX REPLACEMENT: the shipped matrix with one edit, beside it (relative roots hold)
  python3 - "matrix-$1.toml" "$2" "$3" <<'PY'
import re, sys
out, pattern, new = sys.argv[1:]
text, n = re.subn(pattern, new, open("matrix.toml").read(), count=1, flags=re.S)
assert n == 1, f"matrix.toml no longer matches {pattern!r}"
open(out, "w").write(text)
PY
  cp "matrix-$1.toml" "$RES/variants/"
}

{
  echo "## host"; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  echo "## nox -l (shipped matrix.toml)"; python3 -m nox -l
  echo "## 1. the shipped H200 pairings"
  MATRIX_RESULTS=$RES/main python3 -m nox -s gpu-3.12-cu130 gpu-3.12-unpinned; echo "nox exit: $?"
  echo "## 2. toothless detection: the known_toothless declaration removed"
  variant undeclared-toothless 'known_toothless = \[.*?\n\]\n' ''
  # teeth checks coverage against the require_cudnn run of the same nox process
  MATRIX_TOML=matrix-undeclared-toothless.toml MATRIX_RESULTS=$RES/toothless python3 -m nox -s gpu-3.12-cu130-require_cudnn gpu-3.12-cu130-teeth
  echo "nox exit: $? (expected non-zero)"
  echo "## 3. the guard's own teeth: MATH forced through suite.provider_options, require_cudnn must fail"
  variant forced-math '\[suite\.dispatch\]\n' '[suite.dispatch]\nprovider_options = { sdpa_kernel = "16" }\n'
  MATRIX_TOML=matrix-forced-math.toml MATRIX_RESULTS=$RES/forced-math python3 -m nox -s gpu-3.12-cu130-require_cudnn
  echo "nox exit: $? (expected non-zero)"
  echo "## 4. the census under pytest-xdist: require_cudnn again with -n 4 (posargs reach pytest)"
  MATRIX_RESULTS=$RES/xdist python3 -m nox -s gpu-3.12-cu130-require_cudnn -- -n 4; echo "nox exit: $?"
} 2>&1 | tee "$OUT/h200.log"
tar czf "$OUT/results.tgz" -C "$RES" .

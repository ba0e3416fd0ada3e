#!/usr/bin/env bash
# Issue 22 on the nvidia-h200 device: verdicts that do not depend on test order, flakes told from regressions.
# ORT's newest attention tests (test_tensorscatter_attention.py, test_gqa.py, test_mha.py: 198 tests, -n 8),
# two cells (docs/evidence/reproducible/matrix.toml), onnxruntime-gpu 1.30.0 -> 1.31.1.
#   STEP=1  calibrate on 1.30.0 (every mode twice: --runs 2, the default), then the 1.30.0 baseline sweep
#   STEP=2  three candidate sweeps on 1.31.1 under --gate regressions (each must exit 0, no tier regression)
#   STEP=3  1.31.1 with MATH forced under --gate regressions (must exit 1, every regression confirmed);
#           then the order demo: test_gqa.py then test_mha.py in one process (-n 0), isolation "report"
#           (A) and "restore" (B), and test_mha.py then test_gqa.py, "restore" (C)
#   STEP=4  the isolation bench: normal of one cell, isolation "off" against "restore", 3 pairs
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.30.0 onnxruntime-gpu==1.31.1 onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools setuptools einops rich
# and ORT's test files in .ort-src/ (git-ignored, carried; docs/evidence/reproducible-h200.md says which).
# Everything the steps share lives under /root/rep, which lasts while the machine stays warm.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and results}"
: "${STEP:?set STEP to 1, 2, 3 or 4}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs
export MATRIX_BASELINES=/root/rep/baselines PYTHONUNBUFFERED=1
R=/root/rep
mkdir -p $R
variant() {  # variant OUT [PY-EXPR ...]: the evidence matrix, edited by each python expression on t
  python3 - "$@" <<'PY'
import sys
out, *edits = sys.argv[1:]
t = open("docs/evidence/reproducible/matrix.toml").read()
for e in edits:
    new = eval(e, {"t": t})
    assert new != t, f"the edit {e!r} changed nothing"
    t = new
open(out, "w").write(t)
PY
}
EXPECT='t.replace("[suite.ort_attention]\n", "[suite.ort_attention]\nexpect_file = \"expect/ort_attention.toml\"\n", 1)'
R131='t.replace("onnxruntime-gpu==1.30.0", "onnxruntime-gpu==1.31.1", 1)'
MATH='t.replace("[suite.ort_attention]\n", "[suite.ort_attention]\nprovider_options = { sdpa_kernel = \"16\" }\n", 1)'
sweep() {  # sweep NAME MATRIX ARGS...: one sweep, its exit code, its sweep.json and report copied out
  local name=$1 m=$2; shift 2
  echo "## sweep $name: $*"
  local t0=$SECONDS
  MATRIX_TOML=$m MATRIX_RESULTS=$R/res-$name python3 -m nox -s sweep -- "$@" --out $R/out-$name
  echo "nox -s sweep ($name) exit: $? in $((SECONDS - t0)) s"
  mkdir -p "$OUT/$name"; cp $R/out-$name/sweep.json $R/out-$name/report.md "$OUT/$name/" 2>/dev/null
}
case "$STEP" in
1)
  rm -rf $R/*; mkdir -p $R
  variant $R/m130.toml "$EXPECT"
  {
    echo "## calibrate: onnxruntime-gpu 1.30.0, both cells, all modes, --runs 2 (the default)"
    t0=$SECONDS
    MATRIX_TOML=$R/m130.toml MATRIX_RESULTS=$R/res-calibrate python3 -m nox -s calibrate
    echo "nox -s calibrate exit: $? in $((SECONDS - t0)) s"
    sweep baseline $R/m130.toml --save-baseline ort-1.30.0
  } > "$OUT/step1.log" 2>&1
  mkdir -p "$OUT/expect" "$OUT/baselines"; cp $R/expect/ort_attention.toml "$OUT/expect/"; cp $MATRIX_BASELINES/*.json "$OUT/baselines/"
  ;;
2)
  variant $R/m131.toml "$EXPECT" "$R131"
  { for k in 1 2 3; do sweep cand$k $R/m131.toml --baseline ort-1.30.0 --gate regressions; done; } > "$OUT/step2.log" 2>&1
  ;;
3)
  variant $R/m131math.toml "$EXPECT" "$R131" "$MATH"
  { sweep math $R/m131math.toml --baseline ort-1.30.0 --gate regressions; echo "(expected 1)"; } > "$OUT/step3.log" 2>&1
  # the order demo: one cell, normal, one process, so the order is the files' order
  one='t.replace("\n  { python = \"3.12\", ort = \"rel\", torch = \"img\", libs = \"t919\" },", "", 1)'
  normal='t.replace("modes = [\"normal\", \"require_cudnn\", \"teeth\"]", "modes = [\"normal\"]", 1)'
  n0='t.replace("pytest_args = [\"-n\", \"8\"]", "pytest_args = [\"-n\", \"0\"]", 1)'
  gm='t.replace("files = [\"test_onnx_attention/test_tensorscatter_attention.py\", \"test_onnx_attention/test_gqa.py\",\n         \"test_onnx_attention/test_mha.py\"]", "files = [\"test_onnx_attention/test_gqa.py\", \"test_onnx_attention/test_mha.py\"]", 1)'
  mg='t.replace("files = [\"test_onnx_attention/test_tensorscatter_attention.py\", \"test_onnx_attention/test_gqa.py\",\n         \"test_onnx_attention/test_mha.py\"]", "files = [\"test_onnx_attention/test_mha.py\", \"test_onnx_attention/test_gqa.py\"]", 1)'
  iso() { echo "t.replace(\"pythonpath = [\\\".\\\"]\", \"pythonpath = [\\\".\\\"]\\nisolation = \\\"$1\\\"\", 1)"; }
  variant $R/mA.toml "$R131" "$one" "$normal" "$n0" "$gm" "$(iso report)"
  variant $R/mB.toml "$R131" "$one" "$normal" "$n0" "$gm" "$(iso restore)"
  variant $R/mC.toml "$R131" "$one" "$normal" "$n0" "$mg" "$(iso restore)"
  {
    for run in A B C; do
      echo "## order $run"
      MATRIX_TOML=$R/m$run.toml MATRIX_RESULTS=$R/order-$run python3 -m nox -s gpu-3.12-sys914-normal
      echo "nox exit ($run): $?"
    done
  } > "$OUT/order.log" 2>&1
  python3 - $R <<'PY' | tee "$OUT/order-summary.txt"
import json, sys
from collections import Counter
tiers = {}
for run in "ABC":
    r = json.load(open(f"{sys.argv[1]}/order-{run}/gpu-3.12-sys914-normal.json"))
    mha = {t: v for t, v in r["dispatch"]["tests"].items() if "test_mha" in t}
    tiers[run] = {t: sorted(set(v)) for t, v in mha.items()}
    print(run, "isolation", r.get("isolation"), "| test_mha tests per tier:",
          dict(sorted(Counter(x for v in tiers[run].values() for x in v).items())))
    for p in r.get("pollution", []):
        print("  pollution:", p["test"], [(c["name"], c["before"], c["after"]) for c in p["changes"]],
              "undone" if p["undone"] else "not undone", "later tests:", p["later_tests"])
print("B == C (restore: the same tiers in either order):", tiers["B"] == tiers["C"])
print("A != B (report only: the order effect is back):", tiers["A"] != tiers["B"])
PY
  ;;
4)
  variant $R/mbench.toml "$R131" 't.replace("\n  { python = \"3.12\", ort = \"rel\", torch = \"img\", libs = \"t919\" },", "", 1)' \
    't.replace("modes = [\"normal\", \"require_cudnn\", \"teeth\"]", "modes = [\"normal\"]", 1)'
  for iso in off restore; do
    python3 - $R/mbench.toml $R/mbench-$iso.toml $iso <<'PY'
import sys
src, out, iso = sys.argv[1:]
t = open(src).read()
open(out, "w").write(t.replace('pythonpath = ["."]', f'pythonpath = ["."]\nisolation = "{iso}"', 1))
PY
  done
  {
    for k in 1 2 3; do
      for iso in off restore; do
        MATRIX_TOML=$R/mbench-$iso.toml MATRIX_RESULTS=$R/bench-$iso-$k python3 -m nox -s gpu-3.12-sys914-normal >/dev/null 2>&1
        python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], 'duration_s', r['duration_s'])" \
          $R/bench-$iso-$k/gpu-3.12-sys914-normal.json $iso $k
      done
    done
  } 2>&1 | tee "$OUT/bench-isolation.txt"
  ;;
esac
tar -C $R --exclude='*/runs/*' --exclude='*.tar.gz' -czf "$OUT/results-step$STEP.tar.gz" $(cd $R && ls -d res-* order-* bench-* 2>/dev/null) 2>/dev/null
ls -la "$OUT"

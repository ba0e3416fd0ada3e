#!/usr/bin/env bash
# Tier rules on the nvidia-h200 device, with the shipped suite ort_cuda_attention (cell gpu-3.12-h200cuda):
#   STEP=1  calibrate (normal, require_cudnn) -> expect/ort_cuda_attention.toml with a tier rule per test
#           function, then `nox -s report` on those results: the tiers-by-function table (terminal, md, html)
#   STEP=2  the cell judged by the calibrated file (it must pass); the memory-efficient test caught by a
#           hand rule (it must fail, naming the test and CUDNN_FLASH_ATTENTION); the bare recipe: pytest by
#           hand on the same files, venv, -k and pinned libraries, whose failed node ids must equal the
#           harness's
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.31.1 onnx==1.20.1 parameterized einops pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools setuptools
# and ORT's files in .ort-src/ (git-ignored; pass carry=[".ort-src"]), laid out as in docs/evidence/ort-src.md:
#   onnxruntime/test/python/transformers/{conftest.py,test_gqa_cuda.py,test_flash_attn_cuda.py,
#   test_mha_flash_attn.py} and every helper they import from that dir (test_gqa_cpu.py, bert_padding.py, ...).
# Run: OUT=... STEP=1 bash docs/evidence/run-tier-rules-h200.sh, then the same with STEP=2 (each fits one call).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}"
: "${STEP:?set STEP to 1 or 2}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/matrix-venvs
export PYTHONUNBUFFERED=1
CELL=gpu-3.12-h200cuda
RES=/root/tier-rules-results
EV=docs/evidence/tier-rules
mkdir -p "$EV" "$OUT"
variant() {  # variant OUT EXPECT_FILE: the shipped matrix with expect_file set on [suite.ort_cuda_attention]
  python3 - "$1" "$2" <<'PY'
import sys
out, expect = sys.argv[1:]
text = open("matrix.toml").read()
head = "[suite.ort_cuda_attention]\n"
assert text.count(head) == 1
open(out, "w").write(text.replace(head, head + f'expect_file = "{expect}"\n'))
PY
}
if [ "$STEP" = 1 ]; then
  rm -rf "$RES" expect/ort_cuda_attention.toml
  variant $EV/m.toml ../../../expect/ort_cuda_attention.toml
  {
    echo "## 1. calibrate $CELL (normal, require_cudnn)"
    time MATRIX_TOML=$EV/m.toml MATRIX_RESULTS=$RES/calibrate python3 -m nox -s calibrate -- $CELL
    echo "nox -s calibrate exit: $?"
    echo "## 2. the tier table of those runs"
    MATRIX_TOML=$EV/m.toml python3 -m nox -s report -- $RES/calibrate --out "$OUT/calibrate"
    echo "nox -s report exit: $? (1 when a mode failed before calibration)"
  } 2>&1 | tee "$OUT/step1.log"
  mkdir -p "$OUT/expect"; cp expect/ort_cuda_attention.toml "$OUT/expect/"
  tar -C "$RES" --exclude='*/runs/*' -czf "$OUT/results-step1.tar.gz" . 2>/dev/null
else
  test -f expect/ort_cuda_attention.toml || cp "$OUT/expect/ort_cuda_attention.toml" expect/ 2>/dev/null \
    || { echo "no expect/ort_cuda_attention.toml: run STEP=1 first (or copy it back from its OUT)"; exit 1; }
  variant $EV/m.toml ../../../expect/ort_cuda_attention.toml
  # the hand rule a reviewer would write for the class, in a copy of the calibrated file
  python3 - <<'PY'
src = open("expect/ort_cuda_attention.toml").read()
rule = ('    { test = "TestMemoryEfficientGQA::", only = ["EFFICIENT_ATTENTION"], '
        'reason = "the memory-efficient class must run the memory-efficient kernel" },\n')
head = "[expect.normal]\n"
before, after = src.split(head, 1)
body, rest = (after.split("\n[", 1) + [""])[:2]
body = body.replace("tiers = [\n", "tiers = [\n" + rule, 1) if "tiers = [\n" in body else body + "tiers = [\n" + rule + "]\n"
open("docs/evidence/tier-rules/caught.toml", "w").write(before + head + body + ("\n[" + rest if rest else ""))
PY
  variant $EV/m-caught.toml caught.toml
  {
    echo "## 3. $CELL judged by the calibrated rules (expected: PASS)"
    time MATRIX_TOML=$EV/m.toml MATRIX_RESULTS=$RES/judged python3 -m nox -s $CELL
    echo "nox -s $CELL exit: $?"
    MATRIX_TOML=$EV/m.toml python3 -m nox -s report -- $RES/judged --out "$OUT/judged"
    echo "## 4. the class rule TestMemoryEfficientGQA:: only EFFICIENT_ATTENTION (expected: FAIL, naming the test)"
    MATRIX_TOML=$EV/m-caught.toml MATRIX_RESULTS=$RES/caught python3 -m nox -s $CELL-normal
    echo "nox -s $CELL-normal exit: $? (expected 1)"
    MATRIX_TOML=$EV/m-caught.toml python3 -m nox -s report -- $RES/caught --out "$OUT/caught"
    echo "## 5. the bare recipe: pytest by hand, same venv, files, -k, pinned libraries, no harness"
    python3 - "$RES/judged/$CELL-normal.json" "$OUT" <<'PY'
import json, os, re, subprocess, sys, time
result, out = sys.argv[1:]
r = json.load(open(result))
root = os.path.join(os.environ["ORT_SOURCE"], "onnxruntime/test/python/transformers")
py = os.path.join(r["venv"]["path"], "bin", "python")
files = ["test_gqa_cuda.py", "test_flash_attn_cuda.py", "test_mha_flash_attn.py"]
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH")}
env.update({k: r["env"][k] for k in ("LD_PRELOAD", "LD_LIBRARY_PATH") if k in r["env"]}, PYTHONPATH=".")
start = time.monotonic()
p = subprocess.run([py, "-m", "pytest", "-n", "16", "-k", "not test_flash_attn_cuda.py or interactive", "-rfE",
                    "-p", "no:cacheprovider", *files], cwd=root, env=env, capture_output=True, text=True)
open(os.path.join(out, "bare.log"), "w").write(p.stdout + p.stderr)
bare = set(re.findall(r"^(?:FAILED|ERROR) (\S+)", p.stdout, re.M))
harness = {n for n, o in r["outcomes"].items() if o in ("failed", "error")}
print(f"bare pytest exit {p.returncode} in {time.monotonic() - start:.0f} s: {len(bare)} failed/error node ids; "
      f"harness {len(harness)}; same: {bare == harness}")
print("only bare:", sorted(bare - harness)[:20])
print("only harness:", sorted(harness - bare)[:20])
print(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "(no output)")
PY
  } 2>&1 | tee "$OUT/step2.log"
  tar -C "$RES" --exclude='*/runs/*' -czf "$OUT/results-step2.tar.gz" judged caught 2>/dev/null
fi
rm -f $EV/m.toml $EV/m-caught.toml

#!/usr/bin/env bash
# Tier rules on the nvidia-h200 device (issue 25), with the shipped suite ort_cuda_attention (cell
# gpu-3.12-h200cuda, normal mode, the shipped -k: test_gqa_cuda.py and test_mha_flash_attn.py, 125 tests). One call:
#   1. calibrate (--runs 2) -> expect/ort_cuda_attention.toml with a tier rule per test function
#   2. `nox -s report` on those runs: the tiers-by-function table (terminal, md, html)
#   3. the cell judged by the calibrated file (expected: PASS)
#   4. a reviewer's class rule, TestMemoryEfficientGQA:: only EFFICIENT_ATTENTION, added to a copy
#      (expected: FAIL, naming the memory-efficient interactive test and what it dispatched)
#   5. the bare recipe: pytest by hand on the same files, venv, -k and pinned libraries, no harness; its
#      failed node ids against the harness's (step 3)
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.30.0 onnxruntime-gpu==1.31.1 onnx==1.20.1 parameterized pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools setuptools einops rich
# and ORT's files in .ort-src/ (git-ignored; carry ".ort-src"), laid out as in docs/evidence/ort-src.md:
#   onnxruntime/test/python/transformers/{conftest.py,test_gqa_cuda.py,test_flash_attn_cuda.py,
#   test_mha_flash_attn.py,test_gqa_cpu.py,bert_padding.py,rotary_flash.py}.
# Run: OUT=... bash docs/evidence/run-tier-rules-h200.sh. Results (with every probe report) go to
# $OUT/results.tar.gz, so that a hand-reviewed expect file can be checked against them afterwards
# (docs/evidence/tier-rules/check.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and reports}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
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
rm -rf "$RES" expect/ort_cuda_attention.toml
variant $EV/m.toml ../../../expect/ort_cuda_attention.toml
{
  echo "## 1. calibrate $CELL (normal, --runs 2)"
  t0=$SECONDS
  MATRIX_TOML=$EV/m.toml MATRIX_RESULTS=$RES/calibrate timeout 250 python3 -m nox -s calibrate -- $CELL
  echo "nox -s calibrate exit: $? in $((SECONDS - t0)) s"
  mkdir -p "$OUT/expect"; cp expect/ort_cuda_attention.toml "$OUT/expect/" || exit 1
  echo "## 2. the tier table of those runs"
  MATRIX_TOML=$EV/m.toml python3 -m nox -s report -- $RES/calibrate --out "$OUT/calibrate"
  echo "nox -s report exit: $?"
  # the class rule a reviewer would first write, in a copy of the calibrated file
  python3 - <<'PY'
import tomllib
src = open("expect/ort_cuda_attention.toml").read()
test, only = "TestMemoryEfficientGQA::", '["EFFICIENT_ATTENTION"]'
reason = "the memory-efficient class must run the memory-efficient kernel"
head = "[expect.normal]\n"
if "[[expect.normal.tiers]]" in src or head not in src:  # the rules as tables (or none yet): one more table
    out = src.rstrip("\n") + f'\n\n[[expect.normal.tiers]]\ntest = "{test}"\nonly = {only}\nreason = "{reason}"\n'
else:
    before, after = src.split(head, 1)
    body, rest = (after.split("\n[", 1) + [""])[:2]
    rule = f'    {{ test = "{test}", only = {only}, reason = "{reason}" }},\n'
    body = body.replace("tiers = [\n", "tiers = [\n" + rule, 1) if "tiers = [\n" in body else body + "tiers = [\n" + rule + "]\n"
    out = before + head + body + ("\n[" + rest if rest else "")
rules = tomllib.loads(out)["expect"]["normal"]["tiers"]
assert any(r["test"] == test for r in rules), rules
open("docs/evidence/tier-rules/caught.toml", "w").write(out)
print(f"caught.toml: {len(rules)} tier rules, the class rule among them")
PY
  variant $EV/m-caught.toml caught.toml
  echo "## 3. $CELL judged by the calibrated rules (expected: PASS)"
  t0=$SECONDS
  MATRIX_TOML=$EV/m.toml MATRIX_RESULTS=$RES/judged timeout 120 python3 -m nox -s $CELL
  echo "nox -s $CELL exit: $? in $((SECONDS - t0)) s"
  MATRIX_TOML=$EV/m.toml python3 -m nox -s report -- $RES/judged --out "$OUT/judged"
  echo "## 4. the class rule TestMemoryEfficientGQA:: only EFFICIENT_ATTENTION (expected: FAIL, naming the test)"
  MATRIX_TOML=$EV/m-caught.toml MATRIX_RESULTS=$RES/caught timeout 110 python3 -m nox -s $CELL-normal
  echo "nox -s $CELL-normal exit: $? (expected 1)"
  MATRIX_TOML=$EV/m-caught.toml python3 -m nox -s report -- $RES/caught --out "$OUT/caught"
  cp $EV/caught.toml "$OUT/expect/caught.toml"
  echo "## 5. the bare recipe: pytest by hand, same venv, files, -k, pinned libraries, no harness"
  timeout 100 python3 - "$RES/judged/$CELL-normal.json" "$OUT" <<'PY'
import json, os, re, subprocess, sys, time
result, out = sys.argv[1:]
r = json.load(open(result))
root = os.path.join(os.environ["ORT_SOURCE"], "onnxruntime/test/python/transformers")
py = os.path.join(r["venv"]["path"], "bin", "python")
files = ["test_gqa_cuda.py", "test_flash_attn_cuda.py", "test_mha_flash_attn.py"]
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH")}
env.update({k: r["env"][k] for k in ("LD_PRELOAD", "LD_LIBRARY_PATH") if k in r["env"]}, PYTHONPATH=".")
start = time.monotonic()
p = subprocess.run([py, "-m", "pytest", "-n", "16", "-k", "not test_flash_attn_cuda.py", "-rfE",
                    "-p", "no:cacheprovider", *files], cwd=root, env=env, capture_output=True, text=True)
open(os.path.join(out, "bare.log"), "w").write(p.stdout + p.stderr)
bare = set(re.findall(r"^(?:FAILED|ERROR) (\S+)", p.stdout, re.M))
harness = {n for n, o in r["outcomes"].items() if o in ("failed", "error")}
print(f"bare pytest exit {p.returncode} in {time.monotonic() - start:.0f} s: {len(bare)} failed/error node ids; "
      f"harness {len(harness)}; same: {bare == harness}")
print("only bare:", sorted(bare - harness)[:20])
print("only harness:", sorted(harness - bare)[:20])
print("harness counts:", r["counts"])
print(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "(no output)")
PY
} 2>&1 | tee "$OUT/tier-rules.log"
tar -C "$RES" --exclude='pytest.log' -czf "$OUT/results.tar.gz" . 2>/dev/null
ls -la "$OUT"
rm -f $EV/m.toml $EV/m-caught.toml

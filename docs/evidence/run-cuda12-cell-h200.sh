#!/usr/bin/env bash
# Issue 34 on the nvidia-h200 device: the CUDA 12 cells (ORT 1.26.0, PyPI's torch 2.8.0 cu128, the CUDA 12.8
# runtime and cuDNN 9.10 from pip) beside the CUDA 13 cells (ORT 1.31.1, the image's torch 2.11 cu130) on one host
# and one driver, over the built-in dispatch suite and ORT's attention tests.
#   STEP=1  the doctor; the dispatch cell gpu-3.12-cu128 alone (its venv is built: torch 2.8.0 and NVIDIA's cu12
#           wheels, offline); calibrate both CUDA 12 cells (expect/dispatch_cu12.toml, expect/ort_attention_cu12.toml,
#           --runs 2; CALIBRATE=<cells> picks fewer; ALONE=0 skips the cell alone: calibrate builds its venv too)
#   STEP=2  one sweep of gpu-3.12-cu128, gpu-3.12-cu128attn, gpu-3.12-h200 and gpu-3.12-h200pip; the bare recipe
#           (pytest by hand in the CUDA 12 venvs, the same files and pinned libraries, no harness) against the
#           harness's outcomes; the CUDA stack each test process mapped, per cell; the time each cell took
# Needs /root/wheelhouse with a whole CUDA 12 torch beside two ORT builds (one pip resolve cannot hold two
# versions of onnxruntime-gpu, so the ORT 1.31.1 and cuDNN 13 wheels are fetched apart, without dependencies):
#   pip download --only-binary=:all: --python-version 3.12 ... torch==2.8.0 onnxruntime-gpu==1.26.0 onnx==1.20.1 \
#       parameterized einops pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools packaging uv setuptools rich
#   pip download --no-deps ... onnxruntime-gpu==1.31.1 nvidia-cudnn-cu13==9.12.0.46
# (58 wheels, 4.5 GB: 84 parts of 58 MB, carried as ../shared/device/stage carries its parts), and ORT's test files in .ort-src/ (git-ignored,
# carried; docs/evidence/ort-src.md says which). Everything the steps share lives under /root/c12.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs and results}"
: "${STEP:?set STEP to 1 or 2}"
python3 -m pip install -q --no-index --find-links /root/wheelhouse nox virtualenv filelock defusedxml jinja2 pyelftools rich || exit 1
export ORT_SOURCE=$PWD/.ort-src MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse MATRIX_VENVS=/root/c12/venvs
export PYTHONUNBUFFERED=1
R=/root/c12; mkdir -p "$R" "$OUT"
CELLS="gpu-3.12-cu128 gpu-3.12-cu128attn gpu-3.12-h200 gpu-3.12-h200pip"
# calibrate writes the expect file of the CUDA 12 attention suite; the loader wants one to exist before
# (each call carries the working tree afresh: what STEP=1 calibrated in this lease is put back for STEP=2)
for f in ort_attention_cu12 dispatch_cu12; do
  if [ -s "$R/$f.toml" ]; then cp "$R/$f.toml" expect/; elif [ ! -s expect/$f.toml ]; then : > expect/$f.toml; fi
done

if [ "$STEP" = 1 ]; then
  {
    nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
    echo "## doctor"
    python3 -m nox -s doctor > "$OUT/doctor.txt" 2>&1; echo "nox -s doctor exit: $?"
    grep -A40 "^NVIDIA driver" "$OUT/doctor.txt" | head -30
    if [ "${ALONE:-1}" = 1 ]; then
      echo "## 1. the CUDA 12 dispatch cell alone"
      t0=$SECONDS
      MATRIX_RESULTS=$R/res-alone timeout 270 python3 -m nox -s gpu-3.12-cu128 > "$OUT/nox-cu128.log" 2>&1
      echo "nox -s gpu-3.12-cu128 exit: $? in $((SECONDS - t0)) s"
      tail -n 25 "$OUT/nox-cu128.log"
    fi
    echo "## 2. calibrate gpu-3.12-cu128attn on ORT 1.26.0 (--runs 2)"
    t0=$SECONDS
    MATRIX_RESULTS=$R/res-calibrate timeout 290 python3 -m nox -s calibrate -- ${CALIBRATE:-gpu-3.12-cu128 gpu-3.12-cu128attn} > "$OUT/calibrate.log" 2>&1
    echo "nox -s calibrate exit: $? in $((SECONDS - t0)) s"
    tail -n 30 "$OUT/calibrate.log"
    for f in ort_attention_cu12 dispatch_cu12; do cp expect/$f.toml "$OUT/" && cp expect/$f.toml "$R/"; done
  } 2>&1 | tee "$OUT/step1.log"
  tar -C "$R" -czf "$OUT/results-step1.tar.gz" res-alone res-calibrate 2>/dev/null
  exit 0
fi

{
  echo "## 3. one sweep, two CUDA majors: $CELLS"
  t0=$SECONDS
  # shellcheck disable=SC2086
  rm -rf "$R/res-sweep"  # a fresh results dir: the report holds this sweep's runs only
  MATRIX_RESULTS=$R/res-sweep timeout 560 python3 -m nox -s sweep -- --select $CELLS --out "$OUT/sweep" > "$OUT/sweep.log" 2>&1
  echo "nox -s sweep exit: $? in $((SECONDS - t0)) s"
  tail -n 60 "$OUT/sweep.log"
  echo "## the libs comparison, whole"
  sed -n '/^libs comparison/,/^gate /p' "$OUT/sweep.log"
  cp "$R/res-sweep/sweep.json" "$OUT/sweep/" 2>/dev/null
  echo "## 4. the bare recipe in the CUDA 12 venvs: same files, venv and pinned libraries, no harness"
  for cell in gpu-3.12-cu128 gpu-3.12-cu128attn; do
    timeout 200 python3 - "$R/res-sweep/$cell-normal.json" "$OUT" "$cell" <<'PY'
import json, os, re, subprocess, sys, time
result, out, cell = sys.argv[1:]
r = json.load(open(result))
py = os.path.join(r["venv"]["path"], "bin", "python")
attention = cell.endswith("attn")
root = (os.path.join(os.environ["ORT_SOURCE"], "onnxruntime/test/python/transformers") if attention else "suites/dispatch")
files = (["test_onnx_attention/test_tensorscatter_attention.py", "test_onnx_attention/test_gqa.py",
          "test_onnx_attention/test_mha.py"] if attention else ["test_dispatch.py"])
import tomllib
suite_env = tomllib.load(open("matrix.toml", "rb"))["suite"][r["cell"]["suite"]].get("env", {})
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH")}
# the recipe: the pinned libraries, the kernel debug line, and the suite's own env (DISPATCH_CANARY_TIER)
env.update({k: r["env"][k] for k in ("LD_PRELOAD", "LD_LIBRARY_PATH") if r["env"].get(k)}, PYTHONPATH=".",
           ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO="1", **suite_env)
start = time.monotonic()
p = subprocess.run([py, "-m", "pytest", *(["-n", "8"] if attention else []), "-v", "-p", "no:cacheprovider", *files],
                   cwd=root, env=env, capture_output=True, text=True)
took = time.monotonic() - start
open(os.path.join(out, f"bare-{cell}.log"), "w").write(p.stdout + p.stderr)
outcome = r"(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)"
bare = {n: o.lower() for o, n in re.findall(rf"\b{outcome} (\S+::\S+)", p.stdout)}  # -n 8: "[gw0] PASSED id"
bare.update({n: o.lower() for n, o in re.findall(rf"^(\S+::\S+) {outcome}", p.stdout, re.M)})  # -n 0: "id PASSED"
harness = {n: o for n, o in r["outcomes"].items()}
differ = sorted(n for n in set(bare) | set(harness) if bare.get(n) != harness.get(n))
print(f"{cell}: bare pytest exit {p.returncode} in {took:.0f} s, {len(bare)} outcomes; harness {len(harness)} "
      f"({r['counts']}) in {r['duration_s']} s; same outcome for every test: {not differ}")
for n in differ[:15]:
    print(f"  {n}: bare {bare.get(n)}, harness {harness.get(n)}")
PY
  done
  echo "## 5. the CUDA stack each test process mapped, and the time each cell took"
  python3 - "$R/res-sweep" <<'PY' | tee "$OUT/stacks.md"
import json, pathlib, sys
res = pathlib.Path(sys.argv[1])
print("| cell | mode | verdict | counts | ORT (CUDA) | CUDA stack mapped (library, CUDA major, version, file) | s |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for p in sorted(res.glob("gpu-*.json")):
    r = json.loads(p.read_text())
    if "libraries" not in r:
        continue
    stack = sorted({(x["library"], x["cuda_major"], x.get("version"), x["file"])
                    for a in r["libraries"]["audits"] for x in a.get("stack", [])}, key=str)
    ort = (r.get("provenance") or {}).get("ort") or {}
    shown = "<br>".join(f"{lib} {m} {v} `{f}`" for lib, m, v, f in stack) or "none"
    c = r["counts"]
    print(f"| {r['cell']['name']} | {r['mode']} | {r['verdict']} | {c.get('passed')}/{c.get('failed')}/{c.get('skipped')} | "
          f"{ort.get('version')} ({ort.get('cuda_version')}) | {shown} | {r['duration_s']} |")
    for w in r.get("warnings", []) + r.get("reasons", []):
        if "served the CUDA" in w:
            print(f"|  | | | | | {w} | |")
PY
} 2>&1 | tee "$OUT/step2.log"
# one archive: the device returns a limited number of files from a call
tar -C "$R" -czf "$R/results-sweep.tar.gz" res-sweep 2>/dev/null
tar -C "$OUT" -czf "$R/out.tar.gz" . && rm -rf "${OUT:?}"/* && mv "$R/out.tar.gz" "$R/results-sweep.tar.gz" "$OUT/"

#!/usr/bin/env bash
# A driver-only GPU host on the nvidia-h200 device kind: the system CUDA toolkit (/usr/local/cuda*) and the
# system CUDA/cuDNN libraries (/usr/lib/x86_64-linux-gnu/libcudnn* ...) are hidden, the tool is installed from
# the wheelhouse with `pip install .`, and a newcomer's commands run in an empty directory: init, -l, the
# doctor, then the pip cells of docs/evidence/driver-only/matrix.toml, offline. Only the driver stays the host's.
# Needs /root/wheelhouse from:
#   ../shared/device/stage onnxruntime-gpu==1.31.1 nvidia-cuda-runtime==13.0.96 nvidia-cudnn-cu13==9.19.0.56 onnx==1.20.1 pytest-xdist nox virtualenv filelock defusedxml jinja2 pyelftools packaging uv setuptools
# Writes into $OUT: host.txt (driver, what was hidden and the proof), init.txt and init-matrix.toml, nox-l.txt,
# doctor.txt, run.txt (plain ort-gpu-matrix), old-driver-l.txt (a fake 535 driver first on PATH), audits.md,
# pip-libs.txt (the pinned wheels as installed), ldd.txt (what ORT's CUDA provider needs, and what the pip set alone
# resolves), results.tar.gz. The hidden files are put back on exit.
set -uo pipefail
USR_LOCAL=${USR_LOCAL:-/usr/local} SYSLIB=${SYSLIB:-/usr/lib/x86_64-linux-gnu}  # overridable to try hide/restore
LIBS='libcudnn* libcudart* libcublas* libcufft* libcurand* libcusparse* libcusolver* libnvrtc* libnvJitLink* libnvjitlink* libnpp* libnvblas*'

hide() {  # every $USR_LOCAL/cuda* and the CUDA/cuDNN libraries of $SYSLIB into $HIDE (the driver's libcuda stays)
  mkdir -p "$HIDE/usr-local" "$HIDE/lib" || return 1
  : > "$HIDE/moved.txt"
  for d in "$USR_LOCAL"/cuda*; do
    [ -e "$d" ] || [ -L "$d" ] || continue
    mv "$d" "$HIDE/usr-local/" && echo "$d" >> "$HIDE/moved.txt"
  done
  for pattern in $LIBS; do
    for f in "$SYSLIB"/$pattern; do
      [ -e "$f" ] || [ -L "$f" ] || continue
      mv "$f" "$HIDE/lib/" && echo "$f" >> "$HIDE/moved.txt"
    done
  done
  [ "$SYSLIB" = /usr/lib/x86_64-linux-gnu ] && ldconfig
  return 0
}

restore() {  # everything hide() moved, back where it was
  [ -d "$HIDE" ] || return 0
  for f in "$HIDE"/usr-local/* "$HIDE"/usr-local/.[!.]*; do { [ -e "$f" ] || [ -L "$f" ]; } && mv "$f" "$USR_LOCAL/"; done
  for f in "$HIDE"/lib/* "$HIDE"/lib/.[!.]*; do { [ -e "$f" ] || [ -L "$f" ]; } && mv "$f" "$SYSLIB/"; done
  rm -f "$HIDE/moved.txt"; rmdir "$HIDE/usr-local" "$HIDE/lib" "$HIDE"
  [ "$SYSLIB" = /usr/lib/x86_64-linux-gnu ] && ldconfig
  return 0
}
[ -n "${FUNCTIONS_ONLY:-}" ] && return 0  # sourced to try hide/restore on other dirs

cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to a directory for the logs}"
REPO=$PWD
[ "$(id -u)" = 0 ] || { echo "needs root: it moves the system CUDA libraries aside and back" >&2; exit 1; }
[ ! -e /root/.driver-only-hidden ] || { echo "/root/.driver-only-hidden exists: an earlier run did not restore; look there" >&2; exit 1; }

# 1. the tool, as a user installs it (into the image's python, which holds torch), offline
python3 -m pip install -q --no-index --find-links /root/wheelhouse "$REPO" || exit 1
TOOL=$(python3 -c 'import os, sys; print(os.path.join(os.path.dirname(sys.executable), "ort-gpu-matrix"))')
[ -x "$TOOL" ] || { echo "no console script at $TOOL" >&2; exit 1; }

# 2. hide the system CUDA and cuDNN: moved into one dir no loader searches, put back by the trap
HIDE=/root/.driver-only-hidden
trap restore EXIT
hide || exit 1
{
  echo "## driver"; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  head -1 /proc/driver/nvidia/version 2>/dev/null
  echo "## what the driver check costs each nox -l (one nvidia-smi per process), 3 times"
  TIMEFORMAT='%R s'; for i in 1 2 3; do time nvidia-smi --query-gpu=driver_version --format=csv,noheader; done
  echo "## hidden"; cat "$HIDE/moved.txt"
  echo "## proof: the loader finds no system CUDA or cuDNN, and still finds the driver"
  echo "ldconfig -p | grep -E 'libcud(art|nn)|libcublas': $(ldconfig -p | grep -cE 'libcud(art|nn)|libcublas') entries"
  python3 - <<'PY'
import ctypes
for name in ("libcuda.so.1", "libcudart.so.13", "libcudnn.so.9", "libcublas.so.13"):
    try:
        ctypes.CDLL(name)
        print(f"{name}: loads")
    except OSError as exc:
        print(f"{name}: does not load ({exc})")
PY
} > "$OUT/host.txt" 2>&1
cat "$OUT/host.txt"

# 3. a newcomer's directory: init, then the evidence matrix beside it; results and venvs default beside it
W=$(mktemp -d /root/driver-only.XXXXXX)
cd "$W" || exit 1
export MATRIX_OFFLINE=1 MATRIX_WHEELHOUSE=/root/wheelhouse PYTHONUNBUFFERED=1
{ "$TOOL" init; echo "ort-gpu-matrix init exit: $?"; "$TOOL" -l; echo "ort-gpu-matrix -l exit: $?"; } > "$OUT/init.txt" 2>&1
cp matrix.toml "$OUT/init-matrix.toml"
cp "$REPO/docs/evidence/driver-only/matrix.toml" driver-only.toml
"$TOOL" --matrix driver-only.toml -l > "$OUT/nox-l.txt" 2>&1; echo "exit: $?" >> "$OUT/nox-l.txt"
"$TOOL" --matrix driver-only.toml -s doctor > "$OUT/doctor.txt" 2>&1; echo "exit: $?" >> "$OUT/doctor.txt"
"$TOOL" --matrix driver-only.toml > "$OUT/run.txt" 2>&1; echo "ort-gpu-matrix exit: $?" >> "$OUT/run.txt"

# 4. the same listing with a driver too old for CUDA 13 first on PATH (a real script standing in for nvidia-smi)
mkdir -p "$W/old-driver"
REAL_SMI=$(command -v nvidia-smi)
cat > "$W/old-driver/nvidia-smi" <<SH
#!/bin/sh
case "\$1" in --query-gpu=driver_version) echo 535.104.05 ;; *) exec $REAL_SMI "\$@" ;; esac
SH
chmod +x "$W/old-driver/nvidia-smi"
PATH="$W/old-driver:$PATH" "$TOOL" --matrix driver-only.toml -l > "$OUT/old-driver-l.txt" 2>&1
echo "exit: $?" >> "$OUT/old-driver-l.txt"

# 5. what was pinned (the wheels as installed) and what each test process really loaded
for d in .matrix/venvs/.libs/*/; do
  echo "## $d"; ls -d "$d"*.dist-info 2>/dev/null | xargs -n1 basename
  find "$d" -name 'libcudart.so.*' -o -name 'libcudnn.so.*' | sort
done > "$OUT/pip-libs.txt" 2>&1
python3 - .matrix/results > "$OUT/audits.md" <<'PY'
import json, pathlib, sys
SYSTEM = ("/usr/local/cuda", "/usr/lib/x86_64-linux-gnu/")
print("| session | verdict | passed/failed/skipped | LD_PRELOAD | by-name cuDNN (version) | by-name cudart | mapped from system dirs | reasons |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for p in sorted(pathlib.Path(sys.argv[1]).glob("gpu-*.json")):
    r = json.loads(p.read_text())
    audits = r["libraries"]["audits"]
    by_name = (audits[0].get("by_name") or {}) if audits else {}
    cudnn, cudart = by_name.get("cudnn") or {}, by_name.get("cudart") or {}
    mapped = sorted({m if isinstance(m, str) else m.get("file", "") for a in audits for m in a.get("mapped", [])})
    system = [m for m in mapped if m.startswith(SYSTEM)]
    c = r["counts"]
    print(f"| {r['session']} | {r['verdict']} | {c['passed']}/{c['failed']}/{c['skipped']} | "
          f"{r['env'].get('LD_PRELOAD') or '-'} | {cudnn.get('file')} ({cudnn.get('version')}) | {cudart.get('file')} | "
          f"{', '.join(system) or 'none'} | {'; '.join(r['reasons'])[:300] or '-'} |")
PY
# which CUDA libraries ORT's CUDA provider needs, and which the pip13 set alone resolves (the rest must come
# from torch, imported first): shows what a pip set without torch would have to add
SET_DIRS=$(ls -d .matrix/venvs/.libs/pip13-*/nvidia/*/lib 2>/dev/null | paste -sd:)
for so in .matrix/venvs/*/lib/python3.12/site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so; do
  echo "## $so, LD_LIBRARY_PATH=$SET_DIRS"; LD_LIBRARY_PATH=$SET_DIRS ldd "$so" | grep -E "not found|libcu|libnv"
done > "$OUT/ldd.txt" 2>&1
tar -C .matrix/results -czf "$OUT/results.tar.gz" . 2>/dev/null
tail -n 25 "$OUT/run.txt"; cat "$OUT/audits.md" "$OUT/pip-libs.txt" "$OUT/ldd.txt"; tail -n 5 "$OUT/old-driver-l.txt"

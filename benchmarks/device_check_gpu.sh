#!/usr/bin/env bash
# The GPU part of the device check (issue 11): rad.select on device-resident float32 gains
# at 1e8 and 1e9 against a GPU sum pass and the PyTorch sort-and-cumsum pipeline, checked
# against the CPU backend; JSON to $OUT (the device tool's output folder) or benchmarks/.
# Usage: bash benchmarks/device_check_gpu.sh [extra args for device_check_gpu.py]
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir="${OUT:-benchmarks}"
mkdir -p "$out_dir"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python -c "import numba_cuda, numba.cuda as c; print('numba-cuda', numba_cuda.__version__, 'gpu:', c.is_available())"
exec python benchmarks/device_check_gpu.py --sizes 1e8 1e9 --out "$out_dir/results_gpu.json" "$@"

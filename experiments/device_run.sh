#!/usr/bin/env bash
# The experiment at the paper's SVHN-sweep shape on one GPU, without network or TensorFlow.
#
#   pool ~50,000 unlabeled MNIST-1D points, |A| = 5,000 labeled, 1,000 validation points
#   (for m), b = 2,000 soft labels x 4 rounds, 5 seeds; RAD vs Margin vs Uniform (the
#   strategies of the paper's SVHN sweep, App. E) plus the oracle and the two controls.
#   Same models, loss and schedule as experiments/mnist1d.json. Target: under 8 minutes
#   on one H100 (JAX backend).
#
# Needs: Python 3.10+, NumPy, SciPy, PyTorch or JAX (with CUDA), Keras 3 and mnist1d
# (matplotlib for the plots, optional). On a machine without network, bring Keras 3 and
# mnist1d as wheels and point RAD_WHEELS at them; the script installs them with
# `pip install --no-index`. Wheels to carry (all pure Python, about 2 MB together):
#   keras-3.15.1, namex, optree (binary, cp3xx), absl-py, rich, markdown-it-py, mdurl,
#   pygments, h5py (binary), ml-dtypes (binary, already there with JAX), packaging,
#   mnist1d, requests (mnist1d imports it; nothing is downloaded)
# e.g. on a connected machine: pip download -d wheels keras==3.15.1 mnist1d
#
# Environment:
#   KERAS_BACKEND     jax or torch (default: jax if importable, else torch)
#   OUT               output folder (default experiments/device); results go to
#                     $OUT/mnist1d_device/{results.json,results.csv,arrays.npz,*.png,run.log}
#   RAD_WHEELS        folder of wheels for an offline install of what is missing
#   RAD_DEVICE_SMALL  1: a tiny configuration (seconds on a CPU) to check the script
#   RAD_DATA_DIR      MNIST-1D cache (default: under $OUT)
#
# Usage: bash experiments/device_run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
OUT=${OUT:-experiments/device}
DEST="$OUT/mnist1d_device"
mkdir -p "$DEST"
export RAD_DATA_DIR=${RAD_DATA_DIR:-$OUT/data}
export TF_CPP_MIN_LOG_LEVEL=3 PYTHONUNBUFFERED=1

have() { "$PY" -c "import $1" >/dev/null 2>&1; }

if [[ -z "${KERAS_BACKEND:-}" ]]; then
    if have jax; then KERAS_BACKEND=jax
    elif have torch; then KERAS_BACKEND=torch
    else echo "neither JAX nor PyTorch is installed" >&2; exit 2; fi
fi
export KERAS_BACKEND
if [[ "$KERAS_BACKEND" == "jax" ]]; then
    export XLA_PYTHON_CLIENT_PREALLOCATE=false
fi

missing=()
# (import keras only after KERAS_BACKEND is set: its default backend is TensorFlow)
for mod in keras mnist1d scipy; do have "$mod" || missing+=("$mod"); done
if ((${#missing[@]})); then
    if [[ -n "${RAD_WHEELS:-}" && -d "${RAD_WHEELS}" ]]; then
        echo "installing ${missing[*]} from $RAD_WHEELS (no index)"
        "$PY" -m pip install -q --no-index --find-links "$RAD_WHEELS" "${missing[@]}"
    else
        echo "missing Python packages: ${missing[*]}; set RAD_WHEELS to a folder of wheels" >&2
        exit 2
    fi
fi

PLOTS=()
have matplotlib && PLOTS=(--plots)

if [[ "${RAD_DEVICE_SMALL:-0}" == "1" ]]; then
    SHAPE=(--n-samples 3000 --seeds 2 --rounds 2 --b 100 --n-labeled 300 --n-val 60
           --teacher-steps 200 --student-steps 100)
else
    # 56,000 training points (1,000 validation + 5,000 labeled + 50,000 pool) and 11,200 test
    SHAPE=(--n-samples 67200 --seeds 5 --rounds 4 --b 2000 --n-labeled 5000 --n-val 1000
           --batch-size 256 --teacher-steps 3000 --student-steps 1000)
fi

{
    echo "== $(date -u +%FT%TZ) device_run: KERAS_BACKEND=$KERAS_BACKEND"
    command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "no nvidia-smi"
    "$PY" - <<'EOF'
import importlib, platform
print("python", platform.python_version())
for name in ("numpy", "scipy", "keras", "jax", "torch", "tensorflow", "mnist1d"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "?"))
    except ImportError:
        print(name, "not installed")
EOF
} 2>&1 | tee "$DEST/run.log"

start=$(date +%s)
"$PY" -m rad.cli experiment --config experiments/mnist1d.json \
    --keras-backend "$KERAS_BACKEND" --strategies rad,margin,uniform \
    "${SHAPE[@]}" --output-dir "$DEST" "${PLOTS[@]}" --no-progress 2>&1 | tee -a "$DEST/run.log"
end=$(date +%s)
echo "== device_run: $((end - start)) s wall (limit 480 s for the full configuration)" \
    | tee -a "$DEST/run.log"

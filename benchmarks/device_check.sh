#!/usr/bin/env bash
# Issue 10's device check: on a bare many-core Linux machine with no network and Python,
# NumPy, Numba, pybind11, scikit-build-core, CMake and a compiler already installed, build
# rad from this checkout and measure rad.select's thread scaling against the bandwidth
# probe (one parallel sum over the same array at the same thread count). Writes one JSON
# file with every figure; about 3-5 minutes on a 16-core host with a GPU.
#
#   benchmarks/device_check.sh                       # 1e8 and 1e9, threads 1,2,4,8,16
#   benchmarks/device_check.sh --sizes 1e6 --threads 1,2 --out /tmp/x.json   # smoke test
#
# Options are passed to benchmarks/thread_scaling.py (--sizes, --threads, --repeat,
# --backends, --out, --capped). GPU_TIMEOUT and CPU_TIMEOUT (seconds) bound the two parts,
# GPU_CHECKS_TIMEOUT (default 240) the simulator's checks run on the GPU, GPU_PROFILE_TIMEOUT
# (default 120) each of the GPU's two profiles (GPU_PROFILE=0 skips them); GPU=0 skips the
# whole GPU part, CPU=0 the thread scaling, RECIPROCAL=0 the reciprocal check, STAGES=0 the C++
# stages and first-pass parts at 1e8 (results_cpp_stages.txt and results_cpp_first_pass_parts.txt,
# beside the JSON), MMAP=0 the select at 1e9 on every CPU from a page-cached read-only memory
# map (results_threads_mmap.json beside the JSON; MMAP_SIZES changes its sizes, MMAP_TIMEOUT,
# default 180, bounds it); RAD_SITE names an existing install of this checkout (pip --target)
# to use instead of building. Default output: $OUT/device_check.json if $OUT is set, else
# benchmarks/results_device.json.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
out_default="${OUT:-$here}/$( [ -n "${OUT:-}" ] && echo device_check.json || echo results_device.json )"
args=("$@")
case " ${args[*]-} " in *" --out "*) ;; *) args+=(--out "$out_default") ;; esac
case " ${args[*]-} " in *" --sizes "*) ;; *) args+=(--sizes 1e8,1e9) ;; esac
case " ${args[*]-} " in *" --threads "*) ;; *) args+=(--threads 1,2,4,8,16) ;; esac
case " ${args[*]-} " in *" --capped "*) ;; *) args+=(--capped 1e7) ;; esac

site="$(mktemp -d /tmp/rad_site.XXXXXX)"
build="$(mktemp -d /tmp/rad_build.XXXXXX)"
trap 'rm -rf "$site" "$build"' EXIT
start=$(date +%s)
# A private copy of the sources (tracked, and untracked but not ignored: a copy of the
# checkout whose git index is older than its files still builds them): the build never
# writes into the checkout.
# RAD_SITE: a directory where this checkout is already installed (pip --target): no build.
if [ -n "${RAD_SITE:-}" ]; then
  cp -r "$RAD_SITE"/. "$site"
else
  (cd "$root" && git ls-files -z -co --exclude-standard 2>/dev/null | xargs -0 -I{} cp --parents {} "$build" 2>/dev/null) \
    || cp -r "$root"/. "$build"
  rm -rf "$build"/build "$build"/python/rad/_core*.so
  python -m pip install --no-build-isolation --no-deps --no-index -q --target "$site" "$build"
  echo "built rad in $(( $(date +%s) - start )) s" >&2
fi
cd /tmp
PYTHONPATH="$site" python - <<'PY'
import rad
info = rad.backends()
assert info["cpp"]["available"], info
print("backends:", {k: v for k, v in info.items()})
PY
# Time limits per part (seconds; 0 = none): a part stopped at its limit keeps the rows it wrote.
limit() { if [ "${1:-0}" -gt 0 ]; then echo "timeout --signal=INT --kill-after=20 $1"; fi; }
# The GPU part (issue 11) first, where numba-cuda sees a GPU: rad.select on device-resident
# gains vs a GPU sum pass and the PyTorch sort-and-cumsum pipeline, checked against the CPU
# backend.
if [ "${GPU:-1}" != 0 ] && PYTHONPATH="$site" python -c "import numba.cuda as c, sys; sys.exit(0 if c.is_available() else 1)" 2>/dev/null; then
  PYTHONPATH="$site" NUMBA_CACHE_DIR="$build/numba_cache" $(limit "${GPU_TIMEOUT:-0}") \
    python "$here/device_check_gpu.py" --out "${OUT:-$here}/results_gpu.json" \
    || echo "GPU part ended with status $?" >&2
  # tests/test_cuda_sim.py's checks on the real GPU (CI runs them on the simulator): one
  # JSON line of verdicts, "ok" or the traceback, per check (GPU_CHECKS=0 skips them)
  if [ "${GPU_CHECKS:-1}" != 0 ]; then
    (cd "$root/tests" && PYTHONPATH="$site:$root/tests" NUMBA_CACHE_DIR="$build/numba_cache" \
      $(limit "${GPU_CHECKS_TIMEOUT:-240}") python -c "import test_cuda_sim as T; T._child()") \
      > "${OUT:-$here}/gpu_checks.json" || echo "GPU checks ended with status $?" >&2
    tail -c 2000 "${OUT:-$here}/gpu_checks.json" >&2 || true
  fi
  # Where a call's time goes (GPU_PROFILE=0 skips): the GPU's idle gaps by host function
  # (gpu_timeline.json) and the host's own time by function (gpu_host_profile.txt).
  if [ "${GPU_PROFILE:-1}" != 0 ] && PYTHONPATH="$site" python -c "import torch" 2>/dev/null; then
    (cd /tmp && PYTHONPATH="$site" NUMBA_CACHE_DIR="$build/numba_cache" $(limit "${GPU_PROFILE_TIMEOUT:-120}") \
      python "$here/gpu_timeline.py" --sizes 1e8 1e9 --out "$build/timeline" \
      && cp "$build/timeline/timeline.json" "${OUT:-$here}/gpu_timeline.json") || echo "GPU timeline ended with status $?" >&2
    (cd /tmp && PYTHONPATH="$site" NUMBA_CACHE_DIR="$build/numba_cache" $(limit "${GPU_PROFILE_TIMEOUT:-120}") \
      python "$here/gpu_host_profile.py" --sizes 1e8 1e9 --calls 15 --out "$build/profile" \
      && cp "$build/profile/host_profile.txt" "${OUT:-$here}/gpu_host_profile.txt") || echo "GPU host profile ended with status $?" >&2
  fi
else
  echo "GPU part skipped (GPU=0, or no GPU visible to numba-cuda)" >&2
fi
# The host's dividers against divider-free reciprocals (benchmarks/cpp_reciprocal.cpp: the
# support pass's 1/a exactly, the first pass's 1/g approximately), one JSON line.
if [ "${RECIPROCAL:-1}" != 0 ] && g++ -O3 -march=native -ffp-contract=off -fopenmp -I"$root/cpp/include" -o "$build/cpp_reciprocal" "$here/cpp_reciprocal.cpp" 2>/dev/null; then
  $(limit 60) "$build/cpp_reciprocal" > "${OUT:-$here}/results_reciprocal.json" || echo "reciprocal check ended with status $?" >&2
  cat "${OUT:-$here}/results_reciprocal.json" >&2 || true
fi
# The C++ select's stages and the first pass's parts at 1e8 on every CPU (STAGES=0 skips):
# benchmarks/cpp_stages.cpp (the sample, the first pass, the support pass, a read, the
# share of the pool inside the sample's bracket) and benchmarks/cpp_first_pass_parts.cpp.
if [ "${STAGES:-1}" != 0 ]; then
  for prog in cpp_stages cpp_first_pass_parts; do
    if g++ -O3 -march=native -ffp-contract=off -fopenmp -DRAD_HAVE_OPENMP -I"$root/cpp/include" \
        -o "$build/$prog" "$here/$prog.cpp" 2>/dev/null; then
      $(limit 120) "$build/$prog" 1e8 "$(nproc)" > "${OUT:-$here}/results_$prog.txt" \
        || echo "$prog ended with status $?" >&2
      tail -n 4 "${OUT:-$here}/results_$prog.txt" >&2 || true
    fi
  done
fi
# Issue 10's CPU part: thread scaling against the bandwidth probe.
if [ "${CPU:-1}" != 0 ]; then
  PYTHONPATH="$site" NUMBA_CACHE_DIR="$build/numba_cache" $(limit "${CPU_TIMEOUT:-0}") \
    python "$here/thread_scaling.py" "${args[@]}" || echo "CPU part ended with status $?" >&2
fi
# The issue's "memory map, page-cached" case: the pool written to a .npy file, read once,
# then selected from a read-only memory map on every CPU (MMAP=0 skips).
if [ "${MMAP:-1}" != 0 ]; then
  PYTHONPATH="$site" NUMBA_CACHE_DIR="$build/numba_cache" $(limit "${MMAP_TIMEOUT:-180}") \
    python "$here/thread_scaling.py" --sizes "${MMAP_SIZES:-1e9}" --threads "$(nproc)" --repeat 3 \
    --mmap "$build" --out "${OUT:-$here}/results_threads_mmap.json" \
    || echo "memory-map part ended with status $?" >&2
fi
echo "device check done in $(( $(date +%s) - start )) s" >&2

#!/usr/bin/env bash
# The GPU part of the device check for two source trees, one after the other on the same
# GPU in one run (GPU timings are only comparable on the same card):
#
#   git archive <old-commit> | (mkdir -p /tmp/old && tar -x -C /tmp/old)
#   bash benchmarks/gpu_before_after.sh /tmp/old            # old tree vs this checkout
#
# Each tree is built into its own private site (pip --no-build-isolation --no-deps
# --no-index, as benchmarks/device_check.sh does) and timed by this checkout's
# benchmarks/device_check_gpu.py (it reaches the backend's private kernels only where
# both trees have them). JSON: $OUT (or benchmarks/) results_gpu_before.json and
# results_gpu_after.json. SIZES overrides the pool sizes (default "1e8 1e9").
#
# ROUNDS=k (default 1) alternates the two trees k times, the order reversed each round
# (before, after; after, before; ...), since one tree's run after the other's can see a
# warmer GPU or a busier host; round r > 1 writes results_gpu_<label>_r<r>.json. A round
# starts only while the clock is before DEADLINE (seconds since the epoch), if set.
# AB_DIR keeps the two builds (AB_DIR/before/site, AB_DIR/after/site) for a later call,
# which skips building them; FIRST_ROUND=r starts that call at round r.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
old="$(cd "${1:?usage: gpu_before_after.sh OLD_TREE [NEW_TREE]}" && pwd)"
new="$(cd "${2:-$root}" && pwd)"
out="${OUT:-$here}"
mkdir -p "$out"
if [ -n "${AB_DIR:-}" ]; then  # kept: a later call reuses its builds (and other steps their sites)
  tmp="$AB_DIR"; mkdir -p "$tmp"
else
  tmp="$(mktemp -d /tmp/rad_ab.XXXXXX)"
  trap 'rm -rf "$tmp"' EXIT
fi
for label in before after; do
  src="$old"; [ "$label" = after ] && src="$new"
  [ -d "$tmp/$label/site/rad" ] && continue  # built by an earlier call with the same AB_DIR
  mkdir -p "$tmp/$label/src" "$tmp/$label/site"
  (cd "$src" && tar --exclude=./build --exclude='./python/rad/_core*.so' --exclude=./.git -cf - .) \
    | tar -xf - -C "$tmp/$label/src"
  # both trees build at once (a many-core host): the timings below start after both are done
  python -m pip install --no-build-isolation --no-deps --no-index -q --target "$tmp/$label/site" "$tmp/$label/src" &
done
wait
for round in $(seq "${FIRST_ROUND:-1}" "${ROUNDS:-1}"); do
  if [ -n "${DEADLINE:-}" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then
    echo "round $round not started: DEADLINE passed" >&2
    break
  fi
  order="before after"; [ $((round % 2)) -eq 0 ] && order="after before"
  suffix=""; [ "$round" -gt 1 ] && suffix="_r$round"
  for label in $order; do
    echo "== round $round: $label" >&2
    (cd /tmp && PYTHONPATH="$tmp/$label/site" NUMBA_CACHE_DIR="$tmp/$label/cache" \
      python "$here/device_check_gpu.py" --sizes ${SIZES:-1e8 1e9} --out "$out/results_gpu_$label$suffix.json") \
      || echo "$label: device_check_gpu.py ended with status $?" >&2
  done
done

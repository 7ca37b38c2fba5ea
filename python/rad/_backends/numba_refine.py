"""The Numba backend's second sample for the search's bracket (``docs/design.md`` §3).

``refine_bracket`` in ``cpp/include/rad/threshold.hpp``, for RAD losses (``a = (1 + w) g``):
from 2^24 points :func:`rad._backends.radix_select.sample_bracket` draws a 2^14-point
sample and hands its bracket here. A larger strided sample (runs of :data:`RUN` points,
on every thread) sums the terms of ``D(t) = t H - G + m`` and of their squares over its
points above the bracket and keeps the few inside; those are binned into :data:`BINS`
ranges of the bracket's bits, and a scan down the bins puts the new edges where ``D``'s
estimate is within :data:`SIGMAS` standard deviations of zero or, whichever is wider,
at the ranks ``r -+ (4 sqrt(r) + 32)`` around the first failing bin. A bracket only
steers the speed (the pass detects a miss and falls back), so the sums are approximate
(reassociated to vector lanes). The run sums are added in run order: the bracket does
not depend on the thread count. It may differ from the C++ one in the last bits of its
sums, and so in an edge; the answer never does.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from rad._backends import radix_select as _radix
from rad._backends.numba_backend import _bits, _jit, _prefetch_run

__all__ = ["BINS", "RUN", "SIGMAS", "refine_bracket"]

#: Points in one run of the sample.
RUN = 256
#: Ranges of the first bracket's bits that the points inside are binned into.
BINS = 1 << 12
#: The margin in ``D``, in standard deviations of its estimate.
SIGMAS = 4.0

# Reassociation lets the run sums use vector lanes; no other fast-math flag (a NaN must
# still fail the validity test).
_pjit_reassoc = nb.njit(cache=True, nogil=True, parallel=True, error_model="numpy", fastmath={"reassoc"})


@_pjit_reassoc
def _run_sums(g, hi_v, lo_v, big, stride, runs, s1, s2, above, inside, bad, slots):
    """Per run: sums of ``1/g`` and ``1/g^2`` above ``hi_v``, counts above, inside, invalid.

    The sums in the gains' precision. The points inside (those in ``[lo_v, hi_v)``) go to
    the run's own ``RUN`` slots, branch-free: each point is written at the next free slot,
    which only an inside point takes.
    """
    one, zero = np.float32(1.0), np.float32(0.0)
    ahead = 4 * stride - 4096 // g.itemsize  # the run 4 on, less _prefetch_run's own distance
    for r in nb.prange(runs):
        base = stride * r
        if r + 4 < runs:  # a strided read waits a memory latency a line otherwise
            _prefetch_run(g, base + ahead, RUN)
        a1 = zero
        a2 = zero
        up_n = 0
        in_n = 0
        bad_n = 0
        for j in range(RUN):
            v = g[base + j]
            up = v >= hi_v
            x = one / v
            x = x if up else zero
            a1 += x
            a2 += x * x
            up_n += up
            bad_n += (v < 0) | (v > big) | (v != v)
        for j in range(RUN):  # apart: the loop above stays in vector lanes
            v = g[base + j]
            slots[r * RUN + in_n] = v
            in_n += (v >= lo_v) & (v < hi_v)
        s1[r] = a1
        s2[r] = a2
        above[r] = up_n
        inside[r] = in_n
        bad[r] = bad_n


@_jit
def _bin_inside(slots, raw, sign, inside, lo, sh, w, cnt, per_bin):
    """The points inside, run by run, into their bins (``(bits - lo) >> sh``).

    Per bin the count and the sums of ``x``, ``g x``, ``x^2``, ``g x^2``, ``g^2 x^2``
    (``x = 1/a``, ``a = g + w g``); ``raw`` is ``slots``' bits, ``sign`` -0.0's.
    """
    for r in range(inside.shape[0]):
        for j in range(inside[r]):
            v = slots[r * RUN + j]
            k = (_bits(raw[r * RUN + j], sign) - lo) >> sh
            y = np.float64(v)
            a = y + w * y
            x = 1.0 / a if a > 0 else 0.0
            cnt[k] += 1
            per_bin[0, k] += x
            per_bin[1, k] += y * x
            per_bin[2, k] += x * x
            per_bin[3, k] += y * x * x
            per_bin[4, k] += y * y * x * x


def refine_bracket(gains: np.ndarray, w: float, m: float, lo: int, hi: int, size: int) -> tuple[int, int]:
    """The bracket ``[lo, hi)`` (ordered bits) narrowed by a strided sample of ``size`` gains.

    ``(lo, hi)`` itself where the sample holds an invalid value or the scan leaves it.
    Runs on Numba's current thread count (the caller sets it).
    """
    n = gains.shape[0]
    size -= size % RUN
    if size < 2 * RUN or size > n // 2 or hi <= lo:
        return lo, hi
    nbits = 32 if gains.dtype == np.float32 else 64
    dt, ut = (np.float32, np.uint32) if nbits == 32 else (np.float64, np.uint64)
    runs = size // RUN
    stride = (n - RUN) // (runs - 1)
    hi_v, lo_v = dt(_radix.edge_value(hi, nbits)), dt(_radix.edge_value(lo, nbits))
    s1, s2 = np.empty(runs), np.empty(runs)
    above, inside, bad = np.empty(runs, np.int64), np.empty(runs, np.int64), np.empty(runs, np.int64)
    slots = np.empty(size, dt)
    _run_sums(gains, hi_v, lo_v, dt(np.finfo(dt).max), stride, runs, s1, s2, above, inside, bad, slots)
    if bad.any():
        return lo, hi
    # The sums over the sample's points above the bracket, in run order: with a = g / c,
    # x = c / g, g x = c, x^2 = c^2 / g^2, g x^2 = c^2 / g, g^2 x^2 = c^2 (SampleSums in C++).
    c = 1.0 / (1.0 + w)
    n_above = int(above.sum())
    r1, r2 = float(np.cumsum(s1)[-1]), float(np.cumsum(s2)[-1])
    top = np.array([c * r1, c * n_above, c * c * r2, c * c * r1, c * c * n_above])
    # The points inside, binned into BINS ranges of the bracket's bits.
    sh = _radix.bracket_shift(lo, hi, BINS)
    cnt = np.zeros(BINS, np.int64)
    per_bin = np.zeros((5, BINS))
    sign = ut(1) << ut(nbits - 1)
    _bin_inside(slots, slots.view(ut), sign, inside, np.uint64(lo), np.uint64(sh), float(w), cnt, per_bin)
    # Down the bins from the top: the sums over the points at or above each bin's lower
    # edge, D there and its standard deviation.
    down = np.arange(BINS - 1, -1, -1)
    sums = top[:, None] + np.cumsum(per_bin[:, down], axis=1)
    edge_bits = np.uint64(lo) + (down.astype(np.uint64) << np.uint64(sh))
    f = n / size

    def d_and_sd(e, at):  # D's estimate at e from the sums `at`, and its standard deviation
        return (e * f * at[0] - f * at[1] + m,
                f * np.sqrt(np.maximum(0.0, e * e * at[2] - 2.0 * e * at[3] + at[4])))

    with np.errstate(all="ignore"):  # edges past the largest float are NaN: never certain
        d_top, sd_top = d_and_sd(float(hi_v), top)
        if d_top + SIGMAS * sd_top < 0:  # tau certainly above the bracket: keep it
            return lo, hi
        d, sd = d_and_sd(_radix.edge_values(edge_bits, nbits), sums)
        certain_fail = np.flatnonzero(d + SIGMAS * sd < 0)
        stop = int(certain_fail[0]) if certain_fail.shape[0] else BINS  # the scan ends there
        sure_above = np.logical_and.accumulate(d - SIGMAS * sd >= 0)
    lo_d, hi_d = lo, hi
    held = np.flatnonzero(sure_above[:stop] & (cnt[down[:stop]] > 0))
    if held.shape[0]:
        hi_d = min(hi, lo + ((int(down[held[-1]]) + 1) << sh))
    if stop < BINS:
        lo_d = lo + (int(down[stop]) << sh)
    # The rank margin (r counted from the top of the whole sample; with no bin failing,
    # tau's rank is the last).
    fails = np.flatnonzero(d[:stop + 1] < 0) if stop < BINS else np.flatnonzero(d < 0)
    seen = np.concatenate(([0], np.cumsum(cnt[down])))  # points inside above bin down[i]
    if fails.shape[0]:
        i = int(fails[0])
        before, in_fail = int(seen[i]), int(cnt[down[i]])
    else:
        before, in_fail = int(seen[-1]), 0
    delta = int(4.0 * np.sqrt(n_above + before + in_fail // 2 + 1.0)) + 32
    lo_r, hi_r = lo, hi
    if before - delta >= 0:
        q = int(np.searchsorted(seen, before - delta, side="right")) - 1  # the bin holding that rank
        if q < BINS:
            hi_r = min(hi, lo + ((int(down[q]) + 1) << sh))
    past = np.flatnonzero(seen > before + in_fail + delta)
    if past.shape[0]:
        lo_r = lo + (int(down[int(past[0]) - 1]) << sh)
    return min(lo_d, lo_r), max(hi_d, hi_r)

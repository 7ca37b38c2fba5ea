"""The level loop of the sort-free search for Theorem 1's support (``docs/design.md`` §1).

With ``D(t) = t H(>t) - G(>t) + m`` (``H``, ``G``: sums of ``1/a`` and ``g/a`` over points
with ``g > t``), a tie group at gain ``y`` joins the support iff ``D(y) >= 0``, and ``D``
increases with ``t``. So the support is ``{g >= tau}`` with ``tau`` the smallest gain with
``D >= 0``: a radix select over the float bit patterns, 16 bits per level. Each level
asks a backend's :meth:`~rad._backends.contract.Kernels.bit_histogram`, scans the bins
from the top to the first whose lower edge has ``D < 0``, and descends into it; a bin with
few points is gathered (:meth:`~rad._backends.contract.Kernels.bit_gather`) and resolved
exactly. A decision within rounding of a tie is reported (status 1) so that the caller
consults the sorted scan: both paths always agree. The C++ backend runs the same loop in
``cpp/include/rad/threshold.hpp``; :mod:`rad.dask` runs it over chunk histograms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rad._backends.contract import FloatArray, Kernels

__all__ = ["DIGIT", "GATHER_MAX", "NBINS", "radix_select", "threshold_search"]

#: Bits resolved per level, and the bins of one level's histogram.
DIGIT = 16
NBINS = 1 << DIGIT
#: A boundary bin with at most this many points is gathered and resolved exactly.
GATHER_MAX = 1 << 18

#: ``(shift, pshift, prefix) -> (count, sum 1/a, sum g/a, min g, any invalid)`` per bin.
Histogram = Callable[[int, int, int], tuple[Any, Any, Any, Any, bool]]
#: ``(shift, key, count) -> (g, a)`` of one bin's points.
Gather = Callable[[int, int, int], tuple[Any, Any]]


def edge_value(u: int, nbits: int) -> float:
    """The float whose ordered bit pattern is ``u``."""
    dtype = np.uint32 if nbits == 32 else np.uint64
    return float(np.array([u], dtype=dtype).view(np.float32 if nbits == 32 else np.float64)[0])


def edge_values(u: Any, nbits: int) -> Any:
    """:func:`edge_value` of every ordered bit pattern in ``u`` (uint64), as float64."""
    if nbits == 32:
        return u.astype(np.uint32).view(np.float32).astype(np.float64)
    return u.astype(np.uint64).view(np.float64)



#: The sums, count, minimum and D before a bin joined (:func:`scan_bins`).
Reopened = tuple[float, float, int, float, float]


def radix_select(histogram: Histogram, gather: Gather, nbits: int, m: float) -> tuple[int, float, int, float]:
    """The level loop of the sort-free search, over any source of histograms.

    ``histogram(shift, pshift, prefix)`` returns per-bin ``(count, sum 1/a, sum g/a, min g,
    any_invalid)`` over the points whose bits above ``pshift`` equal ``prefix``;
    ``gather(shift, key, count)`` returns the ``(g, a)`` of the points of one bin. A single
    array (this module) and a Dask array (:mod:`rad.dask`) share this loop.
    """
    inf = float("inf")
    acc_h = acc_g = 0.0
    acc_n = 0
    last_min, pass_d, fail_d = inf, inf, -inf
    prefix, shift, level = 0, nbits - DIGIT, 0
    g_total = 0.0
    scale = m
    while True:
        pshift = shift + DIGIT
        cnt, hh, gg, mn, bad = histogram(shift, pshift, prefix)
        if bad:
            return 2, 0.0, 0, 0.0
        if level == 0:
            g_total = 0.0
            for v in gg.tolist():
                g_total += v
            scale += g_total
        base = (prefix << pshift) if pshift < nbits else 0
        boundary, lowest, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, reopened = scan_bins(
            cnt, hh, gg, mn, base, shift, nbits, m, acc_h, acc_g, acc_n, last_min, pass_d, fail_d
        )
        if boundary < 0:
            if lowest < 0:
                return 0, 0.0, 0, g_total
            acc_h, acc_g, acc_n, last_min, pass_d = reopened
            boundary = lowest
        key = (((prefix << DIGIT) if pshift < nbits else 0) | boundary)
        if cnt[boundary] > GATHER_MAX and shift > 0:
            prefix, shift, level = key, shift - DIGIT, level + 1
            continue
        vals, avals = gather(shift, key, int(cnt[boundary]))
        return resolve_gathered(vals, avals, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, m, g_total, scale)


def scan_bins(
    cnt: Any, hh: Any, gg: Any, mn: Any, edge_base: int, shift: int, nbits: int, m: float,
    acc_h: float, acc_g: float, acc_n: int, last_min: float, pass_d: float, fail_d: float,
) -> tuple[int, int, float, float, int, float, float, float, Reopened]:
    """Walk the non-empty bins from the top to the first whose lower edge has ``D < 0``.

    Bin ``b``'s lower edge has the ordered bit pattern ``edge_base + (b << shift)`` (the
    level's prefix bits, disjoint from the bin's, or the bracket's low end). Every bin passed
    joins the sums above (``acc_*``) and sets ``last_min`` and ``pass_d``. Returns
    ``(boundary, lowest, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, reopened)``:
    ``boundary`` is the failing bin (-1 when every bin passed), ``lowest`` the last bin
    visited (-1 when none is non-empty) and ``reopened`` the state before the lowest bin
    joined, ``(acc_h, acc_g, acc_n, last_min, pass_d)``: where every bin passes, the lowest
    is resolved point by point from there (not by subtracting its sums, which cancels when
    the sums above are far smaller than the bin's). The level loop and the bracketed pass
    share it.
    """
    cnt = np.asarray(cnt)
    bins = np.flatnonzero(cnt)[::-1]
    before = (acc_h, acc_g, acc_n, last_min, pass_d)
    if bins.shape[0] == 0:
        return -1, -1, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, before
    edges = edge_values(np.uint64(edge_base) + (bins.astype(np.uint64) << np.uint64(shift)), nbits)
    # the running sums bin by bin, added in the loop's order (cumsum is sequential)
    h2 = np.cumsum(np.concatenate(([acc_h], np.asarray(hh, dtype=np.float64)[bins])))[1:]
    g2 = np.cumsum(np.concatenate(([acc_g], np.asarray(gg, dtype=np.float64)[bins])))[1:]
    with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN as Python floats give them
        d_edge = edges * h2 - g2 + m
    fails = np.flatnonzero(d_edge < 0)
    j = int(fails[0]) if fails.shape[0] else bins.shape[0]  # bins before j pass
    boundary = int(bins[j]) if fails.shape[0] else -1
    lowest = boundary if fails.shape[0] else int(bins[-1])
    if fails.shape[0]:
        fail_d = float(d_edge[j])
    if not fails.shape[0] and j > 1:  # every bin passed (j is the number of bins): the state before the lowest
        before = (float(h2[j - 2]), float(g2[j - 2]), acc_n + int(cnt[bins[: j - 1]].sum()),
                  float(mn[int(bins[j - 2])]), float(d_edge[j - 2]))
    if j > 0:
        pass_d, acc_h, acc_g = float(d_edge[j - 1]), float(h2[j - 1]), float(g2[j - 1])
        acc_n += int(cnt[bins[:j]].sum())
        last_min = float(mn[int(bins[j - 1])])
    return boundary, lowest, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, before


def resolve_gathered(
    vals: Any, avals: Any, acc_h: float, acc_g: float, acc_n: int, last_min: float, pass_d: float,
    fail_d: float, m: float, g_total: float, scale: float,
) -> tuple[int, float, int, float]:
    """Resolve a gathered boundary bin exactly: its tie groups in descending order.

    ``acc_*`` are the sums over the points known to join, ``pass_d``/``fail_d`` the D
    values that bound the decisions next to the bin (D at the edges of the neighbouring
    bins). Returns ``(status, tau, k*, g_total)``; status 1 flags a near tie.
    """
    inf = float("inf")
    vals = np.asarray(vals, dtype=np.float64)
    avals = np.asarray(avals, dtype=np.float64)
    order = np.argsort(-vals, kind="stable")
    vals, avals = vals[order], avals[order]
    h, gs, tau, k = acc_h, acc_g, last_min, acc_n
    d_in, d_out = pass_d, fail_d
    n = vals.shape[0]
    if n:
        # The walk over the tie groups in descending order, as running sums: the points
        # are added one by one in this order (cumsum is sequential; a point with a <= 0
        # adds 0.0, which leaves these sums of non-negative terms unchanged), and D is
        # tested at each group's first point: the first group with D < 0 stops the walk.
        with np.errstate(all="ignore"):
            pos = avals > 0
            safe = np.where(pos, avals, 1.0)
            hs = np.cumsum(np.concatenate(([h], np.where(pos, 1.0 / safe, 0.0))))
            gss = np.cumsum(np.concatenate(([gs], np.where(pos, vals / safe, 0.0))))
            starts = np.flatnonzero(np.concatenate(([True], vals[1:] != vals[:-1])))
            d = vals[starts] * hs[starts] - gss[starts] + m
        fails = np.flatnonzero(d < 0)
        passed = int(fails[0]) if fails.shape[0] else starts.shape[0]  # groups that join
        end = int(starts[passed]) if fails.shape[0] else n
        if fails.shape[0]:
            d_out = float(d[passed])
        if passed > 0:
            last = int(starts[passed - 1])
            tau = float(vals[last])
            d_in = inf if k + last == 0 else float(d[passed - 1])
        h, gs, k = float(hs[end]), float(gss[end]), k + end
    margin = 1e-10 * (abs(tau) * h + gs + m)
    status = int(abs(d_in) < margin or abs(d_out) < margin or abs(g_total - m) < 1e-10 * scale)
    if not all(np.isfinite([h, gs, g_total])) or d_in != d_in or d_out != d_out:
        status = 1  # 1/a overflowed (subnormal input): let the sorted scan decide
    return status, tau, k, g_total


# ------------------------------------------------------------------ bracketed first pass
# The default search of the compiled backends (cpp/include/rad/threshold.hpp has the same
# steps): a strided sample brackets tau, one pass sums the points above the bracket and
# histograms the few inside it into FINE bins, the boundary bin is gathered and resolved.

#: Bins of the histogram of the points inside a bracket.
FINE = 1 << 12
#: Sample size (2^14 below 2^24 gains: the sample's sort is a fixed cost) and the
#: contiguous run length of the bracket's sample.
SAMPLE, SAMPLE_SMALL, SAMPLE_RUN = 1 << 16, 1 << 14, 64


def refine_size(n: int) -> int:
    """The second sample's size at n gains (``refine_size`` in threshold.hpp).

    ``(7 n)^(2/3)`` as a power of two in ``[2^16, 2^22]``; 0 below 2^24 gains (no second sample).
    """
    if n < 1 << 24:
        return 0
    bits = round(np.log2(np.cbrt((7.0 * n) ** 2)))
    return 1 << min(22, max(16, int(bits)))


def ordered_bits(x: float, nbits: int) -> int:
    """The ordered bit pattern of a non-negative float (``-0.0`` folded onto 0)."""
    if x == 0:
        return 0
    dtype = np.float32 if nbits == 32 else np.float64
    return int(np.array([x], dtype=dtype).view(np.uint32 if nbits == 32 else np.uint64)[0])


def full_bracket(nbits: int) -> tuple[int, int]:
    """The bracket holding every finite non-negative value."""
    return 0, ordered_bits(float("inf"), nbits)


def sample_rank(y: Any, a: Any, f: float, m: float) -> int:
    """The sample's threshold scan: the first rank whose ``D`` (sums scaled by ``f``) is negative.

    ``y`` descending with ``a`` alongside; ``len(y)`` if every rank passes. ``D`` of rank
    ``j`` is ``y_j f H_j - f G_j + m`` with ``H_j``, ``G_j`` the sequential sums of ``1/a``
    and ``y/a`` over the ranks before ``j`` (0 where ``a <= 0``). The Numba backend has a
    compiled twin with an early exit (``numba_backend._sample_rank``), bit for bit.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r_ = np.where(a > 0, 1.0 / np.where(a > 0, a, 1.0), 0.0)
        h = np.concatenate(([0.0], np.cumsum(r_)[:-1]))
        g = np.concatenate(([0.0], np.cumsum(y * r_)[:-1]))
        fails = np.flatnonzero(y * f * h - f * g + m < 0)
    return int(fails[0]) if fails.shape[0] else int(y.shape[0])


def sample_bracket(
    gains: FloatArray, losses: FloatArray | None, w: float, m: float, sample: int | None = None,
    rank: Callable[[Any, Any, float, float], int] = sample_rank,
    refine: Callable[[Any, float, float, int, int, int], tuple[int, int]] | None = None,
) -> tuple[int, int]:
    """``(lo, hi)`` ordered bits bracketing tau, from a strided sample of 2^14 or 2^16 gains.

    The sample's own threshold scan (``rank``: sums scaled by ``n / sample size``) gives a
    rank ``r``; the bracket spans the sample ranks ``r -+ (4 sqrt(r) + 32)``. ``sample``
    overrides the sample size (the CUDA backend passes a sample it gathered: all of it).
    With ``refine`` (``(gains, w, m, lo, hi, size) -> (lo, hi)``, a second sample's
    narrowing: :func:`rad._backends.numba_refine.refine_bracket`) and from 2^24 gains, the
    sample is 2^14 gains and its bracket is handed to ``refine`` with :func:`refine_size`.
    """
    nbits = 32 if gains.dtype == np.float32 else 64
    n = gains.shape[0]
    second = refine_size(n) if refine is not None and sample is None else 0
    if sample is None:
        sample = SAMPLE if n >= 1 << 24 and not second else SAMPLE_SMALL
    if n <= sample:
        idx = np.arange(n)
    else:
        runs = sample // SAMPLE_RUN
        starts = (n - SAMPLE_RUN) // (runs - 1) * np.arange(runs)
        idx = (starts[:, None] + np.arange(SAMPLE_RUN)[None, :]).ravel()
    raw = np.array(gains[idx])  # a copy in the gains' dtype
    if raw.shape[0] == 0 or not np.all((raw >= 0) & (raw <= np.finfo(gains.dtype).max)):
        return full_bracket(nbits)
    if losses is None:  # a follows y: a plain sort (the order among equal gains is immaterial)
        raw.sort()  # in place, in the gains' dtype (float32 sorts twice as fast)
        y = raw.astype(np.float64)[::-1]
        a = y + w * y
    else:
        y = raw.astype(np.float64)
        a = y + np.asarray(losses[idx], dtype=np.float64)
        order = np.argsort(-y, kind="stable")
        y, a = y[order], a[order]
    ns = y.shape[0]
    r = rank(y, a, n / ns, m)
    delta = int(4.0 * np.sqrt(r + 1.0)) + 32
    lo, hi = full_bracket(nbits)
    if r - delta >= 0:
        hi = ordered_bits(float(y[r - delta]), nbits) + 1
    if r + delta < ns:
        lo = ordered_bits(float(y[r + delta]), nbits)
    return refine(gains, w, m, lo, hi, second) if refine is not None and second else (lo, hi)


#: ``() -> (bad, g_total, h_above, g_above, n_above, min_above, n_below, cnt, h, g, min)``.
BracketPass = Callable[[], tuple[Any, ...]]
#: ``(bin) -> (g, a)`` of the points of one fine bin.
BracketGather = Callable[[int], tuple[Any, Any]]


def bracket_shift(lo: int, hi: int, fine: int = FINE) -> int:
    """The shift that maps the ordered bits ``[lo, hi)`` onto at most ``fine`` bins."""
    sh = 0
    while ((hi - lo - 1) >> sh) >= fine:
        sh += 1
    return sh


def bracket_resolve(
    pass_result: tuple[Any, ...], lo: int, hi: int, sh: int, nbits: int, m: float,
    gather: BracketGather, fallback: Callable[[], tuple[int, float, int, float]],
) -> tuple[int, float, int, float]:
    """The decisions after the bracketed pass (mirrors threshold_bracketed in threshold.hpp)."""
    inf = float("inf")
    bad, g_total, acc_h, acc_g, acc_n, last_min, n_below, cnt, hh, gg, mn = pass_result
    if bad:
        return 2, 0.0, 0, 0.0
    g_total = float(g_total)
    scale = m + g_total
    acc_h, acc_g, acc_n, last_min = float(acc_h), float(acc_g), int(acc_n), float(last_min)
    pass_d, fail_d = inf, -inf
    if acc_n > 0:
        d = edge_value(hi, nbits) * acc_h - acc_g + m
        if d < 0:
            return fallback()
        pass_d = d
    boundary, lowest, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, reopened = scan_bins(
        cnt, hh, gg, mn, lo, sh, nbits, m, acc_h, acc_g, acc_n, last_min, pass_d, fail_d
    )
    if boundary < 0:
        if lowest < 0:
            return fallback()
        if n_below > 0:
            d_lo = edge_value(lo, nbits) * acc_h - acc_g + m
            if not d_lo < 0:
                return fallback()
            fail_d = d_lo
        acc_h, acc_g, acc_n, last_min, pass_d = reopened
        boundary = lowest
    if int(cnt[boundary]) > GATHER_MAX:
        return fallback()
    vals, avals = gather(boundary)
    return resolve_gathered(vals, avals, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, m, g_total, scale)


def threshold_search(
    kernels: Kernels, gains: FloatArray, losses: FloatArray | None, w: float, m: float, threads: int
) -> tuple[int, float, int, float]:
    """The sort-free search on one array through a backend's histogram and gather kernels."""
    nbits = 32 if gains.dtype == np.float32 else 64

    def histogram(shift: int, pshift: int, prefix: int) -> tuple[Any, Any, Any, Any, bool]:
        return kernels.bit_histogram(gains, losses, w, shift, pshift, prefix, threads)

    def gather(shift: int, key: int, count: int) -> tuple[Any, Any]:
        return kernels.bit_gather(gains, losses, w, shift, key, count, threads)

    return radix_select(histogram, gather, nbits, float(m))

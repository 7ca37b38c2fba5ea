"""Selections from the top of a streamed vector, in O(n): radix select on the float bits.

* :func:`select_top` -- the sum of the ``k`` largest values (``k`` real) and that
  threshold: the attacked mass ``sum of the m largest q_i a_i`` of the lower bound and the
  sampler's ``sum of the b largest g_i - u_i a_i`` of the upper bound;
* :func:`weighted_select` -- the threshold where the weight of the values above reaches
  ``k``, with sums of extra quantities above, at and below it: the fractional knapsack of
  the adversary's water search (:mod:`rad.verify.adversary`).

With one chunk both sort (or partition); with several they run a radix select over
:func:`float_keys` -- unsigned integers in the order of the doubles -- 16 bits a pass, with
per-bucket counts and sums, and finish by collecting a small bucket (at most
:data:`COLLECT` values). Usually two passes, at most five; memory ``O(chunk + 2**16)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rad.verify.chunked import ChunkFn, chunk_sum, parallel_fold, parallel_map

__all__ = [
    "COLLECT",
    "CLUSTER",
    "StreamedWeights",
    "Top",
    "WeightedCut",
    "bit_distance",
    "bit_midpoint",
    "float_from_key",
    "float_keys",
    "select_top",
    "weighted_select",
]

#: A selection bucket at most this big is finished by collecting it (one more pass).
COLLECT = 1 << 20
#: Bits of the key resolved per pass, and the histogram size.
_DIGIT = 16
_NBINS = 1 << _DIGIT
#: Relative width below which a selection bucket counts as one value (see select_top).
CLUSTER = 64 * float(np.finfo(np.float64).eps)

_SIGN = np.uint64(1 << 63)


def float_keys(x: np.ndarray) -> np.ndarray:
    """Unsigned keys whose order is the order of the doubles ``x`` (no NaN)."""
    bits = (x + 0.0).view(np.uint64)  # + 0.0 folds -0.0 into 0.0
    if not np.signbit(x).any():  # the common case: no negative value
        return bits | _SIGN
    return np.where(bits >= _SIGN, ~bits, bits | _SIGN)


def float_from_key(key: int) -> float:
    """The double whose :func:`float_keys` key is ``key`` (the inverse of the key map)."""
    k = np.uint64(key)
    bits = k ^ _SIGN if k >= _SIGN else ~k
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


#: The input of :func:`weighted_select`: ``stream(lo, hi)`` returns the values, their
#: non-negative weights (None: all 1) and the per-item quantities to be summed.
StreamedWeights = Callable[[int, int], "tuple[np.ndarray, np.ndarray | None, list[np.ndarray]]"]


@dataclass(frozen=True)
class WeightedCut:
    """A weighted selection: the threshold ``t`` and sums above, at and below it.

    ``t`` is where the weight of the values above reaches ``k``
    (``W_above < k <= W_above + W_at``).
    """

    t: float
    w_above: float
    e_above: np.ndarray  # one sum per extra quantity
    w_at: float
    e_at: np.ndarray
    e_below: np.ndarray  # over positive-weight values below t


def weighted_select(
    stream: StreamedWeights, ranges: list[tuple[int, int]], k: float, n_extra: int, workers: int = 1
) -> WeightedCut:
    """Weighted selection from the top of a streamed vector (O(n), at most 5 passes).

    ``stream(lo, hi)`` returns the values ``x``, non-negative weights ``w`` (None: all 1)
    and ``n_extra`` per-item quantities to be summed. Requires ``0 < k <= sum w``.

    One chunk: a sort. Several: a radix select on :func:`float_keys`, 16 bits per pass with
    per-bucket weight and extra sums; a bucket of at most ``COLLECT`` points is collected
    and finished by sorting. Memory ``O(chunk + 2**16 (2 + n_extra) + COLLECT)``.

    Parameters
    ----------
    stream : StreamedWeights
        ``stream(lo, hi) -> (x, w, extras)`` on the chunk ``[lo, hi)``.
    ranges : list of (int, int)
        The chunks.
    k : float
        The weight to select from the top, ``0 < k <= sum w``.
    n_extra : int
        How many per-item quantities ``stream`` returns.
    workers : int, default 1
        Threads for the passes (:func:`~rad.verify.chunked.parallel_map`).

    Returns
    -------
    WeightedCut
    """

    def finish(
        x: np.ndarray,
        w: np.ndarray,
        e: list[np.ndarray],
        w_above: float,
        e_above: list[float],
        e_below: list[float],
    ) -> WeightedCut:
        order = np.argsort(-x, kind="stable")
        x, w, e = x[order], w[order], [q[order] for q in e]
        _, start = np.unique(-x, return_index=True)  # groups of equal x, descending
        gw = np.add.reduceat(w, start) if x.shape[0] else np.zeros(0)
        cum = np.cumsum(gw)
        j = int(np.searchsorted(cum, k - w_above, side="left"))
        j = min(j, gw.shape[0] - 1)
        s0 = int(start[j])
        s1 = int(start[j + 1]) if j + 1 < start.shape[0] else x.shape[0]
        e_a = np.array([ea + chunk_sum(q[:s0]) for ea, q in zip(e_above, e)])
        e_t = np.array([chunk_sum(q[s0:s1]) for q in e])
        e_b = np.array([eb + chunk_sum(q[s1:]) for eb, q in zip(e_below, e)])
        return WeightedCut(
            t=float(x[s0]),
            w_above=w_above + chunk_sum(w[:s0]),
            e_above=e_a,
            w_at=chunk_sum(w[s0:s1]),
            e_at=e_t,
            e_below=e_b,
        )

    def full(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        x, w, e = stream(lo, hi)
        return x, (np.ones(x.shape[0]) if w is None else w), e

    if len(ranges) == 1:
        x, w, e = full(*ranges[0])
        keep = w > 0
        return finish(x[keep], w[keep], [q[keep] for q in e], 0.0, [0.0] * n_extra, [0.0] * n_extra)

    w_above = 0.0
    e_above = [0.0] * n_extra
    e_below = [0.0] * n_extra
    prefix = 0
    shift = 64
    while True:
        shift -= _DIGIT

        def hist(
            lo: int, hi: int, shift: int = shift, prefix: int = prefix
        ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
            x, w, e = full(lo, hi)
            key = float_keys(x)
            sel = w > 0
            if shift + _DIGIT < 64:
                sel &= (key >> np.uint64(shift + _DIGIT)) == np.uint64(prefix)
            key, w = key[sel], w[sel]
            d = ((key >> np.uint64(shift)) & np.uint64(_NBINS - 1)).astype(np.intp)
            return (
                np.bincount(d, minlength=_NBINS),
                np.bincount(d, weights=w, minlength=_NBINS),
                [np.bincount(d, weights=q[sel], minlength=_NBINS) for q in e],
            )

        folded = parallel_fold(hist, ranges, workers, _add_histograms)
        assert folded is not None  # ranges is never empty
        cn, cw, ce = folded
        desc = np.cumsum(cw[::-1])  # weight of digits >= NBINS-1-j
        j = int(np.searchsorted(desc, k - w_above, side="left"))
        nz = np.flatnonzero(cn)
        d = min(_NBINS - 1 - j, int(nz[-1])) if nz.shape[0] else 0
        d = max(d, int(nz[0])) if nz.shape[0] else 0
        if cn[d] == 0:  # rounding pushed the target past the last non-empty digit
            d = int(nz[nz <= d][-1]) if np.any(nz <= d) else int(nz[0])
        w_above += float(np.sum(cw[d + 1 :]))
        for i, acc in enumerate(ce):
            e_above[i] += float(np.sum(acc[d + 1 :]))
            e_below[i] += float(np.sum(acc[:d]))
        prefix = (prefix << _DIGIT) | d
        if shift == 0:  # one exact key: every value in the bucket equals t
            return WeightedCut(
                t=float_from_key(prefix),
                w_above=w_above,
                e_above=np.array(e_above),
                w_at=float(cw[d]),
                e_at=np.array([float(acc[d]) for acc in ce]),
                e_below=np.array(e_below),
            )
        if cn[d] <= COLLECT:
            break

    def pick(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        x, w, e = full(lo, hi)
        sel = (w > 0) & ((float_keys(x) >> np.uint64(shift)) == np.uint64(prefix))
        return x[sel], w[sel], [q[sel] for q in e]

    parts = parallel_map(pick, ranges, workers)
    xs = [p[0] for p in parts]
    ws = [p[1] for p in parts]
    es = [[p[2][i] for p in parts] for i in range(n_extra)]
    return finish(
        np.concatenate(xs),
        np.concatenate(ws),
        [np.concatenate(q) for q in es],
        w_above,
        e_above,
        e_below,
    )


@dataclass(frozen=True)
class Top:
    """The ``k`` largest of a streamed vector: ``sum = above_sum + (k - above) * threshold``."""

    total: float
    threshold: float  # the ceil(k)-th largest value (+inf when k == 0)
    above: float  # how many values are strictly larger


def select_top(
    values: ChunkFn,
    ranges: list[tuple[int, int]],
    k: float,
    workers: int = 1,
) -> Top:
    """Sum of the ``k`` largest streamed values, and that threshold.

    ``k`` is real: its fractional part weights the ``ceil(k)``-th largest value.

    One chunk: ``np.partition``. Several: a radix select on :func:`float_keys` (16 bits a pass,
    per-bucket counts and sums). It ends when the bucket holding the threshold has at most
    ``COLLECT`` values (one more pass collects and sorts them) or when all of its values
    lie within ``CLUSTER`` relative of each other — e.g. ``q_i a_i = nu`` to rounding on a
    whole support — in which case the threshold is taken as the bucket's largest value.
    That rounds the sum *up* by at most ``(k - above) * (max - min)`` of the bucket, so a
    lower bound built from it stays a lower bound and an upper bound stays an upper bound.
    Usually two passes; at most five. Memory ``O(chunk + 2**16 + COLLECT)``.

    Parameters
    ----------
    values : ChunkFn
        ``values(lo, hi)``: the values on the chunk ``[lo, hi)`` (finite float64).
    ranges : list of (int, int)
        The chunks.
    k : float
        How many of the largest values to sum, ``0 <= k <= n``.
    workers : int, default 1
        Threads for the passes (:func:`~rad.verify.chunked.parallel_map`).

    Returns
    -------
    Top
        The sum, the ``ceil(k)``-th largest value (``+inf`` when ``k = 0``) and how many
        values are strictly larger.
    """
    r = math.ceil(k)
    if r <= 0:
        return Top(0.0, math.inf, 0.0)
    if len(ranges) == 1:
        x = values(*ranges[0])
        n = x.shape[0]
        t = float(np.partition(x, n - r)[n - r])
        big = x[x > t]
        return Top(chunk_sum(big) + (k - big.shape[0]) * t, t, float(big.shape[0]))

    above = 0
    above_parts: list[float] = []
    prefix = 0
    shift = 64
    lo_v, hi_v = -math.inf, math.inf  # range of the values in the current prefix bucket
    while True:
        shift -= _DIGIT

        def hist(
            lo: int, hi: int, shift: int = shift, prefix: int = prefix
        ) -> tuple[np.ndarray, np.ndarray, float, float, int]:
            x = values(lo, hi)
            key = float_keys(x)
            cmin, cmax, at = math.inf, -math.inf, 0
            if shift + _DIGIT < 64:
                sel = (key >> np.uint64(shift + _DIGIT)) == np.uint64(prefix)
                x, key = x[sel], key[sel]
                if x.shape[0]:
                    cmin, cmax = float(x.min()), float(x.max())
                    at = int(np.count_nonzero(x == cmax))
            d = ((key >> np.uint64(shift)) & np.uint64(_NBINS - 1)).astype(np.intp)
            return (
                np.bincount(d, minlength=_NBINS),
                np.bincount(d, weights=x, minlength=_NBINS),
                cmin,
                cmax,
                at,
            )

        top_fold = parallel_fold(hist, ranges, workers, _add_top_histograms)
        assert top_fold is not None  # ranges is never empty
        cnt, sums, vmin, vmax, at_max = top_fold
        need = r - above
        if at_max >= need:  # the bucket's largest value fills the rest exactly
            return Top(math.fsum(above_parts) + (k - above) * vmax, vmax, float(above))
        if shift + _DIGIT < 64:
            lo_v, hi_v = vmin, vmax
        desc = np.cumsum(cnt[::-1])
        j = int(np.searchsorted(desc, need, side="left"))
        d = _NBINS - 1 - j
        above += int(desc[j] - cnt[d])
        above_parts.append(float(np.sum(sums[d + 1 :])))
        prefix = (prefix << _DIGIT) | d
        if shift == 0:  # one exact key: every value in the bucket equals t
            t = float_from_key(prefix)
            return Top(math.fsum(above_parts) + (k - above) * t, t, float(above))
        if math.isfinite(hi_v - lo_v) and hi_v - lo_v <= CLUSTER * max(abs(hi_v), abs(lo_v)):
            return Top(math.fsum(above_parts) + (k - above) * hi_v, hi_v, float(above))
        if cnt[d] <= COLLECT:
            break

    def pick(lo: int, hi: int) -> np.ndarray:
        x = values(lo, hi)
        inside: np.ndarray = x[(float_keys(x) >> np.uint64(shift)) == np.uint64(prefix)]
        return inside

    y = np.sort(np.concatenate(parallel_map(pick, ranges, workers)))[::-1]
    t = float(y[r - above - 1])
    big = y[y > t]
    above += int(big.shape[0])
    above_parts.append(chunk_sum(big))
    return Top(math.fsum(above_parts) + (k - above) * t, t, float(above))


_Hist = tuple[np.ndarray, np.ndarray, list[np.ndarray]]
_TopHist = tuple[np.ndarray, np.ndarray, float, float, int]


def _add_histograms(acc: _Hist | None, part: _Hist) -> _Hist:
    """Chunk histograms (counts, weights, extra sums) added in chunk order."""
    if acc is None:
        return part
    return acc[0] + part[0], acc[1] + part[1], [a + b for a, b in zip(acc[2], part[2])]


def _add_top_histograms(acc: _TopHist | None, part: _TopHist) -> _TopHist:
    """Counts and sums added in chunk order; the range and the multiplicity of its top."""
    if acc is None:
        return part
    cmax = max(acc[3], part[3])
    at = (acc[4] if acc[3] == cmax else 0) + (part[4] if part[3] == cmax else 0)
    return acc[0] + part[0], acc[1] + part[1], min(acc[2], part[2]), cmax, at


def _key(x: float) -> int:
    """The :func:`float_keys` key of one double, as a Python int."""
    return int(float_keys(np.array([x], dtype=np.float64))[0])


def bit_midpoint(lo: float, hi: float) -> float:
    """The midpoint of two doubles in the order of their bit patterns.

    A bracket spanning many orders of magnitude thus closes in at most 64 halvings.
    """
    return float_from_key((_key(lo) + _key(hi)) // 2)


def bit_distance(lo: float, hi: float) -> int:
    """How many doubles lie between ``lo`` and ``hi`` (the distance of their keys)."""
    return _key(hi) - _key(lo)


"""The NumPy reference backend: short, readable, and the definition the others match.

It implements :class:`rad._backends.contract.Kernels`; the C++ module and the Numba
backend have a twin of every kernel with the same signature. Sums use the canonical order
of :mod:`rad._backends.canonical` and DepRound the counter-based generator of
:mod:`rad._backends.rng`, so all backends return bit-identical results for the same input
and key, for any number of threads. ``threads`` is accepted and ignored here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from rad._backends import radix_select as _radix
from rad._backends.canonical import (
    BLOCK,
    block_totals,
    canonical_prefix,
    finish_selection,
    merge_leftovers,
    round_sequence,
)
from rad._backends.contract import CappedArrays, RoundSketch, search_then_sums
from rad._backends.params import Params, probabilities_from_params
from rad._backends.rng import stream_state

__all__ = ["SORTFREE", "has_openmp", "name"]

name = "numpy"
has_openmp = False
SORTFREE = True
def first_invalid(x: np.ndarray, threads: int = 1) -> int:
    """Index of the first NaN, infinite or negative entry, or -1."""
    bad = np.flatnonzero(~(np.isfinite(x) & (x >= 0)))
    return int(bad[0]) if bad.shape[0] else -1


def argsort_desc(g: np.ndarray, threads: int = 1) -> np.ndarray:
    """Stable argsort by descending value (ties keep their original order)."""
    return np.argsort(-np.asarray(g, dtype=np.float64), kind="stable").astype(np.int64)


def _losses(g: np.ndarray, losses: np.ndarray | None, w: float) -> np.ndarray:
    return np.asarray(losses, dtype=np.float64) if losses is not None else w * g


def theorem1_scan(
    gains: np.ndarray,
    losses: np.ndarray | None,
    w: float,
    perm: np.ndarray,
    m: float,
    threads: int = 1,
) -> tuple[int, float]:
    """Theorem 1's ``k*`` by the threshold form, and ``G_n``.

    In descending-gain order, a tie group starting at position ``k`` joins the support
    iff ``g_k H_k >= G_k - m`` (exclusive prefix sums; docs/design.md §1: ``N`` is unimodal and a
    group is in or out as a whole). Returns the end of the last joining group and the
    sum of ``g/a`` over points with ``a > 0``. Points with ``a == 0`` contribute 0.
    """
    gs = np.asarray(gains, dtype=np.float64)[perm]
    a = gs + _losses(gs, None if losses is None else np.asarray(losses)[perm], w)
    pos = a > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        hp = canonical_prefix(np.where(pos, 1.0 / a, 0.0))
        gp = canonical_prefix(np.where(pos, gs / a, 0.0))
    starts = np.flatnonzero(np.diff(gs, prepend=np.nan) != 0)
    h_excl = np.where(starts > 0, hp[starts - 1], 0.0)
    g_excl = np.where(starts > 0, gp[starts - 1], 0.0)
    joins = gs[starts] * h_excl >= g_excl - m
    fails = np.flatnonzero(~joins)
    kstar = int(starts[fails[0]]) if fails.shape[0] else gs.shape[0]
    return kstar, float(gp[-1])


def support_block_sums(
    gains: np.ndarray, losses: np.ndarray | None, w: float, tau: float, threads: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`support_sums` per block.

    Over points with ``g >= tau`` and ``a > 0``: :func:`block_totals` of ``r = 1/a`` and
    ``g * r``, the count and the smallest ``a``.
    """
    g = np.asarray(gains, dtype=np.float64)
    a = g + _losses(g, losses, w)
    mask = (g >= tau) & (a > 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = 1.0 / a
        gr = g * r  # 0 * inf = nan where a == 0: masked out below
    starts = np.arange(0, g.shape[0], BLOCK)
    counts = np.add.reduceat(mask.astype(np.int64), starts) if g.shape[0] else np.zeros(0, np.int64)
    mins = np.minimum.reduceat(np.where(mask, a, np.inf), starts) if g.shape[0] else np.zeros(0)
    return block_totals(np.where(mask, r, 0.0)), block_totals(np.where(mask, gr, 0.0)), counts, mins


def support_sums(
    gains: np.ndarray, losses: np.ndarray | None, w: float, tau: float, threads: int = 1
) -> tuple[float, float, int, float]:
    """The support's sums: ``(sum r, sum g * r, count, min a)`` with ``r = 1/a``.

    Over points with ``g >= tau`` and ``a > 0``, in the original order and the canonical
    block totals.
    """
    h, gg, counts, mins = support_block_sums(gains, losses, w, tau)
    return _total(h), _total(gg), int(counts.sum()), float(mins.min()) if mins.shape[0] else float("inf")


def _total(block_values: np.ndarray) -> float:
    """Block totals added sequentially in block order (the canonical total)."""
    return float(np.cumsum(block_values)[-1]) if block_values.shape[0] else 0.0


def materialize(
    gains: np.ndarray, losses: np.ndarray | None, w: float, params: Params, threads: int = 1
) -> np.ndarray:
    """The probabilities defined by ``params`` (see :mod:`rad._backends.params`)."""
    return probabilities_from_params(gains, losses, w, params)


def support_stats(
    gains: np.ndarray, losses: np.ndarray | None, w: float, params: Params, threads: int = 1
) -> tuple[int, float]:
    """``(number of q_i > 0, smallest gain with q_i > 0)``."""
    q = materialize(gains, losses, w, params, threads)
    mask = q > 0
    count = int(np.count_nonzero(mask))
    return count, float(np.asarray(gains)[mask].min()) if count else float("inf")


# ------------------------------------------------------------------------ capped path


def _excl(prefix: np.ndarray, pos: int) -> float:
    """The exclusive prefix sum at ``pos``."""
    return float(prefix[pos - 1]) if pos > 0 else 0.0


def _range_sum(x: np.ndarray, s: int, e: int) -> float:
    """``sum x[s:e]`` in the canonical range order.

    Sequential from ``s`` to the end of its block, then each whole block's sequential
    total, then sequential over the last block's part, all added in order. Summed
    directly, never as a difference of prefix sums (which cancels when earlier terms are
    large).
    """
    if e <= s:
        return 0.0
    bs, be = s // BLOCK, (e - 1) // BLOCK
    if bs == be:
        return float(np.cumsum(x[s:e])[-1])
    parts = [float(np.cumsum(x[s : (bs + 1) * BLOCK])[-1])]
    if be > bs + 1:
        parts.extend(np.cumsum(x[(bs + 1) * BLOCK : be * BLOCK].reshape(-1, BLOCK), axis=1)[:, -1].tolist())
    parts.append(float(np.cumsum(x[be * BLOCK : e])[-1]))
    return float(np.cumsum(parts)[-1])


def rad_terms(g: np.ndarray, w: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``1/a``, ``g/a`` and ``g`` (float64) of RAD-loss points: the terms of :func:`span_sums`.

    ``a = g + w g`` as the kernels add it; both quotients are 0 where ``a = 0``.
    """
    x = g.astype(np.float64)
    a = w * x
    a += x
    pos = a > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(pos, 1.0 / a, 0.0), np.where(pos, x / a, 0.0), x


def span_sums(g: np.ndarray, w: float, span: int, threads: int = 1) -> np.ndarray:
    """Per-span totals of :func:`rad_terms`: ``1/a``, ``g/a`` and ``g``.

    Shape ``(3, ceil(n / span))``; each total is the sequential sum of its span's terms in
    order (the RAD capped path's block offsets, :mod:`rad._solve.capped_rad`).
    """
    n = g.shape[0]
    spans = -(-n // span)
    out = np.zeros((3, spans))
    step = max(1, (1 << 20) // span)  # bounded temporaries: about 2^20 points at a time
    for s0 in range(0, spans, step):
        lo, hi = s0 * span, min(n, (s0 + step) * span)
        terms = rad_terms(g[lo:hi], w)
        rows = -(-(hi - lo) // span)
        for row, t in enumerate(terms):
            pad = np.zeros(rows * span)
            pad[: hi - lo] = t
            out[row, s0 : s0 + rows] = np.cumsum(pad.reshape(rows, span), axis=1)[:, -1]
    return out + 0.0  # a sum that starts from +0.0: a span of -0.0 gains totals +0.0


def at_least(dtype: np.dtype, t: float) -> np.floating:
    """The least value of ``dtype`` at or above ``t``: ``x >= t`` exactly when ``x >=`` it.

    (NumPy compares a float32 array with a Python float after rounding the float to float32,
    which can round it down.)
    """
    with np.errstate(over="ignore"):
        c: np.floating = dtype.type(t)
    if float(c) < t:
        c = np.nextafter(c, dtype.type(np.inf))
    return c


def values_at_least(
    g: np.ndarray, t: float, threads: int = 1, splits: Sequence[float] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """The values of ``g`` that are ``>= t``, in parts by the descending ``splits``, and the parts' ends.

    Part ``j`` holds the values ``v`` with ``#{i : v < splits[i]} == j``, in index order
    and ``g``'s dtype.
    """
    top = g[g >= at_least(g.dtype, t)]
    part = np.zeros(top.shape[0], dtype=np.int64)
    for s in splits:
        part += top < at_least(g.dtype, s)
    ends = np.cumsum(np.bincount(part, minlength=len(splits) + 1))
    return top[np.argsort(part, kind="stable")], ends


def capped_eval(
    ctx: CappedArrays, nu: float, b: float, m: float, threads: int = 1
) -> tuple[float, float, bool, float, float, float]:
    """The capped path's ``F(nu)``, its right slope and the boundary group.

    ``docs/design.md`` §1, "Dualising": fill the budget in descending-gain order up to
    ``min(1, nu/a_i)``, the rest on the smallest losses; ``F = filled gain - m nu``.
    Returns ``(value, slope, fill is loss, cut, resid, group total)``.

    In the loss fill the boundary group and its residual budget are decided from sums of
    the caps *after* a position (``E + sum_{p >= E} cap_p >= b``), summed directly: the
    budget left after a prefix of rooms, ``b - sum cap - sum room``, carries the rounding
    of ``b`` and would spill it onto a point whose loss can dwarf the whole value.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cap = np.where(ctx.a_g <= nu, 1.0, nu / ctx.a_g)
        above = ctx.a_g > nu
        p_ga = canonical_prefix(np.where(above, ctx.g_g / ctx.a_g, 0.0))
        p_ia = canonical_prefix(np.where(above, 1.0 / ctx.a_g, 0.0))
    p_cap = canonical_prefix(cap)
    p_gcap = canonical_prefix(ctx.g_g * cap)
    if p_cap[-1] >= b:
        # Budget runs out on the gain segments: boundary group J in descending gain.
        ends = ctx.ends_g
        j = int(np.searchsorted(p_cap[ends - 1], b, side="left"))
        start = int(ends[j - 1]) if j > 0 else 0
        before = _excl(p_cap, start)
        cut = float(ctx.g_g[start])
        resid = b - before
        value = _excl(p_gcap, start) + cut * resid - m * nu
        # d/dnu: each uncapped point before J gains (g_i - g_J)/a_i; the adversary costs m.
        slope = (_excl(p_ga, start) - cut * _excl(p_ia, start)) - m
        return value, slope, False, cut, resid, _range_sum(cap, start, int(ends[j]))
    # All gain segments filled; the remaining budget goes to the smallest losses.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cap_l = np.where(ctx.a_l <= nu, 1.0, nu / ctx.a_l)
        above_l = ctx.a_l > nu
        q_la = canonical_prefix(np.where(above_l, ctx.l_l / ctx.a_l, 0.0))
        inv_l = np.where(above_l, 1.0 / ctx.a_l, 0.0)
    room = 1.0 - cap_l
    p_room = canonical_prefix(room)
    p_lroom = canonical_prefix(ctx.l_l * room)
    rest = b - float(p_cap[-1])
    ends = ctx.ends_l
    last = ends.shape[0] - 1
    t = min(int(np.searchsorted(p_room[ends - 1], rest, side="left")), last)

    def covered(end: int) -> bool:  # the rooms of [0, end) hold the rest of the budget
        return end >= b or _range_sum(cap_l, end, cap_l.shape[0]) >= b - end

    while t > 0 and covered(int(ends[t - 1])):
        t -= 1
    while t < last and not covered(int(ends[t])):
        t += 1
    start = int(ends[t - 1]) if t > 0 else 0
    cut = float(ctx.l_l[start])
    resid = (b - start) - _range_sum(cap_l, start, cap_l.shape[0])
    value = float(p_gcap[-1]) - _excl(p_lroom, start) - cut * resid - m * nu
    # cut * (sum of 1/a over the loss order from the boundary on), summed directly: as a
    # difference of two totals it cancels (a tiny a earlier in the order dominates both).
    slope = float(p_ga[-1]) + cut * _range_sum(inv_l, start, inv_l.shape[0]) + _excl(q_la, start) - m
    return value, slope, True, cut, resid, _range_sum(room, start, int(ends[t]))


# --------------------------------------------------------------------------- DepRound

def depround_q(q: np.ndarray, b: int, key: int, threads: int = 1) -> np.ndarray:
    """DepRound of ``q`` (sum ~ ``b``) into exactly ``b`` sorted distinct indices.

    Blocks of :data:`BLOCK` items are rounded independently (stream = block index), their
    leftovers merged in block order (:func:`~rad._backends.canonical.merge_leftovers`).
    """
    q = np.asarray(q, dtype=np.float64)
    taken: list[int] = []
    left_idx: list[int] = []
    left_mass: list[float] = []
    for blk, lo in enumerate(range(0, q.shape[0], BLOCK)):
        t, pick, held = round_sequence(q[lo : lo + BLOCK], stream_state(key, blk))
        taken.extend(lo + i for i in t)
        if held > 0:
            left_idx.append(lo + pick)
            left_mass.append(held)
    merged, pick = merge_leftovers(np.asarray(left_idx, np.int64), np.asarray(left_mass), key, b - len(taken))
    return finish_selection(taken + merged, pick, b)


def depround_params(
    gains: np.ndarray,
    losses: np.ndarray | None,
    w: float,
    params: Params,
    b: int,
    key: int,
    threads: int = 1,
) -> np.ndarray:
    """DepRound of the probabilities defined by ``params`` (materialised here)."""
    return depround_q(materialize(gains, losses, w, params), b, key)


def depround_sketched(
    gains: np.ndarray, losses: np.ndarray | None, w: float, params: Params, b: int, key: int,
    sketch: RoundSketch | None, threads: int = 1,
) -> np.ndarray:
    """:func:`depround_params` (this backend has no sketched rounding; the sketch is unused)."""
    return depround_params(gains, losses, w, params, b, key, threads)


def depround_blocks(
    gains: np.ndarray,
    losses: np.ndarray | None,
    w: float,
    params: Params,
    key: int,
    offset: int,
    first_stream: int,
    threads: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The per-block phase of DepRound on one chunk (:mod:`rad.dask`).

    Returns the positions taken (plus ``offset``) and each block's leftover index (-1 for
    none) and mass.
    """
    q = materialize(gains, losses, w, params)
    taken: list[int] = []
    idx: list[int] = []
    mass: list[float] = []
    for j, lo in enumerate(range(0, q.shape[0], BLOCK)):
        t, pick, held = round_sequence(q[lo : lo + BLOCK], stream_state(key, first_stream + j))
        taken.extend(offset + lo + i for i in t)
        idx.append(offset + lo + pick if pick >= 0 else -1)
        mass.append(held)
    return np.asarray(taken, np.int64), np.asarray(idx, np.int64), np.asarray(mass)


# ------------------------------------------------------------- sort-free threshold search


def _ordered_bits(gains: np.ndarray) -> tuple[np.ndarray, int]:
    """Bits of non-negative floats in value order (-0.0 folded onto 0), and their width."""
    nbits = 32 if gains.dtype == np.float32 else 64
    raw = gains.view(np.uint32 if nbits == 32 else np.uint64).astype(np.uint64)
    raw[raw == np.uint64(1 << (nbits - 1))] = 0
    return raw, nbits


def bit_histogram(
    gains: np.ndarray, losses: np.ndarray | None, w: float, shift: int, pshift: int, prefix: int,
    threads: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """One level of the radix select (:mod:`rad._backends.radix_select`)."""
    g = np.asarray(gains)
    bad = bool(first_invalid(g) >= 0)
    ok = np.isfinite(g) & (g >= 0)
    bits, nbits = _ordered_bits(np.where(ok, g, 0).astype(g.dtype))
    sel = ok if pshift >= nbits else ok & ((bits >> np.uint64(pshift)) == np.uint64(prefix))
    g64 = g[sel].astype(np.float64)
    a = g64 + (np.asarray(losses, dtype=np.float64)[sel] if losses is not None else w * g64)
    with np.errstate(divide="ignore", over="ignore"):  # subnormal a: inf, which the search reports
        r = np.where(a > 0, 1.0 / np.where(a > 0, a, 1.0), 0.0)
    bins = ((bits[sel] >> np.uint64(shift)) & np.uint64(_radix.NBINS - 1)).astype(np.int64)
    count = np.bincount(bins, minlength=_radix.NBINS).astype(np.int64)
    h = np.bincount(bins, weights=r, minlength=_radix.NBINS)
    gsum = np.bincount(bins, weights=g64 * r, minlength=_radix.NBINS)
    lowest = np.full(_radix.NBINS, np.inf)
    np.minimum.at(lowest, bins, g64)
    return count, h, gsum, lowest, bad


def bit_gather(
    gains: np.ndarray, losses: np.ndarray | None, w: float, shift: int, key: int, count: int, threads: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """The ``(g, a)`` of the points whose ordered bits above ``shift`` equal ``key``."""
    bits, _ = _ordered_bits(np.asarray(gains))
    sel = (bits >> np.uint64(shift)) == np.uint64(key)
    g64 = np.asarray(gains)[sel].astype(np.float64)
    a = g64 + (np.asarray(losses, dtype=np.float64)[sel] if losses is not None else w * g64)
    return g64, a


def threshold_support(
    gains: np.ndarray, losses: np.ndarray | None, w: float, m: float, b: int, threads: int = 1
) -> tuple[int, float, int, float, tuple[float, float, int, float] | None, None]:
    """:func:`threshold_search`, then :func:`support_sums` (the contract's definition)."""
    return search_then_sums(sys.modules[__name__], gains, losses, w, m, b, threads)


def threshold_search(
    gains: np.ndarray, losses: np.ndarray | None, w: float, m: float, threads: int = 1
) -> tuple[int, float, int, float]:
    """Sort-free k* (:mod:`rad._backends.radix_select`): ``(status, tau, kstar, g_total)``."""
    return _radix.threshold_search(sys.modules[__name__], gains, losses, w, m, threads)

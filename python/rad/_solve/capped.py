"""The capped path of the batch game: maximise the concave dual ``F(nu)`` exactly.

``docs/design.md`` §1, "Dualising": for a water level ``nu`` the best batch fills points in
descending-gain order up to ``min(1, nu/a_i)`` until the budget is spent (the rest on the
smallest losses), and ``F(nu)`` is that fill's gain minus ``m nu``. ``F`` is concave and
piecewise linear; ``OPT_b = max F``. The search intersects supporting lines, with a
bisection safeguard; each evaluation is one O(n) backend kernel
(:meth:`~rad._backends.contract.Kernels.capped_eval`) on arrays sorted once here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from rad._backends.contract import Kernels

__all__ = ["CappedContext", "Evaluation", "maximise_dual"]

_MAX_ITER = 400


@dataclass(frozen=True)
class Evaluation:
    """``F`` at one ``nu``: value, right slope and the boundary group of the fill."""

    value: float  # F(nu)
    slope: float  # right derivative F'(nu+)
    fill: Literal["gain", "loss"]
    cut: float  # gain (or loss) of the boundary tie group
    resid: float  # budget left for the boundary group
    group_total: float  # that group's capacity


@dataclass(frozen=True)
class CappedContext:
    """Points sorted by descending gain (``*_g``) and by ascending loss (``*_l``)."""

    g_g: np.ndarray
    a_g: np.ndarray
    ends_g: np.ndarray
    l_l: np.ndarray
    a_l: np.ndarray
    ends_l: np.ndarray
    g_max: float
    a_max: float
    backend: Kernels
    threads: int = 1

    @staticmethod
    def build(gains: np.ndarray, losses: np.ndarray | None, w: float, backend: Kernels, threads: int) -> CappedContext:
        """Sort once: by descending gain and by ascending loss.

        With RAD losses ``l = w g`` the two orders are one sort of the gains' values (equal
        gains have equal losses, so the tie groups' order changes no array) and four float64
        arrays: 32 bytes per point, sorted in place (no permutation, no gather).
        """
        if losses is None:
            g_g = np.negative(gains, dtype=np.float64)  # -g, sorted ascending = g descending
            g_g.sort()
            np.negative(g_g, out=g_g)  # exact: the gains' own values, -0.0 included
            a_g = w * g_g
            a_g += g_g  # g + w g, as the kernels add it
            l_l = w * g_g[::-1]
            a_l = a_g[::-1].copy()
        else:
            g = np.asarray(gains, dtype=np.float64)
            # Break ties by the other key, so the sorted arrays (and every sum over them)
            # are the same for any permutation of the input: exact permutation equivariance.
            l = np.asarray(losses, dtype=np.float64)
            order_g = np.lexsort((l, -g))
            order_l = np.lexsort((-g, l))
            g_g, l_g = g[order_g], l[order_g]
            a_g = g_g + l_g
            l_l = l[order_l]
            a_l = g[order_l] + l_l
        return CappedContext(
            g_g=g_g, a_g=a_g, ends_g=_group_ends(g_g), l_l=l_l, a_l=a_l,
            ends_l=_group_ends(l_l), g_max=float(g_g[0]), a_max=float(a_g.max()),
            backend=backend, threads=threads,
        )


def _group_ends(sorted_values: np.ndarray) -> np.ndarray:
    """Exclusive end positions of the runs of equal values."""
    change = np.flatnonzero(sorted_values[1:] != sorted_values[:-1])  # a 1-byte mask per point
    change += 1
    return np.append(change, sorted_values.shape[0]).astype(np.int64, copy=False)


def _capped_eval(ctx: CappedContext, nu: float, b: int, m: float) -> Evaluation:
    """``F(nu)`` through the backend's kernel (every backend gives the same bits)."""
    value, slope, fill_loss, cut, resid, group_total = ctx.backend.capped_eval(ctx, nu, b, m, ctx.threads)
    return Evaluation(value, slope, "loss" if fill_loss else "gain", cut, resid, group_total)


def _bisect_bits(lo: float, hi: float) -> float:
    """Midpoint of two non-negative doubles in bit-pattern order (at most 64 halvings)."""
    ilo = np.float64(lo).view(np.int64)
    ihi = np.float64(hi).view(np.int64)
    return float(np.int64(ilo + (ihi - ilo) // 2).view(np.float64))


def maximise_dual(ctx: CappedContext, b: int, m: float) -> tuple[float, Evaluation]:
    """Maximise the concave piecewise-linear ``F`` over ``nu in [0, max a]``.

    Supporting lines at ``lo`` (slope > 0) and ``hi`` (slope <= 0) bound ``F`` from above;
    their intersection ``x`` is the next trial. Each step either finishes or reveals a new
    linear piece; a bisection every time the bracket fails to halve keeps the worst case
    logarithmic (at most 64 halvings of the bit patterns). The answer is the *kink* where
    the slope turns non-positive: the smallest maximiser, where ``F``'s terms (and so the
    rounding of ``q``) are smallest.

    Every test is *local*. ``F``'s rounding at ``nu`` is a few ulps of its terms there,
    ``T(nu) = |F + m nu| + m nu`` (the filled gain and the adversary's share); near ``nu*``
    these can be 1e15 times smaller than ``b max g + m max a``, so a global scale stops far
    too early. The search ends at ``x`` when ``F(x)`` reaches the lines' bound there (the
    larger of the two lines: an upper bound for any ``x``) to ``8 eps T(x)``, or at an end
    of the bracket when the lines meet there to ``8 eps T``; in both cases only while the
    bound itself is accurate at that scale (a far end's value carries rounding that can
    exceed the whole optimum: then bisect). A slope within rounding of 0 (its terms are
    ``sum (g_i - g_J)/a_i <= n`` and ``m``) cannot be told from 0 by its sign, yet over a
    long bracket (``max a`` can be 1e4 times the kink) it can raise ``F`` by far more than
    ``F``'s rounding: such a slope is read from the values instead, ``F`` at ``max a``
    against ``F`` here (concave: a clearly higher ``F`` further right means rising).
    """
    eps = float(np.finfo(float).eps)
    flat = 8 * eps * (ctx.g_g.shape[0] + m)

    def scale(nu: float, ev: Evaluation) -> float:
        return abs(ev.value + m * nu) + m * nu

    def rising(nu: float, ev: Evaluation) -> bool:
        if abs(ev.slope) > flat:
            return ev.slope > 0
        return ev_top.value - ev.value > 8 * eps * (scale(nu, ev) + scale(top, ev_top))

    lo, ev_lo = 0.0, _capped_eval(ctx, 0.0, b, m)
    if ev_lo.slope <= -flat:
        return lo, ev_lo
    top, ev_top = ctx.a_max, _capped_eval(ctx, ctx.a_max, b, m)
    if not rising(lo, ev_lo):
        return lo, ev_lo
    hi, ev_hi = top, ev_top
    if rising(hi, ev_hi):
        return hi, ev_hi
    bisect_next = False
    for _ in range(_MAX_ITER):
        s_lo, s_hi = ev_lo.slope, ev_hi.slope
        # Intersection of the supporting lines, measured from lo (no s * lo cancellation).
        x = lo + (ev_hi.value - ev_lo.value - s_hi * (hi - lo)) / (s_lo - s_hi)
        xc = min(max(x, lo), hi)
        bound = max(ev_lo.value + s_lo * (xc - lo), ev_hi.value + s_hi * (xc - hi))
        # what the bound's rounding scales with
        spread = scale(lo, ev_lo) + scale(hi, ev_hi) + s_lo * (xc - lo) - s_hi * (hi - xc)
        if not lo < x < hi:
            end_nu, end = (lo, ev_lo) if x <= lo else (hi, ev_hi)
            t = scale(end_nu, end)
            if spread <= 4 * t and bound - end.value <= 8 * eps * t:
                return end_nu, end
        elif not bisect_next:
            ev = _capped_eval(ctx, x, b, m)
            t = scale(x, ev)
            if spread <= 4 * t and ev.value >= bound - 8 * eps * t:
                return x, ev
            width = hi - lo
            if rising(x, ev):
                lo, ev_lo = x, ev
            else:
                hi, ev_hi = x, ev
            bisect_next = (hi - lo) > 0.5 * width
            continue
        x = _bisect_bits(lo, hi)
        if not lo < x < hi:
            break
        ev = _capped_eval(ctx, x, b, m)
        if rising(x, ev):
            lo, ev_lo = x, ev
        else:
            hi, ev_hi = x, ev
        bisect_next = False
    return (hi, ev_hi) if ev_hi.value > ev_lo.value else (lo, ev_lo)

"""The capped path of the batch game: maximise the concave dual ``F(nu)`` exactly.

``docs/design.md`` §1, "Dualising": for a water level ``nu`` the best batch fills points in
descending-gain order up to ``min(1, nu/a_i)`` until the budget is spent (the rest on the
smallest losses), and ``F(nu)`` is that fill's gain minus ``m nu``. ``F`` is concave and
piecewise linear; ``OPT_b = max F``. The search intersects supporting lines, with a
bisection safeguard. With RAD losses an evaluation in the gain fill is ``O(log n)`` on the
sorted gains (:mod:`rad._solve.capped_rad`); otherwise it is one ``O(n)`` backend kernel
(:meth:`~rad._backends.contract.Kernels.capped_eval`) on arrays sorted once here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from rad._backends.contract import Kernels
from rad._solve.capped_rad import BeyondTop, SortedRadGains, count_above

__all__ = ["CappedContext", "Evaluation", "SortedArrays", "boundary_frac", "maximise_dual", "solve_capped",
           "top_threshold"]

_MAX_ITER = 400

#: The tops of the pool tried in turn, each about this many times the larger of ``b`` and
#: Theorem 1's support, while at most half the pool. The capped support ``J`` is at least
#: ``b``, and close to it when few points are fractional; a miss extends the top (a pass to
#: gather, a sort of the new values only) and searches again.
TOP_MARGINS = (1.25, 2.5, 8.0)
#: Points in the strided sample that places the top's threshold.
TOP_SAMPLE = 1 << 16
#: The top's sort runs in parts of about this many points at least, one part a thread.
TOP_PART = 1 << 16

#: A boundary group whose share of the budget is below this (relative to ``b``) at a stop
#: where ``F`` still rises may be floating-point residue at a breakpoint of ``F``, not a real
#: fractional item (:func:`_onto_breakpoint` decides).
SNAP = 1e-11


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
class SortedArrays:
    """Points sorted by descending gain (``*_g``) and by ascending loss (``*_l``).

    What the backends' ``O(n)`` kernels read (:class:`rad._backends.contract.CappedArrays`).
    """

    g_g: np.ndarray
    a_g: np.ndarray
    ends_g: np.ndarray
    l_l: np.ndarray
    a_l: np.ndarray
    ends_l: np.ndarray


class CappedContext:
    """The pool as the capped path reads it.

    With RAD losses: the sorted gains and their block sums
    (:class:`~rad._solve.capped_rad.SortedRadGains`), which evaluate the gain fill in
    ``O(log n)``; the four sorted arrays the kernels need for the loss fill are built only
    if the search reaches it. With explicit losses: the sorted arrays, built at once.
    """

    def __init__(self, backend: Kernels, threads: int, *, rad: SortedRadGains | None = None,
                 arrays: SortedArrays | None = None) -> None:
        self.backend = backend
        self.threads = threads
        self.rad = rad
        self._arrays = arrays
        if rad is not None:
            self.n, self.g_max, self.a_max = rad.n, rad.g_max, rad.a_max
        else:
            assert arrays is not None
            self.n = int(arrays.g_g.shape[0])
            self.g_max, self.a_max = float(arrays.g_g[0]), float(arrays.a_g.max())

    @staticmethod
    def build(gains: np.ndarray, losses: np.ndarray | None, w: float, backend: Kernels, threads: int,
              top_from: float | None = None, splits: Sequence[float] = ()) -> CappedContext:
        """Sort once: the gains alone with RAD losses, by gain and by loss otherwise.

        With RAD losses and ``top_from``, only the gains ``>= top_from`` (the top of the
        pool, :mod:`rad._solve.capped_rad`; ``splits`` divide its sort into parts).
        """
        if losses is None:
            return CappedContext(backend, threads, rad=SortedRadGains(gains, w, backend, threads, top_from, splits))
        g = np.asarray(gains, dtype=np.float64)
        # Break ties by the other key, so the sorted arrays (and every sum over them)
        # are the same for any permutation of the input: exact permutation equivariance.
        l = np.asarray(losses, dtype=np.float64)
        order_g = np.lexsort((l, -g))
        order_l = np.lexsort((-g, l))
        g_g, l_g = g[order_g], l[order_g]
        l_l = l[order_l]
        arrays = SortedArrays(g_g=g_g, a_g=g_g + l_g, ends_g=_group_ends(g_g), l_l=l_l,
                              a_l=g[order_l] + l_l, ends_l=_group_ends(l_l))
        return CappedContext(backend, threads, arrays=arrays)

    def arrays(self) -> SortedArrays:
        """The kernels' sorted arrays (with RAD losses built now, from the sorted gains).

        ``l = w g``: equal gains have equal losses, so the loss order is the gain order
        reversed and the tie groups' order changes no array (32 bytes per point).
        """
        if self._arrays is None:
            assert self.rad is not None
            if not self.rad.complete:
                raise BeyondTop
            g_g, a_g = self.rad.g_and_a(self.n)  # the gains' own values, -0.0 included
            l_l = self.rad.w * g_g[::-1]
            self._arrays = SortedArrays(g_g=g_g, a_g=a_g, ends_g=_group_ends(g_g), l_l=l_l,
                                        a_l=a_g[::-1].copy(), ends_l=_group_ends(l_l))
        return self._arrays

    def gain_prefix(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``g`` and ``a`` of the ``count`` highest-gain points (float64)."""
        if self.rad is None:
            arr = self.arrays()
            return arr.g_g[:count], arr.a_g[:count]
        return self.rad.g_and_a(count)

    def sorted_gains(self) -> np.ndarray:
        """The gains in descending order."""
        return self.rad.g if self.rad is not None else self.arrays().g_g


def _group_ends(sorted_values: np.ndarray) -> np.ndarray:
    """Exclusive end positions of the runs of equal values."""
    change = np.flatnonzero(sorted_values[1:] != sorted_values[:-1])  # a 1-byte mask per point
    change += 1
    return np.append(change, sorted_values.shape[0]).astype(np.int64, copy=False)


def _capped_eval(ctx: CappedContext, nu: float, b: int, m: float) -> Evaluation:
    """``F(nu)``: the RAD gain fill in ``O(log n)``, else the backend's kernel.

    The same bits on every backend either way.
    """
    fast = ctx.rad.gain_fill(nu, b, m) if ctx.rad is not None else None
    if fast is not None:
        return Evaluation(fast[0], fast[1], "gain", fast[3], fast[4], fast[5])
    value, slope, fill_loss, cut, resid, group_total = ctx.backend.capped_eval(ctx.arrays(), nu, b, m, ctx.threads)
    return Evaluation(value, slope, "loss" if fill_loss else "gain", cut, resid, group_total)


def _bisect_bits(lo: float, hi: float) -> float:
    """Midpoint of two non-negative doubles in bit-pattern order (at most 64 halvings)."""
    ilo = np.float64(lo).view(np.int64)
    ihi = np.float64(hi).view(np.int64)
    return float(np.int64(ilo + (ihi - ilo) // 2).view(np.float64))


def top_threshold(gains: np.ndarray, b: int, support: int, margin: float,
                  threads: int = 1) -> tuple[float, tuple[float, ...]] | None:
    """A gain ``t`` with about ``margin * max(b, support)`` points ``>= t``, and splits.

    The splits cut those points into about equal parts, one a thread (at least
    :data:`TOP_PART` points each) for the top's sort; none on one thread. None when the
    top is more than half the pool (the whole pool is sorted then). Read off a strided
    sample of :data:`TOP_SAMPLE` points, so ``t`` is the same for every backend and thread
    count (the splits affect only the time).
    """
    n = int(gains.shape[0])
    want = int(margin * max(b, support))
    if 2 * want > n:
        return None
    sample = np.sort(gains[:: max(1, n // TOP_SAMPLE)])
    s = int(sample.shape[0])

    def above(count: int) -> float:  # the sample's value with about `count` of n points above it
        return float(sample[s - 1 - min(s - 1, count * s // n)])

    parts = max(1, min(threads, want // TOP_PART))
    return above(want), tuple(above(want * j // parts) for j in range(1, parts))


def solve_capped(gains: np.ndarray, losses: np.ndarray | None, w: float, backend: Kernels, threads: int,
                 b: int, m: float, support: int) -> tuple[CappedContext, float, Evaluation]:
    """:func:`maximise_dual` on the top of the pool where that suffices, else on the whole pool.

    With RAD losses the tops (:func:`top_threshold` for each of :data:`TOP_MARGINS`;
    ``support`` is Theorem 1's ``k*``) are tried first: they need no full sort of the pool.
    A top's search starts where its caps hold ``b``; where ``F`` no longer rises there, or
    any evaluation needs a lower rank (:class:`~rad._solve.capped_rad.BeyondTop`), the top
    is extended to the next threshold, then the whole pool is sorted and searched. Which
    one answers depends on the gains, ``b`` and ``k*`` only: the same on every backend and
    thread count.
    """
    top: CappedContext | None = None
    for margin in TOP_MARGINS if losses is None else ():
        top_at = top_threshold(gains, b, support, margin, threads)
        if top_at is None:
            break
        top_from, splits = top_at
        if top is None:
            top = CappedContext.build(gains, None, w, backend, threads, top_from, splits)
        else:
            assert top.rad is not None
            top.rad.extend(gains, top_from)
        try:
            nu, ev = maximise_dual(top, b, m)
            return top, nu, ev
        except BeyondTop:
            continue
    ctx = CappedContext.build(gains, losses, w, backend, threads)
    nu, ev = maximise_dual(ctx, b, m)
    return ctx, nu, ev


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

    A stop that the values cannot tell from a breakpoint of the gain fill is then moved
    onto it (:func:`_onto_breakpoint`): ``q`` is ``nu / a_i`` there, so a ``nu`` a few
    dozen ulps short leaves ``q`` short by as much, whatever ``F``'s rounding. The
    returned evaluation's ``resid`` is then 0: the boundary group gets nothing. Any other
    ``resid``, however small, is that group's real share of the budget.
    """
    nu, ev = _search(ctx, b, m)
    return _onto_breakpoint(ctx, nu, ev, b, m)


def _search(ctx: CappedContext, b: int, m: float) -> tuple[float, Evaluation]:
    """The search of :func:`maximise_dual`: a ``nu`` where ``F`` is within rounding of its maximum."""
    eps = float(np.finfo(float).eps)
    flat = 8 * eps * (ctx.n + m)

    def scale(nu: float, ev: Evaluation) -> float:
        return abs(ev.value + m * nu) + m * nu

    def rising(nu: float, ev: Evaluation) -> bool:
        if abs(ev.slope) > flat:
            return ev.slope > 0
        return ev_top.value - ev.value > 8 * eps * (scale(nu, ev) + scale(top, ev_top))

    # With RAD losses start where the gain fill begins (below it the caps cannot hold b):
    # while F still rises there, no evaluation needs the loss fill's O(n) kernel.
    start = ctx.rad.gain_fill_from(b) if ctx.rad is not None else None
    lo = 0.0 if start is None else start
    ev_lo = _capped_eval(ctx, lo, b, m)
    if lo == 0.0 and ev_lo.slope <= -flat:
        return lo, ev_lo
    top, ev_top = ctx.a_max, _capped_eval(ctx, ctx.a_max, b, m)
    if rising(lo, ev_lo):
        hi, ev_hi = top, ev_top
        if rising(hi, ev_hi):
            return hi, ev_hi
    else:
        if lo == 0.0:
            return lo, ev_lo
        hi, ev_hi = lo, ev_lo  # F already falls where the gain fill begins: search [0, there]
        lo, ev_lo = 0.0, _capped_eval(ctx, 0.0, b, m)
        if ev_lo.slope <= -flat or not rising(lo, ev_lo):
            return lo, ev_lo
    bisect_next = False
    for _ in range(_MAX_ITER):
        s_lo, s_hi = ev_lo.slope, ev_hi.slope
        # Aim at the supporting lines' intersection; where they are parallel within rounding
        # (F flat between them, or huge terms' slopes rounded alike) there is none, and the
        # bracket is halved (below).
        if s_lo > s_hi:
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


def boundary_frac(ev: Evaluation, b: int, n: int) -> float:
    """The boundary group's fraction of its capacity at the stop :func:`maximise_dual` returns.

    ``resid / group_total``, except that a ``resid`` within the rounding of the budget's
    sums (``b`` minus up to ``n`` caps, each at most 1: ``2 eps (n + b)``) is 0, as is any
    share of an empty group. A larger ``resid``, however small next to ``b``, is a real
    share (:func:`_onto_breakpoint` has already zeroed the residue of a breakpoint).
    """
    eps = float(np.finfo(float).eps)
    if ev.resid <= 2 * eps * (n + b) or not ev.group_total > 0:
        return 0.0
    return min(1.0, ev.resid / ev.group_total)


def _onto_breakpoint(ctx: CappedContext, nu: float, ev: Evaluation, b: int, m: float) -> tuple[float, Evaluation]:
    """Move a stop just below a breakpoint of the gain fill onto that breakpoint.

    A stop where ``F`` still rises (right slope > 0) and whose boundary group is left a
    share of the budget below :data:`SNAP`, or one the search could not tell from the
    breakpoint (``F`` there within its resolution), is read as the breakpoint where the groups above
    the cut spend ``b`` exactly: the returned evaluation's ``resid`` is 0, so that group
    gets nothing. The search's ``nu`` is short of that breakpoint by its own rounding, and
    so is every ``q_i = nu / a_i``: on a pool whose optimum is ``q = 1`` at ``nu = max a``,
    a stop 21 ulps short left ``q`` worth 1.3 times the tolerance less than the optimum.
    The breakpoint is solved for directly: ``sum_{g_i > cut} min(1, nu / a_i) = b``,
    stepping over the points that saturate on the way, and stopping at one whose
    saturation turns the slope ``sum_{free} (g_i - cut) / a_i - m`` non-positive (``F``'s
    maximum is there instead; ``F`` is re-evaluated to give that group its share). Sums in
    NumPy's fixed pairwise order over the sorted context, so every backend moves to the
    same bits.

    A stop where ``F`` no longer rises is ``F``'s maximum, and a small ``resid`` there is a
    real share: gains ``[1, 1e10, 1e10]``, losses ``[0, 0, 0.125]``, ``m = 1``, ``b = 2``
    stop at ``nu = 1e10``, where the third point's ``q = 1e10 / (1e10 + 0.125)`` leaves
    ``1.25e-11`` of the budget to the first point.
    """
    if ev.fill != "gain" or not ev.resid > 0 or ev.slope <= 0:
        return nu, ev
    # F is linear from the stop to the breakpoint, of slope ev.slope: a share above SNAP is
    # still residue where the breakpoint's F is within the search's own resolution of the
    # stop's (_search accepts a stop 8 eps t below its bound), i.e. the search could not
    # tell them apart: gains [1, 0.99999] (RAD losses, m = 0, b = 1) stopped 1.1e-11 short
    # of nu = a_1, where F's slope is 5e-6, and left 1.1e-11 of q to the second point.
    eps = float(np.finfo(float).eps)
    resolution = 16 * eps * (abs(ev.value + m * nu) + m * nu)

    def residue(to: float) -> bool:
        return ev.resid <= SNAP * b or ev.slope * (to - nu) <= resolution

    at_breakpoint = replace(ev, resid=0.0)
    start = count_above(ctx.sorted_gains(), ev.cut)  # points with g > cut
    g, a = ctx.gain_prefix(start)
    free = a > nu
    while np.any(free):
        h = float(np.sum(1.0 / a[free]))
        kink = (b - (start - int(np.count_nonzero(free)))) / h
        nxt = float(np.min(a[free]))
        if kink <= nxt:
            if not residue(kink):
                return nu, ev
            return (kink if kink > nu else nu), at_breakpoint
        free &= a > nxt
        if float(np.sum((g[free] - ev.cut) / a[free])) - m <= 0:
            return (nxt, _capped_eval(ctx, nxt, b, m)) if residue(nxt) else (nu, ev)
    return (nu, at_breakpoint) if ev.resid <= SNAP * b else (nu, ev)

"""The exact batch game solver (DESIGN §1) — policy shared by every backend.

Two paths:

* **Theorem 1 path.** Sort by descending gain, find ``k*`` by the threshold form, and
  if no probability would exceed 1 (``b * max p* <= 1``, i.e. ``nu = b / H <= min a``)
  the optimum is exactly ``q = b p*`` with value ``b * OPT``.
* **Capped path.** Otherwise maximise the concave, piecewise-linear dual function
  ``F(nu)`` (fill the budget in descending-gain order up to ``min(1, nu/a_i)``, the rest on
  the smallest losses; ``F = filled gain - m nu``) by intersecting supporting lines, with
  a bisection safeguard. Each evaluation is O(n) on pre-sorted arrays.

Backends supply the O(n) kernels; the decisions are made here, once.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Literal

import numpy as np

from rad._numpy_backend import canonical_prefix
from rad._solution import NetHarmWarning, Params, Solution
from rad._validation import check_values

__all__ = ["solve_game"]

#: A boundary group whose share of the budget is below this (relative to ``b``) is
#: floating-point residue at a breakpoint of ``F``, not a real fractional item.
_SNAP = 1e-11
_MAX_ITER = 400


class _Overflow(ArithmeticError):
    """1/a overflowed (subnormal gains or losses): solve again on rescaled copies."""


def solve_game(
    gains: np.ndarray,
    losses: np.ndarray | None,
    w: float,
    m: float,
    b: int,
    backend: ModuleType,
    threads: int,
    method: str = "auto",
) -> Solution:
    """Solve the batch game; inputs are already validated.

    ``w`` is the RAD loss weight (ignored when ``losses`` is given). ``method`` picks how
    Theorem 1's support is found: ``"sortfree"`` (radix select on the float bits, when the
    backend has it), ``"sorted"`` (radix sort + prefix sums), or ``"auto"`` (sort-free when
    available). Both give the same ``k*`` and threshold: the sort-free search reports any
    decision within rounding of a tie, and the sorted scan then decides.

    Subnormal inputs can make ``1/a`` overflow. Then the game is solved on copies of the
    gains and losses multiplied by a power of two (exact, and the game is
    scale-equivariant); the solution keeps those copies and reports ``scale_exponent``.
    """
    try:
        return _solve_game(gains, losses, w, m, b, backend, threads, method)
    except _Overflow:
        g64 = np.asarray(gains, dtype=np.float64)
        a = g64 + (np.asarray(losses, dtype=np.float64) if losses is not None else w * g64)
        positive = a[a > 0]
        # 2**e puts the smallest positive a near 2**-990: every 1/a and every sum of up to
        # 2**30 of them stays finite, and the largest a stays far below overflow.
        e = -990 - int(np.frexp(positive.min())[1])
        if int(np.frexp(positive.max())[1]) + e > 1000:
            raise ValueError(
                "gains and losses span too many orders of magnitude (subnormal values next "
                "to huge ones): 1/a cannot be represented; rescale or clip the tiny values"
            )
        g2 = np.ldexp(g64, e)
        l2 = None if losses is None else np.ldexp(np.asarray(losses, dtype=np.float64), e)
        sol = _solve_game(g2, l2, w, m, b, backend, threads, method)
        return replace(
            sol, value=math.ldexp(sol.value, -e), threshold=math.ldexp(sol.threshold, -e), scale_exponent=e
        )


def _solve_game(
    gains: np.ndarray,
    losses: np.ndarray | None,
    w: float,
    m: float,
    b: int,
    backend: ModuleType,
    threads: int,
    method: str = "auto",
) -> Solution:
    n = gains.shape[0]
    w_k = 0.0 if losses is not None else w
    w_report = float("nan") if losses is not None else w

    def done(value: float, k_star: int, threshold: float, capped: bool, params: Params) -> Solution:
        return Solution(
            value=value, k_star=k_star, threshold=threshold, w=w_report, m=m, b=b, n=n,
            capped=capped, params=params, gains=gains, losses=losses,
        )

    if b == 0:
        return done(0.0, 0, float("inf"), False, Params("gain", 0.0))
    if b == n:
        value = _value_of_everything(gains, losses, w_k, m)
        _warn_if_harmful(value, gains, losses, w_k, b)
        return done(value, n, float(np.min(gains)), n > 0, Params("loss", 0.0))

    perm = None
    found = None
    if method != "sorted" and hasattr(backend, "threshold_search"):
        status, tau, kstar, g_total = backend.threshold_search(gains, losses, w_k, m, threads)
        if status == 2:  # a NaN, inf or negative gain: the usual error, index included
            check_values(gains, "gains", backend.first_invalid)
        if status == 0:
            found = (float(tau), int(kstar), float(g_total))
    if found is None:
        perm = backend.argsort_desc(gains, threads)
        kstar, g_total = backend.theorem1_scan(gains, losses, w_k, perm, m, threads)
        found = (float(gains[perm[kstar - 1]]), int(kstar), float(g_total))
    tau, kstar, g_total = found
    if g_total >= m:
        if tau > 0:
            h, g, count, min_a = backend.support_sums(gains, losses, w_k, tau, threads)
            if not (math.isfinite(h) and math.isfinite(g)):
                raise _Overflow
            nu = b / h
            if nu <= min_a:
                value = b * ((g - m) / h)
                return done(value, count, tau, False, Params("gain", nu, gain_cut=tau, gain_frac=1.0))

    if perm is None and losses is None:
        perm = backend.argsort_desc(gains, threads)
    ctx = _CappedContext.build(gains, losses, w_k, perm, backend, threads)
    nu, ev = _maximise_dual(ctx, b, m)
    if not (math.isfinite(ev.value) and math.isfinite(nu)):
        raise _Overflow
    frac = 0.0 if ev.resid <= _SNAP * b else min(1.0, ev.resid / ev.group_total)
    if ev.fill == "gain":
        params = Params("gain", nu, gain_cut=ev.cut, gain_frac=frac)
    else:
        params = Params("loss", nu, loss_cut=ev.cut, loss_frac=frac)
    count, threshold = backend.support_stats(gains, losses, w_k, params, threads)
    _warn_if_harmful(ev.value, gains, losses, w_k, b)
    return done(ev.value, count, threshold, True, params)


def _warn_if_harmful(value: float, gains: np.ndarray, losses, w: float, b: int) -> None:
    scale = b * float(np.max(gains)) * (1.0 + w) + (float(np.max(losses)) if losses is not None else 0.0)
    if value < -1e-12 * scale:
        warnings.warn(
            f"the game's value is negative ({value:.6g}): with this many teacher mistakes the "
            "teacher is expected to do net harm on any batch of this size; the returned "
            "selection is still the exact minimax optimum",
            NetHarmWarning,
            stacklevel=4,
        )


def _value_of_everything(gains: np.ndarray, losses, w: float, m: float) -> float:
    """Value of ``q = 1``: the gains minus the ``m`` largest ``a_i`` (fractional ``m``)."""
    g = np.asarray(gains, dtype=np.float64)
    a = np.sort(g + (np.asarray(losses, dtype=np.float64) if losses is not None else w * g))[::-1]
    whole = int(math.floor(m))
    attacked = math.fsum(a[:whole].tolist()) + ((m - whole) * a[whole] if whole < a.shape[0] else 0.0)
    return math.fsum(g.tolist()) - attacked


# ----------------------------------------------------------------------- capped path


@dataclass(frozen=True)
class _Eval:
    value: float  # F(nu)
    slope: float  # right derivative F'(nu+)
    fill: Literal["gain", "loss"]
    cut: float  # gain (or loss) of the boundary tie group
    resid: float  # budget left for the boundary group
    group_total: float  # that group's capacity


@dataclass(frozen=True)
class _CappedContext:
    """Points sorted by descending gain (``*_g``) and by ascending loss (``*_l``)."""

    g_g: np.ndarray
    a_g: np.ndarray
    ends_g: np.ndarray
    l_l: np.ndarray
    a_l: np.ndarray
    ends_l: np.ndarray
    g_max: float
    a_max: float
    backend: ModuleType | None = None
    threads: int = 1

    @staticmethod
    def build(gains, losses, w, perm_g, backend, threads) -> "_CappedContext":
        g = np.asarray(gains, dtype=np.float64)
        if losses is None:
            # l = w g: equal gains have equal losses, so any stable order of the tie groups
            # gives the same sorted arrays; ascending loss is descending gain reversed.
            g_g = g[perm_g]
            l_g = w * g_g
            a_g = g_g + l_g
            l_l, a_l = l_g[::-1].copy(), a_g[::-1].copy()
        else:
            # Break ties by the other key, so the sorted arrays (and every sum over them)
            # are the same for any permutation of the input: exact permutation equivariance.
            l = np.asarray(losses, dtype=np.float64)
            order_g = np.lexsort((l, -g))
            order_l = np.lexsort((-g, l))
            g_g, l_g = g[order_g], l[order_g]
            a_g = g_g + l_g
            l_l = l[order_l]
            a_l = g[order_l] + l_l
        return _CappedContext(
            g_g=g_g, a_g=a_g, ends_g=_group_ends(g_g), l_l=l_l, a_l=a_l,
            ends_l=_group_ends(l_l), g_max=float(g_g[0]), a_max=float(a_g.max()),
            backend=backend, threads=threads,
        )


def _group_ends(sorted_values: np.ndarray) -> np.ndarray:
    """Exclusive end positions of the runs of equal values."""
    change = np.flatnonzero(np.diff(sorted_values) != 0) + 1
    return np.append(change, sorted_values.shape[0]).astype(np.int64)


def _excl(prefix: np.ndarray, pos: int) -> float:
    return float(prefix[pos - 1]) if pos > 0 else 0.0


def _capped_eval(ctx: _CappedContext, nu: float, b: int, m: float) -> _Eval:
    """``F(nu)`` through the backend's kernel when it has one (same bits), else NumPy."""
    kernel = getattr(ctx.backend, "capped_eval", None)
    if kernel is None:
        return _capped_eval_numpy(ctx, nu, b, m)
    value, slope, fill_loss, cut, resid, group_total = kernel(ctx, nu, b, m, ctx.threads)
    return _Eval(value, slope, "loss" if fill_loss else "gain", cut, resid, group_total)


def _capped_eval_numpy(ctx: _CappedContext, nu: float, b: int, m: float) -> _Eval:
    """``F(nu)``, its right slope and the boundary group (DESIGN §1, "Dualising")."""
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
        return _Eval(value, slope, "gain", cut, resid, float(p_cap[ends[j] - 1]) - before)
    # All gain segments filled; the remaining budget goes to the smallest losses.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cap_l = np.where(ctx.a_l <= nu, 1.0, nu / ctx.a_l)
        above_l = ctx.a_l > nu
        q_la = canonical_prefix(np.where(above_l, ctx.l_l / ctx.a_l, 0.0))
        q_ia = canonical_prefix(np.where(above_l, 1.0 / ctx.a_l, 0.0))
    room = 1.0 - cap_l
    p_room = canonical_prefix(room)
    p_lroom = canonical_prefix(ctx.l_l * room)
    rest = b - float(p_cap[-1])
    ends = ctx.ends_l
    t = min(int(np.searchsorted(p_room[ends - 1], rest, side="left")), ends.shape[0] - 1)
    start = int(ends[t - 1]) if t > 0 else 0
    before = _excl(p_room, start)
    cut = float(ctx.l_l[start])
    resid = rest - before
    value = float(p_gcap[-1]) - _excl(p_lroom, start) - cut * resid - m * nu
    slope = (
        float(p_ga[-1]) + cut * (float(p_ia[-1]) - _excl(q_ia, start)) + _excl(q_la, start) - m
    )
    return _Eval(value, slope, "loss", cut, resid, float(p_room[ends[t] - 1]) - before)


def _bisect_bits(lo: float, hi: float) -> float:
    """Midpoint of two non-negative doubles in bit-pattern order (at most 64 halvings)."""
    ilo = np.float64(lo).view(np.int64)
    ihi = np.float64(hi).view(np.int64)
    return float(np.int64(ilo + (ihi - ilo) // 2).view(np.float64))


def _maximise_dual(ctx: _CappedContext, b: int, m: float) -> tuple[float, _Eval]:
    """Maximise the concave piecewise-linear ``F`` over ``nu in [0, max a]``.

    Supporting lines at ``lo`` (slope > 0) and ``hi`` (slope <= 0) bound ``F`` from above;
    their intersection ``x`` is the next trial. ``F(x)`` equal to that bound proves ``x``
    optimal (to ``tol``). Each step either finishes or reveals a new linear piece; a
    bisection every time the bracket fails to halve keeps the worst case logarithmic.
    """
    lo, ev_lo = 0.0, _capped_eval(ctx, 0.0, b, m)
    if ev_lo.slope <= 0:
        return lo, ev_lo
    hi, ev_hi = ctx.a_max, _capped_eval(ctx, ctx.a_max, b, m)
    # Stop only at the rounding level of F (its terms reach b max g and m max a): the value
    # can be tiny next to those terms, and a looser stop would cost relative accuracy.
    tol = 8 * np.finfo(float).eps * (b * ctx.g_max + m * ctx.a_max)
    best_nu, best = (hi, ev_hi) if ev_hi.value >= ev_lo.value else (lo, ev_lo)
    bisect_next = False
    for _ in range(_MAX_ITER):
        s_lo, s_hi = ev_lo.slope, ev_hi.slope
        x = (ev_hi.value - ev_lo.value + s_lo * lo - s_hi * hi) / (s_lo - s_hi)
        # The supporting lines meet at x: no F on [lo, hi] exceeds their value there.
        bound = ev_lo.value + s_lo * (min(max(x, lo), hi) - lo)
        if bound - best.value <= tol:
            # The bound is attained at x, the kink between the two pieces; it carries the
            # rounding of F_lo, which can exceed a tiny optimum, so evaluate x itself.
            if lo < x < hi:
                ev = _capped_eval(ctx, x, b, m)
                if ev.value >= best.value:
                    best_nu, best = x, ev
            break
        if bisect_next or not (lo < x < hi):
            x = _bisect_bits(lo, hi)
        if not (lo < x < hi):
            break
        ev = _capped_eval(ctx, x, b, m)
        if ev.value > best.value:
            best_nu, best = x, ev
        width = hi - lo
        if ev.slope > 0:
            lo, ev_lo = x, ev
        else:
            hi, ev_hi = x, ev
        bisect_next = not bisect_next and (hi - lo) > 0.5 * width
    return best_nu, best

"""The exact batch game solver (``docs/design.md`` §1): every decision, once, for every backend.

Two paths:

* **Theorem 1 path.** Sort by descending gain, find ``k*`` by the threshold form, and
  if no probability would exceed 1 (``b * max p* <= 1``, i.e. ``nu = b / H <= min a``)
  the optimum is exactly ``q = b p*`` with value ``b * OPT``.
* **Capped path.** Otherwise maximise the concave, piecewise-linear dual function
  ``F(nu)`` (:mod:`rad._solve.capped`).

Backends supply the O(n) kernels; the decisions are made here, once.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from fractions import Fraction

import numpy as np

from rad._backends.contract import RoundSketch
from rad._backends.params import Params
from rad._solve.capped import boundary_frac, solve_capped
from rad._solve.capped_rad import SumsOverflow
from rad._solve.game import Game
from rad._solve.solution import NetHarmWarning, Solution
from rad._solve.validation import check_values

__all__ = ["ValueOverflowWarning", "solve_game"]


class ValueOverflowWarning(RuntimeWarning):
    """The game's value does not fit in float64: ``inf`` is returned.

    Gains near the float64 maximum; the probabilities are exact. :func:`rad.select` does
    not report it.
    """


def solve_game(game: Game) -> Solution:
    """Solve a validated game exactly.

    Theorem 1's support is found by the sort-free radix select when ``game.sortfree``,
    else by a radix sort and prefix sums. Both give the same ``k*`` and threshold: the
    sort-free search reports any decision within rounding of a tie, and the sorted scan
    then decides.

    Extreme magnitudes are solved on copies of the gains and losses multiplied by a power
    of two ``2**e`` (exact, and the game is scale-equivariant); the solution keeps those
    copies and reports ``scale_exponent``. Gains near the float64 maximum are scaled down
    first (``a = g + l`` and sums of up to ``n`` such terms must stay finite); subnormal
    inputs, which make ``1/a`` overflow, are scaled up. A value too large for float64 is
    returned as ``inf`` with a :class:`RuntimeWarning` (the probabilities are exact).
    """
    top = _top_exponent(game)
    room = 1021 - (game.n + 2).bit_length()  # a * (n + 2) * 4 below 2**1023
    if top > room:
        e = room - top
        try:
            return _rescaled(game, e)
        except SumsOverflow:
            raise ValueError(_SPAN) from None
    try:
        return _solve_game(game)
    except SumsOverflow:
        # 2**e puts the smallest positive a near 2**-990: every 1/a and every sum of up to
        # 2**30 of them stays finite, and the largest a stays far below overflow.
        e = -990 - _bottom_exponent(game)
        if top + e > room:
            raise ValueError(_SPAN) from None
        return _rescaled(game, e)


_SPAN = (
    "gains and losses span too many orders of magnitude (subnormal values next to huge "
    "ones): 1/a and the sums of a cannot both be represented; rescale or clip the tiny values"
)


def _top_exponent(game: Game) -> int:
    """A binary exponent bounding the largest ``a = g + l`` from above.

    One max pass over float64 gains; float32 gains cannot come near overflow, so they are
    not read.
    """
    if game.n == 0:
        return 0
    if game.gains.dtype == np.float32:
        g_max = float(np.finfo(np.float32).max)
    else:
        g_max = float(np.max(game.gains))
    if game.losses is None:
        return math.frexp(g_max)[1] + math.frexp(1.0 + game.kernel_w)[1]
    return max(math.frexp(g_max)[1], math.frexp(float(np.max(game.losses)))[1]) + 1


def _bottom_exponent(game: Game) -> int:
    """The binary exponent of the smallest positive ``a`` (only when ``1/a`` overflowed)."""
    g64 = np.asarray(game.gains, dtype=np.float64)
    with np.errstate(over="ignore"):
        a = g64 + (game.losses if game.losses is not None else game.kernel_w * g64)
    positive = a[a > 0]
    return math.frexp(float(positive.min()))[1] if positive.shape[0] else 0


def _rescaled(game: Game, e: int) -> Solution:
    g2 = np.ldexp(np.asarray(game.gains, dtype=np.float64), e)
    l2 = None if game.losses is None else np.ldexp(game.losses, e)
    sol = _solve_game(replace(game, gains=g2, losses=l2))
    with np.errstate(over="ignore"):  # an overflow is reported below, in words
        value = float(np.ldexp(sol.value, -e))
    if math.isinf(value):
        warnings.warn(
            f"the game's value ({sol.value!r} * 2**{-e}) is too large for float64 and is "
            "returned as inf; the probabilities are exact (solved on the gains times "
            f"2**{e}: Solution.scale_exponent)",
            ValueOverflowWarning,
            stacklevel=4,
        )
    threshold = float(np.ldexp(sol.threshold, -e)) + 0.0
    return replace(sol, value=value, threshold=threshold, scale_exponent=e)


def _solve_game(game: Game) -> Solution:
    gains, losses, m, b = game.gains, game.losses, game.m, game.b
    backend, threads = game.backend, game.threads
    n = game.n
    w_k = game.kernel_w

    def done(value: float, k_star: int, threshold: float, capped: bool, params: Params,
             sketch: RoundSketch | None = None) -> Solution:
        return Solution(
            value=value, k_star=k_star, threshold=threshold + 0.0, w=game.w, m=m, b=b, n=n,
            capped=capped, params=params, gains=gains, losses=losses, round_sketch=sketch,
        )

    if b == 0:
        return done(0.0, 0, float("inf"), False, Params("gain", 0.0))
    if b == n:
        value = _value_of_everything(gains, losses, w_k, m)
        _warn_if_harmful(value, gains, losses, w_k, b)
        return done(value, n, float(np.min(gains)), n > 0, Params("loss", 0.0))

    perm = None
    found = None
    sums = None  # the support sums at tau, when the search brought them along
    sketch = None  # and the DepRound sketch recorded with them
    if game.sortfree:
        status, tau, kstar, g_total, sums, sketch = backend.threshold_support(gains, losses, w_k, m, b, threads)
        if status == 2:  # a NaN, inf or negative gain: the usual error, index included
            check_values(gains, "gains", lambda x: backend.first_invalid(x, threads))
        if status == 0:
            found = (float(tau), int(kstar), float(g_total))
        elif status == 3:  # the caps bind whatever tau is: k* <= kstar < b and G_n >= m
            found = (math.nan, int(kstar), float(g_total))
    if found is None:
        perm = backend.argsort_desc(gains, threads)
        kstar, g_total = backend.theorem1_scan(gains, losses, w_k, perm, m, threads)
        found = (float(gains[perm[kstar - 1]]), int(kstar), float(g_total))
    tau, kstar, g_total = found
    if g_total >= m:
        # b > k* means b max p* >= b / k* > 1: the caps bind, so skip the support pass.
        if tau > 0 and b <= kstar:
            h, g, count, min_a = sums if sums is not None else backend.support_sums(gains, losses, w_k, tau, threads)
            if not (math.isfinite(h) and math.isfinite(g)):
                raise SumsOverflow
            nu = b / h
            if nu <= min_a:
                value = b * _theorem1_value(gains, losses, w_k, m, tau, g, h, count)
                return done(value, count, tau, False, Params("gain", nu, gain_cut=tau, gain_frac=1.0), sketch)

    ctx, nu, ev = solve_capped(gains, losses, w_k, backend, threads, b, m, kstar)
    if not (math.isfinite(ev.value) and math.isfinite(nu)):
        raise SumsOverflow
    frac = boundary_frac(ev, b, n)
    if ev.fill == "gain":
        params = Params("gain", nu, gain_cut=ev.cut, gain_frac=frac)
    else:
        params = Params("loss", nu, loss_cut=ev.cut, loss_frac=frac)
    support = ctx.rad.support(nu, ev.cut, frac) if ctx.rad is not None and ev.fill == "gain" else None
    count, threshold = support if support is not None else backend.support_stats(gains, losses, w_k, params, threads)
    _warn_if_harmful(ev.value, gains, losses, w_k, b, ctx.g_max)
    return done(ev.value, count, threshold, True, params)


def _warn_if_harmful(value: float, gains: np.ndarray, losses: np.ndarray | None, w: float, b: int,
                     g_max: float | None = None) -> None:
    if g_max is None:
        g_max = float(np.max(gains))
    scale = b * g_max * (1.0 + w) + (float(np.max(losses)) if losses is not None else 0.0)
    if value < -1e-12 * scale:
        warnings.warn(
            f"the game's value is negative ({value:.6g}): with this many teacher mistakes the "
            "teacher is expected to do net harm on any batch of this size; the returned "
            "selection is still the exact minimax optimum",
            NetHarmWarning,
            stacklevel=4,
        )


def _theorem1_value(
    gains: np.ndarray | None, losses: np.ndarray | None, w: float, m: float, tau: float, g: float, h: float, count: int
) -> float:
    """Theorem 1's ``OPT = (G - m) / H`` without the cancellation of ``G - m``.

    With RAD losses ``a_i = (1 + w) g_i``, so ``G = count / (1 + w)`` exactly and
    ``OPT = (count - (1 + w) m) / ((1 + w) H)``, whose numerator is formed exactly. With
    general losses ``G`` is summed again with :func:`math.fsum` when ``G - m`` cancels (the
    terms ``g_i / a_i`` are then each within half an ulp, the input's own precision).
    """
    if losses is None:
        num = float(Fraction(count) - (1 + Fraction(w)) * Fraction(m))
        return num / ((1.0 + w) * h)
    if abs(g - m) <= 1e-3 * abs(g) and gains is not None:
        gv = np.asarray(gains, dtype=np.float64)
        a = gv + np.asarray(losses, dtype=np.float64)
        mask = (gv >= tau) & (a > 0)
        terms = (gv[mask] / a[mask]).tolist()
        return float(Fraction(math.fsum(terms)) - Fraction(m)) / h
    return (g - m) / h


def _value_of_everything(gains: np.ndarray, losses: np.ndarray | None, w: float, m: float) -> float:
    """Value of ``q = 1``: the gains minus the ``m`` largest ``a_i`` (fractional ``m``).

    Summed as one :func:`math.fsum` of the payoffs (``g_i`` spared, ``-l_i`` attacked,
    ``(1-f) g - f l`` for the partly attacked point), so a value that is tiny next to
    ``sum g`` keeps its relative accuracy.
    """
    g = np.asarray(gains, dtype=np.float64)
    lv = np.asarray(losses, dtype=np.float64) if losses is not None else w * g
    order = np.argsort(-(g + lv), kind="stable")
    whole = min(int(math.floor(m)), g.shape[0])
    terms = g[order[whole:]].tolist() + (-lv[order[:whole]]).tolist()
    if whole < g.shape[0]:
        i, f = order[whole], m - whole
        terms += [-f * float(g[i]), -f * float(lv[i])]  # the spared g[i] is in the terms
    return math.fsum(terms)

"""An exact (rational) solver of the batch game, for judging the solver's tiny errors.

Everything here is :class:`fractions.Fraction` arithmetic on the exact values of the
input floats; nothing calls into ``rad``. It is meant for pools of up to ~15 points.

The batch game (docs/design.md §1)::

    OPT_b = max_{q in [0,1]^n, sum q = b}  sum_i q_i g_i - topm(q_i a_i)

where ``topm`` is the sum of the ``m`` largest entries (a fractional ``m`` takes that
share of the next one). Writing ``topm(x) = min_nu m nu + sum (x_i - nu)^+`` turns the
problem into ``max_nu F(nu)`` with ``F`` concave and piecewise linear:

* for a fixed ``nu`` the best ``q`` fills points in descending-gain order up to
  ``min(1, nu/a_i)`` (marginal value ``g_i``), then the rest of the budget above those caps
  in ascending-loss order (marginal value ``-l_i``); ``F(nu)`` is that fill's value minus
  ``m nu``;
* between two consecutive values of ``a`` every cap is affine in ``nu``, so the kinks of
  ``F`` there are where a prefix of the gain fill (or the gain fill plus a prefix of the
  loss fill) has capacity exactly ``b``; :func:`breakpoints` lists them all, and the
  maximum of ``F`` is attained at one of them.

:func:`perturbation` is the conditioning of an instance: how far the exact optimum moves
when every input (each gain, each loss and ``m``) moves by one unit in the last place in
the direction that raises (resp. lowers) it. A result within a small multiple of that is as
exact as the input's own precision allows; tolerances in the tests are stated in it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

__all__ = ["ExactGame", "adversary_value", "exact_game", "perturbation"]

#: One unit in the last place, relative (an upper bound for every normal float64).
ULP = Fraction(1, 2**52)


def _fr(x) -> list[Fraction]:
    return [Fraction(float(v)) for v in np.asarray(x, dtype=np.float64).ravel()]


class ExactGame:
    """A game with exact gains, losses and ``m`` (Fractions); ``b`` an integer."""

    def __init__(self, g: Sequence[Fraction], l: Sequence[Fraction], m: Fraction, b: int) -> None:
        self.g = list(g)
        self.l = list(l)
        self.a = [gi + li for gi, li in zip(self.g, self.l)]
        self.m = Fraction(m)
        self.b = int(b)
        self.n = len(self.g)
        self.order_g = sorted(range(self.n), key=lambda i: -self.g[i])
        self.order_l = sorted(range(self.n), key=lambda i: self.l[i])

    # ------------------------------------------------------------------ F(nu)
    def caps(self, nu: Fraction) -> list[Fraction]:
        return [Fraction(1) if a <= nu else nu / a for a in self.a]

    def fill(self, nu: Fraction) -> list[Fraction]:
        """The best ``q`` for the water level ``nu``."""
        cap = self.caps(nu)
        q = [Fraction(0)] * self.n
        rest = Fraction(self.b)
        for i in self.order_g:
            t = min(cap[i], rest)
            q[i] = t
            rest -= t
        for i in self.order_l:
            if rest <= 0:
                break
            t = min(1 - cap[i], rest)
            q[i] += t
            rest -= t
        return q

    def F(self, nu: Fraction) -> Fraction:
        q = self.fill(nu)
        value = Fraction(0)
        for i in range(self.n):
            over = q[i] * self.a[i] - nu
            value += q[i] * self.g[i] - (over if over > 0 else 0)
        return value - self.m * nu

    def breakpoints(self) -> list[Fraction]:
        """Every ``nu`` where ``F`` can have a kink, in ``[0, max a]``."""
        levels = sorted({Fraction(0)} | {a for a in self.a if a > 0})
        out = set(levels)
        b = Fraction(self.b)
        for lo, hi in zip(levels, levels[1:]):
            # on (lo, hi): cap_i = 1 if a_i <= lo else nu / a_i  (c0 + c1 nu)
            c0 = [Fraction(1) if a <= lo else Fraction(0) for a in self.a]
            c1 = [Fraction(0) if a <= lo else 1 / a for a in self.a]
            s0 = s1 = Fraction(0)
            seq = [(c0[i], c1[i]) for i in self.order_g]
            seq += [(1 - c0[i], -c1[i]) for i in self.order_l]
            for k0, k1 in seq:
                s0 += k0
                s1 += k1
                if s1 != 0:
                    nu = (b - s0) / s1
                    if lo < nu < hi:
                        out.add(nu)
        return sorted(out)

    def solve(self) -> tuple[Fraction, Fraction]:
        """``(OPT_b, nu*)`` (the smallest maximiser)."""
        if self.b == 0:
            return Fraction(0), Fraction(0)
        best = None
        for nu in self.breakpoints():
            v = self.F(nu)
            if best is None or v > best[0]:
                best = (v, nu)
        assert best is not None
        return best

    def value_of(self, q: Sequence[Fraction]) -> Fraction:
        """``sum q g - topm(q a)``: the value of ``q`` against the adversary's best response."""
        x = sorted((qi * ai for qi, ai in zip(q, self.a)), reverse=True)
        whole = math.floor(self.m)
        attacked = sum(x[:whole], Fraction(0))
        if whole < len(x):
            attacked += (self.m - whole) * x[whole]
        return sum((qi * gi for qi, gi in zip(q, self.g)), Fraction(0)) - attacked

    def scaled(self, sg: Fraction, sl: Fraction, sm: Fraction) -> ExactGame:
        m = min(self.m * sm, Fraction(self.n))
        return ExactGame([x * sg for x in self.g], [x * sl for x in self.l], m, self.b)


def exact_game(gains, m: float, b: int, *, losses=None, w: float | None = None) -> ExactGame:
    """The exact game of ``rad.solve``'s arguments (RAD losses ``w g``, default
    ``w = 1 - m/n`` rounded as the solver rounds it)."""
    g = _fr(gains)
    n = len(g)
    if losses is not None:
        l = _fr(losses)
    else:
        wf = (1.0 - float(m) / n) if w is None else float(w)
        l = [Fraction(wf) * x for x in g]
    return ExactGame(g, l, Fraction(float(m)), b)


def perturbation(game: ExactGame) -> Fraction:
    """How far one ulp of every input can move ``OPT_b``: ``OPT(up) - OPT(down)``.

    ``OPT`` rises with each gain and falls with each loss and with ``m`` (the payoff is
    ``c_i g_i - (1 - c_i) l_i``; a larger ``m`` only enlarges the adversary's set), so the
    extreme perturbations are ``g (1 +- u), l (1 -+ u), m (1 -+ u)`` with ``u = 2^-52``.
    """
    up = game.scaled(1 + ULP, 1 - ULP, 1 - ULP).solve()[0]
    down = game.scaled(1 - ULP, 1 + ULP, 1 + ULP).solve()[0]
    return up - down


def adversary_value(game: ExactGame, q) -> Fraction:
    """The exact value of a float vector ``q`` (taken as given, not renormalised)."""
    return game.value_of(_fr(q))

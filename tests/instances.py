"""Hypothesis strategies for robust-distillation game instances.

:func:`instances` draws a whole game: gains, losses (RAD losses ``w * gains`` or general
ones), the number of mistakes ``m`` and the batch size ``b``. Its keyword arguments select
sub-families, e.g. ``instances(losses=True, theorem1=True, max_n=8)``.

Shapes of gains covered: uniform, heavy ties, exact zeros, all equal, one huge value,
log-normal and Pareto tails, and log-uniform values spanning ``1e-6 .. 1e6``. Non-zero
values are kept in ``[1e-6, 1e6]`` (no subnormals), zeros are exact. The extra kind
``"wide"`` (:data:`WIDE_KINDS`, not drawn by default) spans ``1e-30 .. 1e30`` unclipped:
the pools where a global rounding scale hides errors 1e15 times larger than the optimum's
own precision (issue 14).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

__all__ = ["GAIN_KINDS", "LOSS_KINDS", "WIDE_KINDS", "gain_arrays", "instances", "loss_arrays"]

GAIN_KINDS = ("uniform", "ties", "zeros", "all_equal", "one_huge", "lognormal", "pareto", "span")
LOSS_KINDS = ("uniform", "ties", "zeros", "some_zeros", "span", "scaled")
#: Every gain kind, including gains spanning 1e-30 .. 1e30 (opt-in: some properties, such
#: as scale invariance by 1e-3, need values far from under- and overflow).
WIDE_KINDS = GAIN_KINDS + ("wide",)

_TINY, _HUGE = 1e-6, 1e6
_unit = st.floats(_TINY, 1.0)
_wide = st.floats(_TINY, _HUGE)
_span = st.floats(-6.0, 6.0).map(lambda e: float(10.0**e))
_wide_span = st.floats(-30.0, 30.0).map(lambda e: float(10.0**e))
_seed = st.integers(0, 2**32 - 1)


def _clean(x: np.ndarray) -> np.ndarray:
    """Clip into ``{0} U [1e-6, 1e6]`` as float64."""
    x = np.minimum(np.asarray(x, dtype=np.float64), _HUGE)
    return np.where(x < _TINY, 0.0, x)


@st.composite
def gain_arrays(
    draw: st.DrawFn,
    n: int | None = None,
    *,
    min_n: int = 1,
    max_n: int = 40,
    kinds: tuple[str, ...] = GAIN_KINDS,
    positive: bool = False,
) -> np.ndarray:
    """Draw a float64 gain vector.

    Parameters
    ----------
    n : int, optional
        Exact length; otherwise drawn from ``[min_n, max_n]``.
    kinds : tuple of str
        Subset of :data:`GAIN_KINDS` to draw the shape from.
    positive : bool
        Replace exact zeros by a positive value (Theorem 1 with RAD losses needs ``g > 0``).
    """
    if n is None:
        n = draw(st.integers(min_n, max_n))
    kind = draw(st.sampled_from(kinds))
    size = {"min_size": n, "max_size": n}
    if kind == "uniform":
        g = draw(st.lists(_unit, **size))
    elif kind == "ties":
        g = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0]), **size))
    elif kind == "zeros":
        g = draw(st.lists(st.one_of(st.just(0.0), _unit), **size))
    elif kind == "all_equal":
        g = [draw(st.one_of(st.just(0.0), st.just(1.0), _wide))] * n
    elif kind == "one_huge":
        g = draw(st.lists(_unit, **size))
        g[draw(st.integers(0, n - 1))] = draw(st.floats(1e3, _HUGE))
    elif kind == "lognormal":
        rng = np.random.default_rng(draw(_seed))
        g = rng.lognormal(0.0, draw(st.floats(0.5, 3.0)), n)
    elif kind == "pareto":
        rng = np.random.default_rng(draw(_seed))
        g = rng.pareto(draw(st.floats(0.5, 3.0)), n)
    elif kind == "span":
        g = draw(st.lists(_span, **size))
    elif kind == "wide":
        g = draw(st.lists(st.one_of(_wide_span, _wide_span, _wide_span, st.just(0.0)), **size))
    else:
        raise ValueError(f"unknown gain kind {kind!r}")
    out = np.asarray(g, dtype=np.float64) if kind == "wide" else _clean(g)
    if positive and np.any(out == 0.0):
        out[out == 0.0] = draw(st.sampled_from([_TINY, 1.0]))
    return out


@st.composite
def loss_arrays(
    draw: st.DrawFn, gains: np.ndarray, *, kinds: tuple[str, ...] = LOSS_KINDS
) -> np.ndarray:
    """Draw general losses for ``gains`` (not proportional to them; may contain zeros)."""
    n = gains.shape[0]
    kind = draw(st.sampled_from(kinds))
    size = {"min_size": n, "max_size": n}
    if kind == "uniform":
        lo = np.array(draw(st.lists(st.floats(0.0, 2.0), **size)))
    elif kind == "ties":
        lo = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]), **size)))
    elif kind == "zeros":
        lo = np.zeros(n)
    elif kind == "some_zeros":
        lo = np.array(draw(st.lists(st.one_of(st.just(0.0), _unit), **size)))
    elif kind == "span":
        lo = np.array(draw(st.lists(_span, **size)))
    elif kind == "scaled":  # comparable to the largest gain, but unrelated per point
        lo = np.array(draw(st.lists(st.floats(0.0, 1.0), **size))) * float(gains.max(initial=1.0))
    else:
        raise ValueError(f"unknown loss kind {kind!r}")
    return _clean(lo)


def _exact_G(gains: np.ndarray, losses: np.ndarray) -> Fraction:
    """``G_n = sum g_i / a_i`` over ``a_i > 0``, exactly."""
    total = Fraction(0)
    for g, lo in zip(gains.tolist(), losses.tolist()):
        if g + lo > 0:
            total += Fraction(g) / (Fraction(g) + Fraction(lo))
    return total


def _float_at_most(x: Fraction) -> float:
    """The largest float ``<= x``."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


@st.composite
def instances(
    draw: st.DrawFn,
    *,
    losses: bool | None = None,
    min_n: int = 1,
    max_n: int = 40,
    theorem1: bool = False,
    m_kind: str = "any",
    min_b: int = 0,
    gain_kinds: tuple[str, ...] = GAIN_KINDS,
) -> dict[str, Any]:
    """Draw a game instance.

    Parameters
    ----------
    losses : bool or None
        True: general losses; False: RAD losses ``w * gains``; None: either.
    min_n, max_n : int
        Range of the pool size ``n``.
    theorem1 : bool
        Only instances where Theorem 1 applies: every ``a_i > 0`` and ``m <= G_n``.
    m_kind : {"any", "integer", "fractional"}
        Restrict ``m`` to integers or to non-integers.
    min_b : int
        Smallest batch size (``b`` is drawn from ``[min_b, n]``, favouring 0, 1, n-1, n).
    gain_kinds : tuple of str
        Shapes of gains to draw from (see :data:`GAIN_KINDS`).

    Returns
    -------
    dict
        ``gains`` (float64 array), ``losses`` (array or None: the argument to pass to the
        LP), ``w`` (float or None: only with RAD losses, None meaning the default
        ``1 - m/n``), ``l`` (the effective loss vector), ``m`` (float), ``b`` (int).
    """
    general = draw(st.booleans()) if losses is None else losses
    gains = draw(
        gain_arrays(min_n=min_n, max_n=max_n, kinds=gain_kinds, positive=theorem1 and not general)
    )
    n = gains.shape[0]
    loss_arg: np.ndarray | None = None
    w: float | None = None
    if general:
        loss_arg = draw(loss_arrays(gains))
        if theorem1:  # a_i > 0: give zero-gain points a positive loss
            fix = (gains + loss_arg) == 0.0
            loss_arg[fix] = draw(st.sampled_from([_TINY, 1.0]))
    elif draw(st.booleans()):
        w = draw(st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 2.0)))

    # Upper end of m: n, or G_n when Theorem 1 must apply (with the default w, G_n >= m
    # holds for every m in [0, n]: G_n = n / (2 - m/n) for positive gains, docs/design.md §1).
    if general or w is not None:
        lo_now = loss_arg if general else w * gains
        G = _exact_G(gains, lo_now)
    else:
        G = Fraction(n)
    m_cap = _float_at_most(G) if theorem1 else float(n)
    if m_kind == "fractional":
        k = draw(st.integers(0, max(math.ceil(m_cap) - 1, 0)))
        m = k + draw(st.floats(0.0, 1.0, exclude_min=True, exclude_max=True))
        assume(m <= m_cap and m != math.floor(m))
    else:
        m_kinds = ["zero", "cap", "int", "float"]
        if not theorem1 and _float_at_most(G) < n:
            m_kinds.append("beyond_G")
        kind = draw(st.sampled_from(m_kinds))
        if kind == "zero":
            m = 0.0
        elif kind == "cap":
            m = m_cap
        elif kind == "int":
            m = float(draw(st.integers(0, math.floor(m_cap))))
        elif kind == "float":
            m = draw(st.floats(0.0, m_cap))
        else:
            m = draw(st.floats(_float_at_most(G), float(n)))
        if m_kind == "integer":
            m = float(math.floor(m))
        elif m_kind != "any":
            raise ValueError(f"unknown m_kind {m_kind!r}")

    if general:
        eff = loss_arg
    else:
        eff = (1.0 - m / n if w is None else w) * gains
    if theorem1:
        # Guards float round-off in the default w = 1 - m/n when m is close to n.
        assume(bool(np.all(gains + eff > 0)) and _exact_G(gains, eff) >= Fraction(m))

    lo_b = min(min_b, n)
    b = draw(st.one_of(st.sampled_from([lo_b, 1, n - 1, n]), st.integers(lo_b, n)))
    b = int(min(max(b, lo_b), n))
    return {"gains": gains, "losses": loss_arg, "w": w, "l": eff, "m": float(m), "b": b}

"""Exact best responses in the robust-distillation game (docs/design.md §1).

The batch game is

    max_{q in [0,1]^n, sum q = b}  min_{c in [0,1]^n, sum c = n - m}  sum_i q_i (c_i a_i - l_i)

with ``a_i = g_i + l_i``. Writing ``u = 1 - c`` for the adversary's mistakes, the payoff is
``sum_i q_i g_i - sum_i u_i q_i a_i``. Each player's best response to a fixed opponent is a
sort, so any proposed ``q`` (or ``c``) can be scored exactly without an LP:

* :func:`adversary_value` -- the payoff ``q`` guarantees (a lower bound on the game value);
* :func:`adversary_response` -- the mistakes ``u`` that attain it;
* :func:`sampler_value` -- the payoff a sampler of ``b`` points reaches against ``c`` (an
  upper bound on the game value when ``c`` is feasible).

These functions use NumPy only and are meant as references for tests and certificates, so
they favour exactness (sorted, compensated sums) over speed; each is O(n log n).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad._backends import numpy_backend
from rad._solve.validation import (
    as_float_vector,
    check_budget,
    check_losses_or_w,
    check_mistakes,
    check_values,
)

__all__ = ["adversary_response", "adversary_value", "sampler_value"]


def _game_arrays(
    gains: ArrayLike, losses: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``gains`` and ``losses`` as float64, checked as by every ``rad`` entry point."""
    g = as_float_vector(gains, "gains")
    check_values(g, "gains", numpy_backend.first_invalid)
    if losses is None:
        raise TypeError("losses is required (RAD losses are w * gains)")
    lo, _ = check_losses_or_w(losses, None, g, numpy_backend.first_invalid)
    assert lo is not None
    return np.asarray(g, dtype=np.float64), lo


def _strategy(x: ArrayLike, name: str, n: int) -> NDArray[np.float64]:
    """A player's vector (``q`` or ``c``): 1-D, length ``n``, finite (any sign)."""
    arr = np.asarray(as_float_vector(x, name), dtype=np.float64)
    if arr.shape[0] != n:
        raise ValueError(f"{name} has length {arr.shape[0]}, expected {n} (the length of gains)")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.shape[0]:
        i = int(bad[0])
        raise ValueError(f"{name} must be finite; {name}[{i}] = {arr[i]!r}")
    return arr


def _mistake_order(scores: NDArray[np.float64]) -> NDArray[np.intp]:
    """Indices by descending score, ties broken by index (deterministic)."""
    return np.argsort(-scores, kind="stable")


def adversary_response(
    q: ArrayLike, gains: ArrayLike, m: float, *, losses: ArrayLike
) -> NDArray[np.float64]:
    """Return the adversary's best response ``u = 1 - c`` to the sampling vector ``q``.

    The adversary minimises ``sum_i q_i g_i - sum_i u_i q_i a_i`` over ``u in [0,1]^n``
    with ``sum u = m``: it places one unit of mistake on each of the ``floor(m)`` largest
    ``q_i a_i`` and the fractional part of ``m`` on the next one (docs/design.md §1). Ties are broken
    by index.

    Parameters
    ----------
    q : array_like, shape (n,)
        The sampler's inclusion probabilities (any finite vector is accepted).
    gains : array_like, shape (n,)
        Non-negative gains ``g``.
    m : float
        Number of mistakes, ``0 <= m <= n``; need not be an integer.
    losses : array_like, shape (n,)
        Non-negative losses ``l`` (keyword only).

    Returns
    -------
    numpy.ndarray, shape (n,), float64
        Mistake vector ``u`` with entries in ``[0, 1]`` summing to ``m``.

    Raises
    ------
    ValueError
        On a shape or length mismatch, non-finite entries, negative gains or losses, or
        ``m`` outside ``[0, n]``.
    """
    g, lo = _game_arrays(gains, losses)
    n = g.shape[0]
    qv = _strategy(q, "q", n)
    mf = check_mistakes(m, n)
    order = _mistake_order(qv * (g + lo))
    k = int(math.floor(mf))
    u = np.zeros(n, dtype=np.float64)
    u[order[:k]] = 1.0
    frac = mf - k
    if frac > 0.0:  # k < n here, since m <= n
        u[order[k]] = frac
    return u


def adversary_value(q: ArrayLike, gains: ArrayLike, m: float, *, losses: ArrayLike) -> float:
    """Return the payoff ``q`` guarantees against a best-responding adversary.

    ``value(q) = sum_i q_i g_i - (sum of the m largest q_i a_i)``, with the fractional part
    of a non-integer ``m`` applied to the ``(floor(m)+1)``-th largest term (docs/design.md §1). For
    a feasible ``q`` (entries in ``[0,1]``, sum ``b``) this is a lower bound on the game
    value, attained exactly by an optimal ``q``.

    Parameters
    ----------
    q : array_like, shape (n,)
        The sampler's inclusion probabilities (any finite vector is accepted).
    gains : array_like, shape (n,)
        Non-negative gains ``g``.
    m : float
        Number of mistakes, ``0 <= m <= n``; need not be an integer.
    losses : array_like, shape (n,)
        Non-negative losses ``l`` (keyword only).

    Returns
    -------
    float
        ``min_c sum_i q_i (c_i a_i - l_i)``, accumulated with :func:`math.fsum`.

    Raises
    ------
    ValueError
        On a shape or length mismatch, non-finite entries, negative gains or losses, or
        ``m`` outside ``[0, n]``.
    """
    g, lo = _game_arrays(gains, losses)
    n = g.shape[0]
    qv = _strategy(q, "q", n)
    mf = check_mistakes(m, n)
    scores = np.sort(qv * (g + lo))[::-1]
    k = int(math.floor(mf))
    terms = [float(x) for x in qv * g]
    terms.extend(-float(x) for x in scores[:k])
    frac = mf - k
    if frac > 0.0:
        terms.append(-frac * float(scores[k]))
    return math.fsum(terms)


def sampler_value(c: ArrayLike, gains: ArrayLike, b: int, *, losses: ArrayLike) -> float:
    """Return the best payoff of a sampler of ``b`` points against the adversary ``c``.

    For fixed ``c`` the payoff ``sum_i q_i (c_i a_i - l_i)`` is linear in ``q``, maximised
    over ``q in [0,1]^n, sum q = b`` by the ``b`` largest ``c_i a_i - l_i`` (docs/design.md §1,
    Certificate). For a feasible ``c`` (entries in ``[0,1]``, sum ``n - m``) this is an
    upper bound on the game value, attained exactly by an equilibrium ``c``.

    Parameters
    ----------
    c : array_like, shape (n,)
        The adversary's correctness vector (any finite vector is accepted).
    gains : array_like, shape (n,)
        Non-negative gains ``g``.
    b : int
        Batch size, ``0 <= b <= n``.
    losses : array_like, shape (n,)
        Non-negative losses ``l`` (keyword only).

    Returns
    -------
    float
        Sum of the ``b`` largest ``c_i a_i - l_i`` (0 for ``b = 0``).

    Raises
    ------
    TypeError
        If ``b`` is not an integer.
    ValueError
        On a shape or length mismatch, non-finite entries, negative gains or losses, or
        ``b`` outside ``[0, n]``.
    """
    g, lo = _game_arrays(gains, losses)
    n = g.shape[0]
    cv = _strategy(c, "c", n)
    bi = check_budget(b, n)
    payoff = cv * (g + lo) - lo
    top = np.sort(payoff)[::-1][:bi]
    return math.fsum(float(x) for x in top)

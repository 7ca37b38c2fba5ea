"""Exact best responses in the robust-distillation game (DESIGN §1).

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
import numbers

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["adversary_response", "adversary_value", "sampler_value"]


def _vector(x: ArrayLike, name: str, n: int | None = None) -> NDArray[np.float64]:
    """Return ``x`` as a finite 1-D float64 array, checking its length against ``n``."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has length {arr.shape[0]}, expected {n} (the length of gains)")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _game_arrays(
    gains: ArrayLike, losses: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    g = _vector(gains, "gains")
    lo = _vector(losses, "losses", g.shape[0])
    if np.any(g < 0):
        raise ValueError("gains must be non-negative")
    if np.any(lo < 0):
        raise ValueError("losses must be non-negative")
    return g, lo


def _check_m(m: float, n: int) -> float:
    if isinstance(m, bool) or not isinstance(m, numbers.Real):
        raise TypeError(f"m must be a real number, got {type(m).__name__}")
    mf = float(m)
    if not (0.0 <= mf <= n):  # also rejects NaN
        raise ValueError(f"m must lie in [0, n] = [0, {n}], got {m!r}")
    return mf


def _check_b(b: int, n: int) -> int:
    if isinstance(b, bool) or not isinstance(b, numbers.Integral):
        raise TypeError(f"b must be an integer, got {type(b).__name__}")
    bi = int(b)
    if not (0 <= bi <= n):
        raise ValueError(f"b must lie in [0, n] = [0, {n}], got {b!r}")
    return bi


def _mistake_order(scores: NDArray[np.float64]) -> NDArray[np.intp]:
    """Indices by descending score, ties broken by index (deterministic)."""
    return np.argsort(-scores, kind="stable")


def adversary_response(
    q: ArrayLike, gains: ArrayLike, m: float, *, losses: ArrayLike
) -> NDArray[np.float64]:
    """Return the adversary's best response ``u = 1 - c`` to the sampling vector ``q``.

    The adversary minimises ``sum_i q_i g_i - sum_i u_i q_i a_i`` over ``u in [0,1]^n``
    with ``sum u = m``: it places one unit of mistake on each of the ``floor(m)`` largest
    ``q_i a_i`` and the fractional part of ``m`` on the next one (DESIGN §1). Ties are broken
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
    qv = _vector(q, "q", n)
    mf = _check_m(m, n)
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
    of a non-integer ``m`` applied to the ``(floor(m)+1)``-th largest term (DESIGN §1). For
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
    qv = _vector(q, "q", n)
    mf = _check_m(m, n)
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
    over ``q in [0,1]^n, sum q = b`` by the ``b`` largest ``c_i a_i - l_i`` (DESIGN §1,
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
    cv = _vector(c, "c", n)
    bi = _check_b(b, n)
    payoff = cv * (g + lo) - lo
    top = np.sort(payoff)[::-1][:bi]
    return math.fsum(float(x) for x in top)

"""Naive reference implementations for the tests (the ``tests/naive.py`` pattern).

Each function here is written to be *obviously* correct rather than fast: explicit loops,
exact rational arithmetic (:class:`fractions.Fraction`, which represents every float
exactly) where the result is a closed form, and exhaustive enumeration where the problem is
tiny. None of them calls into ``rad``.

* :func:`naive_theorem1` -- the paper's Theorem 1 (single draw), exactly.
* :func:`naive_depround` -- the paper's Algorithm 2 (DepRound), literally.
* :func:`naive_value_bruteforce` -- the adversary's best response by enumeration.
* :func:`naive_game_bruteforce` -- the batch game as a finite matrix game.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import linprog

__all__ = [
    "mistake_vertices",
    "naive_depround",
    "naive_game_bruteforce",
    "naive_theorem1",
    "naive_value_bruteforce",
]


def _fractions(x: ArrayLike) -> list[Fraction]:
    return [Fraction(float(v)) for v in np.asarray(x, dtype=np.float64).ravel()]


def naive_theorem1(
    gains: ArrayLike, m: float, *, losses: ArrayLike
) -> tuple[NDArray[np.float64], float, int]:
    """Theorem 1 of the paper, evaluated exactly with explicit loops.

    Sort the points by descending gain (ties by index), let
    ``G_k = sum_{i<=k} g_i/a_i``, ``H_k = sum_{i<=k} 1/a_i``, ``N(k) = (G_k - m)/H_k``;
    ``k* = argmax_k N(k)`` (the smallest maximiser), ``p*_i = 1/(H_{k*} a_i)`` on the top
    ``k*`` points and ``OPT = N(k*)``. All arithmetic is exact (``Fraction``); only the
    outputs are rounded to float.

    Parameters
    ----------
    gains, losses : array_like, shape (n,)
        Non-negative gains and losses with ``a = gains + losses > 0`` everywhere.
    m : float
        Number of mistakes with ``0 <= m <= G_n``.

    Returns
    -------
    p : numpy.ndarray, shape (n,)
        ``p*`` in the input order.
    value : float
        ``OPT = N(k*)``.
    k_star : int
        Support size ``k*`` (1-based count).

    Raises
    ------
    ValueError
        If some ``a_i <= 0`` or ``G_n < m`` (the theorem does not apply), or on bad shapes.
    """
    g = _fractions(gains)
    lo = _fractions(losses)
    n = len(g)
    if n == 0 or len(lo) != n:
        raise ValueError("gains and losses must be non-empty and of equal length")
    if any(x < 0 for x in g) or any(x < 0 for x in lo):
        raise ValueError("gains and losses must be non-negative")
    a = [gi + li for gi, li in zip(g, lo)]
    if any(ai <= 0 for ai in a):
        raise ValueError("Theorem 1 needs a_i = g_i + l_i > 0 for every i")
    mq = Fraction(float(m))
    if mq < 0:
        raise ValueError("m must be non-negative")
    order = sorted(range(n), key=lambda i: (-g[i], i))

    G = Fraction(0)
    H = Fraction(0)
    best_k, best_N, best_H = 0, None, None
    for k, i in enumerate(order, start=1):
        G += g[i] / a[i]
        H += 1 / a[i]
        N = (G - mq) / H
        if best_N is None or N > best_N:  # strict: keep the smallest maximiser
            best_k, best_N, best_H = k, N, H
    if G < mq:
        raise ValueError(f"Theorem 1 needs G_n >= m; here G_n = {float(G)!r} < m = {m!r}")

    p = np.zeros(n, dtype=np.float64)
    for i in order[:best_k]:
        p[i] = float(1 / (best_H * a[i]))
    return p, float(best_N), best_k


def naive_depround(q: ArrayLike, rng: np.random.Generator | int | None) -> NDArray[np.intp]:
    """DepRound (paper, Algorithm 2), literally: pair two fractional entries at a time.

    While two entries ``i < j`` (the two smallest such indices) are fractional, with
    ``alpha = min(1 - q_i, q_j)`` and ``beta = min(q_i, 1 - q_j)``: with probability
    ``beta / (alpha + beta)`` set ``(q_i + alpha, q_j - alpha)``, otherwise
    ``(q_i - beta, q_j + beta)``. Each step makes at least one of the two integral; that
    entry is set to exactly 0 or 1 so that round-off cannot leave a tiny remainder. If
    round-off leaves a single fractional entry, it is rounded to whatever makes the output
    size ``round(sum q)``. O(n^2) time.

    Parameters
    ----------
    q : array_like, shape (n,)
        Inclusion probabilities in ``[0, 1]`` whose sum is an integer up to round-off.
    rng : numpy.random.Generator or int or None
        Source of the uniforms (passed to :func:`numpy.random.default_rng`).

    Returns
    -------
    numpy.ndarray of intp
        The selected indices, sorted, exactly ``round(sum q)`` of them.

    Raises
    ------
    ValueError
        If ``q`` is not 1-D, has entries outside ``[0, 1]``, or a non-integral sum.
    """
    gen = np.random.default_rng(rng)
    qa = np.asarray(q, dtype=np.float64)
    if qa.ndim != 1:
        raise ValueError(f"q must be 1-D, got shape {qa.shape}")
    p = [float(v) for v in qa]
    tol = 1e-12
    if any(not (-tol <= v <= 1 + tol) for v in p):
        raise ValueError("q must lie in [0, 1]")
    total = math.fsum(p)
    target = round(total)
    if abs(total - target) > 1e-9 * max(1.0, len(p)):
        raise ValueError(f"sum(q) = {total!r} is not an integer")

    def snap(v: float) -> float:
        return 0.0 if v <= tol else 1.0 if v >= 1.0 - tol else v

    p = [snap(v) for v in p]
    while True:
        frac = [i for i, v in enumerate(p) if 0.0 < v < 1.0]
        if len(frac) < 2:
            break
        i, j = frac[0], frac[1]
        alpha = min(1.0 - p[i], p[j])
        beta = min(p[i], 1.0 - p[j])
        if gen.random() < beta / (alpha + beta):
            # (p_i + alpha, p_j - alpha): p_i reaches 1 or p_j reaches 0 (or both).
            if 1.0 - p[i] <= p[j]:
                p[i], p[j] = 1.0, p[j] - (1.0 - p[i])
            else:
                p[i], p[j] = p[i] + p[j], 0.0
        else:
            # (p_i - beta, p_j + beta): p_i reaches 0 or p_j reaches 1 (or both).
            if p[i] <= 1.0 - p[j]:
                p[i], p[j] = 0.0, p[j] + p[i]
            else:
                p[i], p[j] = p[i] - (1.0 - p[j]), 1.0
        p[i], p[j] = snap(p[i]), snap(p[j])

    chosen = [i for i, v in enumerate(p) if v == 1.0]
    leftover = [i for i, v in enumerate(p) if 0.0 < v < 1.0]
    if leftover and len(chosen) < target:  # round-off left one fractional entry
        chosen.append(leftover[0])
    if len(chosen) != target:
        raise AssertionError(f"DepRound produced {len(chosen)} items, expected {target}")
    return np.array(sorted(chosen), dtype=np.intp)


def mistake_vertices(n: int, m: float) -> Iterator[list[Fraction]]:
    """Yield every vertex of ``{u in [0,1]^n : sum u = m}`` (exact fractions).

    For integer ``m`` these are the 0/1 vectors with ``m`` ones; otherwise ``floor(m)``
    ones, one entry equal to ``m - floor(m)``, the rest zero.
    """
    mq = Fraction(float(m))
    k = math.floor(mq)
    f = mq - k
    for ones in itertools.combinations(range(n), k):
        if f == 0:
            u = [Fraction(0)] * n
            for i in ones:
                u[i] = Fraction(1)
            yield u
        else:
            for j in range(n):
                if j in ones:
                    continue
                u = [Fraction(0)] * n
                for i in ones:
                    u[i] = Fraction(1)
                u[j] = f
                yield u


def naive_value_bruteforce(q: ArrayLike, gains: ArrayLike, m: float, losses: ArrayLike) -> float:
    """The adversary's best payoff against ``q`` by enumerating its pure strategies.

    ``min_u sum_i q_i (g_i - u_i a_i)`` over the vertices of the mistake polytope
    (:func:`mistake_vertices`; for integer ``m``, all subsets of size ``m``), in exact
    arithmetic. A linear function over a polytope attains its minimum at a vertex, so this
    is the exact best-response value. Exponential: use for ``n <= 8``.
    """
    qq, g, lo = _fractions(q), _fractions(gains), _fractions(losses)
    n = len(g)
    if len(qq) != n or len(lo) != n:
        raise ValueError("q, gains and losses must have equal length")
    best = None
    for u in mistake_vertices(n, m):
        val = sum(qq[i] * (g[i] - u[i] * (g[i] + lo[i])) for i in range(n))
        if best is None or val < best:
            best = val
    assert best is not None
    return float(best)


def naive_game_bruteforce(gains: ArrayLike, m: float, b: int, losses: ArrayLike) -> float:
    """The batch game's value as a finite matrix game between polytope vertices.

    The payoff is bilinear in ``(q, u)`` and both strategy sets are polytopes, so the game
    equals the matrix game between their vertices: the sampler's are the 0/1 vectors with
    ``b`` ones, the adversary's those of :func:`mistake_vertices`. The matrix game is solved
    with the textbook LP ``max v  s.t.  M^T x >= v, x in simplex`` -- a formulation
    independent of the dualised one in ``rad.verify.lp``. Exponential: use for ``n <= 7``.
    """
    g = np.asarray(gains, dtype=np.float64)
    lo = np.asarray(losses, dtype=np.float64)
    n = g.shape[0]
    a = g + lo
    rows: Sequence[tuple[int, ...]] = list(itertools.combinations(range(n), b))
    cols = [np.array([float(x) for x in u]) for u in mistake_vertices(n, m)]
    M = np.array(
        [[math.fsum(g[i] - u[i] * a[i] for i in S) for u in cols] for S in rows],
        dtype=np.float64,
    ).reshape(len(rows), len(cols))
    r, c = M.shape
    # Solve on payoffs scaled to O(1): HiGHS's tolerances (1e-10) are absolute.
    scale = float(np.abs(M).max())
    scale = scale if scale > 0 else 1.0
    M = M / scale
    # Variables [x_1..x_r, v]; minimise -v s.t. v - (M^T x)_j <= 0, sum x = 1.
    cost = np.zeros(r + 1)
    cost[-1] = -1.0
    a_ub = np.hstack([-M.T, np.ones((c, 1))])
    a_eq = np.concatenate([np.ones(r), [0.0]])[None, :]
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(c),
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=[(0, None)] * r + [(None, None)],
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    if res.status != 0:
        raise RuntimeError(res.message)
    return -float(res.fun) * scale

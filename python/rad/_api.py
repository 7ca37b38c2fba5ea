"""The public entry points: :func:`select`, :func:`solve`, :func:`depround`."""

from __future__ import annotations

import math
import numbers

import numpy as np

from rad._backends import default_threads, get_backend
from rad._rng import key_from_rng
from rad._solution import Solution
from rad._solver import solve_game
from rad._validation import as_float_vector, check_budget, check_mistakes, check_values, check_w

__all__ = ["depround", "select", "solve"]

RNG = "int | np.random.Generator | np.random.SeedSequence | None"


#: Below this many points ``threads=None`` means one thread: a parallel region costs more
#: than it saves on small pools, and much more when another process holds a core.
PARALLEL_MIN_N = 1 << 22


def _threads(threads: int | None, n: int = PARALLEL_MIN_N) -> int:
    if threads is None:
        return default_threads() if n >= PARALLEL_MIN_N else 1
    if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    return int(threads)


def _method(method: str) -> str:
    if method not in ("auto", "sortfree", "sorted"):
        raise ValueError(f"method must be 'auto', 'sortfree' or 'sorted', got {method!r}")
    return method


def _prepare(gains, m, b, w, losses, backend, method="sorted"):
    """Validate everything before any kernel runs; return normalised inputs.

    On the sort-free path the gains' values are checked by the first kernel itself (the
    read-only histogram pass, which stops at a NaN, inf or negative value and raises the
    same error), saving a pass over the pool.
    """
    be = get_backend(backend)
    g = as_float_vector(gains, "gains")
    n = g.shape[0]
    if n == 0:
        raise ValueError("gains is empty: the pool must have at least one point")
    mf = check_mistakes(m, n)
    bi = check_budget(b, n)
    fused = method != "sorted" and 0 < bi < n and hasattr(be, "threshold_search")
    if not fused:
        check_values(g, "gains", be.first_invalid)
    if losses is not None:
        if w is not None:
            raise ValueError("give either w (RAD losses w * gains) or losses, not both")
        lo = as_float_vector(losses, "losses")
        if lo.shape != g.shape:
            raise ValueError(f"losses must have the same shape as gains: {lo.shape} != {g.shape}")
        check_values(lo, "losses", be.first_invalid)
        wf = float("nan")
    else:
        lo = None
        wf = 1.0 - mf / n if w is None else check_w(w)
    return be, g, mf, bi, wf, lo


def solve(
    gains: np.ndarray,
    m: float,
    b: int = 1,
    *,
    w: float | None = None,
    losses: np.ndarray | None = None,
    backend: str = "auto",
    threads: int | None = None,
    method: str = "auto",
) -> Solution:
    """The exact minimax inclusion probabilities for a batch of ``b`` (DESIGN §1).

    Parameters
    ----------
    gains : array_like, shape (n,)
        Informativeness per point, finite and >= 0 (RAD uses ``1 - margin``).
        float32/float64 contiguous input is used without a copy.
    m : float
        The teacher's mistakes in the pool, in ``[0, n]`` (see ``rad.estimate_m``).
    b : int, default 1
        The batch size, in ``[0, n]``. ``b = 1`` with ``sum g/a >= m`` is Theorem 1.
    w : float, optional
        RAD loss weight, losses ``w * gains``; default ``1 - m / n``.
    losses : array_like, shape (n,), optional
        General per-point losses instead of ``w * gains``.
    backend : {"auto", "cpp", "numba", "numpy"}
        Kernel implementation.
    threads : int, optional
        Threads for the compiled kernels. Default: ``RAD_NUM_THREADS`` or all cores for
        pools of ``2**22`` points or more, one thread below that.
    method : {"auto", "sortfree", "sorted"}
        How Theorem 1's support is found: a sort-free radix select over the float bits
        (a few streaming passes; ``auto`` uses it where the backend has it) or a full
        radix sort with prefix sums. Both give identical results.

    Returns
    -------
    Solution
        Value, ``k_star``, threshold and the compact parameters; call
        ``.probabilities()`` for the float64 vector.

    Warns
    -----
    NetHarmWarning
        When the value is negative (the teacher is expected to do net harm).
    """
    method = _method(method)
    be, g, mf, bi, wf, lo = _prepare(gains, m, b, w, losses, backend, method)
    return solve_game(g, lo, wf, mf, bi, be, _threads(threads, g.shape[0]), method)


def select(
    gains: np.ndarray,
    m: float,
    b: int,
    *,
    w: float | None = None,
    losses: np.ndarray | None = None,
    rng: int | np.random.Generator | np.random.SeedSequence | None = None,
    backend: str = "auto",
    threads: int | None = None,
    method: str = "auto",
) -> np.ndarray:
    """Choose exactly ``b`` points: DepRound of the optimal batch probabilities.

    Parameters are those of :func:`solve` (including ``method``), plus ``rng`` (int, ``Generator``,
    ``SeedSequence`` or None). The same seed gives the same indices on every backend and
    for any thread count.

    Returns
    -------
    numpy.ndarray
        Sorted ``int64`` array of ``b`` distinct indices into ``gains``.

    Examples
    --------
    >>> import numpy as np, rad
    >>> gains = np.random.default_rng(0).random(1000)
    >>> rad.select(gains, m=300, b=5, rng=1).shape
    (5,)
    """
    method = _method(method)
    be, g, mf, bi, wf, lo = _prepare(gains, m, b, w, losses, backend, method)
    nthreads = _threads(threads, g.shape[0])
    key = key_from_rng(rng)
    if bi == 0:
        return np.zeros(0, dtype=np.int64)
    sol = solve_game(g, lo, wf, mf, bi, be, nthreads, method)
    w_k = 0.0 if lo is not None else wf
    return be.depround_params(sol.gains, sol.losses, w_k, sol.params, bi, key, nthreads)


def depround(
    q: np.ndarray,
    *,
    rng: int | np.random.Generator | np.random.SeedSequence | None = None,
    backend: str = "auto",
    threads: int | None = None,
) -> np.ndarray:
    """Round probabilities with an integral sum to exactly that many distinct indices.

    The paper's Algorithm 2 (DepRound) with sequential pairing, O(n): each index is
    included with probability ``q_i`` and inclusions are negatively correlated.

    Parameters
    ----------
    q : array_like, shape (n,)
        Probabilities in ``[0, 1]`` whose sum is an integer (to ``1e-6`` relative).
    rng, backend, threads
        As in :func:`select`.

    Returns
    -------
    numpy.ndarray
        Sorted ``int64`` array of ``round(sum(q))`` distinct indices.
    """
    be = get_backend(backend)
    qa = as_float_vector(q, "q")
    check_values(qa, "q", be.first_invalid)
    over = np.flatnonzero(qa > 1.0)
    if over.shape[0]:
        i = int(over[0])
        raise ValueError(f"q must be <= 1; q[{i}] = {qa[i].item()!r}")
    total = math.fsum(qa.tolist()) if qa.shape[0] <= 1 << 20 else float(np.sum(qa, dtype=np.float64))
    b = round(total)
    if abs(total - b) > 1e-6 * max(1.0, total):
        raise ValueError(f"sum(q) must be an integer (the sample size); got {total!r}")
    nthreads = _threads(threads, qa.shape[0])
    key = key_from_rng(rng)
    if b == 0:
        return np.zeros(0, dtype=np.int64)
    return be.depround_q(np.asarray(qa, dtype=np.float64), b, key, nthreads)

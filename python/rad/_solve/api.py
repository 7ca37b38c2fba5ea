"""The public entry points: :func:`select`, :func:`solve`, :func:`depround`."""

from __future__ import annotations

import math
import warnings

import numpy as np

from rad._backends import get_backend
from rad._backends.rng import RNG, key_from_rng
from rad._backends.threads import resolve_threads
from rad._solve.batch import ValueOverflowWarning, solve_game
from rad._solve.device import select_device, solve_device
from rad._solve.game import resolve_game
from rad._solve.solution import Solution
from rad._solve.validation import as_float_vector, check_values, integral_sum_tolerance

__all__ = ["depround", "select", "solve"]


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
    """The exact minimax inclusion probabilities for a batch of ``b`` (``docs/design.md`` §1).

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
    backend : {"auto", "cpp", "numba", "numpy", "cuda"}
        Kernel implementation. ``"auto"`` picks ``"cuda"`` for CUDA device arrays (then the
        returned :class:`Solution` keeps no arrays: ``.probabilities()`` is unavailable).
    threads : int, optional
        Threads for the kernels; results do not depend on it. Default:
        ``RAD_NUM_THREADS`` when set, else all cores for pools of ``2**22`` points or
        more and one thread below. Clamped to the cores and to one per started block of 65,536
        points.
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
    ValueOverflowWarning
        When the value overflows float64 (gains near the float64 maximum): it is returned
        as ``inf``; the probabilities are exact.
    DeviceFallbackWarning
        With device arrays, when the game is solved on the host after one copy (caps that
        bind, near ties, ``b == n``, values near the float64 maximum).
    """
    game = resolve_game(gains, m, b, w=w, losses=losses, backend=backend, threads=threads, method=method)
    if game.backend.name == "cuda":  # device arrays (rad._solve.device): no arrays kept in the Solution
        return solve_device(game)[0]
    return solve_game(game)


def select(
    gains: np.ndarray,
    m: float,
    b: int,
    *,
    w: float | None = None,
    losses: np.ndarray | None = None,
    rng: RNG = None,
    backend: str = "auto",
    threads: int | None = None,
    method: str = "auto",
    as_numpy: bool = False,
) -> np.ndarray:
    """Choose exactly ``b`` points: DepRound of the optimal batch probabilities.

    Parameters are those of :func:`solve` (including ``method``), plus ``rng`` (int, ``Generator``,
    ``SeedSequence`` or None). The same seed gives the same indices on every backend and
    for any thread count.

    ``gains`` (and ``losses``) may be CUDA device arrays (CuPy, PyTorch, JAX, numba): they
    are used in place by the ``cuda`` backend (``backend="auto"`` picks it) and the indices
    come back as the same kind of device array, or as NumPy with ``as_numpy=True``.

    Returns
    -------
    numpy.ndarray
        Sorted ``int64`` array of ``b`` distinct indices into ``gains`` (a device array
        for device input unless ``as_numpy``).

    Warns
    -----
    NetHarmWarning, DeviceFallbackWarning
        As in :func:`solve` (an overflowing value is not returned here, so no
        ``ValueOverflowWarning``).

    Examples
    --------
    >>> import numpy as np, rad
    >>> gains = np.random.default_rng(0).random(1000)
    >>> rad.select(gains, m=300, b=5, rng=1).shape
    (5,)
    """
    game = resolve_game(gains, m, b, w=w, losses=losses, backend=backend, threads=threads, method=method)
    key = key_from_rng(rng)
    if game.backend.name == "cuda":
        return select_device(game, key, as_numpy=as_numpy, template=gains)  # type: ignore[no-any-return]
    if game.b == 0:
        return np.zeros(0, dtype=np.int64)
    with warnings.catch_warnings():  # the value is not returned here: its overflow is moot
        warnings.simplefilter("ignore", ValueOverflowWarning)
        sol = solve_game(game)
    # sol.gains/losses are the game's arrays, or their power-of-two rescaled copies.
    assert sol.gains is not None  # solve_game always keeps them
    return game.backend.depround_sketched(
        sol.gains, sol.losses, game.kernel_w, sol.params, game.b, key, sol.round_sketch, game.threads
    )


def depround(
    q: np.ndarray,
    *,
    rng: RNG = None,
    backend: str = "auto",
    threads: int | None = None,
) -> np.ndarray:
    """Round probabilities with an integral sum to exactly that many distinct indices.

    The paper's Algorithm 2 (DepRound) with sequential pairing, O(n): each index is
    included with probability ``q_i`` and inclusions are negatively correlated.

    Parameters
    ----------
    q : array_like, shape (n,)
        Probabilities in ``[0, 1]`` whose sum is an integer, to within
        ``min(1e-9 * sum, 1e-6)`` (float32 ``q``: ``2^-24 * sum``, its own precision).
    rng, backend, threads
        As in :func:`select`. ``q`` is a host array on every backend (``"cuda"`` copies it
        to the GPU and the indices back).

    Returns
    -------
    numpy.ndarray
        Sorted ``int64`` array of ``round(sum(q))`` distinct indices.
    """
    kernels = get_backend(backend)
    qa = as_float_vector(q, "q")
    nthreads = resolve_threads(threads, qa.shape[0])
    check_values(qa, "q", lambda x: kernels.first_invalid(x, nthreads))
    over = np.flatnonzero(qa > 1.0)
    if over.shape[0]:
        i = int(over[0])
        raise ValueError(f"q must be <= 1; q[{i}] = {qa[i].item()!r}")
    total = _accurate_sum(qa)
    b = round(total)
    if abs(total - b) > integral_sum_tolerance(total, qa.dtype):  # ten float32 0.1s: 1 + 1.5e-8
        raise ValueError(
            f"sum(q) must be an integer (the sample size) to within min(1e-9 * sum, 1e-6) "
            f"(2^-24 * sum for float32 q); got {total!r}, {abs(total - b):.3g} from {b}"
        )
    key = key_from_rng(rng)
    if b == 0:
        return np.zeros(0, dtype=np.int64)
    idx = kernels.depround_q(np.ascontiguousarray(qa, dtype=np.float64), b, key, nthreads)
    return idx if isinstance(idx, np.ndarray) else idx.copy_to_host()  # (the cuda backend's device array)


def _accurate_sum(q: np.ndarray) -> float:
    """``sum(q)``, accurate enough for the integer-sum check.

    :func:`math.fsum` (correctly rounded) up to 2**20 entries, NumPy's pairwise sum beyond
    (error ~ log2(n) ulps of the sum, far inside the check's bound).
    """
    if q.shape[0] <= 1 << 20:
        return math.fsum(q.tolist())
    return float(np.sum(q, dtype=np.float64))

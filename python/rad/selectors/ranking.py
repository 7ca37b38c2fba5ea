"""The ``b`` best points by a score, with ties at the boundary broken at random.

A sort-based choice would favour low indices among tied scores; these helpers take
everything strictly better than the ``b``-th score and draw the rest uniformly from the
tie, in O(n).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["best_candidates", "smallest"]


def smallest(scores: np.ndarray, b: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Indices of the ``b`` smallest scores, ties at the boundary broken at random.

    O(n): one introselect and two comparison passes. ``+inf`` marks excluded points
    (never chosen while ``b`` does not exceed the finite entries).

    Parameters
    ----------
    scores : numpy.ndarray, shape (n,)
        Floating-point scores.
    b : int
        How many to take, ``1 <= b``.
    rng : numpy.random.Generator
        Draws the tied points.

    Returns
    -------
    numpy.ndarray
        ``int64`` indices, those strictly below the ``b``-th score first (ascending
        index), then the drawn tied ones.
    """
    n = scores.shape[0]
    if b >= n:
        return np.arange(n, dtype=np.int64)
    kth = np.partition(scores, b - 1)[b - 1]
    below = np.flatnonzero(scores < kth)
    tied = np.flatnonzero(scores == kth)
    need = b - below.size
    if need < tied.size:
        tied = rng.choice(tied, size=need, replace=False)
    return np.concatenate([below, tied]).astype(np.int64, copy=False)


def best_candidates(
    scores: np.ndarray,
    b: int,
    rng: np.random.Generator,
    excluded: NDArray[np.int64],
    *,
    largest: bool,
) -> NDArray[np.int64]:
    """The ``b`` smallest (or largest) scores among the non-excluded points.

    Parameters
    ----------
    scores : numpy.ndarray, shape (n,)
        Per-point scores (not modified).
    b : int
        How many to take, ``1 <= b <= n - len(excluded)``.
    rng : numpy.random.Generator
        Breaks ties at the boundary.
    excluded : numpy.ndarray
        Indices never taken.
    largest : bool
        Take the largest scores instead of the smallest.

    Returns
    -------
    numpy.ndarray
        ``int64`` indices (any order).
    """
    work = np.negative(scores) if largest else np.array(scores, copy=True)
    if work.dtype.kind != "f":
        work = work.astype(np.float64)
    work[excluded] = np.inf
    return smallest(work, b, rng)

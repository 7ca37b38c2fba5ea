"""The pool in chunks: streamed views of ``g``, ``l``, ``a`` and ``q``, their sums, a thread map.

Every pass of the certificate (``docs/certificate.md``) reads the pool chunk by chunk, so
memory stays bounded by the chunk size and a read-only memory map of 1e9 points can be
certified. A *chunk function* ``f(lo, hi)`` returns one quantity on ``[lo, hi)``; the
passes combine per-chunk results with :func:`math.fsum` (exact summation of the partial
sums) and run on :func:`parallel_map`'s threads (NumPy's ufuncs release the GIL).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from rad._backends.contract import Kernels
from rad._backends.params import Params

__all__ = ["CHUNK", "ChunkFn", "ChunkedPool", "chunk_sum", "parallel_fold", "parallel_map", "q_from_array"]

#: Points per chunk of the streaming passes (about 16 MB per float64 temporary).
CHUNK = 1 << 21

#: A chunk function: one float64 quantity on the points ``[lo, hi)``.
ChunkFn = Callable[[int, int], np.ndarray]

_T = TypeVar("_T")
_A = TypeVar("_A")


class ChunkedPool:
    """Chunked, float64 views of a game's ``g``, ``l``, ``a`` and of probabilities ``q``.

    Parameters
    ----------
    gains : numpy.ndarray
        The gains, float32 or float64 (a memory map is read in place, chunk by chunk).
    losses : numpy.ndarray or None
        General losses, or None for the RAD losses ``w * gains``.
    w : float
        The kernels' loss weight (0 with general losses; ``rad._solve.game.Game.kernel_w``).
    backend : Kernels
        The kernels whose ``materialize`` produces the solver's probabilities.
    threads : int
        Workers for the chunked passes.
    chunk : int
        Points per chunk.

    Attributes
    ----------
    n : int
        The pool size.
    ranges : list of (int, int)
        The chunks ``[lo, hi)``, in order.
    """

    def __init__(
        self,
        gains: np.ndarray,
        losses: np.ndarray | None,
        w: float,
        backend: Kernels,
        threads: int,
        chunk: int,
    ) -> None:
        self.gains = gains
        self.losses = losses
        self.w = w
        self.backend = backend
        self.threads = threads
        n = gains.shape[0]
        self.n = n
        self.ranges = [(lo, min(lo + chunk, n)) for lo in range(0, n, chunk)]

    def gla(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(g, l, a)`` on ``[lo, hi)`` as float64, ``a = g + l``."""
        g = np.asarray(self.gains[lo:hi], dtype=np.float64)
        # Same expressions as the kernels: l = w g for RAD losses, a = g + l.
        l = np.asarray(self.losses[lo:hi], dtype=np.float64) if self.losses is not None else self.w * g
        return g, l, g + l

    def q_from_params(self, params: Params) -> ChunkFn:
        """The solver's probabilities, produced chunk by chunk by the backend's kernels."""

        def q(lo: int, hi: int) -> np.ndarray:
            lchunk = None if self.losses is None else self.losses[lo:hi]
            # One kernel thread per chunk: the chunks themselves run on ``threads`` workers.
            out = self.backend.materialize(self.gains[lo:hi], lchunk, self.w, params, 1)
            return np.asarray(out, dtype=np.float64)

        return q


def q_from_array(q: np.ndarray) -> ChunkFn:
    """Probabilities given as an array, read chunk by chunk as float64."""
    return lambda lo, hi: np.asarray(q[lo:hi], dtype=np.float64)


def chunk_sum(x: np.ndarray) -> float:
    """The sum of one chunk: exact (:func:`math.fsum`) up to 4096 values, else pairwise."""
    return math.fsum(x.tolist()) if x.shape[0] <= 4096 else float(np.sum(x))


def parallel_map(fn: Callable[[int, int], _T], ranges: list[tuple[int, int]], workers: int) -> list[_T]:
    """``[fn(lo, hi) for lo, hi in ranges]``, on ``workers`` threads when there are several chunks.

    NumPy's ufuncs release the GIL. At most ``workers`` chunks are in flight.
    """
    if workers <= 1 or len(ranges) <= 1:
        return [fn(lo, hi) for lo, hi in ranges]
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(lambda r: fn(*r), ranges))


def parallel_fold(
    fn: Callable[[int, int], _T], ranges: list[tuple[int, int]], workers: int, fold: Callable[[_A | None, _T], _A]
) -> _A | None:
    """Fold ``fn``'s chunk results in chunk order, holding at most ``workers`` of them.

    ``fold(acc, part)`` gets ``acc = None`` for the first chunk. The order of the folds is
    the order of ``ranges`` whatever the thread count, so sums come out bit-identical; the
    memory is bounded by ``workers`` chunk results (a per-chunk histogram is 0.5 MiB, so
    keeping every chunk's, as a plain map would, costs gigabytes for small chunks).
    """
    acc: _A | None = None
    if workers <= 1 or len(ranges) <= 1:
        for lo, hi in ranges:
            acc = fold(acc, fn(lo, hi))
        return acc
    with ThreadPoolExecutor(max_workers=workers) as ex:
        for start in range(0, len(ranges), workers):
            for part in ex.map(lambda r: fn(*r), ranges[start : start + workers]):
                acc = fold(acc, part)
    return acc

"""Greedy k-center (the core-set selector) and its covering radius, without n x n.

k-center keeps one distance per point and works with matrix-vector products; distances
to many existing centers are computed in blocks of ``block_rows x 1024``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad.selectors.base import Explained, Strategy, register
from rad.selectors.pool import (
    PoolState,
    RNGLike,
    as_generator,
    as_index_set,
    as_real_matrix,
    check_finite_rows,
    check_int,
)

__all__ = ["DEFAULT_BLOCK_ROWS", "Coreset", "covering_radius", "k_center_greedy"]

DEFAULT_BLOCK_ROWS = 4096  # rows of one distance block
_BLOCK_CENTERS = 1024  # centers of one distance block: 32 MiB in float64 (and its bound, as much)


#: Rows of the strided sample whose median is the distances' origin.
_ORIGIN_ROWS = 4096


#: A distance within this factor of the expansion's rounding bound is recomputed from the
#: coordinates' differences (float64): elsewhere the expansion is within 2**-10, relative.
_RECOMPUTE = 2.0**10
_EPS64 = float(np.finfo(np.float64).eps)


class _ShiftedDistances:
    """Squared Euclidean distances by ``|x~|^2 - 2 x~.c~ + |c~|^2``, without n x n.

    Coordinates are shifted by a point ``x0`` inside the bulk of the data (``x~ = x -
    x0``) so that the expansion does not cancel catastrophically when the data sit far
    from the origin; ``|x~|^2`` is accumulated exactly in float64 block by block, and the
    products run as BLAS matrix-vector / matrix-matrix products in the embeddings' dtype.
    ``x0`` is the coordinate-wise median of a strided sample of at most :data:`_ORIGIN_ROWS`
    rows: the products' rounding grows with ``|x~|`` of the centers, and the first row as
    ``x0`` (an outlier, say) made it as large as that row's distance to the rest (float32
    k-center then did worse than random).

    One origin cannot serve every cluster: between points of a cluster far from ``x0``
    the expansion still cancels (float32, a cluster at 1e4: greedy picks at 0.37-0.86 of
    the farthest distance). So every distance within :data:`_RECOMPUTE` times the
    expansion's rounding bound (``2 d eps |x| |c~|`` for the product in the data's dtype,
    plus the float64 terms') is recomputed from the differences of the coordinates, in
    float64: the distances between near points, which the expansion cannot resolve.
    """

    def __init__(self, x: np.ndarray, block_rows: int) -> None:
        self.x = x
        self.block_rows = block_rows
        step = max(1, -(-x.shape[0] // _ORIGIN_ROWS))
        self.origin = np.median(np.asarray(x[::step], dtype=np.float64), axis=0)
        n = x.shape[0]
        self.sq_norms = np.empty(n, dtype=np.float64)
        norms = np.empty(n, dtype=np.float64)  # |x| (unshifted: the products' operand)
        for start in range(0, n, block_rows):
            raw = np.asarray(x[start : start + block_rows], dtype=np.float64)
            part = raw - self.origin
            np.einsum("ij,ij->i", part, part, out=self.sq_norms[start : start + block_rows])
            norms[start : start + block_rows] = np.sqrt(np.einsum("ij,ij->i", raw, raw))
        eps = float(np.finfo(x.dtype).eps) if x.dtype.kind == "f" else _EPS64
        product_error = 2.0 * x.shape[1] * eps  # of x . c~ in the dtype, per |x| |c~|
        # the per-row parts of _recompute_limit's bound, times _RECOMPUTE
        self._row_norm_term = (_RECOMPUTE * 2.0 * product_error) * norms
        self._row_sq_term = (_RECOMPUTE * 8 * _EPS64) * self.sq_norms
        self._near_buf = np.empty((n, 1), dtype=np.float64)

    def centers(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Shifted centers in the data dtype, their products with the origin, ``|c~|^2``."""
        shifted = (np.asarray(self.x[idx], dtype=np.float64) - self.origin).astype(self.x.dtype)
        return shifted, shifted.astype(np.float64) @ self.origin, self.sq_norms[idx]

    def _recompute_limit(self, rows: slice, c_norm: np.ndarray, c_terms: np.ndarray,
                         out: np.ndarray | None = None) -> np.ndarray:
        """:data:`_RECOMPUTE` times the expansion's error bound, ``rows`` x centers.

        ``c_norm`` are the shifted centers' norms and ``c_terms`` their ``|c~|^2 + 2
        |x0 . c~|``: the bound is ``2 d eps |x| |c~|`` (the product in the data's dtype)
        plus ``8 eps64`` of the float64 terms.
        """
        limit: np.ndarray = np.multiply.outer(self._row_norm_term[rows], c_norm, out=out)
        limit += self._row_sq_term[rows, None]
        limit += (_RECOMPUTE * 8 * _EPS64) * c_terms
        return limit

    def _exact(self, rows: np.ndarray, centers: np.ndarray) -> np.ndarray:
        """``|x_r - x_c|^2`` for the pairs ``(rows[k], centers[k])``, from the differences, in float64."""
        out = np.empty(rows.shape[0])
        for first in range(0, rows.shape[0], self.block_rows):
            sl = slice(first, first + self.block_rows)
            diff = np.asarray(self.x[rows[sl]], dtype=np.float64) - np.asarray(self.x[centers[sl]], dtype=np.float64)
            np.einsum("ij,ij->i", diff, diff, out=out[sl])
        return out

    def to_one(self, j: int, dot: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Squared distances of every point to point ``j`` (two length-n buffers)."""
        center, center_dot_origin, center_sq = self.centers(np.array([j]))
        np.matmul(self.x, center[0], out=dot)
        np.multiply(dot, -2.0, out=out)
        out += self.sq_norms
        out += center_sq[0] + 2.0 * center_dot_origin[0]
        c_norm = np.linalg.norm(center.astype(np.float64), axis=1)
        limit = self._recompute_limit(slice(None), c_norm, center_sq + 2.0 * np.abs(center_dot_origin),
                                      out=self._near_buf)
        near = np.flatnonzero(out <= limit[:, 0])
        if near.size:
            out[near] = self._exact(near, np.full(near.size, j))
        return out

    def min_to_many(self, idx: np.ndarray) -> NDArray[np.float64]:
        """Squared distance of every point to its nearest point of ``idx`` (blocked)."""
        n = self.x.shape[0]
        best = np.full(n, np.inf)
        if idx.size == 0:
            return best
        for first in range(0, idx.size, _BLOCK_CENTERS):
            block = idx[first : first + _BLOCK_CENTERS]
            centers, centers_dot_origin, centers_sq = self.centers(block)
            offset = centers_sq + 2.0 * centers_dot_origin
            c_norm = np.linalg.norm(centers.astype(np.float64), axis=1)
            c_terms = centers_sq + 2.0 * np.abs(centers_dot_origin)
            for start in range(0, n, self.block_rows):
                stop = min(start + self.block_rows, n)
                sq_dist = (self.x[start:stop] @ centers.T).astype(np.float64)
                sq_dist *= -2.0
                sq_dist += offset
                sq_dist += self.sq_norms[start:stop, None]
                r, c = np.nonzero(sq_dist <= self._recompute_limit(slice(start, stop), c_norm, c_terms))
                if r.size:
                    sq_dist[r, c] = self._exact(start + r, block[c])
                np.minimum(best[start:stop], sq_dist.min(axis=1), out=best[start:stop])
        np.maximum(best, 0.0, out=best)
        return best


def k_center_greedy(
    embeddings: ArrayLike,
    b: int,
    *,
    centers: ArrayLike | None = None,
    candidates: ArrayLike | None = None,
    rng: RNGLike = None,
    block_rows: int = DEFAULT_BLOCK_ROWS,
) -> NDArray[np.int64]:
    """Greedy k-center (Gonzalez; Sener & Savarese's core-set): ``b`` new centers.

    Starting from ``centers`` (the labeled points; a uniformly random first point when
    there are none), repeatedly adds the point farthest from its nearest center. The
    covering radius is at most twice the optimum for ``b`` extra centers.

    Parameters
    ----------
    embeddings : array_like, shape (n, d)
        Points (float32/float64 are used without a copy; other dtypes are converted).
    b : int
        Number of centers to add, ``0 <= b <=`` the number of selectable points.
    centers : array_like, optional
        Indices (or boolean mask) of existing centers; never selected.
    candidates : array_like, optional
        Indices (or boolean mask) of the points that may become centers; default all.
        Distances are still measured for every point.
    rng : int, Generator, SeedSequence or None
        Only used to pick the first center when ``centers`` is empty.
    block_rows : int, default 4096
        Rows per distance block when measuring distances to many existing centers.

    Returns
    -------
    numpy.ndarray
        ``int64`` indices of the new centers **in the order they were chosen**.

    Notes
    -----
    Time ``O(n d (L + b))`` for ``L`` existing centers; memory ``O(n)`` (one float64
    distance per point, two norms per point and three length-``n`` buffers) plus
    ``O(L d)`` for the centers and one ``block_rows x 1024`` block with its bound. Each
    step is one matrix-vector product over the embeddings. Distances are expanded around
    a data point (shifted coordinates); with float32 embeddings the products are float32,
    and a distance the expansion's rounding could dominate (between near points, say of a
    cluster far from the rest) is recomputed from the coordinates' differences in float64;
    the others are within ``2**-10`` (relative), so near-ties may be broken differently
    from an exact computation. Ties are broken towards the lowest index.
    """
    return _k_center(embeddings, b, centers, candidates, rng, block_rows, explain=False)[0]


def _k_center(
    embeddings: ArrayLike,
    b: int,
    centers: ArrayLike | None,
    candidates: ArrayLike | None,
    rng: RNGLike,
    block_rows: int,
    *,
    explain: bool,
) -> tuple[NDArray[np.int64], NDArray[np.float64] | None, NDArray[np.float64] | None]:
    """:func:`k_center_greedy`, with what ``explain`` asks for.

    With ``explain``, also the squared distance of each pick to its nearest center when
    picked, and every point's squared distance to ``centers`` (``-inf`` where not
    selectable).
    """
    x = as_real_matrix(embeddings, "embeddings")
    n = x.shape[0]
    block_rows = check_int(block_rows, "block_rows", 1)
    start_centers = (
        np.zeros(0, dtype=np.int64) if centers is None else as_index_set(centers, n, "centers")
    )
    unselectable: NDArray[np.int64] | None = None
    if candidates is not None:
        allowed = np.zeros(n, dtype=bool)
        allowed[as_index_set(candidates, n, "candidates")] = True
        allowed[start_centers] = False
        selectable = np.flatnonzero(allowed)
        unselectable = np.flatnonzero(~allowed)
        b = check_int(b, "b", 0, selectable.size)
    else:
        b = check_int(b, "b", 0, n - start_centers.size)
    gen = as_generator(rng)
    picks = np.empty(b, dtype=np.int64)
    pick_sq = np.empty(b, dtype=np.float64) if explain else None
    if b == 0:
        return picks, pick_sq, None
    distances = _ShiftedDistances(x, block_rows)
    if not np.isfinite(distances.sq_norms).all():  # NaN/inf rows (or overflowing norms)
        check_finite_rows(x, "embeddings")
        raise ValueError("embeddings are too large: squared distances overflow float64")
    min_sq_dist = distances.min_to_many(start_centers)
    min_sq_dist[start_centers] = -np.inf
    if unselectable is not None:
        min_sq_dist[unselectable] = -np.inf
    initial_sq = min_sq_dist.copy() if explain else None
    dot = np.empty(n, dtype=x.dtype)
    to_new = np.empty(n, dtype=np.float64)
    for t in range(b):
        if t == 0 and start_centers.size == 0:
            j = int(gen.integers(n)) if unselectable is None else int(
                selectable[gen.integers(selectable.size)]
            )
        else:
            j = int(np.argmax(min_sq_dist))
        picks[t] = j
        if pick_sq is not None:
            pick_sq[t] = min_sq_dist[j]
        min_sq_dist[j] = -np.inf
        if t + 1 < b:
            np.minimum(min_sq_dist, distances.to_one(j, dot, to_new), out=min_sq_dist)
    return picks, pick_sq, initial_sq


def covering_radius(
    embeddings: ArrayLike, centers: ArrayLike, *, block_rows: int = DEFAULT_BLOCK_ROWS
) -> float:
    """``max_i min_c ||x_i - x_c||``: the k-center objective of the centers ``centers``.

    Blocked (no ``n x n`` matrix): ``O(n d |centers|)`` time, ``O(n)`` memory.

    Parameters
    ----------
    embeddings : array_like, shape (n, d)
    centers : array_like
        Indices (or boolean mask) of the centers.
    block_rows : int, default 4096
        Rows per distance block.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``centers`` is empty or out of range.
    """
    x = as_real_matrix(embeddings, "embeddings")
    idx = as_index_set(centers, x.shape[0], "centers")
    if idx.size == 0:
        raise ValueError("covering_radius needs at least one center")
    best = _ShiftedDistances(x, check_int(block_rows, "block_rows", 1)).min_to_many(idx)
    best[idx] = 0.0
    return float(np.sqrt(best.max()))


@register("coreset", "k_center")
@dataclass(frozen=True)
class Coreset(Strategy):
    """Core-set selection by greedy k-center on embeddings (Sener & Savarese, 2018).

    Needs ``embeddings``. Labeled points are the initial centers (so the batch covers
    what is not yet covered); without them the first center is random (``rng``). With
    ``pool.candidates``, only candidates are picked (all points are still covered).
    With ``return_scores=True`` the order is the greedy pick order and each score is the
    pick's distance to its nearest center when picked (``inf`` for a random first one).
    Cost: ``O(n d (L + b))`` time, ``O(n)`` extra memory; see :func:`k_center_greedy`.

    Parameters
    ----------
    block_rows : int, default 4096
        Rows per distance block.
    """

    name: ClassVar[str] = "coreset"
    block_rows: int = DEFAULT_BLOCK_ROWS

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> NDArray[np.int64]:
        return self._greedy(pool, b, rng, explain=False)[0]

    def _explain(self, pool: PoolState, b: int, rng: np.random.Generator) -> Explained:
        """Pick order; each pick's distance to its nearest center when it was picked."""
        picks, pick_sq, initial_sq = self._greedy(pool, b, rng, explain=True)
        assert pick_sq is not None and initial_sq is not None
        utilities = np.sqrt(np.maximum(initial_sq, 0.0))
        utilities[pool.excluded] = np.nan
        return Explained(order=picks, scores=np.sqrt(pick_sq), utilities=utilities)

    def _utilities(self, pool: PoolState) -> NDArray[np.float64]:
        """Distance to the nearest labeled point (``inf`` when nothing is labeled)."""
        x = as_real_matrix(pool.require("embeddings", "Coreset"), "embeddings")
        distances = _ShiftedDistances(x, check_int(self.block_rows, "block_rows", 1))
        return np.sqrt(distances.min_to_many(pool.labeled_indices))

    def _greedy(
        self, pool: PoolState, b: int, rng: np.random.Generator, *, explain: bool
    ) -> tuple[NDArray[np.int64], NDArray[np.float64] | None, NDArray[np.float64] | None]:
        embeddings = pool.require("embeddings", "Coreset")
        if pool.candidates is None:  # labeled points are both the centers and excluded
            return _k_center(embeddings, b, pool.excluded, None, rng, self.block_rows,
                             explain=explain)
        return _k_center(embeddings, b, pool.labeled_indices, pool.selectable_indices(),
                         rng, self.block_rows, explain=explain)

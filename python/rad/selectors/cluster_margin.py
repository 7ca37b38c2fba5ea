"""Bucketed hierarchical clustering (:func:`hac_clusters`) and Cluster-Margin.

HAC runs on buckets of at most ``bucket_size`` points, so memory stays
``O(bucket_size**2)`` whatever the pool size (the RAD paper's ImageNet approximation).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad.selectors.base import Explained, Strategy, register
from rad.selectors.pool import (
    PoolState,
    RNGLike,
    as_generator,
    as_real_matrix,
    check_finite_rows,
    check_int,
)
from rad.selectors.ranking import best_candidates

__all__ = ["LINKAGES", "ClusterMargin", "hac_clusters"]

#: Linkage methods accepted by :func:`hac_clusters` (those of scipy's ``linkage``).
LINKAGES: tuple[str, ...] = (
    "average", "single", "complete", "weighted", "centroid", "median", "ward"
)
_BUCKETINGS = ("rptree", "random")
_PROJECTION_ROWS = 65536  # rows per matrix-vector product when projecting a subset

Bucketing = Literal["rptree", "random"]


def _project(x: np.ndarray, idx: np.ndarray, direction: np.ndarray) -> NDArray[np.float64]:
    """``x[idx] @ direction`` in blocks of rows (no copy of all of ``x[idx]``)."""
    out = np.empty(idx.size, dtype=np.float64)
    for start in range(0, idx.size, _PROJECTION_ROWS):
        rows = idx[start : start + _PROJECTION_ROWS]
        out[start : start + rows.size] = x[rows] @ direction
    return out


def _buckets(
    x: np.ndarray, bucket_size: int, bucketing: str, rng: np.random.Generator
) -> list[np.ndarray]:
    """Partition ``range(n)`` into buckets of at most ``bucket_size`` points.

    ``"rptree"``: split recursively at the median of a random projection (a random
    projection tree), so near neighbours tend to share a bucket; ``O(n d log(n/B))``.
    ``"random"``: a random partition into equal buckets (the paper's ImageNet
    approximation); ``O(n)``.
    """
    n = x.shape[0]
    if n <= bucket_size:
        return [np.arange(n, dtype=np.int64)]
    if bucketing == "random":
        return np.array_split(rng.permutation(n), math.ceil(n / bucket_size))
    out: list[np.ndarray] = []
    stack = [np.arange(n, dtype=np.int64)]
    while stack:
        idx = stack.pop()
        if idx.size <= bucket_size:
            out.append(idx)
            continue
        direction = rng.standard_normal(size=(x.shape[1],)).astype(x.dtype)
        projection = _project(x, idx, direction)
        half = idx.size // 2
        order = np.argpartition(projection, half)
        stack.append(idx[order[half:]])
        stack.append(idx[order[:half]])
    return out


def _apportion(total: int, sizes: Sequence[int]) -> list[int]:
    """Split ``total`` clusters over buckets in proportion to size (largest remainder).

    Each bucket gets at least 1 and at most its size.
    """
    sizes_arr = np.asarray(sizes, dtype=np.float64)
    share = total * sizes_arr / sizes_arr.sum()
    base = np.floor(share).astype(np.int64)
    rest = total - int(base.sum())
    if rest > 0:
        base[np.argsort(-(share - base), kind="stable")[:rest]] += 1
    counts: list[int] = np.clip(base, 1, np.asarray(sizes, dtype=np.int64)).tolist()
    return counts


def _check_linkage_options(method: str, bucketing: str) -> None:
    if method not in LINKAGES:
        raise ValueError(f"unknown linkage method {method!r}; expected one of {LINKAGES}")
    if bucketing not in _BUCKETINGS:
        raise ValueError(f"bucketing must be 'rptree' or 'random', got {bucketing!r}")


def hac_clusters(
    embeddings: ArrayLike,
    *,
    n_clusters: int | None = None,
    distance_threshold: float | None = None,
    method: str = "average",
    bucket_size: int = 4096,
    bucketing: Bucketing = "rptree",
    rng: RNGLike = None,
) -> NDArray[np.int64]:
    """Hierarchical agglomerative clustering, bucketed so memory stays bounded.

    With ``n <= bucket_size`` this is exact HAC (:func:`scipy.cluster.hierarchy.linkage`
    on Euclidean distances, cut by :func:`~scipy.cluster.hierarchy.fcluster`). Larger
    inputs are first partitioned into buckets of at most ``bucket_size`` points and
    clustered bucket by bucket -- the approximation the RAD paper used for Cluster-Margin
    on ImageNet (buckets of 10,000, 500 clusters each); clusters never span buckets.

    Parameters
    ----------
    embeddings : array_like, shape (n, d)
    n_clusters : int, optional
        Total number of clusters, shared among buckets in proportion to their size (each
        bucket gets at least one, so the total is at least the number of buckets; a cut
        can give fewer when merge heights tie). Default ``ceil(n / 20)`` (the paper's
        10,000 -> 500 ratio) unless ``distance_threshold`` is given.
    distance_threshold : float, optional
        Cut every dendrogram at this linkage distance instead (Citovsky et al.'s
        ``epsilon``).
    method : {"average", "single", "complete", "weighted", "centroid", "median", "ward"}
        Linkage; Cluster-Margin uses ``"average"``.
    bucket_size : int, default 4096
        Largest bucket; memory is ``O(bucket_size**2)`` (about 130 MiB at 4096).
    bucketing : {"rptree", "random"}
        How to form buckets (see below).
    rng : int, Generator, SeedSequence or None
        Randomness of the bucketing.

    Returns
    -------
    numpy.ndarray
        ``int64`` labels in ``[0, C)`` for ``C`` clusters.

    Notes
    -----
    ``"rptree"`` splits recursively at the median of random projections, so nearby
    points tend to share a bucket (``O(n d log(n/B))``); ``"random"`` is a random
    partition. Clustering costs ``O(n B d)`` for the distances and ``O(n B)`` for
    scipy's ``O(B^2)`` linkage per bucket, i.e. linear in ``n`` for fixed ``B``.
    """
    try:
        from scipy.cluster.hierarchy import fcluster, linkage
        from scipy.spatial.distance import pdist
    except ImportError as exc:
        raise ImportError(
            'cluster_margin needs SciPy: pip install scipy (or the "verify" extra: pip install ".[verify]")'
        ) from exc

    x = as_real_matrix(embeddings, "embeddings")
    n = x.shape[0]
    _check_linkage_options(method, bucketing)
    bucket_size = check_int(bucket_size, "bucket_size", 2)
    if n_clusters is not None and distance_threshold is not None:
        raise ValueError("give n_clusters or distance_threshold, not both")
    if distance_threshold is not None:
        distance_threshold = float(distance_threshold)
        if not distance_threshold >= 0.0 or math.isinf(distance_threshold):
            raise ValueError(
                f"distance_threshold must be finite and >= 0, got {distance_threshold}"
            )
    elif n_clusters is None:
        n_clusters = max(1, math.ceil(n / 20))
    else:
        n_clusters = check_int(n_clusters, "n_clusters", 1, max(n, 1))
    labels = np.empty(n, dtype=np.int64)
    if n == 0:
        return labels
    check_finite_rows(x, "embeddings")
    buckets = _buckets(x, bucket_size, bucketing, as_generator(rng))
    targets = _apportion(n_clusters, [len(bk) for bk in buckets]) if n_clusters else None
    next_label = 0
    for i, idx in enumerate(buckets):
        if idx.size == 1:
            local = np.ones(1, dtype=np.int64)
        else:
            tree = linkage(pdist(np.asarray(x[idx], dtype=np.float64)), method=method)
            if targets is None:
                local = fcluster(tree, distance_threshold, criterion="distance")
            else:
                local = fcluster(tree, targets[i], criterion="maxclust")
        _, local = np.unique(local, return_inverse=True)
        labels[idx] = local + next_label
        next_label += int(local.max()) + 1
    return labels


def _round_robin(labels: np.ndarray, rng: np.random.Generator) -> NDArray[np.int64]:
    """Positions of ``labels`` in Cluster-Margin's round-robin order.

    Clusters are visited from smallest to largest (ties in random order); each visit
    takes one not-yet-taken member at random; a round visits every cluster that still
    has members. Returns a permutation of ``range(len(labels))``; its first ``b``
    entries are the batch. O(c log c).
    """
    _, cluster_of, counts = np.unique(labels, return_inverse=True, return_counts=True)
    cluster_order = np.lexsort((rng.random(counts.size), counts))
    cluster_rank = np.empty_like(cluster_order)
    cluster_rank[cluster_order] = np.arange(counts.size)
    grouped = np.lexsort((rng.random(labels.size), cluster_of))  # by cluster, random within
    starts = np.cumsum(counts) - counts
    round_of = np.empty(labels.size, dtype=np.int64)
    round_of[grouped] = np.arange(labels.size) - starts[cluster_of[grouped]]
    return np.lexsort((cluster_rank[cluster_of], round_of)).astype(np.int64)


@register("cluster_margin")
@dataclass(frozen=True)
class ClusterMargin(Strategy):
    """Cluster-Margin (Citovsky et al., 2021): diversity among the smallest margins.

    1. Take the ``c = min(n_c, ceil(candidate_factor * b))`` unlabeled points with the
       smallest margins (Citovsky et al.'s ``k_m``; ties at random).
    2. Group them by cluster: ``pool.clusters`` when given (labels of the whole pool,
       e.g. :func:`hac_clusters` run once, as in the original method), otherwise HAC of
       their embeddings (:func:`hac_clusters` with ``n_clusters`` -- default ``b`` --
       or ``distance_threshold``).
    3. Visit the clusters from smallest to largest, taking one random member from each,
       round after round, until ``b`` points are taken.

    Needs ``probs``/``logits`` and either ``clusters`` or ``embeddings``. With
    ``return_scores=True`` the order is the round-robin order and the scores and
    utilities are margin gains ``1 - (top1 - top2)``.

    Parameters
    ----------
    candidate_factor : float, default 10
        ``k_m / b``, at least 1.
    n_clusters : int, optional
        Clusters among the candidates when clustering on the fly; default ``b`` (so
        that one round takes one point per cluster).
    distance_threshold : float, optional
        HAC cut distance instead of ``n_clusters``.
    method, bucket_size, bucketing
        Passed to :func:`hac_clusters`.

    Notes
    -----
    Cost: O(n) for the candidates, then (clustering on the fly) ``O(c B d)`` time and
    ``O(B^2)`` memory for HAC on buckets of ``B = bucket_size``, and ``O(c log c)`` for
    the round robin. With ``c <= bucket_size`` the HAC is exact; beyond it is the
    bucketed approximation of :func:`hac_clusters`.
    """

    name: ClassVar[str] = "cluster_margin"
    candidate_factor: float = 10.0
    n_clusters: int | None = None
    distance_threshold: float | None = None
    method: str = "average"
    bucket_size: int = 4096
    bucketing: Bucketing = "rptree"

    def __post_init__(self) -> None:
        cf = self.candidate_factor
        if isinstance(cf, (bool, np.bool_)) or not isinstance(cf, numbers.Real):
            raise TypeError(f"candidate_factor must be a real number >= 1, got {cf!r}")
        if not 1.0 <= float(cf) < math.inf:  # inf: ceil(inf * b) has no size
            raise ValueError(f"candidate_factor must be a finite number >= 1, got {cf!r}")
        if self.n_clusters is not None:
            check_int(self.n_clusters, "n_clusters", 1)
        if self.n_clusters is not None and self.distance_threshold is not None:
            raise ValueError("give n_clusters or distance_threshold, not both")
        _check_linkage_options(self.method, self.bucketing)
        check_int(self.bucket_size, "bucket_size", 2)

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> NDArray[np.int64]:
        n_cand = min(pool.n_candidates, max(b, math.ceil(self.candidate_factor * b)))
        cand = best_candidates(pool.score("raw_margin"), n_cand, rng, pool.excluded,
                               largest=False)
        cand.sort()  # ascending pool order: sequential reads of memory-mapped embeddings
        if pool.clusters is not None:
            labels = np.asarray(pool.clusters)[cand]
        else:
            embeddings = pool.require(
                "embeddings", "ClusterMargin (without PoolState.clusters)"
            )
            n_clusters = None
            if self.distance_threshold is None:
                n_clusters = min(self.n_clusters or b, cand.size)
            labels = hac_clusters(
                np.asarray(embeddings[cand]),
                n_clusters=n_clusters,
                distance_threshold=self.distance_threshold,
                method=self.method,
                bucket_size=self.bucket_size,
                bucketing=self.bucketing,
                rng=rng,
            )
        return cand[_round_robin(labels, rng)[:b]]

    def _utilities(self, pool: PoolState) -> NDArray[np.float64]:
        """``1 - (top1 - top2)`` in float64 (the margin gain)."""
        return 1.0 - pool.score("raw_margin").astype(np.float64)

    def _explain(self, pool: PoolState, b: int, rng: np.random.Generator) -> Explained:
        """Round-robin order; each pick's score is its margin gain."""
        order = np.asarray(self._select(pool, b, rng), dtype=np.int64)
        utilities = self._utilities(pool)
        utilities[pool.excluded] = np.nan
        return Explained(order=order, scores=utilities[order], utilities=utilities)

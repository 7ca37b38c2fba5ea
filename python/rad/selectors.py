"""Selection strategies: RAD and the baselines it is compared with, behind one interface.

Every selector is a small frozen dataclass (its hyper-parameters) with one method,

    strategy.select(pool, b, rng=None) -> numpy.ndarray  # sorted int64, b distinct indices

where ``pool`` is a :class:`PoolState` holding whatever the selectors need (student
probabilities or logits, embeddings, gains, the estimated number of teacher mistakes
``m``, already-labeled indices, precomputed clusters) and ``rng`` follows SPEC 7
(``int | numpy.random.Generator | numpy.random.SeedSequence | None``, normalised with
:func:`numpy.random.default_rng`). Every selector

* returns exactly ``b`` distinct indices into the pool, sorted, as ``int64``;
* never returns an index listed in ``pool.labeled``;
* gives identical output for the same ``rng`` seed;
* raises ``ValueError``/``TypeError`` naming the problem when ``b`` cannot be met
  (``b`` larger than the unlabeled pool) or an input is missing or malformed.

Everything is framework-free: NumPy arrays in, indices out.

Selectors and their cost (``n`` pool points, ``b`` batch, ``k`` classes, ``d`` embedding
dimensions, ``L`` labeled points, ``B`` HAC bucket size):

* :class:`RAD` -- DepRound of the exact minimax batch probabilities (``rad.select``);
  O(n k) for the gains, then a few O(n) passes.
* :class:`Margin` -- the ``b`` smallest margins ``top1 - top2``; O(n k) + O(n).
* :class:`Entropy` -- the ``b`` largest predictive entropies; O(n k) + O(n).
* :class:`LeastConfidence` -- the ``b`` largest ``1 - top1``; O(n k) + O(n).
* :class:`Uniform` -- ``b`` points uniformly at random; O(b log L).
* :class:`Coreset` -- greedy k-center on embeddings (Sener & Savarese, 2018);
  O(n d (L + b)) time, O(n) extra memory.
* :class:`ClusterMargin` -- round robin over HAC clusters of the ``c = f b`` smallest
  margins (Citovsky et al., 2021); O(n k) + O(c B d) time, O(B^2) memory.

Neither clustering selector forms an ``n x n`` distance matrix: k-center keeps one
distance per point and works with matrix-vector products; HAC runs on buckets of at most
``bucket_size`` points (see :func:`hac_clusters`). Ties in the score-based selectors are
broken uniformly at random with ``rng`` (a sort-based selector would favour low indices).

Examples
--------
>>> import numpy as np
>>> from rad.selectors import PoolState, get_strategy
>>> rng = np.random.default_rng(0)
>>> probs = rng.dirichlet(np.ones(10), size=1000)
>>> pool = PoolState(probs=probs, labeled=np.arange(50))
>>> idx = get_strategy("margin").select(pool, 20, rng=0)
>>> idx.shape, bool(idx.min() >= 50)
((20,), True)
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad import gains as _gains

__all__ = [
    "STRATEGIES",
    "RAD",
    "ClusterMargin",
    "Coreset",
    "Entropy",
    "LeastConfidence",
    "Margin",
    "PoolState",
    "RNGLike",
    "Strategy",
    "Uniform",
    "as_generator",
    "available",
    "covering_radius",
    "get_strategy",
    "hac_clusters",
    "k_center_greedy",
]

RNGLike = Union[int, np.integer, np.random.Generator, np.random.SeedSequence, None]

_LINKAGES = ("average", "single", "complete", "weighted", "centroid", "median", "ward")
_BLOCK_ROWS = 4096  # rows of one distance block
_BLOCK_COLS = 1024  # centers of one distance block: a block is at most 32 MiB in float64
_PROJ_ROWS = 65536  # rows per matrix-vector product when projecting a subset
_SCORE_KINDS = ("raw_margin", *_gains.GAIN_KINDS)


# --------------------------------------------------------------------------------------
# Small validators
# --------------------------------------------------------------------------------------


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Normalise ``rng`` (SPEC 7) with :func:`numpy.random.default_rng`.

    A ``Generator`` is used as is (and advanced); an int, ``SeedSequence`` or ``None``
    seeds a new one.

    Raises
    ------
    TypeError
        For anything else (bools and floats included).
    """
    if isinstance(rng, (bool, np.bool_)) or not (
        rng is None
        or isinstance(rng, (numbers.Integral, np.random.Generator, np.random.SeedSequence))
    ):
        raise TypeError(
            "rng must be an int, a numpy.random.Generator, a numpy.random.SeedSequence or "
            f"None, not {type(rng).__name__}"
        )
    return np.random.default_rng(rng)


def _check_int(value: Any, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be in {bound}, got {value}")
    return value


def _as_2d_float(x: ArrayLike, name: str) -> np.ndarray:
    """View ``x`` as a 2-D float32/float64 array (copies only other dtypes)."""
    arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, d) array, got shape {arr.shape}")
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float32 if arr.dtype == np.float16 else np.float64)
    return arr


def _check_finite(x: np.ndarray, name: str, block_rows: int = _PROJ_ROWS) -> None:
    """Raise ``ValueError`` naming the first row of ``x`` with a NaN or infinity."""
    for start in range(0, x.shape[0], block_rows):
        ok = np.isfinite(x[start : start + block_rows]).all(axis=1)
        if not ok.all():
            row = start + int(np.flatnonzero(~ok)[0])
            raise ValueError(f"{name} must be finite, but row {row} contains NaN or inf")


def _as_index_set(indices: ArrayLike, n: int, name: str) -> NDArray[np.int64]:
    """Sorted unique int64 indices from an index array or a boolean mask of length n."""
    arr = np.asarray(indices)
    if arr.dtype == np.bool_:
        if arr.shape != (n,):
            raise ValueError(f"{name} as a boolean mask must have shape ({n},), got {arr.shape}")
        return np.flatnonzero(arr).astype(np.int64)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integer indices or a boolean mask, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    out = np.unique(arr.astype(np.int64))
    if out[0] < 0 or out[-1] >= n:
        bad = out[0] if out[0] < 0 else out[-1]
        raise ValueError(f"{name} contains index {int(bad)}, outside [0, {n})")
    return out


def _ranks_to_indices(ranks: NDArray[np.int64], excluded: NDArray[np.int64]) -> NDArray[np.int64]:
    """Map ranks among the non-excluded points to pool indices, in O(b log L).

    With ``excluded`` sorted and unique, the ``r``-th non-excluded index is
    ``r + #{k : excluded[k] - k <= r}``.
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    if excluded.size == 0:
        return ranks
    shifted = excluded - np.arange(excluded.size, dtype=np.int64)
    return ranks + np.searchsorted(shifted, ranks, side="right")


# --------------------------------------------------------------------------------------
# Pool state
# --------------------------------------------------------------------------------------


@dataclass(eq=False)
class PoolState:
    """Everything a selector may look at, for one selection round.

    All fields are optional; each strategy states which it needs and raises
    ``ValueError`` naming a missing one. Arrays are not copied (memory maps work).
    Derived scores (margins, entropies, ...) are computed on first use and cached, so
    several strategies can share one pool state; build a new ``PoolState`` for each
    round rather than mutating one.

    Parameters
    ----------
    probs : array_like, shape (n, k), optional
        Student class probabilities on the pool (rows sum to 1).
    logits : array_like, shape (n, k), optional
        Student logits instead of ``probs`` (give one or the other).
    embeddings : array_like, shape (n, d), optional
        Student (penultimate-layer) embeddings, for :class:`Coreset` and
        :class:`ClusterMargin`.
    gains : array_like, shape (n,), optional
        Precomputed gains for :class:`RAD` (overrides its ``gain`` kind).
    m : float, optional
        Estimated number of teacher mistakes in the pool (``0 <= m <= n``), for
        :class:`RAD`.
    labeled : array_like, optional
        Indices (or a boolean mask of length ``n``) of points already labeled: never
        selected; :class:`Coreset` uses them as its initial centers.
    clusters : array_like of int, shape (n,), optional
        Cluster label of every pool point for :class:`ClusterMargin` (e.g. from
        :func:`hac_clusters`, computed once as Citovsky et al. do).
    size : int, optional
        Pool size, needed only when no array is given (e.g. :class:`Uniform` alone).
    """

    probs: ArrayLike | None = None
    logits: ArrayLike | None = None
    embeddings: ArrayLike | None = None
    gains: ArrayLike | None = None
    m: float | None = None
    labeled: ArrayLike | None = None
    clusters: ArrayLike | None = None
    size: int | None = None
    _n: int = field(init=False, repr=False)
    _excluded: NDArray[np.int64] = field(init=False, repr=False)
    _cache: dict[str, np.ndarray] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.probs is not None and self.logits is not None:
            raise ValueError("give either probs or logits, not both")
        sizes: dict[str, int] = {}
        for name, ndim in (("probs", 2), ("logits", 2), ("embeddings", 2), ("gains", 1),
                           ("clusters", 1)):
            value = getattr(self, name)
            if value is None:
                continue
            arr = value if isinstance(value, np.ndarray) else np.asarray(value)
            if arr.ndim != ndim:
                raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
            setattr(self, name, arr)
            sizes[name] = arr.shape[0]
        if self.size is not None:
            sizes["size"] = _check_int(self.size, "size", 0)
        if not sizes:
            raise ValueError(
                "PoolState needs at least one of probs, logits, embeddings, gains, "
                "clusters or size"
            )
        if len(set(sizes.values())) > 1:
            raise ValueError(f"inconsistent pool sizes: {sizes}")
        self._n = next(iter(sizes.values()))
        if self.clusters is not None and np.asarray(self.clusters).dtype.kind not in "iu":
            raise TypeError(f"clusters must be integer labels, got dtype {self.clusters.dtype}")
        self._excluded = (
            np.zeros(0, dtype=np.int64)
            if self.labeled is None
            else _as_index_set(self.labeled, self._n, "labeled")
        )

    @property
    def n(self) -> int:
        """Number of points in the pool (labeled ones included)."""
        return self._n

    @property
    def excluded(self) -> NDArray[np.int64]:
        """Sorted unique indices that must not be selected."""
        return self._excluded

    @property
    def n_candidates(self) -> int:
        """Number of selectable (not yet labeled) points."""
        return self._n - self._excluded.size

    def score(self, kind: str) -> NDArray[np.floating]:
        """Per-point score from the student's outputs, computed once and cached.

        Parameters
        ----------
        kind : {"raw_margin", "margin", "entropy", "least_confidence", "exp_margin"}
            ``"raw_margin"`` is ``top1 - top2`` (:func:`rad.gains.margins`); the others
            are the gains of :func:`rad.gains.compute_gains`.
        """
        if kind not in _SCORE_KINDS:
            raise ValueError(f"unknown score kind {kind!r}; expected one of {_SCORE_KINDS}")
        if kind not in self._cache:
            source, from_logits = self._outputs(kind)
            if kind == "raw_margin":
                value = _gains.margins(source, from_logits=from_logits)
            else:
                value = _gains.compute_gains(source, kind, from_logits=from_logits)
            self._cache[kind] = value
        return self._cache[kind]

    def _outputs(self, purpose: str) -> tuple[np.ndarray, bool]:
        if self.probs is not None:
            return self.probs, False
        if self.logits is not None:
            return self.logits, True
        raise ValueError(f"the {purpose!r} score needs the pool's probs or logits")

    def require(self, name: str, strategy: str) -> np.ndarray:
        """The field ``name``, or a ``ValueError`` saying ``strategy`` needs it."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"{strategy} needs PoolState.{name}")
        return value


# --------------------------------------------------------------------------------------
# Strategy interface
# --------------------------------------------------------------------------------------


class Strategy(ABC):
    """Base class: ``select(pool, b, rng)`` validates, delegates, checks the result."""

    name: ClassVar[str] = "strategy"

    def select(self, pool: PoolState, b: int, rng: RNGLike = None) -> NDArray[np.int64]:
        """Choose ``b`` points of ``pool`` that are not labeled yet.

        Parameters
        ----------
        pool : PoolState
            The pool and whatever this strategy needs.
        b : int
            Batch size, ``0 <= b <= pool.n_candidates``.
        rng : int, numpy.random.Generator, numpy.random.SeedSequence or None
            Randomness (SPEC 7); the same seed gives the same result.

        Returns
        -------
        numpy.ndarray
            Sorted ``int64`` array of ``b`` distinct indices into the pool, none of them
            in ``pool.labeled``.

        Raises
        ------
        TypeError
            If ``pool`` is not a :class:`PoolState`, or ``b``/``rng`` has a wrong type.
        ValueError
            If ``b`` exceeds the number of unlabeled points, or the pool lacks a field
            this strategy needs.
        """
        if not isinstance(pool, PoolState):
            raise TypeError(f"pool must be a rad.selectors.PoolState, not {type(pool).__name__}")
        gen = as_generator(rng)
        b = _check_int(b, "b", 0)
        if b > pool.n_candidates:
            raise ValueError(
                f"b={b} exceeds the {pool.n_candidates} selectable points "
                f"(pool of {pool.n} with {pool.excluded.size} labeled)"
            )
        if b == 0:
            return np.zeros(0, dtype=np.int64)
        return _checked(self._select(pool, b, gen), b, pool, self.name)

    __call__ = select

    @abstractmethod
    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        """Return ``b`` distinct non-excluded indices (any order); ``1 <= b <= n_c``."""


def _checked(idx: np.ndarray, b: int, pool: PoolState, name: str) -> NDArray[np.int64]:
    """Sort and verify the contract (cheap: O(b log b + b log L))."""
    out = np.sort(np.asarray(idx, dtype=np.int64))
    ok = (
        out.shape == (b,)
        and out[0] >= 0
        and out[-1] < pool.n
        and not np.any(out[1:] == out[:-1])
        and not np.any(np.isin(out, pool.excluded, assume_unique=True))
    )
    if not ok:  # pragma: no cover - would be a bug in a selector
        raise RuntimeError(f"internal error: {name} did not return {b} distinct valid indices")
    return out


def _lowest(scores: np.ndarray, b: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Indices of the ``b`` smallest scores, ties at the boundary broken at random.

    O(n): one introselect and two comparison passes. ``+inf`` marks excluded points
    (never chosen while ``b`` does not exceed the finite entries).
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


def _extreme(
    scores: np.ndarray, b: int, rng: np.random.Generator, excluded: np.ndarray, largest: bool
) -> NDArray[np.int64]:
    """The ``b`` smallest (or largest) scores among the non-excluded points."""
    work = np.negative(scores) if largest else np.array(scores, copy=True)
    if work.dtype.kind != "f":
        work = work.astype(np.float64)
    work[excluded] = np.inf
    return _lowest(work, b, rng)


# --------------------------------------------------------------------------------------
# Score-based selectors
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Margin(Strategy):
    """The ``b`` points with the smallest margin ``top1 - top2`` (Roth & Small, 2006).

    Needs ``probs`` or ``logits``. Equivalent to the ``b`` largest ``1 - margin`` gains
    (computed on the margins themselves, so rounding in ``1 - margin`` cannot merge
    distinct margins). O(n k) for the margins, O(n) for the choice.
    """

    name: ClassVar[str] = "margin"

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        return _extreme(pool.score("raw_margin"), b, rng, pool.excluded, largest=False)


@dataclass(frozen=True)
class Entropy(Strategy):
    """The ``b`` points whose predictive entropy is largest (Holub et al., 2008).

    Needs ``probs`` or ``logits``.
    """

    name: ClassVar[str] = "entropy"

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        return _extreme(pool.score("entropy"), b, rng, pool.excluded, largest=True)


@dataclass(frozen=True)
class LeastConfidence(Strategy):
    """The ``b`` points whose top probability is smallest (largest ``1 - top1``).

    Needs ``probs`` or ``logits``.
    """

    name: ClassVar[str] = "least_confidence"

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        return _extreme(pool.score("least_confidence"), b, rng, pool.excluded, largest=True)


@dataclass(frozen=True)
class Uniform(Strategy):
    """``b`` distinct unlabeled points uniformly at random.

    Needs only the pool size. Draws ranks among the unlabeled points and maps them to
    indices in O(b log L), so no index array of the pool is built.
    """

    name: ClassVar[str] = "uniform"

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        ranks = rng.choice(pool.n_candidates, size=b, replace=False)
        return _ranks_to_indices(ranks, pool.excluded)


@dataclass(frozen=True)
class RAD(Strategy):
    """Robust Active Distillation: ``rad.select`` on the unlabeled points' gains.

    Needs ``m`` and either ``gains`` or ``probs``/``logits`` (from which the gains of
    kind ``gain`` are computed; the paper's default is ``"margin"``, ``1 - margin``).

    With labeled points excluded, ``rad.select`` runs on the ``n_c`` candidates only,
    and the mistake count is scaled to them: ``m_c = m * n_c / n`` (mistakes assumed
    spread over the pool in proportion; ``m`` is the estimate for the whole pool). The
    default ``w = 1 - m/n`` is therefore unchanged, since ``1 - m_c/n_c = 1 - m/n``.
    Without exclusions ``m`` is passed as is.

    Parameters
    ----------
    gain : {"margin", "entropy", "least_confidence", "exp_margin"}
        Gain computed from the student's outputs when ``pool.gains`` is not given.
    w, backend, threads
        Passed to ``rad.select``.
    """

    name: ClassVar[str] = "rad"
    gain: str = "margin"
    w: float | None = None
    backend: str = "auto"
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.gain not in _gains.GAIN_KINDS:
            raise ValueError(f"unknown gain {self.gain!r}; expected one of {_gains.GAIN_KINDS}")

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        import rad  # lazy: the core solver is only needed by this strategy

        m = pool.require("m", "RAD")
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, numbers.Real):
            raise TypeError(f"PoolState.m must be a real number, got {m!r}")
        m = float(m)
        if not 0.0 <= m <= pool.n:
            raise ValueError(f"PoolState.m must be in [0, n={pool.n}], got {m!r}")
        g = pool.gains if pool.gains is not None else pool.score(self.gain)
        excluded = pool.excluded
        if excluded.size:
            g = np.delete(g, excluded)
            m = min(m * g.shape[0] / pool.n, float(g.shape[0]))
        chosen = rad.select(
            g, m, b, w=self.w, rng=rng, backend=self.backend, threads=self.threads
        )
        return _ranks_to_indices(chosen, excluded)


# --------------------------------------------------------------------------------------
# k-center greedy (Coreset)
# --------------------------------------------------------------------------------------


class _Geometry:
    """Squared Euclidean distances by ``|x~|^2 - 2 x~.c~ + |c~|^2``, without n x n.

    Coordinates are shifted by a data point ``x0`` (``x~ = x - x0``) so that the
    expansion does not cancel catastrophically when the data sit far from the origin;
    ``|x~|^2`` is accumulated exactly in float64 block by block, and the products run
    as BLAS matrix-vector / matrix-matrix products in the embeddings' dtype.
    """

    def __init__(self, x: np.ndarray, block_rows: int) -> None:
        self.x = x
        self.block_rows = block_rows
        self.x0 = np.asarray(x[0], dtype=np.float64)
        n = x.shape[0]
        self.sq = np.empty(n, dtype=np.float64)
        for start in range(0, n, block_rows):
            part = np.asarray(x[start : start + block_rows], dtype=np.float64) - self.x0
            np.einsum("ij,ij->i", part, part, out=self.sq[start : start + block_rows])

    def centers(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Shifted centers in the data dtype, their ``x0`` products, their ``|c~|^2``."""
        c = (np.asarray(self.x[idx], dtype=np.float64) - self.x0).astype(self.x.dtype)
        return c, c.astype(np.float64) @ self.x0, self.sq[idx]

    def to_one(self, j: int, dot: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Squared distances of every point to point ``j`` (two length-n buffers)."""
        c, cx0, csq = self.centers(np.array([j]))
        np.matmul(self.x, c[0], out=dot)
        np.multiply(dot, -2.0, out=out)
        out += self.sq
        out += csq[0] + 2.0 * cx0[0]
        return out

    def min_to_many(self, idx: np.ndarray) -> NDArray[np.float64]:
        """Squared distance of every point to its nearest point of ``idx`` (blocked)."""
        n = self.x.shape[0]
        best = np.full(n, np.inf)
        if idx.size == 0:
            return best
        for c0 in range(0, idx.size, _BLOCK_COLS):
            c, cx0, csq = self.centers(idx[c0 : c0 + _BLOCK_COLS])
            offset = csq + 2.0 * cx0
            for start in range(0, n, self.block_rows):
                stop = min(start + self.block_rows, n)
                d2 = (self.x[start:stop] @ c.T).astype(np.float64)
                d2 *= -2.0
                d2 += offset
                d2 += self.sq[start:stop, None]
                np.minimum(best[start:stop], d2.min(axis=1), out=best[start:stop])
        np.maximum(best, 0.0, out=best)
        return best


def k_center_greedy(
    embeddings: ArrayLike,
    b: int,
    *,
    centers: ArrayLike | None = None,
    rng: RNGLike = None,
    block_rows: int = _BLOCK_ROWS,
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
        Number of centers to add, ``0 <= b <= n - len(centers)``.
    centers : array_like, optional
        Indices (or boolean mask) of existing centers; never selected.
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
    distance per point and two length-``n`` buffers) plus ``O(L d)`` for the centers
    and one ``block_rows x 1024`` block. Each step is one matrix-vector product over
    the embeddings. Distances use the expansion of :class:`_Geometry` (shifted by a data
    point); with float32 embeddings the products are float32, so near-ties between
    far-apart candidates may be broken differently from an exact computation. Ties
    are broken towards the lowest index.
    """
    x = _as_2d_float(embeddings, "embeddings")
    n = x.shape[0]
    block_rows = _check_int(block_rows, "block_rows", 1)
    start_centers = (
        np.zeros(0, dtype=np.int64) if centers is None else _as_index_set(centers, n, "centers")
    )
    b = _check_int(b, "b", 0, n - start_centers.size)
    gen = as_generator(rng)
    picks = np.empty(b, dtype=np.int64)
    if b == 0:
        return picks
    geo = _Geometry(x, block_rows)
    if not np.isfinite(geo.sq).all():  # NaN/inf rows (or overflowing norms)
        _check_finite(x, "embeddings")
        raise ValueError("embeddings are too large: squared distances overflow float64")
    mind = geo.min_to_many(start_centers)
    mind[start_centers] = -np.inf
    dot = np.empty(n, dtype=x.dtype)
    dist = np.empty(n, dtype=np.float64)
    for t in range(b):
        if t == 0 and start_centers.size == 0:
            j = int(gen.integers(n))
        else:
            j = int(np.argmax(mind))
        picks[t] = j
        mind[j] = -np.inf
        if t + 1 < b:
            np.minimum(mind, geo.to_one(j, dot, dist), out=mind)
    return picks


def covering_radius(
    embeddings: ArrayLike, centers: ArrayLike, *, block_rows: int = _BLOCK_ROWS
) -> float:
    """``max_i min_c ||x_i - x_c||``: the k-center objective of the centers ``centers``.

    Blocked (no ``n x n`` matrix): ``O(n d |centers|)`` time, ``O(n)`` memory.

    Raises
    ------
    ValueError
        If ``centers`` is empty or out of range.
    """
    x = _as_2d_float(embeddings, "embeddings")
    idx = _as_index_set(centers, x.shape[0], "centers")
    if idx.size == 0:
        raise ValueError("covering_radius needs at least one center")
    best = _Geometry(x, _check_int(block_rows, "block_rows", 1)).min_to_many(idx)
    best[idx] = 0.0
    return float(np.sqrt(best.max()))


@dataclass(frozen=True)
class Coreset(Strategy):
    """Core-set selection by greedy k-center on embeddings (Sener & Savarese, 2018).

    Needs ``embeddings``. Labeled points are the initial centers (so the batch covers
    what is not yet covered); without them the first center is random (``rng``).
    Cost: ``O(n d (L + b))`` time, ``O(n)`` extra memory; see :func:`k_center_greedy`.
    """

    name: ClassVar[str] = "coreset"
    block_rows: int = _BLOCK_ROWS

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        emb = pool.require("embeddings", "Coreset")
        return k_center_greedy(
            emb, b, centers=pool.excluded, rng=rng, block_rows=self.block_rows
        )


# --------------------------------------------------------------------------------------
# Bucketed HAC and Cluster-Margin
# --------------------------------------------------------------------------------------


def _project(x: np.ndarray, idx: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.empty(idx.size, dtype=np.float64)
    for start in range(0, idx.size, _PROJ_ROWS):
        sub = idx[start : start + _PROJ_ROWS]
        out[start : start + sub.size] = x[sub] @ v
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
        v = rng.standard_normal(x.shape[1]).astype(x.dtype)
        proj = _project(x, idx, v)
        half = idx.size // 2
        order = np.argpartition(proj, half)
        stack.append(idx[order[half:]])
        stack.append(idx[order[:half]])
    return out


def _apportion(total: int, sizes: Sequence[int]) -> list[int]:
    """Split ``total`` clusters over buckets in proportion to size (largest remainder),
    at least 1 and at most ``size`` each."""
    sizes_arr = np.asarray(sizes, dtype=np.float64)
    share = total * sizes_arr / sizes_arr.sum()
    base = np.floor(share).astype(np.int64)
    rest = total - int(base.sum())
    if rest > 0:
        base[np.argsort(-(share - base), kind="stable")[:rest]] += 1
    return np.clip(base, 1, np.asarray(sizes, dtype=np.int64)).tolist()


def hac_clusters(
    embeddings: ArrayLike,
    *,
    n_clusters: int | None = None,
    distance_threshold: float | None = None,
    method: str = "average",
    bucket_size: int = 4096,
    bucketing: Literal["rptree", "random"] = "rptree",
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
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import pdist

    x = _as_2d_float(embeddings, "embeddings")
    n = x.shape[0]
    if method not in _LINKAGES:
        raise ValueError(f"unknown linkage method {method!r}; expected one of {_LINKAGES}")
    if bucketing not in ("rptree", "random"):
        raise ValueError(f"bucketing must be 'rptree' or 'random', got {bucketing!r}")
    bucket_size = _check_int(bucket_size, "bucket_size", 2)
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
        n_clusters = _check_int(n_clusters, "n_clusters", 1, max(n, 1))
    labels = np.empty(n, dtype=np.int64)
    if n == 0:
        return labels
    _check_finite(x, "embeddings")
    buckets = _buckets(x, bucket_size, bucketing, as_generator(rng))
    targets = _apportion(n_clusters, [len(bk) for bk in buckets]) if n_clusters else None
    next_label = 0
    for i, idx in enumerate(buckets):
        if idx.size == 1:
            local = np.ones(1, dtype=np.int64)
        else:
            z = linkage(pdist(np.asarray(x[idx], dtype=np.float64)), method=method)
            if targets is None:
                local = fcluster(z, distance_threshold, criterion="distance")
            else:
                local = fcluster(z, targets[i], criterion="maxclust")
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
    _, inv, counts = np.unique(labels, return_inverse=True, return_counts=True)
    cluster_order = np.lexsort((rng.random(counts.size), counts))
    cluster_rank = np.empty_like(cluster_order)
    cluster_rank[cluster_order] = np.arange(counts.size)
    grouped = np.lexsort((rng.random(labels.size), inv))  # by cluster, random within
    starts = np.cumsum(counts) - counts
    round_of = np.empty(labels.size, dtype=np.int64)
    round_of[grouped] = np.arange(labels.size) - starts[inv[grouped]]
    return np.lexsort((cluster_rank[inv], round_of)).astype(np.int64)


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

    Needs ``probs``/``logits`` and either ``clusters`` or ``embeddings``.

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
    bucketing: str = "rptree"

    def __post_init__(self) -> None:
        if not float(self.candidate_factor) >= 1.0:
            raise ValueError(f"candidate_factor must be >= 1, got {self.candidate_factor!r}")
        if self.n_clusters is not None:
            _check_int(self.n_clusters, "n_clusters", 1)
        if self.n_clusters is not None and self.distance_threshold is not None:
            raise ValueError("give n_clusters or distance_threshold, not both")
        if self.method not in _LINKAGES:
            raise ValueError(f"unknown linkage method {self.method!r}; expected one of {_LINKAGES}")
        if self.bucketing not in ("rptree", "random"):
            raise ValueError(f"bucketing must be 'rptree' or 'random', got {self.bucketing!r}")
        _check_int(self.bucket_size, "bucket_size", 2)

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        n_cand = min(pool.n_candidates, max(b, math.ceil(self.candidate_factor * b)))
        cand = _extreme(pool.score("raw_margin"), n_cand, rng, pool.excluded, largest=False)
        cand.sort()  # ascending pool order: sequential reads of memory-mapped embeddings
        if pool.clusters is not None:
            labels = np.asarray(pool.clusters)[cand]
        else:
            emb = pool.require("embeddings", "ClusterMargin (without PoolState.clusters)")
            k = None
            if self.distance_threshold is None:
                k = min(self.n_clusters or b, cand.size)
            labels = hac_clusters(
                np.asarray(emb[cand]),
                n_clusters=k,
                distance_threshold=self.distance_threshold,
                method=self.method,
                bucket_size=self.bucket_size,
                bucketing=self.bucketing,  # type: ignore[arg-type]
                rng=rng,
            )
        return cand[_round_robin(labels, rng)[:b]]


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------

STRATEGIES: dict[str, type[Strategy]] = {
    "rad": RAD,
    "margin": Margin,
    "entropy": Entropy,
    "least_confidence": LeastConfidence,
    "uniform": Uniform,
    "coreset": Coreset,
    "k_center": Coreset,
    "cluster_margin": ClusterMargin,
}


def available() -> list[str]:
    """Names accepted by :func:`get_strategy`."""
    return sorted(STRATEGIES)


def get_strategy(name: str, **params: Any) -> Strategy:
    """Instantiate a strategy by name, e.g. ``get_strategy("cluster_margin", candidate_factor=5)``.

    Raises
    ------
    ValueError
        If ``name`` is unknown.
    TypeError
        If a parameter does not belong to that strategy.
    """
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; available: {available()}") from None
    return cls(**params)

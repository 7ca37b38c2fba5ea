"""The pool a selector looks at (:class:`PoolState`) and the input checks it shares.

Index-set helpers work on sorted unique ``int64`` arrays: :func:`as_index_set` builds
one from indices or a boolean mask, :func:`ranks_to_indices` maps ranks among the
non-excluded points back to pool indices without building an index array of the pool.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Union, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad import gains as _gains

__all__ = [
    "SCORE_KINDS",
    "PoolState",
    "RNGLike",
    "as_generator",
    "as_index_set",
    "as_real_matrix",
    "check_finite_rows",
    "check_int",
    "ranks_to_indices",
]

RNGLike = Union[int, np.integer, np.random.Generator, np.random.SeedSequence, None]

#: Scores :meth:`PoolState.score` computes: the raw margin and every gain kind.
SCORE_KINDS: tuple[str, ...] = ("raw_margin", *_gains.GAIN_KINDS)

_FINITE_CHECK_ROWS = 65536  # rows per block when scanning a matrix for NaN/inf


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Normalise ``rng`` (SPEC 7) with :func:`numpy.random.default_rng`.

    A ``Generator`` is used as is (and advanced); an int, ``SeedSequence`` or ``None``
    seeds a new one.

    Parameters
    ----------
    rng : int, numpy.random.Generator, numpy.random.SeedSequence or None
        The randomness to normalise.

    Returns
    -------
    numpy.random.Generator

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


def check_int(value: Any, name: str, low: int, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high]`` (``high=None``: no upper bound).

    Raises
    ------
    TypeError
        If ``value`` is not an integer (bools are refused).
    ValueError
        If it is out of range; the message names ``name`` and the bounds.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    result = int(value)
    if result < low or (high is not None and result > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be in {bound}, got {result}")
    return result


def as_real_matrix(x: ArrayLike, name: str) -> np.ndarray:
    """View ``x`` as a 2-D float32/float64 array (copies only other dtypes).

    float16 becomes float32, integers float64.

    Raises
    ------
    TypeError
        If ``x`` is not real numeric.
    ValueError
        If ``x`` is not 2-D.
    """
    arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, d) array, got shape {arr.shape}")
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float32 if arr.dtype == np.float16 else np.float64)
    return arr


def check_finite_rows(x: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` naming the first row of ``x`` with a NaN or infinity.

    Scans in blocks of rows, so memory maps are read once and no ``(n, d)`` mask is
    formed.
    """
    for start in range(0, x.shape[0], _FINITE_CHECK_ROWS):
        ok = np.isfinite(x[start : start + _FINITE_CHECK_ROWS]).all(axis=1)
        if not ok.all():
            row = start + int(np.flatnonzero(~ok)[0])
            raise ValueError(f"{name} must be finite, but row {row} contains NaN or inf")


def as_index_set(indices: ArrayLike, n: int, name: str) -> NDArray[np.int64]:
    """Sorted unique ``int64`` indices from an index array or a boolean mask of length n.

    Raises
    ------
    TypeError
        If ``indices`` is neither integer nor boolean.
    ValueError
        On a mask of the wrong length, a non-1-D array or an index outside ``[0, n)``.
    """
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


def ranks_to_indices(ranks: ArrayLike, excluded: NDArray[np.int64]) -> NDArray[np.int64]:
    """Map ranks among the non-excluded points to pool indices, in O(b log L).

    With ``excluded`` sorted and unique, the ``r``-th non-excluded index is
    ``r + #{k : excluded[k] - k <= r}``.

    Parameters
    ----------
    ranks : array_like of int
        Positions among the non-excluded points, in any order.
    excluded : numpy.ndarray
        Sorted unique excluded indices.

    Returns
    -------
    numpy.ndarray
        ``int64`` pool indices, in the order of ``ranks``.
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    if excluded.size == 0:
        return ranks
    shifted = excluded - np.arange(excluded.size, dtype=np.int64)
    return ranks + np.searchsorted(shifted, ranks, side="right")


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
        Student (penultimate-layer) embeddings, for :class:`~rad.selectors.Coreset` and
        :class:`~rad.selectors.ClusterMargin`.
    gains : array_like, shape (n,), optional
        Precomputed gains for :class:`~rad.selectors.RAD` (overrides its ``gain`` kind).
    m : float, optional
        Estimated number of teacher mistakes in the pool (``0 <= m <= n``), for
        :class:`~rad.selectors.RAD`.
    labeled : array_like, optional
        Indices (or a boolean mask of length ``n``) of points already labeled: never
        selected; :class:`~rad.selectors.Coreset` uses them as its initial centers.
    candidates : array_like, optional
        Indices (or a boolean mask of length ``n``) of the points a selector may
        choose (scikit-activeml's ``candidates=``); default: every point. Labeled
        points are excluded even when listed. Points outside ``candidates`` still
        count as pool points (for :class:`~rad.selectors.Coreset`'s distances and
        :class:`~rad.selectors.RAD`'s scaling of ``m``).
    clusters : array_like of int, shape (n,), optional
        Cluster label of every pool point for :class:`~rad.selectors.ClusterMargin`
        (e.g. from :func:`~rad.selectors.hac_clusters`, computed once as Citovsky et
        al. do).
    size : int, optional
        Pool size, needed only when no array is given (e.g. ``Uniform`` alone).
    """

    probs: ArrayLike | None = None
    logits: ArrayLike | None = None
    embeddings: ArrayLike | None = None
    gains: ArrayLike | None = None
    m: float | None = None
    labeled: ArrayLike | None = None
    clusters: ArrayLike | None = None
    size: int | None = None
    candidates: ArrayLike | None = None
    _n: int = field(init=False, repr=False)
    _labeled: NDArray[np.int64] = field(init=False, repr=False)
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
            sizes["size"] = check_int(self.size, "size", 0)
        if not sizes:
            raise ValueError(
                "PoolState needs at least one of probs, logits, embeddings, gains, "
                "clusters or size"
            )
        if len(set(sizes.values())) > 1:
            raise ValueError(f"inconsistent pool sizes: {sizes}")
        self._n = next(iter(sizes.values()))
        if self.clusters is not None and np.asarray(self.clusters).dtype.kind not in "iu":
            raise TypeError(
                f"clusters must be integer labels, got dtype {np.asarray(self.clusters).dtype}"
            )
        self._labeled = (
            np.zeros(0, dtype=np.int64)
            if self.labeled is None
            else as_index_set(self.labeled, self._n, "labeled")
        )
        self._excluded = self._labeled
        if self.candidates is not None:
            allowed = np.zeros(self._n, dtype=bool)
            allowed[as_index_set(self.candidates, self._n, "candidates")] = True
            allowed[self._labeled] = False
            self._excluded = np.flatnonzero(~allowed).astype(np.int64)

    @property
    def n(self) -> int:
        """Number of points in the pool (labeled ones included)."""
        return self._n

    @property
    def labeled_indices(self) -> NDArray[np.int64]:
        """Sorted unique indices of the labeled points."""
        return self._labeled

    @property
    def excluded(self) -> NDArray[np.int64]:
        """Sorted unique indices that must not be selected (labeled or not candidates)."""
        return self._excluded

    @property
    def n_candidates(self) -> int:
        """Number of selectable points (candidates not yet labeled)."""
        return self._n - self._excluded.size

    def selectable_indices(self) -> NDArray[np.int64]:
        """Sorted indices that may be selected (the complement of :attr:`excluded`)."""
        allowed = np.ones(self._n, dtype=bool)
        allowed[self._excluded] = False
        return np.flatnonzero(allowed).astype(np.int64)

    def describe_exclusions(self) -> str:
        """``"pool of n with L labeled"`` (and how many are outside ``candidates``)."""
        text = f"pool of {self._n} with {self._labeled.size} labeled"
        outside = self._excluded.size - self._labeled.size
        if self.candidates is not None:
            text += f", {outside} unlabeled outside candidates"
        return text

    def score(self, kind: str) -> NDArray[np.floating]:
        """Per-point score from the student's outputs, computed once and cached.

        Parameters
        ----------
        kind : {"raw_margin", "margin", "entropy", "least_confidence", "exp_margin"}
            ``"raw_margin"`` is ``top1 - top2`` (:func:`rad.gains.margins`); the others
            are the gains of :func:`rad.gains.compute_gains`.

        Returns
        -------
        numpy.ndarray, shape (n,)

        Raises
        ------
        ValueError
            For an unknown ``kind``, or when the pool has neither probs nor logits.
        """
        if kind not in SCORE_KINDS:
            raise ValueError(f"unknown score kind {kind!r}; expected one of {SCORE_KINDS}")
        if kind not in self._cache:
            outputs, from_logits = self._student_outputs(kind)
            if kind == "raw_margin":
                value = _gains.margins(outputs, from_logits=from_logits)
            else:
                value = _gains.compute_gains(
                    outputs, cast(_gains.GainKind, kind), from_logits=from_logits
                )
            self._cache[kind] = value
        return self._cache[kind]

    def _student_outputs(self, kind: str) -> tuple[np.ndarray, bool]:
        """``(probs, False)`` or ``(logits, True)``; ``ValueError`` naming ``kind`` if none."""
        if self.probs is not None:
            return cast(np.ndarray, self.probs), False  # made an array in __post_init__
        if self.logits is not None:
            return cast(np.ndarray, self.logits), True
        raise ValueError(f"the {kind!r} score needs the pool's probs or logits")

    def require(self, name: str, strategy: str) -> Any:
        """The field ``name``, or a ``ValueError`` saying ``strategy`` needs it."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"{strategy} needs PoolState.{name}")
        return value

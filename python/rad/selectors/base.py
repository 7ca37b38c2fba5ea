"""The selector interface (:class:`Strategy`), its result (:class:`Selection`), the registry.

Every selector is a small frozen dataclass (its hyper-parameters) deriving from
:class:`Strategy` and registered under one or more names with :func:`register`;
:func:`get_strategy` instantiates one by name. ``select(pool, b, rng)`` returns the sorted
indices; ``select(pool, b, rng, return_scores=True)`` returns a :class:`Selection` with
the same indices, their pick order, their scores and every pool point's utility.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

from rad.selectors.pool import PoolState, RNGLike, as_generator, check_int

__all__ = [
    "STRATEGIES",
    "Explained",
    "Selection",
    "Strategy",
    "available",
    "check_selection",
    "get_strategy",
    "register",
]

#: Strategy classes by registered name (filled by :func:`register`).
STRATEGIES: dict[str, type[Strategy]] = {}

_StrategyType = TypeVar("_StrategyType", bound="type[Strategy]")


@dataclass(frozen=True)
class Selection:
    """What a selector chose, in which order, and the scores behind it.

    Utilities follow the convention of scikit-activeml: higher means preferred, and
    points that could not be chosen (labeled, or outside ``candidates``) are NaN.

    Attributes
    ----------
    indices : numpy.ndarray of int64, shape (b,)
        The chosen points, sorted: exactly what ``select(...)`` returns.
    order : numpy.ndarray of int64, shape (b,)
        The same points in the order the selector ranks or picked them: the greedy
        pick order for k-center, the round-robin order for Cluster-Margin, the draw
        order for Uniform, best utility first (ties by index) for the score selectors
        and for RAD (largest inclusion probability first).
    scores : numpy.ndarray of float64, shape (b,)
        The score of each point of ``order`` when it was chosen: its utility, or for
        k-center its distance to the nearest center at its pick.
    utilities : numpy.ndarray of float64, shape (n,)
        Every pool point's utility before the batch: ``1 - margin`` (margin and
        cluster-margin), entropy, ``1 - top1``, RAD's inclusion probability ``q``,
        ``b / n_c`` for Uniform, the distance to the nearest labeled point for
        k-center (``inf`` when nothing is labeled); NaN where not selectable.
    info : Mapping[str, float]
        Strategy-specific numbers, e.g. RAD's ``m`` (as passed to ``rad.select``),
        ``w``, ``value`` and ``k_star``.
    """

    indices: NDArray[np.int64]
    order: NDArray[np.int64]
    scores: NDArray[np.float64]
    utilities: NDArray[np.float64]
    info: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Explained:
    """What :meth:`Strategy._explain` returns: picks in order and their scores."""

    order: NDArray[np.int64]
    scores: NDArray[np.float64]
    utilities: NDArray[np.float64]
    info: Mapping[str, float] = field(default_factory=dict)


class Strategy(ABC):
    """Base class: ``select(pool, b, rng)`` validates, delegates, checks the result.

    Subclasses implement :meth:`_select`, and for ``return_scores=True`` either
    :meth:`_utilities` (score selectors: the pick order is best utility first) or
    :meth:`_explain` (selectors whose pick order or scores come from the selection
    itself). Both paths must choose the same points for the same ``rng``.
    """

    name: ClassVar[str] = "strategy"

    @overload
    def select(
        self, pool: PoolState, b: int, rng: RNGLike = ..., *,
        return_scores: Literal[False] = ...,
    ) -> NDArray[np.int64]: ...

    @overload
    def select(
        self, pool: PoolState, b: int, rng: RNGLike = ..., *, return_scores: Literal[True]
    ) -> Selection: ...

    def select(
        self, pool: PoolState, b: int, rng: RNGLike = None, *, return_scores: bool = False
    ) -> NDArray[np.int64] | Selection:
        """Choose ``b`` points of ``pool`` that are not labeled yet.

        Parameters
        ----------
        pool : PoolState
            The pool and whatever this strategy needs.
        b : int
            Batch size, ``0 <= b <= pool.n_candidates``.
        rng : int, numpy.random.Generator, numpy.random.SeedSequence or None
            Randomness (SPEC 7); the same seed gives the same result.
        return_scores : bool, default False
            Return a :class:`Selection` (the same indices, their order, scores and
            every point's utility) instead of the indices alone. The chosen points
            are the same either way.

        Returns
        -------
        numpy.ndarray or Selection
            Sorted ``int64`` array of ``b`` distinct indices into the pool, none of them
            in ``pool.labeled`` nor outside ``pool.candidates``; or a :class:`Selection`.

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
        b = check_int(b, "b", 0)
        if not isinstance(return_scores, (bool, np.bool_)):
            raise TypeError(f"return_scores must be a bool, got {return_scores!r}")
        if b > pool.n_candidates:
            raise ValueError(
                f"b={b} exceeds the {pool.n_candidates} selectable points "
                f"({pool.describe_exclusions()})"
            )
        if not return_scores:
            if b == 0:
                return np.zeros(0, dtype=np.int64)
            return check_selection(self._select(pool, b, gen), b, pool, self.name)
        if b == 0:
            empty = np.zeros(0, dtype=np.int64)
            return Selection(empty, empty, np.zeros(0), self._empty_utilities(pool))
        explained = self._explain(pool, b, gen)
        indices = check_selection(explained.order, b, pool, self.name)
        return Selection(
            indices=indices,
            order=np.asarray(explained.order, dtype=np.int64),
            scores=np.asarray(explained.scores, dtype=np.float64),
            utilities=explained.utilities,
            info=dict(explained.info),
        )

    __call__ = select

    @abstractmethod
    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        """Return ``b`` distinct non-excluded indices (any order); ``1 <= b <= n_c``."""

    def _utilities(self, pool: PoolState) -> NDArray[np.float64]:
        """Every pool point's utility (higher is preferred), shape ``(n,)``."""
        raise NotImplementedError(f"{type(self).__name__} does not report utilities")

    def _empty_utilities(self, pool: PoolState) -> NDArray[np.float64]:
        """Utilities for ``b = 0``: those of :meth:`_utilities`, NaN where excluded."""
        try:
            utilities = np.array(self._utilities(pool), dtype=np.float64)
        except NotImplementedError:
            utilities = np.full(pool.n, np.nan)
        utilities[pool.excluded] = np.nan
        return utilities

    def _explain(self, pool: PoolState, b: int, rng: np.random.Generator) -> Explained:
        """:meth:`_select`, then the picks ordered by utility (best first, ties by index)."""
        picked = np.asarray(self._select(pool, b, rng), dtype=np.int64)
        utilities = np.array(self._utilities(pool), dtype=np.float64)
        utilities[pool.excluded] = np.nan
        order = picked[np.lexsort((picked, -utilities[picked]))]
        return Explained(order=order, scores=utilities[order], utilities=utilities)


def check_selection(
    indices: np.ndarray, b: int, pool: PoolState, name: str
) -> NDArray[np.int64]:
    """Sort ``indices`` and verify the contract (cheap: O(b log b + b log L)).

    Raises
    ------
    RuntimeError
        If they are not ``b`` distinct in-range non-excluded indices (a selector bug).
    """
    out = np.sort(np.asarray(indices, dtype=np.int64))
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


def register(*names: str) -> Callable[[_StrategyType], _StrategyType]:
    """Class decorator: make a strategy available to :func:`get_strategy` under ``names``."""

    def add(cls: _StrategyType) -> _StrategyType:
        for name in names:
            if name in STRATEGIES:
                raise ValueError(f"strategy name {name!r} is already registered")
            STRATEGIES[name] = cls
        return cls

    return add


def available() -> list[str]:
    """Names accepted by :func:`get_strategy`, sorted."""
    return sorted(STRATEGIES)


def get_strategy(name: str, **params: Any) -> Strategy:
    """Instantiate a strategy by name, e.g. ``get_strategy("cluster_margin", candidate_factor=5)``.

    Parameters
    ----------
    name : str
        One of :func:`available`.
    **params
        The strategy's hyper-parameters.

    Returns
    -------
    Strategy

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

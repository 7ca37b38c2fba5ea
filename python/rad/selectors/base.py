"""The selector interface (:class:`Strategy`), its result check, and the name registry.

Every selector is a small frozen dataclass (its hyper-parameters) deriving from
:class:`Strategy` and registered under one or more names with :func:`register`;
:func:`get_strategy` instantiates one by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import NDArray

from rad.selectors.pool import PoolState, RNGLike, as_generator, check_int

__all__ = ["STRATEGIES", "Strategy", "available", "check_selection", "get_strategy", "register"]

#: Strategy classes by registered name (filled by :func:`register`).
STRATEGIES: dict[str, type[Strategy]] = {}

_StrategyType = TypeVar("_StrategyType", bound="type[Strategy]")


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
        b = check_int(b, "b", 0)
        if b > pool.n_candidates:
            raise ValueError(
                f"b={b} exceeds the {pool.n_candidates} selectable points "
                f"(pool of {pool.n} with {pool.excluded.size} labeled)"
            )
        if b == 0:
            return np.zeros(0, dtype=np.int64)
        return check_selection(self._select(pool, b, gen), b, pool, self.name)

    __call__ = select

    @abstractmethod
    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> np.ndarray:
        """Return ``b`` distinct non-excluded indices (any order); ``1 <= b <= n_c``."""


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

"""Score-based baselines (margin, entropy, least confidence) and uniform sampling.

Each takes the ``b`` best unlabeled points by one score of the student's outputs, ties
at the boundary broken at random; :class:`Uniform` ignores the outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rad.selectors.base import Explained, Strategy, register
from rad.selectors.pool import PoolState, ranks_to_indices
from rad.selectors.ranking import best_candidates

__all__ = ["Entropy", "LeastConfidence", "Margin", "Uniform"]


@register("margin")
@dataclass(frozen=True)
class Margin(Strategy):
    """The ``b`` points with the smallest margin ``top1 - top2`` (Roth & Small, 2006).

    Needs ``probs`` or ``logits``. Equivalent to the ``b`` largest ``1 - margin`` gains
    (computed on the margins themselves, so rounding in ``1 - margin`` cannot merge
    distinct margins). O(n k) for the margins, O(n) for the choice.
    """

    name: ClassVar[str] = "margin"

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> NDArray[np.int64]:
        return best_candidates(pool.score("raw_margin"), b, rng, pool.excluded, largest=False)

    def _utilities(self, pool: PoolState) -> NDArray[np.float64]:
        """``1 - (top1 - top2)`` in float64 (the margin gain)."""
        return 1.0 - pool.score("raw_margin").astype(np.float64)


@register("entropy")
@dataclass(frozen=True)
class Entropy(Strategy):
    """The ``b`` points whose predictive entropy is largest (Holub et al., 2008).

    Needs ``probs`` or ``logits``.
    """

    name: ClassVar[str] = "entropy"

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> NDArray[np.int64]:
        return best_candidates(pool.score("entropy"), b, rng, pool.excluded, largest=True)

    def _utilities(self, pool: PoolState) -> NDArray[np.float64]:
        """The predictive entropy in nats."""
        return pool.score("entropy").astype(np.float64)


@register("least_confidence")
@dataclass(frozen=True)
class LeastConfidence(Strategy):
    """The ``b`` points whose top probability is smallest (largest ``1 - top1``).

    Needs ``probs`` or ``logits``.
    """

    name: ClassVar[str] = "least_confidence"

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> NDArray[np.int64]:
        return best_candidates(pool.score("least_confidence"), b, rng, pool.excluded, largest=True)

    def _utilities(self, pool: PoolState) -> NDArray[np.float64]:
        """``1 - top1``."""
        return pool.score("least_confidence").astype(np.float64)


@register("uniform")
@dataclass(frozen=True)
class Uniform(Strategy):
    """``b`` distinct unlabeled points uniformly at random.

    Needs only the pool size. Draws ranks among the unlabeled points and maps them to
    indices in O(b log L), so no index array of the pool is built.
    """

    name: ClassVar[str] = "uniform"

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> NDArray[np.int64]:
        ranks = rng.choice(pool.n_candidates, size=b, replace=False)
        return ranks_to_indices(ranks, pool.excluded)

    def _utilities(self, pool: PoolState) -> NDArray[np.float64]:
        """Zero: with ``b = 0`` no point is included."""
        return np.zeros(pool.n)

    def _explain(self, pool: PoolState, b: int, rng: np.random.Generator) -> Explained:
        """Draw order; every candidate's utility is its inclusion probability ``b / n_c``."""
        order = self._select(pool, b, rng)
        utilities = np.full(pool.n, b / pool.n_candidates)
        utilities[pool.excluded] = np.nan
        return Explained(order=order, scores=utilities[order], utilities=utilities)

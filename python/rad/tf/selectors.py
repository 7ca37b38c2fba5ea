"""Strategies for the driver: everything in :mod:`rad.selectors` plus UNIXKD.

UNIXKD (Xu et al., 2020, "Computation-efficient knowledge distillation via
uncertainty-aware mixup") scores samples by the student's uncertainty on *mixed-up*
inputs. Adapted to pool-based selection here: every unlabeled point ``x_i`` is mixed
with a random partner ``x_j`` drawn from the pool, ``x~ = lam x_i + (1 - lam) x_j`` with
``lam = max(u, 1 - u)``, ``u ~ Beta(alpha, alpha)`` (so ``x_i`` dominates), and the
``b`` points with the largest student entropy on ``x~`` are selected. The teacher is
queried on the original ``x_i`` (the paper's soft-label budget counts points).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from rad.selectors import PoolState, as_generator, available as _core_available, get_strategy

__all__ = ["UnixKD", "available_strategies", "needs_embeddings", "select"]

_EMBEDDING_STRATEGIES = {"coreset", "k_center", "cluster_margin"}


def available_strategies() -> list[str]:
    """Strategy names the driver accepts (``rad.selectors.available()`` + ``"unixkd"``)."""
    return sorted(set(_core_available()) | {"unixkd"})


def needs_embeddings(name: str) -> bool:
    return name in _EMBEDDING_STRATEGIES


@dataclass(frozen=True)
class UnixKD:
    """Uncertainty on mix-up inputs (see module docstring)."""

    alpha: float = 0.4
    name: str = "unixkd"

    def select(self, pool: PoolState, b: int, rng: Any, *, x: np.ndarray,
               predict_probs: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        rng = as_generator(rng)
        if not 1 <= b <= pool.n_candidates:
            raise ValueError(f"b={b} must be in [1, {pool.n_candidates}] (unlabeled points)")
        cand = np.setdiff1d(np.arange(pool.n), pool.excluded)
        partner = rng.integers(0, pool.n, size=cand.size)
        u = rng.beta(self.alpha, self.alpha, size=cand.size)
        lam = np.maximum(u, 1.0 - u).astype(np.float32)
        shape = (-1,) + (1,) * (x.ndim - 1)
        mixed = lam.reshape(shape) * x[cand] + (1.0 - lam.reshape(shape)) * x[partner]
        p = np.clip(predict_probs(mixed), 1e-12, 1.0)
        ent = -(p * np.log(p)).sum(axis=1)
        # largest entropy first, ties broken at random
        order = np.lexsort((rng.random(cand.size), -ent))
        return np.sort(cand[order[:b]]).astype(np.int64)


def select(name: str, pool: PoolState, b: int, rng: Any, *, x: np.ndarray,
           predict_probs: Callable[[np.ndarray], np.ndarray], **params: Any) -> np.ndarray:
    """Select ``b`` pool indices with strategy ``name``."""
    if name == "unixkd":
        return UnixKD(**params).select(pool, b, rng, x=x, predict_probs=predict_probs)
    if name not in _core_available():
        raise ValueError(f"unknown strategy {name!r}; available: {available_strategies()}")
    return get_strategy(name, **params).select(pool, b, rng=rng)

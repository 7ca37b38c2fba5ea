"""Strategies for the driver: everything in :mod:`rad.selectors`, UNIXKD, and the oracle.

UNIXKD, adapted to pool selection
---------------------------------
UNIX (Xu et al., 2020, "Computation-Efficient Knowledge Distillation via
Uncertainty-Aware Mixup", arXiv:2012.09413; reference code ``xuguodong03/UNIXKD``,
``student_v0.py``) works on a training batch of ``B`` points: it ranks them by the
student's uncertainty (entropy by default), keeps the ``b_u`` most uncertain unchanged,
mixes the next ``k - b_u`` with random partners from the batch,
``x~ = (1 - lam) x_rank + lam x_partner`` with ``lam ~ Beta(1, 1)``, queries the teacher
on those ``k < B`` inputs only and trains the student on exactly what the teacher saw.
Its defaults are ``B, k, b_u = 64, 48, 32``, i.e. two thirds of the teacher's budget on
clean uncertain points and one third on mixed ones.

Here the "batch" is the unlabeled pool and the teacher's budget is ``b`` queries a round:

1. rank the unlabeled points by the student's entropy (ties at random);
2. keep the ``b_keep = round(keep * b)`` most uncertain as they are (``keep = 2/3``);
3. take the next ``b - b_keep`` by rank and mix each with a partner drawn uniformly from
   the whole pool, with its own ``lam ~ Beta(alpha, alpha)`` (``alpha = 1``);
4. the teacher is queried on these ``b`` inputs (``b_keep`` clean, the rest mixed) and
   the student is trained on them with the teacher's soft labels.

Each of the ``b`` ranked points counts as used (never ranked again); partners are not
(a partner contributes only a fraction of a mixed input and may be drawn again).

The oracle (a control, not a strategy one could run)
----------------------------------------------------
:class:`Oracle` looks at the ground truth: among the unlabeled points the teacher labels
correctly, it takes the ``b`` with the lowest student margin (the paper's Fig. 1, right:
the highest-gain points that carry no teacher mistake). It bounds what any selector using
the margin gain could reach if it knew where the teacher errs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rad.selectors import PoolState, as_generator, get_strategy
from rad.selectors import available as _core_available

__all__ = ["CONTROLS", "Oracle", "Selection", "UnixKD", "available_strategies",
           "needs_embeddings", "select"]

_EMBEDDING_STRATEGIES = {"coreset", "k_center", "cluster_margin"}
#: Names of the controls that are not selectors (run by the loop itself).
CONTROLS = ("no_query", "full_pool")


def available_strategies() -> list[str]:
    """Strategy names the driver accepts: ``rad.selectors.available()``, ``"unixkd"``, ``"oracle"``."""
    return sorted(set(_core_available()) | {"unixkd", "oracle"})


def needs_embeddings(name: str) -> bool:
    """Whether strategy ``name`` needs the student's penultimate-layer embeddings."""
    return name in _EMBEDDING_STRATEGIES


@dataclass
class Selection:
    """What one round queries.

    Attributes
    ----------
    indices : ndarray of int64, shape (b,)
        Pool points used this round (sorted); each is never used again.
    mixed : ndarray of int64, shape (b,)
        Partner pool index of a mixed input, or ``-1`` for a clean one.
    lam : ndarray of float32, shape (b,)
        Weight of the partner in a mixed input (0 for clean ones).
    """

    indices: np.ndarray
    mixed: np.ndarray
    lam: np.ndarray

    @classmethod
    def clean(cls, indices: np.ndarray) -> Selection:
        """Unmixed inputs: the pool points ``indices`` themselves."""
        idx = np.sort(np.asarray(indices, dtype=np.int64))
        return cls(idx, np.full(idx.size, -1, np.int64), np.zeros(idx.size, np.float32))

    def inputs(self, x: np.ndarray) -> np.ndarray:
        """The inputs the teacher is queried on (and the student trained on)."""
        out = np.array(x[self.indices], dtype=np.float32, copy=True)
        mix = self.mixed >= 0
        if mix.any():
            lam = self.lam[mix].reshape((-1,) + (1,) * (x.ndim - 1))
            out[mix] = (1.0 - lam) * out[mix] + lam * x[self.mixed[mix]]
        return out

    def dominant(self) -> np.ndarray:
        """Pool index whose label dominates each input (the partner if ``lam > 1/2``)."""
        return np.where((self.mixed >= 0) & (self.lam > 0.5), self.mixed, self.indices)


@dataclass(frozen=True)
class UnixKD:
    """UNIX adapted to pool selection (see the module docstring).

    Parameters
    ----------
    keep : float
        Fraction of the budget spent on clean, most uncertain points (UNIX: 32/48).
    alpha : float
        ``lam ~ Beta(alpha, alpha)`` (UNIX: 1, i.e. uniform).
    """

    keep: float = 2.0 / 3.0
    alpha: float = 1.0
    name: str = "unixkd"

    def select(self, pool: PoolState, b: int, rng: Any) -> Selection:
        """Choose ``b`` inputs (``Selection``) from the unlabeled points of ``pool``."""
        rng = as_generator(rng)
        if not 1 <= b <= pool.n_candidates:
            raise ValueError(f"b={b} must be in [1, {pool.n_candidates}] (unlabeled points)")
        if not 0.0 <= self.keep <= 1.0:
            raise ValueError(f"keep must be in [0, 1], got {self.keep}")
        ent = pool.score("entropy")
        cand = np.setdiff1d(np.arange(pool.n), pool.excluded)
        order = cand[np.lexsort((rng.random(cand.size), -ent[cand]))][:b]
        b_keep = int(round(self.keep * b))
        rest = order[b_keep:]
        partner = rng.integers(0, pool.n, size=rest.size)
        lam = rng.beta(self.alpha, self.alpha, size=rest.size).astype(np.float32)
        mixed = np.concatenate([np.full(b_keep, -1, np.int64), partner.astype(np.int64)])
        lams = np.concatenate([np.zeros(b_keep, np.float32), lam])
        srt = np.argsort(order, kind="stable")
        return Selection(order[srt].astype(np.int64), mixed[srt], lams[srt])


@dataclass(frozen=True)
class Oracle:
    """Lowest student margin among the points the teacher labels correctly (a control)."""

    name: str = "oracle"

    def select(self, pool: PoolState, b: int, rng: Any, *,
               teacher_correct: np.ndarray) -> np.ndarray:
        """The ``b`` lowest-margin unlabeled points among those with ``teacher_correct``.

        When fewer than ``b`` such points are left, all of them are taken first and the
        rest by margin among the others.
        """
        rng = as_generator(rng)
        ok = np.asarray(teacher_correct, dtype=bool).copy()
        ok[pool.excluded] = False
        cand = np.flatnonzero(ok)
        if cand.size < b:  # not enough correct points left: fill with the others
            others = np.setdiff1d(np.setdiff1d(np.arange(pool.n), pool.excluded), cand)
            cand = np.concatenate([cand, others])
            margin = pool.score("raw_margin")
            key = np.where(np.isin(cand, np.flatnonzero(ok)), 0, 1)
            order = np.lexsort((rng.random(cand.size), margin[cand], key))
        else:
            margin = pool.score("raw_margin")[cand]
            order = np.lexsort((rng.random(cand.size), margin))
        return np.sort(cand[order[:b]]).astype(np.int64)


def select(name: str, pool: PoolState, b: int, rng: Any, *,
           teacher_correct: np.ndarray | None = None, **params: Any) -> Selection:
    """Select ``b`` pool inputs with strategy ``name``.

    Parameters
    ----------
    name : str
        One of :func:`available_strategies`.
    pool : PoolState
        Student outputs on the pool; ``labeled`` holds every point already used.
    b : int
    rng : seed or Generator
    teacher_correct : ndarray of bool, optional
        Ground-truth diagnostic for the oracle only.
    **params
        Strategy parameters (e.g. ``keep`` for ``"unixkd"``).
    """
    if name == "unixkd":
        return UnixKD(**params).select(pool, b, rng)
    if name == "oracle":
        if teacher_correct is None:
            raise ValueError("the oracle needs teacher_correct (ground truth)")
        return Selection.clean(Oracle().select(pool, b, rng, teacher_correct=teacher_correct))
    if name not in _core_available():
        raise ValueError(f"unknown strategy {name!r}; available: {available_strategies()}")
    return Selection.clean(get_strategy(name, **params).select(pool, b, rng=rng))

"""RAD as a baal heuristic: :class:`RADHeuristic`.

>>> from baal.active import ActiveLearningLoop                    # doctest: +SKIP
>>> heuristic = RADHeuristic(query_size=100, validation=(pred_val, y_val), random_state=0)
>>> loop = ActiveLearningLoop(dataset, get_probabilities, heuristic=heuristic,
...                           query_size=100)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad.integrations._common import (
    as_probabilities,
    check_batch,
    check_m_source,
    rad_selection,
    require,
    resolve_m,
)
from rad.selectors import RNGLike, Selection, as_generator

require("baal", "baal", "rad.integrations.RADHeuristic")

from baal.active.heuristics import AbstractHeuristic  # noqa: E402

__all__ = ["RADHeuristic"]


class RADHeuristic(AbstractHeuristic):  # type: ignore[misc]
    """Robust Active Distillation as a baal heuristic.

    ``get_ranks(probabilities)`` draws ``query_size`` points with ``rad.select`` on the
    gains of ``probabilities`` and ranks them first (largest inclusion probability
    ``q`` first), then every other point by decreasing ``q`` (ties by index); the
    "uncertainties" it returns are ``q`` (``sum q = query_size``). baal's
    ``ActiveLearningLoop`` labels ``ranks[:query_size]``: give it the same
    ``query_size``.

    Unlike baal's heuristics, inputs that are not probabilities are refused (no silent
    softmax): entries must be ``>= 0`` and rows sum to 1 (within ``rad.gains``'
    tolerance). ``(n, k, T)`` MC-dropout samples are averaged over ``T`` first (the
    predictive mean, as baal's single-pass heuristics do).

    Parameters
    ----------
    query_size : int
        Points RAD draws per step.
    m : float, optional
        The teacher's mistakes in each ranked pool; prefer ``validation`` when the pool
        changes.
    validation : (teacher_pred_val, y_val), optional
        Labeled validation split for :func:`rad.estimate_m` (conservative value, for
        the number of ranked points). Give ``m`` or ``validation``.
    gain : {"margin", "entropy", "least_confidence", "exp_margin"}, default "margin"
    w : float, optional
        RAD's loss weight (default ``1 - m / n``).
    delta : float, default 0.05
        Failure probability of the estimate of ``m``.
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None
        Seeds this heuristic's generator, advanced by each ranking.

    Attributes
    ----------
    m_ : float
        The ``m`` of the last ranking.
    mistake_estimate_ : rad.estimate.MistakeEstimate or None
    selection_ : rad.selectors.Selection
        The last ranking's RAD selection.
    """

    def __init__(
        self,
        query_size: int,
        m: float | None = None,
        *,
        validation: tuple[ArrayLike, ArrayLike] | None = None,
        gain: str = "margin",
        w: float | None = None,
        delta: float = 0.05,
        random_state: RNGLike = None,
    ) -> None:
        super().__init__(reverse=True)
        check_m_source(m, validation)
        self.query_size = check_batch(query_size, "query_size")
        self.m = m
        self.validation = validation
        self.gain = gain
        self.w = w
        self.delta = delta
        self.rng = as_generator(random_state)
        self.m_: float | None = None
        self.mistake_estimate_: Any = None
        self.selection_: Selection | None = None

    def get_ranks(
        self, predictions: Any, target_predictions: Any = None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Rank the pool: RAD's batch first, then by decreasing ``q``.

        Parameters
        ----------
        predictions : array, tensor or iterable of batches, shape (n, k) or (n, k, T)
            Class probabilities of the pool (``T`` MC samples last).
        target_predictions : ignored
            For baal's signature.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
            The ranking (a permutation of ``range(n)``) and ``q`` of every point.
        """
        probabilities = as_probabilities(predictions, "predictions")
        n = probabilities.shape[0]
        self.m_, self.mistake_estimate_ = resolve_m(self.m, self.validation, n,
                                                    delta=self.delta)
        self.selection_ = rad_selection(
            probabilities, min(self.query_size, n), self.m_, self.rng, gain=self.gain,
            w=self.w,
        )
        q = self.selection_.utilities
        rest = np.ones(n, dtype=bool)
        rest[self.selection_.order] = False
        others = np.flatnonzero(rest)
        others = others[np.argsort(-q[others], kind="stable")]  # ties: by index
        return np.concatenate([self.selection_.order, others]), q

    def get_uncertainties(self, predictions: Any, target_predictions: Any = None) -> NDArray[np.float64]:
        """``q`` of every point (draws a batch, as :meth:`get_ranks` does)."""
        return self.get_ranks(predictions, target_predictions)[1]

    def compute_score(self, predictions: Any, target_predictions: Any = None) -> NDArray[np.float64]:
        """``q`` of every point (baal's hook; see :meth:`get_ranks`)."""
        return self.get_uncertainties(predictions, target_predictions)

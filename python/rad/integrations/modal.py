"""RAD as a modAL query strategy: :class:`RADQuery`.

>>> from modAL.models import ActiveLearner                        # doctest: +SKIP
>>> learner = ActiveLearner(estimator=LogisticRegression(),
...                         query_strategy=RADQuery(validation=(pred_val, y_val),
...                                                 random_state=0),
...                         X_training=X0, y_training=y0)
>>> idx, rows = learner.query(X_pool, n_instances=100)
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

__all__ = ["RADQuery"]


class RADQuery:
    """Robust Active Distillation as a modAL query strategy.

    ``RADQuery(...)(classifier, X_pool, n_instances)`` computes the student's
    probabilities ``classifier.predict_proba(X_pool)``, their gains, and draws
    ``n_instances`` points with ``rad.select(gains, m, n_instances, w=w, rng=rng)``,
    ``rng`` being this object's generator (seeded by ``random_state``, advanced by
    each query, so a loop is reproducible for a seed). modAL's
    ``ActiveLearner.query`` passes itself as ``classifier``.

    Parameters
    ----------
    m : float, optional
        The teacher's mistakes in each queried pool. In a loop whose pool shrinks,
        prefer ``validation``.
    validation : (teacher_pred_val, y_val), optional
        Labeled validation split for :func:`rad.estimate_m` (conservative value, for
        ``len(X_pool)`` points). Give ``m`` or ``validation``.
    gain : {"margin", "entropy", "least_confidence", "exp_margin"}, default "margin"
    w : float, optional
        RAD's loss weight (default ``1 - m / n``).
    delta : float, default 0.05
        Failure probability of the estimate of ``m``.
    random_state : int, numpy.random.Generator, numpy.random.SeedSequence or None

    Attributes
    ----------
    m_ : float
        The ``m`` of the last query.
    mistake_estimate_ : rad.estimate.MistakeEstimate or None
    selection_ : rad.selectors.Selection
        The last query's selection (``utilities`` are ``q`` over ``X_pool``).
    """

    def __init__(
        self,
        m: float | None = None,
        *,
        validation: tuple[ArrayLike, ArrayLike] | None = None,
        gain: str = "margin",
        w: float | None = None,
        delta: float = 0.05,
        random_state: RNGLike = None,
    ) -> None:
        require("modAL", "modAL-python", "rad.integrations.RADQuery")
        check_m_source(m, validation)
        self.m = m
        self.validation = validation
        self.gain = gain
        self.w = w
        self.delta = delta
        self.rng = as_generator(random_state)
        self.m_: float | None = None
        self.mistake_estimate_: Any = None
        self.selection_: Selection | None = None

    def __call__(
        self, classifier: Any, X_pool: Any, n_instances: int = 1, **predict_proba_kwargs: Any
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Choose ``n_instances`` rows of ``X_pool``.

        Parameters
        ----------
        classifier
            Anything with ``predict_proba`` (modAL passes the ``ActiveLearner``).
        X_pool : array-like
            The pool.
        n_instances : int, default 1
            How many to choose.
        **predict_proba_kwargs
            Passed to ``classifier.predict_proba``.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
            The chosen row indices (largest inclusion probability first) and their
            inclusion probabilities ``q`` -- modAL's ``(query_idx, metrics)`` pair.
        """
        n_instances = check_batch(n_instances, "n_instances")
        probabilities = as_probabilities(
            classifier.predict_proba(X_pool, **predict_proba_kwargs), "predict_proba(X_pool)"
        )
        self.m_, self.mistake_estimate_ = resolve_m(
            self.m, self.validation, probabilities.shape[0], delta=self.delta
        )
        self.selection_ = rad_selection(
            probabilities, n_instances, self.m_, self.rng, gain=self.gain, w=self.w
        )
        return self.selection_.order, self.selection_.scores

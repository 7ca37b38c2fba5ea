"""RAD as a scikit-activeml pool query strategy: :class:`RADSampling`.

>>> from skactiveml.classifier import SklearnClassifier          # doctest: +SKIP
>>> qs = RADSampling(validation=(teacher_pred_val, y_val), random_state=0)
>>> idx = qs.query(X, y, clf, batch_size=100)                    # y: NaN = unlabeled
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rad.integrations._common import rad_selection, require, resolve_m

require("skactiveml", "scikit-activeml", "rad.integrations.RADSampling")

from skactiveml.base import (  # noqa: E402
    SingleAnnotatorPoolQueryStrategy,
    SkactivemlClassifier,
)
from skactiveml.utils import (  # noqa: E402
    MISSING_LABEL,
    check_equal_missing_label,
    check_type,
)
from sklearn.base import clone  # noqa: E402  (scikit-learn comes with scikit-activeml)

__all__ = ["RADSampling"]


class RADSampling(SingleAnnotatorPoolQueryStrategy):  # type: ignore[misc]
    """Robust Active Distillation as a scikit-activeml query strategy.

    The classifier ``clf`` is the student: its ``predict_proba`` on the candidates gives
    the gains (``gain``, default the paper's ``1 - margin``), and RAD draws
    ``batch_size`` of them by DepRound of the minimax inclusion probabilities ``q`` --
    exactly ``rad.select(gains, m, batch_size, w=w, rng=seed)``. The annotator plays
    the teacher, whose ``m`` mistakes among the candidates are given (``m``) or
    estimated for each query from a validation split (``validation``).

    Parameters
    ----------
    m : float, optional
        The teacher's mistakes among the candidates of each query (``0 <= m <=
        n_candidates``). In a loop whose pool shrinks, prefer ``validation``.
    validation : (teacher_pred_val, y_val), optional
        The teacher's predictions (labels or class scores) on a labeled validation
        split and its true labels; ``m`` is :func:`rad.estimate_m`'s conservative value
        for the number of candidates. Give ``m`` or ``validation``.
    gain : {"margin", "entropy", "least_confidence", "exp_margin"}, default "margin"
        The gain computed from the student's probabilities.
    w : float, optional
        RAD's loss weight (default ``1 - m / n_candidates``).
    delta : float, default 0.05
        Failure probability of the estimate of ``m``.
    missing_label : scalar, str, np.nan or None, default np.nan
        The value marking unlabeled samples in ``y``.
    random_state : int, numpy.random.RandomState or None
        As in scikit-activeml: each query seeds a ``RandomState`` with
        ``check_random_state(random_state, n_unlabeled + 1)`` and draws
        ``randint(2**31 - 1)`` from it as the seed of ``rad.select``.

    Attributes
    ----------
    m_ : float
        The ``m`` of the last query.
    mistake_estimate_ : rad.estimate.MistakeEstimate or None
        The estimate behind ``m_`` when ``validation`` was given.
    selection_ : rad.selectors.Selection
        The last query's selection, indexed by candidate (``info`` holds ``m``, ``w``,
        the game's ``value`` and ``k_star``).
    """

    def __init__(
        self,
        m: float | None = None,
        validation: tuple[ArrayLike, ArrayLike] | None = None,
        gain: str = "margin",
        w: float | None = None,
        delta: float = 0.05,
        missing_label: Any = MISSING_LABEL,
        random_state: Any = None,
    ) -> None:
        super().__init__(missing_label=missing_label, random_state=random_state)
        self.m = m
        self.validation = validation
        self.gain = gain
        self.w = w
        self.delta = delta

    def query(
        self,
        X: ArrayLike,
        y: ArrayLike,
        clf: SkactivemlClassifier,
        fit_clf: bool = True,
        sample_weight: ArrayLike | None = None,
        candidates: ArrayLike | None = None,
        batch_size: int = 1,
        return_utilities: bool = False,
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Choose ``batch_size`` candidates for the teacher (annotator) to label.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            All samples, labeled and unlabeled.
        y : array-like of shape (n_samples,)
            Labels, ``missing_label`` for unlabeled samples.
        clf : skactiveml.base.SkactivemlClassifier
            The student, with ``fit`` and ``predict_proba``.
        fit_clf : bool, default True
            Fit a clone of ``clf`` on ``(X, y, sample_weight)`` first.
        sample_weight : array-like of shape (n_samples,), optional
            Passed to ``fit``.
        candidates : None, array-like of int (n_candidates,) or of samples \
                (n_candidates, n_features)
            ``None``: the unlabeled samples; indices into ``X``; or the candidate
            samples themselves.
        batch_size : int, default 1
            Samples to choose.
        return_utilities : bool, default False
            Also return the utilities.

        Returns
        -------
        query_indices : numpy.ndarray of shape (batch_size,)
            The chosen samples (indices into ``X``, or into ``candidates`` when it
            holds samples), largest inclusion probability first.
        utilities : numpy.ndarray of shape (batch_size, n_samples) or \
                (batch_size, n_candidates)
            Row ``t``: RAD's inclusion probabilities ``q`` (``sum q = batch_size``), NaN
            for non-candidates and for ``query_indices[:t]``, as scikit-activeml's
            batch strategies report them. RAD picks the batch jointly, so every row
            holds the same ``q``.

        Raises
        ------
        ValueError
            If the probabilities are invalid (negative, rows not summing to 1), ``m`` is
            out of range, or neither/both of ``m`` and ``validation`` were given.
        """
        X, y, candidates, batch_size, return_utilities = self._validate_data(
            X, y, candidates, batch_size, return_utilities, reset=True
        )
        X_cand, mapping = self._transform_candidates(candidates, X, y)
        check_type(clf, "clf", SkactivemlClassifier)
        check_equal_missing_label(clf.missing_label, self.missing_label_)
        check_type(fit_clf, "fit_clf", bool)
        if fit_clf:
            clf = clone(clf).fit(X, y) if sample_weight is None else clone(clf).fit(
                X, y, sample_weight
            )
        probabilities = np.asarray(clf.predict_proba(X_cand))
        self.m_, self.mistake_estimate_ = resolve_m(
            self.m, self.validation, len(X_cand), delta=self.delta
        )
        seed = int(self.random_state_.randint(2**31 - 1))
        self.selection_ = rad_selection(
            probabilities, batch_size, self.m_, seed, gain=self.gain, w=self.w
        )
        order = self.selection_.order
        query_indices = order if mapping is None else np.asarray(mapping)[order]
        if not return_utilities:
            return query_indices
        n_columns = len(X_cand) if mapping is None else np.shape(X)[0]
        q = np.full(n_columns, np.nan)
        q[slice(None) if mapping is None else mapping] = self.selection_.utilities
        utilities = np.tile(q, (batch_size, 1))
        for t in range(1, batch_size):
            utilities[t:, query_indices[t - 1]] = np.nan
        return query_indices, utilities

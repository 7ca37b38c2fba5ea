"""Tests of ``rad.estimate_m``: the paper's estimate of the teacher's mistakes (Lemma 2's
Bernstein interval, Lemma 1's conservative value), checked by simulation and closed forms."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rad
from rad.estimate import MistakeEstimate, estimate_m


def _validation(errors: int, n_val: int, rng: np.random.Generator, classes: int = 10):
    """Labels and predictions with exactly ``errors`` mistakes, in random positions."""
    labels = rng.integers(0, classes, n_val)
    pred = labels.copy()
    wrong = rng.choice(n_val, errors, replace=False)
    pred[wrong] = (labels[wrong] + rng.integers(1, classes, errors)) % classes
    return pred, labels


def _paper_width(p: float, k: int, n: int, delta: float) -> float:
    """Lemma 2's two-sided width for m with the true rate p plugged in."""
    log_term = math.log(4 / delta)
    return 2 * n * (log_term * (1 / n + 1 / k) + math.sqrt(2 * p * (1 - p) * log_term) * (1 / math.sqrt(n) + 1 / math.sqrt(k)))


@pytest.mark.parametrize(
    "p,n_val,pool,delta",
    [(0.05, 400, 20_000, 0.05), (0.3, 1000, 200_000, 0.05), (0.5, 150, 5_000, 0.2), (0.02, 2000, 10**6, 0.5)],
)
def test_interval_covers_the_true_m_at_the_promised_rate(p, n_val, pool, delta):
    """Simulate a teacher with error rate p: the pool's mistakes m ~ Bin(pool, p), the
    validation mistakes ~ Bin(n_val, p). The interval must cover m in at least 1 - delta
    of the runs (minus three binomial standard deviations of the simulation itself)."""
    rng = np.random.default_rng(int(p * 1e4) + n_val)
    runs = 600
    covered = 0
    conservative_ok = 0
    for _ in range(runs):
        m_true = int(rng.binomial(pool, p))
        pred, labels = _validation(int(rng.binomial(n_val, p)), n_val, rng)
        est = estimate_m(pred, labels, pool, delta=delta)
        covered += est.lower <= m_true <= est.upper
        conservative_ok += est.conservative <= m_true
    slack = 3 * math.sqrt(delta * (1 - delta) / runs)
    assert covered / runs >= 1 - delta - slack
    assert conservative_ok / runs >= 1 - delta - slack  # Lemma 1's value does not overshoot m


def test_interval_is_as_tight_as_the_lemma_with_the_true_rate():
    """Replacing the unknown p by the worst rate consistent with the sample costs little:
    the width stays within 25% of Lemma 2's width at the true p (so the interval is not a
    trivially wide, always-covering one)."""
    rng = np.random.default_rng(0)
    for p, k, n in [(0.05, 1000, 10**5), (0.2, 1000, 10**6), (0.5, 200, 10**4), (0.01, 5000, 10**7)]:
        pred, labels = _validation(int(round(p * k)), k, rng)
        est = estimate_m(pred, labels, n)
        width = est.upper - est.lower
        assert 0.75 * _paper_width(p, k, n, 0.05) <= width <= 1.25 * _paper_width(p, k, n, 0.05)


@settings(deadline=None, max_examples=80)
@given(
    n_val=st.integers(1, 3000),
    frac=st.floats(0.0, 1.0),
    pool=st.integers(1, 10**9),
    delta=st.floats(1e-6, 0.999),
)
def test_fields_are_consistent(n_val, frac, pool, delta):
    errors = int(frac * n_val)
    pred, labels = _validation(errors, n_val, np.random.default_rng(n_val))
    est = estimate_m(pred, labels, pool, delta=delta)
    assert isinstance(est, MistakeEstimate)
    assert est.rate == errors / n_val and est.n_val == n_val and est.pool_size == pool
    assert math.isclose(est.m_hat, est.rate * pool, rel_tol=1e-15)
    assert 0 <= est.lower <= est.upper <= pool
    assert est.lower == math.floor(est.lower) and est.upper == math.floor(est.upper)
    assert est.lower <= est.m_hat + 1 and est.m_hat <= est.upper + 1
    # eps certifies m_hat in (1 +- eps) m for every m in the interval; conservative = m_hat/(1+eps).
    for m in (est.lower, est.upper):
        if m > 0 and math.isfinite(est.eps):
            assert abs(est.m_hat - m) <= est.eps * m * (1 + 1e-12) + 1e-9
    if math.isfinite(est.eps):
        assert math.isclose(est.conservative, min(est.m_hat / (1 + est.eps), est.lower), rel_tol=1e-12, abs_tol=1e-12)
    else:
        assert est.conservative == 0.0
    assert est.conservative <= est.lower
    assert float(est) == est.conservative


def test_more_validation_data_narrows_the_interval():
    rng = np.random.default_rng(1)
    widths = []
    for k in (100, 1000, 10_000):
        pred, labels = _validation(k // 5, k, rng)
        est = estimate_m(pred, labels, 10**6)
        widths.append(est.upper - est.lower)
    assert widths[0] > widths[1] > widths[2]


def test_scores_are_reduced_by_argmax_and_a_perfect_teacher_gives_zero():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 4, 500)
    scores = rng.random((500, 4))
    pred = np.argmax(scores, axis=1)
    assert estimate_m(scores, labels, 10_000) == estimate_m(pred, labels, 10_000)
    perfect = estimate_m(labels, labels, 10_000)
    assert perfect.m_hat == 0 and perfect.lower == 0 and perfect.conservative == 0
    assert 0 < perfect.upper < 10_000 * 0.05  # not zero: the pool may still hold mistakes


def test_exported_from_rad_and_feeds_select():
    assert rad.estimate_m is estimate_m and "estimate_m" in rad.__all__
    rng = np.random.default_rng(3)
    pred, labels = _validation(150, 1000, rng)
    gains = rng.random(20_000)
    est = rad.estimate_m(pred, labels, gains.shape[0])
    idx = rad.select(gains, est.conservative, 50, rng=0)
    assert idx.shape == (50,)


@pytest.mark.parametrize("delta", [1e-300, 1e-308, 5e-324])
def test_a_tiny_delta_gives_a_wide_interval_not_an_overflow(delta):
    """``4 / delta`` overflows below 4e-308; every ``delta`` in (0, 1) is accepted."""
    pred, labels = _validation(150, 1000, np.random.default_rng(4))
    est = estimate_m(pred, labels, 1000, delta=delta)
    wider = estimate_m(pred, labels, 1000, delta=1e-30)
    assert 0.0 <= est.lower <= wider.lower and wider.upper <= est.upper <= 1000.0


def test_input_errors_are_named():
    y = np.array([0, 1, 2])
    with pytest.raises(ValueError, match="same length"):
        estimate_m(y, y[:2], 100)
    with pytest.raises(ValueError, match="empty"):
        estimate_m(y[:0], y[:0], 100)
    with pytest.raises(ValueError, match="pool_size"):
        estimate_m(y, y, 0)
    with pytest.raises(TypeError, match="pool_size"):
        estimate_m(y, y, 10.5)
    with pytest.raises(ValueError, match="delta"):
        estimate_m(y, y, 100, delta=1.0)
    with pytest.raises(ValueError, match="delta"):
        estimate_m(y, y, 100, delta=0.0)
    with pytest.raises(ValueError, match="shape"):
        estimate_m(np.zeros((3, 2, 2)), y, 100)
    with pytest.raises(TypeError, match="labels"):
        estimate_m(y, np.array([1 + 1j, 2, 3]), 100)


# ----------------------------------------------------------------------------- input validation


def _binary_teacher():
    """True labels and a perfect binary teacher's sigmoid outputs (the audit's example)."""
    y = np.random.default_rng(0).integers(0, 2, 200)
    return y, np.where(y == 1, 0.9, 0.1)


def test_one_dimensional_probabilities_are_rejected_with_a_hint():
    y, p = _binary_teacher()
    with pytest.raises(ValueError, match=r"1-D teacher_pred .*labels.*\[0\] = 0\.9.*\(n_val, n_classes\)"):
        estimate_m(p, y, 10_000)
    with pytest.raises(ValueError, match=r"teacher_pred\[1\] = nan"):
        estimate_m(np.array([1.0, np.nan]), np.array([1, 0]), 100)
    with pytest.raises(ValueError, match=r"labels\[2\] = 0\.5"):  # arguments swapped
        estimate_m(np.array([0, 1, 1]), np.array([0.0, 1.0, 0.5]), 100)


def test_score_matrices_need_two_classes():
    y, p = _binary_teacher()
    with pytest.raises(ValueError, match=r"teacher_pred .*at least 2 classes \(k >= 2\).*\(200, 1\)"):
        estimate_m(p[:, None], y, 10_000)
    with pytest.raises(ValueError, match=r"k >= 2"):
        estimate_m(np.zeros((3, 0)), y[:3], 100)


@pytest.mark.parametrize(
    "bad,where,kind", [(np.nan, "[2, 1]", "NaN"), (np.inf, "[2, 1]", "infinite"), (-np.inf, "row 2", "-inf")]
)
def test_non_finite_scores_name_the_first_offending_entry(bad, where, kind):
    y = np.array([0, 1, 1, 0])
    scores = np.eye(2)[y]
    scores[2, :] = [-np.inf, bad] if bad != -np.inf else bad
    scores[3, 0] = bad
    with pytest.raises(ValueError, match=rf"teacher_pred.*{re.escape(where)}.*{kind}"):
        estimate_m(scores, y, 100)


def test_all_nan_scores_are_rejected():
    with pytest.raises(ValueError, match=r"teacher_pred\[0, 0\] = nan is NaN"):
        estimate_m(np.full((200, 2), np.nan), _binary_teacher()[0], 10_000)


def test_masked_minus_inf_logits_still_work():
    """As in ``rad.gains``, ``-inf`` marks a masked class; the row's finite maximum decides."""
    y = np.array([0, 1, 2])
    logits = np.array([[3.0, -np.inf, 1.0], [-np.inf, 0.0, -np.inf], [0.0, 1.0, 2.0]])
    assert estimate_m(logits, y, 100).m_hat == 0


@pytest.mark.parametrize(
    "pred,labels",
    [
        (np.eye(2)[[0, 1, 1]], np.array(["cat", "dog", "dog"])),  # argmax indices vs names
        (np.array([0, 1, 1]), np.array(["cat", "dog", "dog"])),
        (np.array([0, 1, 1]), np.array(["cat", "dog", "dog"], dtype=object)),  # e.g. pandas
        (np.array(["cat", "dog"]), np.array([b"cat", b"dog"])),
    ],
)
def test_labels_of_another_kind_than_the_predictions_are_rejected(pred, labels):
    with pytest.raises(TypeError, match=r"labels .*teacher_pred"):
        estimate_m(pred, labels, 100)


def test_label_forms_that_compare_keep_working():
    names = np.array(["cat", "dog", "dog", "cat"])
    assert estimate_m(names, names, 100).m_hat == 0
    assert estimate_m(names, names.astype(object), 100).m_hat == 0
    assert estimate_m(names.astype("S"), names.astype("S"), 100).m_hat == 0
    y = np.array([0, 1, 1, 0])
    assert estimate_m(y.astype(float), y, 100).m_hat == 0  # integral floats are labels
    assert estimate_m(y.astype(bool), y, 100).m_hat == 0
    assert estimate_m(y.astype(object), y.astype(np.uint8), 100).m_hat == 0
    assert estimate_m(np.eye(2, dtype=bool)[y], y, 100).m_hat == 0  # one-hot
    assert estimate_m(np.eye(2, dtype=int)[y].tolist(), y.tolist(), 100).m_hat == 0

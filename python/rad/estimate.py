"""Estimating the teacher's mistakes ``m`` from a validation set (paper, Lemmas 1–2).

``rad.solve``/``rad.select`` need ``m``, the number of pool points the teacher mislabels.
It is not observable on the (unlabeled) pool, but the teacher's error rate is, on a
labeled validation set drawn from the same distribution. :func:`estimate_m` turns that
into the paper's estimate ``m_hat = err(validation) * |pool|``, a Bernstein confidence
interval for the true ``m`` (Lemma 2), and Lemma 1's conservative value
``m_hat / (1 + eps)`` — the number to feed to ``rad.select``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["MistakeEstimate", "estimate_m"]


@dataclass(frozen=True)
class MistakeEstimate:
    """The teacher's mistakes in the pool, estimated from a validation set.

    Attributes
    ----------
    m_hat : float
        The point estimate ``rate * pool_size`` (paper, "Approximating m").
    lower, upper : float
        A confidence interval for the true ``m``: with probability at least ``1 - delta``
        over the draw of the validation set and of the pool,
        ``lower <= m <= upper`` (Lemma 2's Bernstein bound, see :func:`estimate_m`).
        Both are integers (``m`` counts points) in ``[0, pool_size]``.
    conservative : float
        Lemma 1's value ``m_hat / (1 + eps)``: never above ``lower``, so (with
        probability ``1 - delta``) it does not exceed the true ``m``; Lemma 1 shows that
        solving with it loses at most a factor ``1 - 2 eps m / (2 eps m + 1 + eps)`` of the
        optimum (for ``eps`` below the lemma's ``beta``). What ``rad.select`` users pass as
        ``m``.
    eps : float
        The relative accuracy the interval certifies: the smallest ``eps`` with
        ``m_hat`` in ``[(1 - eps) m, (1 + eps) m]`` for every ``m`` in
        ``[lower, upper]`` (``inf`` when ``lower == 0 < m_hat``).
    rate : float
        The teacher's error rate on the validation set, ``mistakes / n_val``.
    n_val : int
        Validation set size.
    pool_size : int
        Pool size ``|P_B|``.
    delta : float
        Failure probability of the interval.
    """

    m_hat: float
    lower: float
    upper: float
    conservative: float
    eps: float
    rate: float
    n_val: int
    pool_size: int
    delta: float

    def __float__(self) -> float:
        """The conservative value (what to pass as ``m``)."""
        return float(self.conservative)


def _bernstein_radius(p: float, size: float, log_term: float) -> float:
    """Lemma 2's deviation bound for a mean of ``size`` Bernoulli(p) variables."""
    return log_term / size + math.sqrt(2.0 * p * (1.0 - p) * log_term / size)


def _consistent_rates(x: float, k: int, log_term: float) -> tuple[float, float]:
    """The interval of rates ``p`` with ``|x - p| <= radius(p, k)`` (it contains ``x``).

    ``|x - p| - radius(p)`` is convex in ``p`` (``sqrt(p (1 - p))`` is concave), so its
    sublevel set is an interval; each end is found by bisection (to 1e-15).
    """

    def h(p: float) -> float:
        return abs(x - p) - _bernstein_radius(p, k, log_term)

    def boundary(inside: float, outside: float) -> float:
        if h(outside) <= 0.0:
            return outside
        for _ in range(200):
            mid = 0.5 * (inside + outside)
            if mid in (inside, outside):
                break
            if h(mid) <= 0.0:
                inside = mid
            else:
                outside = mid
        return inside

    return boundary(x, 0.0), boundary(x, 1.0)


def _labels(x: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "biufUSO":
        raise TypeError(f"{name} must be an array of class labels, got dtype {arr.dtype}")
    return arr


def _check_integral(arr: np.ndarray, name: str, rule: str, hint: str = "") -> None:
    """Raise ``ValueError`` naming the first entry of a float label array that is not an integer."""
    if arr.dtype.kind != "f":
        return
    bad = np.flatnonzero(~(np.isfinite(arr) & (arr == np.round(arr))))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{rule}; {name}[{i}] = {arr[i].item()!r} is not an integer{hint}"
        )


def _predictions(teacher_pred: ArrayLike) -> np.ndarray:
    """The teacher's predicted labels: 1-D labels as given, or the row ``argmax`` of scores.

    Scores must be real, with ``k >= 2`` columns, no ``NaN`` or ``+inf``, and a finite
    maximum in every row (``-inf`` marks a masked class, as in :mod:`rad.gains`).
    """
    arr = _labels(teacher_pred, "teacher_pred")
    if arr.ndim == 1:
        _check_integral(
            arr,
            "teacher_pred",
            "1-D teacher_pred must hold predicted labels",
            ": pass class probabilities or scores as an (n_val, n_classes) matrix (a single "
            "sigmoid output p as np.column_stack([1 - p, p]))",
        )
        return arr
    if arr.ndim != 2:
        return arr  # estimate_m reports the shape
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"teacher_pred scores (n_val, n_classes) must be a real numeric array, got dtype "
            f"{arr.dtype}"
        )
    if arr.shape[1] < 2:
        raise ValueError(
            f"teacher_pred scores need at least 2 classes (k >= 2), got shape {arr.shape}"
        )
    if arr.dtype.kind == "f":
        bad = np.flatnonzero(np.isnan(arr) | np.isposinf(arr))
        if bad.size:
            i, j = np.unravel_index(int(bad[0]), arr.shape)
            v = arr[i, j].item()
            raise ValueError(
                f"teacher_pred scores must not be NaN or +inf; teacher_pred[{i}, {j}] = {v!r} "
                f"is {'NaN' if math.isnan(v) else 'infinite'}"
            )
        masked = np.flatnonzero(np.all(np.isneginf(arr), axis=1))
        if masked.size:
            raise ValueError(
                f"teacher_pred scores need a finite maximum in every row; every score of row "
                f"{int(masked[0])} is -inf"
            )
    return np.asarray(np.argmax(arr, axis=1))


def _label_kind(arr: np.ndarray) -> str:
    """What labels are, to compare kinds: ``"numbers"``, ``"strings"`` or ``"bytes"``.

    Object arrays (e.g. a pandas column) are judged by their elements; ``""`` when these are
    mixed or of another type (then no kind is enforced).
    """
    if arr.dtype.kind != "O":
        return {"U": "strings", "S": "bytes"}.get(arr.dtype.kind, "numbers")
    kinds = {
        "numbers" if isinstance(v, numbers.Real) else "strings" if isinstance(v, str)
        else "bytes" if isinstance(v, bytes) else ""
        for v in arr.ravel().tolist()
    }
    return kinds.pop() if len(kinds) == 1 else ""


def estimate_m(
    teacher_pred: ArrayLike,
    labels: ArrayLike,
    pool_size: int,
    *,
    delta: float = 0.05,
) -> MistakeEstimate:
    """Estimate the teacher's mistakes in the pool from a labeled validation set.

    Parameters
    ----------
    teacher_pred : array_like, shape (n_val,) or (n_val, n_classes)
        The teacher's predicted labels on the validation points (integers, or strings
        like ``labels``), or its scores / probabilities / logits per class, ``n_classes >=
        2`` (the prediction is then the ``argmax`` of each row; ``-inf`` marks a masked
        class). A binary teacher's single sigmoid output ``p`` is
        ``np.column_stack([1 - p, p])``.
    labels : array_like, shape (n_val,)
        The true labels of the validation points.
    pool_size : int
        Number of points in the pool the teacher will label (``|P_B|``).
    delta : float, default 0.05
        Failure probability of the interval, ``0 < delta < 1``.

    Returns
    -------
    MistakeEstimate
        ``m_hat``, the interval ``[lower, upper]``, ``conservative`` (pass this to
        :func:`rad.select` as ``m``), ``eps``, ``rate`` and the inputs.

    Raises
    ------
    ValueError
        On empty or mismatched inputs; scores with fewer than 2 columns, ``NaN``, ``+inf``
        or a row of only ``-inf``; 1-D ``teacher_pred`` or ``labels`` of floats that are
        not integers (probabilities must be an ``(n_val, n_classes)`` matrix);
        ``pool_size < 1`` or ``delta`` outside ``(0, 1)``. Messages name the argument and
        the first offending entry.
    TypeError
        On non-label input, non-numeric scores, labels of another kind than the
        predictions (e.g. strings against the class indices from ``argmax``) or a
        non-integer ``pool_size``.

    Notes
    -----
    The paper's Lemma 2: with ``L = log(4/delta)``, the validation error ``X`` (``k`` i.i.d.
    points) and the pool's error ``Y = m / N`` (``N = pool_size``) both deviate from the
    teacher's true error rate ``p`` by at most ``L/size + sqrt(2 p (1-p) L / size)``, each
    with probability ``1 - delta/2`` (Bernstein's inequality). The lemma states the bound
    with the unknown ``p``; to make it computable without losing the guarantee, ``p`` is
    replaced by the worst case over the rates consistent with the validation sample,
    ``P = {p : |X - p| <= L/k + sqrt(2 p (1-p) L / k)}`` — which contains the true ``p``
    whenever the validation half of the lemma holds. Hence, with probability at least
    ``1 - delta``::

        min_{p in P} (p - r_N(p)) <= m / N <= max_{p in P} (p + r_N(p)),

    ``r_N(p) = L/N + sqrt(2 p (1-p) L / N)``. The extremes have closed forms
    (``p + sqrt(c p (1-p))`` is concave with its maximum at
    ``(1 + 1/sqrt(1+c))/2``). The interval is scaled by ``N``, clipped to ``[0, N]`` and
    rounded outwards to integers. Lemma 1 then uses ``m_tilde = m_hat / (1 + eps)``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 10, 1000)
    >>> pred = np.where(rng.random(1000) < 0.2, (labels + 1) % 10, labels)
    >>> est = estimate_m(pred, labels, pool_size=50_000)
    >>> est.lower <= est.m_hat <= est.upper, est.conservative <= est.lower
    (True, True)
    """
    pred = _predictions(teacher_pred)
    lab = _labels(labels, "labels")
    if pred.ndim != 1 or lab.ndim != 1:
        raise ValueError(
            f"teacher_pred must be (n_val,) labels or (n_val, n_classes) scores and labels "
            f"(n_val,); got shapes {np.shape(teacher_pred)} and {lab.shape}"
        )
    if pred.shape[0] != lab.shape[0]:
        raise ValueError(
            f"teacher_pred and labels must have the same length, got {pred.shape[0]} and "
            f"{lab.shape[0]}"
        )
    _check_integral(lab, "labels", "labels must hold class labels")
    pred_kind, lab_kind = _label_kind(pred), _label_kind(lab)
    if pred_kind and lab_kind and pred_kind != lab_kind:
        what = "class indices (the argmax of its scores)" if np.ndim(teacher_pred) == 2 else pred_kind
        raise TypeError(
            f"labels hold {lab_kind} but teacher_pred holds {what}, so no prediction could "
            f"match: encode both the same way (e.g. labels as class indices 0..k-1)"
        )
    k = int(lab.shape[0])
    if k == 0:
        raise ValueError("the validation set is empty: need at least one labeled point")
    if isinstance(pool_size, bool) or not isinstance(pool_size, numbers.Integral):
        raise TypeError(f"pool_size must be an integer, got {type(pool_size).__name__}")
    n_pool = int(pool_size)
    if n_pool < 1:
        raise ValueError(f"pool_size must be >= 1, got {pool_size}")
    if not (isinstance(delta, numbers.Real) and 0.0 < float(delta) < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    delta = float(delta)

    mistakes = int(np.count_nonzero(pred != lab))
    x = mistakes / k
    log_term = math.log(4.0) - math.log(delta)  # (4 / delta overflows for delta below 4e-308)
    p_lo, p_hi = _consistent_rates(x, k, log_term)

    c = 2.0 * log_term / n_pool
    root = 1.0 / math.sqrt(1.0 + c)
    p_max = min(max(0.5 * (1.0 + root), p_lo), p_hi)  # argmax of p + sqrt(c p (1-p))
    p_min = min(max(0.5 * (1.0 - root), p_lo), p_hi)  # argmin of p - sqrt(c p (1-p))
    hi_rate = min(1.0, p_max + _bernstein_radius(p_max, n_pool, log_term))  # rates: within [0, 1]
    lo_rate = max(0.0, p_min - _bernstein_radius(p_min, n_pool, log_term))
    # m counts points: round outwards (a hair of slack against rounding in the rates).
    lower = float(max(0, math.ceil(lo_rate * n_pool - 1e-9)))
    upper = float(min(n_pool, math.floor(hi_rate * n_pool + 1e-9)))

    m_hat = x * n_pool
    if lower > 0:
        eps_lo = (m_hat - lower) / lower
    else:
        eps_lo = 0.0 if m_hat == 0 else math.inf
    eps_hi = (upper - m_hat) / upper if upper > 0 else 0.0
    eps = max(eps_lo, eps_hi, 0.0)
    conservative = 0.0 if math.isinf(eps) else m_hat / (1.0 + eps)
    return MistakeEstimate(
        m_hat=float(m_hat),
        lower=lower,
        upper=upper,
        conservative=float(min(conservative, lower)),
        eps=float(eps),
        rate=float(x),
        n_val=k,
        pool_size=n_pool,
        delta=delta,
    )

"""What the adapters share.

Importing a peer library, ``m``, validated probabilities, and one RAD selection with its
inclusion probabilities.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rad._solve.validation import check_mistakes
from rad.selectors import RAD, PoolState, RNGLike, Selection

__all__ = [
    "EXTRA",
    "MissingExtraError",
    "as_probabilities",
    "check_batch",
    "check_m_source",
    "rad_selection",
    "require",
    "resolve_m",
]

#: What to install for the adapters.
EXTRA = 'pip install "robust-active-distillation[integrations]"'


class MissingExtraError(ImportError):
    """A peer library an adapter needs is not installed."""


def require(module: str, distribution: str, adapter: str) -> types.ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming the extra to install.

    Parameters
    ----------
    module : str
        Import name (``"skactiveml"``).
    distribution : str
        Its name on PyPI (``"scikit-activeml"``).
    adapter : str
        The adapter that needs it, for the message.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(
            f"{adapter} needs {distribution}, which is not installed: {EXTRA} "
            f"(or pip install {distribution})"
        ) from err


def resolve_m(
    m: float | None,
    validation: tuple[ArrayLike, ArrayLike] | None,
    pool_size: int,
    *,
    delta: float = 0.05,
) -> tuple[float, Any]:
    """The teacher's mistakes in a pool of ``pool_size`` points, given or estimated.

    Parameters
    ----------
    m : float or None
        The mistakes in the pool, used as given (a :class:`rad.estimate.MistakeEstimate`
        counts as its ``conservative`` value).
    validation : (teacher_pred_val, y_val) or None
        The teacher's predictions (labels or class scores) on a labeled validation split
        and the true labels: ``m`` is then :func:`rad.estimate_m`'s conservative value for
        ``pool_size`` points.
    pool_size : int
        Points in the pool being selected from.
    delta : float, default 0.05
        Failure probability of the estimate's confidence interval.

    Returns
    -------
    (float, MistakeEstimate or None)
        ``m`` and, when estimated, the full estimate.

    Raises
    ------
    ValueError
        If neither or both of ``m`` and ``validation`` are given, or ``validation`` is
        not a pair.
    """
    import rad

    check_m_source(m, validation)
    if validation is None:
        return float(m), None  # type: ignore[arg-type]
    if not isinstance(validation, (tuple, list)) or len(validation) != 2:
        raise ValueError("validation must be a pair (teacher_pred_val, y_val)")
    estimate = rad.estimate_m(validation[0], validation[1], pool_size=int(pool_size),
                              delta=delta)
    return float(estimate.conservative), estimate


def check_m_source(m: Any, validation: Any) -> None:
    """Raise ``ValueError`` unless exactly one of ``m`` and ``validation`` is given."""
    if (m is None) == (validation is None):
        raise ValueError(
            "give m (the teacher's mistakes in the pool) or validation=(teacher_pred_val, "
            "y_val) to estimate it with rad.estimate_m, exactly one of them"
        )


def as_probabilities(predictions: Any, name: str = "probabilities") -> np.ndarray:
    """Class probabilities as a 2-D float array; ``(n, k, T)`` samples averaged over ``T``.

    Accepts NumPy arrays, anything with ``.detach().cpu().numpy()`` (torch tensors), and
    an iterable of such batches (concatenated along the first axis). Values are not
    validated here: :func:`rad_selection` validates through :mod:`rad.gains`.

    Raises
    ------
    TypeError
        If the values are not floating point.
    ValueError
        If the array is not ``(n, k)`` or ``(n, k, T)``.
    """
    if isinstance(predictions, types.GeneratorType) or (
        isinstance(predictions, (list, tuple)) and predictions
        and not np.isscalar(predictions[0]) and np.ndim(_to_numpy(predictions[0])) >= 2
    ):
        batches = [_to_numpy(batch) for batch in predictions]
        if not batches:
            raise ValueError(f"{name} is empty")
        arr = np.concatenate(batches, axis=0)
    else:
        arr = _to_numpy(predictions)
    if arr.dtype.kind != "f":
        raise TypeError(f"{name} must be floating-point class probabilities, got dtype {arr.dtype}")
    if arr.ndim == 3:  # (n, k, T) Monte-Carlo samples: their mean is the predictive
        arr = arr.mean(axis=-1)
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must have shape (n, k) or (n, k, T) (MC samples last), got {arr.shape}"
        )
    return arr


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # torch.Tensor, without importing torch
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def rad_selection(
    probabilities: np.ndarray,
    b: int,
    m: float,
    rng: RNGLike,
    *,
    gain: str = "margin",
    w: float | None = None,
) -> Selection:
    """RAD on one pool of class probabilities: ``rad.select`` plus ``rad.solve``'s ``q``.

    The chosen points are ``rad.select(rad.gains.compute_gains(probabilities, gain), m,
    b, w=w, rng=rng)``; the :class:`~rad.selectors.Selection` adds their order (largest
    ``q`` first), ``q`` of every point as utilities and ``m``, ``w``, the game's value.

    Raises
    ------
    ValueError
        On invalid probabilities (negative, rows not summing to 1: the message names
        the row), ``m`` outside ``[0, n]`` or ``b`` above ``n``.
    """
    if np.ndim(probabilities) >= 1:  # "m", the adapter's argument (PoolState says PoolState.m)
        check_mistakes(m, int(np.shape(probabilities)[0]))
    pool = PoolState(probs=probabilities, m=m)
    return RAD(gain=gain, w=w).select(pool, b, rng=rng, return_scores=True)


def check_batch(b: Any, name: str) -> int:
    """``b`` as a positive int (a clear ``TypeError``/``ValueError`` otherwise)."""
    if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {b!r}")
    if b < 1:
        raise ValueError(f"{name} must be >= 1, got {b}")
    return int(b)

"""Input checks, run before any kernel (docs/design.md §2, "Bad input").

Every failure names the argument and, for values, the first offending index.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable

import numpy as np

from rad._solve.device import is_device_array

__all__ = [
    "as_float_vector",
    "check_budget",
    "check_losses_or_w",
    "check_method",
    "check_mistakes",
    "check_values",
    "check_w",
]


def as_float_vector(x: object, name: str) -> np.ndarray:
    """Return ``x`` as a 1-D float32/float64 array, without copying when it already is one.

    Contiguous float32/float64 input (including read-only arrays and memory maps) is
    passed through untouched; other real dtypes (integers, bool, float16) are converted
    to float64; non-numeric and complex input is a ``TypeError``.
    """
    if not isinstance(x, np.ndarray) and is_device_array(x):
        raise TypeError(
            f"{name} is a CUDA device array ({type(x).__name__}): pass device gains (and losses) to "
            "rad.select/rad.solve with backend='auto' or 'cuda', or copy it to the host yourself"
        )
    if isinstance(x, np.ma.MaskedArray) and np.ma.is_masked(x):  # its mask would be dropped silently
        raise TypeError(
            f"{name} is a masked array with masked entries: pass the unmasked points only "
            f"({name}.compressed(), keeping their indices) or fill them ({name}.filled(0.0))"
        )
    arr = _host_view(x, name)
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must be a real numeric array, got dtype {arr.dtype} "
            f"({type(x).__name__})"
        )
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return arr


def _host_view(x: object, name: str) -> np.ndarray:
    """``np.asarray(x)``; a host DLPack tensor (PyTorch, JAX on the CPU) is viewed, not copied.

    An object NumPy cannot read (a tensor that requires grad, a bfloat16 tensor) is a
    ``TypeError`` naming ``name``, with the library's own reason.
    """
    if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        try:
            if int(x.__dlpack_device__()[0]) == 1:  # kDLCPU
                return np.from_dlpack(x)
        except (BufferError, TypeError, RuntimeError, ValueError):
            pass  # e.g. a tensor that requires grad: np.asarray says why
    try:
        return np.asarray(x)
    except (TypeError, RuntimeError) as exc:
        raise TypeError(f"{name} cannot be read as a float array ({type(x).__name__}): {exc}") from None
    except ValueError as exc:  # e.g. a ragged list
        raise ValueError(f"{name} cannot be read as a one-dimensional array ({type(x).__name__}): {exc}") from None


def check_values(arr: np.ndarray, name: str, first_invalid: Callable[[np.ndarray], int]) -> None:
    """Raise ``ValueError`` naming the first NaN, infinite or negative entry of ``arr``."""
    bad = first_invalid(arr)
    if bad >= 0:
        raise invalid_value(name, bad, arr[bad].item())


def invalid_value(name: str, index: int, value: float) -> ValueError:
    """The error for ``name[index] = value``, a NaN, infinite or negative entry."""
    kind = "NaN" if math.isnan(value) else ("infinite" if math.isinf(value) else "negative")
    return ValueError(f"{name} must be finite and non-negative; {name}[{index}] = {value!r} is {kind}")


def _as_float(x: numbers.Real) -> float:
    """``float(x)``, or a signed infinity for an int or Fraction beyond float64.

    The range checks then refuse it with their own message, not an ``OverflowError``.
    """
    try:
        return float(x)
    except OverflowError:
        return math.inf if int(math.trunc(x)) > 0 else -math.inf


def check_mistakes(m: object, n: int) -> float:
    """``m`` as a float in ``[0, n]``."""
    if isinstance(m, (bool, np.bool_)) or not isinstance(m, numbers.Real):
        raise TypeError(f"m must be a real number, got {type(m).__name__}")
    mistakes = _as_float(m)
    if not np.isfinite(mistakes) or mistakes < 0 or mistakes > n:
        raise ValueError(f"m (the teacher's mistakes in the pool) must be in [0, n={n}], got {m!r}")
    return mistakes


def check_budget(b: object, n: int) -> int:
    """``b`` as an int in ``[0, n]``; floats are accepted only when integral."""
    if isinstance(b, (bool, np.bool_)):
        raise TypeError("b must be an integer, got bool")
    if isinstance(b, numbers.Integral):
        budget = operator.index(b)
    elif isinstance(b, numbers.Real) and float(b).is_integer():
        budget = int(float(b))
    else:
        raise TypeError(f"b (the budget) must be an integer, got {b!r}")
    if budget < 0 or budget > n:
        raise ValueError(f"b (the budget) must be in [0, n={n}], got {budget}")
    return budget


def check_w(w: object) -> float:
    """``w`` as a finite float >= 0."""
    if isinstance(w, (bool, np.bool_)) or not isinstance(w, numbers.Real):
        raise TypeError(f"w must be a real number, got {type(w).__name__}")
    wf = _as_float(w)
    if not np.isfinite(wf) or wf < 0:
        raise ValueError(f"w (the loss weight) must be finite and >= 0, got {w!r}")
    return wf


def check_method(method: object) -> str:
    """``method`` of :func:`rad.solve`: ``"auto"``, ``"sortfree"`` or ``"sorted"``."""
    if method not in ("auto", "sortfree", "sorted"):
        raise ValueError(f"method must be 'auto', 'sortfree' or 'sorted', got {method!r}")
    return str(method)


def check_losses_or_w(
    losses: object, w: object, gains: np.ndarray, first_invalid: Callable[[np.ndarray], int]
) -> tuple[np.ndarray | None, float]:
    """General ``losses`` (float64, shape of ``gains``, finite, >= 0) or the RAD weight ``w``.

    Returns ``(losses, nan)`` or ``(None, w)``; ``w`` is ``nan`` when it was not given
    (the caller applies the default).
    """
    if losses is None:
        return None, float("nan") if w is None else check_w(w)
    if w is not None:
        raise ValueError("give either w (RAD losses w * gains) or losses, not both")
    lo = as_float_vector(losses, "losses")
    if lo.shape != gains.shape:
        raise ValueError(f"losses must have the same shape as gains: {lo.shape} != {gains.shape}")
    check_values(lo, "losses", first_invalid)
    return np.ascontiguousarray(lo, dtype=np.float64), float("nan")


def integral_sum_tolerance(total: float, dtype: np.dtype) -> float:
    """How far ``sum(q)`` may lie from an integer for DepRound (``rad.depround``).

    ``min(1e-9 * max(1, sum), 1e-6)``: absolute, so that a sum 0.4 off at ``b = 1e6`` is
    refused rather than rounded away. float32 entries carry up to half an ulp each
    (``2^-25`` relative), so their sum is held to ``2^-24 * max(1, sum)`` and no closer.
    """
    tol = min(1e-9 * max(1.0, total), 1e-6)
    if dtype == np.float32:
        tol = max(tol, 2.0**-24 * max(1.0, total))
    return tol

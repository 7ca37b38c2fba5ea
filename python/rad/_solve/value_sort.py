"""An in-place ascending sort of float values: NumPy's, or the compiled radix sort.

The capped path sorts the top of the pool in parts (:func:`rad._solve.capped_rad.sort_interruptibly`).
NumPy's sort is vectorised on some CPUs and not on others: on an AMD Zen 4 VM it took 18
ms for 600,000 float32 values, where ``rad._core.sort_in_place`` (an LSD radix sort,
``radix_sort_ascending`` in ``cpp/include/rad/radix_sort.hpp``) took 3.7; elsewhere
NumPy's was the faster. So each process times both once per dtype, on 2^16 values, and
keeps the faster (NumPy's unless the radix sort wins by a tenth). Both give the same
values in the same order (the order among ``-0.0`` and ``0.0`` aside, which no caller
reads), so the choice changes only the speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

__all__ = ["set_sort_kind", "sort_in_place", "sort_kind"]

_CALIBRATION = 1 << 16
_kinds: dict[np.dtype, str] = {}
_forced: str | None = None
_lock = threading.Lock()


def _radix() -> Callable[[np.ndarray], None] | None:
    try:
        from rad import _core
    except ImportError:  # a build without the compiled module: NumPy's sort
        return None
    return _core.sort_in_place


def _best_of(sort: Callable[[np.ndarray], None], values: np.ndarray, reps: int = 3) -> float:
    times = []
    for _ in range(reps):
        part = values.copy()
        start = time.perf_counter()
        sort(part)
        times.append(time.perf_counter() - start)
    return min(times)


def sort_kind(dtype: np.dtype) -> str:
    """``"numpy"`` or ``"radix"``: the sort this process uses for values of ``dtype``."""
    if _forced is not None:
        return _forced
    dtype = np.dtype(dtype)
    with _lock:
        if dtype not in _kinds:
            radix = _radix()
            kind = "numpy"
            if radix is not None:
                values = -np.random.default_rng(0).random(_CALIBRATION).astype(dtype)
                if _best_of(radix, values) < 0.9 * _best_of(np.ndarray.sort, values):
                    kind = "radix"
            _kinds[dtype] = kind
        return _kinds[dtype]


def set_sort_kind(kind: str | None) -> None:
    """Force ``"numpy"`` or ``"radix"`` (tests and benchmarks); ``None`` restores the timed choice."""
    global _forced
    if kind not in (None, "numpy", "radix") or (kind == "radix" and _radix() is None):
        raise ValueError(f"unknown or unavailable sort kind {kind!r}")
    _forced = kind


def sort_in_place(part: np.ndarray) -> None:
    """Sort the contiguous 1-D float array ``part`` in place, ascending."""
    if part.dtype in (np.float32, np.float64) and part.flags.c_contiguous and sort_kind(part.dtype) == "radix":
        radix = _radix()
        assert radix is not None
        radix(part)
    else:
        part.sort()

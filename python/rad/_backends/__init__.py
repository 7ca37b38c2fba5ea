"""The backends and their registry (``docs/design.md`` §2, "Three backends, one contract").

``cpp`` (the compiled module ``rad._core``), ``numba`` (JIT fallback) and ``numpy`` (the
reference) implement :class:`rad._backends.contract.Kernels`. ``backend="auto"`` takes
the first available in that order; the environment variable ``RAD_BACKEND`` overrides
``"auto"``. The package also holds what the backends share: the canonical summation and
DepRound order (:mod:`~rad._backends.canonical`), the counter-based generator
(:mod:`~rad._backends.rng`), the probability rule (:mod:`~rad._backends.params`), the
sort-free search loop (:mod:`~rad._backends.radix_select`) and the thread policy
(:mod:`~rad._backends.threads`).
"""

from __future__ import annotations

import os
import warnings
from importlib import import_module
from types import ModuleType
from typing import Any

from rad._backends.contract import Kernels, missing_kernels
from rad._backends.threads import default_threads, numba_fork_problem

__all__ = ["ORDER", "BackendUnavailable", "backends", "get_backend"]

ORDER = ("cpp", "numba", "numpy")
_MODULES = {
    "cpp": "rad._backends.cpp_backend",
    "numba": "rad._backends.numba_backend",
    "numpy": "rad._backends.numpy_backend",
    "cuda": "rad._backends.cuda_backend",  # by name, or by "auto" for device arrays (rad._solve.device)
}
_HINTS = {
    "cpp": "reinstall from source with a C++17 compiler: pip install --force-reinstall "
    "--no-binary robust-active-distillation robust-active-distillation (or pip install -e . "
    "in a checkout)",
    "numba": "pip install numba (or the [numba] extra)",
    "numpy": "",
    "cuda": "install the [cuda] extra (pip install 'robust-active-distillation[cuda]', i.e. numba-cuda) "
    "on a machine with an NVIDIA GPU and its driver; pass the gains as a device array (CuPy, PyTorch, "
    "JAX, numba)",
}
_loaded: dict[str, ModuleType] = {}  # conforming modules only
_errors: dict[str, str] = {}


def import_numba_cuda() -> Any:
    """``numba.cuda``, imported quietly and with NumPy 2.5 (raises ImportError without it).

    numba-cuda 0.30 registers ``np.row_stack``, which NumPy 2.5 removed (its target cannot
    load without it), and warns at import that NumPy deprecates the generic timedelta
    unit: a warning the user cannot act on, and an error where warnings are errors.
    """
    import numpy as np

    if not hasattr(np, "row_stack"):
        setattr(np, "row_stack", np.vstack)  # noqa: B010
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"numba")
        from numba import cuda
    return cuda


class BackendUnavailable(ImportError):
    """The requested backend is not built or not installed."""


def _try_load(name: str) -> Kernels | None:
    if name in _loaded:
        return _loaded[name]
    if name in _errors:
        return None
    try:
        mod = import_module(_MODULES[name])
    except ImportError as exc:  # missing extension, missing numba, ...
        _errors[name] = f"{type(exc).__name__}: {exc}"
        return None
    missing = missing_kernels(mod)
    if missing:  # a programming error, not a missing install: say so loudly
        raise TypeError(f"backend {name!r} does not implement the kernel contract: missing {missing}")
    _loaded[name] = mod
    return mod


def get_backend(name: str = "auto") -> Kernels:
    """The kernel module for ``name`` (``"auto"``, ``"cpp"``, ``"numba"``, ``"numpy"`` or ``"cuda"``).

    ``"auto"`` never picks ``"cuda"`` here: device arrays are routed to it by
    :func:`rad._solve.game.resolve_game`.
    """
    if not isinstance(name, str):
        raise TypeError(f"backend must be a string, got {type(name).__name__}")
    if name == "auto":
        forced = os.environ.get("RAD_BACKEND", "").strip()
        if forced and forced != "auto":
            if forced not in _MODULES:
                raise ValueError(
                    f"the environment variable RAD_BACKEND={forced!r} names no backend; "
                    f"choose one of 'auto', {', '.join(map(repr, _MODULES))}"
                )
            return get_backend(forced)
        for candidate in ORDER:
            mod = _try_load(candidate)
            if mod is not None and not (candidate == "numba" and numba_fork_problem()):
                return mod
        raise BackendUnavailable("no rad backend could be loaded")  # numpy always loads
    if name not in _MODULES:
        raise ValueError(f"unknown backend {name!r}; choose one of 'auto', {', '.join(map(repr, _MODULES))}")
    mod = _try_load(name)
    if mod is None:
        raise BackendUnavailable(
            f"the {name!r} backend is not available ({_errors[name]}); {_HINTS[name]}"
        )
    problem = numba_fork_problem() if name == "numba" else None
    if problem:
        raise BackendUnavailable(f"the 'numba' backend cannot run here: {problem}")
    return mod


def backends() -> dict[str, Any]:
    """What is built and which backend ``"auto"`` picks.

    Returns
    -------
    dict
        ``{"auto": name, "threads": default thread count, "<name>": {"available": bool,
        "openmp": bool | None, "error": str | None}, ...}``.
    """
    info: dict[str, Any] = {}
    for name in (*ORDER, "cuda"):  # cuda: for device arrays only, never "auto"'s pick here
        mod = _try_load(name)
        info[name] = {
            "available": mod is not None,
            "openmp": getattr(mod, "has_openmp", None) if mod is not None else None,
            "error": _errors.get(name),
        }
    info["auto"] = get_backend("auto").name
    info["threads"] = default_threads()
    return info

"""One registry of backends (DESIGN §2, "Three backends, one contract").

``cpp`` (the compiled module ``rad._core``), ``numba`` (JIT fallback) and ``numpy`` (the
reference) expose the same kernels with the same signatures. ``backend="auto"`` takes the
first available in that order; the environment variable ``RAD_BACKEND`` overrides
``"auto"``.
"""

from __future__ import annotations

import os
from importlib import import_module
from types import ModuleType
from typing import Any

__all__ = ["BackendUnavailable", "backends", "default_threads", "get_backend"]

ORDER = ("cpp", "numba", "numpy")
_MODULES = {"cpp": "rad._cpp_backend", "numba": "rad._numba.backend", "numpy": "rad._numpy_backend"}
_HINTS = {
    "cpp": "reinstall from source with a C++17 compiler: pip install --force-reinstall "
    "--no-binary robust-active-distillation robust-active-distillation (or pip install -e . "
    "in a checkout)",
    "numba": "pip install numba (or the [numba] extra)",
    "numpy": "",
}
_loaded: dict[str, ModuleType] = {}
_errors: dict[str, str] = {}


class BackendUnavailable(ImportError):
    """The requested backend is not built or not installed."""


def _try_load(name: str) -> ModuleType | None:
    if name in _loaded:
        return _loaded[name]
    if name in _errors:
        return None
    try:
        mod = import_module(_MODULES[name])
    except ImportError as exc:  # missing extension, missing numba, ...
        _errors[name] = f"{type(exc).__name__}: {exc}"
        return None
    _loaded[name] = mod
    return mod


def get_backend(name: str = "auto") -> ModuleType:
    """The kernel module for ``name`` (``"auto"``, ``"cpp"``, ``"numba"`` or ``"numpy"``)."""
    if not isinstance(name, str):
        raise TypeError(f"backend must be a string, got {type(name).__name__}")
    if name == "auto":
        forced = os.environ.get("RAD_BACKEND", "").strip()
        if forced and forced != "auto":
            return get_backend(forced)
        for candidate in ORDER:
            mod = _try_load(candidate)
            if mod is not None:
                return mod
        raise BackendUnavailable("no rad backend could be loaded")  # numpy always loads
    if name not in _MODULES:
        raise ValueError(f"unknown backend {name!r}; choose one of 'auto', {', '.join(map(repr, ORDER))}")
    mod = _try_load(name)
    if mod is None:
        raise BackendUnavailable(
            f"the {name!r} backend is not available ({_errors[name]}); {_HINTS[name]}"
        )
    return mod


def default_threads() -> int:
    """Threads used when ``threads=None``: ``RAD_NUM_THREADS``, else all cores."""
    env = os.environ.get("RAD_NUM_THREADS", "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f"RAD_NUM_THREADS must be a positive integer, got {env!r}") from None
        if value < 1:
            raise ValueError(f"RAD_NUM_THREADS must be a positive integer, got {env!r}")
        return value
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def backends() -> dict[str, Any]:
    """What is built and which backend ``"auto"`` picks.

    Returns
    -------
    dict
        ``{"auto": name, "threads": default thread count, "<name>": {"available": bool,
        "openmp": bool | None, "error": str | None}, ...}``.
    """
    info: dict[str, Any] = {}
    for name in ORDER:
        mod = _try_load(name)
        info[name] = {
            "available": mod is not None,
            "openmp": getattr(mod, "has_openmp", None) if mod is not None else None,
            "error": _errors.get(name),
        }
    info["auto"] = get_backend("auto").name
    info["threads"] = default_threads()
    return info

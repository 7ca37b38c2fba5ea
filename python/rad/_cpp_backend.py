"""Adapter from the kernel contract to the compiled module ``rad._core``."""

from __future__ import annotations

import numpy as np

from rad import _core
from rad._solution import Params

__all__ = ["BLOCK", "has_openmp", "name"]

name = "cpp"
BLOCK: int = _core.BLOCK
has_openmp: bool = bool(_core.has_openmp)


def _l(losses: np.ndarray | None) -> np.ndarray | None:
    return None if losses is None else np.ascontiguousarray(losses, dtype=np.float64)


def first_invalid(x: np.ndarray, threads: int = 1) -> int:
    return _core.first_invalid(x, threads)


def argsort_desc(g: np.ndarray, threads: int = 1) -> np.ndarray:
    return _core.argsort(g, True, threads)


def argsort_asc(x: np.ndarray, threads: int = 1) -> np.ndarray:
    return _core.argsort(x, False, threads)


def theorem1_scan(gains, losses, w, perm, m, threads=1):
    return _core.theorem1_scan(gains, _l(losses), float(w), perm, float(m), threads)


def threshold_search(gains, losses, w, m, threads=1):
    return _core.threshold_search(gains, _l(losses), float(w), float(m), threads)


def support_sums(gains, losses, w, tau, threads=1):
    return _core.support_sums(gains, _l(losses), float(w), float(tau), threads)


def support_stats(gains, losses, w, params: Params, threads=1):
    return _core.support_stats(gains, _l(losses), float(w), params.as_tuple(), threads)


def materialize(gains, losses, w, params: Params, threads=1):
    return _core.materialize(gains, _l(losses), float(w), params.as_tuple(), threads)


def depround_params(gains, losses, w, params: Params, b, key, threads=1):
    return _core.depround_params(gains, _l(losses), float(w), params.as_tuple(), int(b), int(key), threads)


def depround_q(q, b, key, threads=1):
    return _core.depround_q(np.ascontiguousarray(q, dtype=np.float64), int(b), int(key), threads)


def capped_eval(ctx, nu, b, m, threads=1):
    """F(nu) on the capped path's sorted arrays (see rad._solver._capped_eval)."""
    return _core.capped_eval(ctx.g_g, ctx.a_g, ctx.ends_g, ctx.l_l, ctx.a_l, ctx.ends_l,
                             float(nu), float(b), float(m), threads)

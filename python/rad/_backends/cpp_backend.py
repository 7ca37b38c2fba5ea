"""The C++ backend: the contract of :mod:`rad._backends.contract` on the compiled ``rad._core``.

The kernels live in ``cpp/include/rad/*.hpp`` (pure C++17 + OpenMP) and are bound in
``cpp/bindings/module.cpp``; this module only adapts argument types. The per-level
histogram of the radix select is not exported by the compiled search (it runs its levels
internally), so the two kernels :mod:`rad.dask` needs per chunk come from the reference.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from rad import _core
from rad._backends import numpy_backend as _reference
from rad._backends.canonical import BLOCK
from rad._backends.contract import SKETCH_PARTS, CappedArrays, FloatArray, IndexArray, RoundSketch
from rad._backends.params import Params

__all__ = ["SORTFREE", "has_openmp", "name"]

name = "cpp"
has_openmp: bool = bool(_core.has_openmp)
SORTFREE = True

if _core.BLOCK != BLOCK or _core.SKETCH_PARTS != SKETCH_PARTS:  # pragma: no cover - mismatched sources
    raise ImportError(f"rad._core was built with BLOCK = {_core.BLOCK}, SKETCH_PARTS = {_core.SKETCH_PARTS}; "
                      f"the package expects {BLOCK} and {SKETCH_PARTS}")


def _losses_arg(losses: FloatArray | None) -> NDArray[np.float64] | None:
    return None if losses is None else np.ascontiguousarray(losses, dtype=np.float64)


def first_invalid(x: FloatArray, threads: int) -> int:
    return _core.first_invalid(x, threads)


def argsort_desc(g: FloatArray, threads: int) -> IndexArray:
    return _core.argsort(g, True, threads)


def theorem1_scan(
    gains: FloatArray, losses: FloatArray | None, w: float, perm: IndexArray, m: float, threads: int
) -> tuple[int, float]:
    return _core.theorem1_scan(gains, _losses_arg(losses), float(w), perm, float(m), threads)


def threshold_search(
    gains: FloatArray, losses: FloatArray | None, w: float, m: float, threads: int
) -> tuple[int, float, int, float]:
    return _core.threshold_search(gains, _losses_arg(losses), float(w), float(m), threads)


def threshold_support(
    gains: FloatArray, losses: FloatArray | None, w: float, m: float, b: int, threads: int
) -> tuple[int, float, int, float, tuple[float, float, int, float] | None, RoundSketch | None]:
    status, tau, kstar, g_total, has, h, g, count, min_a, prefixes = _core.threshold_support(
        gains, _losses_arg(losses), float(w), float(m), int(b), threads)
    if not has or prefixes is None:
        return status, tau, kstar, g_total, None, None
    return status, tau, kstar, g_total, (h, g, count, min_a), RoundSketch(tau, prefixes)


bit_histogram = _reference.bit_histogram
bit_gather = _reference.bit_gather


def support_sums(
    gains: FloatArray, losses: FloatArray | None, w: float, tau: float, threads: int
) -> tuple[float, float, int, float]:
    return _core.support_sums(gains, _losses_arg(losses), float(w), float(tau), threads)


def support_block_sums(
    gains: FloatArray, losses: FloatArray | None, w: float, tau: float, threads: int
) -> tuple[FloatArray, FloatArray, IndexArray, FloatArray]:
    return _core.support_block_sums(np.ascontiguousarray(gains), _losses_arg(losses), float(w), float(tau), threads)


def support_stats(
    gains: FloatArray, losses: FloatArray | None, w: float, params: Params, threads: int
) -> tuple[int, float]:
    return _core.support_stats(gains, _losses_arg(losses), float(w), params.as_tuple(), threads)


def materialize(
    gains: FloatArray, losses: FloatArray | None, w: float, params: Params, threads: int
) -> FloatArray:
    return _core.materialize(gains, _losses_arg(losses), float(w), params.as_tuple(), threads)


def capped_eval(
    ctx: CappedArrays, nu: float, b: float, m: float, threads: int
) -> tuple[float, float, bool, float, float, float]:
    return _core.capped_eval(ctx.g_g, ctx.a_g, ctx.ends_g, ctx.l_l, ctx.a_l, ctx.ends_l,
                             float(nu), float(b), float(m), threads)


def values_at_least(
    g: FloatArray, t: float, threads: int, splits: Sequence[float] = ()
) -> tuple[FloatArray, NDArray[np.int64]]:
    return _core.values_at_least(np.ascontiguousarray(g), float(t), [float(s) for s in splits], threads)


def span_sums(g: FloatArray, w: float, span: int, threads: int) -> NDArray[np.float64]:
    return _core.span_sums(np.ascontiguousarray(g), float(w), int(span), threads)


def gain_fill(
    g: FloatArray, offsets: NDArray[np.float64], totals: NDArray[np.float64], w: float, span: int, complete: bool,
    nu: float, b: float, m: float,
) -> tuple[int, float, float, float, float, float]:
    """The capped path's ``F(nu)`` on the sorted top (optional kernel; see :mod:`rad._backends.contract`)."""
    return _core.gain_fill(g, offsets, totals, float(w), int(span), bool(complete), float(nu), float(b), float(m))


def gain_fill_from(
    g: FloatArray, offsets: NDArray[np.float64], totals: NDArray[np.float64], w: float, span: int, complete: bool,
    b: float, a_max: float,
) -> tuple[int, float]:
    """Where the capped path's gain fill begins on the sorted top (optional kernel)."""
    return _core.gain_fill_from(g, offsets, totals, float(w), int(span), bool(complete), float(b), float(a_max))


def depround_q(q: FloatArray, b: int, key: int, threads: int) -> IndexArray:
    return _core.depround_q(np.ascontiguousarray(q, dtype=np.float64), int(b), int(key), threads)


def depround_params(
    gains: FloatArray, losses: FloatArray | None, w: float, params: Params, b: int, key: int, threads: int
) -> IndexArray:
    return _core.depround_params(gains, _losses_arg(losses), float(w), params.as_tuple(), int(b), int(key), threads)


def depround_sketched(
    gains: FloatArray, losses: FloatArray | None, w: float, params: Params, b: int, key: int,
    sketch: RoundSketch | None, threads: int,
) -> IndexArray:
    if sketch is None:
        return depround_params(gains, losses, w, params, b, key, threads)
    return _core.depround_sketched(gains, _losses_arg(losses), float(w), params.as_tuple(), int(b), int(key),
                                   sketch.prefixes, float(sketch.tau), threads)


def depround_blocks(
    gains: FloatArray, losses: FloatArray | None, w: float, params: Params, key: int, offset: int,
    first_stream: int, threads: int,
) -> tuple[IndexArray, IndexArray, FloatArray]:
    return _core.depround_blocks(np.ascontiguousarray(gains), _losses_arg(losses), float(w), params.as_tuple(),
                                 int(key), int(offset), int(first_stream), threads)

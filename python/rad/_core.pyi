"""Type stub of the compiled module (cpp/bindings/module.cpp). Use the ``rad`` package."""

from collections.abc import Sequence
from typing import Optional

import numpy as np
from numpy.typing import NDArray

_Float = NDArray[np.float32] | NDArray[np.float64]
_F64 = NDArray[np.float64]
_I64 = NDArray[np.int64]
_Params = tuple[int, float, float, float, float, float]

BLOCK: int
SKETCH_PARTS: int
has_openmp: bool

def first_invalid(x: _Float, threads: int) -> int: ...
def argsort(x: _Float, descending: bool, threads: int) -> _I64: ...
def theorem1_scan(
    gains: _Float, losses: Optional[_F64], w: float, perm: _I64, m: float, threads: int
) -> tuple[int, float]: ...
def threshold_search(
    gains: _Float, losses: Optional[_F64], w: float, m: float, threads: int
) -> tuple[int, float, int, float]: ...
def threshold_support(
    gains: _Float, losses: Optional[_F64], w: float, m: float, b: int, threads: int
) -> tuple[int, float, int, float, bool, float, float, int, float, Optional[_F64]]: ...
def threshold_bracketed(
    gains: _Float, losses: Optional[_F64], w: float, m: float, threads: int, lo: float, hi: float
) -> tuple[int, float, int, float]: ...
def threshold_support_bracketed(
    gains: _Float, losses: Optional[_F64], w: float, m: float, b: int, threads: int, lo: float, hi: float,
    margin_bits: int,
) -> tuple[int, float, int, float, bool, float, float, int, float]: ...
def approx_first_pass_sums(
    gains: NDArray[np.float32], lo: float, hi: float, threads: int
) -> tuple[float, int, int, int, bool]: ...
def sample_bracket(
    gains: _Float, losses: Optional[_F64], w: float, m: float, threads: int
) -> tuple[int, int]: ...
def refine_bracket(
    gains: _Float, losses: Optional[_F64], w: float, m: float, threads: int, lo: int, hi: int, size: int
) -> tuple[int, int]: ...
def stream_sum(x: _Float, threads: int) -> float: ...
def support_sums(
    gains: _Float, losses: Optional[_F64], w: float, tau: float, threads: int
) -> tuple[float, float, int, float]: ...
def support_block_sums(
    gains: _Float, losses: Optional[_F64], w: float, tau: float, threads: int
) -> tuple[_F64, _F64, _I64, _F64]: ...
def depround_blocks(
    gains: _Float,
    losses: Optional[_F64],
    w: float,
    params: _Params,
    key: int,
    offset: int,
    first_stream: int,
    threads: int,
) -> tuple[_I64, _I64, _F64]: ...
def support_stats(
    gains: _Float, losses: Optional[_F64], w: float, params: _Params, threads: int
) -> tuple[int, float]: ...
def materialize(gains: _Float, losses: Optional[_F64], w: float, params: _Params, threads: int) -> _F64: ...
def depround_params(
    gains: _Float, losses: Optional[_F64], w: float, params: _Params, b: int, key: int, threads: int
) -> _I64: ...
def depround_sketched(
    gains: _Float, losses: Optional[_F64], w: float, params: _Params, b: int, key: int, sketch: _F64, tau: float,
    threads: int, slack_bits: int = ...,
) -> _I64: ...
def span_sums(g: _Float, w: float, span: int, threads: int) -> _F64: ...
def gain_fill(
    g: _Float, offsets: NDArray[np.float64], totals: NDArray[np.float64], w: float, span: int, complete: bool,
    nu: float, b: float, m: float,
) -> tuple[int, float, float, float, float, float]: ...
def gain_fill_from(
    g: _Float, offsets: NDArray[np.float64], totals: NDArray[np.float64], w: float, span: int, complete: bool,
    b: float, a_max: float,
) -> tuple[int, float]: ...
def values_at_least(g: _Float, t: float, splits: Sequence[float], threads: int) -> tuple[_Float, NDArray[np.int64]]: ...
def depround_q(q: _F64, b: int, key: int, threads: int) -> _I64: ...
def sketch_unit_bounds(sketch: _F64, nu: float, slack_bits: int) -> tuple[_I64, _I64, NDArray[np.bool_]]: ...
def merge_spans(ids: _I64, lo: _I64, hi: _I64, key: int, wanted: int) -> tuple[bool, _I64, int, int]: ...
def merge_leftovers(ids: _I64, masses: _F64, key: int, wanted: int) -> tuple[_I64, int]: ...
def capped_eval(
    g_g: _F64,
    a_g: _F64,
    ends_g: _I64,
    l_l: _F64,
    a_l: _F64,
    ends_l: _I64,
    nu: float,
    b: float,
    m: float,
    threads: int,
) -> tuple[float, float, bool, float, float, float]: ...
def set_support_reciprocal(mode: str) -> None: ...
def support_reciprocal() -> str: ...
def support_reciprocals(a: NDArray[np.float64], newton: bool) -> NDArray[np.float64]: ...

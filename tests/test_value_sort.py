"""The capped path's value sort: the compiled radix sort against NumPy's (``rad._solve.value_sort``).

The capped path sorts the top of the pool with whichever sort the machine runs faster; the
two must give the same values in the same order (only ``-0.0`` and ``0.0`` may trade
places), and the capped select the same indices either way.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rad
from conftest import BACKENDS
from rad._solve import value_sort

pytestmark = pytest.mark.skipif("cpp" not in BACKENDS, reason="needs the compiled module")

EDGES = [0.0, -0.0, 1.0, -1.0, 2.0**-149, -(2.0**-149), 1e-310, -1e-310, 3e38, -3e38, 1e300, -1e300,
         float("inf"), float("-inf"), 0.5, -0.5]


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint64)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.sampled_from(EDGES) | st.floats(allow_nan=False), max_size=3000),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_radix_sort_is_numpys_sort(values, dtype) -> None:
    """Every finite and infinite value, subnormals, signed zeros and ties: ascending, the same
    values as ``np.sort`` (``-0.0 == 0.0``) and the same bit patterns overall."""
    from rad import _core

    with np.errstate(over="ignore"):
        x = np.asarray(values, dtype=np.float64).astype(dtype)
    y = x.copy()
    _core.sort_in_place(y)
    assert np.array_equal(y, np.sort(x))
    assert np.array_equal(np.sort(_bits(y)), np.sort(_bits(x)))  # nothing lost or changed
    zeros = y == 0
    if zeros.any():  # -0.0 (bits flipped lowest) before +0.0
        signs = np.signbit(y[zeros])
        assert np.array_equal(signs, np.sort(signs)[::-1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_radix_sort_of_a_narrow_top(dtype) -> None:
    """A pool's negated top (one sign, few exponents: the passes on the high digits are
    skipped), all equal values, and the smallest sizes."""
    from rad import _core

    rng = np.random.default_rng(5)
    cases = [-(0.9 + 0.1 * rng.random(200_000)), np.full(1000, -0.25), np.array([]), np.array([-1.0]),
             np.array([-1.0, -2.0]), -np.round(rng.random(50_000) * 20) / 20]
    for x in (c.astype(dtype) for c in cases):
        y = x.copy()
        _core.sort_in_place(y)
        assert np.array_equal(y, np.sort(x))


def test_radix_sort_rejects_what_it_cannot_sort_in_place() -> None:
    from rad import _core

    x = np.arange(10.0)
    with pytest.raises(ValueError, match="writable, contiguous"):
        _core.sort_in_place(x[::2])
    x.setflags(write=False)
    with pytest.raises(ValueError, match="writable, contiguous"):
        _core.sort_in_place(x)
    with pytest.raises(TypeError):
        _core.sort_in_place(np.arange(10))


def test_the_sort_kind_is_chosen_and_can_be_forced() -> None:
    assert value_sort.sort_kind(np.float32) in ("numpy", "radix")
    with pytest.raises(ValueError, match="unknown"):
        value_sort.set_sort_kind("bubble")
    try:
        for kind in ("numpy", "radix"):
            value_sort.set_sort_kind(kind)
            assert value_sort.sort_kind(np.float64) == kind
    finally:
        value_sort.set_sort_kind(None)


@pytest.mark.parametrize("backend", ["cpp", "numba"])
def test_capped_select_is_the_same_with_either_sort(backend: str) -> None:
    """The capped path (caps bind; its top sorted in parts) gives the same solution and
    indices with the radix sort as with NumPy's."""
    if backend not in BACKENDS:
        pytest.skip(f"no {backend} backend")
    rng = np.random.default_rng(8)
    n = 300_000
    gains = np.concatenate([rng.random(n - 1000), np.full(1000, 0.5)]).astype(np.float32)  # a big tie group
    out = {}
    try:
        for kind in ("numpy", "radix"):
            value_sort.set_sort_kind(kind)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", rad.NetHarmWarning)
                sol = rad.solve(gains, 0.001 * n, n // 10, backend=backend, threads=2)
                idx = rad.select(gains, 0.001 * n, n // 10, rng=3, backend=backend, threads=2)
            assert sol.capped
            out[kind] = (sol.k_star, sol.threshold, sol.value, sol.params, idx)
    finally:
        value_sort.set_sort_kind(None)
    a, b = out["numpy"], out["radix"]
    assert a[:4] == b[:4]
    assert np.array_equal(a[4], b[4])

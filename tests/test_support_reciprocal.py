"""The support pass's divider-free reciprocal (cpp/include/rad/reciprocal.hpp).

On AVX-512 builds the C++ support pass may form every other vector's ``1/a`` by ``rcp14``,
Newton's steps and a check instead of ``vdivpd`` ("mixed", where timing the pass says it
is faster on the core). It must be the IEEE quotient, bit for bit, for every ``a``: the
other backends divide and the selected indices must agree. The reference here is NumPy's
division.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import BACKENDS

pytestmark = pytest.mark.skipif("cpp" not in BACKENDS, reason="C++ backend not built")


def _core():  # type: ignore[no-untyped-def]
    from rad import _core

    return _core


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bad = np.flatnonzero(got[~nan].view(np.uint64) != want[~nan].view(np.uint64))
    assert bad.size == 0, (want[~nan][bad[:5]], got[~nan][bad[:5]])


def _every_float32_mantissa_times(w: float) -> np.ndarray:
    """a = g + w g, as the pass forms it, for every float32 g in [1, 2)."""
    g = (np.arange(1 << 23, dtype=np.uint32) | np.uint32(0x3F800000)).view(np.float32).astype(np.float64)
    return g + w * g


@pytest.mark.parametrize("w", [0.0, 0.3, 0.7, 0.999999, 1e-8])
def test_newton_reciprocal_is_the_quotient_on_every_float32_mantissa(w: float) -> None:
    """All 2^23 float32 mantissas (the gains the fast path sees), scaled as a = (1 + w) g:
    exponents do not change a correctly rounded reciprocal's mantissa, except where 1/a
    leaves the normal range (tested below)."""
    a = _every_float32_mantissa_times(w)
    _same_bits(_core().support_reciprocals(a, True), 1.0 / a)


def test_newton_reciprocal_is_the_quotient_at_every_exponent_and_edge() -> None:
    """Random float64 mantissas at every exponent (1/a subnormal or overflowing at the ends),
    powers of two and their neighbours, and the values the pass masks out (zeros, negative,
    infinite, NaN): the check sends every one it cannot vouch for to the divider."""
    rng = np.random.default_rng(5)
    mant = rng.integers(0, 1 << 52, 400_000, dtype=np.uint64)
    exps = rng.integers(0, 2047, mant.shape[0], dtype=np.uint64)  # 0: subnormal a
    a = ((exps << np.uint64(52)) | mant).view(np.float64)
    twos = np.ldexp(1.0, np.arange(-1074, 1024))
    edges = np.concatenate([twos, np.nextafter(twos, 0.0), np.nextafter(twos, np.inf)])
    specials = np.array([0.0, -0.0, -1.0, -3.5, np.inf, -np.inf, np.nan, 5e-324, 1.7976931348623157e308])
    pool = np.concatenate([a, -a[:1000], edges, specials])
    pool = np.concatenate([pool, np.zeros((-pool.shape[0]) % 8)])
    with np.errstate(divide="ignore", over="ignore"):
        want = 1.0 / pool
    _same_bits(_core().support_reciprocals(pool, True), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_support_pass_sums_the_same_bits_either_way(dtype: type) -> None:
    """The pass itself with each method forced: its per-block sums against the NumPy
    backend's (which divides), on pools with zeros, subnormal and huge gains, with RAD
    losses and with given losses; and threshold_support's result."""
    from rad._backends import numpy_backend as R

    core = _core()
    rng = np.random.default_rng(11)
    n = 3 * 65_536 + 1_234
    g = rng.uniform(0.0, 1.0, n).astype(dtype)
    g[::97] = 0.0
    g[5::1009] = np.float32(1e-40) if dtype == np.float32 else 1e-310  # subnormal gains
    g[7::4099] = 2.0**100
    losses = rng.uniform(0.0, 2.0, n)
    before = core.support_reciprocal()
    try:
        for mode in ("divide", "mixed"):
            core.set_support_reciprocal(mode)
            for ls, w in ((None, 0.7), (losses, 0.0)):
                got = core.support_block_sums(g, ls, w, 0.25, 2)
                want = R.support_block_sums(g, ls, w, 0.25)
                for x, y in zip(got, want):
                    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        results = []
        for mode in ("divide", "mixed"):
            core.set_support_reciprocal(mode)
            results.append(core.threshold_support(g, None, 0.7, 0.3 * n, 1000, 2))
        assert repr(results[0]) == repr(results[1])
    finally:
        core.set_support_reciprocal(before)


def test_the_mode_is_checked_and_chosen() -> None:
    core = _core()
    with pytest.raises(ValueError, match="'auto', 'divide' or 'mixed'"):
        core.set_support_reciprocal("newton")
    core.set_support_reciprocal("auto")
    assert core.support_reciprocal() in ("divide", "mixed")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_select_with_the_mixed_reciprocal_is_the_numpy_backends(dtype: type) -> None:
    """The whole select (search, support sums, DepRound from the sketch) with the mixed
    reciprocal forced, against the NumPy backend: uncapped and capped, RAD and given losses,
    one and two threads."""
    import rad

    core = _core()
    rng = np.random.default_rng(3)
    n = 2 * 65_536 + 777
    g = rng.uniform(0.0, 1.0, n).astype(dtype)
    losses = rng.uniform(0.0, 1.0, n)
    before = core.support_reciprocal()
    try:
        core.set_support_reciprocal("mixed")
        for m, b, ls in ((0.3 * n, 1000, None), (0.001 * n, n // 10, None), (0.2 * n, 500, losses)):
            want = rad.select(g, m, b, losses=ls, rng=7, backend="numpy")
            for threads in (1, 2):
                got = rad.select(g, m, b, losses=ls, rng=7, backend="cpp", threads=threads)
                np.testing.assert_array_equal(got, want)
    finally:
        core.set_support_reciprocal(before)

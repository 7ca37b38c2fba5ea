"""Bad input gets a clear error before any kernel runs; edge cases give sane output."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import rad
from conftest import BACKENDS

G = np.array([0.3, 0.9, 0.1, 0.5])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "gains, message",
    [
        (np.array([0.1, np.nan, 0.3]), r"gains\[1\] = nan is NaN"),
        (np.array([0.1, 0.2, np.inf]), r"gains\[2\] = inf is infinite"),
        (np.array([0.1, -1e-9, 0.3]), r"gains\[1\] = -1e-09 is negative"),
        (np.array([0.1, 0.2, -np.inf], dtype=np.float32), r"gains\[2\]"),
        (np.zeros((2, 3)), "one-dimensional"),
        (np.array([]), "empty"),
    ],
)
def test_bad_gains(backend: str, gains: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rad.select(gains, 0.0, 0, backend=backend)
    with pytest.raises(ValueError, match=message):
        rad.solve(gains, 0.0, 0, backend=backend)


@pytest.mark.parametrize("gains", [np.array(["a", "b"]), np.array([1 + 2j]), [object()]])
def test_non_numeric_gains(gains) -> None:
    with pytest.raises(TypeError, match="gains must be a real numeric array"):
        rad.select(gains, 0.0, 1)


@pytest.mark.parametrize(
    "kwargs, exc, message",
    [
        ({"m": -0.5, "b": 1}, ValueError, r"m .* must be in \[0, n=4\]"),
        ({"m": 4.5, "b": 1}, ValueError, r"must be in \[0, n=4\]"),
        ({"m": np.nan, "b": 1}, ValueError, "m "),
        ({"m": "3", "b": 1}, TypeError, "m must be a real number"),
        ({"m": 1.0, "b": 5}, ValueError, r"b \(the budget\) must be in \[0, n=4\]"),
        ({"m": 1.0, "b": -1}, ValueError, "b "),
        ({"m": 1.0, "b": 1.5}, TypeError, "must be an integer"),
        ({"m": 1.0, "b": True}, TypeError, "bool"),
        ({"m": 1.0, "b": 1, "w": -0.1}, ValueError, "w .* >= 0"),
        ({"m": 1.0, "b": 1, "w": np.inf}, ValueError, "w "),
        ({"m": 10**400, "b": 1}, ValueError, r"m .* must be in \[0, n=4\]"),  # beyond float64: no OverflowError
        ({"m": -(10**400), "b": 1}, ValueError, r"m .* must be in \[0, n=4\]"),
        ({"m": 1.0, "b": 1, "w": 10**400}, ValueError, "w .* finite"),
        ({"m": 1.0, "b": 1, "w": 0.5, "losses": np.ones(4)}, ValueError, "not both"),
        ({"m": 1.0, "b": 1, "losses": np.ones(3)}, ValueError, "same shape"),
        ({"m": 1.0, "b": 1, "losses": np.array([1.0, np.nan, 0, 0])}, ValueError, r"losses\[1\]"),
        ({"m": 1.0, "b": 1, "backend": "gpu"}, ValueError, "unknown backend"),
        ({"m": 1.0, "b": 1, "threads": 0}, ValueError, "threads"),
        ({"m": 1.0, "b": 1, "rng": "seed"}, TypeError, "rng"),
    ],
)
def test_bad_arguments(kwargs: dict, exc: type, message: str) -> None:
    with pytest.raises(exc, match=message):
        rad.select(G, **kwargs)


def test_integral_float_budget_is_accepted() -> None:
    assert rad.select(G, 1.0, 2.0, rng=0).shape == (2,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_budget_zero_and_everything(backend: str) -> None:
    assert rad.select(G, 1.0, 0, backend=backend).shape == (0,)
    np.testing.assert_array_equal(rad.select(G, 1.0, 4, rng=1, backend=backend), np.arange(4))
    sol = rad.solve(G, 1.0, 4, backend=backend)
    np.testing.assert_array_equal(sol.probabilities(), np.ones(4))
    # value of taking everything: sum g minus the largest a = (1 + w) g, w = 0.75
    assert sol.value == pytest.approx(G.sum() - 1.75 * 0.9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_gains_and_ties_give_finite_order_free_output(backend: str) -> None:
    g = np.array([0.0, 0.5, 0.5, 0.0, 0.5, 0.2, 0.0, 0.2])
    for m in [0.0, 1.0, 3.7, 8.0]:
        for b in range(0, 9):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", rad.NetHarmWarning)
                q = rad.solve(g, m, b, backend=backend).probabilities()
                q_rev = rad.solve(g[::-1].copy(), m, b, backend=backend).probabilities()
            assert np.all(np.isfinite(q))
            np.testing.assert_allclose(q_rev[::-1], q, atol=1e-12)
            # tied points get tied probabilities
            for v in np.unique(g):
                assert np.ptp(q[g == v]) <= 1e-12


def test_all_zero_gains() -> None:
    g = np.zeros(10)
    sol = rad.solve(g, 3.0, 4)
    assert sol.value == 0.0
    q = sol.probabilities()
    assert np.all(np.isfinite(q)) and q.sum() == pytest.approx(4)
    assert rad.select(g, 3.0, 4, rng=0).shape == (4,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_readonly_and_memmap_input(backend: str, tmp_path) -> None:
    g = np.random.default_rng(0).random(5000, dtype=np.float32)
    ref = rad.select(g, 1000.0, 50, rng=3, backend=backend)
    ro = g.copy()
    ro.setflags(write=False)
    np.testing.assert_array_equal(rad.select(ro, 1000.0, 50, rng=3, backend=backend), ref)
    path = tmp_path / "gains.npy"
    np.save(path, g)
    mm = np.load(path, mmap_mode="r")
    np.testing.assert_array_equal(rad.select(mm, 1000.0, 50, rng=3, backend=backend), ref)
    sol = rad.solve(mm, 1000.0, 50, backend=backend)
    assert np.shares_memory(sol.gains, mm)  # no copy of contiguous float input


def test_integer_and_list_input_is_converted() -> None:
    np.testing.assert_array_equal(
        rad.select([3, 9, 1, 5], 1, 2, rng=0), rad.select(np.array([3.0, 9, 1, 5]), 1, 2, rng=0)
    )


def test_single_point_pool() -> None:
    assert rad.select(np.array([0.7]), 0.0, 1).tolist() == [0]
    assert rad.select(np.array([0.7]), 1.0, 0).tolist() == []
    assert rad.solve(np.array([0.7]), 0.5, 1).k_star == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_threshold_is_never_negative_zero(backend: str) -> None:
    """[0, -0.0]: C++ said 0.0 and the others -0.0 (issue 14); now +0.0 everywhere."""
    for b in (1, 2):
        t = rad.solve(np.array([0.0, -0.0]), 0.5, b, backend=backend).threshold
        assert t == 0.0 and math.copysign(1.0, t) == 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_gains_near_the_float64_maximum(backend: str) -> None:
    """1.7e308 raised 'math range error' and 1e308 returned inf silently (issue 14): the game
    is solved on gains scaled by a power of two; a value beyond float64 is inf with a warning."""
    n = 1000
    with pytest.warns(RuntimeWarning, match="too large for float64"):
        sol = rad.solve(np.full(n, 1.7e308), 10.0, 5, backend=backend)
    assert sol.value == math.inf and sol.scale_exponent < 0
    np.testing.assert_allclose(sol.probabilities(), np.full(n, 5 / n))
    idx = rad.select(np.full(n, 1.7e308), 10.0, 5, rng=0, backend=backend)
    assert idx.shape == (5,) and np.all(np.diff(idx) > 0)
    # b = 1 fits: Theorem 1's closed form (n - (1 + w) m) / ((1 + w) H), H = n / ((1 + w) g)
    w = 1 - 10.0 / n
    expected = (n - (1 + w) * 10.0) / n * 1e308
    assert abs(rad.solve(np.full(n, 1e308), 10.0, 1, backend=backend).value / expected - 1) < 1e-12


def test_the_warnings_rad_emits_are_public() -> None:
    """Every warning a call can emit is importable from ``rad`` (README, docstrings)."""
    from rad._solve.batch import ValueOverflowWarning
    from rad._solve.device import DeviceFallbackWarning
    from rad._solve.solution import NetHarmWarning

    assert rad.ValueOverflowWarning is ValueOverflowWarning
    assert rad.DeviceFallbackWarning is DeviceFallbackWarning
    assert rad.NetHarmWarning is NetHarmWarning
    assert {"ValueOverflowWarning", "DeviceFallbackWarning", "NetHarmWarning"} <= set(rad.__all__)
    with pytest.warns(rad.ValueOverflowWarning):  # a value beyond float64, returned as inf
        sol = rad.solve(np.full(300, 1.7e308), 10, 100)
    assert sol.value == np.inf


def test_masked_and_ragged_gains_are_named() -> None:
    """A mask is never dropped silently, and a ragged list names the argument."""
    with pytest.raises(TypeError, match="gains is a masked array"):
        rad.select(np.ma.array([0.1, 0.2, 0.3], mask=[0, 1, 0]), 0.3, 1)
    with pytest.raises(TypeError, match="losses is a masked array"):
        rad.solve(np.ones(3), 0.3, 1, losses=np.ma.array([0.1, 0.2, 0.3], mask=[1, 0, 0]))
    np.testing.assert_array_equal(  # nothing masked: the plain array
        rad.select(np.ma.array([0.1, 0.2, 0.3]), 0.3, 1, rng=0), rad.select(np.array([0.1, 0.2, 0.3]), 0.3, 1, rng=0))
    with pytest.raises(ValueError, match="gains cannot be read as a one-dimensional array"):
        rad.select([[0.1, 0.2], [0.3]], 0.3, 1)

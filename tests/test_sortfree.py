"""The sort-free search for Theorem 1's support against the sorted path (docs/design.md §1, §3):
identical k*, boundary and probabilities, ties, denormals, zeros and all-equal pools
included; multi-level radix descent; any thread count."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rad
from conftest import BACKENDS
from instances import instances
from rad._backends import get_backend

SORTFREE = [b for b in BACKENDS if hasattr(get_backend(b), "threshold_search")]
pytestmark = pytest.mark.skipif(not SORTFREE, reason="no backend with a sort-free search")


def _both(gains, m, b, backend, losses=None, w=None, threads=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rad.NetHarmWarning)
        kw = dict(losses=losses, w=w, backend=backend, threads=threads)
        return rad.solve(gains, m, b, method="sorted", **kw), rad.solve(gains, m, b, method="sortfree", **kw)


def _assert_same(sorted_sol, free_sol) -> None:
    assert free_sol.k_star == sorted_sol.k_star
    assert free_sol.threshold == sorted_sol.threshold
    assert free_sol.params == sorted_sol.params  # the same bits: nu, cuts, fractions
    assert free_sol.value == sorted_sol.value
    np.testing.assert_array_equal(free_sol.probabilities(), sorted_sol.probabilities())


def _kernel_agrees(backend: str, gains: np.ndarray, m: float, losses=None, w: float = 0.0) -> int:
    """The raw kernels: when the sort-free search reports no near tie, tau and k* equal
    the sorted scan's. Returns the status."""
    be = get_backend(backend)
    status, tau, kstar, _ = be.threshold_search(gains, losses, w, m, 2)
    perm = be.argsort_desc(gains, 2)
    k_sorted, _ = be.theorem1_scan(gains, losses, w, perm, m, 2)
    if status == 0:
        assert kstar == k_sorted
        assert tau == float(gains[perm[k_sorted - 1]])
    return status


@pytest.mark.parametrize("backend", SORTFREE)
@given(inst=instances(max_n=60), f32=st.booleans())
def test_sortfree_equals_sorted(backend: str, inst: dict, f32: bool) -> None:
    g = inst["gains"].astype(np.float32) if f32 else inst["gains"]
    _assert_same(*_both(g, inst["m"], inst["b"], backend, losses=inst["losses"], w=inst["w"]))
    w = 0.0 if inst["losses"] is not None else (1 - inst["m"] / g.shape[0] if inst["w"] is None else inst["w"])
    _kernel_agrees(backend, g, inst["m"], inst["losses"], w)


ADVERSARIAL = {
    "all_equal": lambda r, n: np.full(n, 0.37),
    "two_values": lambda r, n: r.choice([0.2, 0.9], n),
    "zeros_and_ties": lambda r, n: np.round(r.random(n), 2) * (r.random(n) < 0.7),
    "one_huge": lambda r, n: np.concatenate([r.random(n - 1), [1e30]]),
    "denormal_f64": lambda r, n: r.random(n) * 1e-310,
    "denormal_mix": lambda r, n: np.where(r.random(n) < 0.5, r.random(n) * 1e-315, r.random(n)),
    "one_bin_many": lambda r, n: 0.5 + r.random(n) * 1e-9,  # forces the multi-level descent
    "negative_zero": lambda r, n: np.where(r.random(n) < 0.3, -0.0, r.random(n)),
}


@pytest.mark.parametrize("backend", SORTFREE)
@pytest.mark.parametrize("kind", sorted(ADVERSARIAL))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adversarial_pools(backend: str, kind: str, dtype, rng: np.random.Generator) -> None:
    n = 300_000 if kind == "one_bin_many" else 20_000
    g = ADVERSARIAL[kind](rng, n).astype(dtype)
    for frac in (0.0, 0.01, 0.3, 0.9, 1.0):
        m = frac * n
        for b in (1, 100, n // 2):
            _assert_same(*_both(g, m, b, backend))
        _kernel_agrees(backend, g, m, w=1 - frac)


@pytest.mark.parametrize("backend", SORTFREE)
def test_general_losses(backend: str, rng: np.random.Generator) -> None:
    n = 50_000
    g = rng.random(n)
    losses = rng.random(n) * 2
    for m in (0.0, 100.0, 5_000.0, 20_000.0):
        _assert_same(*_both(g, m, 200, backend, losses=losses))
        _kernel_agrees(backend, g, m, losses=losses)


@pytest.mark.parametrize("backend", SORTFREE)
def test_thread_count(backend: str, rng: np.random.Generator) -> None:
    g = rng.random(400_000).astype(np.float32)
    ref = rad.solve(g, 120_000.0, 500, backend=backend, method="sorted", threads=1)
    for t in (1, 2, 3):
        _assert_same(ref, rad.solve(g, 120_000.0, 500, backend=backend, method="sortfree", threads=t))

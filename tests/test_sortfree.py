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


#: Pools where the points above a tie group sum to far less than its own terms (a loss
#: 1e15-1e17 times the others'): rounding lets the group pass every bin edge, and the
#: lowest bin, resolved point by point, must start from the sums before it joined, not
#: from the total less its sums (which cancels to noise and gave another k*).
def _huge_loss_pool(n: int, low: float) -> tuple[np.ndarray, np.ndarray]:
    g = np.full(n, low)
    losses = np.full(n, 0.5 if low == 0.5 else 0.25)
    g[0], losses[0] = 1.0, 1e17 if low == 0.5 else 4272135670726957.5
    return g, losses


@pytest.mark.parametrize("backend", SORTFREE)
@pytest.mark.parametrize(("n", "low"), [(2, 0.5), (4, 0.625), (70_000, 0.5), (200_000, 0.625)])
def test_a_bin_every_point_of_which_joins_is_resolved_from_the_sums_before_it(backend: str, n: int,
                                                                              low: float) -> None:
    g, losses = _huge_loss_pool(n, low)
    for m, b in ((0.0, 1), (0.0, 2), (1e-20, 1), (5e-18, 2)):
        srt, free = _both(g, m, b, backend, losses=losses)
        _assert_same(srt, free)
        if (m, b) == (0.0, 1):  # no mistakes, one draw: the top gain alone (exact D at the
            assert (free.k_star, free.threshold, free.value) == (1, 1.0, 1.0)  # next group < 0)
        _kernel_agrees(backend, g, m, losses, 0.0)


def _scan_bins_loop(cnt, hh, gg, mn, edge_base, shift, nbits, m, acc_h, acc_g, acc_n, last_min, pass_d, fail_d):  # type: ignore[no-untyped-def]
    """The bin walk one bin at a time, in Python floats: the reference for the vectorised one."""
    from rad._backends.radix_select import edge_value

    boundary, lowest = -1, -1
    before = (acc_h, acc_g, acc_n, last_min, pass_d)
    for b in np.flatnonzero(cnt)[::-1].tolist():
        lowest = b
        edge = edge_value(edge_base + (b << shift), nbits)
        h2, g2 = acc_h + float(hh[b]), acc_g + float(gg[b])
        d_edge = edge * h2 - g2 + m
        if d_edge < 0:
            boundary, fail_d = b, d_edge
            break
        before = (acc_h, acc_g, acc_n, last_min, pass_d)
        pass_d = d_edge
        acc_h, acc_g = h2, g2
        acc_n += int(cnt[b])
        last_min = float(mn[b])
    return boundary, lowest, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, before


@pytest.mark.parametrize("nbits", [32, 64])
def test_scan_bins_matches_the_bin_by_bin_walk(nbits: int) -> None:
    """Bins of real histograms (sparse, dense, empty, overflowing sums): the same decision
    and the same running sums, bit for bit, as walking the bins one at a time."""
    from rad._backends.radix_select import FINE, ordered_bits, scan_bins

    rng = np.random.default_rng(nbits)
    checked = 0
    for trial in range(300):
        nb = int(rng.choice([1, 7, 64, FINE]))
        dens = rng.choice([0.0, 0.05, 0.5, 1.0])
        cnt = np.where(rng.random(nb) < dens, rng.integers(1, 50, nb), 0).astype(np.int64)
        scale = 10.0 ** rng.integers(-300, 300) if trial % 10 == 0 else 1.0
        hh = rng.random(nb) * cnt * scale
        gg = hh * rng.random(nb)
        mn = rng.random(nb)
        base = ordered_bits(float(rng.random()), nbits)
        shift = int(rng.integers(0, 8))
        m = float(rng.random() * cnt.sum() * 0.02)
        args = (cnt, hh, gg, mn, base, shift, nbits, m, float(rng.random()), float(rng.random()), 3, 0.5, 1.0, -1.0)
        want = _scan_bins_loop(*args)
        got = scan_bins(*args)
        assert got[:2] == want[:2] and got[4] == want[4], (trial, got, want)
        for x, y in zip(got[2:8], want[2:8]):
            assert x == y or (x != x and y != y), (trial, got, want)
        if want[0] < 0 and want[1] >= 0:  # every bin passed: the state before the lowest joined
            for x, y in zip(got[8], want[8]):
                assert x == y or (x != x and y != y), (trial, got, want)
        checked += want[0] >= 0
    assert checked > 100  # many trials stop inside the bins, not after the last

"""The bracketed first pass of the sort-free search (issue 10) against the sorted scan.

The default search samples the gains, brackets tau, and makes one pass that sums the points
above the bracket and histograms the ones inside it. The answer must never depend on the
bracket: here brackets are *chosen* to miss tau (above it, below it, empty, everything),
to sit exactly on tie groups, and sampled pools are built so that the strided sample lies.
Where the search reports no near tie, ``(tau, k*)`` equal the sorted scan's.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rad
from conftest import BACKENDS
from instances import gain_arrays, loss_arrays
from rad._backends import get_backend


def _hooks() -> dict:
    """``backend -> threshold_bracketed(gains, losses, w, m, threads, lo, hi)``."""
    out = {}
    if "cpp" in BACKENDS:
        from rad import _core

        out["cpp"] = _core.threshold_bracketed
    if "numba" in BACKENDS:
        from rad._backends import numba_backend

        out["numba"] = numba_backend.threshold_bracketed
    return out


HOOKS = _hooks()
pytestmark = pytest.mark.skipif(not HOOKS, reason="no backend with the bracketed first pass")


def _sorted_truth(backend: str, gains, losses, w, m):
    be = get_backend(backend)
    perm = be.argsort_desc(gains, 1)
    k, g_total = be.theorem1_scan(gains, losses, w, perm, m, 1)
    return k, float(gains[perm[k - 1]]), g_total


def _check(backend: str, gains, losses, w, m, lo, hi, threads=2) -> int:
    status, tau, kstar, g_total = HOOKS[backend](gains, losses, w, m, threads, lo, hi)
    assert status in (0, 1)
    k_sorted, tau_sorted, g_sorted = _sorted_truth(backend, gains, losses, w, m)
    if status == 0:
        assert kstar == k_sorted
        assert tau == tau_sorted
        assert g_total == pytest.approx(g_sorted, rel=1e-9, abs=1e-300)
    return status


def _brackets(gains: np.ndarray, tau: float) -> list[tuple[float, float]]:
    """Brackets around, on, above and below tau, with edges on tie groups."""
    vals = np.unique(np.asarray(gains, dtype=np.float64))
    i = int(np.searchsorted(vals, tau))
    pick = lambda j: float(vals[min(max(j, 0), vals.shape[0] - 1)])  # noqa: E731
    up = float(np.nextafter(np.float32(tau) if gains.dtype == np.float32 else tau, np.inf))
    inf = float("inf")
    return [
        (0.0, inf),  # everything inside
        (tau, up),  # exactly the tie group at tau
        (tau, tau),  # empty bracket at tau
        (pick(i + 1), inf),  # tau below the bracket
        (pick(i + 2), pick(i + 3)),  # tau below, bracket among larger ties
        (0.0, tau),  # tau exactly at the top edge (above set starts at tau)
        (0.0, pick(i - 1)),  # tau above the bracket
        (pick(i - 2), pick(i - 1)),  # tau above, edges on smaller ties
        (pick(i - 1), pick(i + 1)),  # edges on both neighbouring groups
        (pick(0), pick(0)),
        (pick(-1), inf),
    ]


@pytest.mark.parametrize("backend", sorted(HOOKS))
@settings(max_examples=30)
@given(
    g=gain_arrays(min_n=1, max_n=80),
    frac=st.sampled_from([0.0, 0.01, 0.3, 0.7, 0.99, 1.0]),
    general=st.booleans(),
    f32=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_bracket_never_changes_the_answer(backend: str, g, frac, general, f32, seed) -> None:
    gains = g.astype(np.float32) if f32 else g
    n = gains.shape[0]
    m = frac * n
    r = np.random.default_rng(seed)
    losses = r.random(n) * 2 if general else None
    w = 0.0 if general else 1.0 - frac
    _, tau, _ = _sorted_truth(backend, gains, losses, w, m)
    for lo, hi in _brackets(gains, tau):
        _check(backend, gains, losses, w, m, lo, hi)


@pytest.mark.parametrize("backend", sorted(HOOKS))
@settings(max_examples=20)
@given(g=gain_arrays(min_n=2, max_n=60), losses=st.data(), frac=st.floats(0.0, 1.0))
def test_bracket_with_general_losses(backend: str, g, losses, frac) -> None:
    lv = losses.draw(loss_arrays(g))
    m = frac * g.shape[0]
    _, tau, _ = _sorted_truth(backend, g, lv, 0.0, m)
    for lo, hi in _brackets(g, tau):
        _check(backend, g, lv, 0.0, m, lo, hi)


def _solve_both(gains, m, b, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rad.NetHarmWarning)
        return (rad.solve(gains, m, b, backend=backend, method="sorted"),
                rad.solve(gains, m, b, backend=backend, method="sortfree"))


def _sampled(n: int) -> np.ndarray:
    """Where the strided sample of a pool of n < 2^24 points looks (runs of 64)."""
    from rad._backends.radix_select import SAMPLE_RUN, SAMPLE_SMALL

    runs = SAMPLE_SMALL // SAMPLE_RUN
    return (np.arange(n) % ((n - SAMPLE_RUN) // (runs - 1))) < SAMPLE_RUN


#: Pools whose strided sample sees something else than the pool.
LIARS = {
    # high values exactly where the sample looks, low values elsewhere
    "sampled_runs_high": lambda n: np.where(_sampled(n), 0.9, 0.1),
    # sampled runs low, the rest high
    "sampled_runs_low": lambda n: np.where(_sampled(n), 0.1, 0.9),
    "ascending": lambda n: np.linspace(0.0, 1.0, n),
    "descending": lambda n: np.linspace(1.0, 0.0, n),
    "two_values_sorted": lambda n: np.where(np.arange(n) < n // 3, 0.8, 0.2),
    "steps": lambda n: np.floor(np.arange(n) / 997.0) % 7 / 7.0,
}


@pytest.mark.parametrize("backend", sorted(HOOKS))
@pytest.mark.parametrize("kind", sorted(LIARS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sample_that_lies(backend: str, kind: str, dtype) -> None:
    n = 200_003
    gains = LIARS[kind](n).astype(dtype)
    for frac in (0.001, 0.3, 0.9):
        m = frac * n
        sorted_sol, free_sol = _solve_both(gains, m, 1000, backend)
        assert free_sol.k_star == sorted_sol.k_star
        assert free_sol.threshold == sorted_sol.threshold
        assert free_sol.params == sorted_sol.params
        assert free_sol.value == sorted_sol.value


@pytest.mark.parametrize("backend", sorted(HOOKS))
def test_large_pool_all_thread_counts(backend: str) -> None:
    """A pool large enough for the strided sample; 1, 2 and 16 threads (clamped to the
    cores) give the same solution and the same indices."""
    gains = np.random.default_rng(5).random(600_000).astype(np.float32)
    m, b = 0.3 * gains.shape[0], 1000
    ref = rad.solve(gains, m, b, backend=backend, method="sorted", threads=1)
    picks = [rad.select(gains, m, b, rng=7, backend=backend, threads=t) for t in (1, 2, 16)]
    for t in (1, 2, 16):
        sol = rad.solve(gains, m, b, backend=backend, threads=t)
        assert (sol.k_star, sol.threshold, sol.params, sol.value) == (ref.k_star, ref.threshold, ref.params, ref.value)
    for p in picks[1:]:
        np.testing.assert_array_equal(p, picks[0])


def test_backends_pick_the_same_indices_at_every_thread_count() -> None:
    """C++ and Numba give the same indices at 1, 2 and 16 threads (16 clamped to the cores)."""
    names = [b for b in ("cpp", "numba") if b in BACKENDS]
    if len(names) < 2:
        pytest.skip("needs both compiled backends")
    gains = np.random.default_rng(11).random(300_000).astype(np.float32)
    m, b = 0.3 * gains.shape[0], 777
    out = {(name, t): rad.select(gains, m, b, rng=3, backend=name, threads=t) for name in names for t in (1, 2, 16)}
    first = next(iter(out.values()))
    for v in out.values():
        np.testing.assert_array_equal(v, first)


@pytest.mark.parametrize("backend", sorted(HOOKS))
def test_invalid_values_are_reported(backend: str) -> None:
    for bad in (np.nan, np.inf, -1.0):
        g = np.random.default_rng(0).random(100_000)
        g[70_001] = bad
        status = HOOKS[backend](g, None, 0.5, 10.0, 2, 0.0, float("inf"))[0]
        assert status == 2
        with pytest.raises(ValueError, match=r"gains\[70001\]"):
            rad.select(g, 10.0, 5, backend=backend)


def _walk_reference(vals, avals, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, m, g_total, scale):
    """The boundary bin's walk as a plain loop: tie groups in descending order, D tested at
    each group's first point, the group's points added one by one (the definition that
    ``radix_select.resolve_gathered`` computes with running sums)."""
    inf = float("inf")
    order = sorted(range(len(vals)), key=lambda i: -float(vals[i]))  # stable, like the kernels
    h, gs, tau, k = acc_h, acc_g, last_min, acc_n
    d_in, d_out = pass_d, fail_d
    s = 0
    while s < len(order):
        y = float(vals[order[s]])
        d = y * h - gs + m
        if d < 0:
            d_out = d
            break
        d_in = inf if k == 0 else d
        tau = y
        while s < len(order) and float(vals[order[s]]) == y:
            a = float(avals[order[s]])
            if a > 0:
                h += 1.0 / a
                gs += y / a
            s += 1
            k += 1
    margin = 1e-10 * (abs(tau) * h + gs + m)
    status = int(abs(d_in) < margin or abs(d_out) < margin or abs(g_total - m) < 1e-10 * scale)
    if not all(np.isfinite([h, gs, g_total])) or d_in != d_in or d_out != d_out:
        status = 1
    return status, tau, k, g_total


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40), st.integers(0, 5), st.integers(0, 2**32 - 1))
def test_resolve_gathered_is_the_walk(size: int, kind: int, seed: int) -> None:
    """The vectorised resolution of a gathered bin against the loop that defines it: ties,
    zero and negative zero gains, a <= 0, sums that start at zero or not, and (kind 5) an
    empty start with m = 0, where D is exactly 0 at the first group (the near-tie flag)."""
    from rad._backends.radix_select import resolve_gathered

    rng = np.random.default_rng(seed)
    vals = rng.random(size)
    if kind == 1:
        vals = np.round(vals * 4) / 4  # few distinct values: long tie groups
    if kind == 2:
        vals[rng.random(size) < 0.3] = 0.0
    avals = vals * (1 + rng.random()) if kind != 3 else rng.random(size) - 0.3  # kind 3: some a <= 0
    if kind == 4 and size:
        avals[rng.integers(0, size)] = 0.0
        vals[rng.integers(0, size)] = -0.0
    acc_h = float(rng.random() * 10) if seed % 3 else 0.0
    m = float(rng.random() * 5)
    if kind == 5:
        acc_h, m = 0.0, 0.0
    args = (vals, avals, acc_h, acc_h * float(rng.random()), int(rng.integers(0, 3)) if acc_h else 0,
            float(rng.random()), float(rng.random()), -float(rng.random()), m, float(rng.random() * 10), 10.0)
    assert str(resolve_gathered(*args)) == str(_walk_reference(*args))


def test_resolve_gathered_flags_a_tie_at_a_later_group() -> None:
    """D exactly 0 at the second tie group of a bin that starts the support (nothing above
    it): the near-tie flag must see that group's D, as the walk does."""
    from rad._backends.radix_select import resolve_gathered

    vals = np.array([0.25, 1.0, 0.5, 1.0])
    avals = 2.0 * vals
    h1, g1 = 2 * (1.0 / 2.0), 2 * (1.0 / 2.0)  # the first group: two points of g = 1, a = 2
    m = g1 - 0.5 * h1  # D at the second group (g = 0.5): 0.5 h1 - g1 + m = 0 exactly
    args = (vals, avals, 0.0, 0.0, 0, float("inf"), float("inf"), float("-inf"), m, 10.0, 10.0 + m)
    got = resolve_gathered(*args)
    assert got == _walk_reference(*args)
    assert got[0] == 1  # the tie is flagged


def _handed_over(gains, losses, w, tau) -> tuple[float, float, int, float]:
    """The support sums threshold_support hands over at tau: the NumPy definition, except
    that with RAD losses G is count / (1 + w) and min a is a(tau) (rad_support_sums in
    support.hpp), checked here against the definition: within 1e-12, and exactly."""
    h, g, count, min_a = get_backend("numpy").support_sums(gains, losses, w, tau, 1)
    if losses is None:
        a_tau = tau + w * tau if count else float("inf")
        assert float(min_a) == a_tau
        assert count / (1.0 + w) == pytest.approx(float(g), rel=1e-12, abs=1e-300)
        g, min_a = count / (1.0 + w), a_tau
    return float(h), float(g), int(count), float(min_a)


def _caps_bind_is_true(gains, losses, w, m, b, tau, kstar, g_total, has) -> None:
    """Status 3 (the search stopped where the caps bind whatever tau is) is true of the
    sorted scan: k* <= the bound returned < b, G_n >= m, no tau and no sums."""
    k_sorted, _, g_sorted = _sorted_truth("cpp", gains, losses, w, m)
    assert math.isnan(tau) and not has
    assert k_sorted <= kstar < b
    assert g_sorted >= m and g_total == pytest.approx(g_sorted, rel=1e-11, abs=1e-300)


def _fused_matches_definition(gains, losses, w, m, b, threads) -> None:
    """The C++ search with the support sums sharing its read equals the search and then
    the NumPy definition of the canonical support sums at its tau."""
    from rad import _core

    status, tau, kstar, g_total, has, h, g, count, min_a, sketch = _core.threshold_support(
        gains, losses, w, m, b, threads)
    assert (sketch is not None) == has
    s_status, s_tau, s_kstar, s_g_total = _core.threshold_search(gains, losses, w, m, threads)
    # Status 1 (a near tie: the caller takes the sorted path) may differ, as the two judge
    # the rounding margin with different sums; a decided answer is the sorted scan's.
    assert status in (0, 1, 3)
    if status == 0:
        k_sorted, tau_sorted, _ = _sorted_truth("cpp", gains, losses, w, m)
        assert (tau, kstar) == (tau_sorted, k_sorted)
    if status == 3:
        _caps_bind_is_true(gains, losses, w, m, b, tau, kstar, g_total, has)
    if status == s_status == 0:
        assert (tau, kstar) == (s_tau, s_kstar)
    # G over the pool only decides G >= m, flagged as a near tie within 1e-10 of m: the
    # float32 first pass takes it as count / (1 + w), each term within a few ulps (the
    # lane sums of the exact pass drift further).
    assert g_total == pytest.approx(s_g_total, rel=1e-11, abs=1e-300)
    assert has == (status == 0 and tau > 0 and b <= kstar)
    if has:
        assert (h, g, count, min_a) == _handed_over(gains, losses, w, tau)


@pytest.mark.skipif("cpp" not in BACKENDS, reason="the shared read is the C++ backend's")
@settings(max_examples=40, deadline=None)
@given(
    g=gain_arrays(min_n=1, max_n=300),
    frac=st.sampled_from([0.0, 0.01, 0.3, 0.7, 0.99, 1.0]),
    b_frac=st.sampled_from([0.0, 0.01, 0.5, 1.0]),
    general=st.booleans(),
    f32=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_search_with_support_sums_is_the_two_kernels(g, frac, b_frac, general, f32, seed) -> None:
    gains = g.astype(np.float32) if f32 else g
    n = gains.shape[0]
    losses = np.random.default_rng(seed).random(n) * 2 if general else None
    w = 0.0 if general else 1.0 - frac
    _fused_matches_definition(gains, losses, w, frac * n, max(1, int(b_frac * n)), 2)


@pytest.mark.skipif("cpp" not in BACKENDS, reason="the shared read is the C++ backend's")
@pytest.mark.parametrize("kind", ["uniform", "coarse_ties", *sorted(LIARS)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_search_with_support_sums_across_blocks(kind: str, dtype) -> None:
    """Pools of several blocks, where the boundary bin's points fall in some blocks and not
    others (only those blocks are summed again), at 1 and 2 threads, b below and above k*."""
    n = 5 * (1 << 16) + 17
    r = np.random.default_rng(3)
    gains = {"uniform": lambda: r.random(n), "coarse_ties": lambda: np.round(r.random(n) * 300) / 300,
             **LIARS}[kind]
    gains = (gains() if kind in ("uniform", "coarse_ties") else gains(n)).astype(dtype)
    for frac in (0.001, 0.3, 0.9):
        for b in (1, 1000, n // 2):
            for threads in (1, 2):
                _fused_matches_definition(gains, None, 1.0 - frac, frac * n, b, threads)


@pytest.mark.skipif("cpp" not in BACKENDS, reason="the shared read is the C++ backend's")
def test_search_stops_where_the_caps_bind() -> None:
    """With b above every k* the first pass allows (the capped path's workload: m = 0.001 n,
    b = n / 10) the C++ search skips its support pass and says so (status 3, true of the
    sorted scan), and rad.select gives the same indices as the Numba and NumPy backends;
    with b below k* it resolves as before."""
    from rad import _core

    n = 3 * (1 << 16) + 17
    gains = np.random.default_rng(2).random(n).astype(np.float32)
    m = 0.001 * n
    w = 1.0 - m / n
    for threads in (1, 2):
        status, tau, kstar, g_total, has = _core.threshold_support(gains, None, w, m, n // 10, threads)[:5]
        assert status == 3
        _caps_bind_is_true(gains, None, w, m, n // 10, tau, kstar, g_total, has)
        assert _core.threshold_support(gains, None, w, m, 10, threads)[0] == 0
    want = rad.select(gains, m, n // 10, rng=3, backend="numpy")
    for backend in BACKENDS:
        np.testing.assert_array_equal(rad.select(gains, m, n // 10, rng=3, backend=backend, threads=2), want)


@pytest.mark.skipif("cpp" not in BACKENDS, reason="the shared read is the C++ backend's")
def test_search_with_support_sums_with_signed_zeros() -> None:
    """Float32 pools of several blocks holding +0.0 and -0.0 (valid gains): the first pass
    recounts the chunks where its extrema saw a zero, and the collecting pass tests its
    range on magnitude bits, where -0.0 is 0. Among them, pools with few positive gains
    put tau at the smallest of them, so the collected range reaches down to the zeros."""
    n = 3 * (1 << 16) + 101
    r = np.random.default_rng(5)
    for share, negative in ((0.01, 0.5), (0.5, 0.5), (0.999, 0.5), (0.01, 0.0), (0.01, 1.0)):
        gains = r.random(n).astype(np.float32)
        zero = r.random(n) < share
        gains[zero] = np.where(r.random(int(zero.sum())) < negative, np.float32(-0.0), np.float32(0.0))
        gains[r.random(n) < 0.001] = np.float32(1e-30)  # tiny positives beside the zeros
        for frac in (0.001, 0.3, 0.9):
            for threads in (1, 2):
                _fused_matches_definition(gains, None, 1.0 - frac, frac * n, 1000, threads)


# ------------------------------------------------------------------ the float32 first pass
#
# With float32 gains and RAD losses threshold_support's first pass approximates 1/a in
# float (approx_locate in threshold.hpp, rad._backends.numba_first_pass) and hands on every
# fine bin it cannot decide within its margin 2^-margin_bits; the exact sums come from the
# support pass. These tests choose the bracket and widen the margin (8 and 3 bits gather
# many bins, or more than the gather limit, which sends the search to its fallback): the
# answer and the support sums must not change.

MARGINS = (20, 8, 3)


def _support_hooks() -> dict:
    """``backend -> (gains, w, m, b, threads, lo, hi, margin_bits) -> (status, tau, k*, g_total, sums or None)``."""
    out = {}
    if "cpp" in BACKENDS:
        from rad import _core

        def cpp(gains, w, m, b, threads, lo, hi, margin_bits, steer_at=-1.0):
            r = _core.threshold_support_bracketed(gains, None, w, m, b, threads, lo, hi, margin_bits, steer_at)
            return (*r[:4], tuple(r[5:9]) if r[4] else None)

        out["cpp"] = cpp
    if "numba" in BACKENDS:
        from rad._backends import numba_first_pass
        from rad._backends.radix_select import ordered_bits

        def numba(gains, w, m, b, threads, lo, hi, margin_bits, steer_at=-1.0):
            r = numba_first_pass.search_with_sums(gains, w, m, b, threads, (ordered_bits(lo, 32), ordered_bits(hi, 32)),
                                                  margin_bits, steer_at)
            if r is None:  # the path does not apply: the search and the support pass in turn
                r = get_backend("numba").threshold_support(gains, None, w, m, b, threads)
            return r[:5]

        out["numba"] = numba
    return out


SUPPORT_HOOKS = _support_hooks()


def _support_hook_matches(backend, gains, w, m, b, threads, lo, hi, margin_bits, *steer) -> int:
    status, tau, kstar, g_total, sums = SUPPORT_HOOKS[backend](gains, w, m, b, threads, lo, hi, margin_bits, *steer)
    assert status in (0, 1, 3)
    if status == 3:
        _caps_bind_is_true(gains, None, w, m, b, tau, kstar, g_total, sums is not None)
        return status
    k_sorted, tau_sorted, g_sorted = _sorted_truth(backend, gains, None, w, m)
    if status == 0:
        assert (kstar, tau) == (k_sorted, tau_sorted)
        assert g_total == pytest.approx(g_sorted, rel=1e-11, abs=1e-300)
    assert (sums is not None) == (status == 0 and tau > 0 and b <= kstar)
    if sums is not None:
        assert tuple(sums) == _handed_over(gains, None, w, tau)
    return status


@pytest.mark.parametrize("backend", sorted(SUPPORT_HOOKS))
@settings(max_examples=40, deadline=None)
@given(
    g=gain_arrays(min_n=1, max_n=200),
    frac=st.sampled_from([0.0, 0.01, 0.3, 0.7, 0.99, 1.0]),
    b_frac=st.sampled_from([0.0, 0.01, 0.5, 1.0]),
    margin_bits=st.sampled_from(MARGINS),
)
def test_float32_first_pass_never_changes_the_answer(backend: str, g, frac, b_frac, margin_bits) -> None:
    gains = g.astype(np.float32)
    n = gains.shape[0]
    m, w, b = frac * n, 1.0 - frac, max(1, int(b_frac * n))
    _, tau, _ = _sorted_truth(backend, gains, None, w, m)
    for lo, hi in _brackets(gains, tau):
        _support_hook_matches(backend, gains, w, m, b, 2, lo, hi, margin_bits)


@pytest.mark.parametrize("backend", sorted(SUPPORT_HOOKS))
@pytest.mark.parametrize("kind", ["uniform", "coarse_ties", *sorted(LIARS)])
def test_support_pass_steered_anywhere_in_the_range(backend: str, kind: str) -> None:
    """The fused support pass sums from the first pass's estimate of tau inside the
    gathered range, subtracts the range's points above it for the resolution, and sums again
    the blocks holding a point between it and tau. Moved to the range's bottom, a point
    inside and its top (and left at the estimate), with the default margin and a wide one
    (many bins gathered: tau far from the steer, on either side), the answer and the sums
    are the definition's. On uniform gains some C++ runs must actually steer below the top
    (the C++ hook says where it summed from)."""
    if backend == "cpp":
        from rad import _core
    n = 3 * (1 << 16) + 17
    r = np.random.default_rng(7)
    make = {"uniform": lambda: r.random(n), "coarse_ties": lambda: np.round(r.random(n) * 300) / 300,
            **{k: (lambda f=f: f(n)) for k, f in LIARS.items()}}
    gains = make[kind]().astype(np.float32)
    steered = 0
    for frac in (0.01, 0.3, 0.9):
        m, w = frac * n, 1.0 - frac
        _, tau, _ = _sorted_truth(backend, gains, None, w, m)
        for lo, hi in ((0.0, float("inf")), (tau * 0.99, tau * 1.01 + 1e-30)):
            for margin_bits in (4, 20):
                for steer_at in (-1.0, 0.0, 0.37, 1.0):
                    for threads in (1, 2):
                        _support_hook_matches(backend, gains, w, m, 1000, threads, lo, hi, margin_bits, steer_at)
                        if backend == "cpp":
                            got = _core.threshold_support_bracketed(gains, None, w, m, 1000, threads, lo, hi,
                                                                    margin_bits, steer_at)
                            steered += not np.isnan(got[9])
    assert steered > 0 or kind != "uniform" or backend != "cpp"


@pytest.mark.parametrize("backend", sorted(SUPPORT_HOOKS))
@pytest.mark.parametrize("kind", ["uniform", "coarse_ties", "near_float_max", "near_float_min", *sorted(LIARS)])
@pytest.mark.parametrize("margin_bits", MARGINS)
def test_float32_first_pass_across_blocks(backend: str, kind: str, margin_bits: int) -> None:
    """Pools of several blocks with the sample's own bracket and with brackets around tau,
    at 1 and 2 threads. Gains near FLT_MAX (1/x subnormal in float) take the exact first
    pass, and those below 2^-125 lie below the float pass's bracket (the walk then checks
    them, or the radix search decides); the answer is the same either way."""
    n = 3 * (1 << 16) + 17
    r = np.random.default_rng(11)
    make = {
        "uniform": lambda: r.random(n),
        "coarse_ties": lambda: np.round(r.random(n) * 300) / 300,
        "near_float_max": lambda: r.random(n) * 3e38,
        "near_float_min": lambda: (r.random(n) + 0.5) * 2.0**-125,
        **{k: (lambda f=f: f(n)) for k, f in LIARS.items()},
    }
    gains = make[kind]().astype(np.float32)
    be = get_backend(backend)
    for frac in (0.001, 0.3, 0.9):
        m, w = frac * n, 1.0 - frac
        _, tau, _ = _sorted_truth(backend, gains, None, w, m)
        up = float(np.nextafter(np.float32(tau), np.float32(np.inf)))
        for threads in (1, 2):
            for b in (1, 1000):
                want = be.threshold_support(gains, None, w, m, b, threads)
                got = SUPPORT_HOOKS[backend](gains, w, m, b, threads, tau * 0.999, tau * 1.001 + 1e-30, margin_bits)
                if want[0] == got[0] == 0:
                    assert got[1:3] == want[1:3] and got[4] == want[4]
                _support_hook_matches(backend, gains, w, m, b, threads, tau * 0.99, tau * 1.01, margin_bits)
                _support_hook_matches(backend, gains, w, m, b, threads, tau, up, margin_bits)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [np.nan, -1.0, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_invalid_value_in_a_sampled_pool(backend: str, bad: float, dtype) -> None:
    """An invalid gain in a pool large enough for the sampled bracket is reported with its
    index (a NaN is neither above nor below a bracket: Numba's bracket pass once binned
    it past the end of its histogram and crashed)."""
    gains = np.random.default_rng(0).random(300_000).astype(dtype)
    gains[123_457] = bad
    with pytest.raises(ValueError, match="123457"):
        rad.select(gains, 0.3 * gains.shape[0], 1000, rng=1, backend=backend, threads=2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_negative_values_inside_the_bracket(backend: str, dtype) -> None:
    """Negative gains whose magnitudes lie inside the sampled bracket (and above and below
    it) are reported by index, on every thread count. The C++ float32 pass binned such a
    point by its raw bits (sign included), far past the end of its fine bins."""
    gains = np.random.default_rng(0).random(300_000).astype(dtype)
    # Between the sample's runs of 64 (2^14 points, every 1,176th run start): the sample
    # sees only valid gains, so the bracket is narrow and the pass meets the negatives.
    where = 1176 * np.arange(100, 255) + 600
    gains[where] = -np.linspace(0.0005, 0.9995, where.shape[0])
    for threads in (1, 2):
        with pytest.raises(ValueError, match=str(where[0])):
            rad.select(gains, 0.3 * gains.shape[0], 1000, rng=1, backend=backend, threads=threads)


def _approx_sums(backend: str, gains: np.ndarray, lo: float, hi: float, threads: int) -> tuple:
    """The float32 first pass's (sum of float 1/x above the bracket, n above, n below, n positive, unsafe)."""
    if backend == "cpp":
        from rad import _core

        return _core.approx_first_pass_sums(gains, lo, hi, threads)
    from rad._backends import numba_first_pass as fp
    from rad._backends.radix_select import bracket_shift, ordered_bits

    ulo, uhi = ordered_bits(lo, 32), ordered_bits(hi, 32)
    res = fp._approx_pass(gains, gains.view(np.uint32), np.float32(lo), np.float32(hi), np.uint32(ulo),
                          np.uint32(bracket_shift(ulo, uhi, fp.APPROX_FINE)), threads)
    return float(res[0]), int(res[2]), int(res[3]), int(res[4]), bool(res[5])


@pytest.mark.parametrize("backend", sorted(SUPPORT_HOOKS))
@pytest.mark.parametrize("threads", [1, 2])
def test_float32_first_pass_sum_within_its_bound(backend: str, threads: int) -> None:
    """The first pass's sum of float reciprocals is within 2^-21 of the exact sum (its
    margin of doubt is 2^-20) on a pool where every float reciprocal rounds up by at least
    0.4 of its largest error 2^-24: the errors add up instead of cancelling (the sum is
    measured at least 0.4 * 2^-24 high, so the pool does stress it). The AVX-512 pass's
    rcp14 and Newton step give the IEEE quotient on all of these but those within 2^-28
    of a rounding midpoint (its error bound is 2^-24 (1 + 2^-4)); a reciprocal with a
    larger error (rcp14 alone, fast math) or longer runs of float sums would break the
    bound."""
    import math

    x = np.random.default_rng(0).uniform(0.5, 1.0, 2_000_000).astype(np.float32)
    xd = x.astype(np.float64)
    up = ((np.float32(1.0) / x).astype(np.float64) - 1.0 / xd) * xd  # relative error of the float 1/x
    pool = np.tile(x[up > 0.4 * 2.0**-24], 8)
    exact = math.fsum((1.0 / pool.astype(np.float64)).tolist())
    h, above, below, positive, unsafe = _approx_sums(backend, pool, 0.25, 0.5, threads)
    assert (above, below, positive, unsafe) == (pool.shape[0], 0, pool.shape[0], False)
    rel = (h - exact) / exact
    assert 0.4 * 2.0**-24 <= rel <= 2.0**-21
    # -0.0 and 0.0 are valid gains below any bracket: the pass goes on (neither is unsafe
    # nor positive), counting them exactly where its extrema saw them.
    for zero in (np.float32(-0.0), np.float32(0.0)):
        z = pool.copy()
        z[::1000] = zero
        h0, above0, below0, positive0, unsafe0 = _approx_sums(backend, z, 0.25, 0.5, threads)
        assert (below0, unsafe0) == (z.shape[0] - above0, False) and positive0 == above0 == int(np.count_nonzero(z))


# --------------------------------------------------------------- Numba's compress intrinsics
# The first pass and the bracket pass bin their points inside the bracket from buffers that
# two LLVM intrinsics fill (masked compress-stores): each against NumPy, and the passes
# again where LLVM must lower them without AVX-512.


@pytest.mark.skipif("numba" not in BACKENDS, reason="Numba not installed")
def test_numba_intrinsics_against_numpy() -> None:
    """The first pass's run (_approx_run: lane counts, smallest bits above, unsafe flags,
    the lanes' float-then-double sums, the inside points' bits) and the bracket pass's
    index compress (_compress_bits), against the same quantities in NumPy."""
    import numba as nb

    from rad._backends.numba_backend import _compress_bits
    from rad._backends.numba_first_pass import _approx_run

    @nb.njit
    def runs(raw, ulo, uhi, lanes, hs, buf):
        pos = 0
        for i in range(0, raw.shape[0], 64):
            pos += _approx_run(raw, i, ulo, uhi, lanes, hs, buf, pos)
        return pos

    @nb.njit
    def bits(masks, buf):
        pos = 0
        for j in range(masks.shape[0]):
            pos += _compress_bits(masks[j], 1000 + 64 * j, buf, pos)
        return pos

    rng = np.random.default_rng(7)
    x = rng.uniform(-2.0, 2.0, 64 * 300).astype(np.float32)
    x[::37] = np.nan
    x[::41] = -0.0
    x[::43] = 0.0
    raw = x.view(np.uint32)
    lo, hi = np.float32(0.25), np.float32(0.75)
    ulo, uhi = lo.view(np.uint32), hi.view(np.uint32)
    lanes = np.zeros(64, np.int32)
    lanes[32:48] = -1
    hs = np.zeros(16)
    buf = np.zeros(x.shape[0] + 64, np.uint32)
    got = runs(raw, ulo, uhi, lanes, hs, buf)

    mag = raw & np.uint32(0x7FFFFFFF)
    up = mag >= uhi
    inside = (mag >= ulo) & ~up
    assert got == int(inside.sum()) > 1000
    np.testing.assert_array_equal(buf[:got], mag[inside])
    by_lane = lambda v: v.reshape(-1, 16)  # noqa: E731  (point 16 k + j is lane j)
    np.testing.assert_array_equal(lanes[0:16], by_lane(up).sum(axis=0))
    np.testing.assert_array_equal(lanes[16:32], by_lane(mag != 0).sum(axis=0))
    np.testing.assert_array_equal(lanes[32:48].view(np.uint32), np.where(by_lane(up), by_lane(mag), 0xFFFFFFFF).min(axis=0))
    unsafe = (raw > np.uint32(0x7E000000)) & (raw != np.uint32(0x80000000))
    np.testing.assert_array_equal(lanes[48:64] != 0, by_lane(unsafe).any(axis=0))
    with np.errstate(all="ignore"):
        terms = np.where(up, np.float32(1.0) / x, np.float32(0.0)).reshape(-1, 4, 16)
    want = np.zeros(16)
    for run in terms:  # each run: the four vectors added in float, in order, then in double
        acc = np.zeros(16, np.float32)
        for v in run:
            acc = acc + v
        want += acc.astype(np.float64)
    np.testing.assert_array_equal(hs, want)  # NaN lanes compare equal

    masks = rng.integers(0, 2**63, 300, dtype=np.int64).astype(np.uint64) & rng.integers(0, 2**63, 300).astype(np.uint64)
    masks[:3] = [0, np.uint64(2**64 - 1), np.uint64(2**63)]
    want_idx = np.concatenate([1000 + 64 * j + np.flatnonzero([(int(mk) >> k) & 1 for k in range(64)])
                               for j, mk in enumerate(masks)])
    for dtype in (np.int64, np.int32):  # DepRound's blocks read their bitmaps into int32 rows
        ibuf = np.zeros(64 * masks.shape[0] + 64, dtype)
        got = bits(masks, ibuf)
        assert got == want_idx.shape[0]
        np.testing.assert_array_equal(ibuf[:got], want_idx)


@pytest.mark.skipif("numba" not in BACKENDS or "cpp" not in BACKENDS, reason="needs Numba and the compiled module")
def test_numba_passes_without_avx512(tmp_path) -> None:
    """Numba compiled for a CPU without AVX-512 (LLVM expands the compress-stores into
    scalar code) gives the C++ backend's indices: float32 (the first pass) and float64
    with given losses (the bracket pass), pools large enough for a sampled bracket, and
    a capped float32 pool (DepRound's bitmaps of taken items read out by compresses)."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, rad\n"
        "rng = np.random.default_rng(3)\n"
        "g = rng.random(400_000); l = rng.random(400_000) * 0.5; m = 0.3 * g.shape[0]\n"
        "for gains, kw in ((g.astype(np.float32), {}), (g, {'losses': l})):\n"
        "    for t in (1, 2):\n"
        "        a = rad.select(gains, m, 1000, rng=5, backend='numba', threads=t, **kw)\n"
        "        b = rad.select(gains, m, 1000, rng=5, backend='cpp', threads=t, **kw)\n"
        "        assert np.array_equal(a, b), (gains.dtype, t)\n"
        "g32 = g.astype(np.float32); n = g32.shape[0]\n"
        "a = rad.select(g32, 0.001 * n, n // 10, rng=5, backend='numba')\n"
        "assert rad.solve(g32, 0.001 * n, n // 10).capped\n"
        "assert np.array_equal(a, rad.select(g32, 0.001 * n, n // 10, rng=5, backend='cpp')), 'capped'\n"
        "print('same')\n"
    )
    env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("same"), out.stderr[-2000:]


@pytest.mark.skipif("cpp" not in BACKENDS, reason="needs the compiled module")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sample_bracket_sorts_rad_values_alone(dtype) -> None:
    """With RAD losses the C++ sample is sorted by its values alone (a radix sort of their
    bits); with the same losses given as an array it is argsorted as (g, a) pairs. Both
    give the same bracket (a = g + w g is the same double either way), and it holds tau."""
    from rad import _core
    from rad._backends.radix_select import ordered_bits

    rng = np.random.default_rng(4)
    n = 2_000_000
    pools = [rng.random(n), rng.beta(0.3, 3.0, n), np.round(rng.random(n) * 50) / 50]
    for gains in (p.astype(dtype) for p in pools):
        m = 0.3 * n
        w = 1.0 - m / n
        given = w * gains.astype(np.float64)
        lo, hi = _core.sample_bracket(gains, None, w, m, 2)
        assert (lo, hi) == _core.sample_bracket(gains, given, w, m, 2)
        tau = _core.threshold_search(gains, None, w, m, 2)[1]
        bits = 32 if dtype == np.float32 else 64
        assert lo <= ordered_bits(tau, bits) < hi


@pytest.mark.skipif("numba" not in BACKENDS, reason="needs Numba")
@given(
    values=st.lists(st.sampled_from([0.0, 1e-310, 2.0**-149, 1e-30, 0.25, 0.5, 0.5, 1.0, 3.0, 1e30, 1e300]),
                    min_size=0, max_size=300),
    noise=st.integers(0, 2**32 - 1),
    with_losses=st.booleans(),
    w=st.sampled_from([0.0, 0.5, 0.999, 7.0]),
    m_frac=st.floats(0.0, 1.0),
)
@settings(max_examples=300, deadline=None)
def test_numba_sample_rank_matches_numpy(values, noise, with_losses, w, m_frac) -> None:
    """The Numba backend's compiled sample scan stops at the same rank as the NumPy one
    (:func:`rad._backends.radix_select.sample_rank`, which forms every rank's D) on
    samples with ties, zero gains and zero ``a``, subnormal gains (whose ``1/a`` overflows
    the sums to inf), and on a descending view with a negative stride, as
    ``sample_bracket`` passes it; and the brackets built on the two agree."""
    from rad._backends import numba_backend
    from rad._backends.radix_select import sample_bracket, sample_rank

    rng = np.random.default_rng(noise)
    mixed = np.asarray(values + list(rng.random(len(values))), dtype=np.float64)
    y = np.sort(mixed)[::-1]  # the negative-stride view sample_bracket scans
    a = y + (rng.random(y.shape[0]) * 2.0 * y if with_losses else w * y)
    f = 1.0 + rng.random() * 1000.0
    m = m_frac * float(y.shape[0]) * f
    assert numba_backend._sample_rank(y, a, f, m) == sample_rank(y, a, f, m)
    assert numba_backend._sample_rank(np.ascontiguousarray(y), a, f, m) == sample_rank(y, a, f, m)
    gains = np.minimum(mixed, 3e38).astype(np.float32)  # 1e300 as the largest float32 gains
    losses = None if not with_losses else (rng.random(gains.shape[0]) * gains).astype(np.float64)
    m_pool = m_frac * gains.shape[0]
    assert (sample_bracket(gains, losses, w, m_pool, rank=numba_backend._sample_rank)
            == sample_bracket(gains, losses, w, m_pool))

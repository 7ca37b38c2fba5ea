"""The RAD capped path's ``O(log n)`` gain fill (:mod:`rad._solve.capped_rad`).

Each evaluation is checked against ``F(nu)`` computed exactly in rationals from its
definition (``docs/design.md`` §1, "Dualising"), with the tolerance of a sequential sum of
``n`` non-negative terms (``(n + 4) eps`` of their total), and against the backends'
``O(n)`` kernel on the sorted arrays. The span sums must be the same bits on every backend.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

import rad
from conftest import BACKENDS
from rad._backends import get_backend
from rad._backends import numpy_backend as reference
from rad._solve import capped as capped_mod
from rad._solve.capped import CappedContext
from rad._solve.capped_rad import SPAN

EPS = np.finfo(float).eps


def _pools(rng: np.random.Generator):
    """Uniform, heavy ties, 60 orders of magnitude, float32, zeros and -0.0, w = 0."""
    yield rng.uniform(0, 1, 300), 0.7
    yield rng.integers(0, 4, 250).astype(np.float64) * 0.25, 0.9
    yield np.exp(rng.uniform(-70, 70, 200)), 0.3
    yield rng.uniform(0, 1, 280).astype(np.float32), 0.999
    g = rng.uniform(0, 1, 260)
    g[::5] = 0.0
    g[1::7] = -0.0
    yield g, 0.5
    yield rng.uniform(0, 1, 120), 0.0


def _exact_gain_fill(g_sorted: np.ndarray, w: float, nu: float, b: int, m: float):
    """F(nu), F'(nu+), cut, resid from the definition, in rationals (None: the loss fill)."""
    g = [float(x) for x in g_sorted]
    a = [Fraction(x + w * x) for x in g]  # a as the kernels round it, then exact
    nuf = Fraction(nu)
    cap = [Fraction(1) if ai <= nuf else nuf / ai for ai in a]
    if sum(cap) < b:
        return None
    run, start = Fraction(0), 0
    n = len(g)
    while start < n:  # tie groups in descending gain; J is the first whose caps reach b
        end = start
        while end < n and g[end] == g[start]:
            end += 1
        group = sum(cap[start:end])
        if run + group >= b:
            break
        run += group
        start = end
    cut = Fraction(g[start])
    resid = b - run
    value = sum(Fraction(g[i]) * cap[i] for i in range(start)) + cut * resid - Fraction(m) * nuf
    free = [i for i in range(start) if a[i] > nuf]
    ga = sum((Fraction(g[i]) / a[i] for i in free), Fraction(0))
    inv = sum((1 / a[i] for i in free), Fraction(0))
    slope = ga - cut * inv - Fraction(m)
    return value, slope, float(cut), resid, value + Fraction(m) * nuf, ga + cut * inv + Fraction(m)


def _multi_span_pools(rng: np.random.Generator, span: int):
    """Pools over many spans: the offsets, searches across span ends, and tie groups (of
    about a third of the pool) that straddle them."""
    n = 15 * span + 17
    yield rng.uniform(0, 1, n), 0.7
    yield rng.integers(0, 3, n).astype(np.float64) * 0.5, 0.9
    g = rng.uniform(0, 1, n).astype(np.float32)
    g[: n // 2] = 0.0
    yield g, 0.4


def _check_gain_fill(
    gains: np.ndarray, w: float, rng: np.random.Generator, extra_nus: int, budgets: Callable[[int], tuple[int, ...]]
) -> None:
    """Each evaluation against the exact definition (rationals) and the O(n) kernel."""
    n = gains.shape[0]
    ctx = CappedContext.build(gains, None, w, reference, 1)
    assert ctx.rad is not None
    a_sorted = ctx.arrays().a_g
    nus = [0.0, ctx.a_max, *rng.uniform(0, ctx.a_max, extra_nus).tolist(), *rng.choice(a_sorted, 4).tolist()]
    tol = (n + 4) * EPS
    for b in budgets(n):
        m = float(rng.uniform(0, 0.05 * n))
        for nu in nus:
            got = ctx.rad.gain_fill(nu, b, m)
            want = _exact_gain_fill(ctx.rad.g, w, nu, b, m)
            kern = reference.capped_eval(ctx.arrays(), nu, b, m)
            if want is None:
                assert got is None and kern[2], (nu, b)
                continue
            assert got is not None and not kern[2], (nu, b)
            value, slope, cut, resid, filled, slope_terms = want
            assert got[3] == cut == kern[3], (nu, b, got, cut)
            assert abs(Fraction(got[0]) - value) <= tol * filled + Fraction(1, 10**300), (nu, b, got[0], float(value))
            assert abs(Fraction(got[1]) - slope) <= tol * slope_terms + Fraction(1, 10**300), (nu, b, got[1], float(slope))
            assert abs(Fraction(got[4]) - resid) <= tol * b, (nu, b, got[4], float(resid))
            assert abs(got[0] - kern[0]) <= 2 * tol * float(filled) + 1e-300


@pytest.mark.parametrize("seed", range(3))
def test_gain_fill_against_the_exact_definition_and_the_kernel(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for gains, w in _pools(rng):
        _check_gain_fill(gains, w, rng, 6, lambda n: (1, max(1, n // 7), n // 2, n))


def test_gain_fill_over_many_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same checks where sums cross span ends, with 64-point spans so that the exact
    reference stays cheap (the code reads the span length at each call; the pools above
    fit in one span of the real 4,096)."""
    from rad._solve import capped_rad

    monkeypatch.setattr(capped_rad, "SPAN", 64)
    rng = np.random.default_rng(21)
    for gains, w in _multi_span_pools(rng, 64):
        _check_gain_fill(gains, w, rng, 6, lambda n: (n // 5, n // 2))


def test_gain_fill_start_is_the_least_nu_where_the_caps_hold_b(monkeypatch: pytest.MonkeyPatch) -> None:
    """gain_fill_from (a bisection of the bit patterns, ``k`` by a binary search of the
    ranks between the counts at the bracket's ends) against the same bisection with ``k`` counted by NumPy over the whole pool:
    the same nu, to the bit, where the caps hold b. Ties, zeros, float32, 60 orders of
    magnitude, and pools over many spans."""
    from rad._solve import capped_rad

    def reference_start(ctx, b: int) -> float | None:
        g = ctx.rad.g.astype(np.float64)
        a = g + ctx.rad.w * g
        n = ctx.rad.size

        def holds(nu: float) -> bool:
            return ctx.rad.caps(nu, int(np.count_nonzero(a > nu)), n) >= b

        if holds(0.0):
            return None
        lo, hi = 0, int(np.float64(ctx.a_max).view(np.int64))
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if holds(float(np.int64(mid).view(np.float64))) else (mid, hi)
        return float(np.int64(hi).view(np.float64))

    rng = np.random.default_rng(12)
    pools = list(_pools(rng))
    monkeypatch.setattr(capped_rad, "SPAN", 64)
    pools += list(_multi_span_pools(rng, 64))
    checked = 0
    for gains, w in pools:
        ctx = CappedContext.build(gains, None, w, reference, 1)
        assert ctx.rad is not None
        n = gains.shape[0]
        for b in sorted({1, n // 7, n // 3, n // 2, n - 1, n}):
            if b < 1:
                continue
            got = ctx.rad.gain_fill_from(b)
            assert got == reference_start(ctx, b), (gains.dtype, w, b)
            checked += got is not None
    assert checked >= 20  # most budgets start the gain fill above 0


@pytest.mark.parametrize("span", [SPAN, 64])
def test_compiled_gain_fill_is_the_methods_bit_for_bit(span: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C++ backend's gain_fill and gain_fill_from against SortedRadGains' own methods
    (the other backends' path, checked against rationals above): the same status, the same
    bits, at 0, max a, each breakpoint a_i and the doubles either side of it, and random nu;
    budgets from 1 to n; whole pools and tops that end early (BeyondTop); one span and many."""
    import copy

    from rad._solve import capped_rad
    from rad._solve.capped_rad import BeyondTop

    if "cpp" not in BACKENDS:
        pytest.skip("the C++ backend is not built")
    cpp = get_backend("cpp")
    monkeypatch.setattr(capped_rad, "SPAN", span)
    rng = np.random.default_rng(21)
    pools = list(_pools(rng)) + list(_multi_span_pools(rng, 64))

    def outcome(rad_gains, method: str, *args: float):
        try:
            got = getattr(rad_gains, method)(*args)
        except BeyondTop:
            return "beyond"
        return None if got is None else np.array([float(v) for v in np.atleast_1d(got)]).view(np.int64).tolist()

    compared = 0
    for gains, w in pools:
        whole = CappedContext.build(gains, None, w, cpp, 1)
        assert whole.rad is not None
        tops = [whole]
        if gains.shape[0] > 10:
            tops.append(CappedContext.build(gains, None, w, cpp, 1, top_from=float(whole.rad.g[gains.shape[0] // 3])))
        for ctx in tops:
            native = ctx.rad
            assert native is not None and native._native_fill is not None
            methods = copy.copy(native)
            methods._native_fill = methods._native_fill_from = None
            a = native.g.astype(np.float64) * w + native.g.astype(np.float64)
            nus = [0.0, native.a_max, *rng.uniform(0, native.a_max, 6).tolist()]
            for ai in rng.choice(a, min(8, a.shape[0]), replace=False):
                nus += [float(ai), float(np.nextafter(ai, 0)), float(np.nextafter(ai, np.inf))]
            n = native.size
            for b in sorted({1, max(1, n // 3), max(1, n // 2), n, n + 1}):
                want = outcome(methods, "gain_fill_from", b)
                assert outcome(native, "gain_fill_from", b) == want, (gains.dtype, w, b)
                for nu in nus:
                    m = float(rng.uniform(0, 0.05 * n))
                    want = outcome(methods, "gain_fill", nu, b, m)
                    got = outcome(native, "gain_fill", nu, b, m)
                    assert got == want, (gains.dtype, w, b, nu, m)
                    compared += want not in (None, "beyond")
    assert compared > 500


def test_span_sums_same_bits_on_every_backend() -> None:
    rng = np.random.default_rng(5)
    for n in (1, SPAN - 1, SPAN, 3 * SPAN + 17, 70_001):
        for dtype in (np.float32, np.float64):
            g = np.sort(rng.uniform(0, 1, n).astype(dtype))[::-1].copy()
            g[-(n // 3) :] = 0.0
            if n > 2:
                g[-1] = -0.0
            want = reference.span_sums(g, 0.6, SPAN)
            # each span's total against an exact sum: a sequential sum of SPAN terms
            x = g.astype(np.float64)
            a = 0.6 * x + x
            inv = np.where(a > 0, 1 / np.where(a > 0, a, 1), 0.0)
            for s in range(want.shape[1]):
                part = slice(s * SPAN, (s + 1) * SPAN)
                exact = math.fsum(inv[part].tolist())
                assert abs(want[0, s] - exact) <= (SPAN + 1) * EPS * exact
                assert want[2, s] == math.fsum(x[part].tolist()) or abs(want[2, s] - math.fsum(x[part].tolist())) <= SPAN * EPS * want[2, s]
            for name in BACKENDS:
                got = get_backend(name).span_sums(g, 0.6, SPAN, 2)
                assert got.shape == want.shape
                np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64), err_msg=f"{name} n={n} {dtype}")


def test_values_at_least_on_every_backend() -> None:
    """The top's gather against exact float64 compares, index order kept in each part: ties
    at t and at the splits, t between values (also just above a float32 value, which
    rounding t to float32 would take in), above every value and at 0 (with -0.0); no split,
    one split (gathered in two parts at once) below t, at t, inside and above the values;
    several splits (one part a thread: gathered, then cut), with repeats, an infinite one and
    one out of order; pools across block ends and the cutting's chunks, both dtypes."""
    rng = np.random.default_rng(8)
    just_above = float(np.float32(10 / 49)) + 1e-12  # float32(just_above) == float32(10 / 49)
    checked = 0
    for n in (0, 1, 1000, 3 * 65_536 + 77):
        for dtype in (np.float32, np.float64):
            g = (rng.integers(0, 50, n) / 49).astype(dtype)  # heavy ties
            if n > 3:
                g[1] = -0.0
            exact = g.astype(np.float64)
            for t in (0.5, float(np.nextafter(dtype(0.5), dtype(1))), 0.0, 1.0, 2.0, 0.3, just_above):
                one = [(s,) for s in (math.inf, t, 0.0, float(dtype(30 / 49)), 0.7, 5.0)]
                several = [(0.9, float(dtype(30 / 49)), 0.55), (math.inf, 0.7, 0.7, t, 0.1),
                           (0.4, 0.8), tuple(float(v) for v in np.linspace(1.0, 0.0, 15))]
                for splits in [(), *one, *several]:
                    part = np.zeros(n, dtype=np.int64)
                    for s in splits:
                        part += exact < s
                    keep = exact >= t
                    parts = [g[keep & (part == j)] for j in range(len(splits) + 1)]
                    want = np.concatenate(parts)
                    want_ends = np.cumsum([p.shape[0] for p in parts])
                    for name in BACKENDS:
                        for threads in (1, 2):
                            got, ends = get_backend(name).values_at_least(g, t, threads, splits)
                            msg = f"{name} n={n} {np.dtype(dtype)} t={t} splits={splits} threads={threads}"
                            assert got.dtype == g.dtype
                            np.testing.assert_array_equal(np.asarray(ends), want_ends, err_msg=msg)
                            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=msg)
                            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gain_fill_optimum_never_needs_the_sorted_arrays(backend: str, monkeypatch) -> None:
    """Caps bind and the optimum lies in the gain fill: the search starts where the gain fill
    begins, so the 32-byte-per-point arrays of the O(n) kernels are never built."""
    built = []
    original = CappedContext.arrays

    def counting(self):
        built.append(1)
        return original(self)

    monkeypatch.setattr(CappedContext, "arrays", counting)
    g = np.random.default_rng(2).uniform(0, 1, 200_000).astype(np.float32)
    sol = rad.solve(g, 200.0, 20_000, backend=backend)
    assert sol.capped and sol.params.fill == "gain"
    assert not built


def test_a_loss_fill_optimum_uses_the_kernel_and_stays_exact(monkeypatch) -> None:
    """F already falls where the gain fill begins: the search continues on [0, there] with
    the O(n) kernel (w = 0 here: every loss is 0, one loss tie group over two gain groups)."""
    calls = []
    original = capped_mod.CappedContext.arrays

    def counting(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(capped_mod.CappedContext, "arrays", counting)
    sol = rad.solve(np.array([1.0, 1.0, 1.0, 0.5]), 4.0, 3)
    assert calls and sol.params.fill == "loss"
    q = sol.probabilities()
    assert abs(q.sum() - 3) <= 1e-15 and sol.value == 0.0


def test_support_of_a_gain_fill_matches_the_streaming_kernel() -> None:
    """Count and least gain of the support by two searches on the sorted gains, against the
    backends' streaming ``support_stats`` over the unsorted pool (ties on the cut, a zero
    fraction, zeros, float32)."""
    from rad._backends.params import Params

    rng = np.random.default_rng(11)
    checked = 0
    for gains, w in _pools(rng):
        ctx = CappedContext.build(gains, None, w, reference, 1)
        assert ctx.rad is not None
        for cut in (*rng.choice(ctx.rad.g, 5).tolist(), float(ctx.rad.g[0]), 0.0):
            for frac in (0.0, 0.5, 1.0):
                for nu in (float(rng.uniform(0, ctx.a_max)), ctx.a_max, 1e-300):
                    got = ctx.rad.support(nu, cut, frac)
                    if got is None:
                        continue
                    params = Params("gain", nu, gain_cut=cut, gain_frac=frac)
                    assert got == reference.support_stats(gains, None, w, params), (cut, frac, nu)
                    checked += 1
    assert checked > 200


# ---------------------------------------------------------------- the top of the pool


def _top_thresholds(g_sorted: np.ndarray) -> list[float]:
    """Thresholds at a tenth, a third and half the pool (inside a tie group where there is one)."""
    n = g_sorted.shape[0]
    return sorted({float(g_sorted[k]) for k in (n // 10, n // 3, n // 2)}, reverse=True)


def _check_top_against_whole(gains: np.ndarray, w: float, rng: np.random.Generator) -> int:
    """Every evaluation a top-of-the-pool context makes is the whole pool's, bit for bit;
    below the top's start it refuses (BeyondTop) instead of answering."""
    from rad._solve.capped_rad import BeyondTop

    whole = CappedContext.build(gains, None, w, reference, 1)
    assert whole.rad is not None
    checked = 0
    for t in _top_thresholds(whole.rad.g):
        top = CappedContext.build(gains, None, w, reference, 1, top_from=t)
        assert top.rad is not None
        size = int(np.count_nonzero(gains >= t))
        assert top.rad.size == size and top.rad.n == gains.shape[0]
        np.testing.assert_array_equal(top.rad.g.view(np.uint8), whole.rad.g[:size].view(np.uint8))
        # Sorted in parts, one a thread: the same top, wherever the splits fall.
        g_at = [float(whole.rad.g[i]) for i in (0, size // 4, size // 2, max(0, size - 1))]
        for splits in ((g_at[2],), (t,), (g_at[0],), (math.inf,), (0.0,), (g_at[0], g_at[1], g_at[2], g_at[3]),
                       (math.inf, g_at[1], g_at[1], t, 0.0)):
            parted = CappedContext.build(gains, None, w, reference, 2, top_from=t, splits=splits)
            assert parted.rad is not None
            np.testing.assert_array_equal(parted.rad.g.view(np.uint8), whole.rad.g[:size].view(np.uint8))
            checked += 1
        if size == gains.shape[0]:
            continue
        with pytest.raises(BeyondTop):
            top.rad.gain_fill_from(size + 1)
        with pytest.raises(BeyondTop):
            top.arrays()
        for b in sorted({1, max(1, size // 3), max(1, size // 2), size}):
            m = float(rng.uniform(0, 0.05 * gains.shape[0]))
            start = top.rad.gain_fill_from(b)
            whole_start = whole.rad.gain_fill_from(b)
            assert (whole_start or 0.0) <= (start or 0.0)
            lo = start or 0.0
            nus = [lo, top.a_max, *rng.uniform(lo, top.a_max, 4).tolist(),
                   *(a for a in rng.choice(top.rad.g_and_a(size)[1], 4).tolist() if a >= lo)]
            for nu in nus:
                got = top.rad.gain_fill(nu, b, m)
                assert got is not None and got == whole.rad.gain_fill(nu, b, m), (t, b, nu)
                for frac in (0.0, 0.5):
                    assert top.rad.support(nu, got[3], frac) == whole.rad.support(nu, got[3], frac)
                checked += 1
            if lo > 0 and whole.rad.gain_fill(lo / 2, b, m) is not None:
                with pytest.raises(BeyondTop):
                    top.rad.gain_fill(lo / 2, b, m)
    return checked


def test_the_top_of_the_pool_evaluates_as_the_whole_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The top (the gains >= t, sorted) holds the whole sort's first ranks, and its prefixes
    and span offsets are the whole pool's: from where its own caps hold b, each F, slope,
    cut, residual and support is the same bits. Ties at t, zeros, float32, many spans."""
    from rad._solve import capped_rad

    rng = np.random.default_rng(31)
    checked = sum(_check_top_against_whole(g, w, rng) for g, w in _pools(rng))
    monkeypatch.setattr(capped_rad, "SPAN", 64)
    checked += sum(_check_top_against_whole(g, w, rng) for g, w in _multi_span_pools(rng, 64))
    assert checked > 300


def _top_attempts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Record each capped search: ('top' or 'whole', whether it answered)."""
    from rad._solve.capped_rad import BeyondTop

    seen: list[tuple[str, bool]] = []
    original = capped_mod.maximise_dual

    def recording(ctx, b, m):
        kind = "top" if ctx.rad is not None and not ctx.rad.complete else "whole"
        try:
            out = original(ctx, b, m)
        except BeyondTop:
            seen.append((kind, False))
            raise
        seen.append((kind, True))
        return out

    monkeypatch.setattr(capped_mod, "maximise_dual", recording)
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_top_of_the_pool_selects_the_same_on_every_backend_and_thread_count(
    dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Caps bind on a 300,000-point pool (b = n/10): the top answers, without a full sort,
    and every backend picks the same indices at 1 and 2 threads."""
    seen = _top_attempts(monkeypatch)
    g = np.random.default_rng(4).uniform(0, 1, 300_000).astype(dtype)
    want = rad.select(g, 300.0, 30_000, rng=5, backend="numpy", threads=1)
    assert seen == [("top", True)]
    for name in BACKENDS:
        for threads in (1, 2):
            got = rad.select(g, 300.0, 30_000, rng=5, backend=name, threads=threads)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, {threads} threads")


def test_a_top_sorted_in_many_parts_selects_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """The top cut into eight parts, as on eight threads (``threads`` is clamped to this
    machine's cores, so the cut is asked for directly): every backend picks the indices of
    the one-part sort, through the gather's one-split and several-split paths."""
    g = np.random.default_rng(4).uniform(0, 1, 300_000).astype(np.float32)
    want = rad.select(g, 300.0, 30_000, rng=5, backend="numpy", threads=1)
    original = capped_mod.top_threshold
    cuts: list[int] = []

    def eight_parts(gains: np.ndarray, b: int, support: int, margin: float, threads: int = 1):
        got = original(gains, b, support, margin, 8)
        cuts.append(-1 if got is None else len(got[1]))
        return got

    monkeypatch.setattr(capped_mod, "TOP_PART", 1024)
    monkeypatch.setattr(capped_mod, "top_threshold", eight_parts)
    for name in BACKENDS:
        for threads in (1, 2):
            got = rad.select(g, 300.0, 30_000, rng=5, backend=name, threads=threads)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, {threads} threads")
    assert cuts and set(cuts) == {7}


def test_a_top_that_misses_falls_back_to_the_whole_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A top holding about b points cannot hold the fill (its caps reach b only at max a,
    where F already falls): BeyondTop, then the whole pool is sorted and searched, with the
    same bits as a solve that never tried the top."""
    g = np.random.default_rng(6).uniform(0, 1, 100_000)
    monkeypatch.setattr(capped_mod, "top_threshold", lambda *args: None)
    want = rad.solve(g, 100.0, 10_000)
    monkeypatch.undo()
    seen = _top_attempts(monkeypatch)
    monkeypatch.setattr(capped_mod, "TOP_MARGINS", (1,))
    got = rad.solve(g, 100.0, 10_000)
    assert seen == [("top", False), ("whole", True)]
    assert got.capped and (got.value, got.params, got.k_star) == (want.value, want.params, want.k_star)
    np.testing.assert_array_equal(got.probabilities(), want.probabilities())


def test_a_larger_top_answers_when_the_first_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tops are tried in turn: one of about b points misses, one of about 8 b answers,
    with the whole pool's optimum (to its rounding) and a q that spends b."""
    g = np.random.default_rng(6).uniform(0, 1, 400_000)
    monkeypatch.setattr(capped_mod, "TOP_MARGINS", ())
    whole = rad.solve(g, 10.0, 10_000)  # no top: the whole pool
    monkeypatch.undo()
    seen = _top_attempts(monkeypatch)
    monkeypatch.setattr(capped_mod, "TOP_MARGINS", (1, 8))
    got = rad.solve(g, 10.0, 10_000)
    assert seen == [("top", False), ("top", True)]
    assert got.capped and abs(got.value - whole.value) <= 1e-12 * whole.value
    assert abs(got.probabilities().sum() - 10_000) <= 1e-9


def test_an_extended_top_is_the_top_at_the_lower_threshold() -> None:
    """Extending a top sorts only the new values; the result holds the same sorted values
    and span totals as a top built at the lower threshold (ties at both thresholds,
    float32, several spans)."""
    rng = np.random.default_rng(12)
    g = (rng.integers(0, 400, 3 * SPAN + 100) / 399).astype(np.float32)
    whole = np.sort(g)[::-1]
    for hi_rank, lo_rank in ((SPAN // 2, 2 * SPAN), (100, 101), (10, 3 * SPAN)):
        t_hi, t_lo = float(whole[hi_rank]), float(whole[lo_rank])
        grown = CappedContext.build(g, None, 0.7, reference, 1, top_from=t_hi)
        assert grown.rad is not None
        grown.rad.extend(g, t_lo)
        fresh = CappedContext.build(g, None, 0.7, reference, 1, top_from=t_lo)
        assert fresh.rad is not None
        assert grown.rad.size == fresh.rad.size == int(np.count_nonzero(g >= t_lo))
        np.testing.assert_array_equal(grown.rad.g.view(np.uint8), fresh.rad.g.view(np.uint8))
        answered = 0
        for nu in (0.3, 0.7, 1.2, 1.5, fresh.a_max):
            got = [_fill_or_beyond(top, nu) for top in (grown, fresh)]
            assert got[0] == got[1], (hi_rank, lo_rank, nu)
            answered += got[0] != "beyond"
        assert answered >= 2


def _fill_or_beyond(ctx: CappedContext, nu: float) -> object:
    from rad._solve.capped_rad import BeyondTop

    assert ctx.rad is not None
    try:
        return ctx.rad.gain_fill(nu, 50, 3.0)
    except BeyondTop:
        return "beyond"


def test_subnormal_gains_whose_reciprocals_overflow_are_rescaled_on_every_backend() -> None:
    """Half the pool subnormal (1/a overflows: the span sums are infinite) with caps that
    bind: the solver must rescale the pool and solve again (the game is scale-equivariant),
    not evaluate F on infinite sums (nu = 0 times them is NaN: the NumPy and Numba backends
    raised "cannot convert float NaN to integer", the C++ one sometimes returned params from
    which DepRound took no index). Each backend gives b distinct indices, the same on every
    backend and for the same pool times 2^40 (where nothing overflows), for many keys."""
    base = np.linspace(0.05, 1.0, 12)
    g = np.where(np.arange(12) % 2 == 0, 1e-310, base)
    scaled = np.ldexp(g, 40)  # the smallest a near 2^-987: every 1/a and their sums finite
    sol = rad.solve(g, 4.0, 3, w=5.0)
    assert sol.capped and sol.scale_exponent != 0
    for seed in range(40):
        want = rad.select(scaled, 4.0, 3, w=5.0, rng=seed, backend="numpy")
        assert want.shape == (3,) and np.unique(want).shape == (3,)
        for name in BACKENDS:
            got = rad.select(g, 4.0, 3, w=5.0, rng=seed, backend=name)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}, rng={seed}")

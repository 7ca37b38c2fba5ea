"""DepRound: exact size, distinct indices, marginals equal to q (statistically), the
paper's negative correlation, and identical output for any thread count and backend."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as _stats

import rad
from conftest import BACKENDS
from naive import naive_depround
from rad._backends.canonical import BLOCK


def _probabilities(rng: np.random.Generator, n: int, b: int) -> np.ndarray:
    """Random q in [0, 1] with sum exactly b: ones, zeros, tiny and near-1 entries."""
    q = rng.random(n) ** 3
    zero = rng.random(n) < 0.1
    if np.count_nonzero(~zero) >= b:
        q[zero] = 0.0
    q *= b / q.sum()
    for _ in range(50):  # push mass above 1 back to the others
        over = q > 1
        if not over.any():
            break
        extra = (q[over] - 1).sum()
        q[over] = 1.0
        free = (q > 0) & (q < 1)
        q[free] += extra * q[free] / q[free].sum()
    q[np.argmax(q)] += b - q.sum()
    return np.clip(q, 0.0, 1.0)


@st.composite
def probability_vectors(draw: st.DrawFn) -> np.ndarray:
    """q in [0, 1]^n with an integral sum, some entries exactly 0 or 1."""
    n = draw(st.integers(1, 300))
    ones = draw(st.integers(0, n // 4))
    b = draw(st.integers(ones, n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = np.zeros(n)
    q[:ones] = 1.0
    rest = b - ones
    if rest:
        q[ones:] = _probabilities(rng, n - ones, rest)
    return q[rng.permutation(n)]


@pytest.mark.parametrize("backend", BACKENDS)
@given(q=probability_vectors(), seed=st.integers(0, 2**63))
def test_exact_size_and_distinct(backend: str, q: np.ndarray, seed: int) -> None:
    assert np.all((q >= 0) & (q <= 1))
    b = round(float(q.sum()))
    idx = rad.depround(q, rng=seed, backend=backend)
    assert idx.dtype == np.int64 and idx.shape == (b,)
    assert np.all(np.diff(idx) > 0)  # sorted and distinct
    assert np.all(q[idx] > 0)  # never a zero-probability point
    assert np.all(np.isin(np.flatnonzero(q >= 1), idx))  # certain points always in


def _check_marginals(draws: np.ndarray, q: np.ndarray, trials: int) -> None:
    """Every inclusion frequency within a 5-sigma binomial band (Bonferroni over n items
    gives a family-wise false-alarm rate below 1e-5 for n <= 2000)."""
    freq = draws / trials
    sd = np.sqrt(q * (1 - q) / trials)
    z = np.abs(freq - q) / np.maximum(sd, 1e-12)
    worst = int(np.argmax(z))
    assert z[worst] <= 5.0, f"item {worst}: frequency {freq[worst]:.4f} vs q {q[worst]:.4f} (z={z[worst]:.1f})"


@pytest.mark.parametrize("backend", BACKENDS)
def test_marginals_match_q(backend: str, rng: np.random.Generator) -> None:
    n, b, trials = 400, 37, 4000
    q = _probabilities(rng, n, b)
    counts = np.zeros(n)
    for t in range(trials):
        counts[rad.depround(q, rng=t, backend=backend)] += 1
    _check_marginals(counts, q, trials)


def test_marginals_across_blocks_and_merge(rng: np.random.Generator) -> None:
    """A pool spanning several DepRound blocks: leftovers merged across blocks stay exact."""
    n = 3 * (1 << 16) + 123
    q = np.zeros(n)
    hot = rng.choice(n, 300, replace=False)  # 300 items with mass in 3+ blocks
    q[hot] = rng.uniform(0.05, 0.95, 300)
    q[hot[0]] += np.ceil(q.sum()) - q.sum()
    trials = 1500
    counts = np.zeros(300)
    for t in range(trials):
        idx = rad.depround(q, rng=t)
        counts += np.isin(hot, idx)
    _check_marginals(counts, q[hot], trials)


def test_matches_the_papers_algorithm_statistically(rng: np.random.Generator) -> None:
    """Marginals of the fast DepRound and of a literal Algorithm 2 agree on one q."""
    q = np.array([0.9, 0.1, 0.5, 0.5, 0.25, 0.75, 0.6, 0.4])
    trials = 6000
    fast = np.zeros(8)
    slow = np.zeros(8)
    for t in range(trials):
        fast[rad.depround(q, rng=t)] += 1
        slow[naive_depround(q, rng=np.random.default_rng(t))] += 1
    _check_marginals(fast, q, trials)
    _check_marginals(slow, q, trials)


def test_negative_correlation(rng: np.random.Generator) -> None:
    """P(i and j) <= q_i q_j (paper, Algorithm 2): checked with a 4-sigma margin."""
    q = np.array([0.5, 0.5, 0.3, 0.7, 0.4, 0.6])
    trials = 20000
    both = np.zeros((6, 6))
    for t in range(trials):
        x = np.zeros(6)
        x[rad.depround(q, rng=t)] = 1
        both += np.outer(x, x)
    joint = both / trials
    bound = np.outer(q, q) + 4 * np.sqrt(np.outer(q, q) / trials)
    off = ~np.eye(6, dtype=bool)
    assert np.all(joint[off] <= bound[off])


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "numpy"])
def test_thread_count_does_not_change_the_output(backend: str, rng: np.random.Generator) -> None:
    n = 5 * (1 << 16) + 7
    q = _probabilities(rng, n, 2500)
    runs = [rad.depround(q, rng=99, backend=backend, threads=t) for t in (1, 2, 3)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])
    g = rng.random(n).astype(np.float32)
    sel = [rad.select(g, 0.3 * n, 1000, rng=5, backend=backend, threads=t) for t in (1, 2, 4)]
    for r in sel[1:]:
        np.testing.assert_array_equal(r, sel[0])


def test_same_indices_on_every_backend(rng: np.random.Generator) -> None:
    n = 2 * (1 << 16) + 11
    q = _probabilities(rng, n, 700)
    g = rng.random(n)
    outs = [rad.depround(q, rng=3, backend=b) for b in BACKENDS]
    sels = [rad.select(g, 0.2 * n, 300, rng=4, backend=b) for b in BACKENDS]
    capped = [rad.select(g, 50.0, 40_000, rng=4, backend=b) for b in BACKENDS]
    for group in (outs, sels, capped):
        for r in group[1:]:
            np.testing.assert_array_equal(r, group[0])


def test_seeds() -> None:
    q = np.full(1000, 0.05)
    a = rad.depround(q, rng=1)
    np.testing.assert_array_equal(a, rad.depround(q, rng=1))
    assert not np.array_equal(a, rad.depround(q, rng=2))
    gen = np.random.default_rng(7)
    first, second = rad.depround(q, rng=gen), rad.depround(q, rng=gen)
    assert not np.array_equal(first, second)  # a Generator advances
    np.testing.assert_array_equal(rad.depround(q, rng=np.random.SeedSequence(5)), rad.depround(q, rng=np.random.SeedSequence(5)))


@pytest.mark.parametrize(
    "q, message",
    [
        (np.array([0.5, 0.2]), "integer"),
        (np.array([1.5, 0.5]), r"q\[0\]"),
        (np.array([0.5, -0.5, 1.0]), "negative"),
        (np.array([0.5, np.nan]), "NaN"),
        (np.ones((2, 2)), "one-dimensional"),
    ],
)
def test_bad_probabilities(q: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rad.depround(q)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "numba"])
def test_streaming_select_marginals(backend: str, rng: np.random.Generator) -> None:
    """rad.select rounds q computed on the fly from the gains: its inclusion frequencies
    match solve().probabilities(), uncapped and capped. (Numba returns the same indices
    as the others, see test_same_indices_on_every_backend.)"""
    g = rng.random(300)
    for m, b in [(90.0, 20), (2.0, 120)]:  # the second binds caps
        q = rad.solve(g, m, b, backend=backend).probabilities()
        trials = 2000
        counts = np.zeros(g.shape[0])
        for t in range(trials):
            counts[rad.select(g, m, b, rng=t, backend=backend)] += 1
        _check_marginals(counts, q, trials)


# ----------------------------------------------------------------- statistics with power
# The marginal tests above (1,500-6,000 trials at 5 sigma) cannot see an error below ~0.03.
# The tests below aim at *chosen* items whose q is small (or whose error would be shed mass)
# with enough trials that a marginal error of 1e-3 is more than 5 sigma, and check every
# other item with exact binomial tails (Bonferroni over the items). The kernels are called
# directly with distinct random keys (every backend returns the same indices for the same
# key, see test_same_indices_on_every_backend and test_stat_vectors_identical_on_every_backend),
# so a trial costs ~15 us.



def _kernel_counts(q: np.ndarray, trials: int, seed: int, backend: str = "auto") -> np.ndarray:
    from rad._backends import get_backend

    kernels = get_backend(backend)
    b = round(float(np.sum(q)))
    keys = np.random.default_rng(seed).integers(0, 2**63, size=trials, dtype=np.int64)
    counts = np.zeros(q.shape[0], np.int64)
    for key in keys.tolist():
        idx = kernels.depround_q(q, b, key, 1)
        assert idx.shape == (b,)
        counts[idx] += 1
    return counts


def _binomial_p(counts: np.ndarray, q: np.ndarray, trials: int) -> np.ndarray:
    """Two-sided exact binomial p-values of each item's count under inclusion probability q."""
    lo = _stats.binom.cdf(counts, trials, q)
    hi = _stats.binom.sf(counts - 1, trials, q)
    return np.minimum(1.0, 2 * np.minimum(lo, hi))


def _check_with_power(counts: np.ndarray, q: np.ndarray, trials: int, chosen: list[int]) -> None:
    """Chosen items: each two-sided p >= 1e-7 (|z| < 5.3). Every item: p >= 1e-6 / n."""
    p = _binomial_p(counts, q, trials)
    freq = counts / trials
    for i in chosen:
        assert p[i] >= 1e-7, f"chosen item {i}: frequency {freq[i]:.6g} vs q {q[i]:.6g} (p={p[i]:.2g})"
    worst = int(np.argmin(p))
    assert p[worst] * q.shape[0] >= 1e-6, f"item {worst}: frequency {freq[worst]:.6g} vs q {q[worst]:.6g} (p={p[worst]:.2g})"


def _near_one() -> tuple[np.ndarray, list[int]]:
    """300 items at 1 - 1e-5 shed 3e-3 in all; the chosen item (q = 3e-3) must receive it.
    (A 'certain' shortcut above 1 - 1e-5 would starve it: the old 1 - 2^-30 shortcut did
    exactly this with 2^20 items, issue 14.)"""
    q = np.concatenate([np.full(300, 1 - 1e-5), [3e-3], np.full(10, 0.5), np.full(40, 0.25)])
    q = q[np.random.default_rng(0).permutation(q.shape[0])]
    chosen = [int(np.flatnonzero(q == 3e-3)[0])]
    return q, chosen


def _many_tiny() -> tuple[np.ndarray, list[int]]:
    """1,000 items at 1e-3, 1,000 at 1e-6, a few large ones: tiny items must not vanish in
    the running sum."""
    q = np.concatenate([np.full(1000, 1e-3), np.full(1000, 1e-6), np.full(4, 1.0 - 2.5e-4)])
    q[-1] += 5.0 - math.fsum(q.tolist())
    q = q[np.random.default_rng(1).permutation(q.shape[0])]
    chosen = np.flatnonzero(q == 1e-3)[:3].tolist()
    return q, chosen


def _integer_boundary() -> tuple[np.ndarray, list[int]]:
    """q = 1/3 (not representable: the sum is within rounding of 333, not equal), one item
    short by 2e-3 and a chosen item holding it at the very end of the vector."""
    q = np.full(1000, 1.0 / 3.0)
    q[-2] -= 2e-3
    q[-1] = 2e-3
    return q, [999]


STAT_VECTORS = {"near_one": _near_one, "many_tiny": _many_tiny, "integer_boundary": _integer_boundary}


@pytest.mark.parametrize("name", sorted(STAT_VECTORS))
def test_marginals_with_power(name: str) -> None:
    """100,000 trials: for a chosen item with q <= 3e-3 the binomial sd is <= 1.7e-4, so a
    marginal error of 1e-3 is >= 5.8 sigma (q = 3e-3, near_one; rejected at |z| > 5.3 with
    probability ~0.7, and 7 sigma for q = 2e-3, integer_boundary); for q = 1e-3
    (many_tiny, three chosen items) it is 10 sigma."""
    q, chosen = STAT_VECTORS[name]()
    trials = 100_000
    counts = _kernel_counts(q, trials, seed=hash(name) % 2**32)
    _check_with_power(counts, q, trials, chosen)
    if name == "many_tiny":  # the 1,000 items at 1e-6 as a group: 0.15 expected per item
        group = q == 1e-6
        total, expect = counts[group].sum(), trials * q[group].sum()
        assert _stats.poisson.cdf(total, expect) > 1e-7 and _stats.poisson.sf(total - 1, expect) > 1e-7


@pytest.mark.parametrize("name", sorted(STAT_VECTORS))
def test_stat_vectors_identical_on_every_backend(name: str) -> None:
    q, _ = STAT_VECTORS[name]()
    for seed in range(3):
        outs = [rad.depround(q, rng=seed, backend=b) for b in BACKENDS]
        for r in outs[1:]:
            np.testing.assert_array_equal(r, outs[0])


@pytest.mark.slow
def test_marginals_with_power_across_blocks() -> None:
    """Three DepRound blocks plus the merge of their leftovers: near-1 items in block 0 and a
    chosen 3e-3 item in the last block, 40,000 trials (1e-3 is 3.7 sigma per chosen item;
    5 chosen items with the same q pooled: 8 sigma)."""
    n = 3 * (1 << 16) + 17
    rng = np.random.default_rng(5)
    q = np.zeros(n)
    q[rng.choice(1 << 16, 200, replace=False)] = 1 - 1e-5
    hot = (2 << 16) + rng.choice(1 << 16, 300, replace=False)
    q[hot] = rng.uniform(0.05, 0.95, 300)
    chosen = (2 << 16) + 5 + np.arange(5)
    q[chosen] = 3e-3
    extra = math.fsum(q.tolist()) % 1.0  # take it off the hot items: an integral sum
    for j in hot.tolist():
        cut = min(extra, q[j] - 0.01)
        q[j] -= cut
        extra -= cut
        if extra <= 0:
            break
    q[hot[-1]] += round(math.fsum(q.tolist())) - math.fsum(q.tolist())
    trials = 40_000
    counts = _kernel_counts(q, trials, seed=11)
    support = np.flatnonzero(q > 0)
    _check_with_power(counts[support], q[support], trials, [])
    pooled = counts[chosen].sum()
    assert _stats.binom.cdf(pooled, 5 * trials, 3e-3) > 1e-7 and _stats.binom.sf(pooled - 1, 5 * trials, 3e-3) > 1e-7


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STAT_VECTORS))
def test_marginals_with_power_slow(name: str) -> None:
    """1,000,000 trials: a marginal error of 1e-3 on any item with q <= 0.25 is >= 2.3 sigma
    per item and the chosen items' error of 3e-4 is > 5 sigma."""
    q, chosen = STAT_VECTORS[name]()
    trials = 1_000_000
    counts = _kernel_counts(q, trials, seed=7 + len(name))
    _check_with_power(counts, q, trials, chosen)


def test_certain_means_exactly_one() -> None:
    """Only q that rounds to 1 unit-exactly skips the pairing (issue 14: a 1 - 2^-30 shortcut
    dropped the mass such items shed)."""
    from rad._backends.canonical import ONE, quantize, round_sequence

    assert quantize(np.array([1 - 2.0**-30]))[0] < ONE
    q = np.concatenate([np.full(8, 1 - 2.0**-30), [8 * 2.0**-30]])
    taken, pick, held = round_sequence(q, 12345)
    # every item took part: 8 taken by pairing, the leftover holds the shed mass (~0 here)
    assert len(taken) == 8 and pick >= 0 and 0 <= held < 1e-6


def test_quantize_against_exact_arithmetic() -> None:
    """Every q lands within 2^-47 of its exact value (Fractions): tiny, near 1, subnormal."""
    from fractions import Fraction

    from rad._backends.canonical import ONE, quantize

    rng = np.random.default_rng(3)
    q = np.concatenate([rng.random(2000), 10.0 ** rng.uniform(-17, -1, 2000), 1 - 10.0 ** rng.uniform(-17, -1, 500),
                        [0.0, -0.0, 5e-324, 2.0**-48, 2.0**-49, 1 - 2.0**-49, 1 - 2.0**-47, 1.0, 1.5]])
    units = quantize(q)
    for x, u in zip(q.tolist(), units.tolist()):
        exact = Fraction(min(max(x, 0.0), 1.0))
        assert abs(Fraction(u, ONE) - exact) <= Fraction(1, 2 * ONE), (x, u)


@pytest.mark.parametrize("tiny", [1e-12, 2.0**-42, 2.0**-40])
@pytest.mark.parametrize("before", [0, 30_000, 65_000])
def test_tiny_item_owns_its_interval(monkeypatch: pytest.MonkeyPatch, tiny: float, before: int) -> None:
    """A tiny q after a large running mass keeps an interval of length q (within 2^-47) at
    its exact place (issue 14: with a float64 running mass near 65,000 an item below ~7e-12
    had no interval at all and was never picked).

    The block: ``before`` items of 0.75 (after which the running mass is an exact integer)
    and the final run 0.3, tiny, 0.3 whose survivor is the leftover. Every draw is pinned
    to ``u``; the run's survivor is the item whose exact interval holds ``u``, for ``u``
    more than the rounding (half a unit per quantized q, one for the target) from an end."""
    from rad._backends import canonical

    q = np.concatenate([np.full(before - before % 4, 0.75), [0.3, tiny, 0.3]])
    n = q.shape[0]
    lo = 0.3  # the exact interval of the tiny item, relative to the run's start
    margin = 4 / canonical.ONE
    cases = {lo + tiny / 2: n - 2, lo - max(margin, tiny): n - 3, lo + tiny + margin: n - 1}
    for u, owner in cases.items():
        monkeypatch.setattr(canonical, "uniform", lambda state, counter, u=u: u)
        _, pick, held = canonical.round_sequence(q, 0)
        assert pick == owner, (u, pick, owner)
        assert abs(held - (0.6 + tiny)) <= 2 / canonical.ONE


@pytest.mark.parametrize("backend", BACKENDS)
def test_tiny_items_identical_on_every_backend(backend: str) -> None:
    """The case above with the real generator, many seeds: same indices as the definition."""
    q = np.concatenate([np.full(64_000, 0.75), np.full(200, 1e-12), [0.3, 0.3, 1 - 2.0**-30, 1.0]])
    q[-4] += 48_003 - math.fsum(q.tolist())
    from rad._backends import get_backend, numpy_backend

    b = round(math.fsum(q.tolist()))
    for key in range(20):
        np.testing.assert_array_equal(get_backend(backend).depround_q(q, b, key, 2),
                                      numpy_backend.depround_q(q, b, key))


@pytest.mark.parametrize("backend", BACKENDS)
def test_full_blocks_of_near_ones(backend: str) -> None:
    """Blocks whose running mass nears 65,536 (every q just below 1): the next crossing's
    target, one unit above the block's mass, must not leave int64 (it did with units of
    2^-47: a signed overflow in C++, a wrapped target in Numba). Same indices as the
    definition, exactly the budget, and the few items left out are spread as q says."""
    from rad._backends import get_backend, numpy_backend

    q = np.full(3 * BLOCK, 1.0 - 1e-5)
    q[-1] += 3 * BLOCK - math.fsum(q.tolist()) - round(3 * BLOCK * 1e-5)  # an integral sum
    b = round(math.fsum(q.tolist()))
    for key in range(3):
        got = get_backend(backend).depround_q(q, b, key, 2)
        np.testing.assert_array_equal(got, numpy_backend.depround_q(q, b, key))
        assert got.shape == (b,)


def _assert_as_the_definition(backend: str, q: np.ndarray, keys: int) -> None:
    """With ``q``'s last entry set so that its sum is whole (``b``): for each of ``keys``
    keys the backend's DepRound of ``q`` is the NumPy definition's, every certain item
    (``q = 1``) taken."""
    from rad._backends import get_backend, numpy_backend

    q[-1] = 0.0
    q[-1] = math.ceil(math.fsum(q.tolist())) - math.fsum(q.tolist())  # an integral sum
    b = round(math.fsum(q.tolist()))
    for key in range(keys):
        got = get_backend(backend).depround_q(q, b, key, 2)
        np.testing.assert_array_equal(got, numpy_backend.depround_q(q, b, key))
        assert np.all(np.isin(np.flatnonzero(q == 1.0), got))


@pytest.mark.parametrize("backend", BACKENDS)
def test_certain_items_among_fractional_identical_on_every_backend(backend: str) -> None:
    """Certain items (q = 1) packed per chunk of eight, as a capped pool has them: chunks
    all certain, none certain, and every mix between, at block starts and ends. The same
    indices as the definition, and every certain item taken."""
    rng = np.random.default_rng(5)
    n = 2 * BLOCK + 777
    q = rng.random(n) * 0.5
    share = rng.choice([0.0, 0.1, 0.5, 0.9, 1.0], size=n // 8 + 1)  # per chunk of eight
    q[rng.random(n) < np.repeat(share, 8)[:n]] = 1.0
    q[:8] = 1.0
    q[BLOCK - 8:BLOCK + 8] = 1.0
    _assert_as_the_definition(backend, q, 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_certain_items_in_sparse_blocks_identical_on_every_backend(backend: str) -> None:
    """Certain items carry no mass, so a block of tiny q with certain items scattered through
    it stays sparse (the C++ pass marks them only where a stretch holds one): the same
    indices as the definition, and every certain item taken."""
    rng = np.random.default_rng(12)
    n = 3 * BLOCK + 300
    q = rng.random(n) * 2e-4  # ~6.6 units per block: sparse throughout
    certain = rng.choice(n, 200, replace=False)
    q[certain] = 1.0
    q[BLOCK + 255 : BLOCK + 258] = 1.0  # across a 256-item stretch's end
    _assert_as_the_definition(backend, q, 6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_and_dense_stretches_identical_on_every_backend(backend: str) -> None:
    """The C++ pass keeps each item's units only from where a block turns dense (more than
    one unit of mass per 2,048 items so far) and refills a chunk it looks up before that.
    Blocks sparse throughout, sparse then dense, and dense throughout, with picks on both
    sides of the switch: the same indices as the definition, for many seeds; and a sparse
    rad.select (b / n below 1 / 2,048) the same on every backend."""
    rng = np.random.default_rng(11)
    sparse = rng.random(BLOCK) * 2e-4  # ~6.6 units per block, well below 1 per 2,048 items
    switch = np.concatenate([rng.random(BLOCK // 2) * 2e-4, rng.random(BLOCK // 2) * 0.6])
    dense = rng.random(BLOCK) * 0.6
    q = np.concatenate([sparse, switch, dense, sparse[:1000]])
    _assert_as_the_definition(backend, q, 12)
    n = 3 * BLOCK + 5
    g = rng.random(n).astype(np.float32)
    for seed in range(4):
        np.testing.assert_array_equal(rad.select(g, 0.3 * n, 20, rng=seed, backend=backend),
                                      rad.select(g, 0.3 * n, 20, rng=seed, backend="numpy"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_blocks_mostly_of_zero_probability_identical_on_every_backend(backend: str) -> None:
    """The C++ pass rounds a block whose first 256 items are mostly of probability 0 over
    its positive items alone (a capped pool's blocks, whose support is their top). Blocks
    of nine zeros in ten with certain items and items too small for a unit among them;
    zeros for 256 items, then dense; dense for 256, then zeros; nearly all zeros; a short
    tail: the same indices as the definition, every certain item taken; and a capped
    rad.select the same on every backend."""
    rng = np.random.default_rng(13)
    def mostly_zero(size: int, share: float) -> np.ndarray:
        q = rng.random(size) * 0.9
        q[rng.random(size) >= share] = 0.0
        q[rng.choice(size, 40, replace=False)] = 1.0
        q[rng.choice(size, 40, replace=False)] = 1e-15  # below 2^-46: no units
        return q
    zero_then_dense = rng.random(BLOCK) * 0.6
    zero_then_dense[:256] = 0.0
    dense_then_zero = np.zeros(BLOCK)
    dense_then_zero[:256] = rng.random(256) * 0.6
    dense_then_zero[rng.choice(np.arange(256, BLOCK), 500, replace=False)] = 0.3
    q = np.concatenate([mostly_zero(BLOCK, 0.1), zero_then_dense, dense_then_zero, mostly_zero(BLOCK, 0.002),
                        mostly_zero(333, 0.1)])
    _assert_as_the_definition(backend, q, 6)
    g = rng.random(3 * BLOCK + 11).astype(np.float32)
    n = g.shape[0]
    for seed in range(3):
        np.testing.assert_array_equal(rad.select(g, 0.001 * n, n // 10, rng=seed, backend=backend),
                                      rad.select(g, 0.001 * n, n // 10, rng=seed, backend="numpy"))


@pytest.mark.skipif("numba" not in BACKENDS, reason="Numba not installed")
@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 130, 1000, BLOCK])
def test_numba_running_mass_against_numpy(n: int) -> None:
    """Numba's DepRound pass (_running_mass: eight items a vector by an LLVM intrinsic,
    the tail item by item) against NumPy: the running mass of the non-certain units,
    the certain items' bits and the crossing items (canonical.round_sequence's, where
    the mass's whole units grow), with units that land exactly on multiples of ONE."""
    from rad._backends.canonical import ONE, UNIT_BITS
    from rad._backends.numba_backend import _running_mass

    rng = np.random.default_rng(n)
    units = rng.integers(0, ONE, n, dtype=np.int64) // rng.choice([1, 3, 50], n)
    units[rng.random(n) < 0.08] = ONE  # certain items
    units[rng.random(n) < 0.05] = ONE - 1
    units[rng.random(n) < 0.1] = 0
    if n >= 4:  # the mass reaches 1 exactly at item 1 (and 2 after item 3)
        units[:4] = [ONE // 2, ONE // 2, ONE // 4, 3 * (ONE // 4)]
    mass = np.where(units == ONE, 0, units)
    want_cum = np.cumsum(mass)
    whole = want_cum >> UNIT_BITS
    want_cross = np.flatnonzero(whole > np.concatenate(([0], whole[:-1])))
    want_bits = np.zeros(((n + 63) // 64) * 64, np.uint8)
    want_bits[:n] = units == ONE

    cum = units.copy()
    bits = np.empty((n + 63) // 64, np.uint64)
    cross = np.full(n + 8, -1, np.int32)
    n_cross = _running_mass(cum, n, bits, cross)
    np.testing.assert_array_equal(cum, want_cum)
    np.testing.assert_array_equal(cross[:n_cross], want_cross)
    got_bits = np.unpackbits(bits.view(np.uint8), bitorder="little")
    np.testing.assert_array_equal(got_bits, want_bits)
    if n >= 4:
        assert want_cross[0] == 1 and want_cross[1] == 3


def test_merge_of_more_leftovers_than_a_block() -> None:
    """Pools above 2^32 points leave more than 2^16 block leftovers: the merge rounds them in
    groups (no int64 overflow), identically on every backend, and takes floor(sum) or
    floor(sum) + 1 distinct leftovers."""
    from rad._backends import canonical
    from rad._backends.canonical import BLOCK, ONE

    rng = np.random.default_rng(8)
    n = 2 * BLOCK + 1234
    ids = np.sort(rng.choice(10**12, n, replace=False)).astype(np.int64)
    masses = np.floor(rng.random(n) * ONE) / ONE  # leftovers are multiples of 2^-46
    total = math.fsum(masses.tolist())
    wanted = math.floor(total)  # the last round pairs at most wanted - 1 crossings in all
    ref, pick = canonical.merge_leftovers(ids, masses, 5, wanted)
    assert len(ref) == wanted - 1 and pick in set(ids.tolist())
    assert len(set(ref)) == len(ref) and set(ref) <= set(ids.tolist())
    others: list[tuple[np.ndarray, int]] = []
    if "numba" in BACKENDS:
        from rad._backends import numba_backend

        others.append(numba_backend._merge_leftovers(ids, masses, 5, wanted))
    if "cpp" in BACKENDS:
        from rad import _core

        others.append(_core.merge_leftovers(ids, masses, 5, wanted))
    for taken, last in others:
        # The same picks; their order is not part of the definition (the selection is
        # sorted), and the C++ rounding reads them out in ascending order.
        assert len(taken) == len(ref)
        np.testing.assert_array_equal(np.sort(np.asarray(taken)), np.sort(np.asarray(ref)))
        assert last == pick


@pytest.mark.parametrize(
    "total, ok",
    [(1.0 + 2e-10, True), (1.0 + 2e-9, False), (1e6 + 0.4, False), (1e6 + 5e-7, True), (1e6 + 2e-6, False)],
)
def test_integer_sum_check_is_absolute(total: float, ok: bool) -> None:
    """sum(q) within min(1e-9 * sum, 1e-6) of an integer (a 1e-6 relative check let a sum
    0.4 off through at b = 1e6)."""
    n = max(4, int(total) + 4)
    q = np.full(n, total / n)
    if ok:
        assert rad.depround(q, rng=0).shape == (round(total),)
    else:
        with pytest.raises(ValueError, match="integer"):
            rad.depround(q, rng=0)


def test_float32_q_is_held_to_its_own_precision() -> None:
    """float32 q whose exact sum is an integer only up to its entries' rounding (ten
    float32 0.1s sum to 1 + 1.5e-8, above the float64 check's 1e-9) is rounded, with the
    marginals of its entries; a float32 sum off by more than 2^-24 of it is still refused."""
    q = np.full(10, 0.1, np.float32)
    assert abs(float(np.sum(q, dtype=np.float64)) - 1.0) > 1e-9  # the float64 check refuses it
    picks = np.concatenate([rad.depround(q, rng=s) for s in range(4000)])
    assert picks.shape == (4000,)
    counts = np.bincount(picks, minlength=10)
    # each index 400 times on average: a 5-sigma band (sd = sqrt(4000 * 0.1 * 0.9) = 19)
    assert np.all(np.abs(counts - 400) < 5 * 19), counts
    with pytest.raises(ValueError, match="integer"):
        rad.depround(np.full(10, np.float32(0.1) * np.float32(1.0 + 2.0**-20), np.float32), rng=0)
    big = np.full(1 << 20, 0.25, np.float32)  # sums to 2^18 exactly: accepted as before
    assert rad.depround(big, rng=0).shape == (1 << 18,)

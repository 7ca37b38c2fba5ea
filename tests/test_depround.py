"""DepRound: exact size, distinct indices, marginals equal to q (statistically), the
paper's negative correlation, and identical output for any thread count and backend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import naive_depround

import rad

from conftest import BACKENDS


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

"""Tests of rad.selectors: the shared contract, and each selector against a naive reference."""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import pdist

from rad import selectors as S
from rad.selectors import PoolState
from rad.selectors.cluster_margin import _buckets, _round_robin
from rad.selectors.pool import ranks_to_indices

# max_examples comes from the Hypothesis profile of tests/conftest.py (ci: 60, thorough: 1000)
HYP = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
ALL = S.available()


def rad_available() -> bool:
    try:
        import rad

        rad.select  # noqa: B018 - resolves the lazy attribute
    except (ImportError, AttributeError):
        return False
    return True


# ----------------------------------------------------------------------------- naive references


def naive_margins(probs: np.ndarray) -> np.ndarray:
    out = []
    for row in probs.tolist():
        top = sorted(row, reverse=True)
        out.append(top[0] - top[1])
    return np.array(out)


def naive_entropy(probs: np.ndarray) -> np.ndarray:
    return np.array([-math.fsum(p * math.log(p) for p in row if p > 0) for row in probs.tolist()])


def sort_reference_lowest(scores: np.ndarray, b: int, excluded: np.ndarray):
    """The b lowest scores by a full stable sort: (threshold, strictly-below set, tie set)."""
    cand = np.setdiff1d(np.arange(scores.size), excluded)
    order = cand[np.argsort(scores[cand], kind="stable")]
    threshold = scores[order[b - 1]]
    below = set(cand[scores[cand] < threshold].tolist())
    tied = set(cand[scores[cand] == threshold].tolist())
    return threshold, below, tied, order[:b]


def naive_sqdist(x: np.ndarray, i: int, j: int) -> float:
    return math.fsum((a - c) ** 2 for a, c in zip(x[i].tolist(), x[j].tolist()))


def naive_k_center(x: np.ndarray, b: int, centers: list[int], first: int | None) -> list[int]:
    """O(n^2 b) k-center greedy on exact distances; ties to the lowest index."""
    n = x.shape[0]
    chosen = list(centers)
    picks: list[int] = []
    for t in range(b):
        if t == 0 and not centers:
            j = first
        else:
            best_d, j = -1.0, -1
            for i in range(n):
                if i in chosen:
                    continue
                d = min(naive_sqdist(x, i, c) for c in chosen)
                if d > best_d:
                    best_d, j = d, i
        picks.append(j)
        chosen.append(j)
    return picks


def naive_radius(x: np.ndarray, centers) -> float:
    centers = list(centers)
    return math.sqrt(max(min(naive_sqdist(x, i, c) for c in centers) for i in range(x.shape[0])))


# ----------------------------------------------------------------------------- generators


@st.composite
def pools(draw, max_n: int = 60, with_m: bool = True, with_candidates: bool = False):
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(2, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):  # coarse probabilities: many ties in every score
        raw = rng.integers(0, 3, size=(n, k)).astype(np.float64)
        raw[:, 0] += 1
    else:
        raw = rng.random((n, k))
    probs = raw / raw.sum(axis=1, keepdims=True)
    emb = rng.integers(-3, 4, size=(n, 3)).astype(np.float64)  # exact distances, ties
    n_lab = draw(st.integers(0, n - 1))
    labeled = rng.choice(n, size=n_lab, replace=False)
    if draw(st.booleans()):  # duplicates and a boolean mask are accepted too
        labeled = np.concatenate([labeled, labeled[: n_lab // 2]])
    elif draw(st.booleans()):
        mask = np.zeros(n, dtype=bool)
        mask[labeled] = True
        labeled = mask
    m = float(draw(st.floats(0, n))) if with_m else None
    candidates = None
    if with_candidates and draw(st.booleans()):
        candidates = rng.choice(n, size=draw(st.integers(1, n)), replace=False)
        if not np.setdiff1d(candidates, np.asarray(labeled).nonzero()[0]
                            if np.asarray(labeled).dtype == bool else labeled).size:
            candidates = None  # keep at least one selectable point
    pool = PoolState(probs=probs, embeddings=emb, labeled=labeled, m=m, candidates=candidates)
    b = draw(st.integers(0, pool.n_candidates))
    return pool, b


def names_for_test() -> list[str]:
    return [name for name in ALL if name != "rad" or rad_available()]


# ----------------------------------------------------------------------------- shared contract


@pytest.mark.filterwarnings("ignore:the game's value is negative")  # zero gains, large m
@HYP
@given(data=pools(), name=st.sampled_from(names_for_test()), seed=st.integers(0, 2**63))
def test_every_strategy_returns_b_distinct_unlabeled_indices(data, name, seed):
    pool, b = data
    strategy = S.get_strategy(name)
    idx = strategy.select(pool, b, rng=seed)
    assert idx.dtype == np.int64
    assert idx.shape == (b,)
    assert np.all(np.diff(idx) > 0)  # sorted and distinct
    if b:
        assert 0 <= idx[0] and idx[-1] < pool.n
    assert not np.isin(idx, pool.excluded).any()
    # reproducible: same int seed, same SeedSequence, Generator in the same state
    np.testing.assert_array_equal(idx, strategy.select(pool, b, rng=seed))
    np.testing.assert_array_equal(
        strategy.select(pool, b, rng=np.random.SeedSequence(seed)),
        strategy.select(pool, b, rng=np.random.default_rng(np.random.SeedSequence(seed))),
    )


@pytest.mark.parametrize("name", names_for_test())
def test_budget_errors(name):
    rng = np.random.default_rng(0)
    pool = PoolState(probs=rng.dirichlet(np.ones(3), 10), embeddings=rng.random((10, 2)),
                     labeled=[0, 1, 2], m=2.0)
    strategy = S.get_strategy(name)
    with pytest.raises(ValueError, match="b=8 exceeds the 7 selectable points"):
        strategy.select(pool, 8)
    with pytest.raises(ValueError, match="b must be in"):
        strategy.select(pool, -1)
    with pytest.raises(TypeError, match="b must be an integer"):
        strategy.select(pool, 2.0)
    with pytest.raises(TypeError, match="rng must be"):
        strategy.select(pool, 2, rng=1.5)
    with pytest.raises(TypeError, match="PoolState"):
        strategy.select({"probs": pool.probs}, 2)
    assert strategy.select(pool, 0).shape == (0,)
    assert sorted(strategy.select(pool, 7, rng=1).tolist()) == list(range(3, 10))


def test_generator_is_advanced_not_copied():
    pool = PoolState(size=1000)
    gen = np.random.default_rng(5)
    first = S.Uniform().select(pool, 10, rng=gen)
    second = S.Uniform().select(pool, 10, rng=gen)
    assert not np.array_equal(first, second)


def test_missing_fields_are_named():
    pool = PoolState(size=10)
    for name, field in [("margin", "probs or logits"), ("entropy", "probs or logits"),
                        ("coreset", "embeddings"), ("cluster_margin", "probs or logits")]:
        with pytest.raises(ValueError, match=field):
            S.get_strategy(name).select(pool, 2)
    with pytest.raises(ValueError, match="needs PoolState.embeddings"):
        S.ClusterMargin().select(PoolState(probs=np.full((10, 2), 0.5)), 2)
    with pytest.raises(ValueError, match="RAD needs PoolState.m"):
        S.RAD().select(PoolState(probs=np.full((10, 2), 0.5)), 2)


def test_cluster_margin_without_scipy_names_the_install(monkeypatch):
    """Cluster-Margin's HAC is SciPy's: without it the error says what to install."""
    from rad.selectors.cluster_margin import hac_clusters

    monkeypatch.setitem(sys.modules, "scipy.cluster.hierarchy", None)  # import fails
    with pytest.raises(ImportError, match="pip install scipy"):
        hac_clusters(np.random.default_rng(0).random((8, 2)), n_clusters=2)


def test_pool_state_validation():
    with pytest.raises(ValueError, match="either probs or logits"):
        PoolState(probs=np.full((2, 2), 0.5), logits=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="inconsistent pool sizes"):
        PoolState(probs=np.full((2, 2), 0.5), embeddings=np.zeros((3, 4)))
    with pytest.raises(ValueError, match="outside"):
        PoolState(size=5, labeled=[5])
    with pytest.raises(ValueError, match="outside"):
        PoolState(size=5, labeled=[-1])
    with pytest.raises(TypeError, match="integer indices"):
        PoolState(size=5, labeled=[1.0])
    with pytest.raises(ValueError, match="boolean mask"):
        PoolState(size=5, labeled=np.ones(4, dtype=bool))
    with pytest.raises(ValueError, match="needs at least one"):
        PoolState()
    with pytest.raises(ValueError, match="2-D"):
        PoolState(embeddings=np.zeros(4))
    with pytest.raises(TypeError, match="integer labels"):
        PoolState(clusters=np.zeros(4))
    pool = PoolState(logits=np.zeros((4, 3)), labeled=np.array([True, False, True, False]))
    assert pool.excluded.tolist() == [0, 2] and pool.n_candidates == 2
    with pytest.raises(ValueError, match="unknown score kind"):
        pool.score("bald")


def test_registry():
    assert set(ALL) >= {"rad", "margin", "entropy", "least_confidence", "uniform", "coreset",
                        "k_center", "cluster_margin"}
    assert isinstance(S.get_strategy("k_center"), S.Coreset)
    with pytest.raises(ValueError, match="unknown strategy"):
        S.get_strategy("unixkd")
    with pytest.raises(TypeError):
        S.get_strategy("margin", candidate_factor=3)
    with pytest.raises(ValueError, match="candidate_factor"):
        S.ClusterMargin(candidate_factor=0.5)
    with pytest.raises(ValueError, match="linkage"):
        S.ClusterMargin(method="mean")
    with pytest.raises(ValueError, match="unknown gain"):
        S.RAD(gain="bald")


# ----------------------------------------------------------------------------- exclusion mapping


@HYP
@given(n=st.integers(1, 200), data=st.data())
def test_ranks_to_indices_matches_delete(n, data):
    excluded = np.unique(np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=n)), dtype=np.int64))
    candidates = np.delete(np.arange(n), excluded)
    ranks = np.arange(candidates.size)
    np.testing.assert_array_equal(ranks_to_indices(ranks, excluded), candidates)


# ----------------------------------------------------------------------------- score selectors


@HYP
@given(data=pools(with_m=False), seed=st.integers(0, 2**32))
def test_margin_matches_sort_reference(data, seed):
    pool, b = data
    if b == 0:
        return
    idx = S.Margin().select(pool, b, rng=seed)
    margins = naive_margins(pool.probs)
    # scores are compared in the library's own arithmetic to make ties exact
    np.testing.assert_allclose(pool.score("raw_margin"), margins, atol=1e-15)
    margins = pool.score("raw_margin")
    threshold, below, tied, ref = sort_reference_lowest(margins, b, pool.excluded)
    chosen = set(idx.tolist())
    assert below <= chosen  # everything strictly below the b-th margin is taken
    assert chosen - below <= tied  # the rest sit exactly at the threshold
    if len(tied) == b - len(below):  # no tie at the boundary: identical to the sort
        assert chosen == set(ref.tolist())


def test_margin_equals_argsort_without_ties():
    rng = np.random.default_rng(7)
    probs = rng.dirichlet(np.ones(10), size=5000)
    labeled = rng.choice(5000, 700, replace=False)
    pool = PoolState(probs=probs, labeled=labeled)
    margins = naive_margins(probs)
    margins[labeled] = np.inf
    for b in (1, 17, 400, 4300):
        ref = np.sort(np.argsort(margins, kind="stable")[:b])
        np.testing.assert_array_equal(S.Margin().select(pool, b, rng=b), ref)


def test_margin_tie_break_is_random_but_seeded():
    probs = np.tile([[0.6, 0.4]], (100, 1))  # all margins tie
    pool = PoolState(probs=probs)
    picks = {tuple(S.Margin().select(pool, 5, rng=s)) for s in range(20)}
    assert len(picks) > 10  # not always the lowest indices
    assert S.Margin().select(pool, 5, rng=3).tolist() == S.Margin().select(pool, 5, rng=3).tolist()


@HYP
@given(data=pools(with_m=False), seed=st.integers(0, 2**32))
def test_entropy_and_least_confidence_take_the_largest(data, seed):
    pool, b = data
    if b == 0:
        return
    np.testing.assert_allclose(pool.score("entropy"), naive_entropy(pool.probs), atol=1e-12)
    for strategy, kind in ((S.Entropy(), "entropy"), (S.LeastConfidence(), "least_confidence")):
        scores = pool.score(kind)
        idx = strategy.select(pool, b, rng=seed)
        _, below, tied, _ = sort_reference_lowest(-scores, b, pool.excluded)
        assert below <= set(idx.tolist()) <= below | tied


def test_logits_pool_agrees_with_probs_pool():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(300, 6))
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    for name in ("margin", "entropy", "least_confidence"):
        a = S.get_strategy(name).select(PoolState(logits=z), 25, rng=0)
        c = S.get_strategy(name).select(PoolState(probs=p), 25, rng=0)
        np.testing.assert_array_equal(a, c)


def test_uniform_inclusion_frequencies_with_exclusions():
    n, b, trials = 20, 3, 4000
    labeled = [0, 4, 5, 19, 11]
    pool = PoolState(size=n, labeled=labeled)
    gen = np.random.default_rng(11)
    counts = np.zeros(n)
    for _ in range(trials):
        counts[S.Uniform().select(pool, b, rng=gen)] += 1
    assert counts[labeled].sum() == 0
    p = b / (n - len(labeled))
    free = np.delete(counts, labeled)
    sigma = math.sqrt(trials * p * (1 - p))
    assert np.all(np.abs(free - trials * p) < 5 * sigma), free


# ----------------------------------------------------------------------------- k-center / coreset


@HYP
@given(data=pools(max_n=25, with_m=False), seed=st.integers(0, 2**32))
def test_k_center_matches_naive_greedy(data, seed):
    pool, b = data
    x = pool.embeddings
    picks = S.k_center_greedy(x, b, centers=pool.excluded, rng=seed, block_rows=7)
    first = int(picks[0]) if b else None
    ref = naive_k_center(x, b, pool.excluded.tolist(), first)
    assert picks.tolist() == ref  # exact integer distances: identical choices
    centers = np.concatenate([pool.excluded, picks])
    if centers.size:
        r = S.covering_radius(x, centers, block_rows=5)
        assert r <= naive_radius(x, centers.tolist()) + 1e-12
        assert r == pytest.approx(naive_radius(x, ref + pool.excluded.tolist()), abs=1e-12)


def test_k_center_radius_not_worse_than_naive_on_float32_data():
    rng = np.random.default_rng(4)
    for trial in range(5):
        x = (rng.normal(size=(120, 5)) + 50.0).astype(np.float32)  # far from the origin
        labeled = rng.choice(120, 3, replace=False).tolist()
        picks = S.k_center_greedy(x, 10, centers=labeled, rng=trial)
        ref = naive_k_center(x.astype(np.float64), 10, labeled, None)
        mine = naive_radius(x.astype(np.float64), picks.tolist() + labeled)
        theirs = naive_radius(x.astype(np.float64), ref + labeled)
        assert mine <= theirs * (1 + 1e-5)


def test_k_center_float32_with_an_outlier_in_the_first_row():
    """The distances' origin was the first row: an outlier there (at 0, the rest near 1e4)
    made the float32 products' rounding as large as the distances themselves, and k-center
    picked worse than 20 random points (covering radius 4.72 against 4.12 in float64, one
    pick in common). Now the float32 picks are float64's."""
    rng = np.random.default_rng(0)
    x = np.vstack([np.zeros((1, 8)), 1e4 + rng.standard_normal((999, 8))])
    for first in (True, False):  # the outlier first, then last (which was fine)
        xx = x if first else np.roll(x, -1, axis=0)
        c = 0 if first else 999
        f32 = S.k_center_greedy(xx.astype(np.float32), 20, centers=[c])
        f64 = S.k_center_greedy(xx, 20, centers=[c])
        assert S.covering_radius(xx, np.r_[c, f32]) <= S.covering_radius(xx, np.r_[c, f64]) * (1 + 1e-6)
        assert np.intersect1d(f32, f64).size >= 18


@pytest.mark.parametrize("dtype, offset", [(np.float32, 1e3), (np.float32, 1e4), (np.float32, 1e5),
                                           (np.float64, 1e7), (np.float64, 1e8)])
def test_k_center_greedy_picks_the_farthest_point_of_a_far_cluster(dtype, offset):
    """Two clusters, the bulk near 0 (where the distances' origin lands) and one at
    ``offset``: within the far cluster the expansion cancels whatever the origin, and
    float32 picks were 0.37-0.86 of the farthest distance. Each pick is now the farthest
    point from the centers so far, by exact float64 distances, to 1e-3."""
    rng = np.random.default_rng(1)
    x = np.vstack([rng.normal(size=(600, 8)), offset + rng.normal(size=(400, 8)) * 5]).astype(dtype)
    x64 = x.astype(np.float64)
    centers = [0, 600]
    for j in S.k_center_greedy(x, 10, centers=centers):
        d = np.sqrt(((x64[:, None, :] - x64[None, centers, :]) ** 2).sum(-1).min(1))
        d[centers] = -np.inf
        assert d[j] >= (1 - 1e-3) * d.max(), (len(centers), d[j] / d.max())
        centers.append(int(j))
    radius = S.covering_radius(x, centers)  # (the many-centers path, the same recomputation)
    exact = np.sqrt(((x64[:, None, :] - x64[None, centers, :]) ** 2).sum(-1).min(1)).max()
    assert radius == pytest.approx(exact, rel=1e-6)


@settings(deadline=None, max_examples=25)
@given(seed=st.integers(0, 2**32), n=st.integers(2, 8), b=st.integers(1, 3), n_lab=st.integers(0, 2))
def test_k_center_is_a_two_approximation(seed, n, b, n_lab):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    n_lab = min(n_lab, n - 1)
    b = min(b, n - n_lab)
    labeled = rng.choice(n, n_lab, replace=False).tolist()
    picks = S.k_center_greedy(x, b, centers=labeled, rng=seed).tolist()
    rest = [i for i in range(n) if i not in labeled]
    opt = min(naive_radius(x, labeled + list(c)) for c in itertools.combinations(rest, b))
    assert naive_radius(x, labeled + picks) <= 2 * opt + 1e-12


def test_coreset_strategy_uses_labeled_as_centers():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(400, 8))
    labeled = np.arange(0, 400, 7)
    pool = PoolState(embeddings=x, labeled=labeled)
    idx = S.Coreset(block_rows=33).select(pool, 12, rng=0)
    np.testing.assert_array_equal(idx, np.sort(S.k_center_greedy(x, 12, centers=labeled)))
    ref = naive_k_center(x, 12, labeled.tolist(), None)
    assert idx.tolist() == sorted(ref)


def test_non_finite_embeddings_are_refused():
    x = np.zeros((10, 3))
    x[6, 1] = np.nan
    with pytest.raises(ValueError, match="row 6 contains NaN or inf"):
        S.k_center_greedy(x, 2, rng=0)
    with pytest.raises(ValueError, match="row 6 contains NaN or inf"):
        S.hac_clusters(x, n_clusters=2)
    x[6, 1] = np.inf
    with pytest.raises(ValueError, match="row 6"):
        S.Coreset().select(PoolState(embeddings=x), 2, rng=0)


def test_covering_radius_errors():
    with pytest.raises(ValueError, match="at least one center"):
        S.covering_radius(np.zeros((3, 2)), [])
    with pytest.raises(TypeError, match="real numeric"):
        S.covering_radius(np.zeros((3, 2), dtype=complex), [0])
    with pytest.raises(ValueError, match="b must be in"):
        S.k_center_greedy(np.zeros((3, 2)), 3, centers=[0])


# ----------------------------------------------------------------------------- HAC and cluster-margin


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_hac_single_bucket_is_exact_scipy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4))
    for method in ("average", "ward", "single"):
        labels = S.hac_clusters(x, n_clusters=12, method=method, bucket_size=300)
        ref = fcluster(linkage(pdist(x), method=method), 12, criterion="maxclust")
        assert same_partition(labels, ref)
        assert labels.min() == 0 and labels.max() == np.unique(labels).size - 1
    labels = S.hac_clusters(x, distance_threshold=1.5, bucket_size=1000)
    ref = fcluster(linkage(pdist(x), method="average"), 1.5, criterion="distance")
    assert same_partition(labels, ref)


@pytest.mark.parametrize("bucketing", ["rptree", "random"])
def test_hac_buckets_bound_clusters_and_keep_blobs_apart(bucketing):
    rng = np.random.default_rng(1)
    centers = rng.normal(scale=100, size=(5, 6))
    x = (centers[rng.integers(0, 5, 2000)] + rng.normal(size=(2000, 6))).astype(np.float32)
    blob = np.argmin(((x[:, None, :] - centers[None]) ** 2).sum(-1), axis=1)
    labels = S.hac_clusters(x, n_clusters=40, bucket_size=500, bucketing=bucketing, rng=3)
    sizes = np.bincount(labels)
    assert sizes.max() <= 500 and sizes.min() >= 1
    assert 40 <= sizes.size <= 44
    for c in range(sizes.size):  # no cluster mixes two blobs
        assert np.unique(blob[labels == c]).size == 1
    again = S.hac_clusters(x, n_clusters=40, bucket_size=500, bucketing=bucketing, rng=3)
    np.testing.assert_array_equal(labels, again)


def test_rptree_buckets_respect_size_and_cover_everything():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(5000, 3))
    buckets = _buckets(x, 300, "rptree", rng)
    allidx = np.sort(np.concatenate(buckets))
    np.testing.assert_array_equal(allidx, np.arange(5000))
    assert max(len(b) for b in buckets) <= 300 and min(len(b) for b in buckets) >= 150


def test_hac_validation():
    x = np.zeros((5, 2))
    with pytest.raises(ValueError, match="not both"):
        S.hac_clusters(x, n_clusters=2, distance_threshold=1.0)
    with pytest.raises(ValueError, match="n_clusters"):
        S.hac_clusters(x, n_clusters=6)
    with pytest.raises(ValueError, match="bucketing"):
        S.hac_clusters(x, bucketing="kmeans")  # type: ignore[arg-type]
    assert S.hac_clusters(np.zeros((0, 2))).shape == (0,)
    assert S.hac_clusters(np.zeros((1, 2))).tolist() == [0]


@HYP
@given(labels=st.lists(st.integers(0, 6), min_size=1, max_size=60), seed=st.integers(0, 2**32))
def test_round_robin_is_fair_and_smallest_first(labels, seed):
    labels = np.array(labels)
    order = _round_robin(labels, np.random.default_rng(seed))
    assert sorted(order.tolist()) == list(range(labels.size))
    sizes = {c: int((labels == c).sum()) for c in set(labels.tolist())}
    for b in range(1, labels.size + 1):
        taken = labels[order[:b]]
        cnt = {c: int((taken == c).sum()) for c in sizes}
        for a, c in itertools.permutations(sizes, 2):
            if cnt[a] < sizes[a]:  # a could have given more: nobody is two rounds ahead
                assert cnt[c] <= cnt[a] + 1
                if cnt[c] == cnt[a] + 1:  # c was visited first in this round
                    assert sizes[c] <= sizes[a]


def test_cluster_margin_with_precomputed_clusters():
    rng = np.random.default_rng(5)
    n, b, factor = 2000, 30, 4
    probs = rng.dirichlet(np.ones(5), size=n)
    clusters = rng.integers(0, 12, size=n)
    labeled = rng.choice(n, 300, replace=False)
    pool = PoolState(probs=probs, clusters=clusters, labeled=labeled)
    idx = S.ClusterMargin(candidate_factor=factor).select(pool, b, rng=0)
    margins = naive_margins(probs)
    margins[labeled] = np.inf
    cand = np.argsort(margins, kind="stable")[: factor * b]
    assert set(idx.tolist()) <= set(cand.tolist())
    cnt = np.bincount(clusters[idx], minlength=12)
    avail = np.bincount(clusters[cand], minlength=12)
    open_clusters = cnt < avail  # could have given more: nobody is two rounds ahead of them
    assert open_clusters.any() and cnt.max() <= cnt[open_clusters].min() + 1
    assert cnt.sum() == b and (cnt > 0).sum() == (avail > 0).sum()  # b > #clusters here


def test_cluster_margin_on_the_fly_spreads_over_blobs():
    rng = np.random.default_rng(6)
    centers = rng.normal(scale=50, size=(8, 16))
    blob = rng.integers(0, 8, size=3000)
    emb = centers[blob] + rng.normal(size=(3000, 16))
    probs = rng.dirichlet(np.ones(4), size=3000)
    pool = PoolState(probs=probs, embeddings=emb)
    idx = S.ClusterMargin(n_clusters=8, candidate_factor=10).select(pool, 16, rng=1)
    cand_blobs = np.unique(blob[np.argsort(naive_margins(probs))[:160]])
    # eight clusters among the candidates are the blobs: two rounds take two from each
    counts = np.bincount(blob[idx], minlength=8)[cand_blobs]
    assert counts.max() - counts.min() <= 1
    bucketed = S.ClusterMargin(bucket_size=50).select(pool, 16, rng=1)
    assert bucketed.shape == (16,)


# ----------------------------------------------------------------------------- RAD


@pytest.mark.skipif(not rad_available(), reason="rad.select not importable yet")
class TestRAD:
    def test_matches_core_select_without_exclusions(self):
        rng = np.random.default_rng(8)
        probs = rng.dirichlet(np.ones(10), size=3000)
        pool = PoolState(probs=probs, m=600.0)
        import rad
        from rad import gains as G

        got = S.RAD().select(pool, 40, rng=123)
        want = rad.select(G.margin_gain(probs), 600.0, 40, rng=np.random.default_rng(123))
        np.testing.assert_array_equal(got, want)

    def test_exclusions_scale_m_and_map_back(self):
        rng = np.random.default_rng(9)
        gains = rng.random(2000)
        labeled = rng.choice(2000, 500, replace=False)
        pool = PoolState(gains=gains, m=400.0, labeled=labeled)
        import rad

        got = S.RAD(w=0.5).select(pool, 50, rng=7)
        keep = np.delete(np.arange(2000), np.sort(labeled))
        ref = rad.select(gains[keep], 400.0 * 1500 / 2000, 50, w=0.5, rng=np.random.default_rng(7))
        np.testing.assert_array_equal(got, keep[ref])
        assert not np.isin(got, labeled).any()

    def test_gain_kind_and_precomputed_gains(self):
        rng = np.random.default_rng(10)
        probs = rng.dirichlet(np.ones(4), size=500)
        import rad
        from rad import gains as G

        for kind in ("entropy", "exp_margin", "least_confidence"):
            got = S.RAD(gain=kind).select(PoolState(probs=probs, m=50.0), 10, rng=1)
            want = rad.select(G.compute_gains(probs, kind), 50.0, 10, rng=np.random.default_rng(1))
            np.testing.assert_array_equal(got, want)
        own = rng.random(500)
        got = S.RAD(gain="entropy").select(PoolState(probs=probs, gains=own, m=50.0), 10, rng=1)
        np.testing.assert_array_equal(got, rad.select(own, 50.0, 10, rng=np.random.default_rng(1)))

    def test_m_validation(self):
        pool = PoolState(gains=np.ones(10), m=11.0)
        with pytest.raises(ValueError, match=r"m must be in \[0, n=10\]"):
            S.RAD().select(pool, 2)
        with pytest.raises(TypeError, match="real number"):
            S.RAD().select(PoolState(gains=np.ones(10), m="3"), 2)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- scores, order, candidates


@pytest.mark.filterwarnings("ignore:the game's value is negative")
@HYP
@given(data=pools(with_candidates=True), name=st.sampled_from(names_for_test()),
       seed=st.integers(0, 2**63))
def test_return_scores_keeps_the_selection_and_reports_order_and_utilities(data, name, seed):
    pool, b = data
    strategy = S.get_strategy(name)
    plain = strategy.select(pool, b, rng=seed)
    result = strategy.select(pool, b, rng=seed, return_scores=True)
    assert isinstance(result, S.Selection)
    np.testing.assert_array_equal(result.indices, plain)  # same points either way
    assert sorted(result.order.tolist()) == plain.tolist()
    assert result.scores.shape == (b,) and result.utilities.shape == (pool.n,)
    selectable = np.ones(pool.n, dtype=bool)
    selectable[pool.excluded] = False
    assert np.isnan(result.utilities[~selectable]).all()
    assert not np.isnan(result.utilities[selectable]).any()
    if name in ("coreset", "k_center"):
        return  # scores are distances at pick time: see the k-center tests
    np.testing.assert_array_equal(result.scores, result.utilities[result.order])
    if name not in ("cluster_margin", "uniform"):  # ranked selectors: best first
        assert np.all(np.diff(result.scores) <= 0)


def test_utilities_match_naive_scores():
    rng = np.random.default_rng(12)
    probs = rng.dirichlet(np.ones(5), size=400)
    labeled = rng.choice(400, 50, replace=False)
    pool = PoolState(probs=probs, labeled=labeled)
    free = np.setdiff1d(np.arange(400), labeled)
    margin = S.Margin().select(pool, 30, rng=0, return_scores=True)
    np.testing.assert_allclose(margin.utilities[free], 1 - naive_margins(probs)[free], atol=1e-15)
    # the b largest margin gains, best first, are the b smallest margins of the sort
    ref = free[np.argsort(naive_margins(probs)[free], kind="stable")[:30]]
    assert margin.order.tolist() == ref.tolist()
    entropy = S.Entropy().select(pool, 30, rng=0, return_scores=True)
    np.testing.assert_allclose(entropy.utilities[free], naive_entropy(probs)[free], atol=1e-12)
    least = S.LeastConfidence().select(pool, 30, rng=0, return_scores=True)
    np.testing.assert_allclose(least.utilities[free], 1 - probs.max(axis=1)[free], atol=1e-15)
    uniform = S.Uniform().select(pool, 30, rng=0, return_scores=True)
    np.testing.assert_allclose(uniform.utilities[free], 30 / 350)
    assert math.isclose(np.nansum(uniform.utilities), 30)


@HYP
@given(data=pools(max_n=25, with_m=False, with_candidates=True), seed=st.integers(0, 2**32))
def test_k_center_pick_order_and_distances_match_naive_greedy(data, seed):
    pool, b = data
    x = pool.embeddings
    result = S.Coreset(block_rows=7).select(pool, b, rng=seed, return_scores=True)
    labeled = pool.labeled_indices.tolist()
    selectable = set(pool.selectable_indices().tolist())
    picks = result.order.tolist()
    assert set(picks) <= selectable
    # replay the greedy choice naively: each pick is a farthest selectable point from the
    # centers so far (lowest index among ties), at the reported distance
    chosen = list(labeled)
    for t, j in enumerate(picks):
        if not chosen:
            assert result.scores[t] == np.inf
        else:
            dist = {i: math.sqrt(min(naive_sqdist(x, i, c) for c in chosen))
                    for i in selectable - set(chosen)}
            best = max(dist.values())
            assert dist[j] == pytest.approx(best, abs=1e-12)
            assert j == min(i for i, d in dist.items() if d == best)
            assert result.scores[t] == pytest.approx(best, abs=1e-12)
        chosen.append(j)
    if labeled and b:
        for i in selectable:
            want = math.sqrt(min(naive_sqdist(x, i, c) for c in labeled))
            assert result.utilities[i] == pytest.approx(want, abs=1e-12)


def test_candidates_restrict_like_exclusions():
    rng = np.random.default_rng(13)
    n = 600
    probs = rng.dirichlet(np.ones(4), size=n)
    emb = rng.normal(size=(n, 3))
    labeled = rng.choice(n, 40, replace=False)
    candidates = rng.choice(n, 200, replace=False)
    with_cands = PoolState(probs=probs, embeddings=emb, labeled=labeled, candidates=candidates,
                           m=90.0)
    complement = np.setdiff1d(np.arange(n), np.setdiff1d(candidates, labeled))
    as_labeled = PoolState(probs=probs, embeddings=emb, labeled=complement, m=90.0)
    assert with_cands.n_candidates == as_labeled.n_candidates
    np.testing.assert_array_equal(with_cands.excluded, as_labeled.excluded)
    for name in ("margin", "entropy", "least_confidence", "uniform", "cluster_margin"):
        got = S.get_strategy(name).select(with_cands, 25, rng=4)
        np.testing.assert_array_equal(got, S.get_strategy(name).select(as_labeled, 25, rng=4))
        assert set(got.tolist()) <= set(candidates.tolist()) - set(labeled.tolist())
    # k-center: candidates are picked, but only labeled points are initial centers
    picks = S.k_center_greedy(emb, 10, centers=labeled, candidates=candidates)
    ref = naive_k_center_among(emb, 10, labeled.tolist(),
                               sorted(set(candidates.tolist()) - set(labeled.tolist())))
    assert picks.tolist() == ref
    np.testing.assert_array_equal(S.Coreset().select(with_cands, 10, rng=0), np.sort(ref))
    with pytest.raises(ValueError, match=r"b=200 exceeds the \d+ selectable points .*outside"):
        S.Margin().select(with_cands, 200)


def naive_k_center_among(x: np.ndarray, b: int, centers: list[int], allowed: list[int]) -> list[int]:
    chosen, picks = list(centers), []
    for _ in range(b):
        dist = {i: min(naive_sqdist(x, i, c) for c in chosen) for i in allowed if i not in chosen}
        best = max(dist.values())
        j = min(i for i, d in dist.items() if d == best)
        picks.append(j)
        chosen.append(j)
    return picks


def test_candidate_and_return_scores_validation():
    with pytest.raises(ValueError, match="candidates contains index 7"):
        PoolState(size=5, candidates=[7])
    with pytest.raises(TypeError, match="return_scores must be a bool"):
        S.Margin().select(PoolState(probs=np.full((4, 2), 0.5)), 1, return_scores=1)
    empty = S.Margin().select(PoolState(probs=np.full((4, 2), 0.5), labeled=[1]), 0,
                              return_scores=True)
    assert empty.indices.shape == (0,) and np.isnan(empty.utilities[1])
    assert np.allclose(empty.utilities[[0, 2, 3]], 0.5 + 0.5)


@pytest.mark.skipif(not rad_available(), reason="rad.select not importable yet")
def test_rad_utilities_are_the_minimax_probabilities():
    import rad
    from rad import gains as G

    rng = np.random.default_rng(14)
    n, b = 3000, 40
    probs = rng.dirichlet(np.ones(10), size=n)
    labeled = rng.choice(n, 300, replace=False)
    candidates = rng.choice(n, 2000, replace=False)
    pool = PoolState(probs=probs, m=600.0, labeled=labeled, candidates=candidates)
    result = S.RAD().select(pool, b, rng=5, return_scores=True)
    keep = pool.selectable_indices()
    gains = G.margin_gain(probs)[keep]
    m_c = 600.0 * keep.size / n
    q = rad.solve(gains, m_c, b).probabilities()
    np.testing.assert_array_equal(result.utilities[keep], q)
    assert result.info["m"] == pytest.approx(m_c)
    assert math.isclose(float(np.nansum(result.utilities)), b, rel_tol=1e-9)
    want = keep[rad.select(gains, m_c, b, rng=np.random.default_rng(5))]
    np.testing.assert_array_equal(result.indices, want)
    np.testing.assert_array_equal(result.scores, result.utilities[result.order])
    assert np.all(np.diff(result.scores) <= 0)


def test_rad_selector_names_a_bad_gain_by_its_pool_index():
    """With labeled points left out, the RAD selector validated the candidates' gains and
    named a NaN by its index among them (gains[5] for the pool's gains[10])."""
    g = np.ones(20)
    g[10] = np.nan
    with pytest.raises(ValueError, match=r"gains\[10\] = nan is NaN"):
        S.get_strategy("rad").select(S.PoolState(gains=g, m=3, labeled=[0, 1, 2, 3, 4]), 2, rng=0)
    g[10], g[2] = 1.0, np.nan  # a labeled point's gain is not a candidate's: no error
    assert S.get_strategy("rad").select(S.PoolState(gains=g, m=3, labeled=[0, 1, 2, 3, 4]), 2, rng=0).shape == (2,)


def test_cluster_margin_candidate_factor_is_checked_when_built():
    """An infinite candidate_factor was accepted, then select raised OverflowError; a
    string gave "must be real number, not str" without the argument's name."""
    with pytest.raises(ValueError, match="candidate_factor must be a finite number >= 1"):
        S.get_strategy("cluster_margin", candidate_factor=float("inf"))
    with pytest.raises(TypeError, match="candidate_factor must be a real number"):
        S.get_strategy("cluster_margin", candidate_factor="10")
    assert S.get_strategy("cluster_margin", candidate_factor=np.float32(2.5)).candidate_factor == 2.5

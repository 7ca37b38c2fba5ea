"""Tests of rad.gains against naive per-row Python references."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rad import gains as G

KINDS = ("raw_margin", "margin", "entropy", "least_confidence", "exp_margin")
FUNCS = {
    "raw_margin": G.margins,
    "margin": G.margin_gain,
    "entropy": G.entropy_gain,
    "least_confidence": G.least_confidence_gain,
    "exp_margin": G.exp_margin_gain,
}
# max_examples comes from the Hypothesis profile of tests/conftest.py (ci: 60, thorough: 1000)
HYP = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- naive references


def naive_from_probs(row: list[float], kind: str) -> float:
    """One row, plain Python: sorted() for the top two, math.log for the entropy."""
    top = sorted(row, reverse=True)
    margin = top[0] - top[1]
    if kind == "raw_margin":
        return margin
    if kind == "margin":
        return 1.0 - margin
    if kind == "exp_margin":
        return math.exp(-margin)
    if kind == "least_confidence":
        return 1.0 - top[0]
    return -math.fsum(p * math.log(p) for p in row if p > 0)


def naive_softmax(row: list[float]) -> list[float]:
    z1 = max(row)
    e = [math.exp(z - z1) if z != -math.inf else 0.0 for z in row]
    s = math.fsum(e)
    return [v / s for v in e]


def naive(x: np.ndarray, kind: str, from_logits: bool = False) -> np.ndarray:
    rows = x.astype(np.float64).tolist()
    if from_logits:
        rows = [naive_softmax(r) for r in rows]
    return np.array([naive_from_probs(r, kind) for r in rows], dtype=np.float64)


# ----------------------------------------------------------------------------- generators


@st.composite
def prob_matrices(draw, dtype=None):
    n = draw(st.integers(0, 40))
    k = draw(st.sampled_from([2, 3, 7, 10, 129, 140]))
    dtype = dtype or draw(st.sampled_from([np.float32, np.float64]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    style = draw(st.sampled_from(["dirichlet", "coarse", "onehot", "peaked"]))
    if style == "dirichlet":
        p = rng.dirichlet(np.full(k, draw(st.sampled_from([0.05, 1.0, 20.0]))), size=n)
    elif style == "coarse":  # many exact ties and zeros
        p = rng.integers(0, 3, size=(n, k)).astype(np.float64)
        p[:, 0] += 1
        p /= p.sum(axis=1, keepdims=True)
    elif style == "onehot":
        p = np.eye(k)[rng.integers(0, k, size=n)]
    else:
        logits = rng.normal(scale=30, size=(n, k))
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
    chunk = draw(st.one_of(st.none(), st.integers(1, 17)))
    return p.astype(dtype), chunk


@st.composite
def logit_matrices(draw):
    n = draw(st.integers(0, 30))
    k = draw(st.sampled_from([2, 4, 10, 130]))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([1.0, 10.0, 1e3, 1e30]))
    z = rng.normal(scale=scale, size=(n, k))
    if draw(st.booleans()) and n:
        z[rng.random((n, k)) < 0.2] = -np.inf  # masked classes
        z[np.arange(n), rng.integers(0, k, size=n)] = rng.normal(size=n)  # keep a finite max
    if draw(st.booleans()):
        z = np.round(z)  # ties
    chunk = draw(st.one_of(st.none(), st.integers(1, 9)))
    return z.astype(dtype), chunk


def tolerance(dtype, k: int) -> float:
    return 16 * k * float(np.finfo(dtype).eps)


# ----------------------------------------------------------------------------- correctness


@HYP
@given(data=prob_matrices(), kind=st.sampled_from(KINDS))
def test_probabilities_match_naive(data, kind):
    p, chunk = data
    got = FUNCS[kind](p, chunk_rows=chunk)
    assert got.shape == (p.shape[0],)
    assert got.dtype == p.dtype
    want = naive(p, kind)
    np.testing.assert_allclose(got, want, rtol=0, atol=tolerance(p.dtype, p.shape[1]))


@HYP
@given(data=logit_matrices(), kind=st.sampled_from(KINDS))
def test_logits_match_naive_softmax(data, kind):
    z, chunk = data
    got = FUNCS[kind](z, from_logits=True, chunk_rows=chunk)
    assert got.dtype == z.dtype
    assert np.isfinite(got).all()
    want = naive(z, kind, from_logits=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=tolerance(z.dtype, z.shape[1]))


@HYP
@given(data=prob_matrices(dtype=np.float64), kind=st.sampled_from(G.GAIN_KINDS))
def test_compute_gains_dispatches(data, kind):
    p, chunk = data
    np.testing.assert_array_equal(
        G.compute_gains(p, kind, chunk_rows=chunk), FUNCS[kind](p, chunk_rows=chunk)
    )
    # block boundaries change only the summation order
    np.testing.assert_allclose(FUNCS[kind](p), FUNCS[kind](p, chunk_rows=chunk), rtol=1e-14, atol=1e-15)


def test_ranges_and_known_values():
    p = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.7, 0.2, 0.1]])
    np.testing.assert_allclose(G.margins(p), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(G.margin_gain(p), [1.0, 0.0, 0.5])
    np.testing.assert_allclose(G.exp_margin_gain(p), np.exp([0.0, -1.0, -0.5]))
    np.testing.assert_allclose(G.least_confidence_gain(p), [0.5, 0.0, 0.3])
    h = -(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1))
    np.testing.assert_allclose(G.entropy_gain(p), [math.log(2), 0.0, h])
    assert (G.entropy_gain(p) >= 0).all()


def test_extreme_logits_are_stable():
    z = np.array(
        [[1e4, -1e4, 0.0], [3e38, -3e38, 0.0], [5.0, 5.0, -np.inf], [-1e30, -1e30 + 1e15, -np.inf]],
        dtype=np.float32,
    )
    for kind, f in FUNCS.items():
        got = f(z, from_logits=True)
        assert np.isfinite(got).all(), kind
    np.testing.assert_allclose(G.margins(z, from_logits=True)[:3], [1.0, 1.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(G.entropy_gain(z, from_logits=True)[:3], [0, 0, math.log(2)], atol=1e-6)


def test_logit_path_agrees_with_probability_path():
    rng = np.random.default_rng(3)
    z = rng.normal(scale=4, size=(500, 12))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    for kind, f in FUNCS.items():
        np.testing.assert_allclose(f(z, from_logits=True), f(p), atol=1e-12, err_msg=kind)


# ----------------------------------------------------------------------------- dtypes, layouts


def test_dtypes_and_empty():
    p = np.full((4, 4), 0.25)
    assert G.margin_gain(p).dtype == np.float64
    assert G.margin_gain(p.astype(np.float32)).dtype == np.float32
    out16 = G.entropy_gain(p.astype(np.float16))
    assert out16.dtype == np.float32
    np.testing.assert_allclose(out16, math.log(4), rtol=1e-6)
    assert G.margin_gain(np.zeros((0, 3), np.float32)).shape == (0,)
    assert G.margin_gain([[0.3, 0.7]]).tolist() == pytest.approx([0.6])


def test_non_contiguous_and_memmap(tmp_path):
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(6), size=1000)
    want = naive(p, "margin")
    fortran = np.asfortranarray(p)
    np.testing.assert_allclose(G.margin_gain(fortran, chunk_rows=77), want, atol=1e-14)
    strided = np.repeat(p, 2, axis=0)[::2]
    np.testing.assert_allclose(G.margin_gain(strided, chunk_rows=64), want, atol=1e-14)
    path = tmp_path / "p.f32"
    p.astype(np.float32).tofile(path)
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=p.shape)
    np.testing.assert_allclose(G.margin_gain(mm, chunk_rows=100), want, atol=1e-5)


def test_memory_is_bounded_by_one_block():
    n, k = 400_000, 10  # 16 MB of float32 probabilities
    rng = np.random.default_rng(1)
    p = rng.random((n, k), dtype=np.float32)
    p /= p.sum(axis=1, keepdims=True)
    output = n * 4
    for kind, f in FUNCS.items():
        for from_logits in (False, True):
            tracemalloc.start()
            f(p, from_logits=from_logits)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            # output + a few blocks of 2**18 elements, far below one (n, k) temporary
            assert peak < output + 8 * 2**20, (kind, from_logits, peak)
            assert peak < p.nbytes / 2, (kind, from_logits, peak)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("x", "exc", "match"),
    [
        (np.ones(3), ValueError, "2-D"),
        (np.ones((3, 1)), ValueError, "at least 2 classes"),
        (np.ones((2, 2), dtype=np.int64), TypeError, "floating-point"),
        (np.array([[0.5, 0.5], [np.nan, 1.0]]), ValueError, "NaN .row 1"),
        (np.array([[0.5, 0.5], [0.5, np.inf]]), ValueError, "inf .row 1"),
        (np.array([[-0.1, 1.1]]), ValueError, ">= 0.*row 0"),
        (np.array([[0.5, 0.5], [0.5, 0.5], [2.0, 3.0]]), ValueError, "row 2 sums to 5.0"),
    ],
)
def test_probability_validation(x, exc, match):
    with pytest.raises(exc, match=match):
        G.margin_gain(x, chunk_rows=2)


def test_row_index_in_error_counts_across_blocks():
    p = np.full((50, 3), 1 / 3)
    p[37] = [0.9, 0.9, 0.9]
    with pytest.raises(ValueError, match="row 37"):
        G.entropy_gain(p, chunk_rows=8)


def test_float16_rows_of_many_classes_are_checked_like_a_float32_softmax():
    """``4 k eps(float16)`` was 3.9 at k = 1000: a row of zeros or one summing to 4 passed
    (and gave an entropy of 13.7 > log 1000). A float16-stored float32 softmax passes."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 1000)).astype(np.float32)
    p = np.exp(z - z.max(1, keepdims=True))
    p = (p / p.sum(1, keepdims=True)).astype(np.float16)
    assert G.entropy_gain(p).max() <= np.log(1000) + 1e-3
    for bad in (np.zeros((1, 1000), np.float16), np.full((1, 1000), 0.004, np.float16)):
        with pytest.raises(ValueError, match="sum to 1"):
            G.margin_gain(bad)


def test_margins_stay_in_their_documented_range():
    """A row within atol of 1 with an entry above 1: margin 1.0005 and a gain of -0.0005
    (which rad.select then refuses as negative); now clipped to [0, 1]."""
    p = np.array([[1.0005, 0.0]])
    assert G.margins(p)[0] == 1.0
    assert G.margin_gain(p)[0] == 0.0 and G.least_confidence_gain(p)[0] == 0.0


def test_atol_and_validate_switch():
    p = np.array([[0.6, 0.45]])  # sums to 1.05
    with pytest.raises(ValueError, match="atol"):
        G.margin_gain(p)
    np.testing.assert_allclose(G.margin_gain(p, atol=0.1), [0.85])
    np.testing.assert_allclose(G.margin_gain(p, validate=False), [0.85])
    with pytest.raises(ValueError, match="atol"):
        G.margin_gain(p, atol=-1)
    assert G.default_atol(np.float32, 10) == 1e-3
    assert G.default_atol(np.float32, 100_000) > 1e-3


@pytest.mark.parametrize(
    ("z", "match"),
    [
        (np.array([[0.0, 1.0], [np.nan, 1.0]]), "NaN .row 1"),
        (np.array([[1.0, 2.0, np.nan]]), "NaN .row 0"),
        (np.array([[0.0, np.inf]]), r"\+inf"),
        (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), "row 1 is -inf"),
    ],
)
def test_logit_validation(z, match):
    with pytest.raises(ValueError, match=match):
        G.margin_gain(z, from_logits=True)
    with pytest.raises(ValueError, match=match):
        G.entropy_gain(np.repeat(z, 1, axis=1), from_logits=True)


def test_large_k_validation_and_unknown_kind():
    p = np.full((3, 200), 1 / 200)
    p[1, 5] = np.nan
    with pytest.raises(ValueError, match="NaN .row 1"):
        G.margin_gain(p)
    z = np.zeros((2, 200))
    z[1, 3] = np.nan
    with pytest.raises(ValueError, match="NaN .row 1"):
        G.margin_gain(z, from_logits=True)
    with pytest.raises(ValueError, match="unknown gain kind"):
        G.compute_gains(np.full((1, 2), 0.5), "bald")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunk_rows"):
        G.margin_gain(np.full((1, 2), 0.5), chunk_rows=0)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-14), (np.float32, 1e-6)])
@pytest.mark.parametrize("lead", [5.0, 20.0, 40.0, 80.0])
def test_confident_logits_keep_their_small_gains(dtype, rtol: float, lead: float) -> None:
    """Logits [a, 0, 0]: 1 - max p = t / (1 + t) and H = log1p(t) + a e^-a 2 / (1 + t) with
    t = 2 e^-a (scalar math here). The logits path had formed 1 - 1/s and log(s) with
    s = 1 + t, which cancel: least confidence was 0 at a = 40 (float64) and a = 20
    (float32), and float32 entropy 5% low at a = 20; the selector then broke ties at
    random among confident rows."""
    t = 2.0 * math.exp(-lead)
    lc_ref = t / (1.0 + t)
    h_ref = math.log1p(t) + 2.0 * math.exp(-lead) * lead / (1.0 + t)
    z = np.array([[lead, 0.0, 0.0]], dtype=dtype)
    tiny = np.finfo(dtype).tiny
    for got, ref in ((G.least_confidence_gain(z, from_logits=True)[0], lc_ref),
                     (G.entropy_gain(z, from_logits=True)[0], h_ref)):
        if ref < tiny:  # below the dtype's normal range: only ask for no sign error
            assert 0.0 <= float(got) < 4 * tiny
        else:
            assert float(got) == pytest.approx(ref, rel=rtol), (got, ref)
    rows = np.array([[40.0 + k, 0.0, 0.0] for k in range(6)])
    assert np.all(np.diff(G.least_confidence_gain(rows, from_logits=True)) < 0)
    assert np.all(np.diff(G.entropy_gain(rows, from_logits=True)) < 0)


def test_tied_top_logits_give_a_positive_zero_margin() -> None:
    """Logits whose two largest are equal have margin 0; the logits path returned -0.0."""
    m = G.margins(np.array([[2.0, 2.0, 0.0], [1.0, 1.0, 1.0]]), from_logits=True)
    assert np.all(m == 0.0) and not np.any(np.signbit(m))

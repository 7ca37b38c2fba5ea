"""rad.dask on a real distributed.LocalCluster (2 worker processes on 127.0.0.1):
same threshold, k* and value as rad.solve; with block-aligned chunks the same indices as
rad.select."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="the [dask] extra is not installed")
distributed = pytest.importorskip("distributed")

import rad  # noqa: E402
import rad.dask as rd  # noqa: E402

BLOCK = 1 << 16


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _same_solution(dsol, sol, exact: bool = True) -> None:
    assert dsol.k_star == sol.k_star
    assert dsol.threshold == sol.threshold
    if exact:  # block-aligned chunks: the canonical sums, bit for bit
        assert dsol.value == sol.value
        assert dsol.params == sol.params
    else:  # other chunkings add the same numbers in another order
        assert dsol.value == pytest.approx(sol.value, rel=1e-12)
        assert dsol.params.nu == pytest.approx(sol.params.nu, rel=1e-12)


POOLS = {
    "uniform32": lambda r: r.random(700_000, dtype=np.float32),
    "uniform64": lambda r: r.random(400_000),
    "ties_zeros": lambda r: np.round(r.random(300_000), 2) * (r.random(300_000) < 0.8),
    "heavy": lambda r: r.pareto(1.5, 300_000),
}


@pytest.mark.parametrize("kind", sorted(POOLS))
def test_aligned_chunks_match_select(client, kind: str) -> None:
    g = POOLS[kind](np.random.default_rng(1))
    x = da.from_array(g, chunks=2 * BLOCK)
    n = g.shape[0]
    for frac, b in [(0.3, 1000), (0.05, 50), (0.9, 5000)]:
        m = frac * n
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rad.NetHarmWarning)
            # Where caps bind, rad.dask gathers the gains (documented, with this warning).
            warnings.filterwarnings("ignore", "rad.dask: the optimum caps", RuntimeWarning)
            _same_solution(rd.solve(x, m, b), rad.solve(g, m, b))
            np.testing.assert_array_equal(rd.select(x, m, b, rng=11), rad.select(g, m, b, rng=11))


def test_unaligned_chunks(client) -> None:
    g = np.random.default_rng(2).random(500_000)
    x = da.from_array(g, chunks=123_457)
    _same_solution(rd.solve(x, 150_000.0, 800), rad.solve(g, 150_000.0, 800), exact=False)
    idx = rd.select(x, 150_000.0, 800, rng=3)
    assert idx.shape == (800,) and np.all(np.diff(idx) > 0) and idx[-1] < g.shape[0]
    assert np.all(g[idx] >= rad.solve(g, 150_000.0, 800).threshold)  # inside the support
    np.testing.assert_array_equal(idx, rd.select(x, 150_000.0, 800, rng=3))  # reproducible


def test_marginals_unaligned(client) -> None:
    """Inclusion frequencies of the distributed DepRound match q (5-sigma band)."""
    g = np.random.default_rng(4).random(3000)
    x = da.from_array(g, chunks=1000)
    q = rad.solve(g, 300.0, 60).probabilities()
    trials = 300
    counts = np.zeros(g.shape[0])
    for t in range(trials):
        counts[rd.select(x, 300.0, 60, rng=t)] += 1
    # aggregate over deciles of q to get enough counts per cell
    order = np.argsort(q)
    for cell in np.array_split(order, 10):
        expected = q[cell].sum() * trials
        sd = np.sqrt(np.sum(q[cell] * (1 - q[cell])) * trials)
        assert abs(counts[cell].sum() - expected) <= 5 * sd + 1e-9


def test_capped_case_falls_back_with_a_warning(client) -> None:
    g = np.random.default_rng(5).random(20_000)
    x = da.from_array(g, chunks=BLOCK)
    with pytest.warns(RuntimeWarning, match="gathered to the client"):
        dsol = rd.solve(x, 5.0, 5000)
    sol = rad.solve(g, 5.0, 5000)
    assert dsol.capped and dsol.value == sol.value and dsol.params == sol.params
    # 32 MB made on the workers (not sent in the graph), above its histograms (8 MiB at most)
    big = da.random.default_rng(6).random(4_000_000, chunks=4_000_000)
    with pytest.warns(RuntimeWarning, match="gathered to the client"):
        rd.solve(big, 5.0, 1_000_000)
    assert rd.last_transfer_bytes >= 32_000_000  # the gathered pool is counted


def test_a_nan_is_refused_before_the_gathering_warning(client) -> None:
    """With b = n the pool is gathered (with a warning); a NaN was refused only after it."""
    g = np.random.default_rng(5).random(1000)
    g[500] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a warning would fail here first
        with pytest.raises(ValueError, match=r"gains\[500\]"):
            rd.solve(da.from_array(g, chunks=300), 10.0, 1000)


def test_client_fallbacks_report_rad_solve_s_capped_flag(client) -> None:
    """Where rad.dask hands the pool to rad.solve on the client, its summary is rad.solve's,
    ``capped`` included: near-overflow gains (rescaled, not capped) said capped=True; and
    ``b = n`` (every q is 1, rad.solve's own case) gave the uncapped path's params."""
    g = np.random.default_rng(0).random(1000) * 1e307
    with pytest.warns(RuntimeWarning, match="gathered to the client"):
        dsol = rd.solve(da.from_array(g, chunks=500), 300, 10)
    sol = rad.solve(g, 300, 10)
    assert not sol.capped and dsol.capped == sol.capped and dsol.params == sol.params
    for n in (1, 7, BLOCK + 3):
        g = np.random.default_rng(n).random(n) + 0.5
        with pytest.warns(RuntimeWarning, match="gathered to the client"):
            dsol = rd.solve(da.from_array(g, chunks=BLOCK), 0.25 * n, n)
        sol = rad.solve(g, 0.25 * n, n)
        assert (dsol.capped, dsol.params, dsol.value, dsol.k_star) == (sol.capped, sol.params, sol.value, sol.k_star)
        with pytest.warns(RuntimeWarning, match="gathered to the client"):
            idx = rd.select(da.from_array(g, chunks=BLOCK), 0.25 * n, n, rng=0)
        np.testing.assert_array_equal(idx, np.arange(n))


def test_errors(client) -> None:
    with pytest.raises(TypeError, match="dask.array"):
        rd.select(np.ones(5), 1.0, 1)
    g = np.random.default_rng(6).random(200_000)
    g[150_001] = np.nan
    with pytest.raises(ValueError, match=r"gains\[150001\]"):
        rd.select(da.from_array(g, chunks=BLOCK), 10.0, 5)
    with pytest.raises(ValueError, match="b "):
        rd.select(da.from_array(np.ones(10), chunks=5), 1.0, 11)


def test_chunks_emptied_by_a_filter(client) -> None:
    """Zero-length chunks (a filter that empties a chunk, then compute_chunk_sizes) are
    passed over: the same indices as rad.select; a length not yet known is named."""
    g = np.random.default_rng(8).random(2 * BLOCK + 100)
    want = rad.select(g, 0.3 * g.shape[0], 50, rng=0)
    for chunks in [(BLOCK, 0, BLOCK, 100), (0, BLOCK, BLOCK, 100), (BLOCK, BLOCK, 100, 0)]:
        got = rd.select(da.from_array(g, chunks=(chunks,)), 0.3 * g.shape[0], 50, rng=0)
        np.testing.assert_array_equal(got, want)
    x = da.from_array(g, chunks=BLOCK)
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        rd.select(x[x > 0.5], 10.0, 5)


def test_the_client_receives_one_histogram_a_level(client) -> None:
    """Histograms are added on the workers: with 200 chunks of 1,000 points the client
    received 2 MiB a chunk a level (400 MiB for a 0.76 MiB pool); now one a level."""
    g = np.random.default_rng(9).random(200_000, dtype=np.float32)
    got = rd.select(da.from_array(g, chunks=1000), 0.3 * g.shape[0], 50, rng=0)
    assert rd.last_transfer_bytes < 16 * 2**20, rd.last_transfer_bytes
    sol, ref = rd.solve(da.from_array(g, chunks=1000), 0.3 * g.shape[0], 50), rad.solve(g, 0.3 * g.shape[0], 50)
    _same_solution(sol, ref, exact=False)
    assert got.shape == (50,) and np.unique(got).shape == (50,)


def test_missing_dask_is_a_clear_error() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["dask"] = None
        sys.modules["dask.array"] = None
        import rad.dask
        try:
            rad.dask.select(None, 0.0, 0)
        except ImportError as e:
            print(e)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'robust-active-distillation[dask]'" in out


def test_extreme_and_odd_inputs_like_select(client) -> None:
    """Issue 14: subnormal and near-overflow gains (rad.solve rescales them; the chunks are
    rounded with the same scaling), NaN refused even at b = 0, big-endian arrays accepted."""
    n = BLOCK + 5
    rng = np.random.default_rng(3)
    base = rng.random(n) + 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for g in (base * 1e-310, np.full(n, 5e-324), np.full(n, 1.7e308), base * 1e308):
            idx = rd.select(da.from_array(g, chunks=BLOCK), 0.3 * n, 40, rng=2)
            assert idx.shape == (40,) and np.all(np.diff(idx) > 0)
            np.testing.assert_array_equal(idx, rad.select(g, 0.3 * n, 40, rng=2))
    bad = base.copy()
    bad[7] = np.nan
    for b in (0, 3):  # the value and its kind, as rad.select says them
        with pytest.raises(ValueError, match=r"gains\[7\] = nan is NaN"):
            rd.select(da.from_array(bad, chunks=BLOCK), 10.0, b, rng=0)
    bad[7], bad[BLOCK + 2] = 1.0, -2.5
    with pytest.raises(ValueError, match=rf"gains\[{BLOCK + 2}\] = -2.5 is negative"):
        rd.select(da.from_array(bad, chunks=BLOCK), 10.0, 3, rng=0)
    big = base.astype(">f8")
    np.testing.assert_array_equal(
        rd.select(da.from_array(big, chunks=BLOCK), 10.0, 5, rng=1), rad.select(big, 10.0, 5, rng=1)
    )
    assert rd.solve(da.from_array(big, chunks=BLOCK), 10.0, 5).value == rad.solve(base, 10.0, 5).value

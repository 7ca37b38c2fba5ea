"""pytest-benchmark suite: ``python -m pytest benchmarks/bench_select.py``.

Compare the groups' medians; the ratios that matter are in benchmarks/RESULTS.md
(produced by ``python benchmarks/scaling.py``, which measures them in one run).
"""

from __future__ import annotations

import numpy as np
import pytest

import rad
from rad._backends import get_backend
from reference import numpy_select, sequential_depround

N = 1_000_000


@pytest.fixture(scope="module")
def gains() -> np.ndarray:
    return np.random.default_rng(0).random(N, dtype=np.float32)


@pytest.mark.benchmark(group="select-1e6")
def test_np_sum_floor(benchmark, gains):
    benchmark(np.sum, gains)


@pytest.mark.benchmark(group="select-1e6")
@pytest.mark.parametrize("backend", ["cpp", "numba"])
def test_rad_select(benchmark, gains, backend):
    get_backend(backend)
    rad.select(gains, 0.3 * N, 1000, rng=0, backend=backend)  # JIT warm-up
    idx = benchmark(rad.select, gains, 0.3 * N, 1000, rng=0, backend=backend)
    assert idx.shape == (1000,)


@pytest.mark.benchmark(group="capped-1e6")
@pytest.mark.parametrize("backend", ["cpp", "numba"])
@pytest.mark.parametrize("budget", ["capped", "uncapped"])
def test_rad_select_capped_vs_uncapped(benchmark, gains, backend, budget):
    """Caps bind (m = 0.001 n, b = n / 10: the top of the pool) against the default budget."""
    m, b = (0.001 * N, N // 10) if budget == "capped" else (0.3 * N, 1000)
    rad.select(gains, m, b, rng=0, backend=backend)  # JIT warm-up
    idx = benchmark(rad.select, gains, m, b, rng=0, backend=backend)
    assert idx.shape == (b,)


@pytest.mark.benchmark(group="select-1e6")
def test_rad_select_sorted_path(benchmark, gains):
    benchmark(rad.select, gains, 0.3 * N, 1000, rng=0, method="sorted")


@pytest.mark.benchmark(group="select-1e6")
def test_numpy_reference(benchmark, gains):
    idx = benchmark(numpy_select, gains, 0.3 * N, 1000)
    assert idx.shape == (1000,)


@pytest.mark.benchmark(group="depround-1e6")
def test_depround_streaming(benchmark, gains):
    sol = rad.solve(gains, 0.3 * N, 1000)
    be = get_backend("cpp")
    benchmark(be.depround_params, gains, None, sol.w, sol.params, 1000, 7, 2)


@pytest.mark.benchmark(group="depround-1e6")
def test_depround_per_item_pairing(benchmark, gains):
    q = rad.solve(gains, 0.3 * N, 1000).probabilities()
    sequential_depround(q)  # JIT warm-up
    benchmark(sequential_depround, q)


@pytest.mark.benchmark(group="argsort-1e6")
def test_radix_argsort(benchmark, gains):
    benchmark(get_backend("cpp").argsort_desc, gains, 2)


@pytest.mark.benchmark(group="argsort-1e6")
def test_numpy_argsort(benchmark, gains):
    benchmark(np.argsort, -gains, kind="stable")


def _leftovers(blocks: int = 15_259) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One leftover per block of a 1e9 pool at b = 1000: ids, and masses in units of 2^-46."""
    rng = np.random.default_rng(0)
    units = (np.minimum(rng.uniform(0, 2000 / blocks, blocks), 0.999) * 2.0**46).astype(np.int64)
    return np.arange(blocks, dtype=np.int64) * 65_536, units, units + 1000


@pytest.mark.benchmark(group="merge-1e9-blocks")
def test_merge_spans(benchmark):
    """The merge from mass intervals (DepRound from the sketch) over a 1e9 pool's leftovers."""
    from rad import _core

    ids, lo, hi = _leftovers()
    ok = benchmark(_core.merge_spans, ids, lo, hi, 12345, 1000)[0]
    assert ok


@pytest.mark.benchmark(group="merge-1e9-blocks")
def test_merge_exact_baseline(benchmark):
    """The exact merge of the same leftovers (the plain DepRound's): the baseline of the ratio."""
    from rad import _core

    ids, lo, _ = _leftovers()
    taken, _last = benchmark(_core.merge_leftovers, ids, lo / 2.0**46, 12345, 1000)
    assert len(taken) >= 999

"""The cuda backend on numba's CUDA simulator, against the NumPy reference.

CI has no GPU: the kernels of :mod:`rad._backends.cuda_backend` run on the simulator
(``NUMBA_ENABLE_CUDASIM=1``, which must be set before numba.cuda is imported, so the checks
run in one child process: other tests in this process use the real numba) on small pools.
Each check compares with the NumPy backend: the same ``k*``, threshold, value, canonical
sums and DepRound indices (bit for bit), DepRound marginals, and the validation errors.
The parent tests below read the child's verdicts; device detection and host DLPack
views are tested here directly.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# ----------------------------------------------------------------- the child's checks

CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def _pools() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    uniform = rng.random(700)
    ties = np.round(rng.random(600) * 20) / 20  # many equal gains
    zeros = np.where(rng.random(500) < 0.3, 0.0, rng.random(500))  # zero gains, -0.0 too
    zeros[::50] = -0.0
    heavy = rng.pareto(1.5, 500)
    return [("uniform", uniform), ("ties", ties), ("zeros", zeros), ("heavy", heavy)]


#: Both dtypes on two pools, one on the others (the simulator is slow).
DTYPES = {"uniform": (np.float32, np.float64), "zeros": (np.float32, np.float64), "ties": (np.float32,),
          "heavy": (np.float64,)}


@check
def kernels_match_numpy() -> None:
    from numba import cuda

    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R
    from rad._backends.params import Params

    rng = np.random.default_rng(11)
    for label, base in _pools():
        for dtype in DTYPES[label]:
            g = base.astype(dtype)
            d = cuda.to_device(g)
            for losses in (None, rng.random(g.shape[0]) * 2) if dtype == np.float64 else (None,):
                dl = None if losses is None else cuda.to_device(losses)
                w = 0.6 if losses is None else 0.0
                n = g.shape[0]
                for m in (0.05 * n, 0.3 * n):
                    want = R.threshold_search(g, losses, w, m)
                    for got in (C.threshold_search(d, dl, w, m, 1), C.threshold_levels(d, dl, w, m, 1)):
                        assert got[:3] == want[:3], (label, dtype, m, got, want)
                        assert abs(got[3] - want[3]) <= 1e-12 * abs(want[3]), (got, want)
                tau = float(np.quantile(g, 0.4))
                assert C.support_sums(d, dl, w, tau, 1) == R.support_sums(g, losses, w, tau), (label, dtype)
                for a, b in zip(C.support_block_sums(d, dl, w, tau, 1), R.support_block_sums(g, losses, w, tau)):
                    assert np.array_equal(a, b)
                tile_max = C._TILE_MAX_BLOCKS
                try:  # the many-block layout (a thread per lane) too (a thread per lane: slow here)
                    C._TILE_MAX_BLOCKS = 0 if label in ("uniform", "zeros") else tile_max
                    assert C.support_sums(d, dl, w, tau, 1) == R.support_sums(g, losses, w, tau), (label, dtype)
                finally:
                    C._TILE_MAX_BLOCKS = tile_max
                h = R.support_sums(g, losses, w, tau)[0]
                for params in (
                    Params("gain", 0.5 if dtype == np.float32 else 3.0 / h, gain_cut=tau, gain_frac=0.25),
                    Params("loss", 0.4, loss_cut=float(np.quantile(g, 0.2)), loss_frac=0.3),
                ):
                    q_dev = C.materialize(d, dl, w, params, 1).copy_to_host()
                    assert np.array_equal(q_dev, R.materialize(g, losses, w, params)), (label, params)
                    assert C.support_stats(d, dl, w, params, 1) == R.support_stats(g, losses, w, params)
            assert C.first_invalid(d, 1) == -1


@check
def brackets_that_miss_fall_back() -> None:
    """Chosen brackets above, below, around and inside tau: the same answer every time."""
    from numba import cuda

    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R
    from rad._backends.radix_select import ordered_bits

    for label, base in _pools()[:2]:
        g = base.astype(np.float32)
        d = cuda.to_device(g)
        m = 0.1 * g.shape[0]
        want = R.threshold_search(g, None, 0.5, m)
        tau = want[1]
        for lo, hi in ((0.0, 1e-3), (0.99 * g.max(), g.max() * 2), (tau, tau * 1.0001), (0.5 * tau, 2 * tau),
                       (tau * 0.999, tau)):
            ulo, uhi = ordered_bits(lo, 32), ordered_bits(hi, 32)
            got = C._bracketed32(d, 0.5, m, 1, ulo, uhi)  # the float32 pass
            assert got[:3] == want[:3], (label, lo, hi, got, want)
            if label == "uniform":  # the general pass (float64 gains and given losses use it)
                got = C._bracketed(d, None, 0.5, m, 1, ulo, uhi)
                assert got[:3] == want[:3], (label, lo, hi, got, want)


@check
def float32_pass_edges() -> None:
    """The float32 pass (RAD losses): subnormal and huge gains take the IEEE division there,
    -0.0 counts as 0; k* and the threshold are NumPy's, g_total to its rounding."""
    from numba import cuda

    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R

    rng = np.random.default_rng(5)
    tiny = np.concatenate([rng.random(150) * 1e-40, rng.random(150)]).astype(np.float32)
    huge = np.concatenate([rng.random(100) * 3e38, rng.random(100) * 1e37, rng.random(100)]).astype(np.float32)
    tiny[::25] = -0.0
    for label, g in (("tiny", tiny), ("huge", huge)):
        d = cuda.to_device(g)
        assert C._fast32(d, None, 0.6)
        for m in (0.05 * g.shape[0], 0.3 * g.shape[0]):
            want = R.threshold_search(g, None, 0.6, m)
            got = C.threshold_search(d, None, 0.6, m, 1)
            assert got[:3] == want[:3], (label, m, got, want)
            assert abs(got[3] - want[3]) <= 1e-12 * abs(want[3]), (got, want)


class _Launches:
    """A kernel of the simulated backend wrapped to count its launches."""

    def __init__(self, kernel: Any) -> None:
        self.kernel, self.count = kernel, 0

    def __getitem__(self, cfg: Any) -> Callable[..., Any]:
        launch = self.kernel[cfg]

        def call(*args: Any) -> Any:
            self.count += 1
            return launch(*args)

        return call


@check
def queued_inside_points_match_numpy() -> None:
    """The float32 pass with its inside points queued (large pools; here every pool): k*,
    threshold and counts are NumPy's, through the queue when it holds them and through the
    binning pass again when a block's queue overflows."""
    from numba import cuda

    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R
    from rad._backends.radix_select import ordered_bits

    saved = C._QUEUE_FROM, C._QUEUE_SLACK, C._queue_bins32_kernel, C._queue_gather32_kernel
    bins, gathers = _Launches(saved[2]), _Launches(saved[3])
    C._QUEUE_FROM, C._queue_bins32_kernel, C._queue_gather32_kernel = 0, bins, gathers
    try:
        for label, base in _pools():
            g = base.astype(np.float32)
            d = cuda.to_device(g)
            for m in (0.05 * g.shape[0], 0.3 * g.shape[0]):
                want = R.threshold_search(g, None, 0.6, m)
                before = bins.count
                got = C.threshold_search(d, None, 0.6, m, 1)
                assert bins.count == before + 1, (label, "the queue was not used")
                assert got[:3] == want[:3], (label, m, got, want)
                assert abs(got[3] - want[3]) <= 1e-12 * abs(want[3]), (label, got, want)
        assert gathers.count > 0  # a boundary bin came from the queues
        # Wide brackets and queues of one point: every block overflows, the pass bins again
        C._QUEUE_SLACK = 0
        g = _pools()[0][1].astype(np.float32)
        d = cuda.to_device(g)
        m = 0.1 * g.shape[0]
        want = R.threshold_search(g, None, 0.5, m)
        tau = want[1]
        for lo, hi in ((0.5 * tau, 2 * tau), (0.0, float(g.max()) * 2)):
            ulo, uhi = ordered_bits(lo, 32), ordered_bits(hi, 32)
            before = bins.count, gathers.count
            got = C._bracketed32(d, 0.5, m, 1, ulo, uhi, 1e-9)
            assert bins.count == before[0] + 1 and gathers.count == before[1], "no overflow, or the queue gathered"
            assert got[:3] == want[:3], (lo, hi, got, want)
    finally:
        C._QUEUE_FROM, C._QUEUE_SLACK, C._queue_bins32_kernel, C._queue_gather32_kernel = saved


@check
def one_wave_grids_match_numpy() -> None:
    """The grid-stride passes cut to one wave (here two CUDA blocks; on a GPU as many as
    fit at once): the float32 pass, queueing or not, the general pass, the level loop and
    the max pass give NumPy's answers."""
    from numba import cuda

    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R

    saved = C._wave, C._QUEUE_FROM
    C._wave = lambda kernel: 2
    try:
        g = _pools()[0][1]
        m = 0.1 * g.shape[0]
        assert C._wave_grid(C._bracket32_kernel, g.shape[0]) == 2
        for dtype in (np.float32, np.float64):
            x = g.astype(dtype)
            d = cuda.to_device(x)
            want = R.threshold_search(x, None, 0.6, m)
            for queue_from in (0, 1 << 62):
                C._QUEUE_FROM = queue_from
                got = C.threshold_search(d, None, 0.6, m, 1)
                assert got[:3] == want[:3], (dtype, queue_from, got, want)
            assert C.threshold_levels(d, None, 0.6, m, 1)[:3] == want[:3], dtype
            assert C.max_value(d) == float(x.max())
    finally:
        C._wave, C._QUEUE_FROM = saved


@check
def lane_layout_whole_blocks_match_numpy() -> None:
    """The many-block support layout (a thread per lane) over whole blocks and the pool's
    short last block: per-block sums, counts and minima equal NumPy's, with given losses
    (float64) and RAD losses (float32)."""
    from numba import cuda

    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R
    from rad._backends.canonical import BLOCK

    rng = np.random.default_rng(17)
    n = BLOCK + 300
    tile_max = C._TILE_MAX_BLOCKS
    C._TILE_MAX_BLOCKS = 0
    try:
        for dtype, losses, w in ((np.float64, rng.random(n) * 2 - 0.5, 0.0), (np.float32, None, 0.6)):
            g = rng.random(n).astype(dtype)
            g[::97] = 0.0
            tau = float(np.quantile(g, 0.4))
            dl = None if losses is None else cuda.to_device(losses)
            got = C.support_block_sums(cuda.to_device(g), dl, w, tau, 1)
            want = R.support_block_sums(g, losses, w, tau)
            for a, b in zip(got, want):
                assert a.shape == (2,) and np.array_equal(a, b), (dtype, a, b)
    finally:
        C._TILE_MAX_BLOCKS = tile_max


@check
def invalid_values_are_found() -> None:
    from numba import cuda

    from rad._backends import cuda_backend as C

    for dtype in (np.float32, np.float64):
        for bad in (np.nan, np.inf, -1.0):
            g = np.linspace(0, 1, 700).astype(dtype)
            g[[333, 600]] = bad
            assert C.first_invalid(cuda.to_device(g), 1) == 333
            status = C.threshold_search(cuda.to_device(g), None, 0.5, 10.0, 1)[0]
            assert status == 2


@check
def select_and_solve_match_numpy() -> None:
    from numba import cuda

    import rad

    for label, base in _pools():
        n = base.shape[0]
        for dtype in DTYPES[label]:
            g = base.astype(dtype)
            d = cuda.to_device(g)
            for m, b in ((0.2 * n, 1), (0.05 * n, 30)):
                want = rad.solve(g, m, b, backend="numpy")
                got = rad.solve(d, m, b)
                if want.capped:
                    continue  # the capped path is the host fallback (checked below)
                assert (got.value, got.k_star, got.threshold, got.params) == (
                    want.value, want.k_star, want.threshold, want.params
                ), (label, dtype, m, b)
                for seed in (12345,):
                    idx = rad.select(d, m, b, rng=seed)
                    assert type(idx).__name__ == type(d).__name__  # the input's kind of device array
                    assert np.array_equal(idx.copy_to_host(), rad.select(g, m, b, rng=seed, backend="numpy"))
        # general losses, on the device too
        losses = np.random.default_rng(3).random(n)
        for b in (5,):
            want = rad.select(base, 0.1 * n, b, losses=losses, rng=9, backend="numpy")
            got = rad.select(cuda.to_device(base), 0.1 * n, b, losses=cuda.to_device(losses), rng=9, as_numpy=True)
            assert isinstance(got, np.ndarray) and np.array_equal(got, want), label


@check
def select_spans_blocks() -> None:
    """Two DepRound blocks, their leftovers merged: the same indices as NumPy."""
    from numba import cuda

    import rad
    from rad._backends.canonical import BLOCK

    g = np.random.default_rng(5).random(BLOCK + 700).astype(np.float32)
    m = 0.2 * g.shape[0]
    # the first seed whose 40 reference indices reach the second (700-point) block (one: a
    # simulated select of 66,236 points takes ~15 s)
    reaches = (s for s in range(100) if (rad.select(g, m, 40, rng=s, backend="numpy") >= BLOCK).any())
    spanning = list(itertools.islice(reaches, 1))
    assert spanning
    for seed in spanning:
        got = rad.select(cuda.to_device(g), m, 40, rng=seed, as_numpy=True)
        assert np.array_equal(got, rad.select(g, m, 40, rng=seed, backend="numpy"))


@check
def sketched_depround_matches_numpy() -> None:
    """DepRound from the support pass's sketch (docs/design.md §3): the sketch both support
    layouts record, against float64 prefix sums of the same terms; then the indices of
    the plain rounding, with blocks decided from the sketch, and with a merge the bounds
    leave undecided."""
    from numba import cuda

    import rad
    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R
    from rad._backends.canonical import BLOCK
    from rad._backends.params import Params

    n = 2 * BLOCK + 300
    g = np.random.default_rng(13).random(n).astype(np.float32)
    d = cuda.to_device(g)
    m = 0.3 * n
    w = 1.0 - m / n
    tau = 0.62  # any threshold serves: the sketch and the params are both taken at it
    whole = np.float64(g[: 2 * BLOCK])
    terms = np.where(whole >= tau, 1.0 / (whole * (1.0 + w)), 0.0).reshape(2, BLOCK)
    part_ends = np.cumsum(terms, axis=1)[:, BLOCK // 128 - 1 :: BLOCK // 128].ravel()
    tile_max = C._TILE_MAX_BLOCKS
    try:
        for tile in (tile_max, 0):  # the tile layout, then a thread per lane
            C._TILE_MAX_BLOCKS = tile
            sums, sketch = C.support_sums_sketched(d, None, w, tau, 1)
            assert sums == R.support_sums(g, None, w, tau, 1), tile  # the canonical sums as without the sketch
            got = sketch.prefixes.copy_to_host()
            assert got.shape == (3 * 128,) and (got[256:] == -1.0).all(), tile  # the short block: unusable
            # any order of the same terms: within the 2^-36 the bounds allow for
            assert np.allclose(got[:256], part_ends, rtol=2.0**-36, atol=0.0), tile
    finally:
        C._TILE_MAX_BLOCKS = tile_max
    h = sums[0]
    rounded: list[int] = []
    merges: list[bool] = []
    plain_round, plain_merge = C._round_blocks, C._merge_spans

    def counting_round(*args: Any, todo: Any = None, **kw: Any) -> Any:
        rounded.append(-1 if todo is None else int(todo.sum()))
        return plain_round(*args, todo=todo, **kw)

    def merge_undecided_once(ids: Any, lo: Any, hi: Any, key: int, wanted: int) -> Any:
        merges.append(bool((lo == hi).all()))  # exact masses only?
        return (False, [], -1, 0) if len(merges) == 1 else plain_merge(ids, lo, hi, key, wanted)

    C._round_blocks = counting_round
    try:
        for b in (1, 2):
            params = Params("gain", b / h, gain_cut=tau, gain_frac=1.0)
            for key in (0, 1):
                rounded.clear()
                idx = C.depround_sketched(d, None, w, params, b, key, sketch, 1).copy_to_host()
                assert np.array_equal(idx, R.depround_params(g, None, w, params, b, key)), (b, key)
                assert rounded == [1], rounded  # the short block alone: the sketch decided both whole ones
        # the merge on bounds without the C++ core: its Numba twin, the same indices
        plain_core = C._host_core
        C._host_core = lambda: None
        try:
            params = Params("gain", 2 / h, gain_cut=tau, gain_frac=1.0)
            idx = C.depround_sketched(d, None, w, params, 2, 4, sketch, 1).copy_to_host()
            assert np.array_equal(idx, R.depround_params(g, None, w, params, 2, 4))
        finally:
            C._host_core = plain_core
        # a merge the bounds leave undecided (forced, stuck at block 0): the decided block 0
        # is rounded exactly after all, and the indices do not change
        C._merge_spans = merge_undecided_once
        rounded.clear()
        params = Params("gain", 1 / h, gain_cut=tau, gain_frac=1.0)
        idx = C.depround_sketched(d, None, w, params, 1, 3, sketch, 1).copy_to_host()
        assert np.array_equal(idx, R.depround_params(g, None, w, params, 1, 3))
        assert rounded == [1, 1] and merges == [False, False], (rounded, merges)
        # given losses and float64 gains: the sketch of 1/(g + l)
        g64 = np.float64(g)
        losses = np.random.default_rng(14).random(n) * 0.5
        dg, dl = cuda.to_device(g64), cuda.to_device(losses)
        (h_l, _, _, _), sketch_l = C.support_sums_sketched(dg, dl, 0.0, tau, 1)
        assert h_l == R.support_sums(g64, losses, 0.0, tau, 1)[0]
        params = Params("gain", 1 / h_l, gain_cut=tau, gain_frac=1.0)
        rounded.clear()
        idx = C.depround_sketched(dg, dl, 0.0, params, 1, 6, sketch_l, 1).copy_to_host()
        assert np.array_equal(idx, R.depround_params(g64, losses, 0.0, params, 1, 6))
        assert rounded == [1], rounded
        # and through rad.select: the device select rounds from its own support pass's sketch
        C._merge_spans = plain_merge
        rounded.clear()
        idx = rad.select(d, m, 1, rng=5, as_numpy=True)
        assert np.array_equal(idx, rad.select(g, m, 1, rng=5, backend="numpy"))
        assert rounded == [1], rounded
    finally:
        C._round_blocks, C._merge_spans = plain_round, plain_merge


@check
def host_fallbacks_match_numpy() -> None:
    from numba import cuda

    import rad
    from rad._solve.device import DeviceFallbackWarning

    g = np.random.default_rng(2).random(800)
    d = cuda.to_device(g)
    for m, b in ((80.0, 700), (80.0, 800), (0.0, 400)):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always", DeviceFallbackWarning)
            got = rad.select(d, m, b, rng=4, as_numpy=True)
        assert any(r.category is DeviceFallbackWarning for r in rec), (m, b)
        assert np.array_equal(got, rad.select(g, m, b, rng=4, backend="numpy")), (m, b)
    assert rad.select(d, 80.0, 0, rng=1, as_numpy=True).shape == (0,)
    huge = g * 1e306  # near the float64 maximum: rescaled on the host, as the CPU does
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always", DeviceFallbackWarning)
        got = rad.select(cuda.to_device(huge), 80.0, 5, rng=4, as_numpy=True)
        sol = rad.solve(cuda.to_device(huge), 80.0, 5)
    assert any(r.category is DeviceFallbackWarning for r in rec)
    assert np.array_equal(got, rad.select(huge, 80.0, 5, rng=4, backend="numpy"))
    assert sol.value == rad.solve(huge, 80.0, 5, backend="numpy").value
    top = np.full(300, 1.7e308)  # a value beyond float64: select says nothing of it, as on the host
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = rad.select(cuda.to_device(top), 0.0, 5, rng=4, as_numpy=True)
    assert {r.category.__name__ for r in rec} <= {"DeviceFallbackWarning"}, [str(r.message) for r in rec]
    assert np.array_equal(got, rad.select(top, 0.0, 5, rng=4, backend="numpy"))


@check
def depround_marginals() -> None:
    """Each index is taken with probability q_i (Bernoulli z-scores), exactly b taken, and the
    draws equal the NumPy reference's."""
    from numba import cuda

    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R

    rng = np.random.default_rng(0)
    q = np.zeros(40)
    q[:3] = 1.0  # certain; q[3:6] = 0 never taken
    raw = rng.random(34) + 0.2
    q[6:] = raw / raw.sum() * 9.0  # all below 1, sum 12 in total
    b = int(round(q.sum()))
    dq = cuda.to_device(q)
    draws = 200
    counts = np.zeros(q.shape[0])
    for key in range(draws):
        got = C.depround_q(dq, b, key, 1).copy_to_host()
        assert got.shape == (b,) and np.all(np.diff(got) > 0)
        assert np.array_equal(got, R.depround_q(q, b, key))
        counts[got] += 1
    assert np.all(counts[:3] == draws) and np.all(counts[3:6] == 0)
    var = np.maximum(q * (1 - q), 1e-12) * draws
    z = (counts - q * draws) / np.sqrt(var)
    assert np.max(np.abs(z[6:])) < 4.5, z


@check
def depround_q_matches_numpy() -> None:
    """Sparse, dense-small, certain and near-1 probabilities: the same indices as NumPy for
    every key (quiet chunks skipped, runs spanning many chunks searched again)."""
    from numba import cuda

    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R

    rng = np.random.default_rng(4)
    n = 3000
    sparse = np.where(rng.random(n) < 0.02, rng.random(n), 0.0)
    dense = rng.random(n) * 1e-2
    certain = np.where(rng.random(n) < 0.01, 1.0, rng.random(n) * 1e-2)
    near = np.where(rng.random(n) < 0.01, 1.0 - 1e-12, rng.random(n) * 1e-2)
    for q in (sparse, dense, certain, near):
        q = q.copy()
        q[-1] += np.ceil(q.sum()) - q.sum()  # an integral sum
        q = np.minimum(q, 1.0)
        b = int(round(q.sum()))
        dq = cuda.to_device(q)
        for key in range(8):
            assert np.array_equal(C.depround_q(dq, b, key, 1).copy_to_host(), R.depround_q(q, b, key)), key
    # rad.depround takes a host q on every backend and returns NumPy, as its docstring says
    import rad

    got = rad.depround(q, rng=3, backend="cuda")
    assert isinstance(got, np.ndarray) and np.array_equal(got, rad.depround(q, rng=3, backend="numpy"))


def _tiny_after_mass() -> np.ndarray:
    """One block where tiny q follow ~40,000 items of 0.75 (a float running mass of ~3e4
    would round 1e-12 to nothing), with near-1 (1 - 2^-30) and certain (1) items mixed in."""
    q = np.full(40_000, 0.75)
    q[::997] = 1.0 - 2.0**-30
    q[5::1499] = 1.0
    q[::-3001] = 1e-12
    tail = np.array([1e-12, 1e-15, 0.0, 3e-13, 1.0 - 2.0**-30, 1.0, 1e-15, 0.5, 1e-12, 2.0**-47, 2.0**-48])
    return np.concatenate([q, tail, np.full(7, 1e-12)])


def _budget(q: np.ndarray) -> int:
    """The exact number of indices DepRound returns for ``q`` (one block, one leftover)."""
    from rad._backends.canonical import ONE, quantize

    units = quantize(q)
    rest = int(units[units < ONE].sum())
    return int((units == ONE).sum()) + rest // ONE + (1 if rest % ONE else 0)


@check
def depround_fixed_point_tiny_q() -> None:
    """Tiny q after a large running mass, near-1 and certain items: the fixed-point units
    give the same indices as NumPy, on the q path and the params path, for several seeds."""
    from numba import cuda

    from rad._backends import cuda_backend as C
    from rad._backends import numpy_backend as R
    from rad._backends.params import Params

    q = _tiny_after_mass()
    b = _budget(q)
    dq = cuda.to_device(q)
    for key in (2**63 + 5,):  # a key above 2^63 here, another on the params path: every index compared
        got = C.depround_q(dq, b, key, 1).copy_to_host()
        assert np.array_equal(got, R.depround_q(q, b, key)), key
    # the params path: q_i = nu / (g_i + l_i) with nu = g = 1, so l = 1/q - 1 (0 for q = 1)
    g = np.ones(q.shape[0])
    with np.errstate(divide="ignore"):
        losses = np.where(q > 0, 1.0 / q - 1.0, 1e300)
    params = Params("gain", 1.0, gain_cut=0.0)
    qp = R.materialize(g, losses, 0.0, params)
    bp = _budget(qp)
    dg, dl = cuda.to_device(g), cuda.to_device(losses)
    for key in (2**40 + 1,):
        got = C.depround_params(dg, dl, 0.0, params, bp, key, 1).copy_to_host()
        assert np.array_equal(got, R.depround_params(g, losses, 0.0, params, bp, key)), key


@check
def merge_leftovers_match_canonical() -> None:
    """Block leftovers (multiples of 2^-46) merged on the device (up to BLOCK of them) and on
    the host (more, hierarchically): canonical.merge_leftovers's indices."""
    from rad._backends import cuda_backend as C
    from rad._backends.canonical import BLOCK, merge_leftovers

    rng = np.random.default_rng(8)
    for n in (1, 50, 700, BLOCK + 300):  # one device sequence up to MERGE_GROUP, levels beyond
        masses = rng.integers(1, 2**46, n) / 2.0**46
        ids = np.sort(rng.choice(100 * n, n, replace=False)).astype(np.int64)
        for key in (5,) if n > BLOCK else (5, 6):
            wanted = int(masses.sum())  # fewer picks than the mass allows: the last round stops early
            want = merge_leftovers(ids, masses, key, wanted)
            for on_device in (True, False):  # the device kernels, and the C++ core where built
                got = C._merge_leftovers(ids, masses, key, wanted, on_device=on_device)
                assert (sorted(got[0]), got[1]) == (sorted(want[0]), want[1]), (n, key, on_device)


@check
def errors_name_the_problem() -> None:
    from numba import cuda

    import rad

    g = np.random.default_rng(1).random(300)
    d = cuda.to_device(g)

    def raises(fn: Callable[[], Any], exc: type[BaseException], text: str) -> None:
        try:
            fn()
        except exc as e:
            assert text in str(e), (text, str(e))
            return
        raise AssertionError(f"no {exc.__name__} ({text})")

    raises(lambda: rad.select(g, 30, 5, backend="cuda"), TypeError, "needs the gains on the GPU")
    raises(lambda: rad.select(d, 30, 5, backend="numpy"), TypeError, "runs on the host")
    raises(lambda: rad.select(d, 30, 5, backend="nonsense"), ValueError, "unknown backend")
    bad = g.copy()
    bad[17] = np.nan
    raises(lambda: rad.select(cuda.to_device(bad), 30, 5), ValueError, "gains[17] = nan is NaN")
    raises(lambda: rad.select(cuda.to_device(bad), 30, 0), ValueError, "gains[17] = nan is NaN")
    raises(lambda: rad.select(cuda.to_device(g.astype(complex)), 30, 5), TypeError, "real numeric")
    raises(lambda: rad.select(cuda.to_device(np.ones((3, 3))), 1, 1), ValueError, "one-dimensional")
    raises(lambda: rad.select(d, 30, 5, losses=g), TypeError, "same device")
    neg = g.copy()
    neg[4] = -1.0
    raises(lambda: rad.select(d, 30, 5, losses=cuda.to_device(neg)), ValueError, "losses[4] = -1.0 is negative")
    raises(lambda: rad.select(d, 400, 5), ValueError, "m (the teacher's mistakes")
    raises(lambda: rad.select(d, 30, 301), ValueError, "b (the budget)")
    # integer gains and strided views are converted on the device, as the host converts them
    ints = (g * 10).astype(np.int64)
    got = rad.select(cuda.to_device(ints), 30, 5, rng=2, as_numpy=True)
    assert np.array_equal(got, rad.select(ints, 30, 5, rng=2, backend="numpy"))
    got = rad.select(d[::2], 15, 5, rng=2, as_numpy=True)
    assert np.array_equal(got, rad.select(g[::2], 15, 5, rng=2, backend="numpy"))


@check
def reused_buffers_never_leak_between_calls() -> None:
    """The device buffers kept between calls (cuda_backend._scratch, _Packed.get) are
    refilled at every call: pools of changing sizes and dtypes, called in turn, give the
    NumPy backend's indices, and a returned index array is never overwritten later."""
    from numba import cuda

    import rad
    from rad._backends import cuda_backend as C

    C.release_scratch()
    rng = np.random.default_rng(11)
    pools = [rng.random(n).astype(dt) for n, dt in ((1500, np.float32), (400, np.float32), (1500, np.float64),
                                                     (90, np.float32), (1500, np.float32))]
    kept = []
    for pool in pools:
        n = pool.shape[0]
        got = rad.select(cuda.to_device(pool), 0.2 * n, 40, rng=5)
        want = rad.select(pool, 0.2 * n, 40, rng=5, backend="numpy")
        assert np.array_equal(got.copy_to_host(), want), n
        kept.append((got, want))
    for got, want in kept:  # the results of earlier calls: still theirs
        assert np.array_equal(got.copy_to_host(), want)
    assert C._SCRATCH and C._PACKED, "no buffer was kept: the reuse is untested"
    C.release_scratch()


#: Seconds each check takes on the simulator (the 2-core VM), to split them between the
#: two children the parent runs at once; a check not listed counts as 5.
SECONDS = {"kernels_match_numpy": 18, "brackets_that_miss_fall_back": 10, "select_and_solve_match_numpy": 22,
           "select_spans_blocks": 13, "sketched_depround_matches_numpy": 40, "depround_marginals": 21,
           "depround_q_matches_numpy": 9, "depround_fixed_point_tiny_q": 13, "queued_inside_points_match_numpy": 9,
           "one_wave_grids_match_numpy": 3, "lane_layout_whole_blocks_match_numpy": 10}


def _share(part: int, parts: int) -> list[str]:
    """The checks of child ``part`` of ``parts``: the longest first, each to the least loaded child."""
    load = [0.0] * parts
    mine = []
    for name in sorted(CHECKS, key=lambda c: -SECONDS.get(c, 5)):
        k = load.index(min(load))
        load[k] += SECONDS.get(name, 5)
        if k == part:
            mine.append(name)
    return mine


def _child(part: int = 0, parts: int = 1) -> None:
    """Run the checks (child ``part``'s share of ``parts``); print the verdicts as JSON lines, the last one all."""
    warnings.filterwarnings("ignore", message="overflow encountered", category=RuntimeWarning)
    np.seterr(over="ignore")
    try:
        from numba import cuda

        from rad._backends import cuda_backend  # noqa: F401
    except Exception as exc:  # the simulator is unavailable here
        print(json.dumps({"__skip__": f"{type(exc).__name__}: {exc}"}))
        return
    if not cuda.is_available():
        print(json.dumps({"__skip__": "numba.cuda.is_available() is False under the simulator"}))
        return
    out: dict[str, str] = {}
    for name in _share(part, parts):
        try:
            CHECKS[name]()
            out[name] = "ok"
        except Exception as exc:  # reported by the parent test of that name
            import traceback

            out[name] = "".join(traceback.format_exception(exc))[-3000:]
        print(json.dumps(out), flush=True)  # the verdicts so far: a time limit keeps them
    print(json.dumps(out), flush=True)  # all of them (also when this share is empty)


# ---------------------------------------------------------------- the parent's tests


@pytest.fixture(scope="module")
def verdicts() -> dict[str, str]:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join(
        p for p in (os.path.join(ROOT, "python"), HERE, os.environ.get("PYTHONPATH", "")) if p
    ))
    env.pop("RAD_BACKEND", None)
    parts = 2  # two children at once: the simulator runs on one core each
    procs = [subprocess.Popen([sys.executable, "-c", f"import test_cuda_sim; test_cuda_sim._child({k}, {parts})"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=HERE)
             for k in range(parts)]
    result: dict[str, str] = {}
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise AssertionError(f"the simulator child failed (rc {proc.returncode}):\n{stderr[-4000:]}")
        got = json.loads(lines[-1])
        if "__skip__" in got:
            pytest.skip(f"numba's CUDA simulator is unavailable: {got['__skip__']}")
        result.update(got)
    return result


@pytest.mark.parametrize("name", list(CHECKS))
def test_on_the_simulator(verdicts: dict[str, str], name: str) -> None:
    assert verdicts.get(name) == "ok", verdicts.get(name, "not run")


class _CAI:
    """An object exposing only ``__cuda_array_interface__`` (how CuPy and PyTorch look)."""

    __cuda_array_interface__ = {"shape": (3,), "typestr": "<f4", "data": (0, False), "version": 3}


class _DLPackCUDA:
    def __dlpack__(self, stream: object = None) -> object:  # pragma: no cover - never called
        raise AssertionError

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)


class _RaisingCAIOnHost:
    """A host array whose ``__cuda_array_interface__`` property raises (as JAX's may)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        raise ValueError("not on a GPU")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_device_arrays_are_detected_without_numba() -> None:
    from rad._solve.device import is_device_array

    assert is_device_array(_CAI()) and is_device_array(_DLPackCUDA())
    assert not is_device_array(np.zeros(3)) and not is_device_array([0.1, 0.2])
    assert not is_device_array(_RaisingCAIOnHost())


def test_host_entry_points_name_a_device_array() -> None:
    import rad

    with pytest.raises(TypeError, match="is a CUDA device array"):
        rad.depround(_CAI(), rng=0)


def test_host_torch_tensors_are_read_in_place() -> None:
    torch = pytest.importorskip("torch")
    from rad._solve.validation import as_float_vector

    t = torch.rand(1000, dtype=torch.float32)
    arr = as_float_vector(t, "gains")
    assert arr.dtype == np.float32 and np.shares_memory(arr, t.numpy())
    import rad

    assert np.array_equal(rad.select(t, 100, 5, rng=3), rad.select(t.numpy(), 100, 5, rng=3))


def test_a_device_array_without_a_gpu_names_what_is_missing() -> None:
    code = (
        "import sys\n"
        "from numba import cuda\n"
        "if cuda.is_available(): print('GPU'); sys.exit()\n"
        "import rad\n"
        "class CAI:\n"
        "    __cuda_array_interface__ = {'shape': (3,), 'typestr': '<f4', 'data': (0, False), 'version': 3}\n"
        "try:\n"
        "    rad.select(CAI(), 1.0, 1)\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.path.join(ROOT, "python"),
                                                                 os.environ.get("PYTHONPATH", "")) if p))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300).stdout
    if out.strip() == "GPU":
        pytest.skip("a GPU is visible here")
    assert "BackendUnavailable" in out and "[cuda] extra" in out and "numba-cuda" in out, out

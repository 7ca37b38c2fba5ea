"""The sample bracket narrowed by a larger strided sample (``refine_bracket``, docs/design.md §3).

From 2^24 points on, the C++ search draws its first bracket from 2^14 gains and narrows it
with a second sample of 2^16-2^22 (runs of 256 points, summed on every thread): the first
pass then bins about a quarter of the points it binned before. A bracket only steers the
speed, so the checks here are (1) the refined bracket always lies within the one it was
given, does not depend on the thread count, and holds tau on ordinary pools (with ties,
skewed, float32 and float64, RAD and explicit losses); (2) on pools built so that the
second sample sees something else than the pool, the search's answer is still the sorted
scan's; (3) end to end, at a size where ``rad.solve`` refines, the answer is the sorted
path's.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import rad
from conftest import BACKENDS

pytestmark = pytest.mark.skipif("cpp" not in BACKENDS, reason="needs the compiled module")

RUN = 256  # refine_bracket's run of points (cpp/include/rad/threshold.hpp)


def _refiners() -> dict:
    """``backend -> refine(gains, losses, w, m, threads, lo, hi, size)`` (Numba: RAD losses)."""
    from rad import _core

    out = {"cpp": _core.refine_bracket}
    if "numba" in BACKENDS:
        import numba

        from rad._backends.numba_refine import refine_bracket

        def numba_refine(gains, losses, w, m, threads, lo, hi, size):
            assert losses is None
            numba.set_num_threads(threads)
            return refine_bracket(gains, w, m, lo, hi, size)

        out["numba"] = numba_refine
    return out


REFINERS = _refiners() if "cpp" in BACKENDS else {}


def _bits(x: float, dtype) -> int:
    from rad._backends.radix_select import ordered_bits

    return ordered_bits(x, 32 if dtype == np.float32 else 64)


def _pools(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "uniform": rng.random(n),
        "skewed": rng.beta(0.3, 3.0, n),
        "ties": np.round(rng.random(n) * 50) / 50,
        "lognormal": rng.lognormal(0.0, 2.0, n),
        "exponential": rng.exponential(1.0, n),
    }


def _tau(gains: np.ndarray, losses, w: float, m: float) -> float:
    from rad import _core

    return _core.threshold_search(gains, losses, w, m, 2)[1]


def _count_in(sorted_bits: np.ndarray, lo: int, hi: int) -> int:
    """How many of the pool's points lie in the bracket [lo, hi) of ordered bits."""
    return int(np.searchsorted(sorted_bits, hi) - np.searchsorted(sorted_bits, lo))


@pytest.mark.parametrize(("backend", "explicit"), [("cpp", False), ("cpp", True), ("numba", False)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_refined_bracket_narrows_within_and_holds_tau(backend: str, dtype, explicit: bool) -> None:
    """On 2^20-point pools the refined bracket (a 2^16 sample) lies in the first one,
    holds tau, is the same on 1 and 2 threads, and, where the first one does not reach 0,
    holds fewer points on the pools without ties: at most 0.6 times (the width falls as
    one over the root of the sample: 2x here, from 2^14 points to 2^16). A 4-sigma margin
    misses with probability below 1e-4 a pool: the seeds are fixed, so this is a check
    that a narrowed bracket still holds tau, not a flaky one."""
    from rad import _core

    if backend not in REFINERS:
        pytest.skip(f"no {backend} backend")
    refine = REFINERS[backend]
    rng = np.random.default_rng(11)
    n = 1 << 20
    for name, pool in _pools(n, rng).items():
        gains = pool.astype(dtype)
        for frac in (0.01, 0.3, 0.9):
            m = frac * n
            w = 1.0 - frac
            losses = (rng.random(n) * 2.0 * gains).astype(np.float64) if explicit else None
            lo, hi = _core.sample_bracket(gains, losses, w, m, 2)
            lo2, hi2 = refine(gains, losses, w, m, 2, lo, hi, 1 << 16)
            assert (lo2, hi2) == refine(gains, losses, w, m, 1, lo, hi, 1 << 16), name
            assert lo <= lo2 < hi2 <= hi, (name, frac)
            t = _bits(_tau(gains, losses, w, m), dtype)
            assert lo2 <= t < hi2, (name, frac)
            if name != "ties" and lo > 0:  # (a first bracket reaching 0 narrows from its top alone)
                bits = np.sort(gains).view(np.uint32 if dtype == np.float32 else np.uint64)
                first, refined = _count_in(bits, lo, hi), _count_in(bits, lo2, hi2)
                assert refined <= 0.6 * first, (name, frac, refined, first)


def _refine_runs(n: int, size: int) -> np.ndarray:
    """Where refine_bracket's sample of ``size`` looks in a pool of n points."""
    runs = size // RUN
    return (np.arange(n) % ((n - RUN) // (runs - 1))) < RUN


#: Pools whose refining sample sees something else than the pool.
LIARS = {
    "refine_runs_high": lambda n, s: np.where(_refine_runs(n, s), 0.9, 0.1),
    "refine_runs_low": lambda n, s: np.where(_refine_runs(n, s), 0.1, 0.9),
    "refine_runs_scaled": lambda n, s: np.where(_refine_runs(n, s), 0.5, 1.0) * np.linspace(0.2, 1.0, n),
    "ascending": lambda n, s: np.linspace(0.0, 1.0, n),
    "steps": lambda n, s: np.floor(np.arange(n) / 997.0) % 7 / 7.0,
}


@pytest.mark.parametrize("backend", ["cpp", "numba"])
@pytest.mark.parametrize("kind", sorted(LIARS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_refined_bracket_that_misses_changes_nothing(backend: str, kind: str, dtype) -> None:
    """A refining sample that lies gives a bracket within the first one (a miss, or none
    at all); the bracketed search with it still finds the sorted scan's tau and k*."""
    from rad import _core
    from rad._backends import get_backend

    if backend not in REFINERS:
        pytest.skip(f"no {backend} backend")

    n, size = 300_007, 1 << 14
    gains = LIARS[kind](n, size).astype(dtype)
    be = get_backend("cpp")
    perm = be.argsort_desc(gains, 1)
    for frac in (0.001, 0.3, 0.9):
        m = frac * n
        w = 1.0 - frac
        lo, hi = _core.sample_bracket(gains, None, w, m, 2)
        lo2, hi2 = REFINERS[backend](gains, None, w, m, 2, lo, hi, size)
        assert lo <= lo2 <= hi2 <= hi
        edge = lambda u: float(np.array([u], dtype=np.uint32 if dtype == np.float32 else np.uint64).view(dtype)[0])  # noqa: E731
        status, tau, kstar, _ = _core.threshold_bracketed(gains, None, w, m, 2, edge(lo2), edge(hi2))
        k_sorted, _ = be.theorem1_scan(gains, None, w, perm, m, 1)
        if status == 0:
            assert kstar == k_sorted and tau == float(gains[perm[k_sorted - 1]]), (kind, frac)


def test_refine_bracket_rejects_a_reversed_bracket() -> None:
    from rad import _core

    gains = np.random.default_rng(0).random(1 << 16).astype(np.float32)
    with pytest.raises(ValueError, match="lo <= hi"):
        _core.refine_bracket(gains, None, 0.5, 100.0, 1, 5, 4, 1 << 12)


def test_refine_size_is_the_documented_one() -> None:
    """None below 2^24 points, ``(7 n)^(2/3)`` as a power of two in ``[2^16, 2^22]`` from
    there (docs/design.md §3: 2^20 at 1e8, 2^22 at 1e9)."""
    from rad._backends.radix_select import refine_size

    assert refine_size((1 << 24) - 1) == 0
    assert refine_size(1 << 24) == 1 << 18  # (7 * 2^24)^(2/3) = 2^17.9
    assert refine_size(10**8) == 1 << 20
    assert refine_size(10**9) == refine_size(10**12) == 1 << 22


@pytest.mark.parametrize("backend", ["cpp", "numba"])
@pytest.mark.parametrize("kind", ["uniform", "refine_runs_high"])
def test_solve_refines_and_matches_the_sorted_path(backend: str, kind: str) -> None:
    """At 2^24 + 5 points ``rad.solve`` refines its bracket (a 2^18 sample): k*, threshold,
    value and parameters equal the (C++) sorted path's, on a uniform pool and on one whose
    refining sample sees only high values."""
    if backend not in REFINERS:
        pytest.skip(f"no {backend} backend")
    n = (1 << 24) + 5
    size = 1 << 18  # refine_size(n): (7 n)^(2/3) = 2.4e5, as a power of two
    rng = np.random.default_rng(3)
    if kind == "uniform":
        gains = rng.random(n, dtype=np.float32)
    else:
        gains = np.where(_refine_runs(n, size), np.float32(0.9), rng.random(n, dtype=np.float32) * 0.5)
    for frac in (0.01, 0.3):
        m = frac * n
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rad.NetHarmWarning)
            free = rad.solve(gains, m, 1000, backend=backend, threads=2)
            ref = rad.solve(gains, m, 1000, backend="cpp", threads=2, method="sorted")  # (Numba's sort: 10 s)
        assert free.k_star == ref.k_star
        assert free.threshold == ref.threshold
        assert free.value == ref.value
        assert free.params == ref.params

"""What each selector costs next to RAD, at 1e5 and 1e6 points with 64-d embeddings.

Every selector is timed from the model outputs (a fresh :class:`rad.selectors.PoolState`
per call, so the margins/gains are computed inside the timed region), selecting ``b``
points from a pool of float32 10-class probabilities and float32 64-d embeddings.

* ``python benchmarks/bench_selectors.py [--sizes 100000 1000000] [--b 1000]
  [--repeats 3] [--slow-repeats 1]`` prints a table: median wall time and the peak memory
  allocated during one call (``tracemalloc``, which sees every NumPy allocation; the inputs
  are excluded), with the time ratio against ``rad.select`` measured in the same run.
* ``PYTHONPATH=python python -m pytest benchmarks/bench_selectors.py`` runs the selectors
  under pytest-benchmark at ``RAD_BENCH_N`` points (default ``100_000``).

"Slow" cases (whole-pool HAC) use ``--slow-repeats`` timed runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from rad import gains as G  # noqa: E402
from rad import selectors as S  # noqa: E402
from rad.selectors import PoolState  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gains import peak_bytes  # noqa: E402  (one tracemalloc helper for both)

__all__ = ["Pool", "cases", "main", "make_pool"]

D = 64
K = 10


@dataclass
class Pool:
    """Raw arrays of a synthetic pool (clustered embeddings, peaked probabilities)."""

    probs: np.ndarray
    embeddings: np.ndarray
    clusters: np.ndarray | None = None


def make_pool(n: int, seed: int = 0, rows: int = 1 << 18) -> Pool:
    """float32 probabilities (n, 10) and float32 embeddings (n, 64) around 100 centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(100, D)).astype(np.float32)
    emb = np.empty((n, D), dtype=np.float32)
    probs = np.empty((n, K), dtype=np.float32)
    for start in range(0, n, rows):
        m = min(rows, n - start)
        emb[start : start + m] = centres[rng.integers(0, 100, m)]
        emb[start : start + m] += rng.standard_normal((m, D), dtype=np.float32)
        z = rng.standard_normal((m, K), dtype=np.float32) * 3
        e = np.exp(z - z.max(axis=1, keepdims=True))
        probs[start : start + m] = e / e.sum(axis=1, keepdims=True)
    return Pool(probs=probs, embeddings=emb)


def cases(pool: Pool, b: int) -> list[tuple[str, Callable[[], object], bool]]:
    """(name, call, slow) for every selector; ``slow`` cases get fewer repeats."""
    n = pool.probs.shape[0]
    m = 0.2 * n
    labeled = np.arange(0, n, max(1, n // b))[:b]  # b labeled points spread over the pool

    def fresh(**extra: object) -> PoolState:
        return PoolState(probs=pool.probs, embeddings=pool.embeddings, m=m, **extra)

    def hac_whole_pool() -> np.ndarray:
        pool.clusters = S.hac_clusters(pool.embeddings, rng=0)  # n/20 clusters, buckets 4096
        return pool.clusters

    def cm_precomputed() -> np.ndarray:
        if pool.clusters is None:
            hac_whole_pool()
        return S.ClusterMargin().select(fresh(clusters=pool.clusters), b, rng=0)

    gains = G.margin_gain(pool.probs)
    import rad

    return [
        ("rad.select (precomputed gains)", lambda: rad.select(gains, m, b, rng=0), False),
        ("rad.select (precomputed gains, threads=1)",
         lambda: rad.select(gains, m, b, rng=0, threads=1), False),
        ("RAD (margin gains + rad.select)", lambda: S.RAD().select(fresh(), b, rng=0), False),
        ("Margin", lambda: S.Margin().select(fresh(), b, rng=0), False),
        ("Entropy", lambda: S.Entropy().select(fresh(), b, rng=0), False),
        ("LeastConfidence", lambda: S.LeastConfidence().select(fresh(), b, rng=0), False),
        ("Uniform", lambda: S.Uniform().select(fresh(), b, rng=0), False),
        ("Coreset (k-center, random start)", lambda: S.Coreset().select(fresh(), b, rng=0), False),
        ("Coreset (b labeled points as centres)",
         lambda: S.Coreset().select(fresh(labeled=labeled), b, rng=0), False),
        ("ClusterMargin (HAC of 10b candidates)", lambda: S.ClusterMargin().select(fresh(), b, rng=0),
         False),
        ("hac_clusters(whole pool), one-off", hac_whole_pool, True),
        ("ClusterMargin (precomputed clusters)", cm_precomputed, False),
    ]


def timings(f: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6])
    parser.add_argument("--b", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed runs at least; fast cases repeat up to 25 times or ~2 s")
    parser.add_argument("--slow-repeats", type=int, default=1)
    args = parser.parse_args(argv)
    mib = 2.0**20
    print(f"# b = {args.b}, d = {D}, k = {K}, float32; median of the timed runs; peak = "
          f"tracemalloc peak during one call, inputs excluded; {os.cpu_count()} CPUs, "
          f"numpy {np.__version__}")
    print("| n | selector | median (s) | min (s) | runs | median / rad.select | peak (MiB) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for size in args.sizes:
        n = int(size)
        pool = make_pool(n)
        ref = None
        for name, f, slow in cases(pool, args.b):
            t0 = time.perf_counter()
            f()  # warm-up (and, for the one-off HAC, fills pool.clusters)
            first = time.perf_counter() - t0
            reps = args.slow_repeats if slow else max(args.repeats, min(25, int(2.0 / first)))
            ts = timings(f, reps)
            med = statistics.median(ts)
            ref = med if ref is None else ref
            peak = peak_bytes(f)
            print(f"| {n:,} | {name} | {med:.4f} | {min(ts):.4f} | {len(ts)} | {med / ref:.3g}x "
                  f"| {peak / mib:.1f} |", flush=True)


# --------------------------------------------------------------------------------------
# pytest-benchmark mode
# --------------------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - script mode without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    _N = int(float(os.environ.get("RAD_BENCH_N", "100000")))
    _B = int(os.environ.get("RAD_BENCH_B", "1000"))

    @pytest.fixture(scope="module")
    def bench_cases() -> dict[str, tuple[Callable[[], object], bool]]:
        return {name: (f, slow) for name, f, slow in cases(make_pool(_N), _B)}

    _NAMES = [name for name, _, _ in cases(make_pool(10), 5)]

    @pytest.mark.parametrize("name", _NAMES)
    def test_selector(benchmark, bench_cases, name: str) -> None:
        f, slow = bench_cases[name]
        benchmark.group = f"selectors, n={_N:,}, b={_B}"
        benchmark.extra_info["peak_MiB"] = peak_bytes(f) / 2**20
        benchmark.pedantic(f, rounds=1 if slow else 3, iterations=1, warmup_rounds=0)


if __name__ == "__main__":
    main()

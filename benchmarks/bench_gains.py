"""Benchmark ``rad.gains`` against the straightforward NumPy expressions.

Two ways to run it:

* ``python benchmarks/bench_gains.py [--n 10000000] [--k 10] [--repeats 5]`` prints a
  table: median wall time over ``repeats`` and peak memory allocated during one call
  (``tracemalloc``, which sees every NumPy allocation; the input itself is excluded),
  with the ratio baseline / ours, all measured in the same process.
* ``PYTHONPATH=python python -m pytest benchmarks/bench_gains.py`` runs the same pairs
  under pytest-benchmark (size from ``RAD_BENCH_GAINS_N``, default ``1_000_000``), one
  benchmark group per gain, with the peak memory stored in ``extra_info``.

The baselines are what one writes without thinking about memory: a full ``(n, k)``
``np.partition`` / ``np.sort`` copy for the top two, ``p * log(p + 1e-12)`` for the
entropy, an explicit softmax for logits.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from rad import gains as G  # noqa: E402

__all__ = ["CASES", "make_probs", "measure", "main"]


# --------------------------------------------------------------------------------------
# Baselines: the straightforward expressions
# --------------------------------------------------------------------------------------


def np_margin_gain_partition(p: np.ndarray) -> np.ndarray:
    top = np.partition(p, -2, axis=1)
    return 1 - (top[:, -1] - top[:, -2])


def np_margin_gain_sort(p: np.ndarray) -> np.ndarray:
    top = np.sort(p, axis=1)
    return 1 - (top[:, -1] - top[:, -2])


def np_exp_margin(p: np.ndarray) -> np.ndarray:
    top = np.partition(p, -2, axis=1)
    return np.exp(-(top[:, -1] - top[:, -2]))


def np_entropy(p: np.ndarray) -> np.ndarray:
    return -(p * np.log(p + 1e-12)).sum(axis=1)


def np_least_confidence(p: np.ndarray) -> np.ndarray:
    return 1 - p.max(axis=1)


def np_margin_gain_logits(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    return np_margin_gain_partition(p)


# (name, ours, baseline name, baseline, input: "probs" | "logits")
Case = tuple[str, Callable[[np.ndarray], np.ndarray], str, Callable[[np.ndarray], np.ndarray], str]
CASES: list[Case] = [
    ("margin", G.margin_gain, "np.partition", np_margin_gain_partition, "probs"),
    ("margin", G.margin_gain, "np.sort", np_margin_gain_sort, "probs"),
    ("margin (validate=False)", lambda p: G.margin_gain(p, validate=False), "np.partition",
     np_margin_gain_partition, "probs"),
    ("exp_margin", G.exp_margin_gain, "np.partition + exp", np_exp_margin, "probs"),
    ("entropy", G.entropy_gain, "-(p*log(p+1e-12)).sum", np_entropy, "probs"),
    ("least_confidence", G.least_confidence_gain, "1 - p.max(1)", np_least_confidence, "probs"),
    ("margin from logits", lambda z: G.margin_gain(z, from_logits=True), "softmax + partition",
     np_margin_gain_logits, "logits"),
]


# --------------------------------------------------------------------------------------
# Data and measurement
# --------------------------------------------------------------------------------------


def make_probs(n: int, k: int, seed: int = 0, rows: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    """float32 logits ``z`` and probabilities ``softmax(z)``, built block by block."""
    rng = np.random.default_rng(seed)
    z = np.empty((n, k), dtype=np.float32)
    p = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, rows):
        block = rng.standard_normal((min(rows, n - start), k), dtype=np.float32) * 3
        z[start : start + block.shape[0]] = block
        e = np.exp(block - block.max(axis=1, keepdims=True))
        p[start : start + block.shape[0]] = e / e.sum(axis=1, keepdims=True)
    return z, p


def peak_bytes(f: Callable[[], object]) -> int:
    """Peak bytes allocated (NumPy included) while running ``f`` once."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        f()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure(f: Callable[[], object], repeats: int) -> tuple[float, list[float], int]:
    """Median seconds, all timings, and peak bytes of ``f``."""
    f()  # warm-up (page faults of the output, lazy imports)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, peak_bytes(f)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    z, p = make_probs(args.n, args.k)
    inputs = {"probs": p, "logits": z}
    mib = 2.0**20
    print(f"# gains on a {args.n:,} x {args.k} float32 matrix ({p.nbytes / mib:.0f} MiB); "
          f"median of {args.repeats}; peak = tracemalloc peak during one call; "
          f"{os.cpu_count()} CPUs, numpy {np.__version__}")
    print("| gain | rad.gains (s) | baseline | baseline (s) | speed-up | rad.gains peak (MiB) "
          "| baseline peak (MiB) | memory ratio | max abs diff |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, ours, base_name, base, kind in CASES:
        x = inputs[kind]
        t_ours, _, m_ours = measure(lambda: ours(x), args.repeats)
        t_base, _, m_base = measure(lambda: base(x), args.repeats)
        check = np.max(np.abs(ours(x).astype(np.float64) - base(x).astype(np.float64)))
        print(f"| {name} | {t_ours:.3f} | {base_name} | {t_base:.3f} | {t_base / t_ours:.1f}x "
              f"| {m_ours / mib:.1f} | {m_base / mib:.1f} | {m_base / max(m_ours, 1):.1f}x "
              f"| {check:.1e} |", flush=True)


# --------------------------------------------------------------------------------------
# pytest-benchmark mode
# --------------------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - script mode without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="module")
    def matrices() -> dict[str, np.ndarray]:
        n = int(float(os.environ.get("RAD_BENCH_GAINS_N", "1000000")))
        z, p = make_probs(n, 10)
        return {"probs": p, "logits": z}

    @pytest.mark.parametrize("impl", ["rad.gains", "baseline"])
    @pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c[0]} vs {c[2]}" for c in CASES])
    def test_gains(benchmark, matrices, case: int, impl: str) -> None:
        name, ours, base_name, base, kind = CASES[case]
        x = matrices[kind]
        f = ours if impl == "rad.gains" else base
        benchmark.group = f"{name} vs {base_name}"
        benchmark.extra_info["peak_MiB"] = peak_bytes(lambda: f(x)) / 2**20
        out = benchmark.pedantic(f, args=(x,), rounds=5, iterations=1, warmup_rounds=1)
        assert out.shape == (x.shape[0],)


if __name__ == "__main__":
    main()

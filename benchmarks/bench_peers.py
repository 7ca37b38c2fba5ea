"""rad's selectors and adapters next to modAL, scikit-activeml and baal, in one process.

Every library gets the same float32 class probabilities (``n x 10``, peaked softmax of
Gaussian logits) and must choose ``b`` points; each is called the way its users call it
(modAL query functions on a classifier, scikit-activeml ``query(X, y, clf, ...)`` with
every label missing, baal heuristics on the probability array), with a classifier
stand-in whose ``predict_proba`` returns the fixed probabilities, so only selection is
timed. Reported per row: median wall time, peak memory allocated during one call
(``tracemalloc``, which sees NumPy's allocations; inputs excluded), and agreement with
rad's baseline of the same kind (``|A & B| / b`` for sets; for k-center, the share of
positions where the pick orders agree).

    python benchmarks/bench_peers.py [--n 100000 1000000] [--b 1000] [--repeats 5]
        [--kcenter-n 20000] [--kcenter-b 200] [--max-dense 200000]

``--max-dense`` skips scikit-activeml's uncertainty strategies above that many points:
its ``simple_batch`` allocates a ``batch_size x n`` float64 matrix (7.5 GiB at
``n = 1e6, b = 1000``). Needs ``pip install ".[integrations]"``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rad  # noqa: E402
from bench_gains import peak_bytes  # noqa: E402  (the tracemalloc helper of both benches)
from rad import gains as G  # noqa: E402
from rad import selectors as S  # noqa: E402

__all__ = ["main", "make_probs"]

K = 10


def make_probs(n: int, seed: int = 0) -> np.ndarray:
    """float32 ``(n, 10)`` softmax of ``3 z``, ``z`` standard normal (continuous: no ties)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, K), dtype=np.float32) * 3
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def make_embeddings(n: int, d: int = 32, seed: int = 1) -> np.ndarray:
    """float64 ``(n, d)`` points around 50 Gaussian centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(50, d))
    return centres[rng.integers(0, 50, n)] + rng.standard_normal((n, d))


class FixedModel:
    """A fitted classifier stand-in for modAL: ``predict_proba`` returns fixed rows."""

    def __init__(self, probs: np.ndarray) -> None:
        self.probs = probs

    def predict_proba(self, X: Any) -> np.ndarray:
        return self.probs


def skactiveml_classifier(probs: np.ndarray) -> Any:
    """A ``SkactivemlClassifier`` whose ``predict_proba`` returns ``probs[X[:, 0]]``."""
    from skactiveml.base import SkactivemlClassifier

    class FixedSkactivemlClassifier(SkactivemlClassifier):
        def fit(self, X: Any, y: Any, sample_weight: Any = None) -> FixedSkactivemlClassifier:
            self.classes_ = np.arange(K)
            return self

        def predict_proba(self, X: Any) -> np.ndarray:
            return probs[np.asarray(X)[:, 0].astype(np.int64)]

    return FixedSkactivemlClassifier(classes=np.arange(K)).fit(None, None)


def agreement(ours: np.ndarray, theirs: np.ndarray, ordered: bool = False) -> float:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if ordered:
        return float(np.mean(ours == theirs))
    return len(set(ours.tolist()) & set(theirs.tolist())) / max(1, ours.size)


def timed(f: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall time over ``repeats`` calls after one warm-up; the last result."""
    out = f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def score_rows(n: int, b: int, repeats: int, max_dense: int) -> list[tuple]:
    """Margin and entropy baselines, and RAD through each adapter."""
    from baal.active.heuristics import Entropy as BaalEntropy
    from baal.active.heuristics import Margin as BaalMargin
    from modAL.uncertainty import entropy_sampling, margin_sampling
    from skactiveml.pool import UncertaintySampling

    from rad.integrations import RADHeuristic, RADQuery, RADSampling

    probs = make_probs(n)
    X = np.arange(n, dtype=np.float64)[:, None]  # row ids: the stand-in classifier's input
    y = np.full(n, np.nan)
    sk_clf = skactiveml_classifier(probs)
    model = FixedModel(probs)
    rows = []

    def first(result: Any) -> np.ndarray:
        return np.asarray(result[0] if isinstance(result, tuple) else result)

    for kind, ours_cls, modal_fn, baal_cls, sk_method in (
        ("margin", S.Margin, margin_sampling, BaalMargin, "margin_sampling"),
        ("entropy", S.Entropy, entropy_sampling, BaalEntropy, "entropy"),
    ):
        t, ours = timed(lambda: ours_cls().select(S.PoolState(probs=probs), b, rng=0), repeats)
        rows.append((n, kind, "rad.selectors", t, peak_bytes(
            lambda: ours_cls().select(S.PoolState(probs=probs), b, rng=0)), 1.0))
        f = lambda: modal_fn(model, X, n_instances=b)  # noqa: E731
        t, theirs = timed(f, repeats)
        rows.append((n, kind, "modAL 0.4.2.1", t, peak_bytes(f), agreement(ours, first(theirs))))
        f = lambda: baal_cls().get_ranks(probs)[0][:b]  # noqa: E731
        t, theirs = timed(f, repeats)
        rows.append((n, kind, "baal 2.1.0", t, peak_bytes(f), agreement(ours, theirs)))
        if n <= max_dense:
            qs = UncertaintySampling(method=sk_method, random_state=0)
            f = lambda: qs.query(X, y, sk_clf, fit_clf=False, batch_size=b)  # noqa: E731
            t, theirs = timed(f, max(1, repeats // 3))
            rows.append((n, kind, "scikit-activeml 1.0.1", t, peak_bytes(f),
                         agreement(ours, theirs)))
        else:
            rows.append((n, kind, "scikit-activeml 1.0.1", None,
                         8.0 * b * n, None))  # the batch_size x n float64 utilities

    # RAD: the core call, and the same selection through each adapter (m = 0.2 n)
    m = 0.2 * n
    gains = G.margin_gain(probs)
    f = lambda: rad.select(gains, m, b, rng=np.random.default_rng(0))  # noqa: E731
    t, want = timed(f, repeats)
    rows.append((n, "RAD", "rad.select (precomputed gains)", t, peak_bytes(f), 1.0))
    f = lambda: S.RAD().select(S.PoolState(probs=probs, m=m), b, rng=0)  # noqa: E731
    t, got = timed(f, repeats)
    rows.append((n, "RAD", "rad.selectors.RAD (gains + select)", t, peak_bytes(f),
                 agreement(want, got)))
    f = lambda: S.RAD().select(S.PoolState(probs=probs, m=m), b, rng=0,  # noqa: E731
                               return_scores=True)
    t, got = timed(f, repeats)
    rows.append((n, "RAD", "rad.selectors.RAD, return_scores=True (+ q)", t, peak_bytes(f),
                 agreement(want, got.indices)))
    f = lambda: RADQuery(m, random_state=0)(model, X, n_instances=b)  # noqa: E731
    t, got = timed(f, repeats)
    rows.append((n, "RAD", "RADQuery in modAL", t, peak_bytes(f), agreement(want, got[0])))
    f = lambda: RADHeuristic(b, m, random_state=0).get_ranks(probs)[0][:b]  # noqa: E731
    t, got = timed(f, repeats)
    rows.append((n, "RAD", "RADHeuristic in baal", t, peak_bytes(f), agreement(want, got)))
    qs_rad = RADSampling(m=m, random_state=0)
    f = lambda: qs_rad.query(X, y, sk_clf, fit_clf=False, batch_size=b)  # noqa: E731
    t, got = timed(f, repeats)
    # its seed comes from scikit-activeml's check_random_state(0, n_unlabeled + 1)
    from skactiveml.utils import check_random_state

    seed = check_random_state(0, n + 1).randint(2**31 - 1)
    rows.append((n, "RAD", "RADSampling in scikit-activeml", t, peak_bytes(f),
                 agreement(rad.select(gains, m, b, rng=seed), got)))
    return rows


def kcenter_rows(n: int, b: int, repeats: int) -> list[tuple]:
    """k-center greedy from 10 labeled centres: rad vs scikit-activeml's CoreSet."""
    from skactiveml.pool import CoreSet

    emb = make_embeddings(n)
    labeled = np.arange(0, n, n // 10)[:10]
    y = np.full(n, np.nan)
    y[labeled] = 0
    f_ours = lambda: S.k_center_greedy(emb, b, centers=labeled)  # noqa: E731
    t, ours = timed(f_ours, repeats)
    rows = [(n, f"k-center (d={emb.shape[1]}, b={b})", "rad.selectors.k_center_greedy", t,
             peak_bytes(f_ours), 1.0)]
    qs = CoreSet(random_state=0)
    f = lambda: qs.query(emb, y, batch_size=b)  # noqa: E731
    t, theirs = timed(f, max(1, repeats // 3))
    rows.append((n, f"k-center (d={emb.shape[1]}, b={b})", "scikit-activeml 1.0.1 CoreSet", t,
                 peak_bytes(f), agreement(ours, theirs, ordered=True)))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, nargs="+", default=[1e5, 1e6])
    parser.add_argument("--b", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kcenter-n", type=float, default=2e4)
    parser.add_argument("--kcenter-b", type=int, default=200)
    parser.add_argument("--max-dense", type=float, default=2e5)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # peers' deprecation chatter
    from importlib.metadata import version

    print(f"# b = {args.b}, float32 (n, {K}) probabilities; median of {args.repeats} runs "
          f"after a warm-up (scikit-activeml: {max(1, args.repeats // 3)}); peak = tracemalloc "
          f"during one call, inputs excluded; {os.cpu_count()} CPUs; numpy {np.__version__}, "
          f"scikit-activeml {version('scikit-activeml')}, modAL-python {version('modAL-python')}, "
          f"baal {version('baal')}, scikit-learn {version('scikit-learn')}")
    print("| n | task | library | median (s) | / rad | peak (MiB) | agreement with rad |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: |")
    mib = 2.0**20
    rows = []
    for size in args.n:
        rows += score_rows(int(size), args.b, args.repeats, int(args.max_dense))
    rows += kcenter_rows(int(args.kcenter_n), args.kcenter_b, args.repeats)
    reference: dict[tuple[int, str], float] = {}
    for n, task, lib, t, peak, agree in rows:
        if t is not None and lib.startswith("rad"):
            reference.setdefault((n, task), t)
        ref = reference.get((n, task))
        time_s = "skipped" if t is None else f"{t:.4g}"
        ratio = "" if t is None or ref is None else f"{t / ref:.3g}x"
        peak_s = f"{peak / mib:,.0f} (O(b n) utilities)" if t is None else f"{peak / mib:,.1f}"
        agree_s = "" if agree is None else f"{agree:.3f}"
        print(f"| {n:,} | {task} | {lib} | {time_s} | {ratio} | {peak_s} | {agree_s} |",
              flush=True)


if __name__ == "__main__":
    main()

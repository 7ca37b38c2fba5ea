"""Baselines that rad is measured against (the code a user would otherwise write).

* :func:`numpy_select` — the pure-NumPy RAD pipeline: argsort descending, float64 prefix
  sums, argmax of N(k), capped probabilities ``min(b p*, 1)``, systematic sampling.
* :func:`sequential_depround` — DepRound by per-item sequential pairing, one uniform per
  pair (compiled with Numba so the comparison is between algorithms, not languages).
"""

from __future__ import annotations

import numpy as np

__all__ = ["numpy_select", "sequential_depround"]


def numpy_select(gains: np.ndarray, m: float, b: int, seed: int = 0) -> np.ndarray:
    """RAD the straightforward way (Corollary 1 with ``w = 1 - m/n``, then ``min(b p, 1)``)."""
    g = np.asarray(gains, dtype=np.float64)
    n = g.shape[0]
    w = 1.0 - m / n
    order = np.argsort(-g, kind="stable")
    gs = g[order]
    with np.errstate(divide="ignore"):
        inv_a = np.where(gs > 0, 1.0 / ((1.0 + w) * gs), 0.0)  # zero gains: never chosen
    G = np.cumsum(gs * inv_a)
    H = np.cumsum(inv_a)
    k = int(np.argmax((G - m) / H)) + 1
    q = np.zeros(n)
    q[:k] = np.minimum(b * inv_a[:k] / H[k - 1], 1.0)
    c = np.cumsum(q)
    u = np.random.default_rng(seed).random()
    picks = np.searchsorted(c, u + np.arange(int(round(c[-1]))), side="right")
    return np.sort(order[picks])


try:
    import numba as _nb

    @_nb.njit(cache=True)
    def _pairing(q: np.ndarray, seed: int) -> np.ndarray:
        np.random.seed(seed)
        out = np.empty(q.shape[0], np.int64)
        k = 0
        carry = -1
        cm = 0.0
        for j in range(q.shape[0]):
            p = q[j]
            if p <= 0.0:
                continue
            if p >= 1.0:
                out[k] = j
                k += 1
                continue
            if carry < 0:
                carry, cm = j, p
                continue
            alpha = min(1.0 - cm, p)
            beta = min(cm, 1.0 - p)
            if np.random.random() * (alpha + beta) < beta:
                cm, p = cm + alpha, p - alpha
            else:
                cm, p = cm - beta, p + beta
            if cm >= 1.0 - 1e-12:
                out[k] = carry
                k += 1
                carry, cm = (j, p) if p > 1e-12 else (-1, 0.0)
            elif p >= 1.0 - 1e-12:
                out[k] = j
                k += 1
                if cm <= 1e-12:
                    carry, cm = -1, 0.0
            elif cm <= 1e-12:
                carry, cm = j, p
        if carry >= 0 and cm > 0.5:
            out[k] = carry
            k += 1
        return out[:k]

    def sequential_depround(q: np.ndarray, seed: int = 0) -> np.ndarray:
        """Per-item sequential pairing DepRound (one uniform per pair), sorted indices."""
        return np.sort(_pairing(np.ascontiguousarray(q, dtype=np.float64), seed))

except ImportError:  # pragma: no cover - numba is in the [test] extra

    def sequential_depround(q: np.ndarray, seed: int = 0) -> np.ndarray:
        raise ImportError("sequential_depround needs numba")

"""What order-free exact support sums would cost: a feasibility probe for the single read.

``docs/design.md`` §3 ("The single read") explains why one read of the gains needs support
sums that do not depend on the order of additions. This probe times, on float32 gains
with RAD losses (``a = g + w g``), a Numba pass shaped as the product's support pass (a
``prange`` over 65,536-point blocks, runs of 64 terms formed by the product's own
branch-free ``_support_term``) that adds each term exactly into a fixed-point
accumulator instead of a float64 lane. The largest term is at most ``2^e_top`` (known
before the pass: ``1 / a`` at ``tau``), and a term of exponent ``e`` in the window of 12
binades below it is its 53-bit significand shifted left by ``e - (e_top - 11)``: a 64-bit
integer, whose 32-bit halves go to two 64-bit sums (no carries for 2^32 terms). A term
outside the window is counted (the real pass would need a second window or the chunked
form; uniform gains never have one).

The fixed-point total, rounded once, must equal ``math.fsum`` of the same terms (checked
on every run: the exit status), and the probe reports its median next to the product's
own support pass (the canonical sums: Numba's with ``G`` and without it, as a select
runs it with RAD losses; C++'s) and the C++ sum probe. It is a probe, not a backend:
nothing in ``rad`` uses it.

    PYTHONPATH=python python benchmarks/exact_sum_probe.py --n 1e8 --threads 1 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numba as nb
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from rad._backends.numba_backend import _support_term  # noqa: E402  (the product's term: 1/a, branch-free)
from timing import median_time  # noqa: E402  (benchmarks/timing.py: this script's folder is on the path)

BLOCK = 1 << 16
_MANT = np.uint64((1 << 52) - 1)
_ONE = np.uint64(1 << 52)
_LOW32 = np.uint64(0xFFFFFFFF)
WINDOW = 12  # binades below the top: 53 + 11 bits fit a uint64


@nb.njit(cache=True, error_model="numpy")
def _fixed_run(r_bits, base, hsum, lsum, n_out):  # pragma: no cover - timed, not tested
    """A run's terms (their bits; 0 for no term) into the fixed-point sums: integer adds only."""
    for j in range(r_bits.shape[0]):
        bits = r_bits[j]
        off = np.int64(bits >> np.uint64(52)) - base
        fits = off >= 0 and off < WINDOW
        v = ((bits & _MANT) | _ONE) << np.uint64(off & (WINDOW - 1))
        v = v if fits else np.uint64(0)
        hsum += v >> np.uint64(32)
        lsum += v & _LOW32
        n_out += 1 if (bits != 0 and not fits) else 0
    return hsum, lsum, n_out


@nb.njit(parallel=True, cache=True, error_model="numpy")
def fixed_sums(g, w, tau, e_top):  # pragma: no cover - timed, not tested
    """Per block: the exact sum of the same terms as two 64-bit sums of 32-bit halves.

    Runs of 64 in two steps, as the product's support pass (``numba_backend._support_block``):
    the terms into a buffer (the division vectorised), then their bits into the sums.
    Returns ``(hi, lo, outside)``: the block's sum is ``(hi 2^32 + lo) 2^(e_top - 11 - 1075)``
    for the terms in the window; ``outside`` counts the terms outside it.
    """
    n = g.shape[0]
    nblk = (n + BLOCK - 1) // BLOCK
    his = np.zeros(nblk, np.uint64)
    los = np.zeros(nblk, np.uint64)
    outside = np.zeros(nblk, np.int64)
    base = np.int64(e_top - (WINDOW - 1))
    none = np.zeros(1)
    for b in nb.prange(nblk):
        r_buf = np.empty(64)
        r_bits = r_buf.view(np.uint64)
        hsum = np.uint64(0)
        lsum = np.uint64(0)
        n_out = 0
        lo = b * BLOCK
        hi = min(n, lo + BLOCK)
        i0 = lo
        while i0 < hi:
            k = min(64, hi - i0)
            for j in range(k):  # the product's term, as its support pass forms it
                r_buf[j] = _support_term(g, none, False, w, tau, np.uint64(i0 + j))[0]
            hsum, lsum, n_out = _fixed_run(r_bits[:k], base, hsum, lsum, n_out)
            i0 += k
        his[b] = hsum
        los[b] = lsum
        outside[b] = n_out
    return his, los, outside


def exact_total(his: np.ndarray, los: np.ndarray, e_top: int) -> float:
    """The fixed-point sums rounded once to float64: Python integers are exact, ``float()``
    of one rounds to nearest, and the power-of-two scaling is exact in this range."""
    total = (sum(int(x) for x in his) << 32) + sum(int(x) for x in los)
    return math.ldexp(float(total), e_top - (WINDOW - 1) - 1075)


def median_ms(fn, repeats: int) -> float:
    """:func:`timing.median_time` in milliseconds."""
    return median_time(fn, repeats) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=float, default=1e8)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--m-frac", type=float, default=0.3)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    import rad
    from rad._backends import get_backend

    n = int(args.n)
    g = np.random.default_rng(0).random(n, dtype=np.float32)
    m = args.m_frac * n
    sol = rad.solve(g, m, 1000)
    w, tau = float(sol.w), float(sol.threshold)
    # the largest term: 1 / a at the smallest support gain, a rounded as the pass forms it
    t = np.float64(np.float32(tau))
    e_top = int(np.array([1.0 / (t + w * t)]).view(np.uint64)[0] >> np.uint64(52))
    # the reference: fsum of the same terms (a sample of blocks keeps it quick)
    his, los, outside = fixed_sums(g, w, tau, e_top)
    sample = g[: 4 * BLOCK].astype(np.float64)
    a = sample + w * sample
    terms = np.where((sample >= tau) & (a > 0), 1.0 / np.where(a > 0, a, 1.0), 0.0)
    sh, sl, sb = fixed_sums(g[: 4 * BLOCK], w, tau, e_top)
    exact_ok = bool(sb.sum() == 0 and exact_total(sh, sl, e_top) == math.fsum(terms))
    row: dict = {"n": n, "w": w, "tau": tau, "e_top": e_top, "terms_outside_window": int(outside.sum()),
                 "fixed_equals_fsum_on_4_blocks": exact_ok,
                 "fixed_total": exact_total(his, los, e_top),
                 "rows": []}
    cpp = get_backend("cpp") if "cpp" in rad.backends() else None
    nbk = get_backend("numba")
    from rad._backends import numba_backend as nbm

    none = np.zeros(1)
    for th in args.threads:
        nb.set_num_threads(th)
        r = {"threads": th,
             "fixed_ms": median_ms(lambda: fixed_sums(g, w, tau, e_top), args.repeats),
             "numba_support_sums_ms": median_ms(lambda: nbk.support_sums(g, None, w, tau, th), args.repeats),
             # the canonical pass as a select runs it with RAD losses: H and the count only
             "numba_support_h_only_ms": median_ms(
                 lambda: nbm._support_sums(g, none, False, w, tau, nbm._NO_SKETCH, False), args.repeats)}
        if cpp is not None:
            r["cpp_support_sums_ms"] = median_ms(lambda: cpp.support_sums(g, None, w, tau, th), args.repeats)
            from rad import _core

            r["cpp_sum_probe_ms"] = median_ms(lambda: _core.stream_sum(g, th), args.repeats)
        r["fixed_over_numba_h_only"] = r["fixed_ms"] / r["numba_support_h_only_ms"]
        row["rows"].append(r)
        print(json.dumps(r), flush=True)
    print(json.dumps({k: v for k, v in row.items() if k != "rows"}))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(row, fh, indent=1)
    return 0 if exact_ok else 1


if __name__ == "__main__":
    sys.exit(main())

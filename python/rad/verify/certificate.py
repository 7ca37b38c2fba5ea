"""Optimality certificates for the batch game, at any scale (DESIGN §1, "Certificate").

The batch game is

    OPT_b = max_{q in Q} min_{u in U} P(q, u),   P(q, u) = sum_i q_i g_i - sum_i u_i q_i a_i,

with ``Q = {q in [0,1]^n : sum q = b}``, ``U = {u in [0,1]^n : sum u = m}`` (``u = 1 - c``
are the teacher's mistakes) and ``a = g + l``. Two numbers bracket ``OPT_b``:

* the **lower bound** ``value(q) = min_u P(q, u) = sum_i q_i g_i - (sum of the m largest
  q_i a_i)`` of the probabilities ``q`` being checked (the adversary's best response), and
* the **upper bound** ``Phi(u) = max_q P(q, u) = sum of the b largest g_i - u_i a_i`` of an
  adversary ``u`` (the sampler's best response).

``value(q) <= OPT_b <= Phi(u)`` for every feasible pair, so a zero gap proves that ``q`` is
optimal — with no LP and no trust in the solver: both numbers are recomputed here from the
data. Two constructions of the adversary, both proved in ``docs/certificate.md``:

* the **saddle completion** of the solver's optimum ``q*`` (fast path, a few passes): with
  ``nu`` the ``ceil(m)``-th largest ``q*_i a_i`` the points split into hit
  (``q*_i a_i > nu``, ``u_i = 1``), spared (``< nu``, ``u_i = 0``) and the level set
  (``= nu``), on which the remaining mistakes are placed by a water level ``lam`` so that
  ``q*`` is in turn a best response: points taken fractionally are pushed exactly to
  ``g_i - u_i a_i = lam``, points taken surely stay at or above it, points skipped at or
  below. Zero gap whenever ``q*`` is exactly optimal.
* the **water search**, independent of the solver: ``min_u Phi(u) = min_lam Psi(lam)``
  with ``Psi(lam) = b lam + min_u sum_i (g_i - lam - a_i u_i)^+``, a convex 1-D function whose
  inner problem is a fractional knapsack (one weighted selection); cutting planes find its
  minimum, and the knapsack's ``u`` at any ``lam`` is a valid adversary with
  ``Phi(u) <= Psi(lam)``. Used when the fast path leaves a gap (the solver located its
  water level only to a tolerance) or on request.

Everything is computed in chunks of the pool (a few streaming passes; selections by a radix
select over the float bit patterns, O(n)), so memory stays bounded by the chunk size and
a 1e8–1e9 pool, also a read-only memory map, can be certified. The probabilities are
produced chunk by chunk by the same backend kernels as the solver (``materialize``).
"""

from __future__ import annotations

import math
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad._backends.params import Params
from rad._solve.solution import NetHarmWarning, Solution

__all__ = ["Certificate", "certificate"]

#: Points per chunk of the streaming passes (about 16 MB per float64 temporary).
CHUNK = 1 << 21
#: A selection bucket at most this big is finished by collecting it (one more pass).
_COLLECT = 1 << 20
_DIGIT = 16
_NBINS = 1 << _DIGIT
_EPS = float(np.finfo(np.float64).eps)
#: Relative half-width of the level set ``q_i a_i = nu`` in the saddle completion: the
#: rounding of ``q_i a_i = (nu / a_i) a_i`` (docs/certificate.md, §2).
_BAND = 8 * _EPS


@dataclass(frozen=True)
class Certificate:
    """Bounds that bracket the game value, and how far apart they are.

    Attributes
    ----------
    lower : float
        ``value(q)``: what the checked probabilities ``q`` guarantee against the worst
        placement of the ``m`` mistakes, ``sum q_i g_i - (sum of the m largest q_i a_i)``.
    upper : float
        ``Phi(u)``: the best a batch of ``b`` can earn against the adversary ``c = 1 - u``,
        the sum of the ``b`` largest ``c_i a_i - l_i``. ``lower <= OPT_b <= upper``.
    gap : float
        ``upper - lower`` (zero, up to rounding, proves ``q`` optimal).
    scale : float
        The magnitude the gap is judged against: the largest of ``sum q_i g_i``, the
        attacked mass ``sum of the m largest q_i a_i`` and ``|upper|`` (rounding errors are
        relative to these, not to a value that may cancel to 0).
    rtol : float
        Relative tolerance of :attr:`optimal`.
    optimal : bool
        ``gap <= rtol * scale`` and both vectors feasible to ``rtol`` (``|sum q - b|`` and
        ``max(sum u - m, 0)`` at most ``rtol * max(1, b or m)``).
    value : float
        The solver's reported value (``nan`` when ``q`` came from the caller as an array).
    n, m, b : int, float, int
        The instance.
    q_sum, u_sum : float
        ``sum q`` (should be ``b``) and the adversary's mistakes ``sum u`` (at most ``m``).
    nu, lam : float
        The adversary's parameters: the attack level ``nu`` (the ``ceil(m)``-th largest
        ``q*_i a_i``; ``nan`` with ``method="search"``, ``inf`` when ``m = 0``) and the water
        level ``lam`` of the values ``g_i - u_i a_i`` (``nan`` when ``b = 0``).
    adversary_method : str
        How the adversary was built: ``"saddle"`` (completion of the solver's optimum),
        ``"search"`` (the independent water search) or ``"none"`` (``b = 0``).
    backend : str
        The kernels that produced ``q``.
    seconds : float
        Wall time of the whole check (solve included when it ran).
    adversary : numpy.ndarray or None
        ``c = 1 - u`` (float64, length ``n``) when requested with ``return_adversary``.
    """

    lower: float
    upper: float
    gap: float
    scale: float
    rtol: float
    optimal: bool
    value: float
    n: int
    m: float
    b: int
    q_sum: float
    u_sum: float
    nu: float
    lam: float
    adversary_method: str
    backend: str
    seconds: float
    adversary: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)

    @property
    def rel_gap(self) -> float:
        """``gap / scale`` (0 when both are 0)."""
        if self.scale > 0:
            return self.gap / self.scale
        return 0.0 if self.gap == 0 else math.inf


# ----------------------------------------------------------------------------- the pool


class _Pool:
    """Chunked, float64 views of ``g``, ``l``, ``a`` and of probabilities ``q``."""

    def __init__(
        self,
        gains: np.ndarray,
        losses: np.ndarray | None,
        w: float,
        backend,
        threads: int,
        chunk: int,
    ) -> None:
        self.gains = gains
        self.losses = losses
        self.w = w  # kernel loss weight (0 with general losses)
        self.backend = backend
        self.threads = threads
        n = gains.shape[0]
        self.n = n
        self.ranges = [(lo, min(lo + chunk, n)) for lo in range(0, n, chunk)]

    def gla(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        g = np.asarray(self.gains[lo:hi], dtype=np.float64)
        # Same expressions as the kernels: l = w g for RAD losses, a = g + l.
        l = np.asarray(self.losses[lo:hi], dtype=np.float64) if self.losses is not None else self.w * g
        return g, l, g + l

    def q_from_params(self, params: Params) -> Callable[[int, int], np.ndarray]:
        def q(lo: int, hi: int) -> np.ndarray:
            lchunk = None if self.losses is None else self.losses[lo:hi]
            # One kernel thread per chunk: the chunks themselves run on ``threads`` workers.
            out = self.backend.materialize(self.gains[lo:hi], lchunk, self.w, params, 1)
            return np.asarray(out, dtype=np.float64)

        return q


def _q_from_array(q: np.ndarray) -> Callable[[int, int], np.ndarray]:
    return lambda lo, hi: np.asarray(q[lo:hi], dtype=np.float64)


def _fsum(parts: list[float]) -> float:
    return math.fsum(parts)


def _chunk_sum(x: np.ndarray) -> float:
    return math.fsum(x.tolist()) if x.shape[0] <= 4096 else float(np.sum(x))


def _pmap(fn: Callable, ranges: list[tuple[int, int]], workers: int) -> list:
    """``[fn(lo, hi) for lo, hi in ranges]``, on ``workers`` threads when there are several
    chunks (NumPy's ufuncs release the GIL). At most ``workers`` chunks are in flight."""
    if workers <= 1 or len(ranges) <= 1:
        return [fn(lo, hi) for lo, hi in ranges]
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(lambda r: fn(*r), ranges))


# -------------------------------------------------------------- selection (O(n) passes)

_SIGN = np.uint64(1 << 63)


def _keys(x: np.ndarray) -> np.ndarray:
    """Unsigned keys whose order is the order of the doubles ``x`` (no NaN)."""
    bits = (x + 0.0).view(np.uint64)  # + 0.0 folds -0.0 into 0.0
    if not np.signbit(x).any():  # the common case: no negative value
        return bits | _SIGN
    return np.where(bits >= _SIGN, ~bits, bits | _SIGN)


def _from_key(key: int) -> float:
    k = np.uint64(key)
    bits = k ^ _SIGN if k >= _SIGN else ~k
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


Streamed = Callable[[int, int], "tuple[np.ndarray, np.ndarray | None, list[np.ndarray]]"]


@dataclass(frozen=True)
class _Cut:
    """A weighted selection: the threshold ``t`` where the weight of the values above
    reaches ``k`` (``W_above < k <= W_above + W_at``), and sums over the values above
    ``t`` and equal to ``t``."""

    t: float
    w_above: float
    e_above: np.ndarray  # one sum per extra quantity
    w_at: float
    e_at: np.ndarray
    e_below: np.ndarray  # over positive-weight values below t


def _wselect(
    stream: Streamed, ranges: list[tuple[int, int]], k: float, n_extra: int, workers: int = 1
) -> _Cut:
    """Weighted selection from the top of a streamed vector (O(n), at most 5 passes).

    ``stream(lo, hi)`` returns the values ``x``, non-negative weights ``w`` (None: all 1)
    and ``n_extra`` per-item quantities to be summed. Requires ``0 < k <= sum w``.

    One chunk: a sort. Several: a radix select on :func:`_keys`, 16 bits per pass with
    per-bucket weight and extra sums; a bucket of at most ``_COLLECT`` points is collected
    and finished by sorting. Memory ``O(chunk + 2**16 (2 + n_extra) + _COLLECT)``.
    """

    def finish(x, w, e, w_above, e_above, e_below) -> _Cut:
        order = np.argsort(-x, kind="stable")
        x, w, e = x[order], w[order], [q[order] for q in e]
        ux, start = np.unique(-x, return_index=True)  # groups of equal x, descending
        gw = np.add.reduceat(w, start) if x.shape[0] else np.zeros(0)
        cum = np.cumsum(gw)
        j = int(np.searchsorted(cum, k - w_above, side="left"))
        j = min(j, gw.shape[0] - 1)
        s0 = int(start[j])
        s1 = int(start[j + 1]) if j + 1 < start.shape[0] else x.shape[0]
        e_a = np.array([ea + _chunk_sum(q[:s0]) for ea, q in zip(e_above, e)])
        e_t = np.array([_chunk_sum(q[s0:s1]) for q in e])
        e_b = np.array([eb + _chunk_sum(q[s1:]) for eb, q in zip(e_below, e)])
        return _Cut(
            t=float(x[s0]),
            w_above=w_above + _chunk_sum(w[:s0]),
            e_above=e_a,
            w_at=_chunk_sum(w[s0:s1]),
            e_at=e_t,
            e_below=e_b,
        )

    def full(lo: int, hi: int):
        x, w, e = stream(lo, hi)
        return x, (np.ones(x.shape[0]) if w is None else w), e

    if len(ranges) == 1:
        x, w, e = full(*ranges[0])
        keep = w > 0
        return finish(x[keep], w[keep], [q[keep] for q in e], 0.0, [0.0] * n_extra, [0.0] * n_extra)

    w_above = 0.0
    e_above = [0.0] * n_extra
    e_below = [0.0] * n_extra
    prefix = 0
    shift = 64
    while True:
        shift -= _DIGIT

        def hist(lo: int, hi: int, shift: int = shift, prefix: int = prefix):
            x, w, e = full(lo, hi)
            key = _keys(x)
            sel = w > 0
            if shift + _DIGIT < 64:
                sel &= (key >> np.uint64(shift + _DIGIT)) == np.uint64(prefix)
            key, w = key[sel], w[sel]
            d = ((key >> np.uint64(shift)) & np.uint64(_NBINS - 1)).astype(np.intp)
            return (
                np.bincount(d, minlength=_NBINS),
                np.bincount(d, weights=w, minlength=_NBINS),
                [np.bincount(d, weights=q[sel], minlength=_NBINS) for q in e],
            )

        parts = _pmap(hist, ranges, workers)
        cn = np.sum([p[0] for p in parts], axis=0)
        cw = np.sum([p[1] for p in parts], axis=0)
        ce = [np.sum([p[2][i] for p in parts], axis=0) for i in range(n_extra)]
        desc = np.cumsum(cw[::-1])  # weight of digits >= NBINS-1-j
        j = int(np.searchsorted(desc, k - w_above, side="left"))
        nz = np.flatnonzero(cn)
        d = min(_NBINS - 1 - j, int(nz[-1])) if nz.shape[0] else 0
        d = max(d, int(nz[0])) if nz.shape[0] else 0
        if cn[d] == 0:  # rounding pushed the target past the last non-empty digit
            d = int(nz[nz <= d][-1]) if np.any(nz <= d) else int(nz[0])
        w_above += float(np.sum(cw[d + 1 :]))
        for i, acc in enumerate(ce):
            e_above[i] += float(np.sum(acc[d + 1 :]))
            e_below[i] += float(np.sum(acc[:d]))
        prefix = (prefix << _DIGIT) | d
        if shift == 0:  # one exact key: every value in the bucket equals t
            return _Cut(
                t=_from_key(prefix),
                w_above=w_above,
                e_above=np.array(e_above),
                w_at=float(cw[d]),
                e_at=np.array([float(acc[d]) for acc in ce]),
                e_below=np.array(e_below),
            )
        if cn[d] <= _COLLECT:
            break

    def pick(lo: int, hi: int):
        x, w, e = full(lo, hi)
        sel = (w > 0) & ((_keys(x) >> np.uint64(shift)) == np.uint64(prefix))
        return x[sel], w[sel], [q[sel] for q in e]

    parts = _pmap(pick, ranges, workers)
    xs = [p[0] for p in parts]
    ws = [p[1] for p in parts]
    es = [[p[2][i] for p in parts] for i in range(n_extra)]
    return finish(
        np.concatenate(xs),
        np.concatenate(ws),
        [np.concatenate(q) for q in es],
        w_above,
        e_above,
        e_below,
    )


@dataclass(frozen=True)
class _Top:
    """The ``k`` largest of a streamed vector: ``sum = above_sum + (k - above) * threshold``."""

    total: float
    threshold: float  # the ceil(k)-th largest value (+inf when k == 0)
    above: float  # how many values are strictly larger


def _select_top(
    values: Callable[[int, int], np.ndarray],
    ranges: list[tuple[int, int]],
    k: float,
    workers: int = 1,
) -> _Top:
    """Sum of the ``k`` largest streamed values, ``k`` real (the fractional part weights
    the ``ceil(k)``-th largest), and that threshold.

    One chunk: ``np.partition``. Several: a radix select on :func:`_keys` (16 bits a pass,
    per-bucket counts and sums). It ends when the bucket holding the threshold has at most
    ``_COLLECT`` values (one more pass collects and sorts them) or when all of its values
    lie within ``_CLUSTER`` relative of each other — e.g. ``q_i a_i = nu`` to rounding on a
    whole support — in which case the threshold is taken as the bucket's largest value.
    That rounds the sum *up* by at most ``(k - above) * (max - min)`` of the bucket, so a
    lower bound built from it stays a lower bound and an upper bound stays an upper bound.
    Usually two passes; at most five. Memory ``O(chunk + 2**16 + _COLLECT)``.
    """
    r = math.ceil(k)
    if r <= 0:
        return _Top(0.0, math.inf, 0.0)
    if len(ranges) == 1:
        x = values(*ranges[0])
        n = x.shape[0]
        t = float(np.partition(x, n - r)[n - r])
        big = x[x > t]
        return _Top(_chunk_sum(big) + (k - big.shape[0]) * t, t, float(big.shape[0]))

    above, above_parts = 0, []
    prefix = 0
    shift = 64
    lo_v, hi_v = -math.inf, math.inf  # range of the values in the current prefix bucket
    while True:
        shift -= _DIGIT

        def hist(lo: int, hi: int, shift: int = shift, prefix: int = prefix):
            x = values(lo, hi)
            key = _keys(x)
            cmin, cmax, at = math.inf, -math.inf, 0
            if shift + _DIGIT < 64:
                sel = (key >> np.uint64(shift + _DIGIT)) == np.uint64(prefix)
                x, key = x[sel], key[sel]
                if x.shape[0]:
                    cmin, cmax = float(x.min()), float(x.max())
                    at = int(np.count_nonzero(x == cmax))
            d = ((key >> np.uint64(shift)) & np.uint64(_NBINS - 1)).astype(np.intp)
            return (
                np.bincount(d, minlength=_NBINS),
                np.bincount(d, weights=x, minlength=_NBINS),
                cmin,
                cmax,
                at,
            )

        parts = _pmap(hist, ranges, workers)
        cnt = np.sum([p[0] for p in parts], axis=0)
        sums = np.sum([p[1] for p in parts], axis=0)
        vmin = min(p[2] for p in parts)
        vmax = max(p[3] for p in parts)
        at_max = sum(p[4] for p in parts if p[3] == vmax)
        need = r - above
        if at_max >= need:  # the bucket's largest value fills the rest exactly
            return _Top(_fsum(above_parts) + (k - above) * vmax, vmax, float(above))
        if shift + _DIGIT < 64:
            lo_v, hi_v = vmin, vmax
        desc = np.cumsum(cnt[::-1])
        j = int(np.searchsorted(desc, need, side="left"))
        d = _NBINS - 1 - j
        above += int(desc[j] - cnt[d])
        above_parts.append(float(np.sum(sums[d + 1 :])))
        prefix = (prefix << _DIGIT) | d
        if shift == 0:  # one exact key: every value in the bucket equals t
            t = _from_key(prefix)
            return _Top(_fsum(above_parts) + (k - above) * t, t, float(above))
        if math.isfinite(hi_v - lo_v) and hi_v - lo_v <= _CLUSTER * max(abs(hi_v), abs(lo_v)):
            return _Top(_fsum(above_parts) + (k - above) * hi_v, hi_v, float(above))
        if cnt[d] <= _COLLECT:
            break

    def pick(lo: int, hi: int) -> np.ndarray:
        x = values(lo, hi)
        return x[(_keys(x) >> np.uint64(shift)) == np.uint64(prefix)]

    y = np.sort(np.concatenate(_pmap(pick, ranges, workers)))[::-1]
    t = float(y[r - above - 1])
    big = y[y > t]
    above += int(big.shape[0])
    above_parts.append(_chunk_sum(big))
    return _Top(_fsum(above_parts) + (k - above) * t, t, float(above))


#: Relative width below which a selection bucket counts as one value (see _select_top).
_CLUSTER = 64 * _EPS


# ---------------------------------------------------- the adversary: saddle completion


@dataclass(frozen=True)
class _Level:
    """The scalars that define the adversary ``u`` chunk by chunk (see :func:`_u_chunk`)."""

    nu: float
    band: float  # absolute half-width of the level set |q a - nu| <= band
    lam: float
    t: float
    shrink: float  # final factor that keeps sum u <= m


def _classes(q: np.ndarray, qa: np.ndarray, nu: float, band: float):
    """Masks: hit / level set (by ``q a`` against ``nu``); q = 1 / q = 0 / fractional."""
    if math.isinf(nu):  # m == 0: nobody is attacked and the level set is empty
        hit = np.zeros(q.shape, dtype=bool)
        level = hit
    else:
        hit = qa > nu + band
        level = ~hit & (qa >= nu - band)
    one = q >= 1.0
    zero = q <= 0.0
    frac = ~(one | zero)
    return hit, level, one, zero, frac


@dataclass
class _Stats:
    """What the saddle completion needs from one pass (mergeable across chunks)."""

    hits: int = 0
    lam_min: float = -math.inf
    lam_max: float = math.inf
    a_parts: list = field(default_factory=list)  # sum g/a over fractional level points
    b_parts: list = field(default_factory=list)  # sum 1/a over fractional level points
    free: int = 0  # level points with a == 0 (u free, value 0)
    tz_g: list = field(default_factory=list)  # level points the sampler skips (q = 0)
    tz_a: list = field(default_factory=list)
    to_g: list = field(default_factory=list)  # level points the sampler takes (q = 1)
    to_a: list = field(default_factory=list)

    def merge(self, o: "_Stats") -> None:
        self.hits += o.hits
        self.lam_min = max(self.lam_min, o.lam_min)
        self.lam_max = min(self.lam_max, o.lam_max)
        self.free += o.free
        for name in ("a_parts", "b_parts", "tz_g", "tz_a", "to_g", "to_a"):
            getattr(self, name).extend(getattr(o, name))


def _level_stats(pool: _Pool, qstar, nu: float, band: float) -> _Stats:
    """One pass: the constraints on ``lam`` and the sums of the level equation."""

    def lo_max(x: np.ndarray, where: np.ndarray) -> float:
        return float(np.min(x, where=where, initial=math.inf))

    def hi_min(x: np.ndarray, where: np.ndarray) -> float:
        return float(np.max(x, where=where, initial=-math.inf))

    def one_chunk(lo: int, hi: int) -> _Stats:
        s = _Stats()
        g, l, a = pool.gla(lo, hi)
        q = qstar(lo, hi)
        qa = q * a
        hit, level, one, zero, frac = _classes(q, qa, nu, band)
        s.hits = int(np.count_nonzero(hit))
        neg_l = -l
        # Off the level set u is fixed (1 on hit, 0 on spared); the sampler's best response
        # needs v = g - u a >= lam where q = 1, <= lam where q = 0, == lam in between.
        off = ~level
        v = np.where(hit, neg_l, g)
        s.lam_max = lo_max(v, off & ~zero)
        s.lam_min = hi_min(v, off & ~one)
        pos = a > 0
        lv = level & pos
        fr = lv & frac  # v = lam exactly: -l <= lam <= g
        if fr.any():
            s.lam_min = max(s.lam_min, hi_min(neg_l, fr))
            s.lam_max = min(s.lam_max, lo_max(g, fr))
            with np.errstate(divide="ignore", invalid="ignore"):
                inv = np.where(fr, 1.0 / a, 0.0)
            # (np.sum's pairwise summation; a masked sum with where= is not pairwise)
            s.a_parts.append(float(np.sum(g * inv)))
            s.b_parts.append(float(np.sum(inv)))
        to = lv & one  # v >= lam: lam <= g
        if to.any():
            s.lam_max = min(s.lam_max, lo_max(g, to))
            s.to_g.append(g[to])
            s.to_a.append(a[to])
        tz = lv & zero  # v <= lam: lam >= -l
        if tz.any():
            s.lam_min = max(s.lam_min, hi_min(neg_l, tz))
            s.tz_g.append(g[tz])
            s.tz_a.append(a[tz])
        z = level & ~pos  # a == 0: the value is 0 whatever u is
        if z.any():
            s.free = int(np.count_nonzero(z))
            if (z & ~zero).any():
                s.lam_max = min(s.lam_max, 0.0)
            if (z & ~one).any():
                s.lam_min = max(s.lam_min, 0.0)
        return s

    total = _Stats()
    for part in _pmap(one_chunk, pool.ranges, pool.threads):
        total.merge(part)
    return total


def _clip_sum(g: np.ndarray, a: np.ndarray, lam: float) -> float:
    """``sum clip((g - lam) / a, 0, 1)`` (``a > 0``; ``lam`` may be infinite)."""
    if g.shape[0] == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.clip((g - lam) / a, 0.0, 1.0)
    return _chunk_sum(r)


def _linear(A: float, B: float, lam: float) -> float:
    """``A - lam B`` with ``B == 0`` meaning the constant ``A`` (also at infinite lam)."""
    return A - lam * B if B > 0 else A


def _root(A: float, B: float, tz_g: np.ndarray, tz_a: np.ndarray, M: float, lo: float, hi: float) -> float:
    """Smallest ``lam >= lo`` with ``S(lam) = A - lam B + sum clip((tz_g - lam)/tz_a) <= M``.

    ``S`` is continuous, piecewise linear and non-increasing, with breakpoints at ``tz_g``
    and ``tz_g - tz_a``. Returns ``hi`` if ``S(hi) > M`` (no root up to ``hi``).
    """

    def s(lam: float) -> float:
        return _linear(A, B, lam) + _clip_sum(tz_g, tz_a, lam)

    if s(lo) <= M:
        return lo
    pts = np.unique(np.concatenate([tz_g, tz_g - tz_a]))
    pts = pts[(pts > lo) & (pts < hi)]
    if math.isfinite(hi):
        pts = np.append(pts, hi)
    # Values at the breakpoints via sorted prefix sums (O(T log T)).
    vals = _clip_sums_at(tz_g, tz_a, pts) + np.array([_linear(A, B, x) for x in pts.tolist()])
    ok = np.flatnonzero(vals <= M)
    if ok.shape[0] == 0:
        if math.isfinite(hi):
            return hi
        # Beyond the last breakpoint every tz term is 0: S = A - lam B.
        start = float(pts[-1]) if pts.shape[0] else lo
        return max(start, (A - M) / B) if B > 0 else hi
    j = int(ok[0])
    left = float(pts[j - 1]) if j > 0 else lo
    right = float(pts[j])
    s_left = s(left) if j == 0 else float(vals[j - 1])
    s_right = float(vals[j])
    if not math.isfinite(left):
        # S is linear on (-inf, right]: slope -(B + sum of 1/a over the linear tz terms).
        slope = B + _linear_slope(tz_g, tz_a, right)
        return right - (M - s_right) / slope if slope > 0 else right
    if s_left == s_right:
        return left
    return left + (s_left - M) / (s_left - s_right) * (right - left)


def _linear_slope(g: np.ndarray, a: np.ndarray, lam: float) -> float:
    """``sum 1/a`` over terms strictly inside their linear piece just left of ``lam``."""
    inside = (g - a < lam) & (g >= lam)
    return _chunk_sum(1.0 / a[inside])


def _clip_sums_at(g: np.ndarray, a: np.ndarray, lams: np.ndarray) -> np.ndarray:
    """``sum_i clip((g_i - lam)/a_i, 0, 1)`` for every ``lam`` in ``lams`` (sorted sweep)."""
    if g.shape[0] == 0 or lams.shape[0] == 0:
        return np.zeros(lams.shape[0])
    low = g - a  # term is 1 for lam <= low, 0 for lam >= g, linear between
    og, ol = np.argsort(g), np.argsort(low)
    gs, ls = g[og], low[ol]
    ga_g = np.concatenate([[0.0], np.cumsum((g / a)[og])])
    ia_g = np.concatenate([[0.0], np.cumsum((1.0 / a)[og])])
    ga_l = np.concatenate([[0.0], np.cumsum((g / a)[ol])])
    ia_l = np.concatenate([[0.0], np.cumsum((1.0 / a)[ol])])
    ng, nl = gs.shape[0], ls.shape[0]
    ig = np.searchsorted(gs, lams, side="right")  # g > lam: indices ig..end
    il = np.searchsorted(ls, lams, side="left")  # low >= lam: indices il..end (full terms)
    full = nl - il
    lin_ga = (ga_g[ng] - ga_g[ig]) - (ga_l[nl] - ga_l[il])
    lin_ia = (ia_g[ng] - ia_g[ig]) - (ia_l[nl] - ia_l[il])
    return full + lin_ga - lams * lin_ia


def _solve_level(s: _Stats, m: float, nu: float, band: float) -> _Level:
    """Choose ``lam`` and the level-set share ``t`` (``docs/certificate.md``, §2): the left
    end of the feasible interval ``[max(lam_min, r_lo), min(lam_max, r_hi)]``.

    Best effort: when rounding makes the constraints inconsistent, the nearest choice is
    taken; the resulting ``u`` is still feasible, so its bound is still valid.
    """
    A, B = _fsum(s.a_parts), _fsum(s.b_parts)
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)  # noqa: E731
    tz_g, tz_a, to_g, to_a = cat(s.tz_g), cat(s.tz_a), cat(s.to_g), cat(s.to_a)
    M = max(m - s.hits, 0.0)
    lo, hi = s.lam_min, s.lam_max
    if lo > hi:  # inconsistent by rounding: meet in the middle
        mid = hi if not math.isfinite(lo) else (lo if not math.isfinite(hi) else 0.5 * (lo + hi))
        lo = hi = mid
    # lam may be -inf (no lower constraint and S(-inf) <= M): the clip formulas take it.
    lam = _root(A, B, tz_g, tz_a, M, lo, hi)
    s_lo = _linear(A, B, lam) + _clip_sum(tz_g, tz_a, lam)
    s_hi = _linear(A, B, lam) + _clip_sum(to_g, to_a, lam) + tz_g.shape[0] + s.free
    if s_hi > s_lo:
        t = min(max((M - s_lo) / (s_hi - s_lo), 0.0), 1.0)
    else:
        t = 0.0
    total = s.hits + s_lo + t * (s_hi - s_lo)
    shrink = 1.0 if total <= m else (m / total if total > 0 else 1.0)
    return _Level(nu=nu, band=band, lam=lam, t=t, shrink=shrink)


def _u_chunk(
    g: np.ndarray, l: np.ndarray, a: np.ndarray, q: np.ndarray, lev: _Level
) -> tuple[np.ndarray, np.ndarray]:
    """The adversary's mistakes ``u`` on one chunk and the values ``v = g - u a``.

    ``v`` is evaluated in simplified form — ``clip((g - lam)/a, 0, 1) a = g - clip(lam, -l,
    g)`` — so that a point pushed to the water level has ``v = lam`` exactly instead of
    ``lam`` plus the rounding of ``g - u a`` (which is relative to ``g``, not to ``lam``).
    The bound is thus that of the exact adversary the scalars define; the float64 ``u``
    returned is its rounding.
    """
    qa = q * a
    hit, level, one, zero, _ = _classes(q, qa, lev.nu, lev.band)
    t = lev.t
    lv = level & (a > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (g - lev.lam) / a
    np.clip(r, 0.0, 1.0, out=r)
    c = np.clip(lev.lam, -l, g)  # = g - r a exactly
    u = np.where(lv, r, hit.astype(np.float64))
    v = np.where(lv, c, np.where(hit, -l, g))
    sel = lv & one  # taken surely: u = t r, v = (1 - t) g + t c
    if np.any(sel):
        u[sel] = t * r[sel]
        v[sel] = (1.0 - t) * g[sel] + t * c[sel]
    sel = lv & zero  # skipped surely: u = r + t (1 - r), v = (1 - t) c - t l
    if np.any(sel):
        u[sel] = r[sel] + t * (1.0 - r[sel])
        v[sel] = (1.0 - t) * c[sel] - t * l[sel]
    sel = level & ~(a > 0)  # a == 0: v = g = 0 whatever u is
    if np.any(sel):
        u[sel] = t
        v[sel] = g[sel]
    if lev.shrink != 1.0:  # u -> s u: v -> g - s (g - v) = (1 - s) g + s v
        u *= lev.shrink
        v = (1.0 - lev.shrink) * g + lev.shrink * v
    return u, v


# ------------------------------------------- the adversary: an independent water search


@dataclass(frozen=True)
class _Knap:
    """The adversary of the water level ``lam`` (``docs/certificate.md``, "Independent
    search"): ``u_i = kappa_i = clip((g_i - lam)/a_i, 0, 1)`` where ``a_i > mu``,
    ``s * kappa_i`` where ``a_i == mu > 0``, 0 elsewhere — the fractional knapsack that
    spends at most ``m`` mistakes where each unit removes the most (largest ``a_i``)."""

    lam: float
    mu: float
    s: float
    value: float  # Psi(lam) = b lam + sum_i (g_i - lam - a_i u_i)^+
    slope: float  # a subgradient of Psi at lam
    intercept: float  # of the supporting line: Psi(x) >= intercept + slope x for all x
    mag: float  # |b lam| + sum of the residuals: the scale of Psi's rounding


def _knap_terms(g: np.ndarray, l: np.ndarray, a: np.ndarray, lam: float):
    """Per point: ``kappa``, the residual and sampler weight if attacked (``A``) or
    spared (``U``), and ``1/a`` on the attacked points' linear piece."""
    pos = a > 0
    e = g - lam
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(pos, np.clip(e / np.where(pos, a, 1.0), 0.0, 1.0), 0.0)
        lin = pos & (-l <= lam) & (lam < g)
        inv_lin = np.where(lin, 1.0 / np.where(pos, a, 1.0), 0.0)
    res_u = np.maximum(e, 0.0)
    res_a = np.where(pos, np.maximum(-l - lam, 0.0), res_u)
    full = lam < -l
    ones_a = full.astype(np.float64)  # a == 0 points: lam < 0 = g, as if spared
    th_u = (lam < g).astype(np.float64)
    return kappa, res_a, ones_a, inv_lin, res_u, th_u, np.where(full, l, 0.0), g * inv_lin, g * th_u


def _psi(pool: _Pool, lam: float, m: float, b: int) -> _Knap:
    """``Psi(lam)`` with its knapsack adversary and a subgradient (2–6 streaming passes).

    Subgradient: ``b - sum theta_i`` with the sampler weights ``theta`` that satisfy the
    KKT conditions of the knapsack (``theta_i a_i = mu`` where ``0 < u_i < 1``, 1 where the
    residual is positive, 0 where it is negative) — proof in ``docs/certificate.md``.
    """

    def sums(lo: int, hi: int) -> list[float]:
        g, l, a = pool.gla(lo, hi)
        kappa, res_a, ones_a, _, res_u, th_u, l_full, _, g_th = _knap_terms(g, l, a, lam)
        zero = kappa <= 0  # points outside the knapsack
        return [
            _chunk_sum(kappa), _chunk_sum(res_a), _chunk_sum(ones_a), _chunk_sum(l_full),
            _chunk_sum(res_u[zero]), _chunk_sum(th_u[zero]), _chunk_sum(g_th[zero]),
        ]

    cols = list(zip(*_pmap(sums, pool.ranges, pool.threads)))
    k_parts, ra_parts, oa_parts, lf_parts, z_res, z_th, z_g = (list(c) for c in cols)
    total_kappa = _fsum(k_parts)
    if total_kappa <= m:  # every unit of reduction is affordable: mu = 0, u = kappa
        res = _fsum(ra_parts)
        # On this piece Psi = b lam + sum over full points of (-l - lam) (+ a == 0 points,
        # whose g is 0): intercept -sum l.
        icpt = -_fsum(lf_parts) + _fsum(z_g)
        return _Knap(lam, 0.0, 1.0, b * lam + res, b - _fsum(oa_parts), icpt, abs(b * lam) + res)

    def stream(lo: int, hi: int):
        g, l, a = pool.gla(lo, hi)
        kappa, res_a, ones_a, inv_lin, res_u, th_u, l_full, ga_lin, g_th = _knap_terms(g, l, a, lam)
        return a, kappa, [res_a, ones_a, inv_lin, res_u, th_u, a * kappa, l_full, ga_lin, g_th]

    cut = _wselect(stream, pool.ranges, m, 9, pool.threads)
    mu = cut.t
    ea, et, eb = cut.e_above, cut.e_at, cut.e_below
    s = min(max((m - cut.w_above) / cut.w_at, 0.0), 1.0) if cut.w_at > 0 else 0.0
    res = math.fsum(
        [ea[0], eb[3], _fsum(z_res), et[3] - s * et[5]]
    )  # attacked, spared, outside, tied
    theta = math.fsum([ea[1], mu * ea[2], eb[4], _fsum(z_th), et[4]])
    # The supporting line's intercept, summed point by point so that it carries no
    # cancellation between Psi and slope * lam (docs/certificate.md):
    # -sum_full l + mu (#full + sum_lin g/a) + sum_spared g + sum_tied g - mu m.
    icpt = math.fsum(
        [-ea[6], mu * ea[1], mu * ea[7], eb[8], _fsum(z_g), et[8], -mu * m]
    )
    return _Knap(lam, mu, s, b * lam + res, b - theta, icpt, abs(b * lam) + res)


def _water_search(
    pool: _Pool, m: float, b: int, hint: float | None = None, target: float = -math.inf
) -> _Knap:
    """Minimise the convex, piecewise-linear ``Psi`` over ``lam`` (cutting planes).

    Supporting lines at ``lo`` (slope < 0) and ``hi`` (slope > 0) meet at a point whose
    line value bounds ``min Psi`` from below; it is the next trial, alternating with a
    bisection whenever the bracket fails to halve. Stops when the best value found is
    within the rounding of ``Psi`` of that bound, or at most ``target`` (good enough for
    the caller), or when the bracket cannot shrink. The minimum lies in
    ``[min(-l), max(g)]`` (slopes ``b - n <= 0`` and ``b >= 0`` there). With a ``hint``
    (the saddle completion's water level) the bracket is first sought around it, by steps
    growing 32-fold from ``1e-9`` relative.
    """
    lo_parts, hi_parts = [], []
    for lo, hi in pool.ranges:
        g, l, _ = pool.gla(lo, hi)
        lo_parts.append(float(np.min(-l)))
        hi_parts.append(float(np.max(g)))
    g_lo, g_hi = min(lo_parts), max(hi_parts)
    best: _Knap | None = None

    def psi(x: float) -> _Knap:
        nonlocal best
        ev = _psi(pool, x, m, b)
        if best is None or ev.value < best.value:
            best = ev
        return ev

    ev_lo = ev_hi = None
    if hint is not None and math.isfinite(hint) and g_lo < hint < g_hi:
        ev = psi(hint)
        if ev.slope == 0 or ev.value <= target:
            return ev
        side = 1.0 if ev.slope < 0 else -1.0
        near = ev
        step = 1e-9 * max(abs(hint), 1e-9 * (g_hi - g_lo))
        while ev_lo is None:
            x = min(max(hint + side * step, g_lo), g_hi)
            far = psi(x)
            if far.value <= target:
                return far
            if side * far.slope >= 0 or x in (g_lo, g_hi):
                ev_lo, ev_hi = (near, far) if side > 0 else (far, near)
            else:
                near, step = far, 32.0 * step
        lo, hi = ev_lo.lam, ev_hi.lam
        if ev_lo.slope >= 0:  # reached an end of the range: it is the minimum
            return ev_lo
        if ev_hi.slope <= 0:
            return ev_hi
    else:
        lo, hi = g_lo, g_hi
        ev_lo = psi(lo)
        if ev_lo.slope >= 0:
            return ev_lo
        ev_hi = psi(hi)
        if ev_hi.slope <= 0:
            return ev_hi
    bisect_next = False
    for _ in range(_MAX_SEARCH):
        assert best is not None
        if best.value <= target:
            break
        s_lo, s_hi = ev_lo.slope, ev_hi.slope
        # The supporting lines c + s x meet at x; no Psi on [lo, hi] is below them there.
        x = (ev_hi.intercept - ev_lo.intercept) / (s_lo - s_hi)
        xc = min(max(x, lo), hi)
        bound = max(ev_lo.intercept + s_lo * xc, ev_hi.intercept + s_hi * xc)
        tol = 64 * _EPS * max(best.mag, abs(best.intercept), abs(best.slope * best.lam))
        if best.value - bound <= tol:
            break
        if bisect_next or not (lo < x < hi):
            x = _midpoint(lo, hi)
        if not (lo < x < hi):
            break
        ev = psi(x)
        width = _key_width(lo, hi)
        if ev.slope < 0:
            lo, ev_lo = x, ev
        elif ev.slope > 0:
            hi, ev_hi = x, ev
        else:
            return ev
        bisect_next = not bisect_next and _key_width(lo, hi) > width // 2
    assert best is not None
    return best


def _key(x: float) -> int:
    return int(_keys(np.array([x], dtype=np.float64))[0])


def _midpoint(lo: float, hi: float) -> float:
    """The midpoint of two doubles in the order of their bit patterns (so that a bracket
    spanning many orders of magnitude closes in at most 64 halvings)."""
    return _from_key((_key(lo) + _key(hi)) // 2)


def _key_width(lo: float, hi: float) -> int:
    return _key(hi) - _key(lo)


#: Evaluations of ``Psi`` the water search may spend (each is 2–6 streaming passes).
_MAX_SEARCH = 200


def _knap_chunk(g: np.ndarray, l: np.ndarray, a: np.ndarray, kn: _Knap) -> tuple[np.ndarray, np.ndarray]:
    """``u`` and ``v = g - u a`` of the water-level adversary on one chunk (``v`` in the
    simplified forms of :func:`_u_chunk`)."""
    pos = a > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(pos, np.clip((g - kn.lam) / np.where(pos, a, 1.0), 0.0, 1.0), 0.0)
    c = np.clip(kn.lam, -l, g)  # g - kappa a
    att = pos & (a > kn.mu)
    tie = pos & (a == kn.mu) & (kn.mu > 0)
    u = np.where(att, kappa, np.where(tie, kn.s * kappa, 0.0))
    v = np.where(att, c, np.where(tie, (1.0 - kn.s) * g + kn.s * c, g))
    return u, v


# ------------------------------------------------------------------------- public API


def certificate(
    gains: ArrayLike,
    m: float,
    b: int = 1,
    *,
    w: float | None = None,
    losses: ArrayLike | None = None,
    solution: Solution | ArrayLike | None = None,
    return_adversary: bool = False,
    rtol: float = 1e-9,
    method: str = "auto",
    backend: str = "auto",
    threads: int | None = None,
    chunk: int = CHUNK,
) -> Certificate:
    """Certify (or refute) the optimality of batch probabilities without an LP.

    Computes a lower bound — the probabilities ``q`` against the adversary's best response
    — and an upper bound — an equilibrium adversary ``c`` against the sampler's best
    response (DESIGN §1, "Certificate"). ``lower <= OPT_b <= upper`` always holds, so
    ``gap ~ 0`` *proves* ``q`` optimal, and a positive gap bounds how far from optimal it
    is (exactly, when the adversary is an equilibrium one, as constructed here). The
    constructions and their proofs are in ``docs/certificate.md``.

    Parameters
    ----------
    gains : array_like, shape (n,)
        Finite, non-negative gains (float32/float64 and memory maps are read in place).
    m : float
        The teacher's mistakes, ``0 <= m <= n``.
    b : int, default 1
        Batch size, ``0 <= b <= n`` (``b = 1`` is the paper's single draw).
    w : float, optional
        RAD loss weight (losses ``w * gains``); default ``1 - m/n``.
    losses : array_like, shape (n,), optional
        General losses instead of ``w * gains``.
    solution : Solution or array_like or None
        What to certify: ``None`` solves the game with :func:`rad.solve` and certifies that;
        a :class:`rad.Solution` (for this same instance) is certified as is; an array ``q``
        (``0 <= q <= 1``, ``sum q = b``) — e.g. another method's probabilities — gets its
        guaranteed value as ``lower`` and the game's value as ``upper``, so ``gap`` is its
        sub-optimality.
    return_adversary : bool, default False
        Also return the adversary ``c = 1 - u`` (``8 n`` bytes).
    rtol : float, default 1e-9
        Tolerance of :attr:`Certificate.optimal`.
    method : {"auto", "saddle", "search"}
        How the adversary is built. ``"saddle"``: completion of the solver's optimum
        (a few passes); ``"search"``: the independent water search, a convex 1-D
        minimisation that never looks at the solver's numbers (about 10–30 evaluations of
        2–6 passes each); ``"auto"``: the saddle completion, then the search only if a gap
        remains. With ``"search"`` and an array ``q`` the solver is not run at all.
    backend : {"auto", "cpp", "numba", "numpy"}
        Kernels for solving and for producing ``q``.
    threads : int, optional
        Threads for the compiled kernels and for the chunked passes (default: all cores
        for pools of at least ``2**22`` points, else one).
    chunk : int
        Points per streaming chunk.

    Returns
    -------
    Certificate

    Raises
    ------
    ValueError
        On invalid gains, losses, ``m``, ``b``, ``w``, ``method`` or ``rtol``; on a
        ``solution`` for another instance; on a ``q`` that is not in ``[0, 1]`` or does
        not sum to ``b``.
    TypeError
        On a non-integer ``b``, non-real ``m``, non-numeric arrays or a non-bool
        ``return_adversary``.

    Notes
    -----
    Time: ``O(n)`` — the solve (if any) plus a few streaming passes: two radix selections
    (the ``m`` largest ``q_i a_i``, the ``b`` largest ``g_i - u_i a_i``; usually two passes
    each, at most five) and one pass of sums for the saddle completion; the search, when
    it runs, adds 2–6 passes per evaluation. Chunks are processed on ``threads`` threads.
    Memory: ``O(chunk)`` float64 temporaries per thread (about ``12 * 8 * chunk`` bytes,
    200 MB at the default chunk), ``2**16``-bin
    histograms, at most ``2**20`` collected values per selection, plus 16 bytes per
    *tied* point on the adversary's level set that the sampler takes or skips surely
    (none or a handful on real data; all points only in degenerate pools such as all
    gains equal with ``b = n``), and ``8 n`` bytes for ``return_adversary``. Nothing of
    size ``n`` is allocated otherwise, so a read-only memory map of 1e9 points works.

    Floating point: both bounds are evaluated from the data in double precision; the
    sums are accurate to roughly ``1e-16 * n`` relative to the magnitudes in
    :attr:`Certificate.scale`, which is why the gap is judged relative to that scale
    (see ``docs/certificate.md``, "Floating point").

    Examples
    --------
    >>> import numpy as np
    >>> from rad.verify import certificate
    >>> g = np.random.default_rng(0).random(1000)
    >>> cert = certificate(g, m=300, b=10)
    >>> cert.optimal, cert.rel_gap < 1e-9
    (True, True)
    >>> top = np.zeros(1000); top[np.argsort(-g)[:10]] = 1.0  # margin's top-b
    >>> certificate(g, m=300, b=10, solution=top).gap > 1.0
    True
    """
    from rad._solve.batch import solve_game
    from rad._solve.game import resolve_game

    t0 = time.perf_counter()
    if not isinstance(return_adversary, (bool, np.bool_)):
        raise TypeError(f"return_adversary must be a bool, got {type(return_adversary).__name__}")
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not (0 <= rtol < math.inf):
        raise ValueError(f"rtol must be a finite number >= 0, got {rtol!r}")
    if method not in ("auto", "saddle", "search"):
        raise ValueError(f"method must be 'auto', 'saddle' or 'search', got {method!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    game = resolve_game(gains, m, b, w=w, losses=losses, backend=backend, threads=threads).with_values_checked()
    be, g, mf, bi, wf, lo_arr = game.backend, game.gains, game.m, game.b, game.w, game.losses
    n, nthreads, w_k = game.n, game.threads, game.kernel_w

    q_user: np.ndarray | None = None
    sol: Solution | None = None
    if isinstance(solution, Solution):
        _check_solution(solution, n, mf, bi, wf, lo_arr is not None)
        sol = solution
    elif solution is not None:
        q_user = _check_q(solution, n, bi)
    if sol is None and (q_user is None or method != "search"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NetHarmWarning)
            sol = solve_game(game)

    # Subnormal input: certify the game on exact power-of-two rescaled copies (the game
    # is scale-equivariant, q and c scale-invariant) and scale the bounds back.
    e = sol.scale_exponent if sol is not None else _scale_exponent(g, lo_arr, w_k)
    if e:
        if sol is not None and sol.gains is not None and sol.scale_exponent == e:
            g_s, l_s = sol.gains, sol.losses
        else:
            g_s = np.ldexp(np.asarray(g, dtype=np.float64), e)
            l_s = None if lo_arr is None else np.ldexp(np.asarray(lo_arr, dtype=np.float64), e)
        pool = _Pool(g_s, l_s, w_k, be, nthreads, int(chunk))
    else:
        pool = _Pool(g, lo_arr, w_k, be, nthreads, int(chunk))
    qstar = pool.q_from_params(sol.params) if sol is not None else None
    qcert = qstar if q_user is None else _q_from_array(q_user)

    # Lower bound: sum q g - (the m largest q a); the selection's first pass also sums q
    # and q g.
    qsum_parts: dict[int, float] = {}
    qg_parts: dict[int, float] = {}

    def qa_values(qsrc, record: bool):
        def values(lo: int, hi: int) -> np.ndarray:
            gg, _, a = pool.gla(lo, hi)
            q = qsrc(lo, hi)
            if record and lo not in qsum_parts:
                qsum_parts[lo] = _chunk_sum(q)
                qg_parts[lo] = _chunk_sum(q * gg)
            return q * a

        return values

    values = qa_values(qcert, True)
    top_cert = _select_top(values, pool.ranges, mf, pool.threads)
    for lo, hi in pool.ranges:  # m == 0 makes no selection pass
        if lo not in qsum_parts:
            values(lo, hi)
    qg = _fsum(list(qg_parts.values()))
    q_sum = _fsum(list(qsum_parts.values()))
    lower = qg - top_cert.total
    nu = math.nan
    if method != "search":
        top_star = top_cert if q_user is None else _select_top(qa_values(qstar, False), pool.ranges, mf, pool.threads)
        nu = top_star.threshold  # +inf when m == 0

    # Upper bound: the saddle completion of q* (tight, then wider rounding tolerances),
    # and the independent water search where that leaves a gap (or when asked for).
    scale0 = max(abs(qg), abs(top_cert.total))

    def closed(up: float) -> bool:
        return up - lower <= rtol * max(scale0, abs(up))

    candidates: list[tuple[float, float, str, Callable]] = []
    if bi == 0:  # the sampler takes nothing: every adversary gives 0
        candidates.append((0.0, mf, "none", _uniform_fn(mf / n)))
    else:
        if method != "search":
            band = _BAND * nu if math.isfinite(nu) else 0.0
            stats = _level_stats(pool, qstar, nu, band)
            lev = _solve_level(stats, mf, nu, band)
            fn = _saddle_fn(qstar, lev)
            up, us = _upper(pool, fn, bi)
            candidates.append((up, us, "saddle", fn))
        if method == "search" or (method == "auto" and not closed(min(c[0] for c in candidates))):
            hint = candidates[0][3].lam if candidates else None  # type: ignore[attr-defined]
            # Psi(lam) bounds Phi(u(lam)) from above: once it closes the gap to the lower
            # bound (half the tolerance), the search may stop early.
            target = lower + 0.5 * rtol * scale0 if method == "auto" else -math.inf
            kn = _water_search(pool, mf, bi, hint, target)
            fn = _knap_fn(kn)
            up, us = _upper(pool, fn, bi)
            candidates.append((up, us, "search", fn))
    upper, u_sum, how, fn = min(candidates, key=lambda c: c[0])

    adversary = None
    if return_adversary:
        adversary = np.empty(n, dtype=np.float64)
        for lo, hi in pool.ranges:
            gg, ll, a = pool.gla(lo, hi)
            adversary[lo:hi] = 1.0 - fn(gg, ll, a, lo, hi)[0]
    unscale = (lambda x: math.ldexp(x, -e)) if e else float  # noqa: E731
    lower_c, upper_c = unscale(lower), unscale(upper)
    scale = unscale(max(scale0, abs(upper)))
    gap = upper_c - lower_c
    feasible = abs(q_sum - bi) <= rtol * max(1.0, bi) and u_sum - mf <= rtol * max(1.0, mf)
    optimal = bool(feasible and math.isfinite(gap) and gap <= rtol * scale)
    return Certificate(
        lower=float(lower_c),
        upper=float(upper_c),
        gap=float(gap),
        scale=float(scale),
        rtol=float(rtol),
        optimal=optimal,
        value=float(sol.value) if (q_user is None and sol is not None) else math.nan,
        n=n,
        m=mf,
        b=bi,
        q_sum=float(q_sum),
        u_sum=float(u_sum),
        nu=unscale(nu) if math.isfinite(nu) else nu,
        lam=unscale(float(getattr(fn, "lam", math.nan))),
        adversary_method=how,
        backend=str(be.name),
        seconds=time.perf_counter() - t0,
        adversary=adversary,
    )


def _scale_exponent(g: np.ndarray, losses: np.ndarray | None, w: float) -> int:
    """0, or the power of two that makes ``1/a`` finite for subnormal input (as the
    solver does, ``rad._solve.batch.solve_game``)."""
    lo_min = math.inf
    for i in range(0, g.shape[0], CHUNK):
        gg = np.asarray(g[i : i + CHUNK], dtype=np.float64)
        a = gg + (np.asarray(losses[i : i + CHUNK], dtype=np.float64) if losses is not None else w * gg)
        pos = a[a > 0]
        if pos.shape[0]:
            lo_min = min(lo_min, float(pos.min()))
    if not math.isfinite(lo_min) or lo_min >= 2.0**-960:
        return 0
    return -990 - int(np.frexp(lo_min)[1])


def _uniform_fn(u0: float):
    def fn(g, l, a, lo, hi):
        return np.full(g.shape[0], u0), g.copy()

    fn.lam = math.nan  # type: ignore[attr-defined]
    return fn


def _saddle_fn(qstar, lev: _Level):
    def fn(g, l, a, lo, hi):
        return _u_chunk(g, l, a, qstar(lo, hi), lev)

    fn.lam = lev.lam  # type: ignore[attr-defined]
    return fn


def _knap_fn(kn: _Knap):
    def fn(g, l, a, lo, hi):
        return _knap_chunk(g, l, a, kn)

    fn.lam = kn.lam  # type: ignore[attr-defined]
    return fn


def _upper(pool: _Pool, fn, b: int) -> tuple[float, float]:
    """``Phi(u)`` (the ``b`` largest ``v = g - u a``) and ``sum u``, streamed; ``fn``
    gives ``(u, v)`` for a chunk."""
    u_parts: dict[int, float] = {}

    def values(lo: int, hi: int) -> np.ndarray:
        g, l, a = pool.gla(lo, hi)
        u, v = fn(g, l, a, lo, hi)
        if lo not in u_parts:
            u_parts[lo] = _chunk_sum(u)
        return v

    top = _select_top(values, pool.ranges, float(b), pool.threads)
    if len(u_parts) < len(pool.ranges):  # b == 0 made no pass
        for lo, hi in pool.ranges:
            values(lo, hi)
    return top.total, _fsum(list(u_parts.values()))


def _check_solution(sol: Solution, n: int, m: float, b: int, w: float, general: bool) -> None:
    if sol.n != n:
        raise ValueError(f"solution is for a pool of n={sol.n}, but gains has n={n}")
    if sol.b != b:
        raise ValueError(f"solution is for b={sol.b}, but b={b} was given")
    if sol.m != m:
        raise ValueError(f"solution is for m={sol.m!r}, but m={m!r} was given")
    if general != (sol.losses is not None):
        raise ValueError(
            "solution was solved with "
            + ("general losses" if sol.losses is not None else "RAD losses w * gains")
            + ", but the certificate was asked for "
            + ("general losses" if general else "RAD losses")
        )
    if not general and sol.w != w:
        raise ValueError(f"solution is for w={sol.w!r}, but w={w!r} is in effect")


def _check_q(q: ArrayLike, n: int, b: int) -> np.ndarray:
    arr = np.asarray(q)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"solution must be a Solution or a real array q, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"q must have shape ({n},) like gains, got {arr.shape}")
    arr = np.asarray(arr, dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(arr) & (arr >= 0.0) & (arr <= 1.0)))
    if bad.shape[0]:
        i = int(bad[0])
        raise ValueError(f"q must lie in [0, 1]; q[{i}] = {arr[i]!r}")
    total = float(np.sum(arr)) if n > 4096 else math.fsum(arr.tolist())
    if abs(total - b) > 1e-6 * max(1.0, b):
        raise ValueError(
            f"q must sum to b = {b} (a batch of b points); its sum is {total!r}, so its "
            "guaranteed value would not be a bound on the game"
        )
    return arr

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
data. The adversary is constructed as the *saddle completion* of an optimal ``q*`` (the
solver's): the mistakes that are a best response to ``q*`` and make ``q*`` a best response
in turn. The construction and the proof that it attains ``OPT_b`` whenever ``q*`` is optimal
are in ``docs/certificate.md``; in short, with ``nu`` the ``ceil(m)``-th largest
``q*_i a_i`` the points split into attacked (``q*_i a_i > nu``, ``u_i = 1``), spared
(``q*_i a_i < nu``, ``u_i = 0``) and the level set ``q*_i a_i = nu``, on which the
remaining mistakes are placed by a water level ``lam``: points the sampler takes
fractionally are pushed exactly to ``g_i - u_i a_i = lam``, points it takes surely stay at
or above ``lam``, points it skips at or below. One scalar equation fixes ``lam``.

Everything is computed in chunks of the pool (a few streaming passes; selections by a radix
select over the float bit patterns, O(n)), so memory stays bounded by the chunk size and
a 1e8–1e9 pool, also a read-only memory map, can be certified. The probabilities are
produced chunk by chunk by the same backend kernels as the solver (``materialize``).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad._solution import NetHarmWarning, Params, Solution

__all__ = ["Certificate", "certificate"]

#: Points per chunk of the streaming passes (about 16 MB per float64 temporary).
CHUNK = 1 << 21
#: A selection bucket at most this big is finished by collecting it (one more pass).
_COLLECT = 1 << 20
_DIGIT = 16
_NBINS = 1 << _DIGIT
_EPS = float(np.finfo(np.float64).eps)
#: (band, qtol) tried in order: the relative width of the level set ``q a = nu`` and the
#: distance from 0 or 1 below which a probability counts as 0 or 1. The first is the
#: rounding of ``q_i a_i = (nu / a_i) a_i``; the wider ones absorb a water level the
#: solver located only to its tolerance. Every attempt yields a *valid* upper bound; the
#: smallest one is kept (see ``docs/certificate.md``, "Floating point").
_ATTEMPTS: tuple[tuple[float, float], ...] = ((8 * _EPS, 0.0), (1e-9, 1e-9))


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
        ``q*_i a_i``) and the water level ``lam`` of the values ``g_i - u_i a_i``.
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
            out = self.backend.materialize(self.gains[lo:hi], lchunk, self.w, params, self.threads)
            return np.asarray(out, dtype=np.float64)

        return q


def _q_from_array(q: np.ndarray) -> Callable[[int, int], np.ndarray]:
    return lambda lo, hi: np.asarray(q[lo:hi], dtype=np.float64)


def _fsum(parts: list[float]) -> float:
    return math.fsum(parts)


def _chunk_sum(x: np.ndarray) -> float:
    return math.fsum(x.tolist()) if x.shape[0] <= 4096 else float(np.sum(x))


# -------------------------------------------------------------- selection (O(n) passes)

_SIGN = np.uint64(1 << 63)


def _keys(x: np.ndarray) -> np.ndarray:
    """Unsigned keys whose order is the order of the doubles ``x`` (no NaN)."""
    bits = (x + 0.0).view(np.uint64)  # + 0.0 folds -0.0 into 0.0
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


def _wselect(stream: Streamed, ranges: list[tuple[int, int]], k: float, n_extra: int) -> _Cut:
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
        cw = np.zeros(_NBINS)
        cn = np.zeros(_NBINS, dtype=np.int64)
        ce = [np.zeros(_NBINS) for _ in range(n_extra)]
        for lo, hi in ranges:
            x, w, e = full(lo, hi)
            key = _keys(x)
            sel = w > 0
            if shift + _DIGIT < 64:
                sel &= (key >> np.uint64(shift + _DIGIT)) == np.uint64(prefix)
            key, w = key[sel], w[sel]
            d = ((key >> np.uint64(shift)) & np.uint64(_NBINS - 1)).astype(np.intp)
            cn += np.bincount(d, minlength=_NBINS)
            cw += np.bincount(d, weights=w, minlength=_NBINS)
            for acc, q in zip(ce, e):
                acc += np.bincount(d, weights=q[sel], minlength=_NBINS)
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
    xs, ws, es = [], [], [[] for _ in range(n_extra)]
    for lo, hi in ranges:
        x, w, e = full(lo, hi)
        sel = (w > 0) & ((_keys(x) >> np.uint64(shift)) == np.uint64(prefix))
        xs.append(x[sel])
        ws.append(w[sel])
        for acc, q in zip(es, e):
            acc.append(q[sel])
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
    values: Callable[[int, int], np.ndarray], ranges: list[tuple[int, int]], k: float
) -> _Top:
    """Sum of the ``k`` largest streamed values, ``k`` real (the fractional part weights
    the ``ceil(k)``-th largest), and that threshold — :func:`_wselect` with unit weights."""
    if k <= 0:
        return _Top(0.0, math.inf, 0.0)

    def stream(lo: int, hi: int):
        x = values(lo, hi)
        return x, None, [x]

    cut = _wselect(stream, ranges, k, 1)
    total = float(cut.e_above[0]) + (k - cut.w_above) * cut.t
    return _Top(total, cut.t, cut.w_above)


# ---------------------------------------------------- the adversary: saddle completion


@dataclass(frozen=True)
class _Level:
    """The scalars that define the adversary ``u`` chunk by chunk (see :func:`_u_chunk`)."""

    nu: float
    band: float  # absolute half-width of the level set |q a - nu| <= band
    qtol: float
    lam: float
    t: float
    shrink: float  # final factor that keeps sum u <= m


def _classes(q: np.ndarray, qa: np.ndarray, nu: float, band: float, qtol: float):
    if math.isinf(nu):  # m == 0: nobody is attacked and the level set is empty
        hit = np.zeros(q.shape, dtype=bool)
        level = hit
    else:
        hit = qa > nu + band
        level = ~hit & (qa >= nu - band)
    one = q >= 1.0 - qtol
    zero = q <= qtol
    frac = ~(one | zero)
    return hit, level, one, zero, frac


@dataclass
class _Stats:
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

    def raise_min(self, x: np.ndarray) -> None:
        if x.shape[0]:
            self.lam_min = max(self.lam_min, float(np.max(x)))

    def lower_max(self, x: np.ndarray) -> None:
        if x.shape[0]:
            self.lam_max = min(self.lam_max, float(np.min(x)))


def _level_stats(pool: _Pool, qstar, nu: float, band: float, qtol: float) -> _Stats:
    """Pass B: the constraints on ``lam`` and the sums of the level equation."""
    s = _Stats()
    for lo, hi in pool.ranges:
        g, l, a = pool.gla(lo, hi)
        q = qstar(lo, hi)
        qa = q * a
        hit, level, one, zero, frac = _classes(q, qa, nu, band, qtol)
        s.hits += int(np.count_nonzero(hit))
        # Off the level set u is fixed (1 on hit, 0 on spared); the sampler's best response
        # needs v = g - u a >= lam where q = 1, <= lam where q = 0, == lam in between.
        off = ~level
        v = np.where(hit, -l, g)
        s.lower_max(v[off & (one | frac)])
        s.raise_min(v[off & (zero | frac)])
        pos = a > 0
        lv = level & pos
        fr = lv & frac
        s.raise_min(-l[fr])
        s.lower_max(g[fr])
        if np.any(fr):
            s.a_parts.append(_chunk_sum(g[fr] / a[fr]))
            s.b_parts.append(_chunk_sum(1.0 / a[fr]))
        to = lv & one
        s.lower_max(g[to])
        if np.any(to):
            s.to_g.append(g[to])
            s.to_a.append(a[to])
        tz = lv & zero
        s.raise_min(-l[tz])
        if np.any(tz):
            s.tz_g.append(g[tz])
            s.tz_a.append(a[tz])
        z = level & ~pos  # a == 0: the value is 0 whatever u is
        if np.any(z):
            s.free += int(np.count_nonzero(z))
            s.lower_max(np.zeros(int(np.count_nonzero(z & (one | frac)))))
            s.raise_min(np.zeros(int(np.count_nonzero(z & (zero | frac)))))
    return s


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


def _solve_level(s: _Stats, m: float, nu: float, band: float, qtol: float) -> _Level:
    """Choose ``lam`` and the level-set fraction ``t`` (``docs/certificate.md``, step 3).

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
    lam = _root(A, B, tz_g, tz_a, M, lo, hi)
    if math.isinf(lam) and lam < 0:
        # No lower constraint and S(-inf) <= M: any lam below every breakpoint acts like
        # -inf; keep -inf (the clip formulas handle it).
        pass
    s_lo = _linear(A, B, lam) + _clip_sum(tz_g, tz_a, lam)
    s_hi = _linear(A, B, lam) + _clip_sum(to_g, to_a, lam) + tz_g.shape[0] + s.free
    if s_hi > s_lo:
        t = min(max((M - s_lo) / (s_hi - s_lo), 0.0), 1.0)
    else:
        t = 0.0
    total = s.hits + s_lo + t * (s_hi - s_lo)
    shrink = 1.0 if total <= m else (m / total if total > 0 else 1.0)
    return _Level(nu=nu, band=band, qtol=qtol, lam=lam, t=t, shrink=shrink)


def _u_chunk(
    g: np.ndarray, l: np.ndarray, a: np.ndarray, q: np.ndarray, lev: _Level
) -> tuple[np.ndarray, np.ndarray]:
    """The adversary's mistakes ``u`` on one chunk and the values ``v = g - u a`` (pass C).

    ``v`` is evaluated in simplified form — ``clip((g - lam)/a, 0, 1) a = g - clip(lam, -l,
    g)`` — so that a point pushed to the water level has ``v = lam`` exactly instead of
    ``lam`` plus the rounding of ``g - u a`` (which is relative to ``g``, not to ``lam``).
    The bound is thus that of the exact adversary the scalars define; the float64 ``u``
    returned is its rounding.
    """
    qa = q * a
    hit, level, one, zero, frac = _classes(q, qa, lev.nu, lev.band, lev.qtol)
    pos = a > 0
    t = lev.t
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.clip((g - lev.lam) / np.where(pos, a, 1.0), 0.0, 1.0)
        c = np.clip(lev.lam, -l, g)  # g - r a, exactly
    lv = level & pos
    u = np.where(hit, 1.0, 0.0)
    v = np.where(hit, -l, g)
    sel = lv & frac
    u = np.where(sel, r, u)
    v = np.where(sel, c, v)
    sel = lv & one  # u = t r: v = (1 - t) g + t c
    u = np.where(sel, t * r, u)
    v = np.where(sel, (1.0 - t) * g + t * c, v)
    sel = lv & zero  # u = r + t (1 - r): v = c - t (c + l)
    u = np.where(sel, r + t * (1.0 - r), u)
    v = np.where(sel, (1.0 - t) * c - t * l, v)
    sel = level & ~pos  # a == 0: v = 0 whatever u is
    u = np.where(sel, t, u)
    if lev.shrink != 1.0:  # u -> s u: v -> g - s (g - v) = (1 - s) g + s v
        u = u * lev.shrink
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
    k_parts, ra_parts, oa_parts, lf_parts = [], [], [], []
    z_res, z_th, z_g = [], [], []  # points with kappa == 0 (outside the knapsack)
    for lo, hi in pool.ranges:
        g, l, a = pool.gla(lo, hi)
        kappa, res_a, ones_a, _, res_u, th_u, l_full, _, g_th = _knap_terms(g, l, a, lam)
        k_parts.append(_chunk_sum(kappa))
        ra_parts.append(_chunk_sum(res_a))
        oa_parts.append(_chunk_sum(ones_a))
        lf_parts.append(_chunk_sum(l_full))
        zero = kappa <= 0
        z_res.append(_chunk_sum(res_u[zero]))
        z_th.append(_chunk_sum(th_u[zero]))
        z_g.append(_chunk_sum(g_th[zero]))
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

    cut = _wselect(stream, pool.ranges, m, 9)
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


def _water_search(pool: _Pool, m: float, b: int, hint: float | None = None) -> _Knap:
    """Minimise the convex, piecewise-linear ``Psi`` over ``lam`` (cutting planes).

    Supporting lines at ``lo`` (slope < 0) and ``hi`` (slope > 0) meet at a point whose
    line value bounds ``min Psi`` from below; it is the next trial, alternating with a
    bisection whenever the bracket fails to halve. Stops when the best value found is
    within the rounding of ``Psi`` of that bound, or the bracket cannot shrink. The
    minimum lies in ``[min(-l), max(g)]`` (slopes ``b - n <= 0`` and ``b >= 0`` there).
    """
    lo_parts, hi_parts = [], []
    for lo, hi in pool.ranges:
        g, l, _ = pool.gla(lo, hi)
        lo_parts.append(float(np.min(-l)))
        hi_parts.append(float(np.max(g)))
    lo, hi = min(lo_parts), max(hi_parts)
    ev_lo = _psi(pool, lo, m, b)
    if ev_lo.slope >= 0:
        return ev_lo
    ev_hi = _psi(pool, hi, m, b)
    if ev_hi.slope <= 0:
        return ev_hi
    best = ev_lo if ev_lo.value <= ev_hi.value else ev_hi
    if hint is not None and lo < hint < hi:
        ev = _psi(pool, hint, m, b)
        best = ev if ev.value < best.value else best
        if ev.slope < 0:
            lo, ev_lo = hint, ev
        elif ev.slope > 0:
            hi, ev_hi = hint, ev
        else:
            return ev
    bisect_next = False
    for _ in range(_MAX_SEARCH):
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
        ev = _psi(pool, x, m, b)
        if ev.value < best.value:
            best = ev
        width = _key_width(lo, hi)
        if ev.slope < 0:
            lo, ev_lo = x, ev
        elif ev.slope > 0:
            hi, ev_hi = x, ev
        else:
            return ev
        bisect_next = not bisect_next and _key_width(lo, hi) > width // 2
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
    backend: str = "auto",
    threads: int | None = None,
    method: str = "auto",
    chunk: int = CHUNK,
) -> Certificate:
    """Certify (or refute) the optimality of batch probabilities without an LP.

    Computes a lower bound — the probabilities ``q`` against the adversary's best response
    — and an upper bound — an equilibrium adversary ``c`` against the sampler's best
    response (DESIGN §1, "Certificate"). ``lower <= OPT_b <= upper`` always holds, so
    ``gap ~ 0`` *proves* ``q`` optimal; a positive gap bounds how far from optimal it is.
    The adversary is the saddle completion of the solver's optimum, and the proof that it
    closes the gap is in ``docs/certificate.md``.

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
        guaranteed value as ``lower`` and the game's equilibrium bound as ``upper``, so
        ``gap`` is exactly its sub-optimality.
    return_adversary : bool, default False
        Also return the adversary ``c = 1 - u`` (``8 n`` bytes).
    rtol : float, default 1e-9
        Tolerance of :attr:`Certificate.optimal`.
    backend : {"auto", "cpp", "numba", "numpy"}
        Kernels for solving and for producing ``q``.
    threads : int, optional
        Threads for the compiled kernels.
    chunk : int
        Points per streaming chunk.

    Returns
    -------
    Certificate

    Raises
    ------
    ValueError
        On invalid gains, losses, ``m``, ``b`` or ``w``; on a ``solution`` for another
        instance; on a ``q`` that is not in ``[0, 1]`` or does not sum to ``b``.
    TypeError
        On a non-integer ``b``, non-real ``m`` or non-numeric arrays.

    Notes
    -----
    Time: ``O(n)`` — the solve (if any) plus roughly 5–15 streaming passes: two radix
    selections of at most five passes each (the ``m`` largest ``q_i a_i``, the ``b``
    largest ``g_i - u_i a_i``), one pass of sums, and a re-try with wider rounding
    tolerances only when the first adversary leaves a gap. Memory: ``O(chunk)`` float64
    temporaries (about ``10 * 8 * chunk`` bytes, 170 MB at the default), ``2**16``-bin
    histograms, at most ``2**20`` collected values per selection, plus 16 bytes per
    *tied* point on the adversary's level set that the sampler takes or skips surely
    (none or a handful on real data; all points only in degenerate pools such as all
    gains equal with ``b = n``) and ``8 n`` bytes for ``return_adversary``.

    Examples
    --------
    >>> import numpy as np
    >>> from rad.verify import certificate
    >>> g = np.random.default_rng(0).random(1000)
    >>> cert = certificate(g, m=300, b=10)
    >>> cert.optimal, cert.rel_gap < 1e-9
    (True, True)
    """
    from rad._api import _prepare, _threads
    from rad._solver import solve_game

    t0 = time.perf_counter()
    if isinstance(return_adversary, (bool, np.bool_)) is False:
        raise TypeError("return_adversary must be a bool")
    if not (isinstance(rtol, (int, float)) and rtol >= 0 and math.isfinite(rtol)):
        raise ValueError(f"rtol must be a finite number >= 0, got {rtol!r}")
    if method not in ("auto", "saddle", "search"):
        raise ValueError(f"method must be 'auto', 'saddle' or 'search', got {method!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    be, g, mf, bi, wf, lo_arr = _prepare(gains, m, b, w, losses, backend)
    nthreads = _threads(threads)
    n = g.shape[0]
    w_k = 0.0 if lo_arr is not None else wf
    pool = _Pool(g, lo_arr, w_k, be, nthreads, int(chunk))

    q_user: np.ndarray | None = None
    sol: Solution | None = None
    if solution is None:
        pass
    elif isinstance(solution, Solution):
        _check_solution(solution, n, mf, bi, wf, lo_arr is not None)
        sol = solution
    else:
        q_user = _check_q(solution, n, bi)
    if sol is None and (q_user is None or method != "search"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NetHarmWarning)
            sol = solve_game(g, lo_arr, wf, mf, bi, be, nthreads, "auto")
    qstar = pool.q_from_params(sol.params) if sol is not None else None
    qcert = qstar if q_user is None else _q_from_array(q_user)

    # Lower bound: sum q g - (the m largest q a); pass 1 also sums q and q g.
    qsum_parts: list[float] = []
    qg_parts: list[float] = []

    def qa_values(qsrc, record):
        seen: set[int] = set()

        def values(lo: int, hi: int) -> np.ndarray:
            gg, _, a = pool.gla(lo, hi)
            q = qsrc(lo, hi)
            if record and lo not in seen:
                seen.add(lo)
                qsum_parts.append(_chunk_sum(q))
                qg_parts.append(_chunk_sum(q * gg))
            return q * a

        return values

    top_cert = _select_top(qa_values(qcert, True), pool.ranges, mf)
    if not qsum_parts:  # m == 0: the selection made no pass
        for lo, hi in pool.ranges:
            gg, _, _ = pool.gla(lo, hi)
            q = qcert(lo, hi)
            qsum_parts.append(_chunk_sum(q))
            qg_parts.append(_chunk_sum(q * gg))
    qg = _fsum(qg_parts)
    q_sum = _fsum(qsum_parts)
    lower = qg - top_cert.total
    nu = math.nan
    if method != "search":
        top_star = top_cert if q_user is None else _select_top(qa_values(qstar, False), pool.ranges, mf)
        nu = top_star.threshold  # +inf when m == 0

    # Upper bound: the saddle completion of q* (cheap; tight, then wider rounding
    # tolerances), and where that leaves a gap the independent water search.
    scale0 = max(abs(qg), abs(top_cert.total))
    closed = lambda up: up - lower <= rtol * max(scale0, abs(up))  # noqa: E731
    candidates: list[tuple[float, float, str, Callable]] = []
    if bi == 0:
        zero_u = lambda g_, l_, a_, lo_, hi_: (np.full(g_.shape[0], mf / n), g_)  # noqa: E731
        candidates.append((0.0, mf, "none", zero_u))
    else:
        if method in ("auto", "saddle"):
            for rel_band, qtol in _ATTEMPTS:
                band = rel_band * nu if math.isfinite(nu) else 0.0
                stats = _level_stats(pool, qstar, nu, band, qtol)
                lev = _solve_level(stats, mf, nu, band, qtol)
                fn = _saddle_fn(qstar, lev)
                up, us = _upper(pool, fn, bi)
                candidates.append((up, us, "saddle", fn))
                if closed(up):
                    break
        if method == "search" or (method == "auto" and not closed(min(c[0] for c in candidates))):
            hint = candidates[0][3].lam if candidates else None  # type: ignore[attr-defined]
            kn = _water_search(pool, mf, bi, hint)
            fn = _knap_fn(kn)
            up, us = _upper(pool, fn, bi)
            candidates.append((up, us, "search", fn))
    upper, u_sum, how, fn = min(candidates, key=lambda c: c[0])
    lam = float(getattr(fn, "lam", math.nan))

    adversary = None
    if return_adversary:
        adversary = np.empty(n, dtype=np.float64)
        for lo, hi in pool.ranges:
            gg, l, a = pool.gla(lo, hi)
            adversary[lo:hi] = 1.0 - fn(gg, l, a, lo, hi)[0]
    scale = max(scale0, abs(upper))
    gap = upper - lower
    feasible = abs(q_sum - bi) <= rtol * max(1.0, bi) and u_sum - mf <= rtol * max(1.0, mf)
    optimal = bool(feasible and gap <= rtol * scale)
    return Certificate(
        lower=float(lower),
        upper=float(upper),
        gap=float(gap),
        scale=float(scale),
        rtol=float(rtol),
        optimal=optimal,
        value=float(sol.value) if q_user is None and sol is not None else math.nan,
        n=n,
        m=mf,
        b=bi,
        q_sum=float(q_sum),
        u_sum=float(u_sum),
        nu=float(nu),
        lam=lam,
        adversary_method=how,
        backend=str(be.name),
        seconds=time.perf_counter() - t0,
        adversary=adversary,
    )


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

    top = _select_top(values, pool.ranges, float(b))
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

"""The adversary's side of the certificate: a feasible ``u`` whose ``Phi(u)`` bounds ``OPT_b``.

``Phi(u) = max_q P(q, u)`` -- the sum of the ``b`` largest ``g_i - u_i a_i`` -- is an upper
bound on the game value for every feasible adversary ``u`` (``0 <= u <= 1``, ``sum u <= m``;
``u = 1 - c`` are the teacher's mistakes). Two constructions, both proved in
``docs/certificate.md``:

* :func:`saddle_completion` -- the completion of the solver's optimum ``q*`` (a few
  passes): with ``nu`` the ``ceil(m)``-th largest ``q*_i a_i`` the points split into hit
  (``u_i = 1``), spared (``u_i = 0``) and the level set ``q*_i a_i = nu``, on which the
  remaining mistakes are placed by a water level ``lam`` so that ``q*`` is in turn a best
  response. Zero gap whenever ``q*`` is exactly optimal.
* :func:`water_search` -- independent of the solver: ``min_u Phi(u) = min_lam Psi(lam)``
  with ``Psi(lam) = b lam + min_u sum_i (g_i - lam - a_i u_i)^+``, a convex 1-D function
  whose inner problem is a fractional knapsack (one :func:`~rad.verify.selection.weighted_select`);
  cutting planes find its minimum, and the knapsack's ``u`` at any ``lam`` is a valid
  adversary with ``Phi(u) <= Psi(lam)``.

An adversary is a callable ``adversary(g, l, a, lo, hi) -> (u, v)`` on one chunk, with
``v = g - u a`` in a simplified form exact at the water level, and its water level
``adversary.lam``; :func:`upper_bound` streams ``Phi(u)`` and ``sum u`` from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from rad.verify.chunked import ChunkedPool, ChunkFn, chunk_sum, parallel_map
from rad.verify.selection import bit_distance, bit_midpoint, select_top, weighted_select

__all__ = [
    "Adversary",
    "BAND",
    "Knapsack",
    "SaddleAdversary",
    "SaddleLevel",
    "UniformAdversary",
    "UpperBound",
    "WaterAdversary",
    "feasible_upper",
    "saddle_completion",
    "upper_bound",
    "water_search",
]

_EPS = float(np.finfo(np.float64).eps)
#: Relative half-width of the level set ``q_i a_i = nu`` in the saddle completion: the
#: rounding of ``q_i a_i = (nu / a_i) a_i`` (docs/certificate.md, §2).
BAND = 8 * _EPS
#: Evaluations of ``Psi`` the water search may spend (each is 2–6 streaming passes).
_MAX_SEARCH = 200


class Adversary(Protocol):
    """A feasible adversary ``u``, chunk by chunk."""

    @property
    def lam(self) -> float:
        """The water level of the values ``g_i - u_i a_i`` (``nan`` if there is none)."""
        ...

    def __call__(
        self, g: np.ndarray, l: np.ndarray, a: np.ndarray, lo: int, hi: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(u, v = g - u a)`` on the chunk ``[lo, hi)`` whose ``g, l, a`` are given."""
        ...


@dataclass(frozen=True)
class UpperBound:
    """What one pass of :func:`upper_bound` measured of an adversary ``u``."""

    phi: float  # Phi(u): the b largest v = g - u a
    ones: int  # how many u_i are exactly 1
    frac_sum: float  # sum u over u < 1 (0 and 1 are exact: the rounding is the others')
    ua_sum: float  # sum u a
    level: float  # the b-th largest v (+inf when b == 0)

    @property
    def u_sum(self) -> float:
        """``sum u`` (at most ``m`` for a feasible ``u``)."""
        return math.fsum([float(self.ones), self.frac_sum])


def upper_bound(pool: ChunkedPool, adversary: Adversary, b: int) -> UpperBound:
    """``Phi(u)`` (the ``b`` largest ``v = g - u a``) and the sums :func:`feasible_upper` needs, streamed.

    Parameters
    ----------
    pool : ChunkedPool
        The game, in chunks.
    adversary : Adversary
        ``(u, v)`` per chunk.
    b : int
        The batch size.

    Returns
    -------
    UpperBound
        ``Phi(u)`` is an upper bound on ``OPT_b`` when ``u`` is feasible; where rounding
        may leave ``sum u`` above ``m``, :func:`feasible_upper` makes it one.
    """
    parts: dict[int, tuple[int, float, float]] = {}

    def values(lo: int, hi: int) -> np.ndarray:
        g, l, a = pool.gla(lo, hi)
        u, v = adversary(g, l, a, lo, hi)
        if lo not in parts:
            whole = u >= 1.0
            parts[lo] = (int(np.count_nonzero(whole)), chunk_sum(np.where(whole, 0.0, u)), chunk_sum(u * a))
        return v

    top = select_top(values, pool.ranges, float(b), pool.threads)
    if len(parts) < len(pool.ranges):  # b == 0 made no pass
        for lo, hi in pool.ranges:
            values(lo, hi)
    got = list(parts.values())
    return UpperBound(top.total, sum(p[0] for p in got), math.fsum(p[1] for p in got), math.fsum(p[2] for p in got),
                      float(top.threshold))


def feasible_upper(pool: ChunkedPool, adversary: Adversary, bound: UpperBound, b: int, m: float,
                   negligible: float) -> float:
    """``Phi(u)``, made a bound on ``OPT_b`` also where ``u`` may spend more than ``m``.

    ``u`` is feasible only if its exact sum ``S`` is at most ``m``. The computed ``sum u``
    can round to ``m`` while ``S`` exceeds it by ``1e-16``, and on a point of huge ``a_i``
    that excess is worth far more than rounding: ``Phi(u)`` fell below ``OPT_b``
    (docs/certificate.md §5). ``S`` is bounded by ``S_hi``: the ``u_i = 1`` counted
    exactly, the others summed, each within ``4 eps`` and their sums within their rounding.
    Where ``S_hi > m``, the excess ``E = S_hi - m`` is taken back from ``u`` (a smaller
    ``u`` is still an adversary); taking ``delta`` from point ``i`` raises its value
    ``v_i = g_i - u_i a_i`` by ``delta a_i``, and ``Phi`` by at most that:

    * from points whose value stays below the ``b``-th largest (``level``), for nothing:
      if they can give up ``E``, ``Phi(u)`` stands;
    * else from the point of least ``a_i`` that holds ``E``: ``Phi(u) + E a_i``;
    * else (no point holds ``E``) by scaling, ``(m/S) u``: ``Phi(u) + (1 - m/S) sum u a``
      (``1 - m/S <= E / (m + E)``).

    The last bound needs no pass and is used where it is below ``negligible`` (the
    certificate passes a quarter of ``rtol * scale`` on pools above 2**20 points, else 0);
    else one pass measures the first two.
    """
    chunk_len = max((hi - lo for lo, hi in pool.ranges), default=1)
    # chunk sums: exactly rounded up to 4,096 points (then eps/2 each, and the total's
    # fsum eps/2), else pairwise; each u_i: at most four roundings from the exact value
    # the scalars define (a difference, a quotient, t (1 - r), the shrink), 2 eps
    sum_error = (40.0 + math.log2(max(chunk_len, 2))) * _EPS if chunk_len > 4096 else (len(pool.ranges) + 1) * _EPS / 2
    gamma = 4 * _EPS + sum_error
    # S_hi - m without cancelling to 0: fsum is exactly rounded, so its sign is the sign's
    excess = math.fsum([float(bound.ones), -m, bound.frac_sum * (1.0 + gamma)])
    if not excess > 0.0:
        return bound.phi
    excess = math.nextafter(excess, math.inf)
    if m == 0.0:
        return math.inf  # (no mistakes to spend: u should be 0; not a bound otherwise)
    # >= 1 - m/S = (S - m)/S, which grows with S <= m + excess; rounding included (an
    # adversary far over m, as the saddle's can be for m ~ 1e-38, scales by ~1, not E/m)
    f = excess / (m + excess) * (1.0 + 4 * _EPS)
    widen = f * bound.ua_sum * (1.0 + gamma)
    if widen == 0.0:
        return bound.phi
    if widen > negligible and b > 0:
        level = bound.level

        def spare(lo: int, hi: int) -> tuple[float, float]:
            """What points below the level can give up, and the least ``a`` of a point holding ``E``."""
            g, l, a = pool.gla(lo, hi)
            u, v = adversary(g, l, a, lo, hi)
            below = level - 1e-9 * (np.abs(v) + abs(level))  # v's own rounding, generously
            with np.errstate(divide="ignore", invalid="ignore"):
                room = np.where(a > 0, (below - v) / a, np.inf)
            free = chunk_sum(np.clip(room * (1.0 - 4 * _EPS), 0.0, u * (1.0 - 4 * _EPS)))
            holds = u * (1.0 - 4 * _EPS) >= excess
            return free, float(np.min(a, where=holds, initial=math.inf))

        got = parallel_map(spare, pool.ranges, pool.threads)
        if math.fsum(x[0] for x in got) * (1.0 - gamma) >= excess:
            return bound.phi
        widen = min(widen, excess * min(x[1] for x in got) * (1.0 + 4 * _EPS))
    return math.nextafter(bound.phi + widen, math.inf)


@dataclass(frozen=True)
class UniformAdversary:
    """``u_i = u0`` everywhere (``v = g``): the adversary when the sampler takes nothing."""

    u0: float
    lam: float = math.nan

    def __call__(
        self, g: np.ndarray, l: np.ndarray, a: np.ndarray, lo: int, hi: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(u, v)`` on one chunk."""
        return np.full(g.shape[0], self.u0), g.copy()


# ---------------------------------------------------- the adversary: saddle completion


@dataclass(frozen=True)
class SaddleLevel:
    """The scalars that define the adversary ``u`` chunk by chunk (see :func:`_saddle_chunk`)."""

    nu: float
    band: float  # absolute half-width of the level set |q a - nu| <= band
    lam: float
    t: float
    shrink: float  # final factor that keeps sum u <= m


def _classes(q: np.ndarray, qa: np.ndarray, nu: float, band: float) -> tuple[np.ndarray, ...]:
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
class _LevelStats:
    """What the saddle completion needs from one pass (mergeable across chunks)."""

    hits: int = 0
    lam_min: float = -math.inf
    lam_max: float = math.inf
    a_parts: list[float] = field(default_factory=list)  # sum g/a over fractional level points
    b_parts: list[float] = field(default_factory=list)  # sum 1/a over fractional level points
    free: int = 0  # level points with a == 0 (u free, value 0)
    tz_g: list[np.ndarray] = field(default_factory=list)  # level points the sampler skips (q = 0)
    tz_a: list[np.ndarray] = field(default_factory=list)
    to_g: list[np.ndarray] = field(default_factory=list)  # level points the sampler takes (q = 1)
    to_a: list[np.ndarray] = field(default_factory=list)

    def merge(self, o: _LevelStats) -> None:
        """Add another chunk's statistics to these."""
        self.hits += o.hits
        self.lam_min = max(self.lam_min, o.lam_min)
        self.lam_max = min(self.lam_max, o.lam_max)
        self.free += o.free
        for name in ("a_parts", "b_parts", "tz_g", "tz_a", "to_g", "to_a"):
            getattr(self, name).extend(getattr(o, name))


def _level_stats(pool: ChunkedPool, qstar: ChunkFn, nu: float, band: float) -> _LevelStats:
    """One pass: the constraints on ``lam`` and the sums of the level equation."""

    def lo_max(x: np.ndarray, where: np.ndarray) -> float:
        return float(np.min(x, where=where, initial=math.inf))

    def hi_min(x: np.ndarray, where: np.ndarray) -> float:
        return float(np.max(x, where=where, initial=-math.inf))

    def one_chunk(lo: int, hi: int) -> _LevelStats:
        s = _LevelStats()
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

    total = _LevelStats()
    for part in parallel_map(one_chunk, pool.ranges, pool.threads):
        total.merge(part)
    return total


def _clip_sum(g: np.ndarray, a: np.ndarray, lam: float) -> float:
    """``sum clip((g - lam) / a, 0, 1)`` (``a > 0``; ``lam`` may be infinite)."""
    if g.shape[0] == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.clip((g - lam) / a, 0.0, 1.0)
    return chunk_sum(r)


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
    return chunk_sum(1.0 / a[inside])


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
    values: np.ndarray = full + lin_ga - lams * lin_ia
    return values


def _solve_level(s: _LevelStats, m: float, nu: float, band: float) -> SaddleLevel:
    """Choose the water level ``lam`` and the level-set share ``t`` (``docs/certificate.md``, §2).

    The choice is the left end of the feasible interval
    ``[max(lam_min, r_lo), min(lam_max, r_hi)]``.

    Best effort: when rounding makes the constraints inconsistent, the nearest choice is
    taken; the resulting ``u`` is still feasible, so its bound is still valid.
    """
    A, B = math.fsum(s.a_parts), math.fsum(s.b_parts)
    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0)

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
    return SaddleLevel(nu=nu, band=band, lam=lam, t=t, shrink=shrink)


def _saddle_chunk(
    g: np.ndarray, l: np.ndarray, a: np.ndarray, q: np.ndarray, lev: SaddleLevel
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


@dataclass(frozen=True)
class SaddleAdversary:
    """The saddle completion of the solver's probabilities ``q`` (:func:`saddle_completion`)."""

    q: ChunkFn
    level: SaddleLevel

    @property
    def lam(self) -> float:
        """The water level of the values ``g_i - u_i a_i``."""
        return self.level.lam

    def __call__(
        self, g: np.ndarray, l: np.ndarray, a: np.ndarray, lo: int, hi: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(u, v)`` on one chunk."""
        return _saddle_chunk(g, l, a, self.q(lo, hi), self.level)


def saddle_completion(pool: ChunkedPool, qstar: ChunkFn, m: float, nu: float) -> SaddleAdversary:
    """The adversary that makes the solver's optimum ``qstar`` a saddle point (one pass).

    ``nu`` is the ``ceil(m)``-th largest ``q*_i a_i`` (``+inf`` when ``m = 0``); the level
    set ``|q*_i a_i - nu| <= BAND nu`` absorbs the rounding of ``q*_i a_i``.

    Parameters
    ----------
    pool : ChunkedPool
        The game, in chunks.
    qstar : ChunkFn
        The solver's probabilities, per chunk.
    m : float
        The teacher's mistakes.
    nu : float
        The attack level (see above).

    Returns
    -------
    SaddleAdversary
        Feasible (``sum u <= m``) even when rounding makes the level equation inconsistent.
    """
    band = BAND * nu if math.isfinite(nu) else 0.0
    stats = _level_stats(pool, qstar, nu, band)
    return SaddleAdversary(qstar, _solve_level(stats, m, nu, band))


# ------------------------------------------- the adversary: an independent water search


@dataclass(frozen=True)
class Knapsack:
    """The adversary of the water level ``lam``, with ``Psi(lam)`` and a supporting line.

    ``u_i = kappa_i = clip((g_i - lam)/a_i, 0, 1)`` where ``a_i > mu``, ``s * kappa_i``
    where ``a_i == mu > 0``, 0 elsewhere: the fractional knapsack that spends at most
    ``m`` mistakes where each unit removes the most (largest ``a_i``)
    (``docs/certificate.md``, "Independent search").
    """

    lam: float
    mu: float
    s: float
    value: float  # Psi(lam) = b lam + sum_i (g_i - lam - a_i u_i)^+
    slope: float  # a subgradient of Psi at lam
    intercept: float  # of the supporting line: Psi(x) >= intercept + slope x for all x
    mag: float  # |b lam| + sum of the residuals: the scale of Psi's rounding


def _knapsack_terms(g: np.ndarray, l: np.ndarray, a: np.ndarray, lam: float) -> tuple[np.ndarray, ...]:
    """Per-point terms of ``Psi(lam)`` and of its supporting line.

    ``kappa``, the residual and sampler weight if attacked (``A``) or spared (``U``), and
    ``1/a`` on the attacked points' linear piece.
    """
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


def _psi(pool: ChunkedPool, lam: float, m: float, b: int) -> Knapsack:
    """``Psi(lam)`` with its knapsack adversary and a subgradient (2–6 streaming passes).

    Subgradient: ``b - sum theta_i`` with the sampler weights ``theta`` that satisfy the
    KKT conditions of the knapsack (``theta_i a_i = mu`` where ``0 < u_i < 1``, 1 where the
    residual is positive, 0 where it is negative) — proof in ``docs/certificate.md``.
    """

    def sums(lo: int, hi: int) -> list[float]:
        g, l, a = pool.gla(lo, hi)
        kappa, res_a, ones_a, _, res_u, th_u, l_full, _, g_th = _knapsack_terms(g, l, a, lam)
        zero = kappa <= 0  # points outside the knapsack
        return [
            chunk_sum(kappa), chunk_sum(res_a), chunk_sum(ones_a), chunk_sum(l_full),
            chunk_sum(res_u[zero]), chunk_sum(th_u[zero]), chunk_sum(g_th[zero]),
        ]

    cols = list(zip(*parallel_map(sums, pool.ranges, pool.threads)))
    k_parts, ra_parts, oa_parts, lf_parts, z_res, z_th, z_g = (list(c) for c in cols)
    total_kappa = math.fsum(k_parts)
    if total_kappa <= m:  # every unit of reduction is affordable: mu = 0, u = kappa
        res = math.fsum(ra_parts)
        # On this piece Psi = b lam + sum over full points of (-l - lam) (+ a == 0 points,
        # whose g is 0): intercept -sum l.
        icpt = -math.fsum(lf_parts) + math.fsum(z_g)
        return Knapsack(lam, 0.0, 1.0, b * lam + res, b - math.fsum(oa_parts), icpt, abs(b * lam) + res)

    def stream(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        g, l, a = pool.gla(lo, hi)
        kappa, res_a, ones_a, inv_lin, res_u, th_u, l_full, ga_lin, g_th = _knapsack_terms(g, l, a, lam)
        return a, kappa, [res_a, ones_a, inv_lin, res_u, th_u, a * kappa, l_full, ga_lin, g_th]

    cut = weighted_select(stream, pool.ranges, m, 9, pool.threads)
    mu = cut.t
    ea, et, eb = cut.e_above, cut.e_at, cut.e_below
    s = min(max((m - cut.w_above) / cut.w_at, 0.0), 1.0) if cut.w_at > 0 else 0.0
    res = math.fsum(
        [ea[0], eb[3], math.fsum(z_res), et[3] - s * et[5]]
    )  # attacked, spared, outside, tied
    theta = math.fsum([ea[1], mu * ea[2], eb[4], math.fsum(z_th), et[4]])
    # The supporting line's intercept, summed point by point so that it carries no
    # cancellation between Psi and slope * lam (docs/certificate.md):
    # -sum_full l + mu (#full + sum_lin g/a) + sum_spared g + sum_tied g - mu m.
    icpt = math.fsum(
        [-ea[6], mu * ea[1], mu * ea[7], eb[8], math.fsum(z_g), et[8], -mu * m]
    )
    return Knapsack(lam, mu, s, b * lam + res, b - theta, icpt, abs(b * lam) + res)


def _rounding(ev: Knapsack) -> float:
    """A bound on the rounding of ``Psi`` at ``ev``'s level (its sums' magnitudes)."""
    return 64 * _EPS * max(ev.mag, abs(ev.intercept), abs(ev.slope * ev.lam))


def _trusted(ev: Knapsack) -> bool:
    """``Psi`` at ``ev`` is its value to within ``1e-6`` of it, not mostly rounding."""
    r = _rounding(ev)
    return r == 0 or r <= 1e-6 * abs(ev.value)


def water_search(
    pool: ChunkedPool, m: float, b: int, hint: float | None = None, target: float = -math.inf
) -> Knapsack:
    """Minimise the convex, piecewise-linear ``Psi`` over ``lam`` (cutting planes).

    Supporting lines at ``lo`` (slope < 0) and ``hi`` (slope > 0) meet at a point whose
    line value bounds ``min Psi`` from below; it is the next trial, alternating with a
    bisection whenever the bracket fails to halve. Stops when the best value found is
    within the rounding of ``Psi`` of that bound, or at most ``target`` (good enough for
    the caller), or when the bracket cannot shrink. The minimum lies in
    ``[min(-l), max(g)]`` (slopes ``b - n <= 0`` and ``b >= 0`` there). With a ``hint``
    (the saddle completion's water level) the bracket is first sought around it, by steps
    growing 32-fold from ``1e-9`` relative.

    Parameters
    ----------
    pool : ChunkedPool
        The game, in chunks.
    m : float
        The teacher's mistakes.
    b : int
        The batch size, ``>= 1``.
    hint : float, optional
        Where to start looking.
    target : float, default -inf
        Stop as soon as ``Psi`` is at most this.

    Returns
    -------
    Knapsack
        The best water level found; :class:`WaterAdversary` turns it into ``u``.
    """
    lo_parts, hi_parts = [], []
    for c0, c1 in pool.ranges:
        g, l, _ = pool.gla(c0, c1)
        lo_parts.append(float(np.min(-l)))
        hi_parts.append(float(np.max(g)))
    g_lo, g_hi = min(lo_parts), max(hi_parts)
    best: Knapsack | None = None

    def psi(x: float) -> Knapsack:
        nonlocal best
        ev = _psi(pool, x, m, b)
        # The best by its value's upper end: a level whose Psi is mostly rounding (Psi
        # summed at magnitudes far above its value) is not taken on its face.
        if best is None or ev.value + _rounding(ev) < best.value + _rounding(best):
            best = ev
        return ev

    def done(ev: Knapsack) -> bool:
        """Psi at most the target, or a zero slope (the minimum), with a value to trust."""
        return (ev.slope == 0 or ev.value <= target) and _trusted(ev)

    ev_lo: Knapsack | None = None
    ev_hi: Knapsack | None = None
    if hint is not None and math.isfinite(hint) and g_lo < hint < g_hi:
        ev = psi(hint)
        if done(ev):
            return ev
        side = 1.0 if ev.slope < 0 else -1.0
        near = ev
        step = 1e-9 * max(abs(hint), 1e-9 * (g_hi - g_lo))
        while ev_lo is None:
            x = min(max(hint + side * step, g_lo), g_hi)
            far = psi(x)
            if far.value <= target and _trusted(far):
                return far
            if side * far.slope >= 0 or x in (g_lo, g_hi):
                ev_lo, ev_hi = (near, far) if side > 0 else (far, near)
            else:
                near, step = far, 32.0 * step
        assert ev_hi is not None
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
    assert ev_lo is not None and ev_hi is not None
    bisect_next = False
    bisect_only = False
    for _ in range(_MAX_SEARCH):
        assert best is not None
        if best.value <= target and _trusted(best):
            break
        s_lo, s_hi = ev_lo.slope, ev_hi.slope
        x = bit_midpoint(lo, hi)
        if not bisect_only and s_lo < s_hi:
            # The supporting lines c + s x meet at x; no Psi on [lo, hi] is below them there.
            x = (ev_hi.intercept - ev_lo.intercept) / (s_lo - s_hi)
            xc = min(max(x, lo), hi)
            bound = max(ev_lo.intercept + s_lo * xc, ev_hi.intercept + s_hi * xc)
        else:  # halving only (a flat end of the bracket has no plane to meet)
            bound = -math.inf
            bisect_only = True
        tol = _rounding(best)
        if not bisect_only and best.value - bound <= tol:
            if not math.isfinite(target):
                break
            # Within the rounding of Psi at the levels tried, but above the target: that
            # rounding grows with lam, and the minimum may lie where Psi is far smaller
            # (gains 1 and 1e16: the planes stopped at lam ~ -1e15 with Psi 0.14 above its
            # minimum, at lam ~ 0.8). Halve the bracket by the slopes' signs (at most 64
            # halvings) until the target is met or the bracket cannot shrink.
            bisect_only = True
        if bisect_only or bisect_next or not (lo < x < hi):
            x = bit_midpoint(lo, hi)
        if not (lo < x < hi):
            break
        ev = psi(x)
        width = bit_distance(lo, hi)
        if ev.slope < 0:
            lo, ev_lo = x, ev
        elif ev.slope > 0:
            hi, ev_hi = x, ev
        elif _trusted(ev):
            return ev
        else:
            # Numerically flat where Psi is mostly rounding: its true slope is below the
            # slope's own rounding (1 and 1e16 among the gains: -1e-16 over 8e15 of lam, a
            # fall of 0.83). Go on toward lam = 0, where Psi is summed at smaller magnitudes.
            if x < 0:
                lo, ev_lo = x, ev
            else:
                hi, ev_hi = x, ev
            bisect_only = True
        bisect_next = not bisect_next and bit_distance(lo, hi) > width // 2
    assert best is not None
    return best

def _knapsack_chunk(g: np.ndarray, l: np.ndarray, a: np.ndarray, kn: Knapsack) -> tuple[np.ndarray, np.ndarray]:
    """``u`` and ``v = g - u a`` of the water-level adversary on one chunk.

    ``v`` is evaluated in the simplified forms of :func:`_saddle_chunk`.
    """
    pos = a > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(pos, np.clip((g - kn.lam) / np.where(pos, a, 1.0), 0.0, 1.0), 0.0)
    c = np.clip(kn.lam, -l, g)  # g - kappa a
    att = pos & (a > kn.mu)
    tie = pos & (a == kn.mu) & (kn.mu > 0)
    u = np.where(att, kappa, np.where(tie, kn.s * kappa, 0.0))
    v = np.where(att, c, np.where(tie, (1.0 - kn.s) * g + kn.s * c, g))
    return u, v


@dataclass(frozen=True)
class WaterAdversary:
    """The knapsack adversary of the water level found by :func:`water_search`."""

    knapsack: Knapsack

    @property
    def lam(self) -> float:
        """The water level ``lam`` of the search."""
        return self.knapsack.lam

    def __call__(
        self, g: np.ndarray, l: np.ndarray, a: np.ndarray, lo: int, hi: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(u, v)`` on one chunk."""
        return _knapsack_chunk(g, l, a, self.knapsack)

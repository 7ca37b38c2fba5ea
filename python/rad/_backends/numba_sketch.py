"""The Numba backend's DepRound from the support pass's sketch (``docs/design.md`` §3, "The DepRound sketch").

The algorithm of ``cpp/include/rad/sketch.hpp``, compiled: a block of the uncapped path
(``q = nu / a`` on ``g >= tau``) with less than one unit of mass is rounded from bounds
on its exact units prefixes, reading only the 512-point part its pick lies in; the
leftovers are merged with their masses as intervals. A block the bounds cannot decide is
rounded exactly (with its group of blocks), and a merge they cannot decide is redone on
exact masses: the indices are always those of :func:`rad._backends.numba_backend.depround_params`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numba as nb
import numpy as np

from rad._backends.canonical import BLOCK, MERGE_GROUP, ONE
from rad._backends.contract import SKETCH_PARTS as _CONTRACT_PARTS
from rad._backends.contract import RoundSketch
from rad._backends.numba_backend import (
    _depround_params,
    _jit,
    _loss,
    _losses_arg,
    _pjit,
    _probability,
    _splitmix,
    _uniform,
    _units,
)
from rad._backends.params import Params
from rad._backends.rng import MERGE_STREAM, stream_state

__all__ = ["applies", "depround"]

# Written out here: numba's on-disk cache follows this file, not contract.py.
SKETCH_PARTS = 128
assert SKETCH_PARTS == _CONTRACT_PARTS, "numba_sketch.SKETCH_PARTS must equal contract.SKETCH_PARTS"
_SPAN = BLOCK // SKETCH_PARTS
_SCALE = float(ONE)
_CAP = 2.0**62


def applies(n: int, params: Params, sketch: RoundSketch) -> bool:
    """Whether ``sketch`` serves these params (:meth:`RoundSketch.serves`)."""
    return sketch.serves(n, params)


@_jit
def _bounds(row, nu, slack_bits, ul, uh):
    """``sketch_bounds`` of sketch.hpp: bounds of the exact units prefixes U(0..SKETCH_PARTS) of a block.

    False when the row is unusable (a short block's -1s, or a sum too large).
    """
    widen = 2.0**slack_bits
    rel = 2.0**-36 * widen
    scale = nu * _SCALE
    ul[0] = 0
    uh[0] = 0
    for k in range(1, SKETCH_PARTS + 1):
        p = row[k - 1]
        if not (p >= 0.0) or not (p <= _CAP):
            return False
        if p == 0.0:  # no support point so far
            ul[k] = 0
            uh[k] = 0
            continue
        x = scale * p
        slack = (0.51 * (k * _SPAN) + 2.0) * widen
        lo = x - x * rel - slack
        hi = x + x * rel + slack
        if not (hi < _CAP):
            return False
        ul[k] = np.int64(np.floor(lo)) if lo > 0 else 0
        uh[k] = np.int64(np.ceil(hi))
    for k in range(1, SKETCH_PARTS + 1):
        ul[k] = max(ul[k], ul[k - 1])
    for k in range(SKETCH_PARTS - 1, -1, -1):
        uh[k] = min(uh[k], uh[k + 1])
    return True


@_jit
def _total(row, nu, slack_bits):
    """``sketch_total`` of sketch.hpp: ``(usable, lo, hi)``, the bounds of a block's total units.

    The last entry of :func:`_bounds` after its monotone fix, without the other 128: the
    largest lower bound of any prefix, floored (floor and the clamp at 0 are monotone), and
    the last prefix's upper bound.
    """
    widen = 2.0**slack_bits
    rel = 2.0**-36 * widen
    scale = nu * _SCALE
    bad = False
    lo_max = 0.0  # a prefix of 0 has a lower bound below 0
    for k in range(1, SKETCH_PARTS + 1):
        p = row[k - 1]
        x = scale * p
        slack = (0.51 * (k * _SPAN) + 2.0) * widen
        lo = x - x * rel - slack
        hi = x + x * rel + slack
        bad |= not (p >= 0.0 and p <= _CAP) or (p != 0.0 and not hi < _CAP)
        lo_max = lo if lo > lo_max else lo_max
    if bad:
        return False, np.int64(0), np.int64(0)
    p = row[SKETCH_PARTS - 1]
    x = scale * p
    hi = x + x * rel + (0.51 * (SKETCH_PARTS * _SPAN) + 2.0) * widen
    t_lo = np.int64(np.floor(lo_max)) if lo_max > 0 else np.int64(0)
    t_hi = np.int64(0) if p == 0.0 else np.int64(np.ceil(hi))
    return True, t_lo, t_hi


@_pjit
def _draw_sketched(n, sketch, nu, slack_bits, key, decided, mlo, mhi, tlo, thi):
    """sketch.hpp's ``draw_sketched_block`` for every whole block, from the bounds of its total.

    ``decided`` marks the blocks the bounds decide; ``mlo`` and ``mhi`` get the bounds of
    their mass, ``tlo`` and ``thi`` those of their pick's target (:func:`_read_picks` reads
    the pick, for the blocks whose leftover the merge takes).
    """
    for blk in nb.prange(sketch.shape[0]):
        decided[blk] = False
        if n - blk * BLOCK < BLOCK:
            continue
        usable, t_lo, t_hi = _total(sketch[blk], nu, slack_bits)
        if not usable or not t_hi < ONE:  # unusable, or a crossing or a certain item may be there
            continue
        if t_hi == 0:  # no mass: no draw, no leftover
            decided[blk] = True
            mlo[blk] = 0
            mhi[blk] = 0
            continue
        if t_lo == 0:
            continue
        state = _splitmix(key ^ _splitmix(np.uint64(blk)))
        x_lo = np.int64(_uniform(state, np.uint64(0)) * _SCALE)
        x_hi = x_lo
        if not t_lo > x_lo:  # the first target misses: a second aims at floor(u2 T)
            if t_hi > x_lo:
                continue
            u = _uniform(state, np.uint64(1))
            x_lo = np.int64(u * np.float64(t_lo))
            x_hi = np.int64(u * np.float64(t_hi))
        decided[blk] = True
        mlo[blk] = t_lo
        mhi[blk] = t_hi
        tlo[blk] = x_lo
        thi[blk] = x_hi


@_pjit
def _read_picks(g, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf, sketch, slack_bits, blocks, tlo, thi,
                out):
    """sketch.hpp's ``pick_in_parts`` for drawn blocks ``blocks``: their picks into ``out``, -1 where undecided."""
    for j in nb.prange(blocks.shape[0]):
        blk = blocks[j]
        lo = blk * BLOCK
        ul = np.empty(SKETCH_PARTS + 1, np.int64)
        uh = np.empty(SKETCH_PARTS + 1, np.int64)
        _bounds(sketch[blk], nu, slack_bits, ul, uh)  # usable: the block was drawn from it
        x_lo = tlo[blk]
        x_hi = thi[blk]
        k1 = 0
        while k1 < SKETCH_PARTS - 1 and not uh[k1 + 1] > x_lo:
            k1 += 1
        k2 = SKETCH_PARTS - 1
        while k2 > k1 and not ul[k2] <= x_hi:
            k2 -= 1
        first = k1 * _SPAN
        count = (k2 + 1 - k1) * _SPAN
        c = np.empty(count, np.int64)
        for k in range(count):  # the units first (vectorised: no running sum), then their sums
            i = np.uint64(lo + first + k)
            gi = np.float64(g[i])
            c[k] = _units(_probability(gi, _loss(losses, has_losses, w, i, gi), fill_loss, nu, gc, gf, lc, lf))
        run = np.int64(0)
        for k in range(count):
            run += c[k]
            c[k] = run
        ia = np.searchsorted(c, x_lo - uh[k1], side="right")
        ib = np.searchsorted(c, x_hi - ul[k1], side="right")
        out[j] = lo + first + ia if ia == ib and ia < count else -1


@_jit
def _first(c, s, e, x, strict):
    """First i in [s, e) with c[i] > x (strict) or >= x; e if none."""
    if strict:
        return s + np.searchsorted(c[s:e], x, side="right")
    return s + np.searchsorted(c[s:e], x, side="left")


# An undecided comparison is reported as -2 - stuck: ``stuck`` the last leftover whose
# bounds entered it (merge_spans's `stuck` in sketch.hpp); decided results are >= -1.
@_jit
def _undecided(at, n):
    return -2 - max(0, min(n - 1, at))


@_jit
def _search(cl, ch, s, e, x_lo, x_hi, strict):
    """The first i with cum_i > x (or >= x) for every x in [x_lo, x_hi], or undecided."""
    i = _first(ch, s, e, x_lo, strict)
    i_last = _first(cl, s, e, x_hi, strict)
    return i if i == i_last else _undecided(min(e - 1, i_last), cl.shape[0])


@_jit
def _resolve(cl, ch, s, e, base, m_lo, m_hi, carry, state, counter):
    """``resolve`` of merge_spans (sketch.hpp); a pick below -1 when undecided."""
    n = cl.shape[0]
    if s >= e:
        return carry, counter
    before_lo = cl[s - 1] if s > 0 else np.int64(0)
    before_hi = ch[s - 1] if s > 0 else np.int64(0)
    if ch[e - 1] - before_hi == 0:  # no mass in the run
        return carry, counter
    if cl[e - 1] - before_lo == 0:
        return _undecided(e - 1, n), counter
    t = base + np.int64(_uniform(state, counter) * _SCALE)
    counter += np.uint64(1)
    if m_lo > t:
        return carry, counter
    if m_hi > t:
        return _undecided(s - 1, n), counter
    i = _search(cl, ch, s, e, t, t, True)
    if i < -1 or i < e:
        return i, counter
    tot_lo = cl[e - 1] - base
    tot_hi = ch[e - 1] - base
    if tot_hi <= 0:
        return carry, counter
    if tot_lo <= 0:
        return _undecided(e - 1, n), counter
    u = _uniform(state, counter)
    counter += np.uint64(1)
    t_lo = base + np.int64(u * np.float64(tot_lo))
    t_hi = base + np.int64(u * np.float64(tot_hi))
    if m_lo > t_hi:
        return carry, counter
    if m_hi > t_lo:
        return _undecided(s - 1, n), counter
    i = _search(cl, ch, s, e, t_lo, t_hi, True)
    return i if i < e else _undecided(e - 1, n), counter


@_jit
def _round_spans(lo, hi, state, max_crossings, out):
    """``round_spans`` of sketch.hpp on masses within ``[lo, hi]``; taken positions go to ``out``.

    Returns ``(decided, taken count, last position or stuck position, left_lo, left_hi)``.
    """
    n = lo.shape[0]
    if n == 0:
        return True, 0, -1, 0, 0
    cl = np.cumsum(lo)
    ch = np.cumsum(hi)
    counter = np.uint64(0)
    base = np.int64(0)
    m_lo = np.int64(0)
    m_hi = np.int64(0)
    start = 0
    carry = -1
    cnt = 0
    crossings = 0
    while max_crossings < 0 or crossings < max_crossings:
        crossings += 1
        j = _search(cl, ch, start, n, base + ONE, base + ONE, False)
        if j < -1:
            return False, cnt, -2 - j, 0, 0
        if j >= n:
            break
        pick, counter = _resolve(cl, ch, start, j, base, m_lo, m_hi, carry, state, counter)
        if pick < -1:
            return False, cnt, -2 - pick, 0, 0
        if pick < 0:
            out[cnt] = j
            carry = -1
        else:
            u = _uniform(state, counter)
            counter += np.uint64(1)
            # survivor_taken: u (alpha + beta) < beta, alpha + beta = 2 ONE - (cum_j - base)
            sum_lo = np.float64(2 * ONE - (ch[j] - base))
            sum_hi = np.float64(2 * ONE - (cl[j] - base))
            beta_lo = np.float64(ONE - hi[j])
            beta_hi = np.float64(ONE - lo[j])
            if u * sum_hi < beta_lo:
                out[cnt] = pick
                carry = j
            elif u * sum_lo >= beta_hi:
                out[cnt] = j
                carry = pick
            else:
                return False, cnt, j, 0, 0
        cnt += 1
        base += ONE
        m_lo = cl[j]
        m_hi = ch[j]
        start = j + 1
    pick, counter = _resolve(cl, ch, start, n, base, m_lo, m_hi, carry, state, counter)
    if pick < -1:
        return False, cnt, -2 - pick, 0, 0
    return True, cnt, pick, cl[n - 1] - base, ch[n - 1] - base


def merge_spans(ids: np.ndarray, lo: np.ndarray, hi: np.ndarray, dep: np.ndarray, key: int,
                wanted: int) -> tuple[bool, np.ndarray, int]:
    """``merge_spans`` of sketch.hpp (the canonical merge's levels) on leftovers with mass.

    Returns ``(True, taken ids, last pick)``, or ``(False, _, stuck)``: exact masses for
    the blocks up to ``stuck`` (``dep`` holds each leftover's last block) decide it.
    """
    taken: list[np.ndarray] = []
    n_taken = 0
    group = 0
    while True:
        total = ids.shape[0]
        final = total <= MERGE_GROUP
        nxt: list[tuple[int, int, int, int]] = []
        for s in range(0, max(total, 1), MERGE_GROUP):
            e = total if final else min(total, s + MERGE_GROUP)
            stream = MERGE_STREAM if final else MERGE_STREAM - 1 - group
            group += 0 if final else 1
            out = np.empty(e - s, np.int64)
            cap = max(0, wanted - n_taken - 1) if final else -1
            ok, cnt, at, left_lo, left_hi = _round_spans(lo[s:e], hi[s:e], np.uint64(stream_state(key, stream)), cap,
                                                         out)
            if not ok:
                return False, np.empty(0, np.int64), int(dep[s + at])
            taken.append(ids[s + out[:cnt]])
            n_taken += cnt
            if final:
                return True, np.concatenate(taken), int(ids[s + at]) if at >= 0 else -1
            if left_hi == 0:
                continue
            if left_lo == 0 or at < 0:
                return False, np.empty(0, np.int64), int(dep[e - 1])
            nxt.append((int(ids[s + at]), int(left_lo), int(left_hi), int(dep[e - 1])))
        ids = np.array([t[0] for t in nxt], np.int64)
        lo = np.array([t[1] for t in nxt], np.int64)
        hi = np.array([t[2] for t in nxt], np.int64)
        dep = np.array([t[3] for t in nxt], np.int64)


def merge_blocks(ids: np.ndarray, lo: np.ndarray, hi: np.ndarray, key: int,
                 wanted: int) -> tuple[bool, np.ndarray, int, int]:
    """:func:`merge_spans` over one leftover per block, taken as the C++ core's ``merge_spans`` takes them.

    Blocks without mass (``hi == 0``) are left out; a mass whose bounds straddle 0 leaves
    the merge undecided at its block (the canonical merge drops zero masses). Returns
    ``(decided, taken ids, last pick, stuck block)``: ``last`` is -1 when undecided,
    ``stuck`` -1 when decided.
    """
    straddle = np.flatnonzero((lo == 0) & (hi > 0))
    if straddle.shape[0]:
        return False, np.empty(0, np.int64), -1, int(straddle[0])
    keep = np.flatnonzero(hi > 0)
    ok, taken, x = merge_spans(ids[keep], lo[keep], hi[keep], keep.astype(np.int64), key, wanted)
    return ok, taken, (x if ok else -1), (-1 if ok else x)


@dataclass
class Sketched:
    """The blocks the sketch decided, for :func:`rad._backends.numba_backend._depround_core`.

    A decided block with mass enters the merge as ``-2 - block`` (its pick unread: the
    pick does not change the leftover's mass, which is all the merge sees); :meth:`picks`
    reads the picks of the leftovers the merge took (about b parts of 512 points, where
    reading every block's part cost 9 ms of a 1e9 DepRound on two threads).
    """

    decided: np.ndarray
    mass_lo: np.ndarray
    mass_hi: np.ndarray
    key: int
    read: Callable[[np.ndarray], np.ndarray]  # the picks of drawn blocks, -1 where undecided

    def merge(self, left_idx: np.ndarray, left_mass: np.ndarray, wanted: int) -> tuple[bool, np.ndarray, int]:
        """The merge of the blocks' leftovers with mass (decided blocks from their bounds).

        Returns ``(True, picks, last pick)`` (a decided block's pick as ``-2 - block``),
        or ``(False, _, stuck)`` when undecided: exact masses for the blocks up to
        ``stuck`` decide the comparison.
        """
        exact = np.rint(left_mass * float(ONE)).astype(np.int64)  # exact: multiples of 2^-46 below 1
        ids = np.where(self.decided, -2 - np.arange(left_idx.shape[0], dtype=np.int64), left_idx)
        lo = np.where(self.decided, self.mass_lo, exact)
        hi = np.where(self.decided, self.mass_hi, exact)
        # (a sketched block's bounds never straddle 0 and an exact mass is a point: no block is undecided at 0)
        ok, taken, last, stuck = merge_blocks(ids, lo, hi, self.key, wanted)
        return ok, taken, last if ok else stuck

    def picks(self, taken: np.ndarray, last: int, round_block: Callable[[int], int]) -> tuple[np.ndarray, int]:
        """``taken`` and ``last`` with each unread pick read.

        ``round_block`` rounds a block exactly and returns its pick, where the bounds leave
        the pick undecided.
        """
        ids = np.append(taken, last)
        unread = np.flatnonzero(ids < -1)
        blocks = -2 - ids[unread]
        got = self.read(blocks)
        for k in np.flatnonzero(got < 0):
            got[k] = round_block(int(blocks[k]))
        ids[unread] = got
        return ids[:-1], int(ids[-1])


def depround(gains: np.ndarray, losses: np.ndarray | None, w: float, params: Params, b: int, key: int,
             sketch: RoundSketch, threads: int, slack_bits: int = 0) -> np.ndarray:
    """DepRound of the uncapped ``params`` with ``sketch`` (:func:`applies`).

    ``slack_bits`` widens the bounds (a test hook: 0 in use).
    """
    lv, has = _losses_arg(losses)
    fill, nu, gc, gf, lc, lf = params.as_tuple()
    rows = sketch.prefixes.reshape(-1, SKETCH_PARTS)
    nblk = rows.shape[0]
    decided = np.zeros(nblk, np.bool_)
    mlo = np.zeros(nblk, np.int64)
    mhi = np.zeros(nblk, np.int64)
    tlo = np.zeros(nblk, np.int64)
    thi = np.zeros(nblk, np.int64)
    _draw_sketched(gains.shape[0], rows, nu, int(slack_bits), np.uint64(key), decided, mlo, mhi, tlo, thi)

    def read(blocks: np.ndarray) -> np.ndarray:
        out = np.empty(blocks.shape[0], np.int64)
        _read_picks(gains, lv, has, float(w), bool(fill), nu, gc, gf, lc, lf, rows, int(slack_bits), blocks, tlo, thi,
                    out)
        return out

    return _depround_params(gains, losses, w, params, b, key, threads, Sketched(decided, mlo, mhi, key, read))

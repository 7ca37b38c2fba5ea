"""The Numba backend's DepRound from the support pass's sketch (``docs/design.md`` §3, "The DepRound sketch").

The algorithm of ``cpp/include/rad/sketch.hpp``, compiled: a block of the uncapped path
(``q = nu / a`` on ``g >= tau``) with less than one unit of mass is rounded from bounds
on its exact units prefixes, reading only the 512-point part its pick lies in; the
leftovers are merged with their masses as intervals. A block with a unit of mass or more
(up to :data:`PARTS_UNITS_MAX`) is rounded from the parts its crossings and picks can lie
in. A block the bounds cannot decide is rounded exactly, and a merge they cannot decide is
redone on exact masses: the indices are always those of
:func:`rad._backends.numba_backend.depround_params`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numba as nb
import numpy as np
from numba.extending import overload

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
    _round_block_params,
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


@_jit
def _running_units(g, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf, first, out):
    """``out[k]``: the exact units of ``q`` over points ``first .. first + k`` (sketch.hpp's running_units)."""
    for k in range(out.shape[0]):  # the units first (vectorised: no running sum), then their sums
        i = np.uint64(first + k)
        gi = np.float64(g[i])
        out[k] = _units(_probability(gi, _loss(losses, has_losses, w, i, gi), fill_loss, nu, gc, gf, lc, lf))
    run = np.int64(0)
    for k in range(out.shape[0]):
        run += out[k]
        out[k] = run


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
        _running_units(g, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf, lo + first, c)
        ia = np.searchsorted(c, x_lo - uh[k1], side="right")
        ib = np.searchsorted(c, x_hi - ul[k1], side="right")
        out[j] = lo + first + ia if ia == ib and ia < count else -1


# ------------------------------------------------- rounding on masses known within bounds
# sketch.hpp's round_on_bounds: round_sequence (the canonical rounding of one sequence)
# where each running mass M_i is known only within bounds; every comparison is made for
# the whole range the bounds allow, and one that depends on where M lies in them marks
# the rounding undecided. Two sources, as in sketch.hpp, each a tuple whose last entry is
# its state (state[0] 1 while decided):
#   spans  (cl, ch, lo, hi, state): a sequence of masses within [lo, hi] (the merge's
#          leftovers), cl and ch the sums of the bounds; state[1] the last position whose
#          bounds entered an undecided comparison;
#   parts  (g, losses, has_losses, w, fill, nu, gain_cut, gain_frac, loss_cut, loss_frac,
#          block start, U's lower bounds, U's upper bounds, loc, read flags, state): a whole
#          block with M_i = B + c_i, B the exact prefix at the start of item i's part
#          (within the sketch's bounds U) and c_i the exact running units from there, read
#          part by part where a sought item can lie (sketch.hpp's round_block_from_parts);
#          state[1] the parts read.
# The generic loop calls src_cum, src_run, src_mass, src_search and src_fail, which pick
# the source's function when compiled (by the tuple's length).
_SPANS = 5


@_jit
def _first(c, s, e, x, strict):
    """First i in [s, e) with c[i] > x (strict) or >= x; e if none."""
    if strict:
        return s + np.searchsorted(c[s:e], x, side="right")
    return s + np.searchsorted(c[s:e], x, side="left")


@_jit
def _spans_cum(src, i):
    """Bounds of the running mass after leftover ``i`` (0 before the first)."""
    cl, ch = src[0], src[1]
    return (cl[i], ch[i]) if i >= 0 else (np.int64(0), np.int64(0))


@_jit
def _spans_run(src, s, e):
    b_lo, b_hi = _spans_cum(src, s - 1)
    c_lo, c_hi = _spans_cum(src, e - 1)
    return c_lo - b_lo, c_hi - b_hi


@_jit
def _spans_mass(src, i):
    return src[2][i], src[3][i]


@_jit
def _spans_fail(src, i):
    st = src[4]
    st[0] = 0
    st[1] = max(0, min(src[0].shape[0] - 1, i))


@_jit
def _spans_search(src, s, e, x_lo, x_hi, strict):
    """No earlier i can (its upper bound does not), and this one must (its lower bound does)."""
    cl, ch = src[0], src[1]
    i = _first(ch, s, e, x_lo, strict)
    i_last = _first(cl, s, e, x_hi, strict)
    if i != i_last:
        _spans_fail(src, min(e - 1, i_last))
    return i


@_jit
def _need(src, k):
    """Reads part ``k`` once: ``loc`` gets its running units from the part's start."""
    g, lv, has, w, fill, nu, gc, gf, lc, lf, lo, ul, uh, loc, read, st = src
    if read[k]:
        return
    read[k] = True
    st[1] += 1
    s = k * _SPAN
    _running_units(g, lv, has, w, fill, nu, gc, gf, lc, lf, lo + s, loc[s : s + _SPAN])
    if loc[s + _SPAN - 1] >= ONE:  # a certain item cannot be here (_parts_eligible)
        st[0] = 0


@_jit
def _parts_cum(src, i):
    """Bounds of the running mass after item ``i``: B + c_i, at a part's end also U's."""
    ul, uh, loc, read = src[11], src[12], src[13], src[14]
    if i < 0:
        return np.int64(0), np.int64(0)
    k = i // _SPAN
    last = i % _SPAN == _SPAN - 1
    if last and not read[k]:
        return ul[k + 1], uh[k + 1]
    _need(src, k)
    c_lo = ul[k] + loc[i]
    c_hi = uh[k] + loc[i]
    if last:
        c_lo = max(c_lo, ul[k + 1])
        c_hi = min(c_hi, uh[k + 1])
    return c_lo, c_hi


@_jit
def _parts_run(src, s, e):
    """Bounds of the mass of items [s, e) (exact within one part)."""
    loc = src[13]
    if s // _SPAN == (e - 1) // _SPAN:
        _need(src, s // _SPAN)
        r = loc[e - 1] - (loc[s - 1] if s % _SPAN else 0)
        return r, r
    b_lo, b_hi = _parts_cum(src, s - 1)
    c_lo, c_hi = _parts_cum(src, e - 1)
    return c_lo - b_hi, c_hi - b_lo


@_jit
def _parts_mass(src, i):
    """Item ``i``'s exact units (twice: a mass's bounds)."""
    loc = src[13]
    _need(src, i // _SPAN)
    m = loc[i] - loc[i - 1] if i % _SPAN else loc[i]
    return m, m


@_jit
def _parts_fail(src, i):
    src[15][0] = 0


@_jit
def _parts_search(src, s, e, x_lo, x_hi, strict):
    """The first item of [s, e) whose M_i passes x, for every B and x within their bounds.

    In a read part M_i = B + c_i, c non-decreasing: two binary searches, B at either
    bound; a part whose end cannot reach ``x_lo`` is skipped unread.
    """
    ul, uh, loc, st = src[11], src[12], src[13], src[15]
    k = s // _SPAN
    while k * _SPAN < e:
        reach = uh[k + 1] > x_lo if strict else uh[k + 1] >= x_lo
        if reach:
            _need(src, k)
            if st[0] == 0:
                return e
            i0 = max(s, k * _SPAN)
            i1 = min(e, (k + 1) * _SPAN)
            earliest = _first(loc, i0, i1, x_lo - uh[k], strict)
            latest = _first(loc, i0, i1, x_hi - ul[k], strict)
            if latest < i1:
                if earliest != latest:
                    st[0] = 0
                return latest
            if earliest < i1:  # here for some values, later for others
                st[0] = 0
                return e
        k += 1
    return e


def src_cum(src, i):  # the bounds of M_i (0 for i < 0)
    raise NotImplementedError("compiled only")


def src_run(src, s, e):  # the bounds of the mass of items [s, e)
    raise NotImplementedError("compiled only")


def src_mass(src, i):  # the bounds of item i's own mass
    raise NotImplementedError("compiled only")


def src_search(src, s, e, x_lo, x_hi, strict):  # the first i in [s, e) with M_i > x (or >= x), e if none
    raise NotImplementedError("compiled only")


def src_fail(src, i):  # undecided; i the last position whose bounds entered the comparison
    raise NotImplementedError("compiled only")


def _by_source(spans: Callable[..., Any], parts: Callable[..., Any]) -> Callable[..., Any]:
    """An overload that calls ``spans`` or ``parts`` by the source tuple's length."""

    def typer(src, *args):  # unannotated: numba holds its signature to impl's
        fn = spans if len(src) == _SPANS else parts

        def impl(src, *args):
            return fn(src, *args)

        return impl

    return typer


overload(src_cum)(_by_source(_spans_cum, _parts_cum))
overload(src_run)(_by_source(_spans_run, _parts_run))
overload(src_mass)(_by_source(_spans_mass, _parts_mass))
overload(src_search)(_by_source(_spans_search, _parts_search))
overload(src_fail)(_by_source(_spans_fail, _parts_fail))


@_jit
def _resolve(src, s, e, base, m_lo, m_hi, carry, state, counter):
    """``resolve`` of round_on_bounds: the pick of run [s, e) (or ``carry``), and the counter."""
    st = src[-1]
    if s >= e:
        return carry, counter
    r_lo, r_hi = src_run(src, s, e)
    if r_hi <= 0:  # no mass in the run
        return carry, counter
    if r_lo <= 0:
        src_fail(src, e - 1)
        return carry, counter
    t = base + np.int64(_uniform(state, counter) * _SCALE)
    counter += np.uint64(1)
    if m_lo > t:
        return carry, counter
    if m_hi > t:
        src_fail(src, s - 1)
        return carry, counter
    i = src_search(src, s, e, t, t, True)
    if st[0] == 0 or i < e:
        return i, counter
    c_lo, c_hi = src_cum(src, e - 1)
    tot_lo = c_lo - base
    tot_hi = c_hi - base
    if tot_hi <= 0:
        return carry, counter
    if tot_lo <= 0:
        src_fail(src, e - 1)
        return carry, counter
    u = _uniform(state, counter)
    counter += np.uint64(1)
    t_lo = base + np.int64(u * np.float64(tot_lo))
    t_hi = base + np.int64(u * np.float64(tot_hi))
    if m_lo > t_hi:
        return carry, counter
    if m_hi > t_lo:
        src_fail(src, s - 1)
        return carry, counter
    i = src_search(src, s, e, t_lo, t_hi, True)
    if st[0] == 0 or i < e:
        return i, counter
    src_fail(src, e - 1)  # the last item with mass (the rounding's own edge case): exactly
    return carry, counter


@_jit
def _round_on_bounds(src, n, state, max_crossings, out):
    """``round_on_bounds`` of sketch.hpp on ``n`` positions: the taken ones into ``out``.

    Pairs at most ``max_crossings`` crossings when that is not negative. Returns
    ``(decided, taken count, the final run's survivor or -1, the bounds of its mass)``;
    undecided, the state says where.
    """
    st = src[-1]
    counter = np.uint64(0)
    base = np.int64(0)
    m_lo = np.int64(0)
    m_hi = np.int64(0)
    start = 0
    carry = -1
    cnt = 0
    while max_crossings < 0 or cnt < max_crossings:
        j = src_search(src, start, n, base + ONE, base + ONE, False)
        if st[0] == 0:
            return False, cnt, -1, 0, 0
        if j >= n:
            break
        pick, counter = _resolve(src, start, j, base, m_lo, m_hi, carry, state, counter)
        if st[0] == 0:
            return False, cnt, -1, 0, 0
        if pick < 0:
            out[cnt] = j
            carry = -1
        else:
            # survivor_taken: u (alpha + beta) < beta, alpha + beta = 2 ONE - (M_j - base), beta = ONE - q_j
            c_lo, c_hi = src_cum(src, j)
            q_lo, q_hi = src_mass(src, j)
            if st[0] == 0:
                return False, cnt, -1, 0, 0
            u = _uniform(state, counter)
            counter += np.uint64(1)
            if u * np.float64(2 * ONE - (c_lo - base)) < np.float64(ONE - q_hi):
                out[cnt] = pick
                carry = j
            elif u * np.float64(2 * ONE - (c_hi - base)) >= np.float64(ONE - q_lo):
                out[cnt] = j
                carry = pick
            else:
                src_fail(src, j)
                return False, cnt, -1, 0, 0
        cnt += 1
        base += ONE
        m_lo, m_hi = src_cum(src, j)
        start = j + 1
    last, counter = _resolve(src, start, n, base, m_lo, m_hi, carry, state, counter)
    if st[0] == 0:
        return False, cnt, -1, 0, 0
    c_lo, c_hi = src_cum(src, n - 1)
    return True, cnt, last, c_lo - base, c_hi - base


@_jit
def _round_spans(lo, hi, state, max_crossings, out):
    """``round_spans`` of sketch.hpp on masses within ``[lo, hi]``; taken positions go to ``out``.

    Returns ``(decided, taken count, last position or stuck position, left_lo, left_hi)``.
    """
    st = np.ones(2, np.int64)
    src = (np.cumsum(lo), np.cumsum(hi), lo, hi, st)
    ok, cnt, last, left_lo, left_hi = _round_on_bounds(src, lo.shape[0], state, max_crossings, out)
    return ok, cnt, (last if ok else st[1]), left_lo, left_hi


# ---------------------------------------------------------------- blocks with crossings
#: Above this many units a block round_chunked's stream is faster (sketch.hpp's kPartsUnitsMax).
PARTS_UNITS_MAX = 24


@_jit
def _parts_eligible(ul, uh):
    """``sketched_parts_eligible`` of sketch.hpp: no part can hold a certain item, and some mass."""
    if not uh[SKETCH_PARTS] < PARTS_UNITS_MAX * ONE:
        return False
    for k in range(SKETCH_PARTS):
        if not uh[k + 1] - ul[k] < ONE // 2:
            return False
    return ul[SKETCH_PARTS] > 0


@_pjit
def _round_blocks_sketched(g, lv, has, w, fill, nu, gc, gf, lc, lf, rows, slack_bits, blocks, states, buf, counts,
                           left_idx, left_mass, parts, plo, phi, read_counts):
    """The block phase for blocks the draws left: from their parts where they qualify, else streamed.

    A block rounded from its parts (sketch.hpp's round_block_from_parts: the parts source
    of :func:`_round_on_bounds`) is marked in ``parts`` with its leftover's bounds in
    ``plo``/``phi`` (its ``left_mass`` is 0: the merge reads the bounds); ``read_counts[j]``
    gets the parts read for ``blocks[j]`` (0 when streamed at once).
    """
    n = g.shape[0]
    for j in nb.prange(blocks.shape[0]):
        blk = blocks[j]
        lo = blk * BLOCK
        parts[blk] = False
        read_counts[j] = 0
        if n - lo >= BLOCK:
            ul = np.empty(SKETCH_PARTS + 1, np.int64)
            uh = np.empty(SKETCH_PARTS + 1, np.int64)
            if _bounds(rows[blk], nu, slack_bits, ul, uh) and uh[SKETCH_PARTS] >= ONE and _parts_eligible(ul, uh):
                st = np.array([1, 0], np.int64)  # decided, parts read
                src = (g, lv, has, w, fill, nu, gc, gf, lc, lf, lo, ul, uh, np.empty(BLOCK, np.int64),
                       np.zeros(SKETCH_PARTS, np.bool_), st)
                out = buf[j]
                ok, cnt, last, m_lo, m_hi = _round_on_bounds(src, BLOCK, states[j], -1, out)
                read_counts[j] = st[1]
                # after the last crossing the exact leftover lies in [0, ONE)
                m_lo = max(np.int64(0), m_lo)
                m_hi = min(np.int64(ONE - 1), m_hi)
                # a leftover with mass needs its index (and bounds that exclude 0) for the merge
                if ok and (m_hi == 0 or (m_lo > 0 and last >= 0)):
                    out[:cnt].sort()
                    counts[j] = cnt
                    left_idx[blk] = lo + last if last >= 0 else -1
                    left_mass[blk] = 0.0
                    parts[blk] = True
                    plo[blk] = m_lo
                    phi[blk] = m_hi
                    continue
        counts[j], left_idx[blk], left_mass[blk] = _round_block_params(g, lv, has, w, fill, nu, gc, gf, lc, lf, blk,
                                                                       states[j], buf[j])


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


#: What the rounding from parts did, summed over calls (a test hook: :func:`parts_counts`).
_PARTS_COUNTS = np.zeros(3, np.int64)


def parts_counts(reset: bool = False) -> tuple[int, int, int]:
    """``(blocks rounded from parts, blocks tried and left undecided, parts read)`` so far.

    The twin of ``_core.sketch_counts``; ``reset`` zeroes them after reading.
    """
    got = (int(_PARTS_COUNTS[0]), int(_PARTS_COUNTS[1]), int(_PARTS_COUNTS[2]))
    if reset:
        _PARTS_COUNTS[:] = 0
    return got


@dataclass
class Sketched:
    """The blocks the sketch decided, for :func:`rad._backends.numba_backend._depround_core`.

    A block the draws decided with mass enters the merge as ``-2 - block`` (its pick
    unread: the pick does not change the leftover's mass, which is all the merge sees);
    :meth:`picks` reads the picks of the leftovers the merge took (about b parts of 512
    points, where reading every block's part cost 9 ms of a 1e9 DepRound on two threads).
    A block rounded from its parts (:meth:`round_first`) has taken its indices and enters
    the merge with its leftover's index and the bounds of its mass.
    """

    decided: np.ndarray
    mass_lo: np.ndarray
    mass_hi: np.ndarray
    key: int
    read: Callable[[np.ndarray], np.ndarray]  # the picks of drawn blocks, -1 where undecided
    # (blocks, states, buf, counts, left_idx, left_mass, parts, parts_lo, parts_hi, read_counts)
    round_blocks: Callable[..., None]
    parts: np.ndarray = field(init=False)  # rounded from parts: leftover within [parts_lo, parts_hi]
    parts_lo: np.ndarray = field(init=False)
    parts_hi: np.ndarray = field(init=False)
    parts_taken: np.ndarray = field(init=False)  # how many indices each such block took

    def __post_init__(self) -> None:
        nblk = self.decided.shape[0]
        self.parts = np.zeros(nblk, np.bool_)
        self.parts_lo = np.zeros(nblk, np.int64)
        self.parts_hi = np.zeros(nblk, np.int64)
        self.parts_taken = np.zeros(nblk, np.int64)

    def round_first(self, blocks: np.ndarray, states: np.ndarray, buf: np.ndarray, counts: np.ndarray,
                    left_idx: np.ndarray, left_mass: np.ndarray) -> None:
        """The block phase for the blocks the draws left: from their parts where that decides, else streamed."""
        read_counts = np.zeros(blocks.shape[0], np.int64)
        self.round_blocks(blocks, states, buf, counts, left_idx, left_mass, self.parts, self.parts_lo, self.parts_hi,
                          read_counts)
        from_parts = self.parts[blocks]
        self.parts_taken[blocks] = counts[: blocks.shape[0]]
        _PARTS_COUNTS[0] += int(from_parts.sum())
        _PARTS_COUNTS[1] += int(np.count_nonzero(~from_parts & (read_counts > 0)))
        _PARTS_COUNTS[2] += int(read_counts.sum())

    def merge(self, left_idx: np.ndarray, left_mass: np.ndarray, wanted: int) -> tuple[bool, np.ndarray, int]:
        """The merge of the blocks' leftovers with mass (sketched blocks from their bounds).

        Returns ``(True, picks, last pick)`` (a drawn block's pick as ``-2 - block``),
        or ``(False, _, stuck)`` when undecided: exact masses for the blocks up to
        ``stuck`` decide the comparison.
        """
        exact = np.rint(left_mass * float(ONE)).astype(np.int64)  # exact: multiples of 2^-46 below 1
        ids = np.where(self.decided, -2 - np.arange(left_idx.shape[0], dtype=np.int64), left_idx)
        lo = np.where(self.decided, self.mass_lo, np.where(self.parts, self.parts_lo, exact))
        hi = np.where(self.decided, self.mass_hi, np.where(self.parts, self.parts_hi, exact))
        # (a drawn block's bounds never straddle 0, nor do a parts block's with mass, and an
        # exact mass is a point: no block is undecided at 0)
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

    def round_blocks(blocks, states, buf, counts, left_idx, left_mass, parts, plo, phi, read_counts):
        _round_blocks_sketched(gains, lv, has, float(w), bool(fill), nu, gc, gf, lc, lf, rows, int(slack_bits), blocks,
                               states, buf, counts, left_idx, left_mass, parts, plo, phi, read_counts)

    return _depround_params(gains, losses, w, params, b, key, threads,
                            Sketched(decided, mlo, mhi, key, read, round_blocks))

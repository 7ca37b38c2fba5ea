"""The Numba backend's search with the support sums in two reads (``docs/design.md`` §3).

The algorithm of ``threshold_support_bracketed`` in ``cpp/include/rad/threshold.hpp``, for
float32 gains with RAD losses (``a = (1 + w) g``):

1. the float32 first pass (``approx_locate`` there): one read that sums ``1/x`` in float
   over the points above the sampled bracket and histograms the points inside it, and
   from these approximate sums the range of fine bins that must hold ``tau`` (every bin
   whose decision lies within the margin ``2^-20 (t H + G + m)`` of zero) and an estimate
   of ``tau`` inside it (:func:`_steer`);
2. the support pass over ``g >=`` the estimate (else the range's top), which also
   collects the range's points; ``tau`` is resolved from them with that pass's exact sums
   less the collected points it summed (those at or above the estimate)
   (:func:`rad._backends.radix_select.resolve_gathered`), and the blocks holding a
   collected point between the estimate and ``tau`` are summed again at ``tau``.

The support sums are the canonical ones (:func:`rad._backends.numba_backend.support_sums`
at ``tau``), bit for bit. Where the first pass cannot decide (a gain above ``2^125``,
``1 + w`` above ``2^897``, an invalid value, ``tau`` outside the bracket, too many points
in the range) :func:`search_with_sums` returns ``None`` and the caller takes the search
and the support pass in turn. A bracket reaching below ``2^-125`` starts there.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
from llvmlite import ir as _ir
from numba.core import cgutils as _cgutils
from numba.core import types as _types
from numba.extending import intrinsic as _intrinsic

from rad._backends import radix_select as _radix
from rad._backends.canonical import BLOCK
from rad._backends.contract import rad_support_sums
from rad._backends.numba_backend import (
    _SKETCH_PARTS,
    _emit_compress_store,
    _emit_splat,
    _jit,
    _pjit,
    _prefetch_run,
    _sample_rank,
    _support_block,
)
from rad._backends.numba_refine import refine_bracket

__all__ = ["APPROX_FINE", "APPROX_MARGIN_BITS", "search_with_sums"]

#: Fine bins of the float32 first pass (kApproxFine in threshold.hpp).
APPROX_FINE = 1 << 14
#: The first pass's margin of doubt, 2^-20 (t H~ + G~ + m): twice its error bound.
APPROX_MARGIN_BITS = 20
# Bits of the float 2^125: a larger gain's float reciprocal would be subnormal (and a raw
# value above it is also any negative, infinite or NaN one, or -0.0, which is valid).
_SAFE_BITS = np.uint32(0x7E000000)
_INF_BITS = np.uint32(0x7F800000)
_NEG_ZERO = np.uint32(0x80000000)  # -0.0: valid, and below any bracket here
_ABS_BITS = np.uint32(0x7FFFFFFF)
_BUF = 2048  # inside points binned per batch
_SMALLEST = 2.0**-125
# Collected points a block keeps in its row; a block with more is scanned again.
_ROW = 16


@_intrinsic
def _approx_run(typingctx, raw, i0, ulo, uhi, lanes, hsum, buf, pos):
    """One run of 64 points of the float32 first pass, as four 16-wide vectors in LLVM IR.

    ``lanes`` (int32, 64) holds per lane the count of points at or above the bracket, the
    count of positive ones, the smallest magnitude bits above it and the unsafe flag;
    ``hsum`` (float64, 16) the lanes' double sums of the float ``1/x`` above it (each run
    summed in float first, as in C++); the magnitude bits of the points inside go to
    ``buf[pos:]`` (room for 64 more). Returns how many went there. The loop of
    :func:`_approx_range` this replaces compiled to 8-wide divisions and one compare per
    point turned into a vector and back (C++'s ``approx_pass_range`` is the same pass).
    """
    sig = _types.int64(raw, i0, ulo, uhi, lanes, hsum, buf, pos)

    def codegen(context, builder, signature, args):
        i32, i64, f32, f64 = _ir.IntType(32), _ir.IntType(64), _ir.FloatType(), _ir.DoubleType()
        v16, f16, d8 = _ir.VectorType(i32, 16), _ir.VectorType(f32, 16), _ir.VectorType(f64, 8)

        def ptr(k, index):
            aryty = signature.args[k]
            ary = context.make_array(aryty)(context, builder, args[k])
            return _cgutils.get_item_pointer(context, builder, aryty, ary, [index], wraparound=False, boundscheck=False)

        def const(v):
            return _ir.Constant(v16, [v] * 16)

        lane_ptr = [builder.bitcast(ptr(4, i64(16 * k)), v16.as_pointer()) for k in range(4)]
        n_up, n_pos, min_bits, bad = (builder.load(p, align=4) for p in lane_ptr)
        ulo_v, uhi_v = _emit_splat(builder, args[2], v16), _emit_splat(builder, args[3], v16)
        run = _ir.Constant(f16, [0.0] * 16)
        ctpop = _cgutils.get_or_insert_function(builder.module, _ir.FunctionType(_ir.IntType(16), [_ir.IntType(16)]),
                                                "llvm.ctpop.i16")
        at = args[7]
        for k in range(4):
            src = builder.bitcast(ptr(0, builder.add(args[1], i64(16 * k))), v16.as_pointer())
            raw_v = builder.load(src, align=4)
            u = builder.and_(raw_v, const(0x7FFFFFFF))
            up = builder.icmp_unsigned(">=", u, uhi_v)
            inside = builder.and_(builder.icmp_unsigned(">=", u, ulo_v), builder.not_(up))
            r = builder.fdiv(_ir.Constant(f16, [1.0] * 16), builder.bitcast(raw_v, f16))
            run = builder.fadd(run, builder.select(up, r, _ir.Constant(f16, [0.0] * 16)))
            n_up = builder.add(n_up, builder.zext(up, v16))
            n_pos = builder.add(n_pos, builder.zext(builder.icmp_unsigned("!=", u, const(0)), v16))
            unsafe = builder.and_(builder.icmp_unsigned(">", raw_v, const(int(_SAFE_BITS))),
                                  builder.icmp_unsigned("!=", raw_v, const(int(_NEG_ZERO))))
            bad = builder.or_(bad, builder.zext(unsafe, v16))
            cand = builder.select(up, u, const(0xFFFFFFFF))
            min_bits = builder.select(builder.icmp_unsigned("<", cand, min_bits), cand, min_bits)
            _emit_compress_store(builder, u, inside, builder.bitcast(ptr(6, at), i32.as_pointer()))
            at = builder.add(at, builder.zext(builder.call(ctpop, [builder.bitcast(inside, _ir.IntType(16))]), i64))
        for p, v in zip(lane_ptr, (n_up, n_pos, min_bits, bad)):
            builder.store(v, p, align=4)
        for half in range(2):
            part = builder.shuffle_vector(run, _ir.Constant(f16, _ir.Undefined),
                                          _ir.Constant(_ir.VectorType(i32, 8), list(range(8 * half, 8 * half + 8))))
            hp = builder.bitcast(ptr(5, i64(8 * half)), d8.as_pointer())
            builder.store(builder.fadd(builder.load(hp, align=8), builder.fpext(part, d8)), hp, align=8)
        return builder.sub(at, args[7])

    return sig, codegen


@nb.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
def _approx_range(g, raw, lo_v, hi_v, ulo, uhi, sh, lo, hi, cnt, hh, mn):
    """One thread's share of the float32 first pass: ``(h_above, min_above, n_above, n_inside, n_pos, unsafe)``.

    Runs of 64 through :func:`_approx_run`: ``1/x`` in float for every point, summed in
    float over the run and then in double over the points above the bracket (a sum that
    only steers decisions with a margin; each term is within 2^-24 of ``1/x``, each run's
    sum within 3 * 2^-24, as in C++). The points inside (whose bits the run collects) go to
    the fine bins in batches, with ``1/x`` in double.
    """
    ha = 0.0  # the sum so far; hb the current 2^16 points' (so the double sums' error stays small at any n)
    hb = 0.0
    minb = _INF_BITS  # the smallest gain above, as raw bits (an integer min vectorises; a float one did not)
    na = 0
    n_in = 0
    npos = 0
    unsafe = 0
    one = np.float32(1.0)
    zero = np.float32(0.0)
    buf = np.empty(_BUF, np.uint32)
    fbuf = buf.view(np.float32)
    nbuf = 0
    lanes = np.zeros(64, np.int32)  # _approx_run's lanes: counts above, counts positive, min bits, unsafe
    lanes[32:48] = -1  # 0xFFFFFFFF: no gain above yet
    hs = np.zeros(16)
    for c0 in range(lo, hi, 64):
        c1 = min(hi, c0 + 64)
        if (c0 - lo) & 0xFFFF == 0:
            ha += hb + hs.sum()
            hb = 0.0
            hs[:] = 0.0
            na += lanes[0:16].sum()  # at most 4,096 a lane since the last flush
            npos += lanes[16:32].sum()
            lanes[0:32] = 0
        _prefetch_run(g, c0, 64)
        if c1 - c0 == 64:
            nbuf += _approx_run(raw, c0, ulo, uhi, lanes, hs, buf, nbuf)
        else:  # the last, short run
            for ii in range(c0, c1):
                i = np.uint64(ii)
                x = g[i]
                unsafe += (raw[i] > _SAFE_BITS) & (raw[i] != _NEG_ZERO)
                up = x >= hi_v
                r = one / x  # 1/0 = inf (error_model="numpy"), selected away
                hb += np.float64(r) if up else 0.0
                na += up
                npos += x > zero
                minb = min(minb, raw[i] if up else _INF_BITS)
                u = raw[ii] & _ABS_BITS
                if u >= ulo and u < uhi:
                    buf[nbuf] = u
                    nbuf += 1
        if nbuf > _BUF - 64 or c1 == hi:
            n_in += nbuf
            for j in range(nbuf):
                v = np.float64(fbuf[j])
                b = (buf[j] - ulo) >> sh
                cnt[b] += 1
                hh[b] += 1.0 / v
                if v < mn[b]:
                    mn[b] = v
            nbuf = 0
    na += lanes[0:16].sum()
    npos += lanes[16:32].sum()
    for j in range(16):
        minb = min(minb, np.uint32(lanes[32 + j]))
        unsafe += lanes[48 + j] != 0
    return ha + hb + hs.sum(), minb, na, n_in, npos, unsafe


@_pjit
def _approx_pass(g, raw, lo_v, hi_v, ulo, sh, nt):
    n = g.shape[0]
    cnt = np.zeros((nt, APPROX_FINE), np.int64)
    hh = np.zeros((nt, APPROX_FINE))
    mn = np.full((nt, APPROX_FINE), np.inf)
    sums = np.zeros(nt)
    minbits = np.full(nt, _INF_BITS, np.uint32)
    counts = np.zeros((nt, 4), np.int64)
    uhi = np.array([hi_v], np.float32).view(np.uint32)[0]  # hi_v's bits (a positive float)
    for t in nb.prange(nt):
        lo, hi = n * t // nt, n * (t + 1) // nt
        ha, minb, na, n_in, npos, unsafe = _approx_range(g, raw, lo_v, hi_v, ulo, uhi, sh, lo, hi, cnt[t], hh[t],
                                                         mn[t])
        sums[t] = ha
        minbits[t] = minb
        counts[t, 0] = na
        counts[t, 1] = (hi - lo) - na - n_in
        counts[t, 2] = npos
        counts[t, 3] = unsafe
    c0 = cnt[0].copy()
    h0 = hh[0].copy()
    m0 = mn[0].copy()
    for t in range(1, nt):
        for b in range(APPROX_FINE):
            c0[b] += cnt[t, b]
            h0[b] += hh[t, b]
            m0[b] = min(m0[b], mn[t, b])
    return (sums.sum(), minbits.min(), counts[:, 0].sum(), counts[:, 1].sum(), counts[:, 2].sum(),
            counts[:, 3].sum() > 0, c0, h0, m0)


def _locate(pass_result: tuple[Any, ...], ulo: int, uhi: int, sh: int, m: float, w: float,
            margin_bits: int) -> tuple[Any, ...] | None:
    """The range of fine bins that holds tau (approx_locate's scan in threshold.hpp).

    Returns ``(bin_lo, bin_hi, count, n_above, last_min, fail_d, g_total, steer)`` with
    ``fail_d`` an upper bound of D below the range, and ``steer`` the estimate of tau inside
    it (NaN: none; :func:`_steer`), or ``None``. (D above it, ``pass_d``, comes from the
    support pass's exact sums: :func:`search_with_sums`.)
    """
    inf = float("inf")
    h_above, min_above, n_above, n_below, n_pos, unsafe, cnt, hh, mn = pass_result
    if unsafe:
        return None
    c, eps = 1.0 / (1.0 + w), 2.0**-margin_bits
    g_total = c * float(n_pos)
    min_above = _radix.edge_value(int(min_above), 32) if min_above < _INF_BITS else inf  # from its raw bits
    h, k, last_min, fail_d = float(h_above), int(n_above), min_above, -inf
    t_hi, d_hi = _radix.edge_value(uhi, 32), m  # D~ above the range (at the top edge: m with nothing above)
    if k > 0:
        t = _radix.edge_value(uhi, 32)
        d, e = t * (c * h) - c * k + m, eps * (t * (c * h) + c * k + m)
        if not np.isfinite(d) or d < e:
            return None  # tau above the bracket, or may be
        d_hi = d
    bins = np.flatnonzero(cnt)[::-1]  # non-empty bins, from the top
    if bins.shape[0] == 0:
        return None
    hs = h + np.cumsum(hh[bins])
    ks = k + np.cumsum(cnt[bins])
    t = _radix.edge_values(ulo + (bins.astype(np.uint64) << np.uint64(sh)), 32)
    with np.errstate(all="ignore"):
        d = t * (c * hs) - c * ks + m
        e = eps * (t * (c * hs) + c * ks + m)
    if not np.all(np.isfinite(d)):
        return None
    undecided = np.flatnonzero(d < e)
    if undecided.shape[0] == 0:  # every group inside joins: the lowest bin for its smallest gain
        top = bins.shape[0] - 1
        d_hi = inf  # no estimate
    else:
        top = int(undecided[0])
        if top > 0:
            t_hi, d_hi = float(t[top - 1]), float(d[top - 1])
    if top > 0:
        last_min = float(mn[bins[top - 1]])
    t_lo, d_lo = 0.0, inf
    fails = np.flatnonzero(d[top:] < -e[top:])
    if fails.shape[0]:
        bot = top + int(fails[0])
        fail_d = float(d[bot] + e[bot])
        t_lo, d_lo = float(t[bot]), float(d[bot])
    else:
        bot = bins.shape[0] - 1
        if n_below > 0:
            # The points below fail iff D at the bracket's bottom edge (an upper bound of
            # their D) is negative.
            tl = _radix.edge_value(ulo, 32)
            hl, kl = float(hs[-1]), int(ks[-1])
            dl, el = tl * (c * hl) - c * kl + m, eps * (tl * (c * hl) + c * kl + m)
            if not dl < -el:
                return None  # tau may lie below the bracket
            fail_d = dl + el
            t_lo, d_lo = tl, dl
    count = int(ks[bot] - (ks[top - 1] if top > 0 else k))
    if count > _radix.GATHER_MAX:
        return None
    n_above_range = int(ks[top - 1]) if top > 0 else k
    bin_lo = _radix.edge_value(ulo + (int(bins[bot]) << sh), 32)
    bin_hi = _radix.edge_value(min(uhi, ulo + ((int(bins[top]) + 1) << sh)), 32)
    # The subtraction that follows a steered support pass rounds by at most `count` ulps of
    # H: kept within 1% of resolve_gathered's margin, 1e-10 (t H + G + m) >= 1e-10 (c k + m).
    safe = (count + 1) * 2.0**-52 * (2.0 * c * float(hs[bot])) * bin_hi <= 1e-12 * (c * float(ks[bot]) + m)
    steer = _steer(t_lo, d_lo, t_hi, d_hi, bin_lo, bin_hi) if safe else float("nan")
    return bin_lo, bin_hi, count, n_above_range, last_min, fail_d, g_total, steer


def _steer(t_lo: float, d_lo: float, t_hi: float, d_hi: float, bin_lo: float, bin_hi: float) -> float:
    """Where D's zero lies in ``[bin_lo, bin_hi]`` from ``D~`` at the range's edges, or NaN.

    Between the edges D is continuous and piecewise linear in t, of slope ``H(>t)``, which
    barely changes across the range: the line through the two points crosses zero within
    ``D~``'s error over the slope (``docs/design.md`` §3; ``approx_locate`` in threshold.hpp).
    The caller has checked that subtracting the range's points above it from the support
    sums rounds within 1% of the resolution's margin.
    """
    if not (0 < d_hi < float("inf") and -float("inf") < d_lo < 0 and t_hi > t_lo):
        return float("nan")
    t0 = t_lo + (t_hi - t_lo) * (-d_lo / (d_hi - d_lo))
    return min(max(t0, bin_lo), bin_hi)


@_jit
def _collect_block(g, lo, hi, bin_lo, bin_hi, row):
    """The indices of ``[lo, hi)``'s points in ``[bin_lo, bin_hi)`` into ``row``; their number.

    Right after the block's support pass (in cache). Runs of 64 are tested branch-free
    first (vectorised; unsigned indices give plain vector loads) and walked only when one
    of their points is in the range.
    """
    c = 0
    i = lo
    while i < hi:
        e = min(hi, i + 64)
        hit = False
        for k in range(i, e):
            gk = g[np.uint64(k)]
            hit |= (gk >= bin_lo) & (gk < bin_hi)
        if hit:
            for k in range(i, e):
                if g[k] >= bin_lo and g[k] < bin_hi:
                    if c < row.shape[0]:
                        row[c] = k
                    c += 1
        i = e
    return c


@_pjit
def _support_collect(g, w, above, bin_lo, bin_hi, sketch, hits, nhits, tot_h, counts):
    """Each block's canonical sum of ``1/a`` and count over ``g >= above``, its sketch row, its points in the range."""
    n = g.shape[0]
    nblk = tot_h.shape[0]
    none = np.zeros(1)  # the losses stand-in of numba_backend._losses_arg
    for blk in nb.prange(nblk):
        lo = blk * BLOCK
        hi = min(n, lo + BLOCK)
        tot_h[blk], _, counts[blk], _ = _support_block(g, none, False, w, above, lo, hi, sketch[blk], False)
        nhits[blk] = _collect_block(g, lo, hi, bin_lo, bin_hi, hits[blk])


@_pjit
def _support_again(g, w, tau, blocks, sketch, tot_h, counts):
    """The blocks ``blocks`` summed again at ``tau``."""
    n = g.shape[0]
    none = np.zeros(1)  # the losses stand-in of numba_backend._losses_arg
    for j in nb.prange(blocks.shape[0]):
        blk = blocks[j]
        lo = blk * BLOCK
        tot_h[blk], _, counts[blk], _ = _support_block(g, none, False, w, tau, lo, min(n, lo + BLOCK), sketch[blk],
                                                       False)


def _sequential(x: np.ndarray) -> float:
    """Block totals added in block order (the canonical total)."""
    return float(np.cumsum(x)[-1]) if x.shape[0] else 0.0


def search_with_sums(gains: np.ndarray, w: float, m: float, b: int, nt: int,
                     bracket: tuple[int, int] | None = None,
                     margin_bits: int = APPROX_MARGIN_BITS, steer_at: float = -1.0) -> tuple[Any, ...] | None:
    """``(status, tau, k*, g_total, sums or None, sketch or None)``, or ``None`` where this path does not apply.

    ``bracket`` (ordered bits ``[lo, hi)``) overrides the sample's and ``margin_bits``
    the margin (test hooks: brackets that miss, and ranges of many bins); ``steer_at`` in
    ``[0, 1]`` moves where the support pass sums from, where there is an estimate of tau, to
    ``bin_lo + steer_at (bin_hi - bin_lo)`` (any value gives the same answer).
    """
    n = gains.shape[0]
    if gains.dtype != np.float32 or n == 0:
        return None
    ulo, uhi = bracket if bracket is not None else _radix.sample_bracket(gains, None, w, m, rank=_sample_rank,
                                                                         refine=refine_bracket)
    uhi = max(1, min(uhi, _radix.full_bracket(32)[1]))
    ulo = min(ulo, uhi - 1)
    # A bracket reaching below 2^-125 (the sample's, where tau lies among its smallest
    # gains) starts at 2^-125 instead: the gains below it are then below the bracket, which
    # _locate checks like any others (the C++ pass does the same).
    tiny = _radix.ordered_bits(_SMALLEST, 32)
    if ulo < tiny < uhi:
        ulo = tiny
    if not _radix.edge_value(ulo, 32) >= _SMALLEST or not 1.0 + w <= 2.0**897:  # a = (1 + w) g finite
        return None
    sh = _radix.bracket_shift(ulo, uhi, APPROX_FINE)
    raw = gains.view(np.uint32)
    res = _approx_pass(gains, raw, np.float32(_radix.edge_value(ulo, 32)), np.float32(_radix.edge_value(uhi, 32)),
                       np.uint32(ulo), np.uint32(sh), nt)
    found = _locate(res, ulo, uhi, sh, float(m), float(w), margin_bits)
    if found is None:
        return None
    bin_lo, bin_hi, count, n_above, last_min, fail_d, g_total, steer = found
    if steer_at >= 0 and not np.isnan(steer):
        steer = bin_lo + steer_at * (bin_hi - bin_lo)
    # The support pass sums over g >= start: the estimate of tau where there is one (few
    # blocks then hold a point between it and tau, to be summed again), else bin_hi.
    start = bin_hi if np.isnan(steer) else steer
    nblk = -(-n // BLOCK)
    sketch = np.full((nblk, _SKETCH_PARTS), -1.0)  # a row not written is unusable
    hits = np.empty((nblk, _ROW), np.int64)
    nhits = np.zeros(nblk, np.int64)
    tot_h = np.zeros(nblk)
    counts = np.zeros(nblk, np.int64)
    _support_collect(gains, float(w), float(start), np.float32(bin_lo), np.float32(bin_hi), sketch, hits, nhits,
                     tot_h, counts)
    parts = []
    for blk in np.flatnonzero(nhits):
        if nhits[blk] <= _ROW:
            parts.append(hits[blk, : nhits[blk]])
        else:  # a row too small: the block's points in the range again
            lo = int(blk) * BLOCK
            block = gains[lo: lo + BLOCK]
            parts.append(lo + np.flatnonzero((block >= np.float32(bin_lo)) & (block < np.float32(bin_hi))))
    idx = np.concatenate(parts) if parts else np.empty(0, np.int64)
    vals = gains[idx].astype(np.float64)
    avals = vals + w * vals
    # The sums over g >= bin_hi: the pass's, less the range's points it summed (_locate
    # bounds the rounding this adds).
    h_over, n_over = _sequential(tot_h), int(counts.sum())
    for v, a in zip(vals.tolist(), avals.tolist()):
        if v >= start and a > 0:
            h_over -= 1.0 / a
            n_over -= 1
    h_up, g_up, _, _ = rad_support_sums(h_over, n_over, w, float(bin_hi))
    # D of the smallest gain above the range (the last joining group, where the range's
    # first group fails) from these exact sums (its own group adds y/a - y/a to D).
    pass_d = last_min * h_up - g_up + m if n_above > 0 else float("inf")
    status, tau, kstar, _ = _radix.resolve_gathered(vals, avals, h_up, g_up, n_above, last_min, pass_d, fail_d,
                                                    float(m), g_total, float(m) + g_total)
    if not (status == 0 and tau > 0 and b <= kstar):
        return status, tau, kstar, g_total, None, None
    # The blocks holding a point between start and tau (all of them collected).
    between = (vals >= min(start, tau)) & (vals < max(start, tau))
    redo = np.unique(idx[between] // BLOCK).astype(np.int64)
    if redo.shape[0]:
        _support_again(gains, float(w), float(tau), redo, sketch, tot_h, counts)
    sums = rad_support_sums(_sequential(tot_h), int(counts.sum()), w, float(tau))
    return status, tau, kstar, g_total, sums, sketch.reshape(-1)

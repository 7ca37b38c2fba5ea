"""The Numba backend: the C++ kernels again, JIT-compiled (``cache=True``).

Used when the compiled module is missing. It implements :class:`rad._backends.contract.Kernels`
with the same bits as the NumPy reference (the canonical sums of
:mod:`rad._backends.canonical`, the generator of :mod:`rad._backends.rng`, the same
DepRound decisions).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import llvmlite.binding as _llvm
import numba as nb
import numpy as np
from llvmlite import ir as _ir
from numba.core import cgutils as _cgutils
from numba.core import types as _types
from numba.extending import intrinsic as _intrinsic

from rad._backends import numpy_backend as _reference
from rad._backends import radix_select as _radix
from rad._backends.canonical import BLOCK, ONE, UNIT_BITS, finish_in_place, merge_leftovers
from rad._backends.contract import SKETCH_PARTS, RoundSketch, rad_support_sums
from rad._backends.params import Params
from rad._backends.rng import GOLDEN, MIX1, MIX2, stream_state

__all__ = ["SORTFREE", "has_openmp", "name"]

name = "numba"
has_openmp = True
SORTFREE = True
_GOLDEN = np.uint64(GOLDEN)
_M1 = np.uint64(MIX1)
_M2 = np.uint64(MIX2)
_INF = np.inf
# IEEE division (x/0 is inf, as in C++, not ZeroDivisionError): no check per division, so
# the loops vectorise.
_jit = nb.njit(cache=True, nogil=True, error_model="numpy")
_pjit = nb.njit(cache=True, nogil=True, parallel=True, error_model="numpy")


# Software prefetch, as parallel.hpp's prefetch_lines: each streaming pass reads one stream
# with a division per point, which the hardware prefetcher alone serves at ~4 GB/s per core
# on the project's VM; asking for the line 4 KiB ahead reads it ~1.6x faster.
_PREFETCH_BYTES = 4096
_PREFETCH_FN = "llvm.prefetch.p0" if _llvm.llvm_version_info[0] >= 15 else "llvm.prefetch.p0i8"


@_intrinsic
def _prefetch_ahead(typingctx, arr, idx):
    """Prefetch the cache line ``_PREFETCH_BYTES`` past ``arr[idx]`` (a prefetch never faults)."""
    sig = _types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = _cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False,
                                        boundscheck=False)
        i8p = _ir.IntType(8).as_pointer()
        i32 = _ir.IntType(32)
        ahead = builder.gep(builder.bitcast(ptr, i8p), [_ir.Constant(_ir.IntType(64), _PREFETCH_BYTES)])
        fn = _cgutils.get_or_insert_function(builder.module, _ir.FunctionType(_ir.VoidType(), [i8p, i32, i32, i32]),
                                             _PREFETCH_FN)
        builder.call(fn, [ahead, i32(0), i32(3), i32(1)])  # read, keep in all levels, data cache
        return context.get_dummy_value()

    return sig, codegen


# A masked compress to memory is microcoded on AMD's Zen 4; with LLVM 19 or later the
# intrinsics compress in a register (llvm.experimental.vector.compress) and store the whole
# vector (the callers' buffers have room for it), as the C++ passes do.
_REGISTER_COMPRESS = _llvm.llvm_version_info[0] >= 19


def _emit_splat(builder, value, vty):
    """A vector of type ``vty`` with ``value`` in every lane (the intrinsics' broadcast)."""
    first = builder.insert_element(_ir.Constant(vty, _ir.Undefined), value, _ir.IntType(32)(0))
    zeros = _ir.Constant(_ir.VectorType(_ir.IntType(32), vty.count), [0] * vty.count)
    return builder.shuffle_vector(first, _ir.Constant(vty, _ir.Undefined), zeros)


def _emit_compress(builder, vec, mask):
    """The lanes of the integer vector ``vec`` selected by ``mask``, packed at its start (LLVM 19+)."""
    vty = vec.type
    fn = _cgutils.get_or_insert_function(builder.module, _ir.FunctionType(vty, [vty, mask.type, vty]),
                                         f"llvm.experimental.vector.compress.v{vty.count}i{vty.element.width}")
    return builder.call(fn, [vec, mask, _ir.Constant(vty, _ir.Undefined)])


def _emit_compress_store(builder, vec, mask, dst):
    """Store the lanes of ``vec`` selected by ``mask`` contiguously at ``dst`` (an element pointer)."""
    vty, mty = vec.type, mask.type
    if _REGISTER_COMPRESS:
        builder.store(_emit_compress(builder, vec, mask), builder.bitcast(dst, vty.as_pointer()),
                      align=vty.element.width // 8)
    else:
        fn = _cgutils.get_or_insert_function(builder.module, _ir.FunctionType(_ir.VoidType(), [vty, dst.type, mty]),
                                             f"llvm.masked.compressstore.v{vty.count}i{vty.element.width}")
        builder.call(fn, [vec, dst, mask])


def _emit_compress_store_exact(builder, vec, mask, dst):
    """:func:`_emit_compress_store` writing only the selected lanes' count of slots.

    For a buffer whose neighbour is written by another thread: the register compress is
    stored under a prefix mask (a compressing store to memory writes no more either).
    ``vec`` is an integer vector, ``dst`` a pointer to its element type.
    """
    vty, mty = vec.type, mask.type
    if not _REGISTER_COMPRESS:
        _emit_compress_store(builder, vec, mask, dst)
        return
    suffix = f"v{vty.count}i{vty.element.width}"
    packed = _emit_compress(builder, vec, mask)
    lanes = vty.count
    chunk = _ir.IntType(lanes)
    ctpop = _cgutils.get_or_insert_function(builder.module, _ir.FunctionType(chunk, [chunk]), f"llvm.ctpop.i{lanes}")
    count = builder.call(ctpop, [builder.bitcast(mask, chunk)])
    ity = _ir.VectorType(chunk, lanes)
    prefix = builder.icmp_unsigned("<", _ir.Constant(ity, list(range(lanes))), _emit_splat(builder, count, ity))
    ptr_ty = vty.as_pointer()
    pointer = "p0" if _llvm.llvm_version_info[0] >= 15 else f"p0{suffix}"
    store = _cgutils.get_or_insert_function(
        builder.module, _ir.FunctionType(_ir.VoidType(), [vty, ptr_ty, _ir.IntType(32), mty]),
        f"llvm.masked.store.{suffix}.{pointer}")
    builder.call(store, [packed, builder.bitcast(dst, ptr_ty), _ir.IntType(32)(vty.element.width // 8), prefix])


@_intrinsic
def _gather_run(typingctx, g, i0, c, c_hi, out, k_hi, k_lo):
    """Of ``g[i0:i0 + 64]``, the values ``>= c_hi`` to ``out[k_hi:]``, those in ``[c, c_hi)`` to ``out[k_lo:]``.

    Each part in order, by vector compares and compresses (16 floats or 8 doubles a
    vector); ``c`` and ``c_hi`` are of ``g``'s dtype. Returns the two counts packed as
    ``count_hi << 32 | count_lo``; writes no slot past either part's values.
    """
    sig = _types.int64(g, i0, c, c_hi, out, k_hi, k_lo)

    def codegen(context, builder, signature, args):
        i64 = _ir.IntType(64)
        gty = signature.args[0]
        width = gty.dtype.bitwidth
        lanes = 512 // width
        fty = _ir.FloatType() if width == 32 else _ir.DoubleType()
        vty = _ir.VectorType(fty, lanes)
        ety = _ir.IntType(width)  # the values are moved as integers of their width (the same bits)
        ivty = _ir.VectorType(ety, lanes)
        chunk = _ir.IntType(lanes)
        ctpop = _cgutils.get_or_insert_function(builder.module, _ir.FunctionType(chunk, [chunk]),
                                                f"llvm.ctpop.i{lanes}")

        def ptr(k, index):
            aryty = signature.args[k]
            ary = context.make_array(aryty)(context, builder, args[k])
            return _cgutils.get_item_pointer(context, builder, aryty, ary, [index], wraparound=False, boundscheck=False)

        c_v, hi_v = _emit_splat(builder, args[2], vty), _emit_splat(builder, args[3], vty)
        at_hi, at_lo = args[5], args[6]
        for k in range(64 // lanes):
            v = builder.load(builder.bitcast(ptr(0, builder.add(args[1], i64(lanes * k))), vty.as_pointer()),
                             align=width // 8)
            up = builder.fcmp_ordered(">=", v, hi_v)
            low = builder.and_(builder.fcmp_ordered(">=", v, c_v), builder.not_(up))
            bits = builder.bitcast(v, ivty)
            _emit_compress_store_exact(builder, bits, up, builder.bitcast(ptr(4, at_hi), ety.as_pointer()))
            _emit_compress_store_exact(builder, bits, low, builder.bitcast(ptr(4, at_lo), ety.as_pointer()))
            at_hi = builder.add(at_hi, builder.zext(builder.call(ctpop, [builder.bitcast(up, chunk)]), i64))
            at_lo = builder.add(at_lo, builder.zext(builder.call(ctpop, [builder.bitcast(low, chunk)]), i64))
        n_hi, n_lo = builder.sub(at_hi, args[5]), builder.sub(at_lo, args[6])
        return builder.or_(builder.shl(n_hi, i64(32)), n_lo)

    return sig, codegen


@_intrinsic
def _compress_bits(typingctx, mask, base, buf, pos):
    """Append ``base + k`` for every set bit ``k`` of the 64-bit ``mask`` to ``buf[pos:]``.

    In ascending order; returns how many. An int64 ``buf`` takes eight vector compresses of
    eight lanes, an int32 one four of sixteen (``base + k`` must fit); each stores a whole
    vector, so ``buf`` needs room for a vector (8 or 16) beyond the last index written.
    The bracket pass bins the points inside its bracket from such a buffer of indices
    (as the first pass's :func:`rad._backends.numba_first_pass._approx_run` its values; the
    caller guarantees room for 64 more in ``buf``); DepRound reads its blocks' bitmaps of
    taken items out with it.
    """
    sig = _types.int64(mask, base, buf, pos)

    def codegen(context, builder, signature, args):
        i64 = _ir.IntType(64)
        aryty = signature.args[2]
        width = aryty.dtype.bitwidth  # 64 or 32
        lanes = 512 // width
        ety = _ir.IntType(width)
        vty = _ir.VectorType(ety, lanes)
        mty = _ir.VectorType(_ir.IntType(1), lanes)
        chunk = _ir.IntType(lanes)
        ary = context.make_array(aryty)(context, builder, args[2])
        ctpop = _cgutils.get_or_insert_function(builder.module, _ir.FunctionType(chunk, [chunk]),
                                                f"llvm.ctpop.i{lanes}")
        mask_v = builder.zext(args[0], i64) if args[0].type.width < 64 else args[0]
        base = builder.trunc(args[1], ety) if width < 64 else args[1]
        splat = _emit_splat(builder, base, vty)
        at = args[3]
        start = at
        for j in range(64 // lanes):
            bits = builder.trunc(builder.lshr(mask_v, i64(lanes * j)), chunk)
            vals = builder.add(splat, _ir.Constant(vty, [lanes * j + k for k in range(lanes)]))
            ptr = _cgutils.get_item_pointer(context, builder, aryty, ary, [at], wraparound=False, boundscheck=False)
            _emit_compress_store(builder, vals, builder.bitcast(bits, mty), builder.bitcast(ptr, ety.as_pointer()))
            at = builder.add(at, builder.zext(builder.call(ctpop, [bits]), i64))
        return builder.sub(at, start)

    return sig, codegen


@_intrinsic
def _rad_support_run(typingctx, g, i0, w, tau, lanes):
    """Add the RAD terms of ``g[i0:i0 + 64]`` to the canonical lanes ``lanes`` (8 float64).

    Item ``i0 + 8 k + j`` adds ``1/a`` (``a = g + w g``) to lane ``j`` where ``g >= tau
    and a > 0``, else ``+0.0``, for ``k = 0..7`` in order; returns the count.

    :func:`_support_term` and :func:`_lanes_add` written as eight 8-wide vectors (the same
    IEEE operations lane by lane, so the same bits): LLVM vectorised those loops with
    4-wide divisions, and this run is the support pass's whole cost.
    """
    sig = _types.int64(g, i0, w, tau, lanes)

    def codegen(context, builder, signature, args):
        f64 = _ir.DoubleType()
        i64 = _ir.IntType(64)
        d8 = _ir.VectorType(f64, 8)
        l8 = _ir.VectorType(i64, 8)
        gty, lty = signature.args[0], signature.args[4]
        elem = _ir.FloatType() if gty.dtype == _types.float32 else f64
        src_ary = context.make_array(gty)(context, builder, args[0])
        lane_ary = context.make_array(lty)(context, builder, args[4])
        wv, tv = _emit_splat(builder, args[2], d8), _emit_splat(builder, args[3], d8)
        zero, one = _ir.Constant(d8, [0.0] * 8), _ir.Constant(d8, [1.0] * 8)
        lane_ptr = builder.bitcast(
            _cgutils.get_item_pointer(context, builder, lty, lane_ary, [i64(0)], wraparound=False, boundscheck=False),
            d8.as_pointer())
        h = builder.load(lane_ptr, align=8)
        count = _ir.Constant(l8, [0] * 8)
        for k in range(8):
            at = builder.add(args[1], i64(8 * k))
            ptr = _cgutils.get_item_pointer(context, builder, gty, src_ary, [at], wraparound=False, boundscheck=False)
            x = builder.load(builder.bitcast(ptr, _ir.VectorType(elem, 8).as_pointer()), align=gty.dtype.bitwidth // 8)
            if elem is not f64:
                x = builder.fpext(x, d8)
            a = builder.fadd(x, builder.fmul(wv, x))
            sel = builder.and_(builder.fcmp_ordered(">=", x, tv), builder.fcmp_ordered(">", a, zero))
            r = builder.select(sel, builder.fdiv(one, a), zero)
            h = builder.fadd(h, r)
            count = builder.add(count, builder.zext(sel, l8))
        builder.store(h, lane_ptr, align=8)
        total = builder.extract_element(count, _ir.IntType(32)(0))
        for j in range(1, 8):
            total = builder.add(total, builder.extract_element(count, _ir.IntType(32)(j)))
        return total

    return sig, codegen


@_intrinsic
def _running_run(typingctx, cum, i0, run, cross, n_cross):
    """DepRound's pass over ``cum[i0:i0 + 64]`` (units in, running mass out), 8 items a vector.

    A certain item (``units == ONE``) keeps 0 units and sets its bit of the returned word
    (bit ``k`` for item ``i0 + k``); every other item's units join the running mass, which
    starts at ``run`` and is written in place (an in-register prefix of eight lanes). The
    crossing items (where the mass's whole units grow, ``canonical.round_sequence``) are
    appended to ``cross[n_cross:]`` (int32, ascending; room for 8 past the last). Returns
    ``(run, n_cross, word)`` after the 64 items: ``cpp/include/rad/depround.hpp``'s dense
    pass, the same exact int64 sums.
    """
    sig = _types.UniTuple(_types.int64, 3)(cum, i0, run, cross, n_cross)

    def codegen(context, builder, signature, args):
        i64, i32, i8 = _ir.IntType(64), _ir.IntType(32), _ir.IntType(8)
        l8, i32x8 = _ir.VectorType(i64, 8), _ir.VectorType(i32, 8)
        cty, xty = signature.args[0], signature.args[3]
        cum_ary = context.make_array(cty)(context, builder, args[0])
        cross_ary = context.make_array(xty)(context, builder, args[3])
        ctpop = _cgutils.get_or_insert_function(builder.module, _ir.FunctionType(i8, [i8]), "llvm.ctpop.i8")
        zero = _ir.Constant(l8, [0] * 8)
        one = _ir.Constant(l8, [ONE] * 8)
        unit_bits = _ir.Constant(l8, [UNIT_BITS] * 8)
        run, at, word = args[2], args[4], i64(0)
        base32 = _emit_splat(builder, builder.trunc(args[1], i32), i32x8)

        def shifted(v, by, fill):  # lanes moved up by `by`, the first `by` lanes from `fill`
            mask = _ir.Constant(i32x8, [8 + j if j < by else j - by for j in range(8)])
            return builder.shuffle_vector(v, fill, mask)

        for k in range(8):
            at_k = builder.add(args[1], i64(8 * k))
            ptr = builder.bitcast(
                _cgutils.get_item_pointer(context, builder, cty, cum_ary, [at_k], wraparound=False, boundscheck=False),
                l8.as_pointer())
            u = builder.load(ptr, align=8)
            certain = builder.icmp_signed("==", u, one)
            u = builder.select(certain, zero, u)
            for by in (1, 2, 4):
                u = builder.add(u, shifted(u, by, zero))
            run_v = _emit_splat(builder, run, l8)
            c = builder.add(u, run_v)
            builder.store(c, ptr, align=8)
            prev = shifted(c, 1, run_v)
            crosses = builder.icmp_unsigned("!=", builder.lshr(c, unit_bits), builder.lshr(prev, unit_bits))
            dst = _cgutils.get_item_pointer(context, builder, xty, cross_ary, [at], wraparound=False, boundscheck=False)
            idx = builder.add(base32, _ir.Constant(i32x8, [8 * k + j for j in range(8)]))
            _emit_compress_store(builder, idx, crosses, dst)
            at = builder.add(at, builder.zext(builder.call(ctpop, [builder.bitcast(crosses, i8)]), i64))
            byte = builder.zext(builder.bitcast(certain, i8), i64)
            word = builder.or_(word, builder.shl(byte, i64(8 * k)))
            run = builder.extract_element(c, i32(7))
        return context.make_tuple(builder, signature.return_type, [run, at, word])

    return sig, codegen


@_jit
def _prefetch_run(arr, i, count):
    """Prefetch the lines of ``arr[i:i + count]``, ``_PREFETCH_BYTES`` ahead."""
    for k in range(i, i + count, max(1, 64 // arr.itemsize)):
        _prefetch_ahead(arr, k)


@_jit
def _splitmix(z):
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@_jit
def _uniform(state, counter):
    z = _splitmix(state + counter * _GOLDEN)
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@_jit
def _loss(losses, has_losses, w, i, g):
    return losses[i] if has_losses else w * g


@_pjit
def _first_invalid(x):
    n = x.shape[0]
    nblk = (n + BLOCK - 1) // BLOCK
    first = np.full(nblk, -1, np.int64)
    hi_val = np.finfo(x.dtype).max
    for blk in nb.prange(nblk):
        for i in range(blk * BLOCK, min(n, (blk + 1) * BLOCK)):
            v = x[i]
            if not (v >= 0 and v <= hi_val):
                first[blk] = i
                break
    for blk in range(nblk):
        if first[blk] >= 0:
            return first[blk]
    return -1


@_pjit
def _theorem1_scan(g, losses, has_losses, w, perm, m):
    n = g.shape[0]
    nblk = (n + BLOCK - 1) // BLOCK
    tot_h = np.zeros(nblk)
    tot_g = np.zeros(nblk)
    for blk in nb.prange(nblk):
        ah = 0.0
        ag = 0.0
        for p in range(blk * BLOCK, min(n, (blk + 1) * BLOCK)):
            i = perm[p]
            gi = np.float64(g[i])
            a = gi + _loss(losses, has_losses, w, i, gi)
            if a > 0:
                ah += 1.0 / a
                ag += gi / a
        tot_h[blk] = ah
        tot_g[blk] = ag
    off_h = np.zeros(nblk)
    off_g = np.zeros(nblk)
    rh = 0.0
    rg = 0.0
    for blk in range(nblk):
        off_h[blk] = rh
        off_g[blk] = rg
        rh += tot_h[blk]
        rg += tot_g[blk]
    g_total = off_g[nblk - 1] + tot_g[nblk - 1]
    fail = np.full(nblk, n, np.int64)
    for blk in nb.prange(nblk):
        lo = blk * BLOCK
        ah = 0.0
        ag = 0.0
        for p in range(lo, min(n, lo + BLOCK)):
            i = perm[p]
            gp = np.float64(g[i])
            if p == 0 or gp != np.float64(g[perm[p - 1]]):
                if p == 0:
                    he = 0.0
                    ge = 0.0
                elif p == lo:
                    he = off_h[blk]
                    ge = off_g[blk]
                else:
                    he = ah + off_h[blk]
                    ge = ag + off_g[blk]
                if not (gp * he >= ge - m):
                    fail[blk] = p
                    break
            a = gp + _loss(losses, has_losses, w, i, gp)
            if a > 0:
                ah += 1.0 / a
                ag += gp / a
    return fail.min(), g_total


@_jit
def _support_term(g, losses, has_losses, w, tau, i):
    """Item ``i``'s ``(1/a, g/a, on the support, a or inf)``, branch-free.

    An item off the support gives ``r = 0`` and ``g * 0 = +-0``, which leaves a lane's sum
    (never -0.0) unchanged, as the definition's "+ 0.0" does.
    """
    gi = np.float64(g[i])
    a = gi + _loss(losses, has_losses, w, i, gi)
    sel = (gi >= tau) & (a > 0)
    r = 1.0 / a  # 1/0 = inf (error_model="numpy"), selected away
    r = r if sel else 0.0
    return r, gi * r, sel, a if sel else _INF


@_jit
def _lanes_add(acc, buf, k):
    """The eight lane totals ``acc`` (a tuple: kept in registers) plus ``buf[k:k + 8]``, lane by lane."""
    return (acc[0] + buf[k], acc[1] + buf[k + 1], acc[2] + buf[k + 2], acc[3] + buf[k + 3],
            acc[4] + buf[k + 4], acc[5] + buf[k + 5], acc[6] + buf[k + 6], acc[7] + buf[k + 7])


@_jit
def _lanes_min(acc, buf, k):
    """:func:`_lanes_add` with ``min`` for ``+``."""
    return (min(acc[0], buf[k]), min(acc[1], buf[k + 1]), min(acc[2], buf[k + 2]), min(acc[3], buf[k + 3]),
            min(acc[4], buf[k + 4]), min(acc[5], buf[k + 5]), min(acc[6], buf[k + 6]), min(acc[7], buf[k + 7]))


# The DepRound sketch's parts per block, written out here: numba's on-disk cache follows
# this file, not contract.py.
_SKETCH_PARTS = 128
assert _SKETCH_PARTS == SKETCH_PARTS, "numba_backend._SKETCH_PARTS must equal contract.SKETCH_PARTS"
_SKETCH_SPAN = BLOCK // _SKETCH_PARTS


@_jit
def _support_block(g, losses, has_losses, w, tau, lo, hi, sketch, with_g=True):
    """One block's canonical totals ``(sum 1/a, sum g/a, count, min a)`` over the support.

    Without ``with_g`` (threshold_support with RAD losses: ``rad_support_sums`` in
    support.hpp) only ``1/a`` and the count: ``sum g/a`` comes back NaN and ``min a`` inf.

    Runs of 64 in two steps, because LLVM vectorises neither a division nor a lane's
    running sum written as one loop: the terms of the 64 items as a map into small buffers
    (vectorised), then each lane's eight items added in order from scalars (item
    ``i0 + k + j`` goes to lane ``j``: ``i0 - lo`` is a multiple of 64). At 1e8 float32
    gains on one thread: 0.27 s written as one loop, 0.13 s so. With a ``sketch`` row of
    ``_SKETCH_PARTS`` entries (else an empty one) it records the DepRound sketch:
    the sum of ``1/a`` so far at the end of each part, the block total last; ``-1``s for a
    short block (``docs/design.md`` §3, "The DepRound sketch").
    """
    sketching = sketch.shape[0] == _SKETCH_PARTS and hi - lo == BLOCK
    lh = np.zeros(8)
    lg = np.zeros(8)
    lm = np.full(8, _INF)
    r_buf = np.empty(64)
    gr_buf = np.empty(64)
    a_buf = np.empty(64)
    c = 0
    i0 = lo
    while i0 + 64 <= hi:
        if sketching and i0 > lo and (i0 - lo) % _SKETCH_SPAN == 0:
            sketch[(i0 - lo) // _SKETCH_SPAN - 1] = lh.sum()  # any order: a bound, not a canonical sum
        _prefetch_run(g, i0, 64)
        if has_losses:
            _prefetch_run(losses, i0, 64)
        if with_g:
            for j in range(64):
                r, gr, sel, a = _support_term(g, losses, has_losses, w, tau, np.uint64(i0 + j))
                r_buf[j] = r
                gr_buf[j] = gr
                a_buf[j] = a
                c += sel
        elif not has_losses:
            c += _rad_support_run(g, i0, w, tau, lh)
            i0 += 64
            continue
        else:
            for j in range(64):
                r, gr, sel, a = _support_term(g, losses, has_losses, w, tau, np.uint64(i0 + j))
                r_buf[j] = r
                c += sel
        h = (lh[0], lh[1], lh[2], lh[3], lh[4], lh[5], lh[6], lh[7])
        for k in range(0, 64, 8):
            h = _lanes_add(h, r_buf, k)
        for q in range(8):
            lh[q] = h[q]
        if with_g:
            s = (lg[0], lg[1], lg[2], lg[3], lg[4], lg[5], lg[6], lg[7])
            mn = (lm[0], lm[1], lm[2], lm[3], lm[4], lm[5], lm[6], lm[7])
            for k in range(0, 64, 8):
                s = _lanes_add(s, gr_buf, k)
                mn = _lanes_min(mn, a_buf, k)
            for q in range(8):
                lg[q] = s[q]
                lm[q] = mn[q]
        i0 += 64
    for i in range(i0, hi):
        r, gr, sel, a = _support_term(g, losses, has_losses, w, tau, i)
        lh[(i - lo) % 8] += r
        lg[(i - lo) % 8] += gr
        lm[(i - lo) % 8] = min(lm[(i - lo) % 8], a)
        c += sel
    h_total = ((lh[0] + lh[1]) + (lh[2] + lh[3])) + ((lh[4] + lh[5]) + (lh[6] + lh[7]))
    if sketch.shape[0] == _SKETCH_PARTS:
        if sketching:
            sketch[_SKETCH_PARTS - 1] = h_total
        else:
            sketch[:] = -1.0
    if not with_g:
        return h_total, np.nan, c, _INF
    return h_total, ((lg[0] + lg[1]) + (lg[2] + lg[3])) + ((lg[4] + lg[5]) + (lg[6] + lg[7])), c, lm.min()


@_pjit
def _support_sums(g, losses, has_losses, w, tau, sketch, with_g=True):
    """Canonical per-block totals: see rad._backends.canonical.block_totals.

    ``sketch`` is ``(blocks, _SKETCH_PARTS)`` to record the DepRound sketch, else ``(0, 0)``;
    ``with_g`` as :func:`_support_block`'s.
    """
    n = g.shape[0]
    nblk = (n + BLOCK - 1) // BLOCK
    tot_h = np.zeros(nblk)
    tot_g = np.zeros(nblk)
    counts = np.zeros(nblk, np.int64)
    mins = np.full(nblk, _INF)
    none = np.empty(0)
    for blk in nb.prange(nblk):
        lo = blk * BLOCK
        row = sketch[blk] if sketch.shape[0] == nblk else none
        tot_h[blk], tot_g[blk], counts[blk], mins[blk] = _support_block(g, losses, has_losses, w, tau, lo,
                                                                        min(n, lo + BLOCK), row, with_g)
    rh = 0.0
    rg = 0.0
    for blk in range(nblk):
        rh += tot_h[blk]
        rg += tot_g[blk]
    return rh, rg, counts.sum(), mins.min()


@_pjit
def _materialize(g, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf):
    n = g.shape[0]
    out = np.empty(n)
    for i in nb.prange(n):
        gi = np.float64(g[i])
        out[i] = _probability(gi, _loss(losses, has_losses, w, i, gi), fill_loss, nu, gc, gf, lc, lf)
    return out


# canonical.ONE written out here: numba's on-disk cache follows this file, not canonical.py.
_ONE = 1 << 46
assert _ONE == ONE, "numba_backend._ONE must equal canonical.ONE"
_SCALE = float(ONE)


@_jit
def _units(p):
    """canonical.quantize of one probability (branch-free)."""
    x = min(p, 1.0) if p > 0.0 else 0.0
    return np.int64(x * _SCALE + 0.5)


@_jit
def _held(cum, i):
    """The running mass before item ``i``."""
    return cum[i - 1] if i > 0 else np.int64(0)


@_jit
def _resolve(cum, s, e, base, m_start, carry, state, counter):
    if s >= e or cum[e - 1] == _held(cum, s):  # no mass in the run
        return carry, counter
    target = base + np.int64(_uniform(state, counter) * _SCALE)
    counter += np.uint64(1)
    if m_start > target:
        return carry, counter
    i = s + np.searchsorted(cum[s:e], target, side="right")
    if i < e:
        return i, counter
    total = cum[e - 1] - base
    if not (total > 0):
        return carry, counter
    target = base + np.int64(_uniform(state, counter) * np.float64(total))
    counter += np.uint64(1)
    if m_start > target:
        return carry, counter
    i = s + np.searchsorted(cum[s:e], target, side="right")
    if i < e:
        return i, counter
    i = e - 1
    while cum[i] == _held(cum, i):
        i -= 1
    return i, counter


@_jit
def _mark(bits, i):
    """Set item ``i``'s bit (bit ``i % 64`` of word ``i // 64``)."""
    bits[i >> 6] |= np.uint64(1) << np.uint64(i & 63)


@_jit
def _round_running(cum, n, state, bits, cross, n_cross, max_crossings):
    """canonical.round_sequence on the running mass ``cum[:n]``.

    Certain items are already marked in ``bits``, and the crossing items listed in
    ``cross[:n_cross]`` (:func:`_running_mass`); marks the items the pairing takes there;
    pairs at most ``max_crossings`` crossings when that is not negative. Returns the
    leftover's local index (or -1) and its mass.
    """
    counter = np.uint64(0)
    base = np.int64(0)
    m_start = np.int64(0)
    start = 0
    carry = -1
    crossings = 0
    # The k-th crossing item is the first with M >= (k + 1) ONE: every item's mass is
    # below ONE, so the mass's whole units grow by one at each listed item.
    while (max_crossings < 0 or crossings < max_crossings) and crossings < n_cross:
        j = np.int64(cross[crossings])
        crossings += 1
        pick, counter = _resolve(cum, start, j, base, m_start, carry, state, counter)
        held = _held(cum, j) - base
        alpha = _ONE - held
        beta = _ONE - (cum[j] - _held(cum, j))
        if pick < 0:
            _mark(bits, j)
            carry = -1
        else:
            u = _uniform(state, counter)
            counter += np.uint64(1)
            if u * np.float64(alpha + beta) < np.float64(beta):
                _mark(bits, pick)
                carry = j
            else:
                _mark(bits, j)
                carry = pick
        base += _ONE
        m_start = cum[j]
        start = j + 1
    pick, counter = _resolve(cum, start, n, base, m_start, carry, state, counter)
    left = np.float64(cum[n - 1] - base) / _SCALE if n > 0 else 0.0
    return pick, left


@_jit
def _running_mass(cum, n, bits, cross):
    """In place: ``cum[:n]``'s units become the running mass ``M`` (exact int64 sums).

    A certain item (``units == ONE``) keeps 0 units and is marked in ``bits`` (a bit per
    item); the crossing items (where ``M``'s whole units grow) are listed in ``cross``
    (int32, room for ``n + 8``). Returns how many crossings. Runs of 64 by
    :func:`_running_run`, eight items a vector; the tail item by item, the same sums.
    """
    run = np.int64(0)
    n_cross = np.int64(0)
    full = n & ~63
    for i0 in range(0, full, 64):
        run, n_cross, word = _running_run(cum, np.int64(i0), run, cross, n_cross)
        bits[i0 >> 6] = np.uint64(word)
    if full < n:
        word = np.uint64(0)
        for i in range(full, n):
            u = cum[i]
            certain = u == _ONE
            word |= np.uint64(certain) << np.uint64(i - full)
            u = 0 if certain else u
            if ((run + u) >> UNIT_BITS) > (run >> UNIT_BITS):
                cross[n_cross] = i
                n_cross += 1
            run += u
            cum[i] = run
        bits[full >> 6] = word
    return n_cross


@_jit
def _append_marked(bits, n, lo, out, n_out):
    """Appends ``lo + i`` for every marked item ``i < n`` to ``out[n_out:]``, ascending.

    A word without marks is skipped; a word with some is read out by vector compresses
    (:func:`_compress_bits`: ``out`` needs room for a vector, 8 or 16, past the last index).
    """
    for w in range((n + 63) >> 6):
        word = bits[w]
        if word != 0:
            n_out += _compress_bits(word, np.int64(lo + (w << 6)), out, n_out)
    return n_out


@_jit
def _probability(g, l, fill_loss, nu, gain_cut, gain_frac, loss_cut, loss_frac):
    """``q_i`` from the solution's parameters (``probability_fill`` in support.hpp).

    Without branches, so the DepRound pass vectorises; the same operations, the same bits.
    """
    a = g + l
    d = nu / a
    cap = 1.0 if a <= nu else d
    by_gain = cap if g > gain_cut else (gain_frac * cap if g == gain_cut else 0.0)
    by_loss = 1.0 if l < loss_cut else (cap + loss_frac * (1.0 - cap) if l == loss_cut else cap)
    return by_loss if fill_loss else by_gain


@_jit
def _round_sequence(q, lo, hi, state, out, n_out, max_crossings=-1):
    """DepRound of q[lo:hi]; appends taken indices to out[n_out:] in ascending order (canonical.round_sequence)."""
    n = hi - lo
    cum = np.empty(n, np.int64)
    for i in range(n):
        cum[i] = _units(q[lo + i])
    bits = np.empty((n + 63) >> 6, np.uint64)
    cross = np.empty(n + 8, np.int32)
    n_cross = _running_mass(cum, n, bits, cross)
    pick, left = _round_running(cum, n, state, bits, cross, n_cross, max_crossings)
    n_out = _append_marked(bits, n, lo, out, n_out)
    return n_out, (lo + pick if pick >= 0 else -1), left


@_jit
def _round_block_params(g, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf, blk, state, out):
    """DepRound of block ``blk`` with ``q`` computed into block-sized scratch (no array of size n).

    The units come from the same expressions as :func:`_probability`, so the same bits as
    ``materialize``. The taken positions go block-local into ``out`` (int32, ascending).
    Returns ``(count, leftover's global index or -1, its mass)``.
    """
    n = g.shape[0]
    lo = blk * BLOCK
    hi = min(n, lo + BLOCK)
    cum = np.empty(hi - lo, np.int64)
    # Unsigned indices and the prefetch, in runs of 256: a signed index compiles to
    # gathers, and unsigned loads without the prefetch wait on memory (1e8 points on
    # one thread: 111 ms signed, 184 unsigned, 57 unsigned with the prefetch).
    for s in range(0, hi - lo, 256):
        _prefetch_run(g, lo + s, 256)
        if has_losses:
            _prefetch_run(losses, lo + s, 256)
        for k in range(s, min(hi - lo, s + 256)):
            i = np.uint64(lo + k)
            gi = np.float64(g[i])
            cum[np.uint64(k)] = _units(_probability(gi, _loss(losses, has_losses, w, i, gi), fill_loss, nu, gc,
                                                    gf, lc, lf))
    bits = np.empty((hi - lo + 63) >> 6, np.uint64)
    cross = np.empty(hi - lo + 8, np.int32)
    n_cross = _running_mass(cum, hi - lo, bits, cross)
    li, lm = _round_running(cum, hi - lo, state, bits, cross, n_cross, -1)
    return _append_marked(bits, hi - lo, 0, out, 0), (lo + li if li >= 0 else -1), lm


@_pjit
def _round_blocks_params(g, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf, blocks, states, buf, counts,
                         left_idx, left_mass):
    """The block phase of DepRound for the blocks ``blocks`` (:func:`_round_block_params` each).

    The taken positions of ``blocks[j]`` are written block-local into ``buf[j]`` (int32)
    and made global by the caller.
    """
    for j in nb.prange(blocks.shape[0]):
        blk = blocks[j]
        counts[j], left_idx[blk], left_mass[blk] = _round_block_params(g, losses, has_losses, w, fill_loss, nu, gc,
                                                                       gf, lc, lf, blk, states[j], buf[j])


@_pjit
def _round_blocks_local(q, blocks, states, buf, counts, left_idx, left_mass):
    """:func:`_round_blocks_params` for a given ``q`` (block-local positions in ``buf``)."""
    n = q.shape[0]
    for j in nb.prange(blocks.shape[0]):
        blk = blocks[j]
        lo = blk * BLOCK
        hi = min(n, lo + BLOCK)
        cnt, li, lm = _round_sequence(q[lo:hi], 0, hi - lo, states[j], buf[j], 0)
        counts[j] = cnt
        left_idx[blk] = lo + li if li >= 0 else -1
        left_mass[blk] = lm


@_pjit
def _place_blocks(buf, counts, blocks, starts, out):
    """The picks of ``blocks[j]`` (block-local int32 in ``buf[j]``) as global indices at ``out[starts[j]:]``."""
    for j in nb.prange(blocks.shape[0]):
        offset = np.int64(blocks[j]) * BLOCK
        for t in range(counts[j]):
            out[starts[j] + t] = np.int64(buf[j, t]) + offset


@_jit
def _strictly_increasing(x):
    bad = 0  # counted without a branch, so that it vectorises
    for t in range(1, x.shape[0]):
        i = np.uint64(t)
        bad += x[i] <= x[i - np.uint64(1)]
    return bad == 0


def _depround_core(round_group, n: int, b: int, key: int, threads: int, sketched: Any = None) -> np.ndarray:
    """Blocks rounded in parallel groups (scratch: a few blocks per thread), then the merge.

    The taken indices go straight into the one array of ``b`` that is returned (each
    group's blocks placed in parallel), which is then finished where it lies
    (:func:`~rad._backends.canonical.finish_in_place`). With ``sketched``
    (:class:`rad._backends.numba_sketch.Sketched`) a block the sketch's draws decided is
    not rounded (such a block takes nothing, and leaves its pick; the others of its group
    are: rounding whole groups for a few undecided blocks cost 17 ms of a 1e9 select on
    two threads), the others are rounded by ``sketched.round_first`` (from their parts
    where they have crossings), and the merge runs from the bounds; where those leave it
    undecided, the sketched blocks of the groups at or before the comparison are rounded
    exactly after all, the nearest group first, in batches that double, until it is decided.
    """
    nblk = -(-n // BLOCK)
    group = 64  # blocks per parallel call: 16 MiB of int32 scratch, few Python round trips
    left_idx = np.full(nblk, -1, np.int64)
    left_mass = np.zeros(nblk)
    out = np.empty(b, np.int64)
    pos = 0
    buf = np.empty((group, BLOCK + 16), np.int32)  # + a vector: _append_marked's room
    counts = np.zeros(group, np.int64)
    decided = sketched.decided if sketched is not None else np.zeros(nblk, np.bool_)
    parts = sketched.parts if sketched is not None else np.zeros(nblk, np.bool_)

    def states_of(blocks: np.ndarray) -> np.ndarray:
        return np.array([stream_state(key, int(blk)) for blk in blocks], dtype=np.uint64)

    def round_exactly(blocks: np.ndarray) -> None:  # ascending, at most `group` of them
        round_group(blocks, states_of(blocks), buf, counts, left_idx, left_mass)
        decided[blocks] = False
        parts[blocks] = False

    first_round = sketched.round_first if sketched is not None else round_group
    for first in range(0, nblk, group):
        blocks = first + np.flatnonzero(~decided[first : first + group])
        if blocks.shape[0] == 0:
            continue
        first_round(blocks, states_of(blocks), buf, counts, left_idx, left_mass)
        starts = pos + np.concatenate(([0], np.cumsum(counts[: blocks.shape[0]])))
        if starts[-1] > b:
            raise RuntimeError(f"internal error: DepRound took more than {b} indices")
        _place_blocks(buf, counts, blocks, starts, out)
        pos = int(starts[-1])
    if sketched is not None:
        # Undecided: the sketched groups at or before the comparison are rounded exactly,
        # the nearest first, in batches that double (a decided comparison stays decided).
        batch = 1
        while True:
            decided_merge, merged, li = sketched.merge(left_idx, left_mass, b - pos)
            if decided_merge:
                break
            pending = decided | parts
            todo = [f for f in range(li // group * group, -1, -group) if pending[f : f + group].any()][:batch]
            if not todo:
                raise RuntimeError("internal error: DepRound's merge undecided on exact masses")
            for first in todo:
                blocks = first + np.flatnonzero(pending[first : first + group])
                # under one unit of mass nothing is taken; from the parts, what was taken there
                took = np.where(parts[blocks], sketched.parts_taken[blocks], 0)
                round_exactly(blocks)
                if np.any(counts[: blocks.shape[0]] != took):
                    raise RuntimeError("internal error: a sketched block took other indices")
            batch *= 2

        def round_block(blk: int) -> int:  # under one unit of mass: it takes nothing
            round_exactly(np.array([blk], np.int64))
            if counts[0]:
                raise RuntimeError("internal error: a sketched block's pick")
            return int(left_idx[blk])

        merged, li = sketched.picks(np.asarray(merged, np.int64), li, round_block)
    else:
        keep = left_mass > 0
        merged, li = _merge_leftovers(left_idx[keep], left_mass[keep], key, b - pos)
    if pos + len(merged) > b:
        raise RuntimeError(f"internal error: DepRound produced {pos + len(merged)} indices for a budget of {b}")
    out[pos : pos + len(merged)] = merged
    # The blocks' picks are ascending (each block's, and the blocks in order): only the
    # merge's picks at the end are out of place.
    return finish_in_place(out, pos + len(merged), li, b, _strictly_increasing, ascending_head=True)


def _round_one(masses: np.ndarray, state: int, max_crossings: int) -> tuple[np.ndarray, int, float]:
    """canonical.round_sequence, compiled (for canonical.merge_leftovers)."""
    out = np.empty(masses.shape[0] + 8, np.int64)  # + a vector: _append_marked's room
    cnt, li, held = _round_sequence(masses, 0, masses.shape[0], np.uint64(state), out, 0, max_crossings)
    return out[:cnt], li, held


def _merge_leftovers(ids: np.ndarray, masses: np.ndarray, key: int, wanted: int) -> tuple[list[int], int]:
    """canonical.merge_leftovers with the compiled sequence."""
    return merge_leftovers(ids, masses, key, wanted, _round_one)


def _depround_q(q: np.ndarray, b: int, key: int, threads: int = 1) -> np.ndarray:
    def round_group(blocks, states, buf, counts, left_idx, left_mass):
        _round_blocks_local(q, blocks, states, buf, counts, left_idx, left_mass)

    return _depround_core(round_group, q.shape[0], b, key, threads)


def _depround_params(gains, losses, w, params: Params, b: int, key: int, threads: int,
                     sketched: Any = None) -> np.ndarray:
    """DepRound of the probabilities ``params`` define; ``sketched`` as :func:`_depround_core`."""
    lv, has = _losses_arg(losses)
    fill, nu, gc, gf, lc, lf = params.as_tuple()

    def round_group(blocks, states, buf, counts, left_idx, left_mass):
        _round_blocks_params(gains, lv, has, float(w), bool(fill), nu, gc, gf, lc, lf, blocks, states, buf, counts,
                             left_idx, left_mass)

    return _depround_core(round_group, gains.shape[0], b, key, threads, sketched)


# ------------------------------------------------------------------ kernel contract


def _use_threads(threads: int) -> None:
    """Run the parallel kernels on ``threads`` threads (already resolved by the policy)."""
    nb.set_num_threads(max(1, min(int(threads), nb.config.NUMBA_NUM_THREADS)))


def _losses_arg(losses):
    """Numba needs one array type: a dummy array and a flag stand in for ``None``."""
    if losses is None:
        return np.zeros(1), False
    return np.ascontiguousarray(losses, dtype=np.float64), True


def first_invalid(x: np.ndarray, threads: int) -> int:
    _use_threads(threads)
    return int(_first_invalid(x))


#: The stable sorts come from the reference (NumPy's radix/merge sort is already compiled).
argsort_desc = _reference.argsort_desc


def theorem1_scan(gains, losses, w, perm, m, threads):
    _use_threads(threads)
    lv, has = _losses_arg(losses)
    k, gt = _theorem1_scan(gains, lv, has, float(w), perm, float(m))
    return int(k), float(gt)


def support_sums(gains, losses, w, tau, threads):
    _use_threads(threads)
    lv, has = _losses_arg(losses)
    h, g, c, mn = _support_sums(gains, lv, has, float(w), float(tau), _NO_SKETCH)
    return float(h), float(g), int(c), float(mn)


_NO_SKETCH = np.empty((0, 0))


#: Per-block sums (rad.dask's chunks) use the reference: they are small next to a chunk.
support_block_sums = _reference.support_block_sums


def materialize(gains, losses, w, params: Params, threads):
    _use_threads(threads)
    lv, has = _losses_arg(losses)
    fill, nu, gc, gf, lc, lf = params.as_tuple()
    return _materialize(gains, lv, has, float(w), bool(fill), nu, gc, gf, lc, lf)


@_pjit
def _support_stats(g, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf):
    n = g.shape[0]
    nblk = (n + BLOCK - 1) // BLOCK
    counts = np.zeros(nblk, np.int64)
    mins = np.full(nblk, _INF)
    for blk in nb.prange(nblk):
        c = 0
        mn = _INF
        for i in range(blk * BLOCK, min(n, (blk + 1) * BLOCK)):
            gi = np.float64(g[i])
            if _probability(gi, _loss(losses, has_losses, w, i, gi), fill_loss, nu, gc, gf, lc, lf) > 0:
                c += 1
                mn = min(mn, gi)
        counts[blk] = c
        mins[blk] = mn
    return counts.sum(), mins.min() if nblk else _INF


def support_stats(gains, losses, w, params: Params, threads):
    """Streamed per block (no ``q`` array): the count of ``q_i > 0`` and their least gain."""
    _use_threads(threads)
    lv, has = _losses_arg(losses)
    fill, nu, gc, gf, lc, lf = params.as_tuple()
    count, least = _support_stats(gains, lv, has, float(w), bool(fill), nu, gc, gf, lc, lf)
    return int(count), float(least) if count else float("inf")


def depround_q(q, b, key, threads):
    _use_threads(threads)
    return _depround_q(np.ascontiguousarray(q, dtype=np.float64), int(b), int(key), threads)


def depround_sketched(gains, losses, w, params: Params, b, key, sketch, threads):
    """:func:`depround_params`, the same indices, from the sketch where it applies.

    See :mod:`rad._backends.numba_sketch`.
    """
    from rad._backends import numba_sketch

    if sketch is None or not numba_sketch.applies(gains.shape[0], params, sketch):
        return depround_params(gains, losses, w, params, b, key, threads)
    _use_threads(threads)
    return numba_sketch.depround(gains, losses, w, params, int(b), int(key), sketch, threads)


def depround_params(gains, losses, w, params: Params, b, key, threads):
    """Streamed: each block's ``q`` is computed into block-sized scratch (no ``q`` array)."""
    _use_threads(threads)
    return _depround_params(gains, losses, w, params, int(b), int(key), threads)


@_pjit
def _span_sums(g, w, span, out):
    n = g.shape[0]
    for s in nb.prange(out.shape[1]):
        inv = 0.0
        ga = 0.0
        gs = 0.0
        for i in range(s * span, min(n, (s + 1) * span)):
            x = float(g[i])
            a = w * x + x
            if a > 0:
                inv += 1.0 / a
                ga += x / a
            gs += x
        out[0, s] = inv
        out[1, s] = ga
        out[2, s] = gs


def span_sums(g, w, span, threads):
    _use_threads(threads)
    out = np.zeros((3, -(-g.shape[0] // int(span))))
    _span_sums(g, float(w), int(span), out)
    return out


@_pjit
def _count_at_least(g, t, t_hi, counts):
    # Unsigned indices and the prefetch, as in the bracket pass: a signed index compiles to
    # gathers here (Python's negative-index wraparound), and the pass waits on memory.
    n = g.shape[0]
    for blk in nb.prange(counts.shape[1]):
        c_hi = 0
        c = 0
        end = min(n, (blk + 1) * BLOCK)
        for s in range(blk * BLOCK, end, 256):
            _prefetch_run(g, s, 256)
            for ii in range(s, min(end, s + 256)):
                v = float(g[np.uint64(ii)])
                c_hi += v >= t_hi
                c += v >= t
        counts[0, blk] = c_hi
        counts[1, blk] = c - c_hi


@_pjit
def _write_at_least(g, t, t_hi, c, c_hi, offsets, out):
    # c, c_hi: the least values of g's dtype at or above t, t_hi (the vector compares')
    n = g.shape[0]
    one = t_hi == np.inf  # one part (no value is >= inf): the values >= c, gathered as a first part at k
    for blk in nb.prange(offsets.shape[1] - 1):
        k_hi = offsets[0, blk]
        k = offsets[1, blk]
        end = min(n, (blk + 1) * BLOCK)
        for s in range(blk * BLOCK, end, 256):
            _prefetch_run(g, s, 256)
            stop = min(end, s + 256)
            i = s
            while i + 64 <= stop:  # vector compresses into each part's place
                if one:  # (its empty second part is pointed at the same place: nothing is stored there)
                    k += _gather_run(g, i, c, c, out, k, k) >> 32
                else:
                    packed = _gather_run(g, i, c, c_hi, out, k_hi, k)
                    k_hi += packed >> 32
                    k += packed & 0xFFFFFFFF
                i += 64
            for ii in range(i, stop):
                v = g[np.uint64(ii)]
                if float(v) >= t_hi:
                    out[k_hi] = v
                    k_hi += 1
                elif float(v) >= t:
                    out[k] = v
                    k += 1


def values_at_least(g, t, threads, splits=()):
    """Each block counts its values ``>= t`` (and ``>= splits[0]``), then writes them at its offsets.

    With two splits or more the values are gathered as one part, then cut into parts
    (:func:`_count_parts`, :func:`_write_parts`).
    """
    _use_threads(threads)
    t_hi = max(float(t), float(splits[0])) if len(splits) == 1 else math.inf
    counts = np.zeros((2, -(-g.shape[0] // BLOCK)), dtype=np.int64)
    _count_at_least(g, float(t), t_hi, counts)
    offsets = np.zeros((2, counts.shape[1] + 1), dtype=np.int64)
    np.cumsum(counts[0], out=offsets[0, 1:])
    offsets[1, 0] = offsets[0, -1]
    np.cumsum(counts[1], out=offsets[1, 1:])
    offsets[1, 1:] += offsets[1, 0]
    out = np.empty(int(offsets[1, -1]), dtype=g.dtype)
    c, c_hi = _reference.at_least(g.dtype, float(t)), _reference.at_least(g.dtype, t_hi)
    _write_at_least(g, float(t), t_hi, c, c_hi, offsets, out)
    if len(splits) == 0:
        return out, np.array([out.shape[0]], dtype=np.int64)
    if len(splits) == 1:
        return out, np.array([offsets[0, -1], out.shape[0]], dtype=np.int64)
    cuts = np.array([_reference.at_least(g.dtype, float(s)) for s in splits], dtype=g.dtype)
    counts = np.zeros((len(splits) + 1, -(-out.shape[0] // _PART_CHUNK)), dtype=np.int64)
    _count_parts(out, cuts, counts)
    # where each chunk's values of each part go: part-major, then chunk (each part in index order)
    starts = (np.cumsum(counts.reshape(-1)) - counts.reshape(-1)).reshape(counts.shape)
    parted = np.empty_like(out)
    _write_parts(out, cuts, starts, parted)
    return parted, np.cumsum(counts.sum(axis=1))


#: Values per chunk of :func:`_count_parts` and :func:`_write_parts` (the tops are short).
_PART_CHUNK = 1 << 13


@_jit
def _part_of(v, cuts):
    """``#{i : v < cuts[i]}``: the part of a value (``cuts`` in ``v``'s dtype)."""
    j = 0
    for c in cuts:
        j += v < c
    return j


@_pjit
def _count_parts(x, cuts, counts):
    n = x.shape[0]
    for k in nb.prange(counts.shape[1]):
        local = np.zeros(counts.shape[0], dtype=np.int64)  # (the chunks' counts of a part share cache lines)
        for i in range(k * _PART_CHUNK, min(n, (k + 1) * _PART_CHUNK)):
            local[_part_of(x[i], cuts)] += 1
        counts[:, k] = local


@_pjit
def _write_parts(x, cuts, starts, out):
    n = x.shape[0]
    for k in nb.prange(starts.shape[1]):
        pos = starts[:, k].copy()
        for i in range(k * _PART_CHUNK, min(n, (k + 1) * _PART_CHUNK)):
            j = _part_of(x[i], cuts)
            out[pos[j]] = x[i]
            pos[j] += 1


#: The capped path's F(nu) and rad.dask's per-chunk rounding use the reference.
capped_eval = _reference.capped_eval
depround_blocks = _reference.depround_blocks


# ------------------------------------------------------------ sort-free threshold search
# One level of the radix select of rad._backends.radix_select (the loop lives there).

_NBINS = _radix.NBINS


_INSIDE_BUF = 1024  # points inside a bracket binned per batch (_bracket_range)


@_jit
def _bits(raw, sign):
    """Ordered bits of a non-negative float from its raw bits (-0.0 folded onto 0)."""
    u = np.uint64(raw)
    return np.uint64(0) if u == sign else u


@_pjit
def _histogram(g, raw, sign, losses, has_losses, w, nbits, shift, pshift, prefix, nt):
    n = g.shape[0]
    cnt = np.zeros((nt, _NBINS), np.int64)
    hh = np.zeros((nt, _NBINS))
    gg = np.zeros((nt, _NBINS))
    mn = np.full((nt, _NBINS), np.inf)
    bad = np.zeros(nt, np.bool_)
    mask = np.uint64(_NBINS - 1)
    hi_val = np.finfo(g.dtype).max
    for t in nb.prange(nt):
        lo = n * t // nt
        hi = n * (t + 1) // nt
        for i in range(lo, hi):
            v = g[i]
            if not (v >= 0 and v <= hi_val):
                bad[t] = True
                continue
            u = _bits(raw[i], sign)
            if pshift < nbits and (u >> np.uint64(pshift)) != prefix:
                continue
            b = (u >> np.uint64(shift)) & mask
            gi = np.float64(v)
            a = gi + _loss(losses, has_losses, w, i, gi)
            r = 1.0 / a if a > 0 else 0.0
            cnt[t, b] += 1
            hh[t, b] += r
            gg[t, b] += gi * r
            if gi < mn[t, b]:
                mn[t, b] = gi
    c0 = cnt[0].copy()
    h0 = hh[0].copy()
    g0 = gg[0].copy()
    m0 = mn[0].copy()
    for t in range(1, nt):
        for b in range(_NBINS):
            c0[b] += cnt[t, b]
            h0[b] += hh[t, b]
            g0[b] += gg[t, b]
            m0[b] = min(m0[b], mn[t, b])
    return c0, h0, g0, m0, bad.any()


@_jit
def _gather(g, raw, sign, losses, has_losses, w, shift, key, count):
    vals = np.empty(count)
    avals = np.empty(count)
    j = 0
    for i in range(g.shape[0]):
        v = g[i]
        if (_bits(raw[i], sign) >> np.uint64(shift)) != key:
            continue
        gi = np.float64(v)
        vals[j] = gi
        avals[j] = gi + _loss(losses, has_losses, w, i, gi)
        j += 1
    return vals[:j], avals[:j]


def _bit_view(gains):
    nbits = 32 if gains.dtype == np.float32 else 64
    raw = gains.view(np.uint32 if nbits == 32 else np.uint64)
    return nbits, raw, np.uint64(1 << (nbits - 1))


def bit_histogram(gains, losses, w, shift, pshift, prefix, threads):
    _use_threads(threads)
    lv, has = _losses_arg(losses)
    nbits, raw, sign = _bit_view(gains)
    return _histogram(gains, raw, sign, lv, has, float(w), nbits, shift, pshift, np.uint64(prefix), max(1, threads))


def bit_gather(gains, losses, w, shift, key, count, threads):
    lv, has = _losses_arg(losses)
    _, raw, sign = _bit_view(gains)
    return _gather(gains, raw, sign, lv, has, float(w), shift, np.uint64(key), count)


# ------------------------------------------------------------------ bracketed first pass
# The default search (rad._backends.radix_select.bracket_resolve; threshold.hpp): one
# pass sums the points above a sampled bracket and histograms the few inside it.

_FINE = _radix.FINE
@nb.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
def _bracket_range(g, raw, sign, inf_bits, losses, has_losses, w, lo_v, hi_v, ulo, sh, lo, hi, cnt, hh, gg, mn):
    """One thread's share of the bracket pass.

    The first loop of each run of 64 is branch-free so that LLVM vectorises it
    (``reassoc``: these sums only steer decisions with a rounding margin); validation
    compares the raw bits (no float flags involved). The indices of the few points inside
    the bracket go to a buffer (:func:`_compress_bits`), histogrammed in batches.
    """
    gt = 0.0
    ha = 0.0
    ga = 0.0
    minb = inf_bits
    na = 0
    nbl = 0
    bad = 0
    buf = np.empty(_INSIDE_BUF + 64, np.int64)  # indices of the points inside, binned in batches
    nbuf = 0
    for c0 in range(lo, hi, 64):
        c1 = min(hi, c0 + 64)
        _prefetch_run(g, c0, 64)
        if has_losses:
            _prefetch_run(losses, c0, 64)
        inmask = np.uint64(0)
        for ii in range(c0, c1):
            i = np.uint64(ii)
            u = raw[i]
            bad += (u >= inf_bits) & (u != sign)
            gi = np.float64(g[i])
            a = gi + (losses[i] if has_losses else w * gi)
            pos = a > 0
            r = 1.0 / a  # 1/0 = inf (error_model="numpy"), selected away
            r = r if pos else 0.0
            gr = gi * r
            gt += gr
            up = gi >= hi_v
            below = gi < lo_v
            ha += r if up else 0.0
            ga += gr if up else 0.0
            na += up
            minb = min(minb, u if up else inf_bits)
            nbl += below
            # Inside: lo <= g < hi, which a NaN is not (it is neither up nor below, and
            # its bin would lie past the histogram's end).
            inmask |= np.uint64((gi >= lo_v) & (not up)) << np.uint64(ii - c0)
        # Binned in batches, each point's 1/a again (the same operations): a branch per
        # run on its points inside cost more than the rest of the pass.
        nbuf += _compress_bits(inmask, c0, buf, nbuf)
        if nbuf > _INSIDE_BUF or c1 == hi:
            for j in range(nbuf):
                i = buf[j]
                gi = np.float64(g[i])
                a = gi + _loss(losses, has_losses, w, i, gi)
                r = 1.0 / a if a > 0 else 0.0
                b = (_bits(raw[i], sign) - ulo) >> sh
                cnt[b] += 1
                hh[b] += r
                gg[b] += gi * r
                if gi < mn[b]:
                    mn[b] = gi
            nbuf = 0
    return gt, ha, ga, minb, na, nbl, bad


@_pjit
def _bracket_pass(g, raw, sign, inf_bits, losses, has_losses, w, lo_v, hi_v, ulo, sh, nt):
    n = g.shape[0]
    cnt = np.zeros((nt, _FINE), np.int64)
    hh = np.zeros((nt, _FINE))
    gg = np.zeros((nt, _FINE))
    mn = np.full((nt, _FINE), np.inf)
    sums = np.zeros((nt, 3))
    counts = np.zeros((nt, 3), np.int64)
    minbits = np.zeros(nt, raw.dtype)
    for t in nb.prange(nt):
        gt, ha, ga, minb, na, nbl, bad = _bracket_range(
            g, raw, sign, inf_bits, losses, has_losses, w, lo_v, hi_v, ulo, sh, n * t // nt, n * (t + 1) // nt,
            cnt[t], hh[t], gg[t], mn[t])
        sums[t, 0] = gt
        sums[t, 1] = ha
        sums[t, 2] = ga
        minbits[t] = minb
        counts[t, 0] = na
        counts[t, 1] = nbl
        counts[t, 2] = bad
    c0 = cnt[0].copy()
    h0 = hh[0].copy()
    g0 = gg[0].copy()
    m0 = mn[0].copy()
    for t in range(1, nt):
        for b in range(_FINE):
            c0[b] += cnt[t, b]
            h0[b] += hh[t, b]
            g0[b] += gg[t, b]
            m0[b] = min(m0[b], mn[t, b])
    per_thread = cnt.copy()
    return (counts[:, 2].sum() > 0, sums[:, 0].sum(), sums[:, 1].sum(), sums[:, 2].sum(), counts[:, 0].sum(),
            minbits.min(), counts[:, 1].sum(), c0, h0, g0, m0, per_thread)


@_jit
def _gather_range(g, losses, has_losses, w, bin_lo, bin_hi, lo, hi, vals, avals, j):
    """Write the (g, a) of ``[lo, hi)``'s points in ``[bin_lo, bin_hi)`` from ``j``; the new ``j``.

    The fine bin is a range of values (ordered bits are the raw bits of non-negative
    values, and every value is valid by now), so the test is two compares. Runs of 64 are
    tested branch-free first (as threshold.hpp's gather) and walked only when one of their
    points is in the bin.
    """
    i = lo
    while i < hi:
        e = min(hi, i + 64)
        _prefetch_run(g, i, 64)
        hit = False
        for k in range(i, e):
            gk = g[np.uint64(k)]  # unsigned: no wraparound, so plain vector loads
            hit |= (gk >= bin_lo) & (gk < bin_hi)
        if hit:
            for k in range(i, e):
                if g[k] >= bin_lo and g[k] < bin_hi:
                    gi = np.float64(g[k])
                    vals[j] = gi
                    avals[j] = gi + (losses[k] if has_losses else w * gi)
                    j += 1
        i = e
    return j


@_pjit
def _bracket_gather(g, losses, has_losses, w, bin_lo, bin_hi, per_thread, nt):
    """The (g, a) of the points in ``[bin_lo, bin_hi)``; thread t writes at its offset."""
    n = g.shape[0]
    offs = np.zeros(nt + 1, np.int64)
    for t in range(nt):
        offs[t + 1] = offs[t] + per_thread[t]
    vals = np.empty(offs[nt])
    avals = np.empty(offs[nt])
    for t in nb.prange(nt):
        _gather_range(g, losses, has_losses, w, bin_lo, bin_hi, n * t // nt, n * (t + 1) // nt, vals, avals,
                      offs[t])
    return vals, avals


def threshold_bracketed(gains, losses, w, m, threads, lo, hi):
    """The bracketed search with a chosen bracket ``[lo, hi)`` of gain values (test hook)."""
    nbits = 32 if gains.dtype == np.float32 else 64
    return _bracketed(gains, losses, w, m, threads, _radix.ordered_bits(lo, nbits), _radix.ordered_bits(hi, nbits))


def _bracketed(gains, losses, w, m, threads, ulo, uhi):
    nbits, raw, sign = _bit_view(gains)
    n = gains.shape[0]
    uhi = max(1, min(uhi, _radix.full_bracket(nbits)[1]))
    if ulo >= uhi:
        ulo = uhi - 1
    if n == 0:
        return _radix.threshold_search(sys.modules[__name__], gains, losses, w, m, threads)
    _use_threads(threads)
    nt = max(1, min(int(threads), -(-n // BLOCK)))
    lv, has = _losses_arg(losses)
    sh = _radix.bracket_shift(ulo, uhi)
    udt = raw.dtype.type
    inf_bits = _radix.full_bracket(nbits)[1]
    res = _bracket_pass(gains, raw, udt(1 << (nbits - 1)), udt(inf_bits), lv, has, float(w),
                        _radix.edge_value(ulo, nbits), _radix.edge_value(uhi, nbits), udt(ulo), udt(sh), nt)
    per_thread = res[-1]
    minb = int(res[5])
    res = res[:5] + (_radix.edge_value(minb, nbits) if minb < inf_bits else float("inf"),) + res[6:]

    def gather(b):
        # Fine bin b as the value range [bin_lo, bin_hi) (its top edge clipped to the bracket's).
        bin_lo = _radix.edge_value(ulo + (b << sh), nbits)
        bin_hi = _radix.edge_value(min(uhi, ulo + ((b + 1) << sh)), nbits)
        return _bracket_gather(gains, lv, has, float(w), bin_lo, bin_hi, per_thread[:, b].copy(), nt)

    def fallback():
        return _radix.threshold_search(sys.modules[__name__], gains, losses, w, m, threads)

    return _radix.bracket_resolve(res[:-1], ulo, uhi, sh, nbits, float(m), gather, fallback)


def threshold_support(gains, losses, w, m, b, threads):
    """:func:`threshold_search`, then :func:`support_sums` recording the DepRound sketch.

    With float32 gains and RAD losses, in two reads where the float32 first pass decides
    (:mod:`rad._backends.numba_first_pass`).
    """
    if losses is None and gains.dtype == np.float32 and gains.shape[0] > 0:
        from rad._backends import numba_first_pass

        _use_threads(threads)
        out = numba_first_pass.search_with_sums(gains, float(w), float(m), int(b),
                                                max(1, min(int(threads), -(-gains.shape[0] // BLOCK))))
        if out is not None:
            status, tau, kstar, g_total, sums, prefixes = out
            return (int(status), float(tau), int(kstar), float(g_total), sums,
                    RoundSketch(float(tau), prefixes) if sums is not None else None)
    status, tau, kstar, g_total = threshold_search(gains, losses, w, m, threads)
    if not (status == 0 and tau > 0 and b <= kstar):
        return int(status), float(tau), int(kstar), float(g_total), None, None
    _use_threads(threads)
    lv, has = _losses_arg(losses)
    sketch = np.full((-(-gains.shape[0] // BLOCK), _SKETCH_PARTS), -1.0)  # a row not written is unusable
    h, g, c, mn = _support_sums(gains, lv, has, float(w), float(tau), sketch, has)
    sums = (float(h), float(g), int(c), float(mn)) if has else rad_support_sums(float(h), int(c), float(w), float(tau))
    return int(status), float(tau), int(kstar), float(g_total), sums, RoundSketch(float(tau), sketch.reshape(-1))


@_jit
def _sample_rank(y, a, f, m):
    """:func:`rad._backends.radix_select.sample_rank` compiled: the same sums, the same bits.

    It stops at the first failing rank (about ``0.3`` of the sample at ``m = 0.3 n``),
    where the NumPy scan forms every rank's ``D``: 1.5 ms of a 2^16 sample, a serial
    step of every select.
    """
    h = 0.0
    gs = 0.0
    for j in range(y.shape[0]):
        if y[j] * f * h - f * gs + m < 0:
            return j
        if a[j] > 0:  # a <= 0 adds 0 to both sums, which leaves them as they are
            r = 1.0 / a[j]
            h += r
            gs += y[j] * r
    return y.shape[0]


def threshold_search(gains, losses, w, m, threads):
    """Sort-free k*: ``(status, tau, kstar, g_total)`` (sample bracket, then one pass)."""
    from rad._backends.numba_refine import refine_bracket

    _use_threads(threads)  # (the second sample's threads; explicit losses take none)
    refine = refine_bracket if losses is None else None
    ulo, uhi = _radix.sample_bracket(gains, losses, w, m, rank=_sample_rank, refine=refine)
    return _bracketed(gains, losses, w, m, threads, ulo, uhi)

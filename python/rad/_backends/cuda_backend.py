# mypy: disallow-untyped-defs=False, disallow-untyped-calls=False, disallow-incomplete-defs=False
# mypy: disallow-any-generics=False, warn-return-any=False
# (numba kernels are typed by numba when they compile: the same relaxations as numba_backend)
"""The CUDA backend: sort-free search, canonical sums and streaming DepRound on the GPU.

GPU kernels written with numba-cuda (the ``[cuda]`` extra).

It implements :class:`rad._backends.contract.Kernels` on *device* arrays (numba device
arrays; :mod:`rad._solve.device` adapts CuPy, PyTorch and JAX arrays to them without a
copy). The kernels that decide the result reproduce the CPU backends bit for bit:

* :func:`threshold_search` is the bracketed search of :mod:`rad._backends.radix_select`
  (``sample_bracket`` on 2^14 points, 2^16 from 2^28, gathered on the device, one pass
  that sums the points above the bracket and bins the few inside it, or from 2^24 points
  queues them for a second kernel to bin, the boundary bin gathered and resolved by
  ``bracket_resolve``), with the 16-bit level loop over device histograms as
  its fallback. Bin sums are accumulated with atomics (a shared-memory cache of bins per
  CUDA block, then global atomics): they only steer decisions that carry a rounding
  margin, and a gathered bin is put back in index order before it is resolved, so ``k*``
  and the threshold are those of the CPU backends. Float32 gains with RAD losses take
  a cheaper pass (``_bracket32_kernel``, see the note above it and docs/design.md §3).
* :func:`support_sums` sums in the canonical order of :mod:`rad._backends.canonical`:
  items ``p = lane, lane + 8, ...`` of a 65,536-item block summed sequentially per lane,
  the eight lanes combined as ``((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7))``, the block totals
  added sequentially on the host; a thread per (block, lane) for large pools, shared-
  memory tiles for up to 4,096 blocks (``_support_kernel``). Products feeding a sum are rounded
  with ``__dmul_rn`` and sums with ``__dadd_rn`` where NVVM could contract them into an
  FMA; divisions are IEEE (``div.rn``).
* :func:`depround_params` / :func:`depround_q` run the fixed-point sequence of
  :func:`rad._backends.canonical.round_sequence` (docs/design.md §1, "DepRound") in two
  phases: every probability becomes int64 units of 2^46 (``canonical.quantize``, the same
  IEEE expression); a CUDA block per 2,048 points quantizes them (coalesced reads) and
  writes the int64 totals of every 64 points and of the 2,048 (exact sums, so the chunk
  totals give the running mass in any order) and marks the certain points; then a thread
  per 65,536-point block walks the 2,048-point totals on the stream ``(key, block)`` of
  :mod:`rad._backends.rng`, descends to the 64-point totals and to the items only where a
  multiple of 2^46 is crossed or a run's target falls. Taken points go to a device
  bitmap; the block leftovers are merged as ``canonical.merge_leftovers`` does (up to
  65,536 of them on :data:`~rad._backends.rng.MERGE_STREAM` by the same kernels, more on
  the host), and a CUDA block per DepRound block compacts its part of the bitmap into
  sorted indices on the device. Same key, same indices as every CPU backend.

The kernels the GPU fast path never needs (the sorted scan, the capped path's dual
function, rad.dask's per-chunk rounding) copy to the host and use a CPU backend; the
solver only reaches them through an explicit host fallback (:mod:`rad._solve.device`).

Without a GPU (``numba.cuda.is_available()`` False) importing this module raises
``ImportError``, so the registry reports the backend unavailable with an install hint. Set
``NUMBA_ENABLE_CUDASIM=1`` (before numba is imported) to run it on numba's CUDA simulator.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

import numpy as np
from numba import config as _nb_config

from rad._backends import import_numba_cuda
from rad._backends import radix_select as _radix
from rad._backends.canonical import BLOCK, LANES, MERGE_GROUP, ONE, merge_leftovers
from rad._backends.contract import SKETCH_PARTS, RoundSketch, search_then_sums
from rad._backends.params import Params
from rad._backends.rng import GOLDEN, MERGE_STREAM, MIX1, MIX2

__all__ = ["SIMULATOR", "SORTFREE", "has_openmp", "name"]

#: numba.cuda (its thread indexing and atomics exist only inside kernels: Any for mypy).
cuda: Any = import_numba_cuda()
SIMULATOR = bool(getattr(_nb_config, "ENABLE_CUDASIM", 0))
if not cuda.is_available():
    raise ImportError(
        "no CUDA GPU is visible to numba-cuda (numba.cuda.is_available() is False): the 'cuda' "
        "backend needs an NVIDIA GPU with its driver (or NUMBA_ENABLE_CUDASIM=1 for numba's "
        "simulator)"
    )

if SIMULATOR:
    # The simulator runs a block's threads as Python threads, and each device-function call
    # scans this module's globals while other threads run. The first warning raised in this
    # module's code (a NumPy scalar overflow in a kernel thread, where the caller's np.seterr
    # does not reach) adds __warningregistry__ to them, so a scan can fail with
    # "dictionary changed size during iteration". Made here, it never appears mid-scan.
    globals().setdefault("__warningregistry__", {})

name = "cuda"
has_openmp = False
SORTFREE = True

_GOLDEN = np.uint64(GOLDEN)
_M1 = np.uint64(MIX1)
_M2 = np.uint64(MIX2)
_NBINS = _radix.NBINS
_BLOCK = BLOCK
_LANES = LANES
_TPB = 16 if SIMULATOR else 256  # threads per CUDA block for the streaming kernels (few in the simulator)
_ROUND_TPB = 8 if SIMULATOR else 64  # threads per CUDA block for the per-block DepRound (one per block)
_WORDS = BLOCK // 32  # bitmap words per DepRound block
_SLOTS = 64 if SIMULATOR else 1024  # shared-memory bin cache of the histogram kernel (36 KB)
_UMAX = np.uint64(np.iinfo(np.uint64).max)

#: Kernels are cached on disk (compiled once per GPU architecture, not at every start).
_kernel = cuda.jit(cache=True)

if SIMULATOR:  # the simulator's libdevice is a stub; Python floats round each product anyway

    @cuda.jit(device=True)
    def _mul(a, b):
        return a * b

    @cuda.jit(device=True)
    def _fma_free_add(a, b):
        return a + b

else:
    from numba.cuda import libdevice as _ld

    @cuda.jit(device=True)
    def _mul(a, b):
        return _ld.dmul_rn(a, b)  # rounded product: NVVM may not fuse it into an FMA

    @cuda.jit(device=True)
    def _fma_free_add(a, b):
        return _ld.dadd_rn(a, b)


# --------------------------------------------------------------------------- helpers


@cuda.jit(device=True)
def _splitmix(z):
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@cuda.jit(device=True)
def _uniform(state, counter):
    z = _splitmix(state + counter * _GOLDEN)
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@cuda.jit(device=True)
def _loss(losses, has_losses, w, i, g):
    if has_losses:
        return losses[i]
    return _mul(w, g)


@cuda.jit(device=True)
def _cap(g, l, nu):
    a = _fma_free_add(g, l)
    return 1.0 if a <= nu else nu / a


@cuda.jit(device=True)
def _probability(g, l, fill_loss, nu, gain_cut, gain_frac, loss_cut, loss_frac):
    """The rule of rad._backends.params, expression for expression.

    The cap ``min(1, nu / a)`` is formed only where the rule uses it: most points of a
    large pool are below the cut, and the division is the costly part of a point.
    """
    if not fill_loss:
        if g > gain_cut:
            return _cap(g, l, nu)
        if g == gain_cut:
            return _mul(gain_frac, _cap(g, l, nu))
        return 0.0
    if l < loss_cut:
        return 1.0
    cap = _cap(g, l, nu)
    if l == loss_cut:
        return _fma_free_add(cap, _mul(loss_frac, 1.0 - cap))
    return cap


@cuda.jit(device=True)
def _prob_of(v, losses, has_losses, w, use_q, i, fill_loss, nu, gc, gf, lc, lf):
    """Item ``i``'s probability from its loaded value ``v``: ``q[i]`` itself, or its gain's."""
    if use_q:
        return v
    return _probability(v, _loss(losses, has_losses, w, i, v), fill_loss, nu, gc, gf, lc, lf)


@cuda.jit(device=True)
def _prob_at(g, losses, has_losses, w, q, use_q, i, fill_loss, nu, gc, gf, lc, lf):
    v = q[i] if use_q else np.float64(g[i])
    return _prob_of(v, losses, has_losses, w, use_q, i, fill_loss, nu, gc, gf, lc, lf)


def _grid(n: int, tpb: int = _TPB) -> int:
    """Blocks to cover ``n`` threads (kernels with one thread per item or per block)."""
    return max(1, -(-n // tpb))


def _stride_grid(n: int) -> int:
    """Blocks for the grid-stride kernels: a few waves on a GPU, a couple in the simulator."""
    return max(1, min(-(-n // _TPB), 4 if SIMULATOR else 8192))


_SMS: list[int] = []


def _sm_count() -> int:
    """The GPU's multiprocessors (1 on the simulator)."""
    if not _SMS:
        try:
            _SMS.append(int(cuda.get_current_device().MULTIPROCESSOR_COUNT))
        except Exception:  # the simulator's device has no attributes
            _SMS.append(1)
    return _SMS[0]


def _resident_grid(n: int) -> int:
    """Blocks for kernels with per-block shared state: about six resident per SM."""
    return max(1, min(-(-n // _TPB), 6 * _sm_count()))


#: Per kernel (its ``id``): how many of its CUDA blocks fit on the GPU at once (see :func:`_wave`).
_WAVES: dict[int, int] = {}


def _wave(kernel: Any) -> int | None:
    """How many of ``kernel``'s ``_TPB``-thread CUDA blocks fit on the GPU at once.

    Read from the compiled kernel (registers and shared memory; the driver's occupancy
    calculator) and kept; ``None`` before its first compilation, and in the simulator.
    """
    if SIMULATOR:
        return None
    key = id(kernel)  # (the kernels are module globals: they live as long as the process)
    if key not in _WAVES:
        try:
            _WAVES[key] = max(1, min(k.max_cooperative_grid_blocks(_TPB) for k in kernel.overloads.values()))
        except Exception:  # not compiled yet (no overload), or no occupancy query
            return None
    return _WAVES[key]


def _wave_grid(kernel: Any, n: int) -> int:
    """:func:`_resident_grid` cut to one wave of ``kernel``: every CUDA block resident at once.

    A grid-stride pass whose grid is more than fits runs a second, part-empty wave. When
    the float32 pass took 52 registers a thread (ptxas, sm_90), 4 of its CUDA blocks fit
    on an SM, not the 6 its shared memory allows: six a SM ran 1.5 waves, and twice that
    grid (3 whole waves) was 11% faster on the H200. (Branch-free it takes 40, and 6 fit.)
    The first call, which compiles the kernel, keeps the resident grid.
    """
    grid = _resident_grid(n)
    wave = _wave(kernel)
    return grid if wave is None else max(1, min(grid, wave))


def _dummy() -> Any:
    """The placeholder of an absent array argument (never read): one reused float64."""
    return _scratch("dummy", 1, np.float64)


def _losses_arg(losses: Any) -> tuple[Any, bool]:
    return (_dummy(), False) if losses is None else (losses, True)


def _to_host(x: Any) -> np.ndarray:
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


def _cpu() -> Any:
    from rad._backends import get_backend

    for cand in ("cpp", "numba", "numpy"):
        try:
            return get_backend(cand)
        except ImportError:
            continue
    raise RuntimeError("no CPU backend could be loaded")  # numpy always loads


# ------------------------------------------------------------------ conversions


@_kernel
def _cast_kernel(src, dst):
    start = cuda.grid(1)
    for i in range(start, src.shape[0], cuda.gridsize(1)):
        dst[i] = src[i]


def device_copy(x: Any, dtype: Any) -> Any:
    """A contiguous device copy of the 1-D device array ``x`` as ``dtype`` (never via the host)."""
    out = cuda.device_array(x.shape[0], dtype=dtype)
    if x.shape[0]:
        _cast_kernel[_stride_grid(x.shape[0]), _TPB](x, out)
    return out


# ------------------------------------------------------------------ validation pass


@_kernel
def _first_invalid_kernel(x, hi_val, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        v = x[i]
        if not (v >= 0 and v <= hi_val):
            cuda.atomic.min(out, 0, i)


def first_invalid(x: Any, threads: int) -> int:
    """Index of the first NaN, infinite or negative entry of the device array ``x``, or -1."""
    n = x.shape[0]
    out = cuda.to_device(np.array([n], dtype=np.int64))
    if n:
        _first_invalid_kernel[_stride_grid(n), _TPB](x, float(np.finfo(x.dtype).max), out)
    i = int(out.copy_to_host()[0])
    return -1 if i >= n else i


@_kernel
def _max_bits_kernel(raw, sign, out):
    best = cuda.shared.array(1, np.uint64)
    if cuda.threadIdx.x == 0:
        best[0] = np.uint64(0)
    cuda.syncthreads()
    mx = np.uint64(0)
    start = cuda.grid(1)
    for i in range(start, raw.shape[0], cuda.gridsize(1)):
        u = np.uint64(raw[i])
        if u != sign and u > mx:
            mx = u
    cuda.atomic.max(best, 0, mx)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.atomic.max(out, 0, best[0])


def max_value(x: Any) -> float:
    """The largest entry of a device array of non-negative floats.

    NaN and negative values compare above every finite one: the caller's checks name them.
    """
    nbits, raw, sign = _bit_view(x)
    out = _full(1, 0, np.uint64)
    if x.shape[0]:
        _max_bits_kernel[_wave_grid(_max_bits_kernel, x.shape[0]), _TPB](raw, sign, out)
    return float(_bits_to_float(out.copy_to_host(), nbits)[0])


# ---------------------------------------------------------- sort-free threshold search


@cuda.jit(device=True)
def _bin_add(cnt, hh, gg, mnbits, b, c, r, gr, u):
    cuda.atomic.add(cnt, b, c)
    cuda.atomic.add(hh, b, r)
    cuda.atomic.add(gg, b, gr)
    cuda.atomic.min(mnbits, b, u)


# The shared-memory cache of bins of the histogram and bracket kernels: slot
# ``bin mod _SLOTS`` is claimed by the first bin that lands there (its ``tag``); a point
# whose slot holds another bin goes straight to the global bins.


@cuda.jit(device=True)
def _slots_clear(tag, scnt, sh, sg, smn):
    for j in range(cuda.threadIdx.x, _SLOTS, cuda.blockDim.x):
        tag[j] = -1
        scnt[j] = 0
        sh[j] = 0.0
        sg[j] = 0.0
        smn[j] = _UMAX


@cuda.jit(device=True)
def _slot_add(tag, scnt, sh, sg, smn, cnt, hh, gg, mnbits, b, r, gr, u):
    """One point of bin ``b``: into its slot when the slot is (or becomes) ``b``'s."""
    slot = b & (_SLOTS - 1)
    t = tag[slot]
    if t == -1:
        t = cuda.atomic.cas(tag, slot, np.int64(-1), b)
        if t == -1:
            t = b
    if t == b:
        _bin_add(scnt, sh, sg, smn, slot, 1, r, gr, u)
    else:
        _bin_add(cnt, hh, gg, mnbits, b, 1, r, gr, u)


@cuda.jit(device=True)
def _slots_flush(tag, scnt, sh, sg, smn, cnt, hh, gg, mnbits):
    """Add the block's cached bins to the global ones (after a syncthreads)."""
    for j in range(cuda.threadIdx.x, _SLOTS, cuda.blockDim.x):
        t = tag[j]
        if t >= 0:
            _bin_add(cnt, hh, gg, mnbits, t, scnt[j], sh[j], sg[j], smn[j])


@_kernel
def _histogram_kernel(g, raw, sign, losses, has_losses, w, hi_val, nbits, shift, pshift, prefix,
                      cnt, hh, gg, mnbits, bad):
    """One radix level, with a shared-memory cache of bins per CUDA block (``_slot_add``).

    The frequent bins of a skewed distribution are summed with shared atomics and flushed
    once per block.
    """
    tag = cuda.shared.array(_SLOTS, np.int64)
    scnt = cuda.shared.array(_SLOTS, np.int64)
    sh = cuda.shared.array(_SLOTS, np.float64)
    sg = cuda.shared.array(_SLOTS, np.float64)
    smn = cuda.shared.array(_SLOTS, np.uint64)
    _slots_clear(tag, scnt, sh, sg, smn)
    cuda.syncthreads()
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    mask = np.uint64(_NBINS - 1)
    for i in range(start, g.shape[0], stride):
        v = g[i]
        if not (v >= 0 and v <= hi_val):
            bad[0] = 1
            continue
        u = np.uint64(raw[i])
        if u == sign:
            u = np.uint64(0)
        if pshift < nbits and (u >> pshift) != prefix:
            continue
        b = np.int64((u >> shift) & mask)
        gi = np.float64(v)
        a = _fma_free_add(gi, _loss(losses, has_losses, w, i, gi))
        r = 1.0 / a if a > 0 else 0.0
        gr = _mul(gi, r)
        _slot_add(tag, scnt, sh, sg, smn, cnt, hh, gg, mnbits, b, r, gr, u)
    cuda.syncthreads()
    _slots_flush(tag, scnt, sh, sg, smn, cnt, hh, gg, mnbits)


@_kernel
def _fill_kernel(x, value):
    start = cuda.grid(1)
    for i in range(start, x.shape[0], cuda.gridsize(1)):
        x[i] = value


def _memset(arr: Any, byte: int) -> None:
    """Every byte of the device array ``arr`` (or view) set to ``byte``: one driver call."""
    arr.gpu_data.memset(byte, arr.size * arr.dtype.itemsize)


def _full(n: int, value: Any, dtype: Any, tag: str | None = None) -> Any:
    """A device array of ``n`` copies of ``value``, filled on the device (no host transfer).

    With a ``tag`` the array is :func:`_scratch`'s buffer of that name (reused across calls:
    only for arrays that do not outlive the call).
    """
    out = cuda.device_array(n, dtype=dtype) if tag is None else _scratch(tag, n, dtype)
    if SIMULATOR:  # a Python loop there: the host fill is the fast one
        if n:
            out.copy_to_device(np.full(n, value, dtype=dtype))
        return out
    pattern = np.array([value], dtype=dtype).tobytes()
    if n and pattern == pattern[:1] * len(pattern):  # 0, 0.0, all ones: a memset, not a kernel launch
        _memset(out, pattern[0])
    elif n:
        _fill_kernel[_stride_grid(n), _TPB](out, np.dtype(dtype).type(value))
    return out


#: Reused device buffers of the streaming DepRound (see :func:`_scratch`).
_SCRATCH: dict[str, Any] = {}


def _scratch(tag: str, n: int, dtype: Any, at_least: bool = False) -> Any:
    """A device array of ``n`` items, reused across calls (contents undefined).

    DepRound's bitmap and chunk totals are an eighth of a byte to a byte per point (250 MB
    at 1e9 float32 points), and a call needs a dozen small buffers besides; each
    allocation is a driver call (and each free may wait for the device), which cost a
    1e9 call milliseconds of an idle GPU (``benchmarks/gpu_timeline.py``). So the last
    buffer of each tag is kept, per calling thread (:func:`release_scratch` frees them):
    a tag names a buffer that no other live buffer of the same call uses, and that does
    not outlive the call. With ``at_least`` the kept buffer may be longer than ``n`` (for
    kernels that take their extent from other arguments): no view is made.
    """
    dtype = np.dtype(dtype)
    key = f"{tag}@{threading.get_ident()}"  # a thread's own buffers: calls from two threads never share one
    held = _SCRATCH.get(key)
    if held is None or held.dtype != dtype or held.shape[0] < n:
        _SCRATCH.pop(key, None)
        held = _SCRATCH[key] = cuda.device_array(max(n, 1), dtype)
    if at_least or held.shape[0] == n:  # (a view is a Python object more: skipped where it can be)
        return held
    return held[:n]


def _upload(tag: str, host: np.ndarray) -> Any:
    """``host`` copied into :func:`_scratch`'s buffer ``tag`` (no allocation once it exists)."""
    buf = _scratch(tag, host.shape[0], host.dtype)
    buf.copy_to_device(np.ascontiguousarray(host))
    return buf


def release_scratch() -> None:
    """Free the device buffers kept between calls (:func:`_scratch`, :meth:`_Packed.get`)."""
    _SCRATCH.clear()
    _PACKED.clear()


class _Packed:
    """Several small device arrays in one buffer of 8-byte words: one copy brings them all back.

    ``parts`` lists ``(length, dtype, fill byte)`` (8-byte dtypes); ``dev[j]`` is part
    ``j`` on the device, and :meth:`fetch` copies the buffer once and returns the parts as
    host arrays. One fill byte for every part is a memset; mixed ones one small upload.
    """

    def __init__(self, parts: list[tuple[int, Any, int]]) -> None:
        self.bounds: list[tuple[int, int, Any]] = []
        at = 0
        for length, dtype, _ in parts:
            self.bounds.append((at, at + length, np.dtype(dtype)))
            at += length
        self.buf = cuda.device_array(max(at, 1), np.uint64)
        self.refill(parts)
        self.dev = [self.buf[lo:hi].view(dt) for lo, hi, dt in self.bounds]

    @classmethod
    def get(cls, tag: str, parts: list[tuple[int, Any, int]]) -> _Packed:
        """A :class:`_Packed` of ``parts``, reused across calls of this thread (and refilled).

        Its device buffer and the part views are made once per tag and layout (a view is a
        Python object numba builds at some cost); each call refills the buffer (one memset
        or one small upload). For buffers that do not outlive the call, as :func:`_scratch`.
        """
        key = (tag, threading.get_ident())  # a thread's own buffers, as _scratch's
        layout = tuple((length, np.dtype(dt).str, fill) for length, dt, fill in parts)
        held = _PACKED.get(key)
        if held is None or held[0] != layout:
            _PACKED[key] = (layout, cls(parts))
            return _PACKED[key][1]
        held[1].refill(parts)
        return held[1]

    def refill(self, parts: list[tuple[int, Any, int]]) -> None:
        """Each part's fill byte written into the buffer (at construction and at each reuse)."""
        fills = {fill for length, _, fill in parts if length}
        if len(fills) <= 1 and not SIMULATOR:
            _memset(self.buf, fills.pop() if fills else 0)
            return
        host = np.zeros(self.buf.shape[0], np.uint64)
        for (lo, hi, _), (_, _, fill) in zip(self.bounds, parts):
            host[lo:hi].view(np.uint8)[:] = fill
        self.buf.copy_to_device(host)

    def fetch(self) -> list[np.ndarray]:
        host = self.buf.copy_to_host()
        return [host[lo:hi].view(dt) for lo, hi, dt in self.bounds]


#: The :class:`_Packed` buffers kept between calls: (tag, thread) -> (layout, buffers).
_PACKED: dict[tuple[str, int], tuple[tuple[Any, ...], _Packed]] = {}


@_kernel
def _gather_kernel(g, raw, sign, losses, has_losses, w, shift, key, pos, idx, vals, avals):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, g.shape[0], stride):
        u = np.uint64(raw[i])
        if u == sign:
            u = np.uint64(0)
        if (u >> shift) != key:
            continue
        j = cuda.atomic.add(pos, 0, 1)
        if j < idx.shape[0]:
            gi = np.float64(g[i])
            idx[j] = i
            vals[j] = gi
            avals[j] = _fma_free_add(gi, _loss(losses, has_losses, w, i, gi))


def _bit_view(gains: Any) -> tuple[int, Any, np.uint64]:
    nbits = 32 if gains.dtype == np.float32 else 64
    raw = gains.view(np.uint32 if nbits == 32 else np.uint64)
    return nbits, raw, np.uint64(1 << (nbits - 1))


def bit_histogram(gains, losses, w, shift, pshift, prefix, threads):
    """One level of the radix select on the device; the bins come back to the host."""
    n = gains.shape[0]
    nbits, raw, sign = _bit_view(gains)
    lv, has = _losses_arg(losses)
    cnt = _full(_NBINS, 0, np.int64)
    hh = _full(_NBINS, 0.0, np.float64)
    gg = _full(_NBINS, 0.0, np.float64)
    mnbits = _full(_NBINS, _UMAX, np.uint64)
    bad = _full(1, 0, np.int32)
    _histogram_kernel[_wave_grid(_histogram_kernel, n), _TPB](
        gains, raw, sign, lv, has, float(w), float(np.finfo(gains.dtype).max), np.uint64(nbits),
        np.uint64(shift), np.uint64(pshift), np.uint64(prefix), cnt, hh, gg, mnbits, bad,
    )
    c = cnt.copy_to_host()
    mb = mnbits.copy_to_host()
    if nbits == 32:
        mn = mb.astype(np.uint32).view(np.float32).astype(np.float64)
    else:
        mn = mb.view(np.float64).copy()
    mn[c == 0] = np.inf
    return c, hh.copy_to_host(), gg.copy_to_host(), mn, bool(bad.copy_to_host()[0])


def _gather_in_index_order(launch: Any, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``(g, a)`` a gather kernel collects, in index order (as the CPU backends gather).

    ``launch(pos, idx, vals, avals)`` runs the kernel into kept buffers of ``count`` items.
    """
    size = max(1, int(count))
    pos = _full(1, 0, np.int64, tag="gather_pos")
    idx = _scratch("gather_idx", size, np.int64)
    vals = _scratch("gather_vals", size, np.float64)
    avals = _scratch("gather_avals", size, np.float64)
    launch(pos, idx, vals, avals)
    got = min(int(pos.copy_to_host()[0]), size)
    order = np.argsort(idx.copy_to_host()[:got], kind="stable")
    return vals.copy_to_host()[:got][order], avals.copy_to_host()[:got][order]


def bit_gather(gains, losses, w, shift, key, count, threads):
    """The ``(g, a)`` of one bin's points, in index order (as the CPU backends gather them)."""
    n = gains.shape[0]
    _, raw, sign = _bit_view(gains)
    lv, has = _losses_arg(losses)

    def launch(pos: Any, idx: Any, vals: Any, avals: Any) -> None:
        _gather_kernel[_stride_grid(n), _TPB](gains, raw, sign, lv, has, float(w), np.uint64(shift), np.uint64(key),
                                              pos, idx, vals, avals)

    return _gather_in_index_order(launch, count)


# ----------------------------------------------------- bracketed single-pass search
# The default search of every backend (rad._backends.radix_select.bracket_resolve): a
# strided sample brackets tau, one pass sums the points above the bracket and bins the
# few inside it, the boundary bin is gathered; the level loop above is the fallback.

_FINE = _radix.FINE
#: Points each thread of the streaming passes loads before using the first (loads in flight).
_UNROLL = 2 if SIMULATOR else 4  # (two in the simulator: its loops are Python, the tails still run)


@_kernel
def _take_runs_kernel(x, step, run, out):
    """``out[i] = x[(i // run) * step + i % run]``: runs of ``run`` points ``step`` apart."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[(i // run) * step + i % run]


def _sample_runs(arr: Any, count: int, step: int, run: int, tag: str) -> np.ndarray:
    """``count`` values of the device array ``arr``, on the host.

    Runs of ``run`` consecutive points, ``step`` apart, gathered on the device into a
    reused buffer and copied back once.
    """
    out = _scratch(tag, count, arr.dtype)
    if count:
        _take_runs_kernel[_grid(count), _TPB](arr, np.int64(step), np.int64(run), out)
    return out.copy_to_host()


@cuda.jit(device=True)
def _pass_counts(dst, n_above, n_below, bad, min_bits):
    """A bracket pass's counters into ``dst`` (a block's, then the grid's).

    The counts are added, the bad flag maxed, the minimum bits above the bracket minimised.
    """
    cuda.atomic.add(dst, 0, n_above)
    cuda.atomic.add(dst, 1, n_below)
    cuda.atomic.max(dst, 2, bad)
    cuda.atomic.min(dst, 3, min_bits)


@_kernel
def _bracket_kernel(g, raw, sign, inf_bits, losses, has_losses, w, lo_v, hi_v, ulo, sh,
                    cnt, hh, gg, mnbits, scal, icnt):
    """The bracket's single pass over the pool.

    Above the bracket ``(sum 1/a, sum g/a, count, min bits)``, below it a count, inside it
    FINE bins (a shared-memory cache of bins as in the histogram kernel), and ``sum g/a``
    over every point: ``scal = (g_total, h_above, g_above)``, ``icnt = (n_above, n_below,
    bad, min bits above)``.
    """
    tag = cuda.shared.array(_SLOTS, np.int64)
    scnt = cuda.shared.array(_SLOTS, np.int64)
    sh_ = cuda.shared.array(_SLOTS, np.float64)
    sg = cuda.shared.array(_SLOTS, np.float64)
    smn = cuda.shared.array(_SLOTS, np.uint64)
    bsum = cuda.shared.array(3, np.float64)
    bcnt = cuda.shared.array(4, np.uint64)
    tid = cuda.threadIdx.x
    _slots_clear(tag, scnt, sh_, sg, smn)
    if tid == 0:
        bsum[0] = 0.0
        bsum[1] = 0.0
        bsum[2] = 0.0
        bcnt[0] = np.uint64(0)
        bcnt[1] = np.uint64(0)
        bcnt[2] = np.uint64(0)
        bcnt[3] = _UMAX
    cuda.syncthreads()
    gt = 0.0
    ha = 0.0
    ga = 0.0
    na = np.uint64(0)
    nbl = np.uint64(0)
    bad = np.uint64(0)
    minb = _UMAX
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    n = g.shape[0]
    ub = cuda.local.array(_UNROLL, np.uint64)
    gb = cuda.local.array(_UNROLL, np.float64)
    for i0 in range(start, n, stride * _UNROLL):
        for k in range(_UNROLL):  # _UNROLL loads in flight before the first is used
            i = i0 + k * stride
            if i < n:
                ub[k] = np.uint64(raw[i])
                gb[k] = np.float64(g[i])
        for k in range(_UNROLL):
            i = i0 + k * stride
            if i >= n:
                break
            u = ub[k]
            if u >= inf_bits and u != sign:
                bad = np.uint64(1)
                continue
            if u == sign:
                u = np.uint64(0)
            gi = gb[k]
            a = _fma_free_add(gi, _loss(losses, has_losses, w, i, gi))
            r = 1.0 / a if a > 0 else 0.0
            gr = _mul(gi, r)
            gt += gr
            if gi >= hi_v:
                ha += r
                ga += gr
                na += np.uint64(1)
                if u < minb:
                    minb = u
            elif gi < lo_v:
                nbl += np.uint64(1)
            else:
                _slot_add(tag, scnt, sh_, sg, smn, cnt, hh, gg, mnbits, np.int64((u - ulo) >> sh), r, gr, u)
    cuda.atomic.add(bsum, 0, gt)
    cuda.atomic.add(bsum, 1, ha)
    cuda.atomic.add(bsum, 2, ga)
    _pass_counts(bcnt, na, nbl, bad, minb)
    cuda.syncthreads()
    _slots_flush(tag, scnt, sh_, sg, smn, cnt, hh, gg, mnbits)
    if tid == 0:
        cuda.atomic.add(scal, 0, bsum[0])
        cuda.atomic.add(scal, 1, bsum[1])
        cuda.atomic.add(scal, 2, bsum[2])
        _pass_counts(icnt, bcnt[0], bcnt[1], bcnt[2], bcnt[3])


@_kernel
def _bracket_gather_kernel(g, raw, sign, losses, has_losses, w, ulo, uhi, sh, key, pos, idx, vals, avals):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    n = g.shape[0]
    ub = cuda.local.array(_UNROLL, np.uint64)
    for i0 in range(start, n, stride * _UNROLL):
        for k in range(_UNROLL):  # the loads first, as in the bracket pass
            i = i0 + k * stride
            ub[k] = np.uint64(raw[i]) if i < n else np.uint64(0)
        for k in range(_UNROLL):
            i = i0 + k * stride
            if i >= n:
                break
            u = ub[k]
            if u == sign:
                u = np.uint64(0)
            if u < ulo or u >= uhi or ((u - ulo) >> sh) != key:
                continue
            j = cuda.atomic.add(pos, 0, 1)
            if j < idx.shape[0]:
                gi = np.float64(g[i])
                idx[j] = i
                vals[j] = gi
                avals[j] = _fma_free_add(gi, _loss(losses, has_losses, w, i, gi))


# The float32 pass with RAD losses (a = g + w g, the default on the device): one 32-bit
# load per point, the ordered bits compared as unsigned 32-bit integers, 32-bit indices,
# and a reciprocal formed for every point (no branch) and kept for those at or above the
# bracket. Its sums only steer decisions that carry a 1e-10 relative margin
# (radix_select.resolve_gathered), so:
# * for g > 0, g / a is 1 / (1 + w) up to two roundings: the sums of g / a are counts
#   times that constant (on the host);
# * 1 / a is (1 / g) / (1 + w) up to a few roundings (a thread's sum of 1 / g is scaled
#   once), and 1 / g comes from the single-precision approximate reciprocal (1 ulp) and
#   one float64 Newton step (relative error below 2^-44), for the normal gains in
#   [2^-126, 2^126]; the others take the IEEE division 1 / g.
_FAST_LO = np.uint32(0x00800000)  # 2^-126
_FAST_HI = np.uint32(0x7E800000)  # 2^126
_SIGN32 = np.uint32(0x80000000)
_FINE32 = 256 if SIMULATOR else 2048  # the float32 pass's bins, all in shared memory: 16 bytes a bin (32 KB)
_UNROLL32 = 2 if SIMULATOR else 8  # loads in flight per thread of the float32 pass

if SIMULATOR:

    @cuda.jit(device=True)
    def _f32_of_bits(u):
        return np.uint32(u).view(np.float32)

    @cuda.jit(device=True)
    def _approx_rcp(x):  # (the pass forms it for every point: 1 where the GPU's would be unused, no warning)
        return np.float32(1.0) / x if np.float32(2.0**-126) <= x < np.float32(np.inf) else np.float32(1.0)

else:

    @cuda.jit(device=True)
    def _f32_of_bits(u):
        return _ld.int_as_float(np.int32(u))

    from llvmlite import ir as _ir
    from numba import types as _nbt
    from numba.cuda.extending import intrinsic as _intrinsic

    @_intrinsic
    def _rcp_approx_ftz(typingctx, x):
        """PTX ``rcp.approx.ftz.f32`` (1 ulp): a single MUFU.RCP.

        ``fast_fdividef`` adds the scaling of denormal quotients, five more instructions a
        point, which the normal range never needs.
        """

        def codegen(context, builder, sig, args):
            fty = _ir.FunctionType(_ir.FloatType(), [_ir.FloatType()])
            return builder.call(_ir.InlineAsm(fty, "rcp.approx.ftz.f32 $0, $1;", "=f,f"), args)
        return _nbt.float32(_nbt.float32), codegen

    @cuda.jit(device=True)
    def _approx_rcp(x):
        return _rcp_approx_ftz(x)  # type: ignore[call-arg]  # (numba passes the typing context)


@cuda.jit(device=True)
def _rcp32(u):
    """``1 / g`` for the gain with bits ``u``, to ~2^-44 where ``g`` is in ``[2^-126, 2^126)``.

    The single-precision approximate reciprocal and one float64 Newton step; no branch, so
    that the float32 pass can form it for every point and keep those above the bracket
    (a warp's lanes split between the kinds of point: a branch would run both paths).
    Outside that range the value is meaningless (:func:`_take32` divides there).
    """
    x = _f32_of_bits(u)
    r = np.float64(_approx_rcp(x))
    return r + r * (1.0 - np.float64(x) * r)


@cuda.jit(device=True)
def _steer_inv_a(u, w, inv1w):
    """``1 / a`` with ``a = g + w g`` for the gain with bits ``u`` (> 0), to ~2^-44."""
    if u >= _FAST_LO and u < _FAST_HI:
        return _rcp32(u) * inv1w
    gd = np.float64(_f32_of_bits(u))
    a = gd + w * gd
    return 1.0 / a if a > 0 else 0.0


@cuda.jit(device=True)
def _load32(raw, i0, stride, n32, ub):
    """A thread's next ``_UNROLL32`` points ``i0, i0 + stride, ...`` into ``ub``.

    Every load is issued before any is used, so that many are in flight (one at a time
    is latency-bound).
    """
    for k in range(_UNROLL32):
        i = i0 + np.uint32(k) * stride
        if i < n32:
            ub[k] = raw[i]


@cuda.jit(device=True)
def _bins32_clear(scnt, sh_, smn):
    """A CUDA block's shared bins of the float32 pass, emptied (its threads together)."""
    for j in range(cuda.threadIdx.x, _FINE32, cuda.blockDim.x):
        scnt[j] = np.uint32(0)
        sh_[j] = 0.0
        smn[j] = np.uint32(0xFFFFFFFF)


@cuda.jit(device=True)
def _bins32_add(scnt, sh_, smn, u, ulo, sh, w, inv1w):
    """The inside point with bits ``u`` into its shared bin: count, sum of ``1 / a``, minimum."""
    b = np.uint32((u - ulo) >> sh)  # (unsigned: no negative-index wrap)
    cuda.atomic.add(scnt, b, np.uint32(1))
    cuda.atomic.add(sh_, b, _steer_inv_a(u, w, inv1w) if u != 0 else 0.0)
    cuda.atomic.min(smn, b, u)


@cuda.jit(device=True)
def _bins32_flush(scnt, sh_, smn, cnt, hh, mnbits):
    """A CUDA block's shared bins added into the grid's (after a ``syncthreads``)."""
    for j in range(cuda.threadIdx.x, _FINE32, cuda.blockDim.x):
        c = scnt[j]
        if c != 0:
            cuda.atomic.add(cnt, j, np.int64(c))
            cuda.atomic.add(hh, j, sh_[j])
            cuda.atomic.min(mnbits, j, np.uint64(smn[j]))


@cuda.jit(device=True)
def _pass32_clear(bsum, bcnt):
    """A CUDA block's sum above the bracket and its counters (:func:`_pass_counts`, positives), zeroed."""
    bsum[0] = 0.0
    bcnt[0] = np.uint64(0)
    bcnt[1] = np.uint64(0)
    bcnt[2] = np.uint64(0)
    bcnt[3] = _UMAX
    bcnt[4] = np.uint64(0)


@cuda.jit(device=True)
def _pass32_flush(bsum, bcnt, scal, icnt):
    """A CUDA block's sum and counters added into the grid's (one thread)."""
    cuda.atomic.add(scal, 0, bsum[0])
    _pass_counts(icnt, bcnt[0], bcnt[1], bcnt[2], bcnt[3])
    cuda.atomic.add(icnt, 4, bcnt[4])


@cuda.jit(device=True)
def _take32(u, ulo, uhi, sh, w, inv1w, queued, qn, queue, qbase, cap, scnt, sh_, smn,
            ha, na, nbl, npos, hib, minb):
    """One point of the float32 pass: its bits ``u`` into the thread's sums and counters.

    Returns the updated ``(ha, na, nbl, npos, hib, minb)``: ``ha`` sums ``1 / g`` (times
    ``1 / (1 + w)`` once, at the end) over the points above the bracket, ``hib`` is the
    largest bits seen (NaN, infinities and negative gains are the bits from 0x7F800000,
    -0.0 aside: the pass reports them from ``hib`` and their sums go unused). Branch-free
    but for the rare kinds: gains outside the fast reciprocal's range above the bracket,
    and the points inside the bracket (queued or binned).
    """
    u = np.uint32(0) if u == _SIGN32 else u  # -0.0 is 0
    hib = max(hib, u)
    above = u >= uhi
    r = _rcp32(u)
    if above and np.uint32(u - _FAST_LO) >= np.uint32(_FAST_HI - _FAST_LO):  # subnormal or huge: IEEE
        r = 1.0 / np.float64(_f32_of_bits(u))
    ha += r if above else 0.0
    # (the counters stay 32-bit: numba widens a uint32 sum to 64 bits, two instructions)
    na = np.uint32(na + np.uint32(above))
    minb = min(minb, u if above else np.uint32(0xFFFFFFFF))
    nbl = np.uint32(nbl + np.uint32(u < ulo))
    npos = np.uint32(npos + np.uint32(u != 0))
    if not above and u >= ulo:
        if queued:  # (unsigned offsets: no negative-index wrap in the store)
            p = cuda.atomic.add(qn, 0, np.uint32(1))
            if p < cap:
                queue[qbase + np.uint64(p)] = u
        else:
            _bins32_add(scnt, sh_, smn, u, ulo, sh, w, inv1w)
    return ha, na, nbl, npos, hib, minb


@_kernel
def _bracket32_kernel(raw, n, w, inv1w, ulo, uhi, sh, cnt, hh, mnbits, scal, icnt, queue, qcount, cap, queued):
    """The bracket's pass for float32 gains with RAD losses (see the note above).

    ``scal = (h_above,)``, ``icnt = (n_above, n_below, bad, min bits above, n_positive,
    queue overflow)``; the bracket's :data:`_FINE32` bins (counts, sums of ``1 / a``,
    minimum bits) are held whole in shared memory, so a point inside the bracket costs
    three shared atomics and the global bins one flush per CUDA block. ``queued``: the
    inside points are not binned here but queued, CUDA block ``j`` writing their bits to
    ``queue[j cap:(j + 1) cap]`` (one shared atomic each) and their count to
    ``qcount[j]``; ``icnt[5]`` is set where a block had more than ``cap``.
    :func:`_queue_bins32_kernel` then bins them with every thread of a warp busy.

    The pass is bound by its instructions, not by memory (the H200's profiler: 74% of
    issue slots, 27% of DRAM bandwidth, before the points were taken branch-free): each
    thread's whole steps of :data:`_UNROLL32` points run without bounds checks, and
    :func:`_take32` keeps the common path free of branches.
    """
    scnt = cuda.shared.array(_FINE32, np.uint32)
    sh_ = cuda.shared.array(_FINE32, np.float64)
    smn = cuda.shared.array(_FINE32, np.uint32)
    bsum = cuda.shared.array(1, np.float64)
    bcnt = cuda.shared.array(5, np.uint64)
    qn = cuda.shared.array(1, np.uint32)
    tid = cuda.threadIdx.x
    if not queued:
        _bins32_clear(scnt, sh_, smn)
    if tid == 0:
        _pass32_clear(bsum, bcnt)
        qn[0] = np.uint32(0)
    cuda.syncthreads()
    qbase = np.uint64(cuda.blockIdx.x) * np.uint64(cap)
    capu = np.uint32(cap)  # (at most an eighth of the pool a grid: _queue_cap)
    ha = 0.0
    na = np.uint32(0)
    nbl = np.uint32(0)
    npos = np.uint32(0)
    hib = np.uint32(0)
    minb = np.uint32(0xFFFFFFFF)
    stride = np.uint32(cuda.gridsize(1))
    n32 = np.uint32(n)
    ub = cuda.local.array(_UNROLL32, np.uint32)
    i0 = np.uint32(cuda.grid(1))
    last = np.uint32(_UNROLL32 - 1) * stride  # (no overflow: _fast32 bounds n plus a step)
    while i0 + last < n32:  # whole steps: every load in range
        for k in range(_UNROLL32):  # the loads first: many in flight
            ub[k] = raw[i0 + np.uint32(k) * stride]
        for k in range(_UNROLL32):
            ha, na, nbl, npos, hib, minb = _take32(ub[k], ulo, uhi, sh, w, inv1w, queued, qn, queue, qbase, capu,
                                                   scnt, sh_, smn, ha, na, nbl, npos, hib, minb)
        i0 += np.uint32(_UNROLL32) * stride
    while i0 < n32:  # the last, part step
        ha, na, nbl, npos, hib, minb = _take32(raw[i0], ulo, uhi, sh, w, inv1w, queued, qn, queue, qbase, capu,
                                               scnt, sh_, smn, ha, na, nbl, npos, hib, minb)
        i0 += stride
    cuda.atomic.add(bsum, 0, ha * inv1w)
    bad = np.uint64(1) if hib >= np.uint32(0x7F800000) else np.uint64(0)
    _pass_counts(bcnt, np.uint64(na), np.uint64(nbl), bad, np.uint64(minb))
    cuda.atomic.add(bcnt, 4, np.uint64(npos))
    cuda.syncthreads()
    if not queued:
        _bins32_flush(scnt, sh_, smn, cnt, hh, mnbits)
    if tid == 0:
        _pass32_flush(bsum, bcnt, scal, icnt)
        if queued:
            qcount[cuda.blockIdx.x] = np.int64(qn[0])
            if qn[0] > cap:
                cuda.atomic.max(icnt, 5, np.uint64(1))


@_kernel
def _queue_bins32_kernel(queue, qcount, cap, w, inv1w, ulo, sh, cnt, hh, mnbits):
    """The queued inside points of the float32 pass into its bins (CUDA block ``j``: queue ``j``).

    The same three shared atomics per point as the pass's own binning, but issued by
    whole warps: in the pass, a warp met one inside point among its 32 lanes at a time.
    """
    scnt = cuda.shared.array(_FINE32, np.uint32)
    sh_ = cuda.shared.array(_FINE32, np.float64)
    smn = cuda.shared.array(_FINE32, np.uint32)
    _bins32_clear(scnt, sh_, smn)
    cuda.syncthreads()
    j = cuda.blockIdx.x
    base = np.int64(j) * cap
    for i in range(cuda.threadIdx.x, min(qcount[j], cap), cuda.blockDim.x):
        _bins32_add(scnt, sh_, smn, queue[base + i], ulo, sh, w, inv1w)
    cuda.syncthreads()
    _bins32_flush(scnt, sh_, smn, cnt, hh, mnbits)


@_kernel
def _queue_gather32_kernel(queue, qcount, cap, ulo, sh, key, pos, out):
    """The bits of the queued points of bin ``key`` (:func:`_bracket32_gather_kernel` from the queues)."""
    j = cuda.blockIdx.x
    base = np.int64(j) * cap
    for i in range(cuda.threadIdx.x, min(qcount[j], cap), cuda.blockDim.x):
        u = queue[base + i]
        if ((u - ulo) >> sh) == key:
            k = cuda.atomic.add(pos, 0, 1)
            if k < out.shape[0]:
                out[k] = u


@_kernel
def _bracket32_gather_kernel(raw, n, ulo, uhi, sh, key, pos, out):
    """The bits of the points of bin ``key`` of the float32 pass (32-bit tests), in any order."""
    stride = np.uint32(cuda.gridsize(1))
    n32 = np.uint32(n)
    ub = cuda.local.array(_UNROLL32, np.uint32)
    i0 = np.uint32(cuda.grid(1))
    while i0 < n32:
        _load32(raw, i0, stride, n32, ub)
        for k in range(_UNROLL32):
            if i0 + np.uint32(k) * stride >= n32:
                break
            u = ub[k]
            if u == _SIGN32:
                u = np.uint32(0)
            if u >= ulo and u < uhi and ((u - ulo) >> sh) == key:
                j = cuda.atomic.add(pos, 0, 1)
                if j < out.shape[0]:
                    out[j] = u
        i0 += np.uint32(_UNROLL32) * stride


def _fast32(gains: Any, losses: Any, w: float) -> bool:
    """Whether the float32 pass applies: float32 gains, RAD losses, 32-bit indices suffice."""
    n = gains.shape[0]
    reach = max(_resident_grid(n) * (_UNROLL32 + 1), _stride_grid(n) + 1) * _TPB  # an index's last step
    return gains.dtype == np.float32 and losses is None and 1.0 + w > 0 and w == w and n + reach < (1 << 32)


def _clamp_bracket(ulo: int, uhi: int, nbits: int) -> tuple[int, int, int]:
    """``(ulo, uhi, bits of +inf)``: the bracket clipped to the finite values, never empty."""
    inf_bits = _radix.full_bracket(nbits)[1]
    uhi = max(1, min(uhi, inf_bits))
    return min(ulo, uhi - 1), uhi, inf_bits


def _bin_minima(c: np.ndarray, mnbits: np.ndarray, minb: int, inf_bits: int, nbits: int) -> tuple[np.ndarray, float]:
    """The bins' minimum gains (inf for empty bins) and the minimum above the bracket."""
    mn = _bits_to_float(mnbits, nbits)
    mn[c == 0] = np.inf
    return mn, _radix.edge_value(minb, nbits) if minb < inf_bits else float("inf")


#: Float32 pools from this many points queue their inside points (a module constant: the
#: simulator's tests lower it). Below, the two extra launches cost more than they save.
_QUEUE_FROM = 1 << 24
#: The queues' slack over the expected count of a CUDA block's inside points (tests: 0).
_QUEUE_SLACK = 64


def _queue_cap(n: int, grid: int, inside: float | None) -> int:
    """Each CUDA block's queue of inside points, or 0 for binning them in the pass.

    ``inside`` is the sample's fraction of points inside the bracket; a block sees about
    ``inside n / grid`` of them, binomially. The queues hold 1.25 times that, 8 standard
    deviations and :data:`_QUEUE_SLACK` more; a block with more sets the overflow flag and
    the pass is run again with the bins (a sample far from the pool's distribution).
    """
    if inside is None or n < _QUEUE_FROM:
        return 0
    mu = inside * n / grid
    cap = max(1, int(1.25 * mu + 8.0 * math.sqrt(mu) + _QUEUE_SLACK))
    step = 1 << max(0, cap.bit_length() - 3)  # rounded up to 1/8 of a power of two: the kept buffer
    cap = -(-cap // step) * step  # (_scratch) fits the next call's queues without a new view or allocation
    return cap if grid * cap <= n // 8 + 4096 else 0  # an eighth of the pool at most (0.5 byte a point)


def _bracketed32(gains, w, m, threads, ulo, uhi, inside=None):
    """:func:`_bracketed` through the float32 pass (same decisions, cheaper steering sums).

    ``inside``: the sample's fraction of points inside the bracket; where given (and the
    pool has at least :data:`_QUEUE_FROM` points) the pass queues the inside points and a
    second kernel bins them (:func:`_queue_cap`); the boundary bin is then gathered from
    the queues, not from the pool.
    """
    raw = gains.view(np.uint32)
    n = gains.shape[0]
    ulo, uhi, inf_bits = _clamp_bracket(ulo, uhi, 32)
    sh = _radix.bracket_shift(ulo, uhi, _FINE32)
    inv1w = 1.0 / (1.0 + w)
    grid = _wave_grid(_bracket32_kernel, n)
    cap = _queue_cap(n, grid, inside)
    out = _Packed.get("bracket32", [(_FINE32, np.int64, 0), (_FINE32, np.float64, 0), (_FINE32, np.uint64, 0xFF),
                                    (1, np.float64, 0), (3, np.uint64, 0), (1, np.uint64, 0xFF), (1, np.uint64, 0),
                                    (1, np.uint64, 0)])
    cnt, hh_d, mnbits, scal, icnt = out.dev[0], out.dev[1], out.dev[2], out.dev[3], out.buf[3 * _FINE32 + 1:]
    # (the queues' extent is grid and cap: kept buffers at least that long, never a view)
    queue = _scratch("bracket_queue", max(1, grid * cap), np.uint32, at_least=True)
    qcount = _scratch("bracket_qcount", grid, np.int64, at_least=True)
    _bracket32_kernel[grid, _TPB](raw, n, float(w), inv1w, np.uint32(ulo), np.uint32(uhi), np.uint32(sh), cnt, hh_d,
                                  mnbits, scal, icnt, queue, qcount, np.int64(cap), cap > 0)
    if cap:
        _queue_bins32_kernel[grid, _TPB](queue, qcount, np.int64(cap), float(w), inv1w, np.uint32(ulo),
                                         np.uint32(sh), cnt, hh_d, mnbits)
    c, hh, mnb, sc, i3, imin, ipos, overflow = out.fetch()
    if overflow[0]:  # a block's inside points overflowed its queue: bin them in the pass
        return _bracketed32(gains, w, m, threads, ulo, uhi)
    h_above = float(sc[0])
    n_above, n_below, bad, npos = int(i3[0]), int(i3[1]), int(i3[2]), int(ipos[0])
    mn, last_min = _bin_minima(c, mnb, int(imin[0]), inf_bits, 32)
    # the sums of g / a: counts times 1 / (1 + w) (see the note above _FAST_LO)
    res = (bool(bad), npos * inv1w, h_above, n_above * inv1w, n_above, last_min, n_below, c,
           hh, c * inv1w, mn)

    def gather(b: int) -> tuple[np.ndarray, np.ndarray]:
        # The bin's points in descending order: with RAD losses a is a function of g, so
        # the order among equal gains changes no sum (no index order needed), and a is
        # formed on the host as the device forms it (w g rounded, then g + w g).
        size = max(1, int(c[b]))
        pos = _full(1, 0, np.int64, tag="gather_pos")
        out = _scratch("gather_bits", size, np.uint32)
        if cap:
            _queue_gather32_kernel[grid, _TPB](queue, qcount, np.int64(cap), np.uint32(ulo), np.uint32(sh),
                                               np.uint32(b), pos, out)
        else:
            _bracket32_gather_kernel[_stride_grid(n), _TPB](raw, n, np.uint32(ulo), np.uint32(uhi), np.uint32(sh),
                                                            np.uint32(b), pos, out)
        got = min(int(pos.copy_to_host()[0]), size)
        vals = np.sort(out.copy_to_host()[:got].view(np.float32))[::-1].astype(np.float64)
        return vals, vals + w * vals

    return _radix.bracket_resolve(res, ulo, uhi, sh, 32, float(m), gather,
                                  lambda: threshold_levels(gains, None, w, m, threads))


def _bits_to_float(bits: np.ndarray, nbits: int) -> np.ndarray:
    if nbits == 32:
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    return bits.view(np.float64).copy()


def _bracketed(gains, losses, w, m, threads, ulo, uhi):
    nbits, raw, sign = _bit_view(gains)
    n = gains.shape[0]
    ulo, uhi, inf_bits = _clamp_bracket(ulo, uhi, nbits)
    lv, has = _losses_arg(losses)
    sh = _radix.bracket_shift(ulo, uhi)
    # one kept buffer, one copy back: the bins' counts, sums and minima, then the three
    # float sums and the four counters (the last one a minimum: all ones to start)
    out = _Packed.get("bracket", [(_FINE, np.int64, 0), (_FINE, np.float64, 0), (_FINE, np.float64, 0),
                                  (_FINE, np.uint64, 0xFF), (3, np.float64, 0), (3, np.uint64, 0),
                                  (1, np.uint64, 0xFF)])
    cnt, hh_d, gg_d, mnbits, scal = out.dev[:5]
    icnt = out.buf[4 * _FINE + 3:]
    _bracket_kernel[_wave_grid(_bracket_kernel, n), _TPB](
        gains, raw, sign, np.uint64(inf_bits), lv, has, float(w), _radix.edge_value(ulo, nbits),
        _radix.edge_value(uhi, nbits), np.uint64(ulo), np.uint64(sh), cnt, hh_d, gg_d, mnbits, scal, icnt,
    )
    c, hh, gg, mnb, sc, i3, imin = out.fetch()
    g_total, h_above, g_above = (float(v) for v in sc)
    n_above, n_below, bad = (int(v) for v in i3)
    mn, last_min = _bin_minima(c, mnb, int(imin[0]), inf_bits, nbits)
    res = (bool(bad), g_total, h_above, g_above, n_above, last_min, n_below, c, hh, gg, mn)

    def gather(b: int) -> tuple[np.ndarray, np.ndarray]:
        def launch(pos: Any, idx: Any, vals: Any, avals: Any) -> None:
            _bracket_gather_kernel[_stride_grid(n), _TPB](gains, raw, sign, lv, has, float(w), np.uint64(ulo),
                                                          np.uint64(uhi), np.uint64(sh), np.uint64(b), pos, idx,
                                                          vals, avals)

        return _gather_in_index_order(launch, c[b])

    return _radix.bracket_resolve(res, ulo, uhi, sh, nbits, float(m), gather,
                                  lambda: threshold_levels(gains, losses, w, m, threads))


#: Points in the device's bracket sample (runs of 64): a quarter of the CPU's, since the
#: host sorts it while the GPU waits (the bracket only steers speed, never the answer).
_SAMPLE = 1 << 14
#: The larger sample, from :data:`_SAMPLE_BIG_FROM` points: its bracket holds half as many
#: points (width ~ 1 / sqrt(sample)), each of which costs the search pass work. On the
#: H200 at 1e9 (``benchmarks/RESULTS.md``, the seventeenth session) the pass binning in
#: shared memory took 4.19 ms against 4.78 with the smaller sample, and the host step
#: (gather, copy, sort, scan) 0.99 ms against 0.45: about even. The queued pass, which
#: runs there now, was timed with this sample only (3.80 ms).
_SAMPLE_BIG, _SAMPLE_BIG_FROM = 1 << 16, 1 << 28


def _sample_size(n: int) -> int:
    """The bracket's sample size for a pool of ``n`` points."""
    return _SAMPLE_BIG if n >= _SAMPLE_BIG_FROM else _SAMPLE


def _sample_bracket(gains, losses, w, m):
    """The bracket of :func:`rad._backends.radix_select.sample_bracket`, from :func:`_sample_size` points.

    The strided sample is gathered on the device and scanned on the host as a pool of its
    own with ``m`` scaled by ``sample / n`` (the same test as scaling its sums by ``n / sample``).
    """
    return _sample_bracket_inside(gains, losses, w, m)[:2]


def _sample_bracket_inside(gains, losses, w, m):
    """:func:`_sample_bracket` and the sample's fraction inside it.

    The fraction is ``None`` for float64 gains and for pools too small to queue their
    inside points (:data:`_QUEUE_FROM`).
    """
    n = gains.shape[0]
    size = _sample_size(n)
    if n <= size:  # the whole pool: one run
        count, step, run = n, 0, max(n, 1)
    else:  # the strided sample of radix_select.sample_bracket: runs of SAMPLE_RUN, evenly spaced
        count, step, run = size, (n - _radix.SAMPLE_RUN) // (size // _radix.SAMPLE_RUN - 1), _radix.SAMPLE_RUN
    ys = _sample_runs(gains, count, step, run, "sample_gains")
    ls = None if losses is None else _sample_runs(losses, count, step, run, "sample_losses")
    # the scan compiled (the Numba backend's twin, bit for bit, with an early exit): the
    # GPU waits for this host step
    from rad._backends.numba_backend import _sample_rank

    lo, hi = _radix.sample_bracket(ys, ls, w, m * count / n, sample=count, rank=_sample_rank)
    inside = None
    if ys.dtype == np.float32 and count and n >= _QUEUE_FROM:  # (only a queue is sized from it)
        bits = ys.view(np.uint32)
        bits = np.where(bits == _SIGN32, np.uint32(0), bits)  # -0.0 is 0, as in the pass
        inside = float(np.count_nonzero((bits >= lo) & (bits < hi))) / count
    return lo, hi, inside


def threshold_support(gains, losses, w, m, b, threads):
    """:func:`threshold_search`, then :func:`support_sums` (the contract's definition)."""
    return search_then_sums(sys.modules[__name__], gains, losses, w, m, b, threads)


def threshold_search(gains, losses, w, m, threads):
    """Sort-free k*: ``(status, tau, kstar, g_total)``: a sampled bracket, one pass, a gather.

    The sample (2^14 gains, 2^16 from 2^28) is gathered on the device; the 16-bit level
    loop is the fallback when the bracket misses.
    """
    ulo, uhi, inside = _sample_bracket_inside(gains, losses, w, m)
    if _fast32(gains, losses, w):
        return _bracketed32(gains, w, m, threads, ulo, uhi, inside)
    return _bracketed(gains, losses, w, m, threads, ulo, uhi)


def threshold_levels(gains, losses, w, m, threads):
    """The 16-bit radix level loop alone (the fallback of :func:`threshold_search`)."""
    return _radix.threshold_search(sys.modules[__name__], gains, losses, w, m, threads)


# ------------------------------------------------------------------ canonical sums


@cuda.jit(device=True)
def _lane_tree(x, j):
    """The canonical combination of the 8 lane sums ``x[j:j + 8]`` (``rad._backends.canonical``)."""
    return ((x[j] + x[j + 1]) + (x[j + 2] + x[j + 3])) + ((x[j + 4] + x[j + 5]) + (x[j + 6] + x[j + 7]))


#: The DepRound sketch's parts per block (contract.SKETCH_PARTS) and their points.
_SKETCH_PARTS = SKETCH_PARTS
_SKETCH_SPAN = BLOCK // SKETCH_PARTS


@cuda.jit(device=True)
def _sketch_short_row(sketch, blk):
    """A short block's sketch row: ``-1`` throughout (unusable: it is rounded exactly)."""
    for k in range(_SKETCH_PARTS):
        sketch[blk * _SKETCH_PARTS + k] = -1.0


#: The support sums' layout: a CUDA block serves _SUB canonical blocks with _TPC threads
#: each; a tile is _SPREF coalesced loads per thread.
_SUB = 2 if SIMULATOR else 4
_TPC = _TPB // _SUB
_SPREF = 64 if SIMULATOR else 8
_STILE = _TPC * _SPREF  # items of one canonical block per tile
_SUB_ITEMS = _SUB * _STILE  # items of a tile, all canonical blocks
_SUB_LANES = _SUB * LANES  # lane threads of a CUDA block
_LANE_BATCH = 8  # terms a lane thread reads from shared memory before adding them
assert BLOCK % _STILE == 0 and _STILE % (LANES * _LANE_BATCH) == 0 and _SUB_LANES <= _TPB
assert _STILE == _SKETCH_SPAN  # a tile is one sketch part


@_kernel
def _support_kernel(g, losses, has_losses, w, tau, nblk, tot_h, tot_g, counts, mins, sketch, sketching):
    """Canonical block sums: lane-sequential sums, lanes combined in the canonical tree.

    The terms ``1 / a`` and ``g / a`` of a tile (``_STILE`` items of each of the block's
    ``_SUB`` canonical blocks) are formed by every thread from coalesced loads and put in
    shared memory; then the ``_SUB * LANES`` lane threads add them in the canonical order
    (lane ``l`` items ``l, l + 8, ...``; a point outside the support adds ``0.0``, which
    leaves a sum of non-negative terms unchanged). The terms' divisions run on every
    thread, the dependent additions on 8 lanes per canonical block, as the order demands.
    With ``sketching`` it records the DepRound sketch (:func:`support_block_sums`): a tile
    is one sketch part, and the lane sums after it are its prefix.
    """
    th = cuda.shared.array(_SUB_ITEMS, np.float64)
    tg = cuda.shared.array(_SUB_ITEMS, np.float64)
    sc = cuda.shared.array(_TPB, np.int64)
    sm = cuda.shared.array(_TPB, np.float64)
    lh = cuda.shared.array(_SUB_LANES, np.float64)
    lg = cuda.shared.array(_SUB_LANES, np.float64)
    tid = cuda.threadIdx.x
    sub = tid // _TPC
    part = tid % _TPC
    blk = cuda.blockIdx.x * _SUB + sub
    n = g.shape[0]
    lo = blk * _BLOCK
    hi = min(n, lo + _BLOCK) if blk < nblk else lo
    # the lane threads: thread ``tid < _SUB * LANES`` sums lane ``tid % LANES`` of block ``tid // LANES``
    lsub = tid // LANES
    lane = tid % LANES
    c = 0
    mn = math.inf
    ah = 0.0
    ag = 0.0
    buf = cuda.local.array(_SPREF, np.float64)
    bh = cuda.local.array(_LANE_BATCH, np.float64)
    bg = cuda.local.array(_LANE_BATCH, np.float64)
    steps = _BLOCK // _STILE
    for s in range(steps):
        t0 = lo + s * _STILE
        for k in range(_SPREF):  # the loads first: a tile's loads overlap
            i = t0 + k * _TPC + part
            buf[k] = np.float64(g[i]) if i < hi else -1.0
        for k in range(_SPREF):
            i = t0 + k * _TPC + part
            r = 0.0
            gr = 0.0
            if i < hi:
                gi = buf[k]
                a = _fma_free_add(gi, _loss(losses, has_losses, w, i, gi))
                if gi >= tau and a > 0:
                    r = 1.0 / a
                    gr = _mul(gi, r)
                    c += 1
                    mn = min(mn, a)
            th[sub * _STILE + k * _TPC + part] = r
            tg[sub * _STILE + k * _TPC + part] = gr
        cuda.syncthreads()
        if tid < _SUB_LANES:
            at = lsub * _STILE + lane
            for j0 in range(0, _STILE // LANES, _LANE_BATCH):
                for k in range(_LANE_BATCH):  # the shared loads first, then the dependent adds
                    bh[k] = th[at + (j0 + k) * LANES]
                    bg[k] = tg[at + (j0 + k) * LANES]
                for k in range(_LANE_BATCH):
                    ah += bh[k]
                    ag += bg[k]
            lh[tid] = ah  # (read below only when sketching; the next tile's writes follow a sync)
        cuda.syncthreads()
        if sketching and tid < _SUB_LANES and lane == 0:
            sb = cuda.blockIdx.x * _SUB + lsub
            if sb < nblk and (sb + 1) * _BLOCK <= n:
                sketch[sb * _SKETCH_PARTS + s] = _lane_tree(lh, lsub * LANES)
        if cuda.blockIdx.x * _SUB * _BLOCK + (s + 1) * _STILE >= n:
            break  # past the last item of every block of this CUDA block
    sc[tid] = c
    sm[tid] = mn
    if tid < _SUB_LANES:
        lh[tid] = ah
        lg[tid] = ag
    cuda.syncthreads()
    if part == 0 and blk < nblk:
        tot_h[blk] = _lane_tree(lh, sub * LANES)
        tot_g[blk] = _lane_tree(lg, sub * LANES)
        cc = 0
        mm = math.inf
        for t in range(sub * _TPC, (sub + 1) * _TPC):
            cc += sc[t]
            mm = min(mm, sm[t])
        counts[blk] = cc
        mins[blk] = mm
        if sketching and hi - lo < _BLOCK:
            _sketch_short_row(sketch, blk)


#: Items each support-sum lane loads ahead of summing them (loads in flight per thread).
_PREFETCH = 2 if SIMULATOR else 8


@_kernel
def _support_lane_kernel(g, losses, has_losses, w, tau, nblk, tot_h, tot_g, counts, mins, sketch, sketching):
    """Canonical block sums, a thread per (block, lane): the many-block layout.

    Each thread loads and sums its lane's items itself; with 8 threads per 65,536 points
    it fills the GPU only for large pools (see :data:`_TILE_MAX_BLOCKS`). Every thread
    takes the same number of steps (past its block's end it loads nothing), so that with
    ``sketching`` the block's lanes meet at the end of each sketch part: their running
    sums go to shared memory (two halves in turn: one barrier a part) and the lane-0
    thread writes the part's prefix.
    """
    sh = cuda.shared.array(_TPB, np.float64)
    sg = cuda.shared.array(_TPB, np.float64)
    sc = cuda.shared.array(_TPB, np.int64)
    sm = cuda.shared.array(_TPB, np.float64)
    sp = cuda.shared.array(_TPB2, np.float64)
    t = cuda.grid(1)
    tid = cuda.threadIdx.x
    blk = t // _LANES
    lane = t % _LANES
    n = g.shape[0]
    ah = 0.0
    ag = 0.0
    c = 0
    mn = math.inf
    lo = blk * _BLOCK
    hi = min(n, lo + _BLOCK) if blk < nblk else lo
    whole = hi - lo == _BLOCK
    buf = cuda.local.array(_PREFETCH, np.float64)
    # the steps of this CUDA block's first canonical block (all of them unless it is the
    # pool's short last one): the same count on every thread of the CUDA block
    first = cuda.blockIdx.x * (_TPB // _LANES) * _BLOCK
    nsteps = min(_BLOCK, n - first + _LANES * _PREFETCH - 1) // (_LANES * _PREFETCH)
    for step in range(nsteps):
        i0 = lo + lane + step * (_LANES * _PREFETCH)
        # the next _PREFETCH items of this lane are loaded before any is summed: the
        # loads overlap (a lane's sum is a dependent chain; its loads need not be)
        for k in range(_PREFETCH):
            i = i0 + k * _LANES
            buf[k] = np.float64(g[i]) if i < hi else -1.0
        for k in range(_PREFETCH):
            i = i0 + k * _LANES
            if i < hi:
                gi = buf[k]
                a = _fma_free_add(gi, _loss(losses, has_losses, w, i, gi))
                if gi >= tau and a > 0:
                    r = 1.0 / a
                    ah += r
                    ag += _mul(gi, r)
                    c += 1
                    mn = min(mn, a)
        if sketching and (step + 1) % _LANE_STEPS_PER_PART == 0:
            part = (step + 1) // _LANE_STEPS_PER_PART - 1
            half = (part & 1) * _TPB
            sp[half + tid] = ah
            cuda.syncthreads()
            if lane == 0 and whole:
                sketch[blk * _SKETCH_PARTS + part] = _lane_tree(sp, half + tid)
    sh[tid] = ah
    sg[tid] = ag
    sc[tid] = c
    sm[tid] = mn
    cuda.syncthreads()
    if lane == 0 and blk < nblk:
        tot_h[blk] = _lane_tree(sh, tid)
        tot_g[blk] = _lane_tree(sg, tid)
        cc = 0
        mm = math.inf
        for j in range(_LANES):
            cc += sc[tid + j]
            mm = min(mm, sm[tid + j])
        counts[blk] = cc
        mins[blk] = mm
        if sketching and not whole:
            _sketch_short_row(sketch, blk)


_TPB2 = 2 * _TPB  # the lane layout's two halves of sketch prefixes (a constant: a shared array size)
#: Steps of the lane layout in one sketch part (a step: _PREFETCH items of each lane).
_LANE_STEPS_PER_PART = _SKETCH_SPAN // (_LANES * _PREFETCH)
assert _SKETCH_SPAN % (_LANES * _PREFETCH) == 0 and _TPB % _LANES == 0


#: Pools of at most this many canonical blocks take the tile layout (``_support_kernel``),
#: larger ones a thread per lane (``_support_lane_kernel``): the same bits either way.
_TILE_MAX_BLOCKS = 4096


def support_block_sums(gains, losses, w, tau, threads, sketch=None):
    """Per block (host arrays): canonical sums over ``g >= tau, a > 0``.

    Returns the totals of ``1/a`` and ``g/a``, the counts and the minima of ``a``. With a
    ``sketch`` (a device float64 array of ``SKETCH_PARTS`` per block) the same pass
    records the DepRound sketch in it (:class:`~rad._backends.contract.RoundSketch`).
    """
    n = gains.shape[0]
    nblk = -(-n // BLOCK)
    lv, has = _losses_arg(losses)
    out = _Packed.get("support", [(nblk, np.float64, 0), (nblk, np.float64, 0), (nblk, np.int64, 0),
                                  (nblk, np.float64, 0)])
    tot_h, tot_g, counts, mins = out.dev
    sk = _dummy() if sketch is None else sketch
    if nblk <= _TILE_MAX_BLOCKS:
        _support_kernel[-(-nblk // _SUB), _TPB](gains, lv, has, float(w), float(tau), nblk, tot_h, tot_g,
                                                counts, mins, sk, sketch is not None)
    else:
        _support_lane_kernel[_grid(nblk * LANES), _TPB](gains, lv, has, float(w), float(tau), nblk, tot_h, tot_g,
                                                        counts, mins, sk, sketch is not None)
    return tuple(out.fetch())


def _totals(h: np.ndarray, g: np.ndarray, c: np.ndarray, mn: np.ndarray) -> tuple[float, float, int, float]:
    """The pool's support sums from the per-block ones (block totals added in block order)."""
    tot_h = float(np.cumsum(h)[-1]) if h.shape[0] else 0.0
    tot_g = float(np.cumsum(g)[-1]) if g.shape[0] else 0.0
    return tot_h, tot_g, int(c.sum()), float(mn.min()) if mn.shape[0] else math.inf


def support_sums(gains, losses, w, tau, threads):
    """Over ``g >= tau, a > 0``: ``(sum 1/a, sum g/a, count, min a)`` in canonical order."""
    return _totals(*support_block_sums(gains, losses, w, tau, threads))


def support_sums_sketched(gains, losses, w, tau, threads):
    """:func:`support_sums` and the DepRound sketch at ``tau`` recorded in the same pass.

    The sketch is a buffer kept between calls of this thread (:func:`_scratch`): it serves
    a DepRound of the same call (:func:`depround_sketched`), not a later one.
    """
    sketch = _scratch("sketch", -(-gains.shape[0] // BLOCK) * SKETCH_PARTS, np.float64)
    sums = _totals(*support_block_sums(gains, losses, w, tau, threads, sketch))
    return sums, RoundSketch(float(tau), sketch)


# ----------------------------------------------------------------- probabilities


@_kernel
def _materialize_kernel(g, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    dummy = out
    for i in range(start, g.shape[0], stride):
        out[i] = _prob_at(g, losses, has_losses, w, dummy, False, i, fill_loss, nu, gc, gf, lc, lf)


def materialize(gains, losses, w, params: Params, threads):
    """The probabilities ``q`` as a float64 *device* array."""
    n = gains.shape[0]
    lv, has = _losses_arg(losses)
    fill, nu, gc, gf, lc, lf = params.as_tuple()
    out = cuda.device_array(n, np.float64)
    _materialize_kernel[_stride_grid(n), _TPB](gains, lv, has, float(w), bool(fill), nu, gc, gf, lc, lf, out)
    return out


@_kernel
def _stats_kernel(g, raw, sign, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf, count, mnbits):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, g.shape[0], stride):
        gi = np.float64(g[i])
        p = _probability(gi, _loss(losses, has_losses, w, i, gi), fill_loss, nu, gc, gf, lc, lf)
        if p > 0:
            cuda.atomic.add(count, 0, 1)
            u = np.uint64(raw[i])
            if u == sign:
                u = np.uint64(0)
            cuda.atomic.min(mnbits, 0, u)


def support_stats(gains, losses, w, params: Params, threads):
    """``(number of q_i > 0, smallest gain with q_i > 0)``."""
    n = gains.shape[0]
    nbits, raw, sign = _bit_view(gains)
    lv, has = _losses_arg(losses)
    fill, nu, gc, gf, lc, lf = params.as_tuple()
    count = cuda.to_device(np.zeros(1, np.int64))
    mnbits = cuda.to_device(np.full(1, np.iinfo(np.uint64).max, np.uint64))
    _stats_kernel[_stride_grid(n), _TPB](gains, raw, sign, lv, has, float(w), bool(fill), nu, gc, gf, lc, lf,
                                  count, mnbits)
    c = int(count.copy_to_host()[0])
    if c == 0:
        return 0, math.inf
    mb = mnbits.copy_to_host()
    v = mb.astype(np.uint32).view(np.float32) if nbits == 32 else mb.view(np.float64)
    return c, float(v[0])


# ------------------------------------------------------------------------ DepRound
#
# The fixed-point sequence of rad._backends.canonical.round_sequence (docs/design.md §1,
# "DepRound"): every probability becomes int64 units of _ONE = 2^46 (_units, the IEEE
# expression of canonical.quantize), the running mass is the exact int64 prefix sum of the
# non-certain units, so chunk totals add up to the same bits in any order and skipping a
# chunk is exact. Masses stay int64 throughout (never uint64: numba would promote a mix
# of the two to float64).

_ONE = ONE
_SCALE = float(ONE)  # 2^46: scaling by it is exact, so an FMA cannot change x * _SCALE + 0.5
#: Items per thread of phase 1, and the two levels of chunk totals the walk skips by (any
#: widths give the same bits: integer sums are exact). _L2 is one CUDA block of phase 1,
#: at most _TPB L1 chunks.
_CHUNK = 64 if SIMULATOR else 8  # the simulator pays per thread: fewer, longer threads there
_L1 = 64
_L2 = _TPB * _CHUNK
_L1_PER_L2 = _L2 // _L1
assert BLOCK % _L2 == 0 and _L1_PER_L2 <= _TPB  # chunks tile a block; one thread per L1 total
_PARTS_PER_L1 = _L1 // _CHUNK  # per-thread partial sums in an L1 chunk (a power of two)
assert _L1 % _CHUNK == 0 and _CHUNK & (_CHUNK - 1) == 0 and _PARTS_PER_L1 & (_PARTS_PER_L1 - 1) == 0
_L2_TAG = 1 << 40  # last-positive codes: -(c + 2) for L1 chunk c, -(c + 2) - _L2_TAG for L2 chunk c


@cuda.jit(device=True)
def _units(p):
    """canonical.quantize of one probability: ``trunc(min(p, 1) * 2^46 + 0.5)``, 0 unless ``p > 0``."""
    if not (p > 0.0):
        return np.int64(0)
    x = min(p, 1.0)
    return np.int64(x * _SCALE + 0.5)


@cuda.jit(device=True)
def _mass_at(g, losses, has_losses, w, q, use_q, i, fill_loss, nu, gc, gf, lc, lf):
    """Item ``i``'s units in the running mass: 0 for zero and certain (``Q == ONE``) items."""
    u = _units(_prob_at(g, losses, has_losses, w, q, use_q, i, fill_loss, nu, gc, gf, lc, lf))
    if u == _ONE:
        return np.int64(0)
    return u


@cuda.jit(device=True)
def _set_bit(bits, i):
    bits[i >> 5] |= np.uint32(1) << np.uint32(i & 31)


@_kernel
def _chunk_kernel(g, losses, has_losses, w, q, use_q, fill_loss, nu, gc, gf, lc, lf, n, tot1, tot2, bits,
                  taken_count, chunks, use_chunks):
    """Phase 1 of DepRound: one CUDA block per ``_L2`` items, its chunk totals of both levels.

    Thread ``t`` quantizes items ``t, t + _TPB, ...`` of the block (coalesced reads) into
    shared memory; the int64 totals (certain items excluded) of every ``_L1`` items and of
    the block follow, and the certain items (``Q == ONE``) are marked taken. With
    ``use_chunks`` CUDA block ``j`` reads the ``_L2`` chunk ``chunks[j]``.
    """
    su = cuda.shared.array(_L2, np.int64)
    s0 = cuda.shared.array(_TPB, np.int64)
    s1 = cuda.shared.array(_L1_PER_L2, np.int64)
    tid = cuda.threadIdx.x
    base = (chunks[cuda.blockIdx.x] if use_chunks else cuda.blockIdx.x) * _L2
    certain = 0
    vb = cuda.local.array(_CHUNK, np.float64)
    for k in range(_CHUNK):  # the loads first (g is q itself when use_q): _CHUNK in flight
        i = base + k * _TPB + tid
        if i < n:
            vb[k] = np.float64(g[i])
    for k in range(_CHUNK):
        i = base + k * _TPB + tid
        u = np.int64(0)
        if i < n:
            u = _units(_prob_of(vb[k], losses, has_losses, w, use_q, i, fill_loss, nu, gc, gf, lc, lf))
            if u == _ONE:
                cuda.atomic.or_(bits, i >> 5, np.uint32(1) << np.uint32(i & 31))
                certain += 1
                u = np.int64(0)
        su[k * _TPB + tid] = u
    if certain:
        cuda.atomic.add(taken_count, base // _BLOCK, certain)
    cuda.syncthreads()
    # The totals as a tree of short sums (integer sums: any order gives the same bits):
    # every thread adds _CHUNK consecutive items, _L1 // _CHUNK of those make an L1
    # total, _L1_PER_L2 L1 totals the block's. Rotated starts spread the threads over the
    # shared-memory banks.
    s = np.int64(0)
    for j in range(_CHUNK):
        s += su[tid * _CHUNK + ((j + tid) & (_CHUNK - 1))]
    s0[tid] = s
    cuda.syncthreads()
    if tid < _L1_PER_L2:
        s = np.int64(0)
        for j in range(_PARTS_PER_L1):
            s += s0[tid * _PARTS_PER_L1 + ((j + tid) & (_PARTS_PER_L1 - 1))]
        s1[tid] = s
        if base + tid * _L1 < n:
            tot1[base // _L1 + tid] = s
    cuda.syncthreads()
    if tid == 0:
        s = np.int64(0)
        for j in range(_L1_PER_L2):
            s += s1[j]
        tot2[base // _L2] = s


@cuda.jit(device=True)
def _last_positive(g, losses, has_losses, w, q, use_q, fill_loss, nu, gc, gf, lc, lf, tot1, last_pos, hi):
    """``last_pos`` as an item (it may name the L1 or L2 chunk holding it: see ``_L2_TAG``)."""
    if last_pos > -2:
        return last_pos
    code = -last_pos - 2
    if code >= _L2_TAG:  # the last L1 chunk of positive mass in that L2 chunk
        c1 = (code - _L2_TAG) * _L1_PER_L2
        code = -1
        for j in range(c1, c1 + _L1_PER_L2):
            if j * _L1 < hi and tot1[j] > 0:
                code = j
    lo = code * _L1
    found = -1
    for j in range(lo, min(hi, lo + _L1)):
        if _mass_at(g, losses, has_losses, w, q, use_q, j, fill_loss, nu, gc, gf, lc, lf) > 0:
            found = j
    return found


@cuda.jit(device=True)
def _search(g, losses, has_losses, w, q, use_q, fill_loss, nu, gc, gf, lc, lf, tot1, tot2, s, e, cum, target):
    """First item of ``[s, e)`` whose running mass exceeds ``target``, or -1.

    ``cum`` is the running mass before item ``s``; whole chunks whose end does not exceed
    the target are skipped by their totals.
    """
    j = s
    while j < e:
        if j % _L2 == 0 and j + _L2 <= e:
            t = tot2[j // _L2]
            if not (cum + t > target):
                cum += t
                j += _L2
                continue
        if j % _L1 == 0 and j + _L1 <= e:
            t = tot1[j // _L1]
            if not (cum + t > target):
                cum += t
                j += _L1
                continue
        cum += _mass_at(g, losses, has_losses, w, q, use_q, j, fill_loss, nu, gc, gf, lc, lf)
        if cum > target:
            return j
        j += 1
    return -1


@cuda.jit(device=True)
def _target(state, counter, base):
    """``base + int64(u * 2^46)``: a run's first target (exact, the uniform's top 46 bits)."""
    return base + np.int64(_mul(_uniform(state, counter), _SCALE))


@cuda.jit(device=True)
def _skip_chunk(tot, size, tag, i, hi, cum, base, t1, first_hit, npos, last_pos):
    """Step over the chunk of ``size`` items at ``i`` when nothing happens in it.

    Nothing happens when its end mass crosses no multiple of ONE and (the run's first
    item not yet found) passes no target. Returns ``(skipped, cum, i, npos, last_pos)``;
    a chunk of positive mass becomes the run's last positive place (code ``-(c + 2) -
    tag``, see ``_L2_TAG``).
    """
    t = tot[i // size]
    end_cum = cum + t
    if end_cum < base + _ONE and not (first_hit < 0 and end_cum > t1):
        if t > 0:
            npos += 1
            last_pos = -(i // size) - 2 - tag
        return True, end_cum, min(hi, i + size), npos, last_pos
    return False, cum, i, npos, last_pos


@_kernel
def _round_kernel(g, losses, has_losses, w, q, use_q, fill_loss, nu, gc, gf, lc, lf, key, stream, own_stream,
                  max_crossings, nblk, n, tot1, tot2, bits, taken_count, left_idx, left_mass, blocks, use_blocks):
    """Phase 2 of DepRound, one thread per block: round_sequence of rad._backends.canonical.

    The walk runs over the int64 chunk totals of phase 1 (exact prefix sums, so a chunk's
    end mass is ``cum + total``), L2 chunks first, and descends to L1 chunks and then to
    the items only where something happens: a crossing of the next multiple of ONE or the
    current run's inverse-CDF target. A run's first uniform is known when the run starts
    (no draw happens inside a run), so its target is tracked while walking; only a second
    draw (the run's mass fell short) searches the run again. With ``max_crossings >= 0``
    (the merge's last round) no crossing is paired after that many. With ``use_blocks``
    thread ``j`` rounds block ``blocks[j]`` (``nblk`` is their count; the outputs of the
    blocks not listed are left as they are).
    """
    blk = cuda.grid(1)
    if blk >= nblk:
        return
    if use_blocks:
        blk = blocks[blk]
    lo = blk * _BLOCK
    hi = min(n, lo + _BLOCK)
    # rad._backends.rng.stream_state(key, block), or of the given stream (the merge)
    state = _splitmix(key ^ _splitmix(np.uint64(blk) if own_stream else stream))
    counter = np.uint64(0)
    ntaken = 0
    base = np.int64(0)  # ONE times the crossings so far
    m_start = np.int64(0)  # the running mass where the current run starts
    carry = -1
    cum = np.int64(0)
    prev_cum = np.int64(0)
    start = lo
    t1 = _target(state, counter, base)
    first_hit = -1
    npos = 0
    last_pos = -1
    i = lo
    while i < hi:
        if (i - lo) % _L2 == 0:
            skipped, cum, i, npos, last_pos = _skip_chunk(tot2, _L2, _L2_TAG, i, hi, cum, base, t1, first_hit,
                                                          npos, last_pos)
            if skipped:
                continue
        if (i - lo) % _L1 == 0:
            skipped, cum, i, npos, last_pos = _skip_chunk(tot1, _L1, 0, i, hi, cum, base, t1, first_hit, npos,
                                                          last_pos)
            if skipped:
                continue
        mass = _mass_at(g, losses, has_losses, w, q, use_q, i, fill_loss, nu, gc, gf, lc, lf)
        prev_cum = cum
        cum += mass
        if cum >= base + _ONE and (max_crossings < 0 or ntaken < max_crossings):  # crossing item i closes [start, i)
            pick = carry
            if npos > 0:
                counter += np.uint64(1)
                if not (m_start > t1):
                    if first_hit >= 0:
                        pick = first_hit
                    else:
                        total = prev_cum - base
                        if total > 0:
                            u2 = _uniform(state, counter)
                            counter += np.uint64(1)
                            t2 = base + np.int64(_mul(u2, np.float64(total)))
                            if not (m_start > t2):
                                pick = _search(g, losses, has_losses, w, q, use_q, fill_loss, nu, gc, gf, lc, lf,
                                               tot1, tot2, start, i, m_start, t2)
                                if pick < 0:
                                    pick = _last_positive(g, losses, has_losses, w, q, use_q, fill_loss, nu, gc,
                                                          gf, lc, lf, tot1, last_pos, hi)
            alpha = _ONE - (prev_cum - base)
            beta = _ONE - mass
            if pick < 0:
                _set_bit(bits, i)
                carry = -1
            else:
                u = _uniform(state, counter)
                counter += np.uint64(1)
                if _mul(u, np.float64(alpha + beta)) < np.float64(beta):
                    _set_bit(bits, pick)
                    carry = i
                else:
                    _set_bit(bits, i)
                    carry = pick
            ntaken += 1
            base += _ONE
            m_start = cum
            start = i + 1
            t1 = _target(state, counter, base)
            first_hit = -1
            npos = 0
            last_pos = -1
        else:
            if mass > 0:
                npos += 1
                last_pos = i
            if first_hit < 0 and cum > t1:
                first_hit = i
        i += 1
    # the last run: its survivor is the block's leftover
    pick = carry
    if npos > 0:
        counter += np.uint64(1)
        if not (m_start > t1):
            if first_hit >= 0:
                pick = first_hit
            else:
                total = cum - base
                if total > 0:
                    u2 = _uniform(state, counter)
                    counter += np.uint64(1)
                    t2 = base + np.int64(_mul(u2, np.float64(total)))
                    if not (m_start > t2):
                        pick = _search(g, losses, has_losses, w, q, use_q, fill_loss, nu, gc, gf, lc, lf, tot1, tot2,
                                       start, hi, m_start, t2)
                        if pick < 0:
                            pick = _last_positive(g, losses, has_losses, w, q, use_q, fill_loss, nu, gc, gf, lc, lf,
                                                  tot1, last_pos, hi)
    taken_count[blk] += ntaken
    left_idx[blk] = pick
    left_mass[blk] = np.float64(cum - base) / _SCALE  # exact: a multiple of 2^-46 below 1


@_kernel
def _mark_kernel(bits, idx):
    i = cuda.grid(1)
    if i < idx.shape[0]:
        _set_bit(bits, idx[i])


#: Threads per DepRound block in the compaction, and the bitmap words each one reads.
_COMPACT_TPB = 8 if SIMULATOR else 64
_WPT = _WORDS // _COMPACT_TPB


@_kernel
def _compact_kernel(bits, offsets, expect, out, errors):
    """The taken points of one DepRound block per CUDA block, in index order, at its offset.

    Each thread counts the bits of its ``_WPT`` words, an exclusive scan of the counts
    places them, and a block whose count differs from ``expect`` is reported in
    ``errors`` (nothing is written past ``out``).
    """
    sc = cuda.shared.array(_COMPACT_TPB, np.int64)
    blk = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    w0 = blk * _WORDS + tid * _WPT
    w1 = min(bits.shape[0], w0 + _WPT)
    c = 0
    for wd in range(w0, w1):
        c += cuda.popc(bits[wd])
    sc[tid] = c
    cuda.syncthreads()
    if tid == 0:
        run = 0
        for j in range(_COMPACT_TPB):
            x = sc[j]
            sc[j] = run
            run += x
        if run != expect[blk]:
            cuda.atomic.add(errors, 0, 1)
    cuda.syncthreads()
    o = offsets[blk] + sc[tid]
    for wd in range(w0, w1):
        word = bits[wd]
        while word != 0:
            bit = cuda.ffs(word) - 1
            if o < out.shape[0]:
                out[o] = wd * 32 + bit
            o += 1
            word &= word - np.uint32(1)


def _cleared_bits(n: int, fresh: bool = False) -> Any:
    """DepRound's bitmap of ``n`` points, all clear: the kept one, or a ``fresh`` one (always in the simulator)."""
    words = -(-n // 32)
    if SIMULATOR or fresh:
        return _full(words, 0, np.uint32)
    bits = _scratch("bits", words, np.uint32)
    _memset(bits, 0)
    return bits


def _round_blocks(g_arg: Any, lv: Any, has: bool, w: float, q_arg: Any, use_q: bool, params: tuple[Any, ...],
                  key: int, stream: int | None, n: int, max_crossings: int = -1, todo: np.ndarray | None = None,
                  bits: Any = None) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """Both DepRound phases over ``n`` points (block ``j`` on stream ``j``, or all on ``stream``).

    With ``max_crossings >= 0`` no crossing is paired after that many (the merge's last
    round: ``canonical.merge_leftovers``). With ``todo`` (a host bool per block) only
    those blocks are read and rounded, into the given bitmap ``bits``. Returns ``(bitmap,
    taken per block, leftover index per block, leftover mass per block)``; the bitmap
    stays on the device.
    """
    fill, nu, gc, gf, lc, lf = params
    nblk = -(-n // BLOCK)
    if bits is None:
        bits = _cleared_bits(n, fresh=stream is not None)  # (the leftovers' merge reads its bitmap afterwards)
    out = _Packed.get("round", [(nblk, np.int64, 0), (nblk, np.int64, 0), (nblk, np.float64, 0)])
    taken_count, left_idx, left_mass = out.dev
    tot1 = _scratch("tot1", -(-n // _L1), np.int64)
    tot2 = _scratch("tot2", -(-n // _L2), np.int64)
    listed = todo is not None and not todo.all()
    if listed:
        assert todo is not None
        blocks = np.flatnonzero(todo).astype(np.int64)
        per = BLOCK // _L2
        chunks = (blocks[:, None] * per + np.arange(per)).ravel()
        chunks = chunks[chunks * _L2 < n]
        chunk_arg, block_arg = _upload("chunks", chunks), _upload("blocks", blocks)
        nchunks, nround = len(chunks), len(blocks)
    else:
        chunk_arg = block_arg = _scratch("no_list", 1, np.int64)
        nchunks, nround = -(-n // _L2), nblk
    _chunk_kernel[max(1, nchunks), _TPB](g_arg, lv, has, float(w), q_arg, use_q, bool(fill), nu, gc, gf, lc, lf, n,
                                         tot1, tot2, bits, taken_count, chunk_arg, listed)
    _round_kernel[_grid(nround, _ROUND_TPB), _ROUND_TPB](
        g_arg, lv, has, float(w), q_arg, use_q, bool(fill), nu, gc, gf, lc, lf, np.uint64(key), np.uint64(stream or 0),
        stream is None, np.int64(max_crossings), nround, n, tot1, tot2, bits, taken_count, left_idx, left_mass,
        block_arg, listed,
    )
    per_block, li, lm = out.fetch()
    return bits, per_block, li, lm


_NO_PARAMS = (0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _host_core() -> Any:
    """The compiled C++ core (its merges give the same bits), or None where it is not built."""
    try:
        from rad import _core
    except ImportError:
        return None
    return _core


def _merge_leftovers(ids: np.ndarray, masses: np.ndarray, key: int, wanted: int,
                     on_device: bool = False) -> tuple[list[int], int]:
    """The merge of the block leftovers: :func:`rad._backends.canonical.merge_leftovers`.

    The leftovers are on the host already (one per block), so the C++ core merges them
    there when it is built (microseconds). Otherwise (or with ``on_device``) up to
    :data:`~rad._backends.canonical.MERGE_GROUP` leftovers are one ``round_sequence`` on
    :data:`~rad._backends.rng.MERGE_STREAM`, run by the block kernels on the device (a
    leftover mass is a multiple of 2^-46, so quantizing gives its units back exactly);
    more are merged in levels by the NumPy definition.
    ``wanted`` is the number of picks the merge owes (``canonical.merge_leftovers``).

    Returns the taken indices (from ``ids``) and the final leftover's index (or -1).
    """
    if masses.shape[0] == 0:
        return [], -1
    core = None if on_device else _host_core()
    if core is not None:
        taken_arr, last_id = core.merge_leftovers(np.ascontiguousarray(ids, dtype=np.int64),
                                  np.ascontiguousarray(masses, dtype=np.float64), int(key), int(wanted))
        return [int(i) for i in taken_arr], int(last_id)
    if masses.shape[0] > MERGE_GROUP:
        taken, last = merge_leftovers(ids, masses, key, wanted)
        return [int(i) for i in taken], int(last)
    dm = cuda.to_device(np.ascontiguousarray(masses, dtype=np.float64))
    bits, _, li, _ = _round_blocks(dm, _dummy(), False, 0.0, dm, True, _NO_PARAMS, key, MERGE_STREAM,
                                   masses.shape[0], max(0, wanted - 1))
    words = bits.copy_to_host()
    marked = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[: masses.shape[0]])
    pick = int(li[0])
    return [int(ids[i]) for i in marked], int(ids[pick]) if pick >= 0 else -1


# --------------------------------------------------- DepRound from the sketch
#
# sketch.hpp's draw_sketched_block, pick_in_parts and merge_spans (the Numba twin:
# numba_sketch). A block of the uncapped path with less than one unit of mass is rounded
# from bounds on its exact units prefixes, reading only the 512-point parts its pick may
# lie in; a block they cannot decide is rounded exactly, and so are the blocks a merge on
# bounds cannot decide. Here and in Numba every drawn block's pick is read before the
# merge; the C++ core reads only the picks the merge takes. The indices are always those
# of the plain rounding (docs/design.md §3).

_SKETCH_CAP = 2.0**62
_SKETCH_BOUNDS = _SKETCH_PARTS + 1  # the prefixes' bounds of a block, U(0) included (a constant: an array size)


@cuda.jit(device=True)
def _sketch_bounds(sketch, blk, nu, widen, rel, ul, uh):
    """``sketch_bounds`` of sketch.hpp: bounds of block ``blk``'s exact units prefixes.

    False when the row is unusable (a short block's -1s, or a sum too large).
    """
    scale = _mul(nu, _SCALE)
    ul[0] = 0
    uh[0] = 0
    for k in range(1, _SKETCH_PARTS + 1):
        p = sketch[blk * _SKETCH_PARTS + k - 1]
        if not (p >= 0.0) or not (p <= _SKETCH_CAP):
            return False
        if p == 0.0:  # no support point so far
            ul[k] = 0
            uh[k] = 0
            continue
        x = _mul(scale, p)
        slack = _mul(_fma_free_add(_mul(0.51, np.float64(k * _SKETCH_SPAN)), 2.0), widen)
        d = _mul(x, rel)
        lo = _fma_free_add(_fma_free_add(x, -d), -slack)
        hi = _fma_free_add(_fma_free_add(x, d), slack)
        if not (hi < _SKETCH_CAP):
            return False
        ul[k] = np.int64(math.floor(lo)) if lo > 0 else np.int64(0)
        uh[k] = np.int64(math.ceil(hi))
    for k in range(1, _SKETCH_PARTS + 1):
        ul[k] = max(ul[k], ul[k - 1])
    for k in range(_SKETCH_PARTS - 1, -1, -1):
        uh[k] = min(uh[k], uh[k + 1])
    return True


@_kernel
def _sketch_round_kernel(g, losses, has_losses, w, fill_loss, nu, gc, gf, lc, lf, sketch, widen, rel, key, nblk, n,
                         decided, pick, mass_lo, mass_hi):
    """sketch.hpp's ``draw_sketched_block`` then ``pick_in_parts``, one thread per block.

    ``decided[blk]`` is set where the bounds decide the block, with its pick and the
    bounds of its mass (in units); other blocks are left as they are (0s).
    """
    blk = cuda.grid(1)
    if blk >= nblk:
        return
    lo = blk * _BLOCK
    if n - lo < _BLOCK:
        return
    ul = cuda.local.array(_SKETCH_BOUNDS, np.int64)
    uh = cuda.local.array(_SKETCH_BOUNDS, np.int64)
    if not _sketch_bounds(sketch, blk, nu, widen, rel, ul, uh):
        return
    t_lo = ul[_SKETCH_PARTS]
    t_hi = uh[_SKETCH_PARTS]
    if not t_hi < _ONE:  # a crossing or a certain item may be there
        return
    if t_hi == 0:  # no mass: no draw, no leftover
        decided[blk] = 1
        pick[blk] = -1
        return
    if t_lo == 0:
        return
    state = _splitmix(key ^ _splitmix(np.uint64(blk)))
    x_lo = np.int64(_mul(_uniform(state, np.uint64(0)), _SCALE))
    x_hi = x_lo
    if not t_lo > x_lo:  # the first target misses: a second aims at floor(u2 T)
        if t_hi > x_lo:
            return
        u = _uniform(state, np.uint64(1))
        x_lo = np.int64(_mul(u, np.float64(t_lo)))
        x_hi = np.int64(_mul(u, np.float64(t_hi)))
    k1 = 0
    while k1 < _SKETCH_PARTS - 1 and not uh[k1 + 1] > x_lo:
        k1 += 1
    k2 = _SKETCH_PARTS - 1
    while k2 > k1 and not ul[k2] <= x_hi:
        k2 -= 1
    first = lo + k1 * _SKETCH_SPAN
    count = (k2 + 1 - k1) * _SKETCH_SPAN
    # the first positions whose running units exceed the lowest and the highest target
    # the bounds allow: the pick is decided when they agree
    xa = x_lo - uh[k1]
    xb = x_hi - ul[k1]
    ia = count
    ib = count
    run = np.int64(0)
    vb = cuda.local.array(_CHUNK, np.float64)
    j0 = 0
    while j0 < count and ib == count:
        for k in range(_CHUNK):  # the loads first: _CHUNK in flight
            vb[k] = np.float64(g[first + j0 + k])
        for k in range(_CHUNK):
            i = first + j0 + k
            run += _units(_prob_of(vb[k], losses, has_losses, w, False, i, fill_loss, nu, gc, gf, lc, lf))
            if ia == count and run > xa:
                ia = j0 + k
            if ib == count and run > xb:
                ib = j0 + k
        j0 += _CHUNK
    if ia != ib or ia >= count:
        return
    decided[blk] = 1
    pick[blk] = first + ia
    mass_lo[blk] = t_lo
    mass_hi[blk] = t_hi


def _merge_spans(ids: np.ndarray, lo: np.ndarray, hi: np.ndarray, key: int,
                 wanted: int) -> tuple[bool, list[int], int, int]:
    """sketch.hpp's merge of leftovers with masses within ``[lo, hi]`` units, one per block.

    The C++ core's where built, else the Numba twin. Returns ``(decided, taken ids, last
    pick, stuck)``: when undecided, exact masses for the blocks up to ``stuck`` decide it.
    """
    core: Any = _host_core()
    if core is not None:
        ok, taken, last, stuck = core.merge_spans(ids, lo, hi, int(key), int(wanted))
        return bool(ok), [int(i) for i in taken], int(last), int(stuck)
    from rad._backends import numba_sketch

    ok, picks, last, stuck = numba_sketch.merge_blocks(ids, lo, hi, key, wanted)
    return ok, [int(i) for i in picks], last, stuck


def _round_sketched(g_arg: Any, lv: Any, has: bool, w: float, params: tuple[Any, ...], key: int, n: int, b: int,
                    sketch: RoundSketch, slack_bits: int) -> tuple[Any, np.ndarray, list[int], int]:
    """DepRound's blocks and merge from the sketch: ``(bitmap, taken per block, merge picks, last)``.

    The blocks the sketch decides take nothing and leave their pick; the others are rounded
    exactly (the chunk pass reads only them); where the merge on bounds is undecided, the
    decided blocks with mass up to its ``stuck`` block are rounded exactly too, until it
    is decided.
    """
    fill, nu, gc, gf, lc, lf = params
    nblk = -(-n // BLOCK)
    res = _Packed.get("sketched", [(nblk, np.int64, 0)] * 4)
    widen = 2.0**slack_bits
    _sketch_round_kernel[_grid(nblk, _ROUND_TPB), _ROUND_TPB](
        g_arg, lv, has, float(w), bool(fill), nu, gc, gf, lc, lf, sketch.prefixes, widen, 2.0**-36 * widen,
        np.uint64(key), nblk, n, *res.dev)
    dec, pick, mlo, mhi = res.fetch()
    decided = dec.astype(bool)
    bits = _cleared_bits(n)
    per_block = np.zeros(nblk, np.int64)
    left_idx = np.full(nblk, -1, np.int64)
    exact = np.zeros(nblk, np.int64)
    todo = ~decided
    blocks = np.arange(nblk)
    while True:
        if todo.any():
            _, taken, li, lm = _round_blocks(g_arg, lv, has, w, _dummy(), False, params, key, None, n, todo=todo,
                                             bits=bits)
            if (taken[todo & decided] != 0).any():  # under one unit of mass: nothing to take
                raise RuntimeError("internal error: a sketched block took an index")
            per_block[todo] = taken[todo]
            left_idx[todo] = li[todo]
            exact[todo] = np.rint(lm[todo] * float(ONE)).astype(np.int64)  # exact: multiples of 2^-46 below 1
            decided &= ~todo
        ids = np.where(decided, pick, left_idx)
        ok, extra, last, stuck = _merge_spans(ids, np.where(decided, mlo, exact), np.where(decided, mhi, exact),
                                              key, b - int(per_block.sum()))
        if ok:
            return bits, per_block, extra, last
        todo = decided & (mhi > 0) & (blocks <= stuck)
        if not todo.any():
            raise RuntimeError("internal error: DepRound's merge undecided on exact masses")


def _depround(gains, losses, w, q, params: Params | None, b: int, key: int, sketch: RoundSketch | None = None,
              slack_bits: int = 0):
    use_q = q is not None
    n = (q if use_q else gains).shape[0]
    nblk = -(-n // BLOCK)
    lv, has = _losses_arg(losses)
    if use_q:
        g_arg, q_arg, ptuple = q, q, _NO_PARAMS
    else:
        assert params is not None
        g_arg, q_arg, ptuple = gains, _dummy(), params.as_tuple()
    if sketch is not None:
        bits, per_block, extra, last = _round_sketched(g_arg, lv, has, float(w), ptuple, key, n, b, sketch,
                                                       slack_bits)
    else:
        bits, per_block, li, lm = _round_blocks(g_arg, lv, has, float(w), q_arg, use_q, ptuple, key, None, n)
        keep = lm > 0
        ids, masses = li[keep], np.ascontiguousarray(lm[keep])
        extra, last = _merge_leftovers(ids, masses, key, b - int(per_block.sum()))
    if int(per_block.sum()) + len(extra) == b - 1 and last >= 0:
        extra.append(last)
    if extra:
        ex = np.asarray(extra, dtype=np.int64)
        _mark_kernel[_grid(len(extra)), _TPB](bits, _upload("mark_ids", ex))
        per_block = per_block + np.bincount(ex // BLOCK, minlength=nblk)
    if int(per_block.sum()) != b:
        raise RuntimeError(f"internal error: DepRound produced {int(per_block.sum())} indices for a budget of {b}")
    offsets = np.zeros(nblk, np.int64)
    np.cumsum(per_block[:-1], out=offsets[1:])
    out = cuda.device_array(b, np.int64)  # the result: never a reused buffer
    errors = _full(1, 0, np.int64, tag="compact_errors")
    _compact_kernel[nblk, _COMPACT_TPB](bits, _upload("compact_offsets", offsets),
                                        _upload("compact_expect", per_block), out, errors)
    if int(errors.copy_to_host()[0]):
        raise RuntimeError("internal error: DepRound's bitmap disagrees with its per-block counts")
    return out


def depround_sketched(gains, losses, w, params: Params, b, key, sketch, threads, slack_bits=0):
    """:func:`depround_params`, the same indices, from the sketch where it applies.

    ``sketch`` comes from :func:`support_sums_sketched` (a device array) of the same call;
    ``slack_bits`` widens its bounds (a test hook: 0 in use).
    """
    if sketch is None or not sketch.serves(gains.shape[0], params):
        return depround_params(gains, losses, w, params, b, key, threads)
    return _depround(gains, losses, w, None, params, int(b), int(key), sketch, int(slack_bits))


def depround_params(gains, losses, w, params: Params, b, key, threads):
    """DepRound of the probabilities ``params`` define, streamed on the device.

    Returns a device array of ``b`` sorted distinct ``int64`` indices.
    """
    return _depround(gains, losses, w, None, params, int(b), int(key))


def depround_q(q, b, key, threads):
    """DepRound of the device array ``q`` (float64) into ``b`` sorted distinct indices (device)."""
    return _depround(None, None, 0.0, q, None, int(b), int(key))


# ------------------------------------------------------ host kernels (fallback only)


def argsort_desc(g, threads):
    """Host fallback: the CPU backend's stable descending argsort of a copy."""
    return _cpu().argsort_desc(_to_host(g), threads)


def theorem1_scan(gains, losses, w, perm, m, threads):
    """Host fallback: the CPU backend's sorted scan on copies."""
    lo = None if losses is None else _to_host(losses)
    return _cpu().theorem1_scan(_to_host(gains), lo, w, _to_host(perm), m, threads)


def capped_eval(ctx, nu, b, m, threads):
    """Host fallback: the capped path's arrays are sorted on the host."""
    return _cpu().capped_eval(ctx, nu, b, m, threads)


def span_sums(g, w, span, threads):
    """Host fallback: the capped path sorts the gains on the host."""
    return _cpu().span_sums(_to_host(g), w, span, threads)


def values_at_least(g, t, threads, splits=()):
    """Host fallback: the capped path sorts the gains on the host."""
    return _cpu().values_at_least(_to_host(g), t, threads, splits)


def depround_blocks(gains, losses, w, params: Params, key, offset, first_stream, threads):
    """Host fallback (rad.dask's per-chunk rounding) on copies."""
    lo = None if losses is None else _to_host(losses)
    return _cpu().depround_blocks(_to_host(gains), lo, w, params, key, offset, first_stream, threads)

"""RAD on a Dask array: pools spread over machines or larger than one machine's memory.

The single-machine algorithm maps onto Dask without a scheduler of our own (docs/design.md §4):

1. **Threshold.** The sort-free radix select of Theorem 1's support: every chunk returns a
   histogram of its float bit patterns (count, sum 1/a, sum g/a, min g per bin: at most
   2 MiB per chunk per level; 2 levels for float32, up to 4 for float64), the workers add
   them pairwise (a fixed tree) and the client receives one a level, picks the boundary
   bin, and finally gathers that bin's few points.
2. **Support sums.** Every chunk returns its per-block canonical totals (24 bytes per
   65,536 points); the client adds them in block order — the exact bits of
   :func:`rad.solve` when chunk boundaries are multiples of the block size.
3. **DepRound.** Every chunk rounds its blocks on their own random streams and returns the
   indices it took plus one leftover per block (16 bytes per block); the client merges the
   leftovers in block order. With block-aligned chunks and the same seed this is exactly
   :func:`rad.select`'s output.

Only these small objects reach the client (the histograms also pass between workers as
they are added); the gains never leave their workers. The
rare cases the compiled single-machine path settles differently are documented on
:func:`solve`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from rad._backends import get_backend
from rad._backends.canonical import BLOCK, finish_selection, merge_leftovers
from rad._backends.contract import Kernels
from rad._backends.params import Params
from rad._backends.radix_select import radix_select
from rad._backends.rng import RNG, key_from_rng
from rad._solve.batch import _theorem1_value
from rad._solve.game import default_w
from rad._solve.solution import NetHarmWarning, SolutionSummary
from rad._solve.validation import check_budget, check_mistakes, check_w, invalid_value

__all__ = ["DaskSolution", "select", "solve"]

#: Bytes of results the client received from the workers in the last call (histograms,
#: gathered bin, block sums, DepRound picks and leftovers): what crossed the network.
last_transfer_bytes = 0

#: Stream ids of blocks in chunks that do not start on a block boundary (never collide
#: with the block-index streams of aligned chunks).
_UNALIGNED_STREAMS = 1 << 62


def _dask() -> tuple[Any, Any]:
    try:
        import dask
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test
        raise ImportError(
            "rad.dask needs Dask: pip install 'robust-active-distillation[dask]' "
            "(dask[array] and distributed)"
        ) from exc
    return dask, da


#: What :func:`solve` returns: :class:`rad.Solution`'s fields, without the arrays.
DaskSolution = SolutionSummary


# ----------------------------------------------------------------- per-chunk work
# Each runs on a worker, through that worker's best backend (C++ where rad._core is built,
# else Numba, else NumPy: every backend gives the same bits), on one thread: Dask runs the
# chunks in parallel.


def _kernels() -> Kernels:
    return get_backend("auto")


def _hist(chunk: np.ndarray, w: float, shift: int, pshift: int, prefix: int) -> tuple[Any, ...]:
    return _kernels().bit_histogram(np.ascontiguousarray(chunk), None, w, shift, pshift, prefix, 1)


def _hist_stats(chunk: np.ndarray, w: float, shift: int, pshift: int, prefix: int) -> tuple[Any, ...]:
    """The first level's histogram, plus the chunk's largest gain (NaN-free; 0 if empty)."""
    c = np.ascontiguousarray(chunk)
    top = float(np.nanmax(c)) if c.shape[0] and not np.all(np.isnan(c)) else 0.0
    return (*_hist(c, w, shift, pshift, prefix), top)


def _merge_histograms(p: tuple[Any, ...], q: tuple[Any, ...]) -> tuple[Any, ...]:
    """Two histograms of :func:`_hist` (or :func:`_hist_stats`) as one."""
    out = (p[0] + q[0], p[1] + q[1], p[2] + q[2], np.minimum(p[3], q[3]), bool(p[4]) or bool(q[4]))
    return (*out, max(p[5], q[5])) if len(p) > 5 else out


def _gather(chunk: np.ndarray, w: float, shift: int, key: int, count: int) -> tuple[Any, ...]:
    return _kernels().bit_gather(np.ascontiguousarray(chunk), None, w, shift, key, count, 1)


def _first_invalid(chunk: np.ndarray) -> tuple[int, float]:
    """The chunk's first NaN, infinite or negative entry and its value, or ``(-1, 0.0)``."""
    c = np.ascontiguousarray(chunk)
    i = int(_kernels().first_invalid(c, 1))
    return i, (float(c[i]) if i >= 0 else 0.0)


def _block_sums(chunk: np.ndarray, w: float, tau: float) -> tuple[Any, ...]:
    return _kernels().support_block_sums(np.ascontiguousarray(chunk), None, w, tau, 1)


def _round_chunk(
    chunk: np.ndarray, w: float, params: Params, key: int, offset: int, first_stream: int, scale: int = 0
) -> tuple[Any, ...]:
    c = np.ascontiguousarray(chunk)
    if scale:  # params are in units of gains * 2**scale (rad.solve rescaled extreme gains)
        c = np.ldexp(c.astype(np.float64), scale)
    return _kernels().depround_blocks(c, None, w, params, key, offset, first_stream, 1)


# ------------------------------------------------------------------------ client


def _validate(gains: Any, m: float, b: int, w: float | None) -> tuple[Any, Any, int, float, int, float]:
    dask, da = _dask()
    if not isinstance(gains, da.Array):
        raise TypeError(f"gains must be a dask.array.Array, got {type(gains).__name__} (use rad.select for NumPy)")
    if gains.ndim != 1:
        raise ValueError(f"gains must be one-dimensional, got shape {gains.shape}")
    if gains.dtype.kind == "f" and gains.dtype.itemsize in (4, 8) and not gains.dtype.isnative:
        gains = gains.astype(gains.dtype.newbyteorder("="))  # big-endian: as rad.select accepts it
    if gains.dtype not in (np.float32, np.float64):
        raise TypeError(f"gains must be float32 or float64, got {gains.dtype}")
    if math.isnan(gains.shape[0]) or gains.shape[0] == 0:
        raise ValueError("gains must have a known, non-zero length (for a filtered array: x.compute_chunk_sizes())")
    n = int(gains.shape[0])
    if 0 in gains.chunks[0]:  # chunks emptied by a filter: the same boundaries without them
        gains = gains.rechunk((tuple(c for c in gains.chunks[0] if c > 0),))
    mf = check_mistakes(m, n)
    bi = check_budget(b, n)
    wf = default_w(mf, n) if w is None else check_w(w)
    return dask, gains, n, mf, bi, wf


def _compute(dask: Any, tasks: list[Any]) -> tuple[Any, ...]:
    """dask.compute, counting the bytes of the results that come back to the client."""
    global last_transfer_bytes
    parts: tuple[Any, ...] = dask.compute(*tasks)
    for p in parts:
        for x in p if isinstance(p, tuple) else (p,):
            last_transfer_bytes += int(getattr(x, "nbytes", 8))
    return parts


def _chunk_offsets(gains: Any) -> list[int]:
    return [0, *np.cumsum(gains.chunks[0]).tolist()]


def solve(gains: Any, m: float, b: int = 1, *, w: float | None = None) -> DaskSolution:
    """Theorem 1's threshold, ``k*`` and the value for a Dask array of gains.

    The same threshold and ``k*`` as :func:`rad.solve` on the concatenated array, and the
    same value and parameters bit for bit when every chunk boundary is a multiple of
    65,536 (other chunkings add the same numbers in another order: equal to ~1e-15
    relative). Two documented exceptions: (a) when caps bind (``b * max p* > 1``) the exact capped path needs a
    sort, so the gains are gathered to the client and :func:`rad.solve` runs there (a
    warning says so); (b) in the rare near tie — a group whose join test lies within
    1e-10 (relative) of the tie, which :func:`rad.solve` settles with its sorted scan —
    the sort-free decision stands (either choice is optimal to rounding).

    For gains that :func:`rad.solve` rescales (subnormal, or near the float64 maximum) the
    solution comes from the client's :func:`rad.solve`, and its ``params`` are in units of
    the gains times ``2**e`` (that solve's ``scale_exponent``, which this summary does not
    carry: unscaled they can overflow); :func:`select` applies them to the rescaled chunks.
    """
    global last_transfer_bytes
    dask, gains, n, m, b, w = _validate(gains, m, b, w)
    last_transfer_bytes = 0
    return _solve(dask, gains, n, m, b, w)[0]


def _check_values(dask: Any, chunks: list[Any], offsets: list[int]) -> None:
    firsts = dask.compute(*[dask.delayed(_first_invalid)(c) for c in chunks])
    for off, (f, value) in zip(offsets, firsts):
        if f >= 0:
            raise invalid_value("gains", off + f, value)


def _solve(dask: Any, gains: Any, n: int, m: float, b: int, w: float) -> tuple[DaskSolution, int]:
    """The solution, and the power of two its ``params`` assume the gains were scaled by."""
    chunks = gains.to_delayed().ravel().tolist()
    offsets = _chunk_offsets(gains)
    nbits = 32 if gains.dtype == np.float32 else 64
    if b == 0:  # nothing to choose, but bad values are refused as rad.select refuses them
        _check_values(dask, chunks, offsets)
        return DaskSolution(0.0, 0, math.inf, w, m, b, n, False, Params("gain", 0.0)), 0
    if b == n:  # every q is 1 (rad.solve's own case: its value sums the pool's payoffs)
        _check_values(dask, chunks, offsets)  # before the gathering's warning
        return _solve_on_client(gains, n, m, b, w)
    g_max = [0.0]

    def histogram(shift: int, pshift: int, prefix: int) -> tuple[Any, Any, Any, Any, bool]:
        first = pshift >= nbits  # the first level also reports every chunk's largest gain
        fn = _hist_stats if first else _hist
        # Merged pairwise on the workers (a fixed tree): the client receives one histogram
        # a level, not 2 MiB a chunk. The order of the sums' additions is the tree's; tau
        # and k* do not depend on it (any chunking gives them), and the value and params
        # come from the canonical block sums below.
        level = [dask.delayed(fn)(c, w, shift, pshift, prefix) for c in chunks]
        while len(level) > 1:
            level = [dask.delayed(_merge_histograms)(*level[i : i + 2]) if i + 1 < len(level) else level[i]
                     for i in range(0, len(level), 2)]
        (root,) = _compute(dask, level)
        if first:
            g_max[0] = root[5]
        return root[0], root[1], root[2], root[3], bool(root[4])

    def gather(shift: int, key: int, count: int) -> tuple[Any, Any]:
        parts = _compute(dask, [dask.delayed(_gather)(c, w, shift, key, count) for c in chunks])
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    status, tau, kstar, g_total = radix_select(histogram, gather, nbits, m)
    if status == 2:
        _check_values(dask, chunks, offsets)
    # gains near the float64 maximum: a = (1 + w) g and its sums overflow (rad.solve rescales)
    huge = math.frexp(g_max[0])[1] + math.frexp(1.0 + w)[1] > 1021 - (n + 2).bit_length()
    if g_total >= m and tau > 0 and not huge:
        parts = _compute(dask, [dask.delayed(_block_sums)(c, w, tau) for c in chunks])
        h = g = 0.0
        for p in parts:  # blocks in order: the canonical sum of rad.solve
            for x in p[0].tolist():
                h += x
            for x in p[1].tolist():
                g += x
        count = int(sum(int(p[2].sum()) for p in parts))
        min_a = min(float(p[3].min()) for p in parts)
        nu = b / h
        if math.isfinite(h) and nu <= min_a:
            value = b * _theorem1_value(None, None, w, m, tau, g, h, count)
            params = Params("gain", nu, gain_cut=tau, gain_frac=1.0)
            return DaskSolution(value, count, tau, w, m, b, n, False, params), 0
    return _solve_on_client(gains, n, m, b, w)


def _solve_on_client(gains: Any, n: int, m: float, b: int, w: float) -> tuple[DaskSolution, int]:
    """:func:`rad.solve` on the gathered gains (the capped path needs a sort), with a warning."""
    warnings.warn(
        "rad.dask: the optimum caps some probabilities at 1 (or the pool is degenerate or "
        "needs rescaling: subnormal or near-overflow gains); "
        "the exact capped solution needs a sort, so the gains are gathered to the client",
        RuntimeWarning,
        stacklevel=4,
    )
    import rad

    global last_transfer_bytes
    pool = gains.compute()
    last_transfer_bytes += int(pool.nbytes)  # the gathered pool crossed the network too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NetHarmWarning)
        sol = rad.solve(pool, m, b, w=w)
    if sol.value < 0:
        warnings.warn(f"the game's value is negative ({sol.value:.6g}): the teacher is expected to do net harm",
                      NetHarmWarning, stacklevel=4)
    summary = DaskSolution(sol.value, sol.k_star, sol.threshold, w, m, b, n, sol.capped, sol.params)
    return summary, sol.scale_exponent


def select(
    gains: Any,
    m: float,
    b: int,
    *,
    w: float | None = None,
    rng: RNG = None,
) -> np.ndarray:
    """Exactly ``b`` distinct global indices (sorted ``int64``) for a Dask array of gains.

    Uses the current Dask scheduler (e.g. a ``distributed.Client``). With chunk sizes that
    are multiples of 65,536 (:data:`rad._backends.canonical.BLOCK`) and the same ``rng``, the
    indices are exactly those of :func:`rad.select` on the concatenated array.
    """
    global last_transfer_bytes
    dask, gains, n, m, b, w = _validate(gains, m, b, w)
    last_transfer_bytes = 0
    key = key_from_rng(rng)
    sol, scale = _solve(dask, gains, n, m, b, w)
    if b == 0:
        return np.zeros(0, dtype=np.int64)
    chunks = gains.to_delayed().ravel().tolist()
    offsets = _chunk_offsets(gains)
    aligned = all(off % BLOCK == 0 for off in offsets[:-1])
    params = sol.params
    tasks = []
    for c, off in zip(chunks, offsets):
        first = off // BLOCK if aligned else _UNALIGNED_STREAMS + off
        tasks.append(dask.delayed(_round_chunk)(c, w, params, key, off, first, scale))
    parts = _compute(dask, tasks)
    taken = [int(i) for p in parts for i in p[0].tolist()]
    ids = np.concatenate([p[1] for p in parts])
    masses = np.concatenate([p[2] for p in parts])
    keep = masses > 0
    ids, masses = ids[keep], masses[keep]
    merged, pick = merge_leftovers(ids, masses, key, b - len(taken))
    return finish_selection(taken + merged, pick, b)

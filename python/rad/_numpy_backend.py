"""The NumPy reference backend: short, readable, and the definition the others match.

Every kernel here has a twin with the same signature in the C++ module and in
:mod:`rad._numba`. Sums use the *canonical order* (:func:`canonical_prefix`), and DepRound
uses the counter-based generator of :mod:`rad._rng`, so all backends return bit-identical
results for the same input and key, for any number of threads.
"""

from __future__ import annotations

import numpy as np

from rad._rng import MERGE_STREAM, stream_state, uniform
from rad._solution import Params, probabilities_from_params

__all__ = [
    "BLOCK",
    "argsort_asc",
    "argsort_desc",
    "canonical_prefix",
    "canonical_sum",
    "block_totals",
    "canonical_total",
    "depround_params",
    "depround_q",
    "first_invalid",
    "name",
    "running_mass",
    "support_block_sums",
    "support_stats",
    "support_sums",
    "theorem1_scan",
]

name = "numpy"
#: Items per block, for canonical sums and for DepRound (fixed, never the thread count).
BLOCK = 1 << 16


def canonical_prefix(x: np.ndarray) -> np.ndarray:
    """Inclusive prefix sums in the canonical order every backend uses.

    Sequential sums inside aligned blocks of :data:`BLOCK` items, block totals summed
    sequentially, and ``prefix[i] = offset[block(i)] + local[i]``. A parallel scan with
    any thread count reproduces these bits exactly.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    if n <= BLOCK:  # one block: offset 0, and 0.0 + local is local
        return np.cumsum(x)
    nb = -(-n // BLOCK)
    padded = np.zeros(nb * BLOCK)
    padded[:n] = x
    local = np.cumsum(padded.reshape(nb, BLOCK), axis=1)
    offsets = np.zeros(nb)
    np.cumsum(local[:-1, -1], out=offsets[1:])
    return (local + offsets[:, None]).ravel()[:n]


def canonical_sum(x: np.ndarray) -> float:
    """The total of :func:`canonical_prefix` (0.0 for an empty array)."""
    p = canonical_prefix(x)
    return float(p[-1]) if p.shape[0] else 0.0


LANES = 8


def block_totals(x: np.ndarray) -> np.ndarray:
    """Per-block totals in the vector-friendly canonical order of the compiled sums.

    Inside each block, item ``p`` goes to lane ``p % 8`` (sequential per lane); the lanes
    combine as ``((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7))``.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        return np.zeros(0)
    nb = -(-n // BLOCK)
    width = BLOCK if nb > 1 else -(-n // LANES) * LANES  # padding with zeros changes nothing
    padded = np.zeros(nb * width)
    padded[:n] = x
    lanes = np.cumsum(padded.reshape(nb, width // LANES, LANES), axis=1)[:, -1, :]
    l = [lanes[:, j] for j in range(LANES)]
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))


def canonical_total(x: np.ndarray) -> float:
    """The canonical total: :func:`block_totals` added sequentially in block order."""
    blocks = block_totals(x)
    return float(np.cumsum(blocks)[-1]) if blocks.shape[0] else 0.0


def first_invalid(x: np.ndarray) -> int:
    """Index of the first NaN, infinite or negative entry, or -1."""
    bad = np.flatnonzero(~(np.isfinite(x) & (x >= 0)))
    return int(bad[0]) if bad.shape[0] else -1


def argsort_desc(g: np.ndarray, threads: int = 1) -> np.ndarray:
    """Stable argsort by descending value (ties keep their original order)."""
    return np.argsort(-np.asarray(g, dtype=np.float64), kind="stable").astype(np.int64)


def argsort_asc(x: np.ndarray, threads: int = 1) -> np.ndarray:
    """Stable argsort by ascending value."""
    return np.argsort(x, kind="stable").astype(np.int64)


def _losses(g: np.ndarray, losses: np.ndarray | None, w: float) -> np.ndarray:
    return np.asarray(losses, dtype=np.float64) if losses is not None else w * g


def theorem1_scan(
    gains: np.ndarray,
    losses: np.ndarray | None,
    w: float,
    perm: np.ndarray,
    m: float,
    threads: int = 1,
) -> tuple[int, float]:
    """Theorem 1's ``k*`` by the threshold form, and ``G_n``.

    In descending-gain order, a tie group starting at position ``k`` joins the support
    iff ``g_k H_k >= G_k - m`` (exclusive prefix sums; DESIGN §1: ``N`` is unimodal and a
    group is in or out as a whole). Returns the end of the last joining group and the
    sum of ``g/a`` over points with ``a > 0``. Points with ``a == 0`` contribute 0.
    """
    gs = np.asarray(gains, dtype=np.float64)[perm]
    a = gs + _losses(gs, None if losses is None else np.asarray(losses)[perm], w)
    pos = a > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        hp = canonical_prefix(np.where(pos, 1.0 / a, 0.0))
        gp = canonical_prefix(np.where(pos, gs / a, 0.0))
    starts = np.flatnonzero(np.diff(gs, prepend=np.nan) != 0)
    h_excl = np.where(starts > 0, hp[starts - 1], 0.0)
    g_excl = np.where(starts > 0, gp[starts - 1], 0.0)
    joins = gs[starts] * h_excl >= g_excl - m
    fails = np.flatnonzero(~joins)
    kstar = int(starts[fails[0]]) if fails.shape[0] else gs.shape[0]
    return kstar, float(gp[-1])


def support_block_sums(
    gains: np.ndarray, losses: np.ndarray | None, w: float, tau: float, threads: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per block, over points with ``g >= tau`` and ``a > 0``: :func:`block_totals` of
    ``r = 1/a`` and ``g * r``, the count and the smallest ``a``."""
    g = np.asarray(gains, dtype=np.float64)
    a = g + _losses(g, losses, w)
    mask = (g >= tau) & (a > 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = 1.0 / a
        gr = g * r  # 0 * inf = nan where a == 0: masked out below
    starts = np.arange(0, g.shape[0], BLOCK)
    counts = np.add.reduceat(mask.astype(np.int64), starts) if g.shape[0] else np.zeros(0, np.int64)
    mins = np.minimum.reduceat(np.where(mask, a, np.inf), starts) if g.shape[0] else np.zeros(0)
    return block_totals(np.where(mask, r, 0.0)), block_totals(np.where(mask, gr, 0.0)), counts, mins


def support_sums(
    gains: np.ndarray, losses: np.ndarray | None, w: float, tau: float, threads: int = 1
) -> tuple[float, float, int, float]:
    """Over points with ``g >= tau`` and ``a > 0`` (original order, :func:`canonical_total`):
    ``(sum r, sum g * r, count, min a)`` with ``r = 1/a``."""
    h, gg, counts, mins = support_block_sums(gains, losses, w, tau)
    total = lambda x: float(np.cumsum(x)[-1]) if x.shape[0] else 0.0  # noqa: E731
    return total(h), total(gg), int(counts.sum()), float(mins.min()) if mins.shape[0] else float("inf")


def materialize(
    gains: np.ndarray, losses: np.ndarray | None, w: float, params: Params, threads: int = 1
) -> np.ndarray:
    """The probabilities defined by ``params`` (see :mod:`rad._solution`)."""
    return probabilities_from_params(gains, losses, w, params)


def support_stats(
    gains: np.ndarray, losses: np.ndarray | None, w: float, params: Params, threads: int = 1
) -> tuple[int, float]:
    """``(number of q_i > 0, smallest gain with q_i > 0)``."""
    q = materialize(gains, losses, w, params)
    mask = q > 0
    count = int(np.count_nonzero(mask))
    return count, float(np.asarray(gains)[mask].min()) if count else float("inf")


# --------------------------------------------------------------------------- DepRound


#: Probabilities this close to 1 count as certain (a marginal moves by < 1e-9); every
#: other item then moves the running mass by less than 1, one integer crossing at a time.
CERTAIN = 1.0 - 2.0**-30
#: The running mass is summed sequentially inside chunks of this many items.
CHUNK = 8


def running_mass(mass: np.ndarray) -> np.ndarray:
    """The running mass ``M`` of DepRound in its canonical chunked order.

    ``M_i = O_c + L_i`` with ``L_i`` the sequential sum inside chunk ``c`` (of
    :data:`CHUNK` items) and ``O_{c+1} = O_c + L_last(c)``: short dependency chains for the
    compiled kernels, the same bits everywhere.
    """
    n = mass.shape[0]
    nc = -(-n // CHUNK)
    padded = np.zeros(nc * CHUNK)
    padded[:n] = mass
    local = np.cumsum(padded.reshape(nc, CHUNK), axis=1)
    off = np.zeros(nc)
    np.cumsum(local[:-1, -1], out=off[1:])
    return (local + off[:, None]).ravel()[:n]


def _round_sequence(q: np.ndarray, state: int) -> tuple[list[int], int, float]:
    """Sequential-pairing DepRound of one block (DESIGN §1, "DepRound").

    Items with ``q >= CERTAIN`` are taken, items with ``q <= 0`` skipped. The running
    mass ``M`` (:func:`running_mass`) of the rest crosses an integer at *crossing* items;
    between two crossings lies a *run*, whose members (the carried item and the run's
    items) merge into one carried item picked with probability proportional to mass — by
    inverse CDF with one uniform ``t`` aimed at ``k + t`` (a second uniform only if the
    run's mass fell short of it). At a crossing item ``j`` the carry (mass ``S``) and ``j``
    are paired exactly as in Algorithm 2: the carry is taken with probability
    ``(1-q_j) / ((1-S) + (1-q_j))``.

    Returns the positions taken, and the leftover (position or -1, mass in [0, 1)).
    """
    ones = q >= CERTAIN
    taken: list[int] = np.flatnonzero(ones).tolist()
    mass = np.where(ones | (q <= 0), 0.0, q)
    n = mass.shape[0]
    if n == 0:
        return taken, -1, 0.0
    cum = running_mass(mass)
    floor = np.floor(cum)
    crossings = np.flatnonzero(floor > np.concatenate(([0.0], floor[:-1])))
    n_pos = np.concatenate(([0], np.cumsum(mass > 0)))
    counter = 0

    def draw() -> float:
        nonlocal counter
        u = uniform(state, counter)
        counter += 1
        return u

    def resolve(s: int, e: int, k: float, m_start: float, carry: int) -> int:
        """The survivor of the run ``[s, e)`` entered with ``carry`` at running sum ``m_start``."""
        if n_pos[e] - n_pos[s] == 0:
            return carry
        target = k + draw()
        if m_start > target:
            return carry
        i = s + int(np.searchsorted(cum[s:e], target, side="right"))
        if i < e:
            return i
        total = cum[e - 1] - k
        if not total > 0:
            return carry
        target = k + draw() * total
        if m_start > target:
            return carry
        i = s + int(np.searchsorted(cum[s:e], target, side="right"))
        if i < e:
            return i
        return s + int(np.flatnonzero(mass[s:e] > 0)[-1])

    k, m_start, start, carry = 0.0, 0.0, 0, -1
    for j in crossings.tolist():
        pick = resolve(start, j, k, m_start, carry)
        held = (cum[j - 1] if j > 0 else 0.0) - k
        alpha, beta = 1.0 - held, 1.0 - mass[j]
        if pick < 0:
            taken.append(j)
            carry = -1
        elif draw() * (alpha + beta) < beta:
            taken.append(pick)
            carry = j
        else:
            taken.append(j)
            carry = pick
        k += 1.0
        m_start = cum[j]
        start = j + 1
    pick = resolve(start, n, k, m_start, carry)
    return taken, pick, float(cum[-1] - k)


def _finish(taken: list[int], pick: int, b: int) -> np.ndarray:
    """Round the final leftover so that exactly ``b`` distinct indices come out."""
    if len(taken) == b - 1 and pick >= 0:
        taken.append(pick)
    out = np.sort(np.asarray(taken, dtype=np.int64))
    if out.shape[0] != b or (b > 1 and not np.all(np.diff(out) > 0)):
        raise RuntimeError(
            f"internal error: DepRound produced {out.shape[0]} indices for a budget of {b}"
        )
    return out


def depround_q(q: np.ndarray, b: int, key: int, threads: int = 1) -> np.ndarray:
    """DepRound of ``q`` (sum ~ ``b``) into exactly ``b`` sorted distinct indices.

    Blocks of :data:`BLOCK` items are rounded independently (stream = block index), their
    leftovers merged in block order on :data:`rad._rng.MERGE_STREAM`.
    """
    q = np.asarray(q, dtype=np.float64)
    taken: list[int] = []
    left_idx: list[int] = []
    left_mass: list[float] = []
    for blk, lo in enumerate(range(0, q.shape[0], BLOCK)):
        t, pick, held = _round_sequence(q[lo : lo + BLOCK], stream_state(key, blk))
        taken.extend(lo + i for i in t)
        if held > 0:
            left_idx.append(lo + pick)
            left_mass.append(held)
    t, pick, _ = _round_sequence(np.asarray(left_mass), stream_state(key, MERGE_STREAM))
    taken.extend(left_idx[i] for i in t)
    return _finish(taken, left_idx[pick] if pick >= 0 else -1, b)


def depround_params(
    gains: np.ndarray,
    losses: np.ndarray | None,
    w: float,
    params: Params,
    b: int,
    key: int,
    threads: int = 1,
) -> np.ndarray:
    """DepRound of the probabilities defined by ``params`` (materialised here)."""
    return depround_q(materialize(gains, losses, w, params), b, key)

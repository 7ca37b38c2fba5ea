"""The canonical order of every sum and the DepRound sequence: what makes backends agree.

Every backend (C++, Numba, NumPy, and :mod:`rad.dask` per chunk) sums in the order
defined here and rounds with the sequence defined here, so they return bit-identical
results for the same input and key, for any number of threads (``docs/design.md``,
"Reproducibility"). The functions are the readable NumPy definitions; the compiled
kernels reproduce them.
"""

from __future__ import annotations

import numpy as np

from rad._backends.rng import uniform

__all__ = [
    "BLOCK",
    "CERTAIN",
    "CHUNK",
    "LANES",
    "block_totals",
    "canonical_prefix",
    "finish_selection",
    "round_sequence",
    "running_mass",
]

#: Items per block, for canonical sums and for DepRound (fixed, never the thread count).
BLOCK = 1 << 16


def canonical_prefix(x: np.ndarray) -> np.ndarray:
    """Inclusive prefix sums in the canonical order every backend uses.

    Sequential sums inside aligned blocks of :data:`BLOCK` items, block totals summed
    sequentially, and ``prefix[i] = offset[block(i)] + local[i]``. A parallel scan with
    any thread count reproduces these bits exactly.
    """
    x = np.asarray(x, dtype=np.float64)
    return _blocked_prefix(x, BLOCK)


def _blocked_prefix(x: np.ndarray, width: int) -> np.ndarray:
    """Sequential sums inside aligned pieces of ``width`` items plus sequential offsets.

    ``prefix[i] = offset[piece(i)] + local[i]``: the order of :func:`canonical_prefix`
    (pieces of :data:`BLOCK`) and of :func:`running_mass` (chunks of :data:`CHUNK`).
    """
    n = x.shape[0]
    if n <= width:  # one piece: offset 0, and 0.0 + local is local
        return np.cumsum(x)
    pieces = -(-n // width)
    padded = np.zeros(pieces * width)
    padded[:n] = x
    local = np.cumsum(padded.reshape(pieces, width), axis=1)
    offsets = np.zeros(pieces)
    np.cumsum(local[:-1, -1], out=offsets[1:])
    return (local + offsets[:, None]).ravel()[:n]



#: Lanes of the vector-friendly per-block totals.
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
    totals: np.ndarray = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
    return totals



#: Only ``q == 1`` is certain (taken without pairing). Every other item moves the running
#: mass by less than 1 (its rounded sum by at most 1: one integer crossing at a time), and
#: takes part in the pairing however close to 1 it is. (A shortcut at ``1 - 2^-30`` used
#: to drop the mass such items shed: 2^20 of them starved a 1e-3 item entirely.)
CERTAIN = 1.0
#: The running mass is summed sequentially inside chunks of this many items.
CHUNK = 8


def running_mass(mass: np.ndarray) -> np.ndarray:
    """The running mass ``M`` of DepRound in its canonical chunked order.

    ``M_i = O_c + L_i`` with ``L_i`` the sequential sum inside chunk ``c`` (of
    :data:`CHUNK` items) and ``O_{c+1} = O_c + L_last(c)``: short dependency chains for the
    compiled kernels, the same bits everywhere.
    """
    return _blocked_prefix(np.asarray(mass, dtype=np.float64), CHUNK)


def round_sequence(q: np.ndarray, state: int) -> tuple[list[int], int, float]:
    """Sequential-pairing DepRound of one block (docs/design.md §1, "DepRound").

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


def finish_selection(taken: list[int], pick: int, b: int) -> np.ndarray:
    """Round the final leftover so that exactly ``b`` distinct indices come out."""
    if len(taken) == b - 1 and pick >= 0:
        taken.append(pick)
    out = np.sort(np.asarray(taken, dtype=np.int64))
    if out.shape[0] != b or (b > 1 and not np.all(np.diff(out) > 0)):
        raise RuntimeError(
            f"internal error: DepRound produced {out.shape[0]} indices for a budget of {b}"
        )
    return out

"""The canonical order of every sum and the DepRound sequence: what makes backends agree.

Every backend (C++, Numba, NumPy, and :mod:`rad.dask` per chunk) sums in the order
defined here and rounds with the sequence defined here, so they return bit-identical
results for the same input and key, for any number of threads (``docs/design.md``,
"Reproducibility"). The functions are the readable NumPy definitions; the compiled
kernels reproduce them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Union

import numpy as np

from rad._backends.rng import MERGE_STREAM, stream_state, uniform

__all__ = [
    "BLOCK",
    "LANES",
    "MERGE_GROUP",
    "ONE",
    "RoundFn",
    "UNIT_BITS",
    "block_totals",
    "canonical_prefix",
    "finish_in_place",
    "finish_selection",
    "merge_leftovers",
    "quantize",
    "round_sequence",
]

#: Items per block, for canonical sums and for DepRound (fixed, never the thread count).
BLOCK = 1 << 16

#: Leftovers per group in the merge's levels (:func:`merge_leftovers`).
MERGE_GROUP = 64


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
    blocks = -(-n // BLOCK)
    padded = np.zeros(blocks * BLOCK)
    padded[:n] = x
    local = np.cumsum(padded.reshape(blocks, BLOCK), axis=1)
    offsets = np.zeros(blocks)
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



#: DepRound works in fixed point: a probability ``q`` becomes ``Q = round(q * 2^46)`` units
#: of :data:`ONE` = 2^46 (:func:`quantize`), and the running mass is an exact int64 sum.
#: Integer sums are exact, so every item's chance is exactly ``Q / ONE`` (within 2^-47 of
#: ``q``, however small ``q`` is or however much mass precedes it in its block), and they
#: are associative: any summation order, thread count or chunking gives the same bits. A
#: block holds at most 2^16 items of fewer than ONE units each, so its sum (and the next
#: crossing's target, one ONE above) stays below 2^63.
UNIT_BITS = 46
ONE = 1 << UNIT_BITS
_SCALE = float(ONE)


def quantize(q: np.ndarray) -> np.ndarray:
    """``q`` in DepRound units: ``trunc(min(q, 1) * 2^46 + 0.5)`` as int64, 0 where ``q <= 0``.

    Round half up on the exact product (a power-of-two scaling), in plain IEEE double
    arithmetic every backend reproduces. ``Q == ONE`` marks a *certain* item (taken without
    pairing: only ``q >= 1 - 2^-47``); every other item moves the running mass by less than
    ONE, so it crosses one integer at a time and sheds its ``ONE - Q`` into the pairing.
    """
    q = np.asarray(q, dtype=np.float64)
    x = np.where(q > 0, np.minimum(q, 1.0), 0.0)
    return (x * _SCALE + 0.5).astype(np.int64)


def round_sequence(q: np.ndarray, state: int, max_crossings: int = -1) -> tuple[list[int], int, float]:
    """Sequential-pairing DepRound of one block (docs/design.md §1, "DepRound").

    In units of :data:`ONE` (:func:`quantize`): certain items are taken, zero items
    skipped. The running mass ``M`` (exact int64 prefix sums) of the rest crosses a
    multiple of ONE at *crossing* items; between two crossings lies a *run*, whose members
    (the carried item and the run's items) merge into one carried item picked with
    probability proportional to mass — by inverse CDF with one 46-bit uniform offset ``t``
    aimed at ``k ONE + t`` (a second uniform only if the run's mass fell short of it). At a
    crossing item ``j`` the carry (``S`` units) and ``j`` are paired exactly as in
    Algorithm 2: the carry is taken with probability ``(ONE-Q_j) / ((ONE-S) + (ONE-Q_j))``.

    With ``max_crossings >= 0`` the sequence stops pairing after that many crossings: the
    items after the last of them form one final run (its mass may reach 1), whose
    survivor is the leftover. The merge's last round uses it (:func:`merge_leftovers`).

    Returns the positions taken, and the leftover (position or -1, mass in [0, 1): a
    multiple of 2^-46, so :func:`quantize` gives its units back exactly).
    """
    units = quantize(q)
    ones = units == ONE
    taken: list[int] = np.flatnonzero(ones).tolist()
    mass = np.where(ones, 0, units)
    n = mass.shape[0]
    if n == 0:
        return taken, -1, 0.0
    cum = np.cumsum(mass)
    whole = cum >> UNIT_BITS
    crossings = np.flatnonzero(whole > np.concatenate(([0], whole[:-1])))
    counter = 0

    def draw() -> float:
        nonlocal counter
        u = uniform(state, counter)
        counter += 1
        return u

    def first_above(s: int, e: int, target: int) -> int:
        return s + int(np.searchsorted(cum[s:e], target, side="right"))

    def resolve(s: int, e: int, base: int, m_start: int, carry: int) -> int:
        """The survivor of the run ``[s, e)`` entered with ``carry`` at running sum ``m_start``.

        The carry holds ``[base, m_start)``, item ``i`` holds ``[cum[i-1], cum[i])``.
        """
        if s >= e or cum[e - 1] == (cum[s - 1] if s > 0 else 0):  # no mass in the run
            return carry
        target = base + int(draw() * _SCALE)  # the uniform's top 46 bits
        if m_start > target:
            return carry
        i = first_above(s, e, target)
        if i < e:
            return i
        total = int(cum[e - 1]) - base
        if not total > 0:
            return carry
        target = base + int(draw() * float(total))
        if m_start > target:
            return carry
        i = first_above(s, e, target)
        if i < e:
            return i
        return s + int(np.flatnonzero(mass[s:e] > 0)[-1])

    base, m_start, start, carry = 0, 0, 0, -1
    if max_crossings >= 0:
        crossings = crossings[:max_crossings]
    for j in crossings.tolist():
        pick = resolve(start, j, base, m_start, carry)
        held = (int(cum[j - 1]) if j > 0 else 0) - base
        alpha, beta = ONE - held, ONE - int(mass[j])
        if pick < 0:
            taken.append(j)
            carry = -1
        elif draw() * float(alpha + beta) < float(beta):
            taken.append(pick)
            carry = j
        else:
            taken.append(j)
            carry = pick
        base += ONE
        m_start = int(cum[j])
        start = j + 1
    pick = resolve(start, n, base, m_start, carry)
    return taken, pick, (int(cum[-1]) - base) / _SCALE


#: One DepRound sequence: ``(masses, stream state, max_crossings) -> (positions taken,
#: leftover position or -1, leftover mass)``, as :func:`round_sequence`.
RoundFn = Callable[[np.ndarray, int, int], tuple[Union[Sequence[int], np.ndarray], int, float]]


def merge_leftovers(
    ids: np.ndarray, masses: np.ndarray, key: int, wanted: int, round_fn: RoundFn = round_sequence
) -> tuple[list[int], int]:
    """Round the blocks' leftovers (block order) into taken indices and one final leftover.

    Up to :data:`MERGE_GROUP` leftovers are one :func:`round_sequence` on
    :data:`~rad._backends.rng.MERGE_STREAM`. More are merged in levels: each level rounds
    its sequence in groups of MERGE_GROUP, group ``g`` (counted across levels) on stream
    ``MERGE_STREAM - 1 - g``, and the groups' leftovers (those with mass) are the next
    level's sequence. Small groups keep every comparison local: a group's running mass
    sums 64 masses, not all of a pool's (which lets a backend decide the merge from bounds
    on the masses, ``docs/design.md`` §3), and no running mass leaves int64.

    ``wanted`` is the number of picks the merge owes (``b`` less the blocks' own): the last
    round pairs at most ``wanted - 1`` crossings taken by the merge in all, and its final
    run's survivor is the last pick (:func:`finish_selection`). The leftovers' total is
    ``wanted`` units up to the rounding of each ``q`` to 2^-46, so whether it reaches the
    ``wanted``-th unit is rounding noise; stopping before it keeps the result independent
    of that noise, which lets a backend round from bounds on the masses
    (``docs/design.md`` §3, "The DepRound sketch"). In exact arithmetic the two agree in
    distribution: at a total of exactly ``wanted`` units the last crossing's pairing is the
    same mass-proportional pick.

    ``round_fn`` runs each sequence (a compiled backend passes its own, with the same bits).
    Returns the taken indices (from ``ids``) and the final leftover's index (or -1).
    """
    ids = np.asarray(ids, dtype=np.int64)
    masses = np.asarray(masses, dtype=np.float64)
    taken: list[int] = []
    group = 0
    while ids.shape[0] > MERGE_GROUP:
        next_ids: list[int] = []
        next_mass: list[float] = []
        for lo in range(0, ids.shape[0], MERGE_GROUP):
            t, pick, held = round_fn(masses[lo : lo + MERGE_GROUP], stream_state(key, MERGE_STREAM - 1 - group), -1)
            group += 1
            taken.extend(int(ids[lo + i]) for i in t)
            if held > 0:
                next_ids.append(int(ids[lo + pick]))
                next_mass.append(held)
        ids, masses = np.asarray(next_ids, dtype=np.int64), np.asarray(next_mass)
    t, pick, _ = round_fn(masses, stream_state(key, MERGE_STREAM), max(0, wanted - len(taken) - 1))
    taken.extend(int(ids[i]) for i in t)
    return taken, int(ids[pick]) if pick >= 0 else -1


def finish_selection(taken: list[int], pick: int, b: int) -> np.ndarray:
    """Round the final leftover so that exactly ``b`` distinct indices come out (sorted).

    The final leftover is taken when the others hold ``b - 1``.
    """
    got = np.array(taken, dtype=np.int64)
    out = np.empty(max(b, got.shape[0]), dtype=np.int64)
    out[: got.shape[0]] = got
    return finish_in_place(out, got.shape[0], pick, b)


def finish_in_place(
    out: np.ndarray, count: int, pick: int, b: int,
    increasing: Callable[[np.ndarray], bool] | None = None, ascending_head: bool = False,
) -> np.ndarray:
    """:func:`finish_selection` on ``out[:count]``, in ``out`` (room for ``b``): no copy of ``b``.

    ``increasing`` checks that the sorted result is strictly increasing (the picks are
    distinct); by default a NumPy comparison, which the Numba backend replaces with a
    compiled loop that allocates nothing. With ``ascending_head`` all but a few entries at
    the end are already ascending, and NumPy's stable sort (a merge of runs) takes about a
    tenth of the time of its default sort on them; either sort gives the same result.
    """
    if count == b - 1 and pick >= 0:
        out[count] = pick
        count += 1
    if count != b:
        raise RuntimeError(f"internal error: DepRound produced {count} indices for a budget of {b}")
    out = out[:b]
    out.sort(kind="stable" if ascending_head else None)
    distinct = increasing(out) if increasing is not None else (b <= 1 or bool(np.all(out[1:] > out[:-1])))
    if not distinct:
        raise RuntimeError(f"internal error: DepRound produced repeated indices for a budget of {b}")
    return out

"""``F(nu)`` for RAD losses in ``O(log n)`` per evaluation, from the sorted gains alone.

With RAD losses ``l = w g`` every quantity of the capped path is a function of the gain:
``a = g + w g`` falls with the gain's rank, so in descending-gain order the points with
``a > nu`` (capped at ``nu / a``) are a prefix ``[0, k)`` and the rest have cap 1. In the
*gain fill* (``docs/design.md`` §1, "Dualising": the budget runs out on the gain order)
``F``, its slope and the boundary group then need only prefix sums of ``1/a`` and ``g/a``
and one range sum of ``g``:

    C(s)  = nu * Inv[0, min(s, k)) + max(0, s - k)             caps of the first s points
    F(nu) = nu * GA[0, min(J, k)) + G[k, J) + g_J * (b - C(J)) - m nu
    F'    = GA[0, min(J, k)) - g_J * Inv[0, min(J, k)) - m

where ``J`` is the first point of the boundary tie group (the group holding the point at
which ``C`` reaches ``b``). All three sums are of non-negative terms, summed sequentially
inside blocks of :data:`SPAN` points and over the blocks' totals in order, so no sum is a
difference that could cancel; a sum over a prefix is the block offsets' running total
plus the sequential sum of the last partial block, computed from the gains on the spot.
The context is the sorted gains (the input's dtype: 4 bytes per float32 point) and three
float64 offsets per block (24 bytes per 4,096 points).

The *loss fill* (the caps cannot hold ``b``) is left to the backends' ``O(n)`` kernels:
its sums of rooms ``1 - nu/a`` would cancel as ``count - nu Inv``.
:meth:`SortedRadGains.gain_fill_from` says where the gain fill begins, so the search starts
there when ``F`` still rises at that point and never evaluates the loss fill.

**The top of the pool** (``docs/design.md`` §1, "The top of the pool"). Every formula above
reads ranks ``[0, J]`` only (``J``'s tie group included), so a context may hold just the
pool's values ``>= t`` for some ``t`` (:meth:`~rad._backends.contract.Kernels.values_at_least`,
sorted: no full sort of the pool). Its tie groups are whole (every value ``>= t`` is in it)
and its prefixes and block offsets are those of the full sort, rank for rank. Such a context
starts its gain fill where *its* caps hold ``b`` (at or above the whole pool's start), so
every evaluation from there up reads only its ranks; an evaluation that would need a rank
beyond them raises :class:`BeyondTop`, and the caller extends the top
(:meth:`SortedRadGains.extend`) or solves again on the whole pool.
"""

from __future__ import annotations

import bisect
import queue
import threading
from collections.abc import Sequence

import numpy as np

from rad._backends.contract import Kernels
from rad._backends.numpy_backend import rad_terms
from rad._solve.value_sort import sort_in_place

__all__ = ["SPAN", "BeyondTop", "SortedRadGains", "count_above", "sort_interruptibly"]

#: Points per block of the sequential sums (the offsets' spacing).
SPAN = 4096


class BeyondTop(Exception):
    """An evaluation needs points below the values a top-of-the-pool context holds."""


class SumsOverflow(ArithmeticError):
    """``1/a`` overflowed (subnormal gains or losses): the sums over the pool are not finite.

    Raised by the held points' span sums here (``F`` cannot be evaluated on them: ``nu = 0``
    times an infinite sum is NaN) and by :mod:`rad._solve.batch` for the support sums and
    the capped value; the solver then rescales the pool by a power of two and solves again.
    """


class _SortJob:
    """One part to sort: set ``done`` when it is sorted, or hold the error that stopped it."""

    def __init__(self, part: np.ndarray) -> None:
        self.part = part
        self.done = threading.Event()
        self.error: BaseException | None = None


class _Sorters:
    """Daemon threads that sort the top's parts, kept between calls.

    A thread started per part cost about 50 microseconds each (0.8 ms for sixteen parts on
    a 2-core VM). Daemon threads, as those were: a sort left running by Ctrl-C never holds
    up the interpreter's exit. A part goes to an idle thread, or to a new one.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_SortJob] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._available = 0  # idle threads not yet promised a job

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                sort_in_place(job.part)
            except BaseException as exc:  # handed to the caller, which raises it
                job.error = exc
            job.done.set()
            with self._lock:
                self._available += 1

    def submit(self, part: np.ndarray) -> _SortJob:
        """Sort ``part`` in place on a kept thread."""
        job = _SortJob(part)
        with self._lock:
            start = self._available == 0
            if not start:
                self._available -= 1
        if start:
            threading.Thread(target=self._run, name="rad-sort", daemon=True).start()
        self._jobs.put(job)
        return job


_SORTERS = _Sorters()


def sort_interruptibly(*parts: np.ndarray) -> None:
    """Sort every part in place (:func:`rad._solve.value_sort.sort_in_place`), each on its own thread.

    The calling thread takes signals meanwhile: either sort releases the GIL and cannot be
    stopped, and at 1e9 points it runs for seconds. Ctrl-C ends the call within 50 ms
    (KeyboardInterrupt); the workers finish in the background and their results are
    dropped. Below 2^22 points in all, the calling thread sorts the first part itself.
    """
    small = sum(int(p.shape[0]) for p in parts) < 1 << 22
    jobs = [_SORTERS.submit(p) for p in parts[small:]]
    if small:
        sort_in_place(parts[0])
    for job in jobs:
        while not job.done.wait(0.05):
            pass
        if job.error is not None:
            raise job.error


def count_above(sorted_desc: np.ndarray, value: float) -> int:
    """How many of the descending ``sorted_desc`` are greater than ``value``."""
    return bisect.bisect_left(sorted_desc, -value, key=lambda v: -float(v))


def _sorted_desc(negated: np.ndarray, ends: Sequence[int] | np.ndarray = ()) -> np.ndarray:
    """The values of ``-negated`` in descending order, in ``negated``'s memory.

    ``-g`` ascending is ``g`` descending (negation is exact). With ``ends``, the parts
    ``negated[ends[j - 1]:ends[j]]`` are in ascending order of their values (every value of
    a part lies below every value of the next), and each part is sorted on its own thread.
    """
    bounds = [0, *(int(e) for e in ends), negated.shape[0]]
    parts = [negated[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
    # NumPy's sort or the compiled radix sort, whichever this machine runs faster (value_sort)
    sort_interruptibly(*(parts or [negated]))
    np.negative(negated, out=negated)
    return negated


class SortedRadGains:
    """The gains sorted in descending order and the block offsets of ``1/a``, ``g/a`` and ``g``.

    Parameters
    ----------
    gains : ndarray
        The pool's gains (float32 or float64, validated); sorted into a copy of their dtype.
    w : float
        The RAD loss weight (``l = w g``).
    backend, threads
        The backend whose :meth:`~rad._backends.contract.Kernels.span_sums` sums the spans
        (every backend gives the same bits).
    top_from : float, optional
        Hold only the gains ``>= top_from`` (the module's "top of the pool"); all of them
        by default.
    splits : sequence of float, optional
        With ``top_from``, descending gains that cut the top into parts, each sorted on its
        own thread (about as many points in each: splits from a sample,
        :func:`rad._solve.capped.top_threshold`); the result does not depend on them.
    """

    def __init__(self, gains: np.ndarray, w: float, backend: Kernels, threads: int,
                 top_from: float | None = None, splits: Sequence[float] = ()) -> None:
        self.w = float(w)
        self.n = int(gains.shape[0])  # the pool's points
        self._backend, self._threads = backend, threads
        # the backend's compiled gain fill where it has one (the same bits as the methods below)
        self._native_fill = getattr(backend, "gain_fill", None)
        self._native_fill_from = getattr(backend, "gain_fill_from", None)
        ends: Sequence[int] | np.ndarray = ()
        if top_from is None:
            held = np.negative(gains)  # a copy
        else:
            # A fresh array in parts, the highest gains first.
            held, ends = backend.values_at_least(gains, top_from, threads, splits)
            np.negative(held, out=held)
        self._hold(_sorted_desc(held, ends))
        self.g_max = float(self.g[0])
        self.a_max = self.a_at(0)

    def extend(self, gains: np.ndarray, top_from: float) -> None:
        """Hold the gains ``>= top_from`` too (below the values held): the top grows.

        Only the new values are sorted (each is below every value held, whose tie groups
        are whole); the result is the top at ``top_from``, bit for bit.
        """
        held, ends = self._backend.values_at_least(gains, top_from, self._threads, (float(self.g[-1]),))
        more = held[int(ends[0]):]  # the values below those held
        np.negative(more, out=more)
        self._hold(np.concatenate((self.g, _sorted_desc(more))))

    def _hold(self, g: np.ndarray) -> None:
        """Hold the descending ``g`` and its span totals and offsets."""
        self.g = g
        self.size = int(g.shape[0])  # the ranks held: [0, size)
        self.complete = self.size == self.n
        totals = self._backend.span_sums(g, self.w, SPAN, self._threads)
        offsets = np.zeros((3, totals.shape[1] + 1))
        np.cumsum(totals, axis=1, out=offsets[:, 1:])
        if not np.isfinite(offsets[:, -1]).all():  # (the totals are positive: their sums bound them)
            raise SumsOverflow
        self._totals = totals
        self._offsets = offsets
        self._spans: dict[int, np.ndarray] = {}

    # ------------------------------------------------------------------ per-point terms

    def a_at(self, i: int) -> float:
        """``a`` of the point at rank ``i``, as the kernels compute it (``g + w g``)."""
        gi = float(self.g[i])
        return gi + self.w * gi

    def cap_of(self, gain: float, nu: float) -> float:
        """``min(1, nu / a)`` of a point with this gain, as the probability rule forms it."""
        a = gain + self.w * gain
        return 1.0 if a <= nu else nu / a

    def g_and_a(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``g`` and ``a`` (float64) of the ``count`` highest-gain points."""
        g = self.g[:count].astype(np.float64)
        a = self.w * g
        a += g
        return g, a

    def _terms(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`~rad._backends.numpy_backend.rad_terms` of ranks ``[lo, hi)``."""
        return rad_terms(self.g[lo:hi], self.w)

    def _term(self, row: int, lo: int, hi: int) -> np.ndarray:
        """Row ``row`` of :meth:`_terms` alone (the gains' row needs no division)."""
        return self.g[lo:hi].astype(np.float64) if row == 2 else self._terms(lo, hi)[row]

    def _running(self, blk: int) -> np.ndarray:
        """The sequential running sums of the three terms inside span ``blk`` (3 rows).

        ``np.cumsum`` adds in order, so entry ``r - 1`` is the sum of the span's first ``r``
        terms, bit for bit. Kept for the spans the search revisits as it converges.
        """
        got = self._spans.get(blk)
        if got is None:
            if len(self._spans) >= 64:
                self._spans.clear()
            got = np.cumsum(np.stack(self._terms(blk * SPAN, min(self.size, (blk + 1) * SPAN))), axis=1)
            self._spans[blk] = got
        return got

    # ------------------------------------------------------------------ sums

    def prefix(self, row: int, s: int) -> float:
        """Sum of term ``row`` (0: ``1/a``, 1: ``g/a``, 2: ``g``) over ranks ``[0, s)``."""
        blk, r = divmod(s, SPAN)
        base = float(self._offsets[row, blk])
        if r == 0:
            return base
        # base + (the block's sequential sum so far): at r = SPAN this is the next offset,
        # and it grows with s, so C(s) is monotone across a block's end as well as inside it.
        return base + float(self._running(blk)[row, r - 1])

    def range_sum(self, row: int, s: int, e: int) -> float:
        """Sum of term ``row`` over ranks ``[s, e)``, added directly in rank order (no difference)."""
        if e <= s:
            return 0.0
        bs, be = s // SPAN, (e - 1) // SPAN
        if bs == be:
            return float(np.cumsum(self._term(row, s, e))[-1])
        parts = [self._term(row, s, (bs + 1) * SPAN), self._totals[row, bs + 1 : be], self._term(row, be * SPAN, e)]
        return float(np.cumsum(np.concatenate(parts))[-1])

    # ------------------------------------------------------------------ searches

    def capped_count(self, nu: float, at_least: int = 0, at_most: int | None = None) -> int:
        """``k``: how many points have ``a > nu`` (a prefix of the ranks).

        ``at_least`` and ``at_most`` bound the answer where the caller knows it (the
        counts at a larger and a smaller ``nu``): only those ranks are searched.
        """
        w = self.w
        return bisect.bisect_left(self.g, -nu, at_least, self.size if at_most is None else at_most,
                                  key=lambda v: -(float(v) + w * float(v)))

    def group_start(self, i: int) -> int:
        """First rank of the tie group holding rank ``i``."""
        return count_above(self.g, float(self.g[i]))

    def group_end(self, i: int) -> int:
        """End (exclusive) of the tie group holding rank ``i``."""
        return bisect.bisect_right(self.g, -float(self.g[i]), key=lambda v: -float(v))

    def caps(self, nu: float, k: int, s: int) -> float:
        """``C(s)``: the caps of ranks ``[0, s)`` at ``nu`` (``k`` from :meth:`capped_count`)."""
        if s <= k:
            return nu * self.prefix(0, s)
        return nu * self.prefix(0, k) + (s - k)

    def first_reaching(self, nu: float, k: int, base: float, b: float) -> int:
        """Smallest ``s >= 1`` with ``C(s) >= b`` (``C(n) >= b`` assumed; ``base = C(k)``)."""
        if base >= b:  # inside the capped prefix: the block by its offsets, then the point
            j = bisect.bisect_left(self._offsets[0], b, key=lambda o: nu * float(o))  # C(j SPAN) >= b
            lo, hi = (j - 1) * SPAN, min(j * SPAN, k)
            cs = float(self._offsets[0, j - 1]) + self._running(j - 1)[0, : hi - lo]
            return lo + 1 + int(np.argmax(nu * cs >= b))
        t = max(1, int(np.ceil(b - base)))  # then t points at cap 1
        while t > 1 and base + (t - 1) >= b:
            t -= 1
        while base + t < b:
            t += 1
        return k + t

    def gain_fill_from(self, b: float) -> float | None:
        """The least ``nu`` (to the bit) where the caps hold ``b``, or None if ``nu = 0`` does.

        ``C(n)`` grows with ``nu``; below this point the budget spills onto the loss order.
        Bisection of the doubles' bit patterns in ``[0, max a]`` (``C(n) = n >= b`` there).
        A top-of-the-pool context answers for its own ranks: the least ``nu`` where
        ``C(size) >= b``, from where on it can evaluate ``F``.
        """
        n = self.size
        if self._native_fill_from is not None:
            status, nu = self._native_fill_from(self.g, self._offsets, self._totals, self.w, SPAN, self.complete,
                                                b, self.a_max)
            if status == 2:
                raise BeyondTop
            return None if status == 1 else nu
        if n < b:  # C(size) <= size: the top's caps never hold b
            raise BeyondTop
        k_lo = self.capped_count(0.0)
        if self.caps(0.0, k_lo, n) >= b:
            return None
        lo, hi = 0, int(np.float64(self.a_max).view(np.int64))
        k_hi = 0  # the counts at lo and hi: k at any nu between lies between them (k falls as nu grows)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            nu = float(np.int64(mid).view(np.float64))
            k = self.capped_count(nu, k_hi, k_lo)
            if self.caps(nu, k, n) >= b:
                hi, k_hi = mid, k
            else:
                lo, k_lo = mid, k
        return float(np.int64(hi).view(np.float64))

    # ------------------------------------------------------------------ F

    def gain_fill(self, nu: float, b: float, m: float) -> tuple[float, float, bool, float, float, float] | None:
        """``F(nu)`` as the kernels return it, or None when the budget reaches the loss order.

        ``(value, slope, False, cut, resid, group total)``: see the module's formulas.
        """
        if self._native_fill is not None:
            status, value, slope, cut, resid, group_total = self._native_fill(
                self.g, self._offsets, self._totals, self.w, SPAN, self.complete, nu, b, m)
            if status == 2:
                raise BeyondTop
            return None if status == 1 else (value, slope, False, cut, resid, group_total)
        k = self.capped_count(nu)
        base = nu * self.prefix(0, k)  # C(k); C(n) = C(k) + (n - k)
        if base + (self.size - k) < b:
            if not self.complete:  # the fill goes on below the values held
                raise BeyondTop
            return None
        s = self.first_reaching(nu, k, base, b)
        start, end = self.group_start(s - 1), self.group_end(s - 1)
        cut = float(self.g[start])
        resid = b - self.caps(nu, k, start)
        j = min(start, k)
        ga, inv = self.prefix(1, j), self.prefix(0, j)
        value = (nu * ga + self.range_sum(2, k, start)) + cut * resid - m * nu
        slope = (ga - cut * inv) - m
        group_total = (end - start) * self.cap_of(cut, nu)
        return value, slope, False, cut, resid, group_total

    # ------------------------------------------------------------------ the support

    def support(self, nu: float, cut: float, frac: float) -> tuple[int, float] | None:
        """``(number of q_i > 0, least gain with q_i > 0)`` of a gain fill, by two searches.

        ``q_i`` is ``cap_i`` above the cut and ``frac * cap_i`` on it; None (ask the
        backend's streaming kernel) where a cap could underflow to 0 (``nu / max a == 0``).
        """
        if not nu > 0 or not nu / self.a_max > 0:
            return None
        start = count_above(self.g, cut)
        count = start
        if start < self.size and float(self.g[start]) == cut and frac * self.cap_of(cut, nu) > 0:
            count = self.group_end(start)
        if count == 0:
            return 0, float("inf")
        return count, float(self.g[count - 1])

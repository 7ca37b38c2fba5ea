"""The kernel contract every backend implements (``docs/design.md`` §2, "One contract").

A backend is a module with these names and signatures, checked by the registry when it
loads (:func:`missing_kernels`) and compared across backends by ``tests/test_backends.py``.
Arrays arrive validated (finite, non-negative), one-dimensional and C-contiguous;
``gains`` is float32 or float64, ``losses`` float64 or ``None`` (then the RAD losses
``w * gains``); ``threads`` is already resolved by :mod:`rad._backends.threads`. Every sum
follows :mod:`rad._backends.canonical` and every random draw :mod:`rad._backends.rng`, so
all backends return the same bits.

One optional capability is declared, not probed: ``SORTFREE`` says whether
:meth:`Kernels.threshold_search` is a real sort-free search; where it is False the
solver uses the sorted scan. Two optional kernels are probed: ``gain_fill`` and
``gain_fill_from`` (the C++ backend's), the capped path's evaluations on the sorted top
of the pool with the same bits as :class:`rad._solve.capped_rad.SortedRadGains`' own
methods, which run where a backend has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from rad._backends.canonical import BLOCK
from rad._backends.params import Params

__all__ = [
    "SKETCH_PARTS", "CappedArrays", "FloatArray", "IndexArray", "Kernels", "RoundSketch", "missing_kernels",
    "rad_support_sums",
    "search_then_sums",
]

#: float32/float64 arrays (gains) and float64 ones (losses, q): the kernels take both.
FloatArray = NDArray[np.floating[Any]]
IndexArray = NDArray[np.int64]


#: Parts per block of the DepRound sketch (the C++ core's ``kSketchParts``, checked on import).
SKETCH_PARTS = 128


@dataclass(frozen=True)
class RoundSketch:
    """What a support pass recorded for DepRound (``docs/design.md`` §3, "The DepRound sketch").

    Per block of the gains, :data:`SKETCH_PARTS` approximate prefix sums of ``1/a`` over
    ``g >= tau`` (one at the end of each part of 512 points; ``-1`` for a short last
    block). A backend's
    :meth:`Kernels.depround_sketched` bounds each block's exact DepRound units by them and
    reads only the part of the block its pick lies in; it is only ever a shortcut to the
    same indices.
    """

    tau: float
    prefixes: NDArray[np.float64]

    def serves(self, n: int, params: Params) -> bool:
        """Whether this sketch serves DepRound of ``params`` on ``n`` points: the uncapped path's, at its ``tau``."""
        return bool(params.fill == "gain" and params.gain_frac == 1.0 and params.gain_cut == self.tau
                    and self.tau > 0 and params.nu > 0
                    and tuple(self.prefixes.shape) == (-(-n // BLOCK) * SKETCH_PARTS,))


class CappedArrays(Protocol):
    """The capped path's sorted arrays (see :class:`rad._solve.capped.SortedArrays`)."""

    @property
    def g_g(self) -> NDArray[np.float64]: ...
    @property
    def a_g(self) -> NDArray[np.float64]: ...
    @property
    def ends_g(self) -> NDArray[np.int64]: ...
    @property
    def l_l(self) -> NDArray[np.float64]: ...
    @property
    def a_l(self) -> NDArray[np.float64]: ...
    @property
    def ends_l(self) -> NDArray[np.int64]: ...


class Kernels(Protocol):
    """What a backend module provides."""

    name: str
    has_openmp: bool
    SORTFREE: bool

    def first_invalid(self, x: FloatArray, threads: int) -> int:
        """Index of the first NaN, infinite or negative entry of ``x``, or -1."""

    def argsort_desc(self, g: FloatArray, threads: int) -> IndexArray:
        """Stable argsort by descending value (ties keep their input order)."""

    def theorem1_scan(
        self, gains: FloatArray, losses: FloatArray | None, w: float, perm: IndexArray, m: float, threads: int
    ) -> tuple[int, float]:
        """Theorem 1's ``k*`` by the threshold form over the sorted order ``perm``, and ``G_n``."""

    def threshold_search(
        self, gains: FloatArray, losses: FloatArray | None, w: float, m: float, threads: int
    ) -> tuple[int, float, int, float]:
        """Sort-free ``k*``: ``(status, tau, k*, G_n)``.

        Status 0 is a decision, 1 a near tie (the caller uses the sorted scan), 2 an
        invalid gain was seen.
        """

    def threshold_support(
        self, gains: FloatArray, losses: FloatArray | None, w: float, m: float, b: int, threads: int
    ) -> tuple[int, float, int, float, tuple[float, float, int, float] | None, RoundSketch | None]:
        """:meth:`threshold_search`, then :meth:`support_sums` where the search allows.

        Returns ``(status, tau, k*, G_n, sums or None, sketch or None)``; the sums are at
        ``tau`` when the search decided (status 0), ``tau > 0`` and ``b <= k*``. The same
        bits as the two kernels in turn (:func:`search_then_sums` is that definition),
        except that with RAD losses only ``H`` and the count are summed
        (:func:`rad_support_sums`); the compiled backends share a read of the gains
        between them, and record the DepRound sketch with the sums.

        A backend may stop early with status 3 where the caps bind whatever ``tau`` is
        (``G_n >= m`` beyond the near-tie margin, and ``b`` above every ``k*`` the search
        still allows): ``tau`` is then NaN and ``k*`` an upper bound of it below ``b``, all
        the capped path needs (it uses ``max(b, k*)``).
        """

    def bit_histogram(
        self, gains: FloatArray, losses: FloatArray | None, w: float, shift: int, pshift: int, prefix: int,
        threads: int,
    ) -> tuple[NDArray[np.int64], FloatArray, FloatArray, FloatArray, bool]:
        """One level of the radix select: a histogram over 16 bits of the gains.

        Per bin ``(count, sum 1/a, sum g/a, min g)`` over the points whose ordered bits
        above ``pshift`` equal ``prefix``, and whether any gain was invalid.
        """

    def bit_gather(
        self, gains: FloatArray, losses: FloatArray | None, w: float, shift: int, key: int, count: int,
        threads: int,
    ) -> tuple[FloatArray, FloatArray]:
        """The ``(g, a)`` of the points whose bits above ``shift`` equal ``key``."""

    def support_sums(
        self, gains: FloatArray, losses: FloatArray | None, w: float, tau: float, threads: int
    ) -> tuple[float, float, int, float]:
        """Over ``g >= tau, a > 0``: ``(sum 1/a, sum g/a, count, min a)`` in canonical order."""

    def support_block_sums(
        self, gains: FloatArray, losses: FloatArray | None, w: float, tau: float, threads: int
    ) -> tuple[FloatArray, FloatArray, NDArray[np.int64], FloatArray]:
        """:meth:`support_sums` per block (canonical block totals, counts, minima)."""

    def support_stats(
        self, gains: FloatArray, losses: FloatArray | None, w: float, params: Params, threads: int
    ) -> tuple[int, float]:
        """``(number of q_i > 0, smallest gain with q_i > 0)``."""

    def materialize(
        self, gains: FloatArray, losses: FloatArray | None, w: float, params: Params, threads: int
    ) -> NDArray[np.float64]:
        """The probabilities ``q`` defined by ``params`` (:mod:`rad._backends.params`)."""

    def capped_eval(
        self, ctx: CappedArrays, nu: float, b: float, m: float, threads: int
    ) -> tuple[float, float, bool, float, float, float]:
        """The capped path's dual function at ``nu`` (``docs/design.md`` §1, "Dualising").

        Returns ``(F(nu), right slope, fill is loss, cut, resid, group total)``.
        """

    def span_sums(self, g: FloatArray, w: float, span: int, threads: int) -> NDArray[np.float64]:
        """Per-span sequential totals of ``1/a``, ``g/a`` and ``g`` over sorted gains.

        ``a = g + w g``; shape ``(3, ceil(n / span))``; ``span`` divides the canonical block.
        """

    def values_at_least(self, g: FloatArray, t: float, threads: int,
                        splits: Sequence[float] = ()) -> tuple[FloatArray, NDArray[np.int64]]:
        """The values of ``g`` that are ``>= t``, in parts by ``splits``, and the parts' ends.

        Part ``j`` holds the values ``v`` with ``#{i : v < splits[i]} == j`` (with
        descending splits: ``[splits[j], splits[j - 1])``), each part in index order and
        ``g``'s dtype; ``ends[j]`` is where part ``j`` ends. The capped path's top of the
        pool (:mod:`rad._solve.capped_rad`), sorted afterwards one part a thread.
        """

    def depround_q(self, q: NDArray[np.float64], b: int, key: int, threads: int) -> IndexArray:
        """DepRound of ``q`` (sum ``b``) into ``b`` sorted distinct indices."""

    def depround_params(
        self, gains: FloatArray, losses: FloatArray | None, w: float, params: Params, b: int, key: int,
        threads: int,
    ) -> IndexArray:
        """DepRound of the probabilities ``params`` define.

        Streamed: no ``q`` array where the backend can avoid it.
        """

    def depround_sketched(
        self, gains: FloatArray, losses: FloatArray | None, w: float, params: Params, b: int, key: int,
        sketch: RoundSketch | None, threads: int,
    ) -> IndexArray:
        """:meth:`depround_params`, the same indices, using ``sketch`` where it applies.

        The sketch (from :meth:`threshold_support` on these gains) serves the uncapped
        path's params (``gain_cut == sketch.tau``, ``gain_frac == 1``); a backend without
        a sketched rounding, a ``None`` sketch or other params take the plain path.
        """

    def depround_blocks(
        self, gains: FloatArray, losses: FloatArray | None, w: float, params: Params, key: int, offset: int,
        first_stream: int, threads: int,
    ) -> tuple[IndexArray, IndexArray, FloatArray]:
        """The per-block phase of DepRound on one chunk of a larger pool.

        The chunk's first point is global index ``offset`` and its first block uses
        random stream ``first_stream``. Returns ``(taken, leftover index per block (-1 for
        none), leftover mass per block)``.
        """


#: Names every backend module must define.
REQUIRED = tuple(
    name for name in dir(Kernels) if not name.startswith("_")
) + ("name", "has_openmp", "SORTFREE")


def rad_support_sums(h: float, count: int, w: float, tau: float) -> tuple[float, float, int, float]:
    """The support sums :meth:`Kernels.threshold_support` hands over with RAD losses.

    With ``a = (1 + w) g`` its pass sums only ``H`` (canonically) and the count: ``G`` is
    ``count / (1 + w)`` (each ``g/a`` is ``1/(1 + w)`` within a few ulps, and the solution
    uses ``H`` and the count alone: ``rad._solve.batch._theorem1_value``) and ``min a`` is
    ``a(tau)``, as ``a`` grows with ``g``. ``rad_support_sums`` in ``support.hpp`` again.
    Precondition: every ``a`` finite (:mod:`rad._solve.batch` rescales the gains where
    ``(1 + w) max g`` would overflow).
    """
    return float(h), count / (1.0 + w), int(count), (tau + w * tau if count > 0 else float("inf"))


def search_then_sums(
    kernels: Any, gains: FloatArray, losses: FloatArray | None, w: float, m: float, b: int, threads: int
) -> tuple[int, float, int, float, tuple[float, float, int, float] | None, None]:
    """:meth:`Kernels.threshold_support` from a backend's own two kernels, in turn (no sketch)."""
    status, tau, kstar, g_total = kernels.threshold_search(gains, losses, w, m, threads)
    sums = None
    if status == 0 and tau > 0 and b <= kstar:
        h, g, count, min_a = kernels.support_sums(gains, losses, w, tau, threads)
        sums = (float(h), float(g), int(count), float(min_a))
        if losses is None:
            sums = rad_support_sums(float(h), int(count), w, float(tau))
    return int(status), float(tau), int(kstar), float(g_total), sums, None


def missing_kernels(module: object) -> list[str]:
    """Names of the contract that ``module`` lacks (empty when it conforms)."""
    return sorted({n for n in REQUIRED if not hasattr(module, n)})

"""What :func:`rad.solve` returns: the game's value and the compact optimal probabilities.

The probabilities themselves are defined by a fill side and five numbers (:class:`rad._backends.params.Params`),
so a solution for a billion-point pool is a few numbers, not an 8 GB array.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rad._backends.contract import RoundSketch
from rad._backends.params import Params, probabilities_from_params

__all__ = ["NetHarmWarning", "Solution", "SolutionSummary"]


class NetHarmWarning(RuntimeWarning):
    """The game's value is negative: the teacher is expected to do net harm."""


@dataclass(frozen=True)
class SolutionSummary:
    """The solution without its arrays (what :mod:`rad.dask` returns).

    Attributes
    ----------
    value : float
        The game's value ``OPT_b``: the expected gain of the batch against the worst
        placement of the teacher's ``m`` mistakes. Negative means net harm.
    k_star : int
        Support size: how many points have a positive inclusion probability.
    threshold : float
        The boundary gain: the smallest gain with a positive probability (``inf`` when
        ``b == 0``).
    w, m, b, n : float, float, int, int
        The loss weight used (``nan`` with general losses), the mistakes, the budget, the
        pool size.
    capped : bool
        True when the batch game is not solved by Theorem 1's ``b * p*``: ``b`` times the
        largest ``p*`` would exceed 1 (``b = n`` included), or the pool fails Theorem 1's
        condition ``G_n >= m``. The optimum then comes from the game's dual
        (``docs/design.md`` §1); its ``q`` need not reach 1 (a large ``m`` can make a
        spread-out batch best).
    params : Params
        The scalars that define every probability (see :mod:`rad._backends.params`).
    """

    value: float
    k_star: int
    threshold: float
    w: float
    m: float
    b: int
    n: int
    capped: bool
    params: Params


@dataclass(frozen=True)
class Solution(SolutionSummary):
    """The optimal batch inclusion probabilities, kept compact.

    The fields of :class:`SolutionSummary`, plus references to the inputs (no copy) so
    that :meth:`probabilities` can materialise ``q``, and

    scale_exponent : int
        0, or ``e`` when ``gains`` and ``losses`` here are the caller's times ``2**e``:
        ``e > 0`` where ``1/a`` overflowed for subnormal input, ``e < 0`` for gains near
        the float64 maximum (``params`` are in those units; ``value`` and ``threshold``
        are in the caller's).
    round_sketch : RoundSketch or None
        What the backend's support pass recorded for DepRound over these ``gains``
        (``docs/design.md`` §3, "The DepRound sketch"): :func:`rad.select` passes it on,
        so that the rounding reads only the parts of the pool it picks from. Internal;
        the indices are the same without it.
    """

    gains: np.ndarray | None = field(repr=False, compare=False, default=None)
    losses: np.ndarray | None = field(repr=False, compare=False, default=None)
    scale_exponent: int = 0
    round_sketch: RoundSketch | None = field(repr=False, compare=False, default=None)

    @property
    def nu(self) -> float:
        """The adversary's water level: points with ``q_i a_i = nu`` are the ones it attacks."""
        return self.params.nu

    def probabilities(self) -> np.ndarray:
        """The inclusion probabilities ``q`` (float64, original order, sum ``b``).

        Allocates ``8 n`` bytes; for huge pools prefer :func:`rad.select`, which streams
        them.
        """
        if self.gains is None:
            raise ValueError(
                "this solution keeps no arrays (the gains were on a GPU, where they stay), so it cannot "
                "form q: call rad.select for the indices, or rad.solve on a host copy of the gains for q"
            )
        w = 0.0 if self.losses is not None else self.w
        return probabilities_from_params(self.gains, self.losses, w, self.params)

"""The compact solution of the batch game and the rule that turns it into probabilities.

The optimal inclusion probabilities of DESIGN §1 are a function of each point's own
``(g_i, l_i)`` and five scalars, so a solution for a billion-point pool is a few numbers,
not an 8 GB array. With ``a_i = g_i + l_i`` and the adversary's water level ``nu``, a
point's capacity is ``cap_i = 1 if a_i <= nu else nu / a_i`` and

* ``fill == "gain"`` (the budget is spent on the gain segments, DESIGN §1 "Dualising"):
  ``q_i = cap_i`` if ``g_i > gain_cut``, ``gain_frac * cap_i`` if ``g_i == gain_cut``,
  else 0;
* ``fill == "loss"`` (capacities ran out; the rest of the budget sits on the smallest
  losses): ``q_i = 1`` if ``l_i < loss_cut``, ``cap_i + loss_frac * (1 - cap_i)`` if
  ``l_i == loss_cut``, else ``cap_i``.

Every backend evaluates exactly these expressions in this order, so all of them produce
bit-identical probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = ["NetHarmWarning", "Params", "Solution", "SolutionSummary"]


class NetHarmWarning(RuntimeWarning):
    """The game's value is negative: the teacher is expected to do net harm."""


@dataclass(frozen=True)
class Params:
    """The five scalars that define the optimal probabilities (see module docstring)."""

    fill: Literal["gain", "loss"]
    nu: float
    gain_cut: float = float("inf")
    gain_frac: float = 0.0
    loss_cut: float = float("inf")
    loss_frac: float = 0.0

    def as_tuple(self) -> tuple[int, float, float, float, float, float]:
        """The layout the compiled kernels take: ``(fill_is_loss, nu, gain_cut, ...)``."""
        return (
            int(self.fill == "loss"),
            float(self.nu),
            float(self.gain_cut),
            float(self.gain_frac),
            float(self.loss_cut),
            float(self.loss_frac),
        )


def probabilities_from_params(
    gains: np.ndarray, losses: np.ndarray | None, w: float, params: Params
) -> np.ndarray:
    """Materialise ``q`` (float64, original order) — the NumPy reading of the rule."""
    g = np.asarray(gains, dtype=np.float64)
    l = np.asarray(losses, dtype=np.float64) if losses is not None else w * g
    a = g + l
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cap = np.where(a <= params.nu, 1.0, params.nu / a)
    if params.fill == "gain":
        return np.where(
            g > params.gain_cut, cap, np.where(g == params.gain_cut, params.gain_frac * cap, 0.0)
        )
    with_loss = cap + params.loss_frac * (1.0 - cap)
    return np.where(l < params.loss_cut, 1.0, np.where(l == params.loss_cut, with_loss, cap))


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
        True when some probability is capped at 1, i.e. the solution is not ``b * p*``.
    params : Params
        The scalars that define every probability (see :mod:`rad._solution`).
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
        0, or ``e`` when ``gains`` and ``losses`` here are the caller's times ``2**e``
        because ``1/a`` overflowed for subnormal input (``params`` are in those units;
        ``value`` and ``threshold`` are in the caller's).
    """

    gains: np.ndarray = field(repr=False, compare=False, default=None)
    losses: np.ndarray | None = field(repr=False, compare=False, default=None)
    scale_exponent: int = 0

    @property
    def nu(self) -> float:
        """The adversary's water level: points with ``q_i a_i = nu`` are the ones it attacks."""
        return self.params.nu

    def probabilities(self) -> np.ndarray:
        """The inclusion probabilities ``q`` (float64, original order, sum ``b``).

        Allocates ``8 n`` bytes; for huge pools prefer :func:`rad.select`, which streams
        them.
        """
        w = 0.0 if self.losses is not None else self.w
        return probabilities_from_params(self.gains, self.losses, w, self.params)

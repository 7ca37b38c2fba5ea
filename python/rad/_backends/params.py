"""The fill side and five numbers that define the optimal probabilities, and the rule that reads them.

The optimal inclusion probabilities of docs/design.md §1 are a function of each point's own
``(g_i, l_i)`` and a fill side with five numbers, so a solution for a billion-point pool is a few numbers,
not an 8 GB array. With ``a_i = g_i + l_i`` and the adversary's water level ``nu``, a
point's capacity is ``cap_i = 1 if a_i <= nu else nu / a_i`` and

* ``fill == "gain"`` (the budget is spent on the gain segments, docs/design.md §1 "Dualising"):
  ``q_i = cap_i`` if ``g_i > gain_cut``, ``gain_frac * cap_i`` if ``g_i == gain_cut``,
  else 0;
* ``fill == "loss"`` (capacities ran out; the rest of the budget sits on the smallest
  losses): ``q_i = 1`` if ``l_i < loss_cut``, ``cap_i + loss_frac * (1 - cap_i)`` if
  ``l_i == loss_cut``, else ``cap_i``.

Every backend evaluates exactly these expressions in this order, so all of them produce
bit-identical probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["Params", "probabilities_from_params"]


@dataclass(frozen=True)
class Params:
    """The fill side and five numbers that define the optimal probabilities (see module docstring)."""

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

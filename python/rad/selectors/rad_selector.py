"""The RAD selector: ``rad.select`` on the gains of the pool's unlabeled points."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rad import gains as _gains
from rad.selectors.base import Strategy, register
from rad.selectors.pool import PoolState, ranks_to_indices

__all__ = ["RAD"]


@register("rad")
@dataclass(frozen=True)
class RAD(Strategy):
    """Robust Active Distillation: ``rad.select`` on the unlabeled points' gains.

    Needs ``m`` and either ``gains`` or ``probs``/``logits`` (from which the gains of
    kind ``gain`` are computed; the paper's default is ``"margin"``, ``1 - margin``).

    With labeled points excluded, ``rad.select`` runs on the ``n_c`` candidates only,
    and the mistake count is scaled to them: ``m_c = m * n_c / n`` (mistakes assumed
    spread over the pool in proportion; ``m`` is the estimate for the whole pool). The
    default ``w = 1 - m/n`` is therefore unchanged, since ``1 - m_c/n_c = 1 - m/n``.
    Without exclusions ``m`` is passed as is.

    Parameters
    ----------
    gain : {"margin", "entropy", "least_confidence", "exp_margin"}
        Gain computed from the student's outputs when ``pool.gains`` is not given.
    w, backend, threads
        Passed to ``rad.select``.
    """

    name: ClassVar[str] = "rad"
    gain: str = "margin"
    w: float | None = None
    backend: str = "auto"
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.gain not in _gains.GAIN_KINDS:
            raise ValueError(f"unknown gain {self.gain!r}; expected one of {_gains.GAIN_KINDS}")

    def _select(self, pool: PoolState, b: int, rng: np.random.Generator) -> NDArray[np.int64]:
        import rad  # lazy: the core solver is only needed by this strategy

        m = pool.require("m", "RAD")
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, numbers.Real):
            raise TypeError(f"PoolState.m must be a real number, got {m!r}")
        m = float(m)
        if not 0.0 <= m <= pool.n:
            raise ValueError(f"PoolState.m must be in [0, n={pool.n}], got {m!r}")
        gains = pool.gains if pool.gains is not None else pool.score(self.gain)
        excluded = pool.excluded
        if excluded.size:
            gains = np.delete(gains, excluded)
            m = min(m * gains.shape[0] / pool.n, float(gains.shape[0]))
        chosen = rad.select(
            gains, m, b, w=self.w, rng=rng, backend=self.backend, threads=self.threads
        )
        return ranks_to_indices(chosen, excluded)

"""The RAD selector: ``rad.select`` on the gains of the pool's unlabeled points."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from rad import gains as _gains
from rad._solve.validation import invalid_value
from rad.selectors.base import Explained, Strategy, register
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

    With ``return_scores=True`` the utilities are the minimax inclusion probabilities
    ``q`` of ``rad.solve`` on the same game (``sum q = b``; DepRound includes point ``i``
    with probability ``q_i``), and ``info`` holds ``m`` (the candidates' share),
    ``w``, the game's ``value`` and ``k_star``. This costs one extra ``rad.solve``.

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

        gains, m = self._candidate_game(pool)
        chosen = rad.select(
            gains, m, b, w=self.w, rng=rng, backend=self.backend, threads=self.threads
        )
        return ranks_to_indices(chosen, pool.excluded)

    def _candidate_game(self, pool: PoolState) -> tuple[np.ndarray, float]:
        """The candidates' gains and their share of the mistakes, ``m n_c / n``."""
        m = pool.require("m", "RAD")
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, numbers.Real):
            raise TypeError(f"PoolState.m must be a real number, got {m!r}")
        m = float(m)
        if not 0.0 <= m <= pool.n:
            raise ValueError(f"PoolState.m must be in [0, n={pool.n}], got {m!r}")
        gains = cast(np.ndarray, pool.gains) if pool.gains is not None else pool.score(self.gain)
        excluded = pool.excluded
        if excluded.size:
            keep = np.ones(pool.n, dtype=bool)
            keep[excluded] = False
            candidates = np.flatnonzero(keep)
            gains = np.asarray(gains)[candidates]
            if gains.dtype.kind in "biuf":  # a bad gain by its index in the pool, not among the candidates
                bad = np.flatnonzero(~(np.isfinite(gains) & (gains >= 0)))
                if bad.size:
                    raise invalid_value("gains", int(candidates[bad[0]]), float(gains[bad[0]]))
            m = min(m * gains.shape[0] / pool.n, float(gains.shape[0]))
        return gains, m

    def _utilities(self, pool: PoolState) -> NDArray[np.float64]:
        """Zero: with ``b = 0`` no point is included."""
        self._candidate_game(pool)  # validates m as the other paths do
        return np.zeros(pool.n)

    def _explain(self, pool: PoolState, b: int, rng: np.random.Generator) -> Explained:
        """``rad.select`` (same draw as :meth:`_select`) plus ``rad.solve``'s ``q``."""
        import rad

        gains, m = self._candidate_game(pool)
        chosen = rad.select(
            gains, m, b, w=self.w, rng=rng, backend=self.backend, threads=self.threads
        )
        solution = rad.solve(
            gains, m, b, w=self.w, backend=self.backend, threads=self.threads
        )
        q = np.asarray(solution.probabilities(), dtype=np.float64)
        order = chosen[np.lexsort((chosen, -q[chosen]))]
        utilities = np.full(pool.n, np.nan)
        keep = np.ones(pool.n, dtype=bool)
        keep[pool.excluded] = False
        utilities[keep] = q
        info = {
            "m": m,
            "w": float(solution.w),
            "value": float(solution.value),
            "k_star": float(solution.k_star),
        }
        return Explained(
            order=ranks_to_indices(order, pool.excluded),
            scores=q[order],
            utilities=utilities,
            info=info,
        )

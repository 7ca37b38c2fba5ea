"""Executable proofs of optimality for ``rad``'s solutions.

* :func:`certificate` -- lower and upper bounds on the game value that bracket any
  probabilities, O(n) and streamed, so a solution for a 1e9-point pool can be checked
  (the proof is in ``docs/certificate.md``);
* :func:`lp_oracle` -- the single-draw and batch games as linear programs (HiGHS through
  SciPy), the slow independent reference for small pools;
* :func:`depround_marginals` -- Monte Carlo inclusion frequencies of DepRound with
  confidence intervals and a pass/fail against the target probabilities.

``rad.verify.game`` and ``rad.verify.lp`` hold the exact O(n log n) best responses and the
LP formulations themselves. SciPy is needed only by :func:`lp_oracle` (the ``[verify]``
extra) and is imported on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "Certificate",
    "LPSolution",
    "MarginalsCheck",
    "certificate",
    "depround_marginals",
    "lp_oracle",
]

_LAZY = {
    "Certificate": "rad.verify.certificate",
    "certificate": "rad.verify.certificate",
    "LPSolution": "rad.verify.lp",
    "lp_oracle": "rad.verify.oracle",
    "MarginalsCheck": "rad.verify.marginals",
    "depround_marginals": "rad.verify.marginals",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rad.verify' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

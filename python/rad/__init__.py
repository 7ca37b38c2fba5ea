"""rad: Robust Active Distillation.

Choose which points of a large unlabeled pool a teacher should soft-label so that a
student learns the most while being misled the least (the minimax selection of
"Robust Active Distillation", ICLR 2023, solved exactly for a batch of ``b`` points).

>>> import numpy as np, rad
>>> gains = np.random.default_rng(0).random(10_000, dtype=np.float32)
>>> idx = rad.select(gains, m=3_000, b=100, rng=0)
>>> idx.shape
(100,)
"""

from __future__ import annotations

from rad._lazy import lazy_getattr
from rad._version import __version__

__all__ = [
    "BackendUnavailable",
    "DeviceFallbackWarning",
    "NetHarmWarning",
    "Solution",
    "ValueOverflowWarning",
    "__version__",
    "backends",
    "depround",
    "estimate_m",
    "gains",
    "integrations",
    "select",
    "solve",
    "selectors",
    "verify",
]

# Attributes resolved on first use, so that ``import rad.verify`` (or a helper module)
# does not pay for loading the backends.
_LAZY = {
    "select": "rad._solve.api",
    "solve": "rad._solve.api",
    "depround": "rad._solve.api",
    "estimate_m": "rad.estimate",
    "backends": "rad._backends",
    "BackendUnavailable": "rad._backends",
    "Solution": "rad._solve.solution",
    "NetHarmWarning": "rad._solve.solution",
    "ValueOverflowWarning": "rad._solve.batch",
    "DeviceFallbackWarning": "rad._solve.device",
}


#: Submodules importable as attributes (``rad.gains``, ...), also loaded on first use.
_SUBMODULES = {"gains", "integrations", "selectors", "verify"}


__getattr__ = lazy_getattr("rad", _LAZY, globals(), _SUBMODULES)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""RAD inside the active-learning libraries people already use.

Optional adapters, each importing its library only when first used
(``pip install "robust-active-distillation[integrations]"`` installs all three):

* :class:`RADSampling` (:mod:`rad.integrations.skactiveml`) -- a scikit-activeml
  ``SingleAnnotatorPoolQueryStrategy``: ``query(X, y, clf, candidates=..., batch_size=...,
  return_utilities=...)`` with unlabeled points marked by ``missing_label`` in ``y``;
  the utilities are RAD's inclusion probabilities ``q``.
* :class:`RADQuery` (:mod:`rad.integrations.modal`) -- a modAL query strategy,
  ``ActiveLearner(query_strategy=RADQuery(...))``; returns the chosen pool indices and
  their ``q``.
* :class:`RADHeuristic` (:mod:`rad.integrations.baal`) -- a baal heuristic:
  ``get_ranks(probabilities)`` ranks RAD's batch first; ``(n, k, T)`` MC-dropout samples
  are averaged over ``T``.

Every adapter needs the teacher's mistakes ``m`` in the pool it selects from: give it
as ``m=`` or give ``validation=(teacher_pred_val, y_val)`` and it is estimated for each
query's pool with :func:`rad.estimate_m` (Lemma 1's conservative value). Probabilities
are validated as :mod:`rad.gains` does: negative entries or rows not summing to 1 are an
error naming the row (never a silent softmax). The selection is exactly
``rad.select(gains, m, b, rng=...)`` on the pool's gains, mapped back to the library's
indices.
"""

from __future__ import annotations

import importlib
from typing import Any

from rad.integrations._common import MissingExtraError, resolve_m

# The adapters load their library on first access, so ``import *`` takes only these: it
# would otherwise need all three peer libraries installed.
__all__ = ["MissingExtraError", "resolve_m"]

_ADAPTERS = {
    "RADSampling": "rad.integrations.skactiveml",
    "RADQuery": "rad.integrations.modal",
    "RADHeuristic": "rad.integrations.baal",
}


def __getattr__(name: str) -> Any:
    """Import an adapter's module (and its library) on first access."""
    if name in _ADAPTERS:
        value = getattr(importlib.import_module(_ADAPTERS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rad.integrations' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_ADAPTERS))

"""Executable proofs of optimality for ``rad``'s solutions.

* :func:`certificate` -- lower and upper bounds on the game value that bracket any
  probabilities, O(n) and streamed, so a solution for a 1e9-point pool can be checked
  (the proof is in ``docs/certificate.md``);
* :func:`lp_oracle` -- the single-draw and batch games as linear programs (HiGHS through
  SciPy), the slow independent reference for small pools;
* :func:`depround_marginals` -- Monte Carlo inclusion frequencies of DepRound with
  confidence intervals and a pass/fail against the target probabilities;
* :func:`check_random_instances` -- random games of several families, each certified and
  compared with the LP (what ``rad verify`` runs).

Modules, one concern each:

* :mod:`rad.verify.certificate` -- the :class:`Certificate` result and :func:`certificate`;
* :mod:`rad.verify.chunked` -- the pool in chunks, their sums and the thread map;
* :mod:`rad.verify.selection` -- streamed top-``k`` and weighted selection (radix select
  on the float bits);
* :mod:`rad.verify.adversary` -- the certificate's adversary: saddle completion and
  water search;
* :mod:`rad.verify.game` -- exact O(n log n) best responses (references for tests);
* :mod:`rad.verify.lp` -- the LP formulations and :func:`lp_oracle`;
* :mod:`rad.verify.marginals` -- :func:`depround_marginals`;
* :mod:`rad.verify.harness` -- :func:`check_random_instances`.

SciPy is needed only by the LPs (the ``[verify]`` extra); without it they raise an
``ImportError`` that says how to install it.
"""

from __future__ import annotations

from rad._lazy import lazy_getattr

__all__ = [
    "Certificate",
    "HarnessReport",
    "InstanceCheck",
    "LPSolution",
    "MarginalsCheck",
    "certificate",
    "check_random_instances",
    "depround_marginals",
    "lp_oracle",
]

# Imported eagerly (NumPy only): the function ``certificate`` shares its name with its
# module, and a lazy attribute would be shadowed by the submodule once it is imported.
from rad.verify.certificate import Certificate, certificate  # noqa: E402

_LAZY = {
    "HarnessReport": "rad.verify.harness",
    "InstanceCheck": "rad.verify.harness",
    "LPSolution": "rad.verify.lp",
    "MarginalsCheck": "rad.verify.marginals",
    "check_random_instances": "rad.verify.harness",
    "depround_marginals": "rad.verify.marginals",
    "lp_oracle": "rad.verify.lp",
}


__getattr__ = lazy_getattr("rad.verify", _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

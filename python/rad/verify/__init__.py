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

from rad._lazy import lazy_getattr
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import ArrayLike

    from rad.verify.lp import LPSolution

__all__ = [
    "Certificate",
    "LPSolution",
    "MarginalsCheck",
    "certificate",
    "depround_marginals",
    "lp_oracle",
]

# Imported eagerly (NumPy only): the function ``certificate`` shares its name with its
# module, and a lazy attribute would be shadowed by the submodule once it is imported.
from rad.verify.certificate import Certificate, certificate  # noqa: E402

_LAZY = {
    "LPSolution": "rad.verify.lp",
    "MarginalsCheck": "rad.verify.marginals",
    "depround_marginals": "rad.verify.marginals",
}


__getattr__ = lazy_getattr("rad.verify", _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def lp_oracle(
    gains: ArrayLike,
    m: float,
    b: int = 1,
    *,
    w: float | None = None,
    losses: ArrayLike | None = None,
    max_n: int = 2000,
) -> LPSolution:
    """Solve the single-draw (``b = 1``) or batch game as a linear program (HiGHS).

    The slow, independent reference: the sampler's LP (the adversary dualised with a
    water level ``nu``) gives the value and an optimal ``q``; its dual, the adversary's
    LP, gives an equilibrium ``c`` (see :mod:`rad.verify.lp` for both formulations). With
    ``b = 1`` this is the paper's single-draw game of Theorem 1 (``q <= 1`` is then
    implied). Use it to cross-check :func:`rad.solve` and :func:`certificate` on small
    pools; use :func:`certificate` at scale.

    Parameters
    ----------
    gains : array_like, shape (n,)
        Non-negative, finite gains; ``1 <= n <= max_n``.
    m : float
        Teacher mistakes, ``0 <= m <= n``.
    b : int, default 1
        Batch size, ``0 <= b <= n``.
    w : float, optional
        RAD loss weight (losses ``w * gains``), default ``1 - m/n``.
    losses : array_like, optional
        General losses instead of ``w * gains``.
    max_n : int, default 2000
        Size guard: the LPs have ``2n + 1`` variables and are solved as general LPs
        (superlinear time), so larger pools are refused with a ``ValueError`` that points
        to :func:`certificate`. Raise it deliberately if you accept the cost.

    Returns
    -------
    rad.verify.lp.LPSolution
        ``value``, ``probabilities`` (an optimal ``q``), ``adversary`` (an equilibrium
        ``c``) and HiGHS's ``status``.

    Raises
    ------
    ImportError
        If SciPy is not installed (``pip install scipy`` or the ``[verify]`` extra).
    ValueError, TypeError, RuntimeError
        As :func:`rad.verify.lp.lp_batch` (invalid input, ``n > max_n``, a dynamic range
        of ``a`` above 1e18, or HiGHS failing).

    Examples
    --------
    >>> import numpy as np
    >>> from rad.verify import lp_oracle
    >>> sol = lp_oracle(np.array([3.0, 2.0, 1.0]), m=1.0, w=0.0)
    >>> round(sol.value, 9)  # Theorem 1: max_k (k - m) / H_k, reached at k = 2
    1.2
    """
    try:
        from rad.verify import lp
    except ImportError as exc:  # SciPy missing
        raise ImportError(
            "rad.verify.lp_oracle needs SciPy (HiGHS): pip install scipy, or install the "
            "[verify] extra of robust-active-distillation"
        ) from exc
    if isinstance(b, int) and not isinstance(b, bool) and b == 1:
        return lp.lp_single_draw(gains, m, losses=losses, w=w, max_n=max_n)
    return lp.lp_batch(gains, m, b, losses=losses, w=w, max_n=max_n)

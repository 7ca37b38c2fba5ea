"""Linear-programming oracle for the robust-distillation game (docs/design.md §1).

A slow, independent reference for the solver. The batch game

    max_{q in [0,1]^n, sum q = b}  min_{c in [0,1]^n, sum c = n - m}  sum_i q_i (c_i a_i - l_i)

is turned into one LP by dualising the adversary. For fixed ``q`` the adversary solves
``max_u sum_i u_i q_i a_i`` over ``u in [0,1]^n, sum u = m`` (``u = 1 - c``), whose LP dual
is ``min_{nu, s >= 0} m nu + sum_i s_i`` subject to ``s_i >= q_i a_i - nu``. Hence the
*sampler's LP*

    OPT_b = max  sum_i q_i g_i - m nu - sum_i s_i
            s.t. q_i a_i - nu - s_i <= 0,  0 <= q_i <= 1,  sum_i q_i = b,  s >= 0,  nu free.

Its LP dual is the *adversary's LP* (the adversary moving first; ``lam`` prices
``sum q = b`` and ``y_i`` the caps ``q_i <= 1``)

    OPT_b = min  b lam + sum_i y_i
            s.t. a_i u_i + lam + y_i >= g_i,  0 <= u_i <= 1,  sum_i u_i = m,  y >= 0,  lam free,

i.e. ``min_u`` of the sum of the ``b`` largest ``g_i - u_i a_i = c_i a_i - l_i``.
:func:`lp_batch` solves both: ``q`` and the value come from the first, the equilibrium
``c = 1 - u`` from the second. Reading ``u`` off the first LP's multipliers is cheaper but
less accurate: HiGHS makes them dual feasible only to its tolerance in its internally
scaled model, and on a pool of ones with two gains of 1e6 (m = 11, b = 1) that left
``c_i`` off by 5e-9 on a huge point, i.e. a 5e-3 gap in ``sampler_value(c)``; as primal
variables of the adversary's LP the same ``u`` are accurate to about 1e-14 max(a).

The LPs have ``2n + 1`` variables each; they are meant for tests on small pools. Large
pools are checked by :mod:`rad.verify.certificate` instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad._solve.game import resolve_game

try:  # SciPy is the [verify] extra: without it this module imports, and its LPs say so
    from scipy import sparse
    from scipy.optimize import linprog
except ImportError:  # pragma: no cover - exercised only without SciPy
    sparse = linprog = None

if TYPE_CHECKING:  # pragma: no cover
    from scipy.optimize import OptimizeResult

__all__ = ["LPSolution", "SCIPY_AVAILABLE", "lp_batch", "lp_oracle", "lp_single_draw"]

#: Whether SciPy (HiGHS) is installed; without it every LP raises an ``ImportError``
#: that says how to install it.
SCIPY_AVAILABLE = linprog is not None

#: HiGHS options: the tightest feasibility tolerances it accepts (1e-10; smaller values are
#: rejected with "Invalid option value") and a tight IPM optimality tolerance (1e-12; the
#: floor). The data are rescaled (see ``_scale``) before solving.
_HIGHS_OPTIONS = {
    "primal_feasibility_tolerance": 1e-10,
    "dual_feasibility_tolerance": 1e-10,
    "ipm_optimality_tolerance": 1e-12,
    "presolve": True,
    # A few tiny pools make the dual simplex cycle at these tolerances (seen: minutes on
    # a 20-point pool); stop it and let the next attempt (interior point) finish the job.
    "time_limit": 10.0,
}

#: Solver attempts, in order. The game LP is always feasible and bounded, so a non-optimal
#: status is numerical trouble at the tolerance floor: on about one instance in 10^4 of
#: the test strategies (n ~ 20, a spanning 1e-6 .. 1e5) the dual simplex at 1e-10 stops
#: with "HiGHS Status 0: Not Set", while the interior-point method with crossover, or the
#: simplex at 1e-9, solves the same LP to full accuracy.
_ATTEMPTS: tuple[tuple[str, str, dict[str, float | bool]], ...] = (
    ("highs (dual simplex), 1e-10", "highs", _HIGHS_OPTIONS),
    ("interior point + crossover, 1e-10", "highs-ipm", _HIGHS_OPTIONS),
    (
        "highs (dual simplex), 1e-9",
        "highs",
        {
            **_HIGHS_OPTIONS,
            "primal_feasibility_tolerance": 1e-9,
            "dual_feasibility_tolerance": 1e-9,
        },
    ),
)


@dataclass(frozen=True)
class LPSolution:
    """Solution of the batch game by linear programming.

    Attributes
    ----------
    value : float
        The game value ``OPT_b`` (the LP optimum).
    probabilities : numpy.ndarray, shape (n,), float64
        The sampler's optimal inclusion probabilities ``q`` (``0 <= q <= 1``, sum ``b`` up
        to the solver tolerance).
    adversary : numpy.ndarray, shape (n,), float64
        An equilibrium adversary ``c = 1 - u``, solved from the LP dual (entries in
        ``[0, 1]``, sum ``n - m`` up to the solver tolerance):
        ``sampler_value(c, gains, b, losses=...)`` equals ``value``.
    status : str
        HiGHS's termination message (noting the settings used if the first attempt failed
        numerically and a fallback solved the LP).
    """

    value: float
    probabilities: NDArray[np.float64]
    adversary: NDArray[np.float64]
    status: str


def _resolve(
    gains: ArrayLike, m: float, b: int, losses: ArrayLike | None, w: float | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], float, int]:
    """Validate the inputs and return ``(g, l, m, b)`` as float64 arrays and scalars.

    The checks, their messages and the default ``w = 1 - m/n`` are those of every ``rad``
    entry point (:func:`rad._solve.game.resolve_game`); the NumPy kernels check the gains'
    values, so the oracle stays independent of the compiled ones.
    """
    game = resolve_game(gains, m, b, w=w, losses=losses, backend="numpy", threads=1)
    game = game.with_values_checked()
    g = np.asarray(game.gains, dtype=np.float64)
    lo = game.losses if game.losses is not None else game.w * g
    return g, lo, game.m, game.b


#: Largest ratio max(a) / min(a > 0) accepted. After scaling by the geometric mean every
#: coefficient lies in [1/sqrt(ratio), sqrt(ratio)] = [1e-9, 1e9]; HiGHS silently drops
#: matrix entries below its ``small_matrix_value`` (1e-9), which would change the game.
_MAX_DYNAMIC_RANGE = 1e18


def _scale(a: NDArray[np.float64]) -> float:
    """Geometric mean of the smallest and largest positive ``a`` (1 if none is positive).

    Scaling by ``max(a)`` instead would push small ``a_i`` below HiGHS's
    ``small_matrix_value`` (1e-9), where they are treated as zero: on ``g = [1e5, 1e-4]``,
    ``m = n`` that returns a value of 1e-4 instead of 0, and on wider ranges HiGHS can end
    with an unknown status.
    """
    pos = a[a > 0]
    if pos.size == 0:
        return 1.0
    lo, hi = float(pos.min()), float(pos.max())
    if hi / lo > _MAX_DYNAMIC_RANGE:
        raise ValueError(
            f"a = gains + losses spans {hi / lo:.3g} (max/min positive), more than the LP "
            f"oracle handles accurately ({_MAX_DYNAMIC_RANGE:.0e}); use rad.verify.certificate"
        )
    return math.sqrt(lo) * math.sqrt(hi)


def lp_batch(
    gains: ArrayLike,
    m: float,
    b: int,
    *,
    losses: ArrayLike | None = None,
    w: float | None = None,
    max_n: int = 2000,
) -> LPSolution:
    """Solve the batch game exactly by linear programming (HiGHS).

    Parameters
    ----------
    gains : array_like, shape (n,)
        Non-negative, finite gains ``g``; ``n >= 1``.
    m : float
        Number of teacher mistakes, ``0 <= m <= n``; need not be an integer.
    b : int
        Batch size, ``0 <= b <= n``.
    losses : array_like, shape (n,), optional
        Non-negative losses ``l``. Default: RAD losses ``w * gains``.
    w : float, optional
        RAD loss weight, used only when ``losses`` is None. Default ``1 - m/n``.
    max_n : int, default 2000
        Refuse pools larger than this (see Raises).

    Returns
    -------
    LPSolution
        The value, an optimal ``q``, an equilibrium ``c`` and HiGHS's status.

    Raises
    ------
    ValueError
        On invalid input, when both ``losses`` and ``w`` are given, when ``n > max_n``,
        or when the positive ``a = gains + losses`` span a ratio above 1e18.
    TypeError
        If ``b`` is not an integer or ``m`` not a real number.
    RuntimeError
        If HiGHS does not report an optimal solution, after retrying a numerical failure
        with the interior-point method and with 1e-9 tolerances (its messages are
        included).

    Notes
    -----
    Two LPs are solved (module docstring): the sampler's LP, adversary dualised with
    ``nu`` and ``s`` (docs/design.md §1), gives ``value`` and ``q``::

        max  g.q - m nu - sum(s)
        s.t. a_i q_i - nu - s_i <= 0,  0 <= q <= 1,  sum(q) = b,  s >= 0,  nu free,

    and its dual, the adversary's LP, gives ``c = 1 - u``.

    The free scalars are boxed to ``[-K, K]``, ``K = max(a) + 1`` (scaled units), which
    loses no optimum: since ``0 <= q_i a_i <= max(a)``, ``m nu + sum_i (q_i a_i - nu)^+``
    is non-increasing for ``nu < 0`` (slope ``m - n``) and non-decreasing above
    ``max(a)`` (slope ``m``); and ``lam`` can always be taken as the ``b``-th largest
    ``g_i - u_i a_i``, which lies in ``[-max(a), max(a)]``. The box removes zero-cost rays
    (``nu -> -inf`` at ``m = n``, ``nu -> +inf`` at ``m = 0``, ``lam`` at ``b = 0``) on
    which the dual simplex can otherwise report a spurious "unbounded".

    The data are divided by ``sqrt(min(a > 0) * max(a))`` before solving and the value
    multiplied back. On pools with ``n <= 40`` and ``a`` spanning up to 1e12 the value
    agrees with exact references to about 1e-14 relative to ``max(a)`` (worst seen:
    2e-10); the HiGHS tolerances (1e-10) bound the error to roughly
    ``n * 1e-10 * max(a)``.
    """
    _require_scipy()
    g, lo, mf, bi = _resolve(gains, m, b, losses, w)
    n = g.shape[0]
    if n > max_n:
        raise ValueError(
            f"n = {n} exceeds max_n = {max_n}: the LP oracle solves two LPs with O(n) "
            f"variables (2n + 1) and n + 1 constraints each, by HiGHS as general LPs "
            f"(superlinear time), so it is only a reference for small pools; use "
            f"rad.verify.certificate to check solutions on large pools"
        )
    a = g + lo
    if bi == 0 or not np.any(a > 0):
        # Every payoff is exactly 0 (no batch, or nothing to gain or lose): the value is 0
        # for every q and u. Solving it would only return HiGHS's rounding noise.
        q = np.full(n, bi / n) if n else np.zeros(0)
        return LPSolution(value=0.0, probabilities=q, adversary=np.full(n, 1.0 - mf / n),
                          status="Optimal (trivial game, b = 0 or all a = 0: value 0, no LP solved)")
    scale = _scale(a)
    gs, as_ = g / scale, a / scale
    # Box for the free scalars nu and lam, K = max(a) + 1 (scaled): see Notes.
    box = float(as_.max(initial=0.0)) + 1.0
    diag = sparse.diags(as_, format="csr")
    ones_col = sparse.csr_matrix(-np.ones((n, 1)))
    eye = sparse.identity(n, format="csr")
    sum_row = sparse.csr_matrix(
        (np.ones(n), (np.zeros(n, dtype=np.intp), np.arange(n))), shape=(1, 2 * n + 1)
    )
    unit_box: list[tuple[float | None, float | None]] = [(0.0, 1.0)] * n
    nonneg: list[tuple[float | None, float | None]] = [(0.0, None)] * n

    # Sampler's LP, x = [q, nu, s]: min -g.q + m nu + sum(s), a_i q_i - nu - s_i <= 0.
    primal, notes_p = _solve(
        np.concatenate([-gs, [mf], np.ones(n)]),
        sparse.hstack([diag, ones_col, -eye], format="csr"),
        np.zeros(n),
        sum_row,
        float(bi),
        unit_box + [(-box, box)] + nonneg,
    )
    # Adversary's LP, x = [u, lam, y]: min b lam + sum(y), -a_i u_i - lam - y_i <= -g_i.
    dual, notes_d = _solve(
        np.concatenate([np.zeros(n), [float(bi)], np.ones(n)]),
        sparse.hstack([-diag, ones_col, -eye], format="csr"),
        -gs,
        sum_row,
        mf,
        unit_box + [(-box, box)] + nonneg,
    )

    q = np.clip(np.asarray(primal.x[:n], dtype=np.float64), 0.0, 1.0) + 0.0  # no -0.0
    u = np.clip(np.asarray(dual.x[:n], dtype=np.float64), 0.0, 1.0)
    value = -float(primal.fun) * scale + 0.0
    status = str(primal.message)
    notes = [f"sampler's LP: {x}" for x in notes_p] + [f"adversary's LP: {x}" for x in notes_d]
    if notes:
        status += " [solved after fallbacks; " + "; ".join(notes) + "]"
    return LPSolution(value=value, probabilities=q, adversary=1.0 - u, status=status)


def _require_scipy() -> None:
    """Raise ``ImportError`` naming the install when SciPy is missing."""
    if linprog is None:
        raise ImportError(
            "rad.verify.lp_oracle needs SciPy (HiGHS): pip install scipy, or install the "
            "[verify] extra of robust-active-distillation"
        )


def _solve(
    cost: NDArray[np.float64],
    a_ub: sparse.csr_matrix,
    b_ub: NDArray[np.float64],
    a_eq: sparse.csr_matrix,
    b_eq: float,
    bounds: list[tuple[float | None, float | None]],
) -> tuple[OptimizeResult, list[str]]:
    """Run :data:`_ATTEMPTS` in order until one is optimal; return it and the failures."""
    notes: list[str] = []
    for label, method, options in _ATTEMPTS:
        res = linprog(
            cost,
            A_ub=a_ub,
            b_ub=b_ub,
            A_eq=a_eq,
            b_eq=np.array([b_eq]),
            bounds=bounds,
            method=method,
            options=options,
        )
        if res.status == 0 and res.x is not None:
            return res, notes
        notes.append(f"{label}: status {res.status}: {res.message}")
    raise RuntimeError("HiGHS failed to solve the game LP; " + "; ".join(notes))


def lp_single_draw(
    gains: ArrayLike,
    m: float,
    *,
    losses: ArrayLike | None = None,
    w: float | None = None,
    max_n: int = 2000,
) -> LPSolution:
    """Solve the single-draw game (paper, Theorem 1) by linear programming.

    Equivalent to ``lp_batch(gains, m, 1, losses=losses, w=w, max_n=max_n)``: with
    ``b = 1`` the constraint ``q <= 1`` is implied and ``q`` is a probability vector.

    Parameters
    ----------
    gains : array_like, shape (n,)
        Non-negative, finite gains ``g``; ``n >= 1``.
    m : float
        Number of teacher mistakes, ``0 <= m <= n``.
    losses : array_like, shape (n,), optional
        Non-negative losses. Default: RAD losses ``w * gains``.
    w : float, optional
        RAD loss weight (only without ``losses``). Default ``1 - m/n``.
    max_n : int, default 2000
        Refuse pools larger than this.

    Returns
    -------
    LPSolution
        See :func:`lp_batch`.

    Raises
    ------
    ValueError, TypeError, RuntimeError
        As :func:`lp_batch`.
    """
    return lp_batch(gains, m, 1, losses=losses, w=w, max_n=max_n)


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
    LP, gives an equilibrium ``c`` (module docstring: both formulations). With
    ``b = 1`` this is the paper's single-draw game of Theorem 1 (``q <= 1`` is then
    implied). Use it to cross-check :func:`rad.solve` and :func:`rad.verify.certificate`
    on small pools; use :func:`rad.verify.certificate` at scale.

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
        to :func:`rad.verify.certificate`. Raise it deliberately if you accept the cost.

    Returns
    -------
    LPSolution
        ``value``, ``probabilities`` (an optimal ``q``), ``adversary`` (an equilibrium
        ``c``) and HiGHS's ``status``.

    Raises
    ------
    ImportError
        If SciPy is not installed (``pip install scipy`` or the ``[verify]`` extra).
    ValueError, TypeError, RuntimeError
        As :func:`lp_batch` (invalid input, ``n > max_n``, a dynamic range
        of ``a`` above 1e18, or HiGHS failing).

    Examples
    --------
    >>> import numpy as np
    >>> from rad.verify import lp_oracle
    >>> sol = lp_oracle(np.array([3.0, 2.0, 1.0]), m=1.0, w=0.0)
    >>> round(sol.value, 9)  # Theorem 1: max_k (k - m) / H_k, reached at k = 2
    1.2
    """
    _require_scipy()
    return lp_batch(gains, m, b, losses=losses, w=w, max_n=max_n)

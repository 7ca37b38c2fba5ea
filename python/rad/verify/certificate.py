"""Optimality certificates for the batch game, at any scale (docs/design.md §1, "Certificate").

The batch game is

    OPT_b = max_{q in Q} min_{u in U} P(q, u),   P(q, u) = sum_i q_i g_i - sum_i u_i q_i a_i,

with ``Q = {q in [0,1]^n : sum q = b}``, ``U = {u in [0,1]^n : sum u = m}`` (``u = 1 - c``
are the teacher's mistakes) and ``a = g + l``. Two numbers bracket ``OPT_b``:

* the **lower bound** ``value(q) = min_u P(q, u) = sum_i q_i g_i - (sum of the m largest
  q_i a_i)`` of the probabilities ``q`` being checked (the adversary's best response), and
* the **upper bound** ``Phi(u) = max_q P(q, u) = sum of the b largest g_i - u_i a_i`` of an
  adversary ``u`` (the sampler's best response).

``value(q) <= OPT_b <= Phi(u)`` for every feasible pair, so a zero gap proves that ``q`` is
optimal — with no LP and no trust in the solver: both numbers are recomputed here from the
data. This module holds the result (:class:`Certificate`) and the public
:func:`certificate`; the parts live in modules of their own:

* :mod:`rad.verify.chunked` -- the pool in chunks, their sums and the thread map (memory
  stays bounded by the chunk size, so a 1e8–1e9 pool, also a read-only memory map, can be
  certified; the probabilities are produced chunk by chunk by the solver's kernels);
* :mod:`rad.verify.selection` -- the ``k`` largest of a streamed vector and the weighted
  selection, O(n) by a radix select over the float bit patterns;
* :mod:`rad.verify.adversary` -- the two constructions of ``u``: the saddle completion of
  the solver's optimum (fast path) and the independent water search (when the fast path
  leaves a gap, or on request), both proved in ``docs/certificate.md``.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rad._solve.solution import NetHarmWarning, Solution
from rad.verify.adversary import (
    Adversary,
    UniformAdversary,
    WaterAdversary,
    feasible_upper,
    saddle_completion,
    upper_bound,
    water_search,
)
from rad.verify.chunked import CHUNK, ChunkedPool, ChunkFn, chunk_sum, q_from_array
from rad.verify.selection import select_top

__all__ = ["CHUNK", "Certificate", "certificate"]

_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class Certificate:
    """Bounds that bracket the game value, and how far apart they are.

    Attributes
    ----------
    lower : float
        ``value(q)``: what the checked probabilities ``q`` guarantee against the worst
        placement of the ``m`` mistakes, ``sum q_i g_i - (sum of the m largest q_i a_i)``.
    upper : float
        ``Phi(u)``: the best a batch of ``b`` can earn against the adversary ``c = 1 - u``,
        the sum of the ``b`` largest ``c_i a_i - l_i``. ``lower <= OPT_b <= upper``.
    gap : float
        ``upper - lower`` (zero, up to rounding, proves ``q`` optimal).
    rel_gap : float
        ``gap / scale`` (0 when both are 0; a property).
    scale : float
        The magnitude the gap is judged against: the largest of ``sum q_i g_i``, the
        attacked mass ``sum of the m largest q_i a_i`` and ``|upper|`` (rounding errors are
        relative to these, not to a value that may cancel to 0).
    rtol : float
        Relative tolerance of :attr:`optimal`.
    optimal : bool
        ``gap <= rtol * scale`` and both vectors feasible to ``rtol`` (``|sum q - b|`` and
        ``max(sum u - m, 0)`` at most ``rtol * max(1, b or m)``).
    value : float
        The solver's reported value (``nan`` when ``q`` came from the caller as an array).
    n, m, b : int, float, int
        The instance.
    q_sum, u_sum : float
        ``sum q`` (should be ``b``) and the adversary's mistakes ``sum u`` (at most ``m``).
    nu, lam : float
        The adversary's parameters: the attack level ``nu`` (the ``ceil(m)``-th largest
        ``q*_i a_i``; ``nan`` with ``method="search"``, ``inf`` when ``m = 0``) and the water
        level ``lam`` of the values ``g_i - u_i a_i`` (``nan`` when ``b = 0``).
    adversary_method : str
        How the adversary was built: ``"saddle"`` (completion of the solver's optimum),
        ``"search"`` (the independent water search) or ``"none"`` (``b = 0``).
    backend : str
        The kernels that produced ``q``.
    seconds : float
        Wall time of the whole check (solve included when it ran).
    adversary : numpy.ndarray or None
        ``c = 1 - u`` (float64, length ``n``) when requested with ``return_adversary``.
    """

    lower: float
    upper: float
    gap: float
    scale: float
    rtol: float
    optimal: bool
    value: float
    n: int
    m: float
    b: int
    q_sum: float
    u_sum: float
    nu: float
    lam: float
    adversary_method: str
    backend: str
    seconds: float
    adversary: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)

    @property
    def rel_gap(self) -> float:
        """``gap / scale`` (0 when both are 0)."""
        if self.scale > 0:
            return self.gap / self.scale
        return 0.0 if self.gap == 0 else math.inf



def certificate(
    gains: ArrayLike,
    m: float,
    b: int = 1,
    *,
    w: float | None = None,
    losses: ArrayLike | None = None,
    solution: Solution | ArrayLike | None = None,
    return_adversary: bool = False,
    rtol: float = 1e-9,
    method: str = "auto",
    backend: str = "auto",
    threads: int | None = None,
    chunk: int = CHUNK,
) -> Certificate:
    """Certify (or refute) the optimality of batch probabilities without an LP.

    Computes a lower bound — the probabilities ``q`` against the adversary's best response
    — and an upper bound — an equilibrium adversary ``c`` against the sampler's best
    response (docs/design.md §1, "Certificate"). ``lower <= OPT_b <= upper`` always holds, so
    ``gap ~ 0`` *proves* ``q`` optimal, and a positive gap bounds how far from optimal it
    is (exactly, when the adversary is an equilibrium one, as constructed here). The
    constructions and their proofs are in ``docs/certificate.md``.

    Parameters
    ----------
    gains : array_like, shape (n,)
        Finite, non-negative gains (float32/float64 and memory maps are read in place).
    m : float
        The teacher's mistakes, ``0 <= m <= n``.
    b : int, default 1
        Batch size, ``0 <= b <= n`` (``b = 1`` is the paper's single draw).
    w : float, optional
        RAD loss weight (losses ``w * gains``); default ``1 - m/n``.
    losses : array_like, shape (n,), optional
        General losses instead of ``w * gains``.
    solution : Solution or array_like or None
        What to certify: ``None`` solves the game with :func:`rad.solve` and certifies that;
        a :class:`rad.Solution` (for this same instance) is certified as is; an array ``q``
        (``0 <= q <= 1``, ``sum q = b``) — e.g. another method's probabilities — gets its
        guaranteed value as ``lower`` and the game's value as ``upper``, so ``gap`` is its
        sub-optimality.
    return_adversary : bool, default False
        Also return the adversary ``c = 1 - u`` (``8 n`` bytes).
    rtol : float, default 1e-9
        Tolerance of :attr:`Certificate.optimal`.
    method : {"auto", "saddle", "search"}
        How the adversary is built. ``"saddle"``: completion of the solver's optimum
        (a few passes); ``"search"``: the independent water search, a convex 1-D
        minimisation that never looks at the solver's numbers (about 10–30 evaluations of
        2–6 passes each); ``"auto"``: the saddle completion, then the search only if its
        gap exceeds what rounding explains (``n * eps * scale``), keeping the tighter
        bound. With ``"search"`` and an array ``q`` the solver is not run at all.
    backend : {"auto", "cpp", "numba", "numpy"}
        Kernels for solving and for producing ``q``.
    threads : int, optional
        Threads for the compiled kernels and for the chunked passes (default:
        ``RAD_NUM_THREADS`` when set, else all cores for pools of at least ``2**22``
        points, else one).
    chunk : int
        Points per streaming chunk.

    Returns
    -------
    Certificate

    Raises
    ------
    ValueError
        On invalid gains, losses, ``m``, ``b``, ``w``, ``method`` or ``rtol``; on a
        ``solution`` for another instance; on a ``q`` that is not in ``[0, 1]`` or does
        not sum to ``b``.
    TypeError
        On a non-integer ``b``, non-real ``m``, non-numeric arrays or a non-bool
        ``return_adversary``.

    Notes
    -----
    Time: ``O(n)`` — the solve (if any) plus a few streaming passes: two radix selections
    (the ``m`` largest ``q_i a_i``, the ``b`` largest ``g_i - u_i a_i``; usually two passes
    each, at most five) and one pass of sums for the saddle completion; the search, when
    it runs, adds 2–6 passes per evaluation. Chunks are processed on ``threads`` threads.
    Memory: ``O(chunk)`` float64 temporaries per thread (about ``12 * 8 * chunk`` bytes,
    200 MB at the default chunk), ``2**16``-bin
    histograms, at most ``2**20`` collected values per selection, plus 16 bytes per
    *tied* point on the adversary's level set that the sampler takes or skips surely
    (none or a handful on real data; all points only in degenerate pools such as all
    gains equal with ``b = n``), and ``8 n`` bytes for ``return_adversary``. Nothing of
    size ``n`` is allocated otherwise, so a read-only memory map of 1e9 points works.

    Floating point: both bounds are evaluated from the data in double precision; the
    sums are accurate to roughly ``1e-16 * n`` relative to the magnitudes in
    :attr:`Certificate.scale`, which is why the gap is judged relative to that scale
    (see ``docs/certificate.md``, "Floating point").

    Examples
    --------
    >>> import numpy as np
    >>> from rad.verify import certificate
    >>> g = np.random.default_rng(0).random(1000)
    >>> cert = certificate(g, m=300, b=10)
    >>> cert.optimal, cert.rel_gap < 1e-9
    (True, True)
    >>> top = np.zeros(1000); top[np.argsort(-g)[:10]] = 1.0  # margin's top-b
    >>> certificate(g, m=300, b=10, solution=top).gap > 1.0
    True
    """
    from rad._solve.batch import solve_game
    from rad._solve.game import resolve_game

    t0 = time.perf_counter()
    if not isinstance(return_adversary, (bool, np.bool_)):
        raise TypeError(f"return_adversary must be a bool, got {type(return_adversary).__name__}")
    if isinstance(rtol, (bool, np.bool_)) or not isinstance(rtol, numbers.Real) or not (0 <= rtol < math.inf):
        raise ValueError(f"rtol must be a finite number >= 0, got {rtol!r}")
    if method not in ("auto", "saddle", "search"):
        raise ValueError(f"method must be 'auto', 'saddle' or 'search', got {method!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    game = resolve_game(gains, m, b, w=w, losses=losses, backend=backend, threads=threads).with_values_checked()
    be, g, mf, bi, wf, lo_arr = game.backend, game.gains, game.m, game.b, game.w, game.losses
    n, nthreads, w_k = game.n, game.threads, game.kernel_w

    q_user: np.ndarray | None = None
    sol: Solution | None = None
    if isinstance(solution, Solution):
        _check_solution(solution, n, mf, bi, wf, lo_arr is not None)
        sol = solution
    elif solution is not None:
        q_user = _check_q(solution, n, bi)
    if sol is None and (q_user is None or method != "search"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NetHarmWarning)
            sol = solve_game(game)

    # Subnormal input: certify the game on exact power-of-two rescaled copies (the game
    # is scale-equivariant, q and c scale-invariant) and scale the bounds back. A caller's
    # Solution must have been solved at these gains' scale (its params are in its units),
    # and only the solve's own rescaled copy is known to hold these gains.
    own = sol is not None and not isinstance(solution, Solution)
    e = sol.scale_exponent if own and sol is not None else _scale_exponent(g, lo_arr, w_k)
    if sol is not None and sol.scale_exponent != e:
        raise ValueError(
            f"solution is for another instance: it was solved with its gains scaled by 2**{sol.scale_exponent}, "
            f"and these gains need 2**{e}"
        )
    if e:
        if own and sol is not None and sol.gains is not None:
            g_s, l_s = sol.gains, sol.losses
        else:
            g_s = np.ldexp(np.asarray(g, dtype=np.float64), e)
            l_s = None if lo_arr is None else np.ldexp(np.asarray(lo_arr, dtype=np.float64), e)
        pool = ChunkedPool(g_s, l_s, w_k, be, nthreads, int(chunk))
    else:
        pool = ChunkedPool(g, lo_arr, w_k, be, nthreads, int(chunk))
    qstar = pool.q_from_params(sol.params) if sol is not None else None
    # The solver's q* runs unless an array q is certified by the independent search.
    qcert = qstar if q_user is None else q_from_array(q_user)
    assert qcert is not None

    # Lower bound: sum q g - (the m largest q a); the selection's first pass also sums q
    # and q g.
    qsum_parts: dict[int, float] = {}
    qg_parts: dict[int, float] = {}

    def qa_values(qsrc: ChunkFn, record: bool) -> ChunkFn:
        def values(lo: int, hi: int) -> np.ndarray:
            gg, _, a = pool.gla(lo, hi)
            q = qsrc(lo, hi)
            if record and lo not in qsum_parts:
                qsum_parts[lo] = chunk_sum(q)
                qg_parts[lo] = chunk_sum(q * gg)
            payoff: np.ndarray = q * a
            return payoff

        return values

    values = qa_values(qcert, True)
    top_cert = select_top(values, pool.ranges, mf, pool.threads)
    for lo, hi in pool.ranges:  # m == 0 makes no selection pass
        if lo not in qsum_parts:
            values(lo, hi)
    qg = math.fsum(list(qg_parts.values()))
    q_sum = math.fsum(list(qsum_parts.values()))
    lower = qg - top_cert.total
    nu = math.nan
    if method != "search":
        assert qstar is not None
        top_star = top_cert if q_user is None else select_top(qa_values(qstar, False), pool.ranges, mf, pool.threads)
        nu = top_star.threshold  # +inf when m == 0

    # Upper bound: the saddle completion of q* (tight, then wider rounding tolerances),
    # and the independent water search where that leaves a gap (or when asked for).
    scale0 = max(abs(qg), abs(top_cert.total))

    def closed(up: float) -> bool:
        """The gap is within what the sums' rounding can explain (docs/certificate.md §5).

        Stricter than ``rtol``: a saddle completion of a ``q*`` that is optimal only to
        its input's conditioning can be loose far beyond rounding (a boundary point with
        ``q*_i a_i`` above ``nu`` pins the water level), and then the search runs.
        """
        return up - lower <= n * _EPS * max(scale0, abs(up))

    # (Phi(u), its bound, sum u, how, u): the bound is Phi(u) widened where rounding may
    # leave the exact sum u above m (feasible_upper); `closed` judges Phi(u) itself.
    candidates: list[tuple[float, float, float, str, Adversary]] = []

    def candidate(how: str, adv: Adversary) -> tuple[float, float, float, str, Adversary]:
        ub = upper_bound(pool, adv, bi)
        # the cheap widening where it is within a quarter of rtol and a pass would cost
        # (large pools: at 1e7 points that pass was a fifth of the certificate's time)
        negligible = 0.25 * rtol * max(scale0, abs(ub.phi)) if n > 1 << 20 else 0.0
        return ub.phi, feasible_upper(pool, adv, ub, bi, mf, negligible), ub.u_sum, how, adv

    if bi == 0:  # the sampler takes nothing: every adversary gives 0
        candidates.append((0.0, 0.0, mf, "none", UniformAdversary(mf / n)))
    else:
        if method != "search":
            assert qstar is not None
            candidates.append(candidate("saddle", saddle_completion(pool, qstar, mf, nu)))
        if method == "search" or (method == "auto" and not closed(min(c[0] for c in candidates))):
            hint = candidates[0][4].lam if candidates else None
            # Psi(lam) bounds Phi(u(lam)) from above: once it closes the gap to the lower
            # bound (half the tolerance), the search may stop early.
            target = lower + 0.5 * n * _EPS * scale0 if method == "auto" else -math.inf
            candidates.append(candidate("search", WaterAdversary(water_search(pool, mf, bi, hint, target))))
    _, upper, u_sum, how, adv = min(candidates, key=lambda c: c[1])

    adversary = None
    if return_adversary:
        adversary = np.empty(n, dtype=np.float64)
        for lo, hi in pool.ranges:
            gg, ll, a = pool.gla(lo, hi)
            adversary[lo:hi] = 1.0 - adv(gg, ll, a, lo, hi)[0]
    unscale = (lambda x: math.ldexp(x, -e)) if e else float  # noqa: E731
    lower_c, upper_c = unscale(lower), unscale(upper)
    scale = unscale(max(scale0, abs(upper)))
    gap = upper_c - lower_c
    feasible = abs(q_sum - bi) <= rtol * max(1.0, bi) and u_sum - mf <= rtol * max(1.0, mf)
    optimal = bool(feasible and math.isfinite(gap) and gap <= rtol * scale)
    return Certificate(
        lower=float(lower_c),
        upper=float(upper_c),
        gap=float(gap),
        scale=float(scale),
        rtol=float(rtol),
        optimal=optimal,
        value=float(sol.value) if (q_user is None and sol is not None) else math.nan,
        n=n,
        m=mf,
        b=bi,
        q_sum=float(q_sum),
        u_sum=float(u_sum),
        nu=unscale(nu) if math.isfinite(nu) else nu,
        lam=unscale(float(adv.lam)),
        adversary_method=how,
        backend=str(be.name),
        seconds=time.perf_counter() - t0,
        adversary=adversary,
    )


def _scale_exponent(g: np.ndarray, losses: np.ndarray | None, w: float) -> int:
    """0, or the power of two that makes ``1/a`` finite for subnormal input.

    The same rescaling as the solver's (``rad._solve.batch.solve_game``).
    """
    lo_min = math.inf
    for i in range(0, g.shape[0], CHUNK):
        gg = np.asarray(g[i : i + CHUNK], dtype=np.float64)
        a = gg + (np.asarray(losses[i : i + CHUNK], dtype=np.float64) if losses is not None else w * gg)
        pos = a[a > 0]
        if pos.shape[0]:
            lo_min = min(lo_min, float(pos.min()))
    if not math.isfinite(lo_min) or lo_min >= 2.0**-960:
        return 0
    return -990 - int(np.frexp(lo_min)[1])


def _check_solution(sol: Solution, n: int, m: float, b: int, w: float, general: bool) -> None:
    """Raise ``ValueError`` unless ``sol`` was solved for this instance (n, b, m, losses, w)."""
    if sol.n != n:
        raise ValueError(f"solution is for a pool of n={sol.n}, but gains has n={n}")
    if sol.b != b:
        raise ValueError(f"solution is for b={sol.b}, but b={b} was given")
    if sol.m != m:
        raise ValueError(f"solution is for m={sol.m!r}, but m={m!r} was given")
    if general != (sol.losses is not None):
        raise ValueError(
            "solution was solved with "
            + ("general losses" if sol.losses is not None else "RAD losses w * gains")
            + ", but the certificate was asked for "
            + ("general losses" if general else "RAD losses")
        )
    if not general and sol.w != w:
        raise ValueError(f"solution is for w={sol.w!r}, but w={w!r} is in effect")


def _check_q(q: ArrayLike, n: int, b: int) -> np.ndarray:
    """The caller's probabilities as float64, checked: shape ``(n,)``, in ``[0, 1]``, sum ``b``."""
    arr = np.asarray(q)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"solution must be a Solution or a real array q, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"q must have shape ({n},) like gains, got {arr.shape}")
    arr = np.asarray(arr, dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(arr) & (arr >= 0.0) & (arr <= 1.0)))
    if bad.shape[0]:
        i = int(bad[0])
        raise ValueError(f"q must lie in [0, 1]; q[{i}] = {arr[i]!r}")
    total = float(np.sum(arr)) if n > 4096 else math.fsum(arr.tolist())
    if abs(total - b) > 1e-6 * max(1.0, b):
        raise ValueError(
            f"q must sum to b = {b} (a batch of b points); its sum is {total!r}, so its "
            "guaranteed value would not be a bound on the game"
        )
    return arr

"""Random games, each certified and checked against the LP: what ``rad verify`` runs.

:func:`check_random_instances` draws games from several families (:data:`INSTANCE_KINDS`:
uniform gains, heavy ties, many zeros, all equal, heavy tails, gains spanning twelve orders
of magnitude, general losses) with every kind of ``m`` and ``b`` at the edges (0, ``n``,
``n - 1``, fractional), certifies ``rad.solve``'s answer with :func:`rad.verify.certificate`
and compares both bounds with the LP oracle's value (:func:`rad.verify.lp.lp_batch`; the
certificate alone when SciPy is missing). An instance passes when the gap is closed and
both bounds equal the LP's value to its tolerance; a crash is a failure, reported in its
row.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rad._solve.game import default_w
from rad._solve.solution import NetHarmWarning
from rad.verify import lp
from rad.verify.certificate import certificate

__all__ = [
    "INSTANCE_KINDS",
    "HarnessReport",
    "Instance",
    "InstanceCheck",
    "check_random_instances",
    "random_instance",
]

#: The families of random games, in the order :func:`check_random_instances` cycles them.
INSTANCE_KINDS: tuple[str, ...] = ("uniform", "ties", "zeros", "equal", "heavy", "span", "losses")

#: Agreement with the LP: ``LP_REL |LP value| + LP_ABS max(a)`` (HiGHS's tolerances).
LP_REL, LP_ABS = 1e-8, 1e-9


@dataclass(frozen=True)
class Instance:
    """One random game: ``gains``, general ``losses`` (None: RAD losses), ``m``, ``b``."""

    kind: str
    gains: np.ndarray
    losses: np.ndarray | None
    m: float
    b: int

    @property
    def n(self) -> int:
        """The pool size."""
        return int(self.gains.shape[0])


def random_instance(rng: np.random.Generator, kind: str, max_n: int) -> Instance:
    """A random game of the family ``kind`` (one of :data:`INSTANCE_KINDS`), ``n <= max_n``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The source of randomness (the draws are a fixed sequence per seed).
    kind : str
        ``"uniform"``, ``"ties"``, ``"zeros"``, ``"equal"``, ``"heavy"``, ``"span"`` or
        ``"losses"`` (general losses, not proportional to the gains).
    max_n : int
        Largest pool size, ``>= 1``.

    Returns
    -------
    Instance
    """
    n = int(rng.integers(1, max_n + 1))
    losses = None
    if kind == "uniform":
        g = rng.random(n)
    elif kind == "ties":
        g = rng.choice([0.0, 0.25, 0.5, 1.0, 3.0], n)
    elif kind == "zeros":
        g = np.where(rng.random(n) < 0.4, 0.0, rng.random(n))
    elif kind == "equal":
        g = np.full(n, float(rng.choice([0.0, 1.0, 10.0 ** rng.uniform(-6, 6)])))
    elif kind == "heavy":
        g = rng.lognormal(0.0, 2.0, n) if rng.random() < 0.5 else rng.pareto(1.0, n)
        g = np.minimum(g, 1e6)
    elif kind == "span":
        g = 10.0 ** rng.uniform(-6, 6, n)
    elif kind == "losses":
        g = rng.random(n) if rng.random() < 0.5 else rng.choice([0.0, 0.5, 1.0], n)
        losses = rng.choice([0.0, 0.5, 1.0], n) if rng.random() < 0.5 else 2 * rng.random(n)
    else:
        raise ValueError(f"unknown instance kind {kind!r}; choose from {', '.join(INSTANCE_KINDS)}")
    m_kind = rng.integers(0, 6)
    m = [0.0, float(n), float(rng.integers(0, n + 1)), float(rng.uniform(0, n)),
         max(float(n) - 1e-3, 0.0), float(rng.uniform(0, 0.5 * n))][m_kind]
    b = int(rng.choice([0, 1, min(2, n), max(n - 1, 0), n, int(rng.integers(0, n + 1))]))
    return Instance(kind, g, losses, m, b)


@dataclass(frozen=True)
class InstanceCheck:
    """The outcome on one random game (a row of ``rad verify``'s table).

    Attributes
    ----------
    index : int
        Position in the run.
    instance : Instance
        The game.
    lp_value : float
        The LP oracle's value (``nan`` without SciPy, when the LP failed, or on an error).
    lower, upper, rel_gap : float
        The certificate's bounds and relative gap (``nan`` on an error).
    failures : tuple of str
        Why the instance failed: ``"upper != LP"``, ``"lower != LP"``, ``"gap"``,
        ``"LP error: ..."``; empty when it passed (and no error).
    error : str or None
        ``"TypeName: message"`` when the certificate raised.
    """

    index: int
    instance: Instance
    lp_value: float
    lower: float
    upper: float
    rel_gap: float
    failures: tuple[str, ...]
    error: str | None = None

    @property
    def passed(self) -> bool:
        """No error and no failure."""
        return self.error is None and not self.failures


@dataclass(frozen=True)
class HarnessReport:
    """All the checks of one :func:`check_random_instances` run.

    Attributes
    ----------
    checks : tuple of InstanceCheck
        One per instance, in order.
    seed, max_n : int
        The run's seed and largest pool.
    with_lp : bool
        Whether the bounds were compared with the LP (SciPy installed).
    seconds : float
        Wall time of the run.
    """

    checks: tuple[InstanceCheck, ...]
    seed: int
    max_n: int
    with_lp: bool
    seconds: float

    @property
    def failures(self) -> int:
        """How many instances failed."""
        return sum(not c.passed for c in self.checks)

    @property
    def passed(self) -> bool:
        """Every instance passed."""
        return self.failures == 0


def _check_one(
    index: int,
    inst: Instance,
    *,
    rtol: float,
    method: str,
    backend: str,
    threads: int | None,
    with_lp: bool,
    max_n: int,
) -> InstanceCheck:
    """Certify one game and compare its bounds with the LP."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NetHarmWarning)
        try:
            cert = certificate(inst.gains, inst.m, inst.b, losses=inst.losses, rtol=rtol,
                               method=method, backend=backend, threads=threads)
        except Exception as exc:  # a crash is a failure, reported and counted
            nan = math.nan
            return InstanceCheck(index, inst, nan, nan, nan, nan, (), f"{type(exc).__name__}: {exc}")
    notes: list[str] = []
    lp_value = math.nan
    if with_lp:
        try:
            lp_value = lp.lp_batch(inst.gains, inst.m, inst.b, losses=inst.losses,
                                   max_n=max(max_n, 2000)).value
        except RuntimeError as exc:  # HiGHS gave up: say so, count it
            notes.append(f"LP error: {exc}")
    if with_lp and not notes:
        losses = inst.losses if inst.losses is not None else default_w(inst.m, inst.n) * inst.gains
        a_max = float(np.max(inst.gains + losses))
        tol = LP_REL * abs(lp_value) + LP_ABS * a_max + 1e-30
        # The adversary is refined only until the gap is within rtol * scale.
        if not abs(cert.upper - lp_value) <= max(tol, rtol * cert.scale):
            notes.append("upper != LP")
        if not abs(cert.lower - lp_value) <= max(tol, rtol * cert.scale):
            notes.append("lower != LP")
    if not cert.optimal:
        notes.append("gap")
    return InstanceCheck(index, inst, lp_value, cert.lower, cert.upper, cert.rel_gap, tuple(notes))


def check_random_instances(
    instances: int = 50,
    *,
    kinds: Sequence[str] | None = None,
    seed: int = 0,
    max_n: int = 30,
    rtol: float = 1e-9,
    method: str = "auto",
    backend: str = "auto",
    threads: int | None = None,
    on_check: Callable[[InstanceCheck], None] | None = None,
) -> HarnessReport:
    """Certify ``rad.solve`` on random games and compare both bounds with the LP oracle.

    Parameters
    ----------
    instances : int, default 50
        How many games, ``>= 1``; the families are cycled in the order of ``kinds``.
    kinds : sequence of str, optional
        Families from :data:`INSTANCE_KINDS` (default: all).
    seed : int, default 0
        Seed of the games (``>= 0``): the same seed gives the same games.
    max_n : int, default 30
        Largest pool, ``>= 1`` (the LP's size guard is raised to it when above 2000).
    rtol : float, default 1e-9
        The certificate's tolerance (:attr:`rad.verify.Certificate.optimal`).
    method : {"auto", "saddle", "search"}
        How the certificate builds its adversary.
    backend : {"auto", "cpp", "numba", "numpy"}
        Kernels for the solver.
    threads : int, optional
        Threads for the solver and the certificate's passes.
    on_check : callable, optional
        Called with each :class:`InstanceCheck` as soon as it is done (to print a table).

    Returns
    -------
    HarnessReport
        The checks, and whether all passed.

    Raises
    ------
    ValueError
        On an unknown kind, ``instances < 1``, ``max_n < 1`` or ``seed < 0``.
    """
    kinds = INSTANCE_KINDS if kinds is None else (kinds,) if isinstance(kinds, str) else tuple(kinds)
    unknown = [k for k in kinds if k not in INSTANCE_KINDS]
    if unknown or not kinds:
        what = f"unknown kinds {unknown}" if unknown else "kinds names no family"
        raise ValueError(f"{what}; choose from {', '.join(INSTANCE_KINDS)}")
    for name, value, least in (("instances", instances, 1), ("max_n", max_n, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    with_lp = lp.SCIPY_AVAILABLE
    rng = np.random.default_rng(seed)
    checks = []
    t0 = time.perf_counter()
    for i in range(instances):
        inst = random_instance(rng, kinds[i % len(kinds)], max_n)
        check = _check_one(i, inst, rtol=rtol, method=method, backend=backend, threads=threads,
                           with_lp=with_lp, max_n=max_n)
        checks.append(check)
        if on_check is not None:
            on_check(check)
    return HarnessReport(tuple(checks), int(seed), int(max_n), with_lp, time.perf_counter() - t0)

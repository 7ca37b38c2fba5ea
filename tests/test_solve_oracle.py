"""The solver against independent references: the LP oracle (HiGHS), the adversary's
best response, and a literal Theorem 1 (docs/design.md §1).

The LP comparisons are limited by HiGHS's own accuracy (~1e-9 of the payoffs' scale); the
judge of tiny errors is the exact rational reference of :mod:`test_exact`, with tolerances
in the instance's own conditioning (also used here where caps bind)."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given

import rad
from conftest import BACKENDS
from exact import adversary_value as exact_value_of
from exact import exact_game, perturbation
from instances import instances
from naive import naive_theorem1
from rad.verify.game import adversary_value
from rad.verify.lp import lp_batch


def _solve(inst: dict, backend: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rad.NetHarmWarning)
        return rad.solve(inst["gains"], inst["m"], inst["b"], w=inst["w"], losses=inst["losses"], backend=backend)


def _scale(inst: dict) -> float:
    return max(1.0, float(np.sum(inst["gains"])) + float(np.sum(inst["l"])))


@pytest.mark.parametrize("backend", BACKENDS)
@given(inst=instances())
def test_value_equals_lp_and_best_response(backend: str, inst: dict) -> None:
    sol = _solve(inst, backend)
    lp = lp_batch(inst["gains"], inst["m"], inst["b"], losses=inst["l"])
    q = sol.probabilities()
    b = inst["b"]
    # feasibility: q in [0, 1], sum b
    assert q.shape == inst["gains"].shape and q.dtype == np.float64
    assert np.all(q >= 0) and np.all(q <= 1)
    assert abs(q.sum() - b) <= 1e-9 * max(1, b)
    assert np.all(np.isfinite(q))
    scale = _scale(inst)
    # the reported value is the LP optimum, and q achieves it against its worst case
    assert abs(sol.value - lp.value) <= 1e-9 * scale
    assert abs(adversary_value(q, inst["gains"], inst["m"], losses=inst["l"]) - sol.value) <= 1e-9 * scale
    assert sol.k_star == int(np.count_nonzero(q > 0))


@given(inst=instances(theorem1=True))
def test_single_draw_is_theorem1(inst: dict) -> None:
    """b = 1 with G_n >= m and a > 0: exactly Theorem 1's distribution and value."""
    sol = _solve({**inst, "b": 1}, "auto")
    p, value, _ = naive_theorem1(inst["gains"], inst["m"], losses=inst["l"])
    q = sol.probabilities()
    scale = _scale(inst)
    assert abs(sol.value - float(value)) <= 1e-9 * scale
    # With tied gains Theorem 1's argmax is not unique (rad keeps tie groups whole); with
    # a value within rounding of 0 (G_n ~ m) every k gives N(k) ~ 0 and any is optimal.
    distinct = np.unique(inst["gains"]).shape[0] == inst["gains"].shape[0]
    if distinct and abs(float(value)) > 1e-9 * scale:
        np.testing.assert_allclose(q, np.asarray(p, dtype=float), rtol=1e-9, atol=1e-12)


@given(inst=instances(theorem1=True, min_b=1))
def test_batch_is_b_times_pstar_when_no_cap_binds(inst: dict) -> None:
    p, value, _ = naive_theorem1(inst["gains"], inst["m"], losses=inst["l"])
    p = np.asarray(p, dtype=float)
    b = inst["b"]
    sol = _solve(inst, "auto")
    distinct = np.unique(inst["gains"]).shape[0] == inst["gains"].shape[0]
    distinct = distinct and abs(float(value)) > 1e-9 * _scale(inst)  # see above
    if distinct and b * p.max() <= 1 - 1e-12:
        assert not sol.capped
        np.testing.assert_allclose(sol.probabilities(), b * p, rtol=1e-9, atol=1e-12)
        assert abs(sol.value - b * float(value)) <= 1e-9 * _scale(inst)
    if b * p.max() > 1 + 1e-12:
        assert sol.value <= b * float(value) + 1e-9 * _scale(inst)
        if inst["gains"].shape[0] <= 10:  # caps bind: the exact batch optimum, to its own precision
            game = exact_game(inst["gains"], inst["m"], b, losses=inst["losses"], w=inst["w"])
            opt, _ = game.solve()
            tol = (game.n + 4) * perturbation(game) + Fraction(1, 10**300)
            assert abs(Fraction(sol.value) - opt) <= tol
            assert exact_value_of(game, sol.probabilities()) >= opt - tol


def test_negative_value_is_solved_and_warned() -> None:
    """Zero gains + huge m + a large w: the value is negative; exact optimum plus a warning."""
    g = np.array([0.0, 0.1, 0.5, 0.9, 0.9, 0.3])
    m, b, w = 5.0, 3, 2.0
    with pytest.warns(rad.NetHarmWarning, match="net harm"):
        sol = rad.solve(g, m, b, w=w)
    lp = lp_batch(g, m, b, losses=w * g)
    assert sol.value < 0
    assert abs(sol.value - lp.value) <= 1e-9
    with pytest.warns(rad.NetHarmWarning):
        idx = rad.select(g, m, b, w=w, rng=0)
    assert idx.shape == (3,) and len(set(idx.tolist())) == 3


def test_default_w_never_warns(rng: np.random.Generator) -> None:
    """With w = 1 - m/n and positive gains, b = 1 has a non-negative value (the paper)."""
    g = rng.random(500) + 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error", rad.NetHarmWarning)
        for m in [0.0, 10.0, 250.0, 499.0, 500.0]:
            assert rad.solve(g, m, 1).value >= -1e-12


#: Games whose dual search met supporting lines of equal slopes at both ends of its bracket
#: (a loss 1e16-1e300 times the others', m = 0, large b): the intersection divided by zero
#: (ZeroDivisionError on every backend); the bracket is now halved there.
PARALLEL_SLOPES = [
    (np.array([2.5e-308, 1e-310, 2.5e-308]), np.array([1e300, 1.0, 0.0]), 2),
    (np.repeat([0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 0.5, 0.5, 0.5, 1.0], [2, 1, 1, 18, 11, 24, 28, 28, 28, 77]),
     np.repeat([0.0, 0.3, 1.0, 0.0, 0.3, 1.0, 0.0, 0.3, 1.0, 1e17], [2, 1, 1, 18, 11, 24, 28, 28, 28, 77]), 214),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", range(len(PARALLEL_SLOPES)))
def test_a_dual_bracket_with_parallel_slopes_is_halved(backend: str, case: int) -> None:
    g, losses, b = PARALLEL_SLOPES[case]
    sol = rad.solve(g, 0.0, b, losses=losses, backend=backend)
    game = exact_game(g, 0.0, b, losses=losses)
    opt = game.solve()[0]
    # one ulp of the inputs, and the value's own resolution (subnormal in the first case)
    assert abs(Fraction(sol.value) - opt) <= perturbation(game) + 64 * Fraction(2) ** -1074
    idx = rad.select(g, 0.0, b, losses=losses, rng=0, backend=backend)
    assert idx.shape == (b,) and np.unique(idx).shape == (b,)


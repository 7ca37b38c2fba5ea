"""Tests of the LP oracle (``rad.verify.lp``) and the best-response references
(``rad.verify.game``) against independent facts: the paper's Theorem 1 in exact arithmetic,
exhaustive enumeration, weak duality, and closed forms at the ends of the ``m`` range.
"""

from __future__ import annotations

import itertools
import math
import os
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

from instances import instances  # noqa: E402
from naive import (  # noqa: E402
    naive_game_bruteforce,
    naive_theorem1,
    naive_value_bruteforce,
)
from rad.verify import lp as lp_module  # noqa: E402
from rad.verify.game import adversary_response, adversary_value, sampler_value  # noqa: E402
from rad.verify.lp import LPSolution, lp_batch, lp_single_draw  # noqa: E402

# The LP is solved to HiGHS tolerances (1e-10 on data scaled to O(1)); observed errors are
# ~1e-14 * max(a). The absolute term keeps values that are tiny differences of O(max a)
# quantities (m close to G_n) from demanding more than any floating-point LP can give.
REL = 1e-8
ABS = 1e-9


def _scale(inst: dict) -> float:
    a = inst["gains"] + inst["l"]
    top = float(a.max())
    return top if top > 0 else 1.0


def assert_close(actual: float, expected: float, scale: float) -> None:
    assert math.isclose(actual, expected, rel_tol=REL, abs_tol=ABS * scale), (
        f"{actual!r} != {expected!r} (diff {actual - expected:.3e}, scale {scale:.3e})"
    )


def solve(inst: dict, b: int | None = None) -> LPSolution:
    return lp_batch(
        inst["gains"], inst["m"], inst["b"] if b is None else b, losses=inst["losses"], w=inst["w"]
    )


# --------------------------------------------------------------------------------------
# (a) single draw == Theorem 1 (exact rational arithmetic), general losses included.


@settings(deadline=None, max_examples=200)
@given(instances(theorem1=True))
def test_single_draw_value_matches_theorem1(inst):
    _, value, _ = naive_theorem1(inst["gains"], inst["m"], losses=inst["l"])
    sol = lp_single_draw(inst["gains"], inst["m"], losses=inst["losses"], w=inst["w"])
    assert_close(sol.value, value, _scale(inst))


@settings(deadline=None, max_examples=100)
@given(instances(theorem1=True))
def test_theorem1_certificates(inst):
    # Paper's Claims 1 and 2: p* guarantees OPT against every adversary, and the adversary
    # c*_i = (OPT + l_i)/a_i on the top k*, 1 elsewhere, holds every single draw to OPT.
    g, lo, m = inst["gains"], inst["l"], inst["m"]
    p, value, k = naive_theorem1(g, m, losses=lo)
    assert math.isclose(math.fsum(p), 1.0, rel_tol=1e-12)
    assert np.count_nonzero(p) == k
    scale = _scale(inst)
    assert_close(adversary_value(p, g, m, losses=lo), value, scale)
    order = sorted(range(len(g)), key=lambda i: (-g[i], i))
    c = np.ones(len(g))
    top = order[:k]
    c[top] = (value + lo[top]) / (g[top] + lo[top])
    assert np.all(c >= -1e-12) and np.all(c <= 1 + 1e-12)
    assert math.isclose(math.fsum(c), len(g) - m, rel_tol=1e-9, abs_tol=1e-9)
    assert_close(sampler_value(c, g, 1, losses=lo), value, scale)


# --------------------------------------------------------------------------------------
# (b) the LP's q is feasible and guarantees the LP value; (e) its dual c is an
# equilibrium: feasible and holding every sampler to the LP value. By weak duality,
# adversary_value(q) <= OPT <= sampler_value(c) for any feasible q, c, so (b) and (e)
# together certify the LP value without trusting the LP.


@settings(deadline=None, max_examples=200)
@given(instances())
def test_lp_probabilities_attain_value(inst):
    g, lo, m, b = inst["gains"], inst["l"], inst["m"], inst["b"]
    sol = solve(inst)
    q = sol.probabilities
    assert q.dtype == np.float64 and q.shape == g.shape
    assert np.all(q >= 0.0) and np.all(q <= 1.0)
    assert math.isclose(math.fsum(q), b, abs_tol=1e-8)
    assert_close(adversary_value(q, g, m, losses=lo), sol.value, _scale(inst))
    assert "Optimal" in sol.status


@settings(deadline=None, max_examples=200)
@given(instances())
def test_lp_adversary_is_equilibrium(inst):
    g, lo, m, b = inst["gains"], inst["l"], inst["m"], inst["b"]
    sol = solve(inst)
    c = sol.adversary
    assert c.dtype == np.float64 and c.shape == g.shape
    assert np.all(c >= 0.0) and np.all(c <= 1.0)
    assert math.isclose(math.fsum(c), len(g) - m, abs_tol=1e-8)
    assert_close(sampler_value(c, g, b, losses=lo), sol.value, _scale(inst))


# --------------------------------------------------------------------------------------
# The dualised formulation against the game as a finite matrix game (tiny n).


@settings(deadline=None, max_examples=120)
@given(instances(max_n=6))
def test_lp_formulation_matches_matrix_game(inst):
    expected = naive_game_bruteforce(inst["gains"], inst["m"], inst["b"], inst["l"])
    assert_close(solve(inst).value, expected, _scale(inst))


# --------------------------------------------------------------------------------------
# Closed forms at the ends of the m range.


@settings(deadline=None, max_examples=60)
@given(instances(), st.sampled_from(["none", "all"]))
def test_extreme_m_closed_forms(inst, which):
    g, b, n = inst["gains"], inst["b"], inst["gains"].shape[0]
    m = 0.0 if which == "none" else float(n)
    sol = lp_batch(g, m, b, losses=inst["losses"], w=inst["w"])
    if inst["losses"] is not None:
        lo = inst["losses"]
    else:  # RAD losses; the default w = 1 - m/n is 1 at m = 0 and 0 at m = n
        lo = (1.0 - m / n if inst["w"] is None else inst["w"]) * g
    if which == "none":  # no mistakes: take the b largest gains
        expected = math.fsum(sorted(g.tolist(), reverse=True)[:b])
    else:  # every label is wrong: pay the b smallest losses
        expected = -math.fsum(sorted(lo.tolist())[:b])
    top = float((g + lo).max())
    assert_close(sol.value, expected, top if top > 0 else 1.0)


# --------------------------------------------------------------------------------------
# (c) adversary_value / adversary_response against enumeration of the adversary's vertices.

_q_unit = st.floats(0.0, 1.0)


@st.composite
def unit_vectors(draw, n: int) -> np.ndarray:
    """A vector in [0, 1]^n: Hypothesis floats (ties, 0, 1) or seeded uniforms."""
    if draw(st.booleans()):
        return np.array(draw(st.lists(_q_unit, min_size=n, max_size=n)))
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random(n)


@settings(deadline=None, max_examples=150)
@given(instances(max_n=7, m_kind="integer"), st.data())
def test_adversary_value_matches_bruteforce_integer_m(inst, data):
    g, lo, m = inst["gains"], inst["l"], inst["m"]
    q = data.draw(unit_vectors(len(g)), label="q")
    expected = naive_value_bruteforce(q, g, m, lo)
    assert_close(adversary_value(q, g, m, losses=lo), expected, _scale(inst))


@settings(deadline=None, max_examples=100)
@given(instances(max_n=7, m_kind="fractional"), st.data())
def test_adversary_value_matches_bruteforce_fractional_m(inst, data):
    g, lo, m = inst["gains"], inst["l"], inst["m"]
    q = data.draw(unit_vectors(len(g)), label="q")
    expected = naive_value_bruteforce(q, g, m, lo)
    assert_close(adversary_value(q, g, m, losses=lo), expected, _scale(inst))


@settings(deadline=None, max_examples=100)
@given(instances(), st.data())
def test_adversary_response_attains_value(inst, data):
    g, lo, m = inst["gains"], inst["l"], inst["m"]
    q = data.draw(unit_vectors(len(g)), label="q")
    u = adversary_response(q, g, m, losses=lo)
    assert np.all(u >= 0.0) and np.all(u <= 1.0)
    assert math.isclose(math.fsum(u), m, rel_tol=1e-12, abs_tol=1e-12)
    payoff = math.fsum(q * g) - math.fsum(u * q * (g + lo))
    assert_close(payoff, adversary_value(q, g, m, losses=lo), _scale(inst))


@settings(deadline=None, max_examples=100)
@given(instances(max_n=7), st.data())
def test_sampler_value_matches_bruteforce(inst, data):
    g, lo, b = inst["gains"], inst["l"], inst["b"]
    c = data.draw(unit_vectors(len(g)), label="c")
    payoff = c * (g + lo) - lo
    expected = max(math.fsum(payoff[list(s)]) for s in itertools.combinations(range(len(g)), b))
    assert_close(sampler_value(c, g, b, losses=lo), expected, _scale(inst))


def test_adversary_value_hand_example():
    # a = (1, 3, 3), q a = (0.5, 3, 1.5); m = 1.5 removes 3 + 0.5 * 1.5 = 3.75 from
    # sum q g = 0.5 + 1 + 1.5 = 3.
    q = np.array([0.5, 1.0, 0.5])
    g = np.array([1.0, 1.0, 3.0])
    lo = np.array([0.0, 2.0, 0.0])
    assert adversary_value(q, g, 1.5, losses=lo) == pytest.approx(-0.75, abs=1e-15)
    np.testing.assert_array_equal(adversary_response(q, g, 1.5, losses=lo), [0.0, 1.0, 0.5])
    # c a - l = (1, -0.5, 0): the best two sum to 1.
    assert sampler_value(np.array([1.0, 0.5, 0.0]), g, 2, losses=lo) == pytest.approx(1.0)


# --------------------------------------------------------------------------------------
# (d) no cap binds: the batch optimum is b times the single-draw one.


@settings(deadline=None, max_examples=120)
@given(instances(theorem1=True), st.data())
def test_batch_is_b_times_single_when_uncapped(inst, data):
    p, value, _ = naive_theorem1(inst["gains"], inst["m"], losses=inst["l"])
    n = len(p)
    b_max = min(n, math.floor(1.0 / float(p.max())))
    assume(b_max >= 2)
    b = data.draw(st.integers(2, b_max), label="b")
    sol = solve(inst, b=b)
    assert_close(sol.value, b * value, b * _scale(inst))


# A pool on which HiGHS's dual simplex at 1e-10 stops with "Status 0: Not Set" (scipy
# 1.17); the oracle must still return the optimum (bracketed by weak duality).
_HARD_GAINS = [
    "0x1.e92d0d675ef18p-16", "0x1.0e0be81945893p-7", "0x1.0e618ef24d442p-13",
    "0x1.ea990f54dad15p-18", "0x1.7c07bfb26df6ap+0", "0x1.4000000000000p+3",
    "0x1.0a5cfa0d17eecp+13", "0x1.0000000000000p+0", "0x1.0000000000000p+0",
    "0x1.0000000000002p+0", "0x1.0000000000000p+0", "0x1.0000000000000p+0",
    "0x1.0000000000000p+0", "0x1.674b4dfa7f9d5p-16", "0x1.0000000000000p+0",
    "0x1.0000000000000p+0", "0x1.e6d1fb9f90596p+14", "0x1.218a441f715bbp+14",
    "0x1.0000000000000p+0", "0x1.0000000000000p+0", "0x1.50f426302efc4p-16",
    "0x1.0000000000000p+0", "0x1.0000000000000p+0",
]
_HARD_LOSSES = [
    "0x1.2029af84508a6p+14", "0x1.2d97237a0cd22p+14", "0x1.a18ad342b1366p+11", "0x0.0p+0",
    "0x0.0p+0", "0x0.0p+0", "0x1.5e8d796e17c1ep+14", "0x0.0p+0", "0x1.b4142e8324dc1p+14",
    "0x1.1b2915321ae62p+14", "0x1.1ff1190ceec5cp+11", "0x1.09fdaeb4521f9p+14",
    "0x1.2eca5901a49bbp+14", "0x1.0236005bd1469p+14", "0x1.334a77b50ec86p+14",
    "0x1.5f5cd9516785ep+11", "0x1.b5ddf4b61c7d0p+11", "0x1.33f3681543310p+14",
    "0x1.8cb15982c9f5dp+12", "0x1.bffd199181906p+14", "0x1.b48526a010e27p+14",
    "0x1.228d1fa0c8577p+14", "0x1.b3afe06109cb4p+14",
]


def test_numerically_hard_pool_is_solved():
    g = np.array([float.fromhex(x) for x in _HARD_GAINS])
    lo = np.array([float.fromhex(x) for x in _HARD_LOSSES])
    sol = lp_batch(g, 12.0, 20, losses=lo)
    scale = float((g + lo).max())
    assert_close(adversary_value(sol.probabilities, g, 12.0, losses=lo), sol.value, scale)
    assert_close(sampler_value(sol.adversary, g, 20, losses=lo), sol.value, scale)


def test_tiny_a_next_to_huge_a_is_not_dropped():
    # HiGHS treats matrix entries below 1e-9 as zero; scaling the data by max(a) would
    # turn a = 1e-4 next to a = 1e5 into such an entry and value m = n at 1e-4, not 0.
    g, lo = np.array([1e5, 1e-4]), np.zeros(2)
    assert abs(lp_single_draw(g, 2.0, losses=lo).value) <= 1e-9
    # Theorem 1 by hand: N(1) = (1 - 1.5) * 1e5 < 0, N(2) = (2 - 1.5) / (1e-5 + 1e4).
    expected = 0.5 / (1e-5 + 1e4)
    assert lp_single_draw(g, 1.5, losses=lo).value == pytest.approx(expected, rel=1e-8)


def test_m_equal_n_with_huge_gain_does_not_report_unbounded():
    # At m = n the LP has a zero-cost ray (nu -> -inf); without the box on nu the dual
    # simplex reports this pool "unbounded" (and only the interior-point fallback saves
    # it). Every label is wrong: value = -(smallest loss) = 0.
    g, lo = np.ones(12), np.zeros(12)
    g[6], lo[6] = 1e6, 1.0
    sol = lp_batch(g, 12.0, 1, losses=lo)
    assert "fallback" not in sol.status
    assert abs(sol.value) <= 1e-9 * 1e6
    assert sol.probabilities[6] == 0.0


def test_equilibrium_adversary_is_accurate_on_huge_points():
    # Ones with two gains of 1e6: the equilibrium c is 7.3e-7 on the huge points, so an
    # error of 5e-9 in c (what HiGHS's multipliers of the sampler's LP gave) is a 5e-3
    # gap in the certificate. OPT = N(35) = (35 - 11) / (33 + 2e-6) by Theorem 1.
    g, lo = np.ones(36), np.zeros(36)
    g[[6, 29]], g[30] = 1e6, 1e-3
    sol = lp_batch(g, 11.0, 1, losses=lo)
    expected = 24.0 / (33.0 + 2e-6)
    assert_close(sol.value, expected, 1e6)
    assert_close(sampler_value(sol.adversary, g, 1, losses=lo), expected, 1e6)
    np.testing.assert_allclose(sol.adversary[[6, 29]], expected / 1e6, rtol=1e-6)


def test_two_point_hand_example():
    # g = (1, 1), l = 0, m = 1: G_2 = 2, H_2 = 2, OPT = (2 - 1)/2 = 1/2 at p = (1/2, 1/2).
    sol = lp_single_draw(np.array([1.0, 1.0]), 1.0, losses=np.zeros(2))
    assert sol.value == pytest.approx(0.5, abs=1e-12)
    np.testing.assert_allclose(sol.probabilities, [0.5, 0.5], atol=1e-12)
    # RAD losses, default w = 1 - m/n = 1/2: N(2) = (2 - 1.5 * 1)/2 = 1/4 > N(1) = -1/2.
    sol = lp_single_draw(np.array([1.0, 1.0]), 1.0)
    assert sol.value == pytest.approx(0.25, abs=1e-12)


# --------------------------------------------------------------------------------------
# (f) size guard, argument handling, failure reporting.


def test_size_guard():
    g = np.ones(11)
    with pytest.raises(ValueError, match=r"rad\.verify\.certificate"):
        lp_batch(g, 1.0, 2, max_n=10)
    with pytest.raises(ValueError, match=r"O\(n\) variables"):
        lp_single_draw(g, 1.0, max_n=10)
    assert lp_batch(g, 1.0, 2, max_n=11).status  # n == max_n is accepted


def test_losses_and_w_are_exclusive():
    with pytest.raises(ValueError, match="either w .* or losses, not both"):
        lp_batch(np.ones(3), 1.0, 1, losses=np.ones(3), w=0.5)


def test_explicit_w_equals_explicit_losses():
    g = np.array([3.0, 1.0, 0.5, 0.25])
    a = lp_batch(g, 1.5, 2, w=0.8)
    b = lp_batch(g, 1.5, 2, losses=0.8 * g)
    assert a.value == pytest.approx(b.value, rel=1e-12, abs=1e-14)


@pytest.mark.parametrize(
    ("args", "kwargs", "exc"),
    [
        ((np.ones((2, 2)), 1.0, 1), {}, ValueError),
        ((np.array([], dtype=float), 0.0, 0), {}, ValueError),
        ((np.array([1.0, np.nan]), 1.0, 1), {}, ValueError),
        ((np.array([1.0, -1.0]), 1.0, 1), {}, ValueError),
        ((np.ones(3), 3.5, 1), {}, ValueError),
        ((np.ones(3), -0.1, 1), {}, ValueError),
        ((np.ones(3), 1.0, 4), {}, ValueError),
        ((np.ones(3), 1.0, 1.5), {}, TypeError),
        ((np.ones(3), 1.0, 1), {"losses": np.ones(2)}, ValueError),
        ((np.ones(3), 1.0, 1), {"losses": -np.ones(3)}, ValueError),
        ((np.ones(3), 1.0, 1), {"w": -0.5}, ValueError),
        ((np.array([1e-10, 1e10]), 1.0, 1), {"losses": np.zeros(2)}, ValueError),
    ],
)
def test_lp_rejects_bad_input(args, kwargs, exc):
    with pytest.raises(exc):
        lp_batch(*args, **kwargs)


@pytest.mark.parametrize(
    "call",
    [
        lambda: adversary_value(np.ones(3), np.ones(2), 1.0, losses=np.ones(2)),
        lambda: adversary_value(np.ones(2), np.ones(2), 1.0, losses=np.ones(3)),
        lambda: adversary_value(np.ones(2), np.ones(2), 2.5, losses=np.ones(2)),
        lambda: adversary_response(np.ones((2, 1)), np.ones(2), 1.0, losses=np.ones(2)),
        lambda: sampler_value(np.ones(2), np.ones(2), 3, losses=np.ones(2)),
        lambda: sampler_value(np.ones(2), np.ones(2), 1, losses=np.array([1.0, np.inf])),
    ],
)
def test_game_functions_reject_bad_shapes(call):
    with pytest.raises(ValueError):
        call()


def test_failed_lp_raises_runtime_error(monkeypatch):
    from scipy.optimize import OptimizeResult

    def failing(*args, **kwargs):
        return OptimizeResult(status=2, x=None, message="The problem is infeasible. (HiGHS)")

    monkeypatch.setattr(lp_module, "linprog", failing)
    with pytest.raises(RuntimeError, match="infeasible"):
        lp_batch(np.ones(3), 1.0, 1)

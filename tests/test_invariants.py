"""Invariants of the optimal probabilities (docs/design.md §1)."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

import rad
from exact import adversary_value, exact_game, perturbation
from instances import instances


def _q(inst: dict, gains=None, losses=None) -> tuple[np.ndarray, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rad.NetHarmWarning)
        sol = rad.solve(
            inst["gains"] if gains is None else gains,
            inst["m"],
            inst["b"],
            w=inst["w"],
            losses=inst["losses"] if losses is None else losses,
        )
    return sol.probabilities(), sol.value


@given(inst=instances(), seed=st.integers(0, 2**32 - 1))
def test_permutation_equivariance(inst: dict, seed: int) -> None:
    perm = np.random.default_rng(seed).permutation(inst["gains"].shape[0])
    q, v = _q(inst)
    losses = None if inst["losses"] is None else inst["losses"][perm]
    q_perm, v_perm = _q(inst, gains=inst["gains"][perm], losses=losses)
    np.testing.assert_allclose(q_perm, q[perm], rtol=1e-9, atol=1e-9)
    assert abs(v - v_perm) <= 1e-9 * max(1.0, abs(v))


@given(inst=instances(), c=st.sampled_from([1e-3, 0.5, 3.0, 1e4]))
def test_scale_invariance(inst: dict, c: float) -> None:
    """Scaling gains and losses by c leaves q unchanged and scales the value by c."""
    # (in exact arithmetic; a loss that underflows when scaled is a different game)
    small = np.concatenate([inst["gains"], inst["l"]]) * min(c, 1.0)
    assume(bool(np.all((small == 0) | (np.abs(small) > 1e-290))))
    # No gain anywhere and m ~ 0: every q is optimal to rounding, so q is not unique.
    assume(not (float(np.max(inst["gains"])) == 0.0 and inst["m"] < 1e-9))
    q, v = _q(inst)
    losses = None if inst["losses"] is None else inst["losses"] * c
    q_c, v_c = _q(inst, gains=inst["gains"] * c, losses=losses)
    if abs(v_c - c * v) > 1e-9 * max(1.0, abs(c * v)):
        # A value that cancels (terms of size b max a, a result far smaller) is exact only
        # to its conditioning (docs/design.md §1, "Exactness policy"): each value against
        # its own game's exact optimum, to what one ulp of the inputs moves it.
        for scale, value in ((1.0, v), (c, v_c)):
            game = exact_game(inst["gains"] * scale, inst["m"], inst["b"],
                              losses=None if inst["losses"] is None else inst["losses"] * scale, w=inst["w"])
            opt, _ = game.solve()
            tol = (game.n + 4) * perturbation(game) + Fraction(1, 10**300)
            assert abs(Fraction(value) - opt) <= tol, (c, scale, value, float(opt))
    if not np.allclose(q_c, q, rtol=1e-9, atol=1e-9):
        # The optimal q need not be unique: an optimum within rounding of 0 (G close to m,
        # zero losses) is reached by q on the zero-loss points and by Theorem 1's q. Then
        # both must be optimal for the unscaled game, against the exact reference.
        game = exact_game(inst["gains"], inst["m"], inst["b"], losses=inst["losses"], w=inst["w"])
        opt, _ = game.solve()
        tol = (game.n + 4) * perturbation(game) + Fraction(1, 10**300)
        for got in (q, q_c):
            assert adversary_value(game, got) >= opt - tol, (c, q, q_c)


@given(inst=instances(theorem1=True, losses=False, gain_kinds=("uniform", "ties", "all_equal", "one_huge", "lognormal", "pareto")))
def test_N_is_unimodal_and_kstar_is_its_argmax(inst: dict) -> None:
    """N(k) = (G_k - m)/H_k along descending gains rises then falls; k* maximises it."""
    perm = np.argsort(-inst["gains"], kind="stable")
    g = inst["gains"][perm]
    a = g + inst["l"][perm]
    n_k = (np.cumsum(g / a) - inst["m"]) / np.cumsum(1.0 / a)
    d = np.diff(n_k)
    tol = 1e-9 * max(1.0, float(np.max(np.abs(n_k))))
    peak = int(np.argmax(n_k))
    assert np.all(d[:peak] >= -tol) and np.all(d[peak:] <= tol)
    sol = rad.solve(inst["gains"], inst["m"], 1, w=inst["w"])
    assert abs(sol.value - n_k.max()) <= tol

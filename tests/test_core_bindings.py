"""Direct calls into the compiled module cannot read or write out of bounds.

``rad._core`` is private, but a mistaken call must raise ``ValueError`` (the bindings
throw ``std::invalid_argument``), never crash the interpreter.
"""

from __future__ import annotations

import numpy as np
import pytest

_core = pytest.importorskip("rad._core")

G = np.linspace(0.1, 1.0, 10)
PARAMS = (0, 1.0, 0.5, 1.0, float("inf"), 0.0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: _core.support_sums(G, np.ones(3), 0.0, 0.5, 1), "losses has 3 entries, gains has 10"),
        (lambda: _core.threshold_search(G, np.ones(11), 0.0, 1.0, 1), "losses has 11 entries"),
        (lambda: _core.materialize(G, np.ones(2), 0.0, PARAMS, 1), "losses has 2 entries"),
        (lambda: _core.theorem1_scan(G, None, 0.5, np.arange(5), 1.0, 1), "perm has 5 entries"),
        (lambda: _core.theorem1_scan(G, None, 0.5, np.arange(10) + 5, 1.0, 1), "outside"),
        (lambda: _core.depround_q(np.full(10, 0.5), 50, 1, 1), r"b must be in \[0, 10\]"),
        (lambda: _core.depround_params(G, None, 0.5, PARAMS, -1, 1, 1), r"b must be in \[0, 10\]"),
        (lambda: _core.first_invalid(G, 0), "threads must be >= 1"),
        (lambda: _core.argsort(G, True, -3), "threads must be >= 1"),
        (
            lambda: _core.capped_eval(G, G, np.array([3, 2, 10]), G, G, np.array([10]), 1.0, 2.0, 1.0, 1),
            "ends_g must increase",
        ),
        (
            lambda: _core.capped_eval(G, G, np.array([10]), G, G, np.array([4, 9]), 1.0, 2.0, 1.0, 1),
            "ends_l must end at n",
        ),
        (
            lambda: _core.capped_eval(G, G[:5], np.array([10]), G, G, np.array([10]), 1.0, 2.0, 1.0, 1),
            "differ in length",
        ),
    ],
)
def test_bad_direct_calls_raise_value_error(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_huge_thread_counts_are_clamped_not_fatal() -> None:
    assert _core.first_invalid(G, 100_000) == -1
    perm = _core.argsort(G, True, 1 << 20)
    np.testing.assert_array_equal(perm, np.arange(9, -1, -1))

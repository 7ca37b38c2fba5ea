"""One validated instance of the batch game, resolved once and shared by every caller.

:func:`resolve_game` turns the public arguments (``gains, m, b, w, losses, backend,
threads, method``) into a :class:`Game`: validated, normalised, with the RAD default
``w = 1 - m/n`` applied, the backend loaded and the thread count decided. ``rad.solve``,
``rad.select``, ``rad.verify.certificate``, ``rad.dask`` and the selectors all start here,
so every default and every check lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rad._backends import get_backend
from rad._backends.contract import Kernels
from rad._backends.threads import resolve_threads
from rad._solve.device import host_array_error, is_device_array, resolve_device_game
from rad._solve.validation import (
    as_float_vector,
    check_budget,
    check_losses_or_w,
    check_method,
    check_mistakes,
    check_values,
)

__all__ = ["Game", "default_w", "resolve_game"]


def default_w(m: float, n: int) -> float:
    """The paper's default loss weight ``w = 1 - m/n`` (``docs/design.md`` §1).

    With strictly positive gains it keeps ``G_n >= m``, so the value is non-negative.
    """
    return 1.0 - m / n


@dataclass(frozen=True)
class Game:
    """A validated game and how to solve it.

    Attributes
    ----------
    gains : numpy.ndarray
        float32/float64, one-dimensional, C-contiguous (the caller's array when it
        already was one: no copy).
    losses : numpy.ndarray or None
        float64 general losses, or None for the RAD losses ``w * gains``.
    w : float
        The RAD loss weight; ``nan`` with general losses.
    m : float
        The teacher's mistakes, in ``[0, n]``.
    b : int
        The budget, in ``[0, n]``.
    backend : Kernels
        The kernel module (:mod:`rad._backends`).
    threads : int
        Threads for the kernels (:mod:`rad._backends.threads`).
    method : {"auto", "sortfree", "sorted"}
        How Theorem 1's support is found.
    values_checked : bool
        False when the gains' values (NaN, inf, negative) are left to the first
        sort-free pass, which checks them while it reads them.
    """

    gains: np.ndarray
    losses: np.ndarray | None
    w: float
    m: float
    b: int
    backend: Kernels
    threads: int
    method: str = "auto"
    values_checked: bool = True

    @property
    def n(self) -> int:
        """The pool size."""
        return int(self.gains.shape[0])

    @property
    def kernel_w(self) -> float:
        """The ``w`` the kernels take: ignored (0) when ``losses`` is given."""
        return 0.0 if self.losses is not None else self.w

    def with_values_checked(self) -> Game:
        """The same game, its gains' values checked now if they were left to the first pass."""
        if self.values_checked:
            return self
        check_values(self.gains, "gains", lambda x: self.backend.first_invalid(x, self.threads))
        return replace(self, values_checked=True)

    @property
    def sortfree(self) -> bool:
        """Whether Theorem 1's support is found by the sort-free radix select."""
        return self.method != "sorted" and self.backend.SORTFREE


def resolve_game(
    gains: object,
    m: object,
    b: object,
    *,
    w: object = None,
    losses: object = None,
    backend: str = "auto",
    threads: object = None,
    method: str = "auto",
) -> Game:
    """Validate every argument before any kernel runs and return the :class:`Game`.

    Raises
    ------
    TypeError, ValueError
        With a message naming the argument (and, for values, the first bad index).
    """
    method = check_method(method)
    if is_device_array(gains):  # CuPy, PyTorch, JAX, numba on a GPU: solved there (rad._solve.device)
        return resolve_device_game(
            gains, m, b, w=w, losses=losses, backend=backend, threads=threads, method=method
        )
    kernels = get_backend(backend)
    if kernels.name == "cuda":
        raise host_array_error()
    gain_array = as_float_vector(gains, "gains")
    n = gain_array.shape[0]
    if n == 0:
        raise ValueError("gains is empty: the pool must have at least one point")
    mistakes = check_mistakes(m, n)
    budget = check_budget(b, n)
    nthreads = resolve_threads(threads, n)
    loss_array, weight = check_losses_or_w(losses, w, gain_array, lambda x: kernels.first_invalid(x, nthreads))
    if loss_array is None and w is None:
        weight = default_w(mistakes, n)
    game = Game(gain_array, loss_array, weight, mistakes, budget, kernels, nthreads, method, values_checked=False)
    # The sort-free search reads every gain in its first pass and reports a bad value
    # itself (same error, index included); every other path checks here, before it runs.
    if game.sortfree and 0 < budget < n:
        return game
    return game.with_values_checked()

"""The thread policy: how many threads a call runs on (one place for every backend).

Results never depend on the thread count (canonical sums, per-block random streams), so
this is purely a speed decision:

* ``threads=None``: ``RAD_NUM_THREADS`` when set, else all cores for pools of
  :data:`PARALLEL_MIN_N` points or more and one thread below (a parallel region costs
  more than it saves on small pools, and much more when another process holds a core);
* an explicit count is validated, then clamped to the cores this process may use and to
  one thread per block of :data:`rad._backends.canonical.BLOCK` points (more threads
  than blocks have nothing to do; thousands of OpenMP threads exhaust the process).
"""

from __future__ import annotations

import numbers
import os

import numpy as np

from rad._backends.canonical import BLOCK

__all__ = ["PARALLEL_MIN_N", "available_cores", "default_threads", "resolve_threads"]

#: Below this many points ``threads=None`` means one thread (unless ``RAD_NUM_THREADS``).
PARALLEL_MIN_N = 1 << 22


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _env_threads() -> int | None:
    env = os.environ.get("RAD_NUM_THREADS", "").strip()
    if not env:
        return None
    try:
        value = int(env)
    except ValueError:
        raise ValueError(f"RAD_NUM_THREADS must be a positive integer, got {env!r}") from None
    if value < 1:
        raise ValueError(f"RAD_NUM_THREADS must be a positive integer, got {env!r}")
    return value


def default_threads() -> int:
    """Threads for a large pool when ``threads=None``: ``RAD_NUM_THREADS`` or all cores."""
    env = _env_threads()
    return min(env, available_cores()) if env is not None else available_cores()


def resolve_threads(threads: object, n: int) -> int:
    """The thread count for a call on ``n`` points (see the module docstring).

    Raises
    ------
    ValueError
        ``threads`` is not a positive integer or None, or ``RAD_NUM_THREADS`` is malformed.
    """
    if threads is None:
        env = _env_threads()
        wanted = env if env is not None else (available_cores() if n >= PARALLEL_MIN_N else 1)
    elif isinstance(threads, (bool, np.bool_)) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    else:
        wanted = int(threads)
    blocks = max(1, -(-int(n) // BLOCK))
    return max(1, min(wanted, available_cores(), blocks))

"""The thread policy: how many threads a call runs on (one place for every backend).

Results never depend on the thread count (canonical sums, per-block random streams), so
this is purely a speed decision:

* ``threads=None``: ``RAD_NUM_THREADS`` when set, else all cores for pools of
  :data:`PARALLEL_MIN_N` points or more and one thread below (a parallel region costs
  more than it saves on small pools, and much more when another process holds a core);
* an explicit count is validated, then clamped to the cores this process may use and to
  one thread per block of :data:`rad._backends.canonical.BLOCK` points (more threads
  than blocks have nothing to do; thousands of OpenMP threads exhaust the process);
* in a process forked (``os.fork``, multiprocessing's default ``fork`` start method on
  Linux) from one that had already run rad on several threads, every call runs on one
  thread: GNU OpenMP's thread pool does not survive ``fork()``, and a team of threads in
  the child waits forever. Numba's OpenMP layer goes further and ends such a child at its
  first parallel call, so the Numba backend is refused there (:func:`numba_fork_problem`).
"""

from __future__ import annotations

import numbers
import os
import sys

import numpy as np

from rad._backends.canonical import BLOCK

__all__ = ["PARALLEL_MIN_N", "available_cores", "default_threads", "numba_fork_problem", "resolve_threads"]

#: Below this many points ``threads=None`` means one thread (unless ``RAD_NUM_THREADS``).
PARALLEL_MIN_N = 1 << 22


# Fork safety (see the module docstring): whether this process has asked for a team of
# threads, and whether it was forked from a process that had.
_threads_started = False
_forked_after_threads = False
_numba_omp_in_parent = False


def _numba_omp_started() -> bool:
    """Whether Numba's OpenMP threading layer has started in this process (never imports Numba)."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is None or not getattr(parallel, "_is_initialized", False):
        return False
    try:
        return bool(parallel.threading_layer() == "omp")
    except Exception:  # noqa: BLE001 - an internal API: when in doubt, not started
        return False


def _after_fork_in_child() -> None:
    global _forked_after_threads, _numba_omp_in_parent
    _forked_after_threads = _forked_after_threads or _threads_started
    _numba_omp_in_parent = _numba_omp_in_parent or _numba_omp_started()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def numba_fork_problem() -> str | None:
    """Why the Numba backend cannot run in this process, or None when it can.

    Numba's OpenMP layer terminates a forked child at its first parallel call when the
    parent had started it (``fork()`` is unsafe with GNU OpenMP).
    """
    if not _numba_omp_in_parent:
        return None
    return ("this process was forked from one that had started Numba's OpenMP threads, and Numba "
            "ends such a process at its first parallel call (GNU OpenMP does not survive fork()); "
            "start worker processes with multiprocessing's 'spawn' or 'forkserver' method, or use "
            "backend='cpp' or 'numpy' here")


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
    if _forked_after_threads:  # GNU OpenMP's pool did not survive fork(): one thread
        return 1
    count = max(1, min(wanted, available_cores(), blocks))
    if count > 1:
        global _threads_started
        _threads_started = True
    return count

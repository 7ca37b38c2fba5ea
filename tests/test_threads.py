"""The thread policy (rad._backends.threads): huge, absurd and environment-given thread
counts are validated and clamped before any kernel runs; results never depend on them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rad
from conftest import BACKENDS
from rad._backends.canonical import BLOCK
from rad._backends.threads import available_cores, resolve_threads


@pytest.mark.parametrize("threads", [1, 2, 16, 256, 20_000, 10**5, 2**31 - 1])
def test_threads_beyond_the_limit_are_clamped(threads: int) -> None:
    for n in (1, 1000, BLOCK, 3 * BLOCK + 1, 10**9):
        t = resolve_threads(threads, n)
        assert 1 <= t <= min(threads, available_cores(), max(1, -(-n // BLOCK)))


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_thread_counts_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="threads"):
        resolve_threads(bad, 100)


def test_environment_is_honoured_and_clamped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAD_NUM_THREADS", "100000")
    assert resolve_threads(None, 10**9) == available_cores()
    assert resolve_threads(None, 10) == 1  # one block
    monkeypatch.setenv("RAD_NUM_THREADS", "1")
    assert resolve_threads(None, 10**9) == 1
    monkeypatch.setenv("RAD_NUM_THREADS", "0")
    with pytest.raises(ValueError, match="RAD_NUM_THREADS"):
        resolve_threads(None, 10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_thread_counts_run_and_agree(backend: str) -> None:
    """threads=10**5 used to segfault the C++ backend and 20000 to kill the process in
    libgomp; now they are clamped and give the same indices as one thread."""
    g = np.random.default_rng(0).random(3 * BLOCK + 17).astype(np.float32)
    ref = rad.select(g, 0.3 * g.shape[0], 50, rng=1, backend=backend, threads=1)
    for t in (256, 20_000, 10**5):
        np.testing.assert_array_equal(rad.select(g, 0.3 * g.shape[0], 50, rng=1, backend=backend, threads=t), ref)


def test_small_pool_with_many_threads_stays_small() -> None:
    """threads=256 on n = 1000 took 550 MB; the clamp makes it one thread (a child
    process, so the peak RSS is this call's own)."""
    code = textwrap.dedent(
        """
        import resource, numpy as np, rad
        g = np.random.default_rng(0).random(1000)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for backend in ("cpp", "numba", "numpy"):
            if rad.backends()[backend]["available"]:
                rad.select(g, 300.0, 10, rng=0, backend=backend, threads=256)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print((after - before) // 1024)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    grew_mb = int(out.stdout.strip().splitlines()[-1])
    assert grew_mb < 100, grew_mb


def test_core_bindings_clamp_threads() -> None:
    core = pytest.importorskip("rad._core")
    g = np.random.default_rng(0).random(1000)
    for t in (10**5, 2**31 - 1):
        assert core.first_invalid(g, t) == -1
        assert core.stream_sum(g, t) == pytest.approx(float(np.sum(g)))
    with pytest.raises(ValueError, match="threads"):
        core.first_invalid(g, 0)


_FORK_CHILD = textwrap.dedent(
    """
    import multiprocessing as mp, sys
    import numpy as np, rad
    backend, n = sys.argv[1], int(sys.argv[2])
    g = np.random.default_rng(0).random(n, dtype=np.float32)
    parent = rad.select(g, 0.3 * n, 100, rng=0, backend=backend, threads=2)

    def child(_):
        try:
            return rad.select(g, 0.3 * n, 100, rng=0, backend=backend, threads=2), None
        except Exception as exc:  # returned, so that the parent can print it
            return None, f"{type(exc).__name__}: {exc}"

    with mp.get_context("fork").Pool(1) as pool:
        got, err = pool.apply(child, (0,))
        auto = pool.apply(rad.backends)["auto"]
    print("same" if got is not None and np.array_equal(got, parent) else f"error {err}")
    print("auto", auto)
    """
)


def _run_forked(backend: str, n: int) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _FORK_CHILD, backend, str(n)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()


@pytest.mark.skipif("cpp" not in BACKENDS or sys.platform != "linux", reason="needs the compiled module and fork()")
@pytest.mark.parametrize("n", [1 << 20, 1 << 22])
def test_a_forked_child_runs_after_a_parallel_call(n: int) -> None:
    """multiprocessing's ``fork`` children (the default start method on Linux) of a process
    that ran rad on two threads: the child's call used to wait forever, on the parent's
    kernel worker thread (not copied by fork(), pools of 2^22 points or more) or on GNU
    OpenMP's thread team (smaller pools, run on the calling thread). The child now starts
    its own worker and runs on one thread, with the parent's indices."""
    lines = _run_forked("cpp", n)
    assert lines[0] == "same", lines


@pytest.mark.skipif("numba" not in BACKENDS or sys.platform != "linux", reason="needs Numba and fork()")
def test_numba_refuses_a_forked_child_with_a_reason() -> None:
    """Numba's OpenMP layer ends a forked child at its first parallel call once the parent
    has started it (the process vanished with "Terminating: fork() called from a process
    already using GNU OpenMP"). The Numba backend is now refused there with the reason and
    the way out, and ``backend="auto"`` does not pick it."""
    import numba

    if numba.config.THREADING_LAYER not in ("default", "omp"):
        pytest.skip("Numba is configured for another threading layer")
    lines = _run_forked("numba", 1 << 20)
    layer = subprocess.run(
        [sys.executable, "-c", "import numpy as np, rad, numba; rad.select(np.ones(2**20), 1.0, 10, backend='numba',"
         " threads=2); print(numba.threading_layer())"], capture_output=True, text=True, timeout=300).stdout.strip()
    if layer != "omp":
        assert lines[0] == "same", lines  # another layer survives fork()
        return
    assert lines[0].startswith("error BackendUnavailable") and "spawn" in lines[0], lines
    assert lines[1] != "auto numba", lines

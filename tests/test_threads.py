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

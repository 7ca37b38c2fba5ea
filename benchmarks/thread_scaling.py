"""Thread scaling of ``rad.select`` against the bandwidth probe (issue 10).

For every pool size and thread count: one parallel sum over the same array at the same
thread count (the bandwidth probe: C++ ``_core.stream_sum`` and a Numba ``prange`` sum),
``rad.select`` on the C++ and Numba backends, and their ratios to the probe; the
single-threaded ``np.sum`` once per size. At the largest thread count also the C++ stages
(sort-free search, support sums, DepRound) and the peak memory above the input; with
``--capped N`` the capped path (``m = 0.001 N``, ``b = N / 10``) against the uncapped
select on the same pool, per backend, and where the first backend's capped call spends
its time (cProfile); with ``--mmap DIR`` every pool is a read-only memory map of a
``.npy`` file in ``DIR`` (written once, then read once so that the page cache holds it:
the issue's "memory map, page-cached"). Medians; every ratio comes from numbers measured
in the same run.

    python benchmarks/thread_scaling.py --sizes 1e8,1e9 --threads 1,2,4,8,16 --out FILE.json

Workload: float32 ``uniform(0, 1)`` gains, ``m = 0.3 n``, ``b = 1000``, default ``w``.
``benchmarks/device_check.sh`` runs it on a bare many-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_time  # noqa: E402


def _numba_probe():
    import numba as nb

    @nb.njit(parallel=True, fastmath=True, cache=False, nogil=True)
    def probe(x):  # pragma: no cover - compiled
        s = 0.0
        for i in nb.prange(x.shape[0]):
            s += x[i]
        return s

    def run(x, threads):
        nb.set_num_threads(threads)
        return probe(x)

    return run


def _rss() -> tuple[int, int]:
    with open("/proc/self/status") as f:
        d = dict(line.split(":", 1) for line in f)
    return int(d["VmRSS"].split()[0]) * 1024, int(d["VmHWM"].split()[0]) * 1024


def _pool(n: int, mmap_dir: str) -> np.ndarray:
    """The workload's gains: in memory, or a read-only memory map whose pages are cached."""
    if not mmap_dir:
        return np.random.default_rng(0).random(n, dtype=np.float32)
    path = os.path.join(mmap_dir, f"rad_gains_{n}.npy")
    try:
        g = np.load(path, mmap_mode="r")
        ok = g.shape == (n,) and g.dtype == np.float32
    except (OSError, ValueError):
        ok = False
    if not ok:  # (the same values as in memory)
        np.save(path, np.random.default_rng(0).random(n, dtype=np.float32))
        g = np.load(path, mmap_mode="r")
    from rad import _core

    _core.stream_sum(g, os.cpu_count() or 1)  # into the page cache
    return g


def _capped_rows(n: int, threads: int, backends: list[str], reps: int) -> dict:
    """Issue 10's capped-path target: caps bind (m = 0.001 n, b = n / 10) against the
    uncapped select (m = 0.3 n, b = 1000) on the same pool, alternated call by call."""
    import rad

    g = np.random.default_rng(1).random(n, dtype=np.float32)
    row: dict = {"n": n, "threads": threads, "m": 0.001 * n, "b": n // 10,
                 "capped": bool(rad.solve(g, 0.001 * n, n // 10).capped)}
    picks = {}
    for be in backends:
        picks[be] = rad.select(g, 0.001 * n, n // 10, rng=0, backend=be, threads=threads)  # warm-up
        capped, uncapped = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            rad.select(g, 0.001 * n, n // 10, rng=0, backend=be, threads=threads)
            capped.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rad.select(g, 0.3 * n, 1000, rng=0, backend=be, threads=threads)
            uncapped.append(time.perf_counter() - t0)
        row[f"capped_{be}"] = statistics.median(capped)
        row[f"uncapped_{be}"] = statistics.median(uncapped)
        row[f"capped_vs_uncapped_{be}"] = row[f"capped_{be}"] / row[f"uncapped_{be}"]
    if len(picks) > 1:
        first = next(iter(picks.values()))
        row["same_indices_across_backends"] = all(np.array_equal(first, p) for p in picks.values())
    row[f"capped_profile_ms_{backends[0]}"] = _capped_profile(g, n, backends[0], threads)
    return row


def _capped_profile(g: np.ndarray, n: int, backend: str, threads: int, calls: int = 5) -> dict[str, float]:
    """Where a capped select's time goes: cProfile's own time per call (ms) of its 15
    costliest functions on the calling thread (a kernel is one entry, so its time is not
    inflated; Python functions' are, by the profiler's overhead). The top's parts sorted
    on worker threads show as the calling thread's wait (a lock's ``acquire``)."""
    import cProfile
    import pstats

    import rad

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        rad.select(g, 0.001 * n, n // 10, rng=0, backend=backend, threads=threads)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    own = sorted(((tt, f"{os.path.basename(file)}:{line}({name})") for (file, line, name), (_, _, tt, _, _)
                  in stats.items()), reverse=True)[:15]
    return {name: round(1e3 * tt / calls, 3) for tt, name in own}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e8,1e9")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backends", default="cpp,numba")
    ap.add_argument("--out", default="")
    ap.add_argument("--capped", default="0", help="also the capped path at this n (0: skip): m = 0.001 n, "
                    "b = n / 10 against the uncapped select, call by call, at the largest thread count")
    ap.add_argument("--mmap", default="", metavar="DIR",
                    help="read every pool from a read-only memory map of DIR/rad_gains_N.npy (written if absent)")
    args = ap.parse_args()

    import rad
    from rad import _core
    from rad._backends import get_backend
    from rad._backends.threads import available_cores

    sizes = [int(float(s)) for s in args.sizes.split(",")]
    cores = available_cores()
    threads = [t for t in (int(s) for s in args.threads.split(",")) if t <= cores]
    backends = [b for b in args.backends.split(",") if rad.backends()[b]["available"]]
    probe_nb = _numba_probe() if "numba" in backends else None
    out: dict = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "cores_usable": cores,
                    "python": sys.version.split()[0], "numpy": np.__version__, "rad": rad.__version__,
                    "backends": rad.backends()},
        "workload": "float32 uniform(0,1), m = 0.3 n, b = 1000, default w; medians",
        "source": "read-only memory map, page-cached" if args.mmap else "in memory",
        "rows": [],
    }

    def log(x):
        print(json.dumps(x), flush=True)
        if args.out:  # after every row: a run stopped at a time limit keeps what it measured
            with open(args.out, "w") as f:
                json.dump(out, f, indent=2)

    for n in sizes:
        t0 = time.perf_counter()
        g = _pool(n, args.mmap)
        m, b = 0.3 * n, 1000
        reps = args.repeat if n <= 10**8 else max(1, args.repeat - 1)
        size_row: dict = {"n": n, "generate_s": time.perf_counter() - t0}
        size_row["np_sum_1thread"] = median_time(lambda: np.sum(g), reps)
        small = g[: 1 << 20]
        for be in backends:  # JIT and first-touch warm-up
            rad.select(small, 0.3 * small.shape[0], b, rng=0, backend=be, threads=2)
        if probe_nb is not None:
            probe_nb(small, 1)
        ref = None
        for t in threads:
            row = {"n": n, "threads": t}
            # Interleaved: probe, then each backend, repeated; medians of each. On a shared
            # machine the load changes between seconds, so ratios come from neighbours.
            times: dict = {"probe_cpp": [], "probe_numba": [], **{f"select_{be}": [] for be in backends}}
            picks = {}
            for _ in range(reps + 2):
                t1 = time.perf_counter()
                _core.stream_sum(g, t)
                times["probe_cpp"].append(time.perf_counter() - t1)
                if probe_nb is not None:
                    t1 = time.perf_counter()
                    probe_nb(g, t)
                    times["probe_numba"].append(time.perf_counter() - t1)
                for be in backends:
                    t1 = time.perf_counter()
                    picks[be] = rad.select(g, m, b, rng=0, backend=be, threads=t)
                    times[f"select_{be}"].append(time.perf_counter() - t1)
            for key, v in times.items():
                if v:
                    row[key] = statistics.median(v)
            for be in backends:
                row[f"select_{be}_vs_probe_cpp"] = row[f"select_{be}"] / row["probe_cpp"]
            if "cpp" in backends and "numba" in backends:
                row["numba_vs_cpp"] = row["select_numba"] / row["select_cpp"]
                row["same_indices_across_backends"] = bool(np.array_equal(picks["cpp"], picks["numba"]))
            first = next(iter(picks.values()))
            ref = first if ref is None else ref
            row["same_indices_as_first_thread_count"] = bool(np.array_equal(first, ref))
            out["rows"].append(row)
            log(row)
        one = [r for r in out["rows"] if r["n"] == n and r["threads"] == threads[0]][0]
        for r in out["rows"]:
            if r["n"] == n:
                r["speedup_vs_first_threads"] = {k: one[k] / r[k] for k in r if k.startswith(("select_", "probe_"))
                                                 and not k.endswith("vs_probe_cpp")}
        tmax = threads[-1]
        if "cpp" in backends:
            cpp = get_backend("cpp")
            sol = rad.solve(g, m, b, threads=tmax)
            st = cpp.threshold_search(g, None, sol.w, m, tmax)
            size_row["stages_cpp_threads"] = tmax
            size_row["stage_threshold"] = median_time(lambda: cpp.threshold_search(g, None, sol.w, m, tmax), reps)
            size_row["stage_support_sums"] = median_time(lambda: cpp.support_sums(g, None, sol.w, st[1], tmax), reps)
            # What select runs: the search sharing its read with the support sums (and
            # recording the DepRound sketch), then DepRound from the sketch.
            size_row["stage_search_with_sums"] = median_time(
                lambda: cpp.threshold_support(g, None, sol.w, m, b, tmax), reps)
            size_row["stage_depround"] = median_time(
                lambda: cpp.depround_sketched(g, None, sol.w, sol.params, b, 1, sol.round_sketch, tmax), reps)
            size_row["stage_depround_without_sketch"] = median_time(
                lambda: cpp.depround_params(g, None, sol.w, sol.params, b, 1, tmax), reps)
        if os.path.exists("/proc/self/clear_refs"):
            for be in backends:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
                before = _rss()[0]
                rad.select(g, m, b, rng=1, backend=be, threads=tmax)
                size_row[f"peak_above_before_MiB_{be}"] = (_rss()[1] - before) / 2**20
        out.setdefault("sizes", []).append(size_row)
        log(size_row)

    if int(float(args.capped)):
        out["capped"] = _capped_rows(int(float(args.capped)), threads[-1], backends, args.repeat + 4)
        log(out["capped"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=2)
        print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Scaling benchmark for issue "billion-point pools": every number a ratio measured in
the same run, medians of several runs.

    python benchmarks/scaling.py                 # 1e6, 1e7, 1e8 (+ stages); ~10 min
    python benchmarks/scaling.py --big           # also 1e9 float32 from a memory map
    python benchmarks/scaling.py --quick         # 1e6, 1e7 only (smoke)

Writes benchmarks/results_scaling.json and benchmarks/scaling.png; RESULTS.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import rad  # noqa: E402
from rad import _core  # noqa: E402
from rad._backends import get_backend  # noqa: E402
from reference import numpy_select, sequential_depround  # noqa: E402
from timing import median_time  # noqa: E402


def pool(n: int) -> np.ndarray:
    return np.random.default_rng(0).random(n, dtype=np.float32)


def scale_rows(sizes: list[int], log) -> list[dict]:
    rows = []
    for n in sizes:
        g = pool(n)
        m, b = 0.3 * n, 1000
        rad.select(g, m, b, rng=0)  # warm caches
        rad.select(g, m, b, rng=0, backend="numba")  # JIT
        row = {"n": n}
        row["np_sum"] = median_time(lambda: np.sum(g), 7)
        # bandwidth probe: one parallel sum over the same array at the same thread count
        row["probe_cpp_2threads"] = median_time(lambda: _core.stream_sum(g, 2), 7)
        row["rad"] = median_time(lambda: rad.select(g, m, b, rng=0), 5)
        row["rad_numba"] = median_time(lambda: rad.select(g, m, b, rng=0, backend="numba"), 3)
        row["rad_sorted"] = median_time(lambda: rad.select(g, m, b, rng=0, method="sorted"), 3 if n < 10**8 else 1)
        row["reference"] = median_time(lambda: numpy_select(g, m, b), 3 if n < 10**8 else 2)
        row["rad_vs_reference"] = row["reference"] / row["rad"]
        row["rad_vs_sum"] = row["rad"] / row["np_sum"]
        row["rad_vs_probe"] = row["rad"] / row["probe_cpp_2threads"]
        row["numba_vs_probe"] = row["rad_numba"] / row["probe_cpp_2threads"]
        row["numba_vs_cpp"] = row["rad_numba"] / row["rad"]
        log(row)
        rows.append(row)
    return rows


def stage_rows(n: int, log) -> dict:
    g = pool(n)
    m, b = 0.3 * n, 1000
    out: dict = {"n": n}
    cpp = get_backend("cpp")
    # threads 1 vs 2: time and identical output
    sel = {}
    for t in (1, 2):
        out[f"rad_threads{t}"] = median_time(lambda: rad.select(g, m, b, rng=3, threads=t), 5)
        sel[t] = rad.select(g, m, b, rng=3, threads=t)
    out["threads_identical"] = bool(np.array_equal(sel[1], sel[2]))
    out["thread_speedup"] = out["rad_threads1"] / out["rad_threads2"]
    # DepRound stage alone (streaming from gains) vs per-item sequential pairing on q
    sol = rad.solve(g, m, b)
    out["depround_stream"] = median_time(lambda: cpp.depround_params(g, None, sol.w, sol.params, b, 11, 2), 5)
    q = sol.probabilities()
    sequential_depround(q[:1000])
    out["depround_per_item"] = median_time(lambda: sequential_depround(q), 3)
    out["depround_speedup"] = out["depround_per_item"] / out["depround_stream"]
    # radix argsort vs numpy's stable argsort
    out["radix_argsort"] = median_time(lambda: cpp.argsort_desc(g, 2), 3)
    out["np_argsort"] = median_time(lambda: np.argsort(-g, kind="stable"), 1 if n >= 10**8 else 3)
    out["argsort_speedup"] = out["np_argsort"] / out["radix_argsort"]
    log(out)
    return out


def capped_row(n: int, log, repeat: int = 9) -> dict:
    """Caps bind (small m, large b): the exact dual search instead of b p*.

    The capped and the uncapped select alternate call by call (this VM is noisy), and the
    ratio is taken of their medians.
    """
    g = pool(n)
    out = {"n": n}
    b = n // 10
    sol = rad.solve(g, 0.001 * n, b)
    out["capped"] = bool(sol.capped)
    out["capped_b"] = b
    rad.select(g, 0.001 * n, b, rng=0)  # warm up
    capped, uncapped = [], []
    for _ in range(repeat):
        capped.append(median_time(lambda: rad.select(g, 0.001 * n, b, rng=0), 1))
        uncapped.append(median_time(lambda: rad.select(g, 0.3 * n, 1000, rng=0), 1))
    out["uncapped_b1000"] = statistics.median(uncapped)
    out["capped_time"] = statistics.median(capped)
    out["capped_slowdown"] = out["capped_time"] / out["uncapped_b1000"]
    for key, (m, bb) in {"capped": (0.001 * n, b), "uncapped": (0.3 * n, 1000)}.items():
        out[f"{key}_bytes_per_point"] = peak_growth(n, m, bb) / n
    log(out)
    return out


PEAK = textwrap.dedent(
    """
    import sys, numpy as np, rad
    n, m, b = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    g = np.random.default_rng(0).random(n, dtype=np.float32)
    rad.select(g[:100_000], m * 1e5 / n, max(1, b // 100), rng=0)
    def status(key):
        with open("/proc/self/status") as f:
            return int(next(l for l in f if l.startswith(key)).split()[1]) * 1024
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS")
    rad.select(g, m, b, rng=0)
    print(status("VmHWM") - before)
    """
)


def peak_growth(n: int, m: float, b: int) -> float:
    """Peak RSS above the input of one rad.select call, in a child process (bytes)."""
    res = subprocess.run([sys.executable, "-c", PEAK, str(n), str(m), str(b)], capture_output=True, text=True,
                         check=True)
    return float(res.stdout.strip().splitlines()[-1])


BIG = textwrap.dedent(
    """
    import json, resource, statistics, time, sys
    import numpy as np, rad
    path = sys.argv[1]
    g = np.load(path, mmap_mode="r")
    n = g.shape[0]
    def rss():
        with open("/proc/self/status") as f:
            d = dict(l.split(":", 1) for l in f)
        return int(d["VmRSS"].split()[0]) * 1024, int(d["VmHWM"].split()[0]) * 1024
    t0 = time.perf_counter(); s = float(np.sum(g)); t_sum_cold = time.perf_counter() - t0
    sums = []
    for _ in range(3):
        t0 = time.perf_counter(); np.sum(g); sums.append(time.perf_counter() - t0)
    from rad import _core
    probes = []
    for _ in range(5):
        t0 = time.perf_counter(); _core.stream_sum(g, 2); probes.append(time.perf_counter() - t0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = rss()
    runs = []
    for r in range(3):
        t0 = time.perf_counter(); idx = rad.select(g, 0.3 * n, 1000, rng=r); runs.append(time.perf_counter() - t0)
    after = rss()
    rad.select(g[:1 << 20], 0.3 * (1 << 20), 1000, rng=0, backend="numba")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before_nb = rss()
    nb_runs = []
    for r in (1, 2):  # the last seed is the C++ loop's last: same indices expected
        t0 = time.perf_counter(); idx_nb = rad.select(g, 0.3 * n, 1000, rng=r, backend="numba")
        nb_runs.append(time.perf_counter() - t0)
    after_nb = rss()
    print(json.dumps({"n": n, "np_sum": statistics.median(sums), "probe_cpp_2threads": statistics.median(probes),
                      "rad": statistics.median(runs), "rad_numba": statistics.median(nb_runs),
                      "rss_before": before[0], "hwm": after[1], "input_bytes": int(g.nbytes),
                      "peak_above_before_cpp": after[1] - before[0],
                      "peak_above_before_numba": after_nb[1] - before_nb[0],
                      "same_indices_numba": bool(np.array_equal(idx, idx_nb)),
                      "selected": int(idx.shape[0]), "distinct": int(np.unique(idx).shape[0])}))
    """
)


def big_row(log, path: Path) -> dict:
    n = 10**9
    if not path.exists() or path.stat().st_size < 4 * n:
        log(f"writing {n:,} float32 gains to {path} ...")
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n,))
        rng = np.random.default_rng(0)
        step = 50_000_000
        for lo in range(0, n, step):
            mm[lo : lo + step] = rng.random(min(step, n - lo), dtype=np.float32)
        mm.flush()
        del mm
    res = subprocess.run([sys.executable, "-c", BIG, str(path)], capture_output=True, text=True, check=True)
    out = json.loads(res.stdout)
    out["rad_vs_sum"] = out["rad"] / out["np_sum"]
    out["rad_vs_probe"] = out["rad"] / out["probe_cpp_2threads"]
    out["numba_vs_cpp"] = out["rad_numba"] / out["rad"]
    # Mapped pages of the input count towards RSS once touched; the excess is rad's own.
    out["peak_rss_above_input_gb"] = (out["hwm"] - out["input_bytes"]) / 2**30
    log(out)
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for key, label, style in [
        ("reference", "NumPy reference (argsort pipeline)", "o-"),
        ("rad_sorted", "rad.select, sorted path (C++)", "s--"),
        ("rad_numba", "rad.select (Numba)", "^-"),
        ("rad", "rad.select (C++, sort-free)", "D-"),
        ("np_sum", "one np.sum pass (floor)", "k:"),
    ]:
        ax.loglog(n, [r[key] for r in rows], style, label=label)
    ax.set_xlabel("pool size n (float32 gains)")
    ax.set_ylabel("median wall time [s]")
    ax.set_title("rad.select(gains, m=0.3n, b=1000) on 2 shared cores")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big", action="store_true", help="also run n = 1e9 from a memory map")
    ap.add_argument("--big-path", default="/tmp/rad_bench_gains_1e9.npy")
    ap.add_argument("--only", default="", help="comma list of parts to rerun (scaling,stages,capped,big); "
                    "the others are kept from results_scaling.json")
    args = ap.parse_args()
    sizes = [10**6, 10**7] if args.quick else [10**6, 10**7, 10**8]

    def log(x):
        print(x, flush=True)

    only = set(filter(None, args.only.split(",")))
    path = HERE / "results_scaling.json"
    results = json.loads(path.read_text()) if only and path.exists() else {}
    results["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
                          "rad": rad.__version__, "backends": rad.backends()}
    want = only or {"scaling", "stages", "capped"} | ({"big"} if args.big else set())
    if "scaling" in want:
        results["scaling"] = scale_rows(sizes, log)
    if "stages" in want:
        results["stages"] = stage_rows(sizes[-1], log)
    if "capped" in want:
        results["capped"] = capped_row(10**7, log)
    if "big" in want:
        results["big"] = big_row(log, Path(args.big_path))
    path.write_text(json.dumps(results, indent=2))
    plot(results["scaling"], HERE / "scaling.png")
    print("wrote", HERE / "results_scaling.json", "and", HERE / "scaling.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())

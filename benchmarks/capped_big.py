"""The capped path at n = 1e9 from a read-only memory map (caps bind: m = 0.001 n, b = n / 10).

Usage: python benchmarks/capped_big.py BACKEND [PATH]  (PATH: a float32 .npy of 1e9 gains,
default /tmp/rad_bench_gains_1e9.npy, written by ``scaling.py --big``). Prints one JSON line:
the capped select's time, the uncapped select (m = 0.3 n, b = 1000) in the same process, and
the peak memory growth per point during the capped call (peak-RSS counter reset before it).
"""

import json
import sys
import time

import numpy as np

import rad


def rss() -> dict[str, int]:
    with open("/proc/self/status") as f:
        return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.startswith(("VmRSS", "VmHWM"))}


def main() -> None:
    be = sys.argv[1]
    g = np.load(sys.argv[2] if len(sys.argv) > 2 else "/tmp/rad_bench_gains_1e9.npy", mmap_mode="r")
    n = g.shape[0]
    small = 1 << 20
    rad.select(np.asarray(g[:small]), 0.001 * small, small // 10, rng=0, backend=be)  # compile / warm up
    np.sum(g)  # page-cache the file
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = rss()["VmRSS"]
    t0 = time.perf_counter()
    idx = rad.select(g, 0.001 * n, n // 10, rng=0, backend=be, threads=2)
    capped = time.perf_counter() - t0
    peak = rss()["VmHWM"]
    t0 = time.perf_counter()
    rad.select(g, 0.3 * n, 1000, rng=0, backend=be, threads=2)
    uncapped = time.perf_counter() - t0
    print(json.dumps({"backend": be, "n": n, "capped_b": n // 10, "capped_s": capped, "uncapped_b1000_s": uncapped,
                      "ratio": capped / uncapped, "growth_bytes_per_point": (peak - before) / n,
                      "picks": int(idx.shape[0]), "idx_sum": int(idx.sum())}))


if __name__ == "__main__":
    main()

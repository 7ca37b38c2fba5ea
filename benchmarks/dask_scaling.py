"""rad.dask.select on a 1e9-point float32 pool stored on disk, through a local cluster.

    python benchmarks/dask_scaling.py [--path /tmp/rad_bench_gains_1e9.npy] [--chunk 67108864]

The pool is the .npy file written by ``scaling.py --big`` (created here if missing); each
Dask chunk is a memory-mapped slice opened *inside* its worker, so the gains never travel.
Prints time, bytes received by the client, and the ratio to single-machine rad.select on
the same file; appends the result to results_dask.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def load_slice(path: str, lo: int, hi: int) -> np.ndarray:
    return np.load(path, mmap_mode="r")[lo:hi]


def main() -> int:
    import dask
    import dask.array as da
    import distributed

    import rad
    import rad.dask as rd

    ap = argparse.ArgumentParser()
    ap.add_argument("--path", default="/tmp/rad_bench_gains_1e9.npy")
    ap.add_argument("--chunk", type=int, default=1 << 26)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = Path(args.path)
    if not path.exists():
        import subprocess
        import sys

        subprocess.run([sys.executable, str(HERE / "scaling.py"), "--only", "big", "--big-path", str(path)], check=True)
    mm = np.load(path, mmap_mode="r")
    n = mm.shape[0]
    m, b = 0.3 * n, 1000
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None, memory_limit="8GiB")
    client = distributed.Client(cluster)
    parts = [da.from_delayed(dask.delayed(load_slice)(str(path), lo, min(n, lo + args.chunk)),
                             shape=(min(n, lo + args.chunk) - lo,), dtype=mm.dtype)
             for lo in range(0, n, args.chunk)]
    x = da.concatenate(parts)
    times = []
    for r in range(args.repeat):
        t0 = time.perf_counter()
        idx = rd.select(x, m, b, rng=r)
        times.append(time.perf_counter() - t0)
    moved = rd.last_transfer_bytes
    client.close()
    cluster.close()
    single = []
    for r in range(args.repeat):
        t0 = time.perf_counter()
        ref = rad.select(mm, m, b, rng=r)
        single.append(time.perf_counter() - t0)
    out = {
        "n": n, "chunk": args.chunk, "chunks": len(parts), "workers": 2,
        "dask_select_s": statistics.median(times), "single_select_s": statistics.median(single),
        "ratio_dask_over_single": statistics.median(times) / statistics.median(single),
        "bytes_received": moved, "bytes_per_chunk": moved / len(parts),
        "same_indices_as_rad_select": bool(np.array_equal(idx, ref)),
    }
    print(json.dumps(out, indent=2))
    (HERE / "results_dask.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

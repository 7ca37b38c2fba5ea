"""Where a cuda-backend ``rad.select`` call spends its host time: cProfile over warm calls.

Run on a GPU machine with PyTorch (rad built on ``PYTHONPATH``)::

    python benchmarks/gpu_host_profile.py --sizes 1e8 1e9 --calls 20 --out DIR

For each size: float32 uniform gains drawn on the GPU, ``m = 0.05 n``, ``b = 1000``; warm
calls, then ``--calls`` calls under :mod:`cProfile` (deterministic, so its per-call
overhead inflates functions called many times: read shares and call counts, not
absolute times). ``DIR/host_profile.txt`` gets the functions by own time and by
cumulative time, and each call's wall time with and without the profiler;
``benchmarks/gpu_timeline.py`` says instead when the GPU itself sat idle.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["1e8", "1e9"])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--top", type=int, default=45)
    ap.add_argument("--out", default=".")
    ap.add_argument("--device", default="cuda", help="where the gains are drawn (cpu: a smoke test)")
    args = ap.parse_args()

    import torch

    import rad

    def sync() -> None:
        if args.device == "cuda":
            torch.cuda.synchronize()

    os.makedirs(args.out, exist_ok=True)
    report = io.StringIO()
    for s in args.sizes:
        n = int(float(s))
        gen = torch.Generator(device=args.device).manual_seed(0)
        g = torch.rand(n, device=args.device, dtype=torch.float32, generator=gen)
        m, b = 0.05 * n, 1000
        for _ in range(3):  # compile, allocate the kept buffers
            rad.select(g, m, b, rng=1)
        sync()
        plain = []
        for _ in range(args.calls):
            t0 = time.perf_counter()
            rad.select(g, m, b, rng=1)
            sync()
            plain.append(time.perf_counter() - t0)
        prof = cProfile.Profile()
        profiled = []
        for _ in range(args.calls):
            t0 = time.perf_counter()
            prof.enable()
            rad.select(g, m, b, rng=1)
            sync()
            prof.disable()
            profiled.append(time.perf_counter() - t0)
        report.write(f"==== n = {s}: select median {1e3 * statistics.median(plain):.3f} ms plain, "
                     f"{1e3 * statistics.median(profiled):.3f} ms profiled ({args.calls} calls each)\n")
        for key in ("tottime", "cumulative"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
            report.write(f"---- by {key}\n{buf.getvalue()}\n")
        del g
        if args.device == "cuda":
            torch.cuda.empty_cache()
    text = report.getvalue()
    with open(os.path.join(args.out, "host_profile.txt"), "w") as f:
        f.write(text)
    print("\n".join(line for line in text.splitlines() if line.startswith("====")))
    return 0


if __name__ == "__main__":
    sys.exit(main())

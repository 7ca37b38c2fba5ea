"""One warm ``rad.select`` on device-resident gains, for a kernel profiler to attach to.

    ncu -k regex:'bracket_kernel|chunk_kernel|support_kernel' --launch-skip 3 --launch-count 3 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python benchmarks/gpu_kernel_profile.py --n 1e8

Draws float32 uniform gains on the GPU (PyTorch), runs ``rad.select`` twice (the first
call compiles), and prints the time of the second.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

try:  # a built rad on PYTHONPATH wins (its compiled core merges DepRound's leftovers on the host)
    import rad  # noqa: F401
except ImportError:  # else the checkout's sources
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=float, default=1e8)
    p.add_argument("--m-frac", type=float, default=0.05)
    p.add_argument("--b", type=int, default=1000)
    p.add_argument("--calls", type=int, default=2)
    args = p.parse_args()
    import torch

    import rad

    n = int(args.n)
    gains = torch.rand(n, device="cuda", dtype=torch.float32, generator=torch.Generator(device="cuda").manual_seed(0))
    for _ in range(args.calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        rad.select(gains, args.m_frac * n, args.b, rng=0)
        torch.cuda.synchronize()
        print(f"rad.select n={n:.0e}: {time.perf_counter() - t0:.4f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

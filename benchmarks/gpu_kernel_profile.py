"""Warm ``rad.select`` calls on device-resident gains, for a kernel profiler to attach to.

The eighteenth session's reading of the two big passes at 1e9 on the H200 (``benchmarks/
RESULTS.md``) came from (rad built into ``/tmp/site``; run from outside the checkout so
that the built rad, with its compiled core, is the one imported)::

    cd /tmp && PYTHONPATH=/tmp/site ncu --clock-control none \
        -k regex:'bracket32_kernel|support_lane_kernel' --launch-skip 2 --launch-count 2 \
        --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
        --section InstructionStats --section Occupancy --section LaunchStats \
        python /path/to/checkout/benchmarks/gpu_kernel_profile.py --n 1e9 --calls 2

(``--launch-skip`` counts the matching launches only: 2 skips the first call's, which
also compiles.) Add ``--section SourceCounters`` for instructions per source line.

Draws float32 uniform gains on the GPU (PyTorch), runs ``rad.select`` ``--calls`` times
(the first compiles), and prints the time of each.
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

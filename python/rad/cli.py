"""The ``rad`` command line: ``rad demo`` and ``rad info``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Sequence

import numpy as np

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    import rad
    from rad._backends import default_threads, get_backend

    n = int(args.n)
    if n < 1:
        raise SystemExit("rad demo: --n must be >= 1")
    if not 0.0 <= args.mistake_rate <= 1.0:
        raise SystemExit("rad demo: --mistake-rate must be in [0, 1]")
    m = args.mistake_rate * n
    b = min(int(args.b), n)
    print(f"rad demo: synthetic pool of n={n:,} gains ~ uniform(0, 1) float32, "
          f"m={m:,.0f} teacher mistakes ({args.mistake_rate:.0%}), budget b={b:,}")
    t0 = time.perf_counter()
    gains = np.random.default_rng(args.seed).random(n, dtype=np.float32)
    print(f"  generated the pool in {time.perf_counter() - t0:.2f} s")
    backend = get_backend(args.backend).name
    t0 = time.perf_counter()
    sol = rad.solve(gains, m, b, backend=args.backend, threads=args.threads)
    t_solve = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx = rad.select(gains, m, b, rng=args.seed, backend=args.backend, threads=args.threads)
    t_select = time.perf_counter() - t0
    print(f"  backend={backend} threads={args.threads or default_threads()}")
    print(f"  k* (support size)   = {sol.k_star:,}")
    print(f"  boundary gain       = {sol.threshold:.6f}")
    print(f"  game value OPT_b    = {sol.value:.6f}  (expected gain of the batch, worst case)")
    print(f"  probabilities capped= {sol.capped}")
    print(f"  solve time          = {t_solve:.3f} s")
    print(f"  select time         = {t_select:.3f} s  (solve + DepRound)")
    print(f"  selected {idx.shape[0]:,} distinct points; first: {idx[:8].tolist()}")
    return 0


def _info(args: argparse.Namespace) -> int:
    import rad
    from rad._backends import default_threads, get_backend

    print(json.dumps({"version": rad.__version__, **rad.backends()}, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rad", description="Robust Active Distillation")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="select from a built-in synthetic pool and report k*, value, time")
    demo.add_argument("--n", type=float, default=1e7, help="pool size (default 1e7)")
    demo.add_argument("--mistake-rate", type=float, default=0.3, help="m / n (default 0.3)")
    demo.add_argument("--b", type=int, default=1000, help="budget (default 1000)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--backend", default="auto", choices=["auto", "cpp", "numba", "numpy"])
    demo.add_argument("--threads", type=int, default=None)
    demo.set_defaults(func=_demo)
    info = sub.add_parser("info", help="print the version and which backends are built")
    info.set_defaults(func=_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())

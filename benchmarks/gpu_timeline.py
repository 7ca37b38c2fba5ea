"""Where a cuda-backend ``rad.select`` call waits: the GPU's idle gaps, by host function.

Run on a GPU machine with PyTorch (rad built on ``PYTHONPATH``)::

    python benchmarks/gpu_timeline.py --sizes 1e8 1e9 --out DIR

For each size: float32 uniform gains drawn on the GPU, ``m = 0.05 n``, ``b = 1000``; a few
warm calls, their median wall time, then one call under PyTorch's profiler with its Python
tracer. From that trace: the GPU's busy time (kernels, copies, memsets), and every idle
interval between them attributed to the innermost host function running at that moment
(sampled every 2 microseconds), summed by function. The tracer slows the host down, so
read the table as shares, not as times. ``DIR/timeline_<n>.json.gz`` keeps the trace
(chrome://tracing or Perfetto open it), ``DIR/timeline.json`` the tables.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import sys
import time
from collections import Counter

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
#: a frame of rad's own code (a path component "rad/", not ".../autograd/")
RAD_FRAME = re.compile(r"(^|/)rad/")


def idle_by_function(events: list[dict], step_us: float = 2.0) -> dict:
    """The GPU's busy time, its idle gaps, and the gaps' time per innermost host function."""
    gpu = sorted((e["ts"], e["ts"] + e.get("dur", 0.0)) for e in events if e.get("cat") in GPU_CATS)
    py = [e for e in events if e.get("cat") == "python_function" and e.get("dur", 0) > 0]
    if not gpu or not py:
        return {"error": "no GPU or no Python events in the trace"}
    call = [e for e in py if e["name"].endswith(": select") and RAD_FRAME.search(e["name"])]
    lo, hi = (call[0]["ts"], call[0]["ts"] + call[0]["dur"]) if call else (gpu[0][0], gpu[-1][1])
    busy: list[list[float]] = []
    for s, e in gpu:  # merged busy intervals inside the call
        s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        if busy and s <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], e)
        else:
            busy.append([s, e])
    gaps, t = [], lo
    for s, e in busy:
        if s > t:
            gaps.append((t, s))
        t = max(t, e)
    if hi > t:
        gaps.append((t, hi))
    if call:  # the calling thread's frames only
        py = [e for e in py if e.get("tid") == call[0].get("tid")]
    py.sort(key=lambda e: (e["ts"], -e["dur"]))  # nested frames: outer first
    by_fn: Counter = Counter()
    by_rad: Counter = Counter()
    stack: list[dict] = []
    k = 0
    for s, e in gaps:  # a sweep: the frames open at each sample point, innermost last
        x = s + step_us / 2
        while x < e:
            while k < len(py) and py[k]["ts"] <= x:
                while stack and stack[-1]["ts"] + stack[-1]["dur"] < py[k]["ts"]:
                    stack.pop()
                stack.append(py[k])
                k += 1
            while stack and stack[-1]["ts"] + stack[-1]["dur"] < x:
                stack.pop()
            inner = stack[-1]["name"] if stack else "(no Python frame)"
            inner_rad = next((f["name"] for f in reversed(stack) if RAD_FRAME.search(f["name"])), "(outside rad)")
            by_fn[inner] += step_us
            by_rad[inner_rad] += step_us
            x += step_us
    total = hi - lo
    busy_us = sum(e - s for s, e in busy)
    return {
        "call_us": total, "gpu_busy_us": busy_us, "gpu_idle_us": total - busy_us, "gaps": len(gaps),
        "idle_by_innermost_function_us": dict(by_fn.most_common(25)),
        "idle_by_innermost_rad_function_us": dict(by_rad.most_common(25)),
        "kernels_us": {e["name"][:80]: e.get("dur", 0.0) for e in events if e.get("cat") == "kernel"},
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="+", default=["1e8", "1e9"])
    ap.add_argument("--out", default=".")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cuda", help="where the gains are drawn (cpu: a smoke test of this script)")
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    import rad

    def sync() -> None:
        if args.device == "cuda":
            torch.cuda.synchronize()

    os.makedirs(args.out, exist_ok=True)
    result: dict = {"rad": rad.__file__, "torch": torch.__version__, "sizes": []}
    for s in args.sizes:
        n = int(float(s))
        gen = torch.Generator(device=args.device).manual_seed(0)
        g = torch.rand(n, device=args.device, dtype=torch.float32, generator=gen)
        m, b = 0.05 * n, 1000
        rad.select(g, m, b, rng=1)  # compile, allocate DepRound's buffers
        times = []
        for _ in range(args.repeats):
            sync()
            t0 = time.perf_counter()
            rad.select(g, m, b, rng=1)
            sync()
            times.append(time.perf_counter() - t0)
        sync()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
        with profile(activities=acts, with_stack=True) as prof:
            rad.select(g, m, b, rng=1)
            sync()
        path = os.path.join(args.out, f"timeline_{s}.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as z:
            z.write(f.read())
        os.remove(path)
        row = {"n": n, "select_ms_median": 1e3 * statistics.median(times), **idle_by_function(events)}
        result["sizes"].append(row)
        print(f"n={s}: select {row['select_ms_median']:.2f} ms unprofiled; profiled call "
              f"{row.get('call_us', 0) / 1e3:.2f} ms, GPU busy {row.get('gpu_busy_us', 0) / 1e3:.2f} ms "
              f"({row.get('gaps', 0)} idle gaps)")
        for name, us in list(row.get("idle_by_innermost_rad_function_us", {}).items())[:12]:
            print(f"   idle {us / 1e3:7.3f} ms in {name[-90:]}")
        del g
        if args.device == "cuda":
            torch.cuda.empty_cache()
    with open(os.path.join(args.out, "timeline.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The GPU part of the device check: ``rad.select`` on device-resident gains.

Run on an H100/H200 machine (no network; PyTorch, CuPy, JAX and numba-cuda installed)::

    PYTHONPATH=python python benchmarks/device_check_gpu.py --sizes 1e8 1e9 --out gpu.json

For each size it draws float32 gains on the GPU (PyTorch), then times (median of
``--repeats`` runs, each synchronised):

* ``sum``: one GPU sum pass over the gains (``torch.sum``), the memory-speed floor;
* ``rad``: ``rad.select(gains, m, b, rng=seed)`` on the device (the cuda backend), and its
  phases (sort-free search, canonical support sums, DepRound);
* ``torch``: the PyTorch sort-and-cumsum pipeline (``benchmarks/torch_pipeline.py``);

and checks ``k*``, threshold, value and the selected indices against the CPU backend on
a host copy. A small pool goes through the CuPy, JAX and numba input paths (the same
indices). Targets: ``rad <= 3 x sum`` and ``torch / rad >= 30`` at 1e9, with the CPU's
``k*`` and threshold. Everything lands in one JSON file (errors included: a failing part
does not hide the others).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

# JAX would take 75% of the GPU's memory when first used (the input check): leave it to the pools.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:  # a built rad on PYTHONPATH (benchmarks/device_check.sh's private install) wins
    import rad  # noqa: F401
except ImportError:  # else the checkout's sources (the CPU reference then uses Numba)
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))


def _timed(fn: Callable[[], Any], repeats: int, sync: Callable[[], None]) -> tuple[float, list[float], Any]:
    times, out = [], None
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, out


def _profile(fn: Callable[[], Any], sync: Callable[[], None]) -> str:
    """One warm call under cProfile: where the host waits (syncs, copies) and launches."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    sync()
    prof.enable()
    fn()
    sync()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
    return out.getvalue()[-8000:]


def _kernel_table(fn: Callable[[], Any], sync: Callable[[], None]) -> str:
    """GPU time per kernel of one warm call (PyTorch's profiler sees numba's kernels too)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            sync()
        return str(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))[-8000:]
    except Exception:
        return traceback.format_exc()[-2000:]


def bracket_probe(d: Any, w: float, m: float, repeats: int) -> dict[str, float]:
    """The search pass's kernel alone, timed with CUDA events (milliseconds, medians).

    With the sampled bracket (as ``rad.select`` runs it), with an empty bracket below every
    positive gain (every point "above": no bin atomics, the same arithmetic), and with
    half and twice the grid: which of atomics, arithmetic or occupancy bounds it (the grid
    is the select's: one wave of the pass where the backend cuts it to one, then also six
    CUDA blocks an SM as before).
    Also the brackets of a 2^14, a 2^16 and a 2^18 sample, with the host time of their
    sampling step (gather, copy, sort and scan), and the sampled bracket with its inside
    points queued by the pass and binned by a second kernel (``sampled_queued_ms``: both),
    also with each sample size's bracket (``sample_<size>_queued_ms``, and the sample's
    fraction inside).
    """
    import numpy as np
    from numba import cuda

    from rad._backends import get_backend
    from rad._backends import radix_select as R

    kern = get_backend("cuda")
    n = d.shape[0]
    nbits, raw, sign = kern._bit_view(d)
    inf_bits = R.full_bracket(nbits)[1]
    ulo, uhi = kern._sample_bracket(d, None, w, m)
    lv, has = kern._losses_arg(None)
    fast32 = hasattr(kern, "_fast32") and kern._fast32(d, None, w)  # the pass the search runs
    resident = kern._resident_grid(n)  # six CUDA blocks an SM
    grid = resident  # the select's grid: one wave of the pass where the backend cuts it so
    if hasattr(kern, "_wave_grid"):
        grid = kern._wave_grid(kern._bracket32_kernel if fast32 else kern._bracket_kernel, n)

    fine = kern._FINE32 if fast32 else R.FINE

    queues = hasattr(kern, "_queue_cap")  # this tree's float32 pass can queue its inside points

    def once(lo: int, hi: int, blocks: int, inside: float | None = None, pass_kernel: Any = None) -> float:
        sh = R.bracket_shift(lo, hi, fine) if fast32 else R.bracket_shift(lo, hi)
        cnt = kern._full(fine, 0, np.int64)
        hh = kern._full(fine, 0.0, np.float64)
        gg = kern._full(fine, 0.0, np.float64)
        mnb = kern._full(fine, np.iinfo(np.uint64).max, np.uint64)
        scal = kern._full(3, 0.0, np.float64)
        icnt = cuda.to_device(np.array([0, 0, 0, np.iinfo(np.uint64).max, 0, 0], dtype=np.uint64))
        cap = kern._queue_cap(n, blocks, inside) if queues else 0
        queue = kern._scratch("probe_queue", max(1, blocks * cap), np.uint32)
        qcount = kern._scratch("probe_qcount", blocks, np.int64)
        start, stop = cuda.event(), cuda.event()
        start.record()
        if fast32 and queues:  # the pass (queueing or binning), then the queue's bins
            (pass_kernel or kern._bracket32_kernel)[blocks, kern._TPB](
                raw, n, float(w), 1.0 / (1.0 + w), np.uint32(lo), np.uint32(hi), np.uint32(sh), cnt, hh, mnb, scal,
                icnt, queue, qcount, np.int64(cap), cap > 0,
            )
            if cap:
                kern._queue_bins32_kernel[blocks, kern._TPB](
                    queue, qcount, np.int64(cap), float(w), 1.0 / (1.0 + w), np.uint32(lo), np.uint32(sh), cnt, hh,
                    mnb,
                )
        elif fast32:
            kern._bracket32_kernel[blocks, kern._TPB](
                raw, n, float(w), 1.0 / (1.0 + w), np.uint32(lo), np.uint32(hi), np.uint32(sh), cnt, hh, mnb, scal,
                icnt,
            )
        else:
            kern._bracket_kernel[blocks, kern._TPB](
                d, raw, sign, np.uint64(inf_bits), lv, has, float(w), R.edge_value(lo, nbits),
                R.edge_value(hi, nbits), np.uint64(lo), np.uint64(sh), cnt, hh, gg, mnb, scal, icnt,
            )
        stop.record()
        stop.synchronize()
        return float(start.elapsed_time(stop))

    cases = {"sampled_bracket": (ulo, uhi, grid), "empty_bracket": (0, 1, grid),
             "sampled_half_grid": (ulo, uhi, max(1, grid // 2)), "sampled_double_grid": (ulo, uhi, 2 * grid)}
    out: dict[str, float] = {"bracket_width_bits": float(uhi - ulo), "float32_pass": float(fast32),
                             "grid": float(grid), "resident_grid": float(resident)}
    if grid != resident:
        cases["sampled_resident_grid"] = (ulo, uhi, resident)
    sizes = (1 << 14, 1 << 16, 1 << 18) if hasattr(kern, "_sample_size") else ()

    def with_sample(size: int, fn: Callable[[], Any]) -> Any:
        """``fn()`` with the backend's bracket sample set to ``size`` points."""
        chosen = kern._sample_size
        kern._sample_size = lambda _n: size
        try:
            return fn()
        finally:
            kern._sample_size = chosen

    def sample_step() -> tuple[float, tuple[int, int]]:
        times = []
        for _ in range(max(3, repeats)):
            cuda.synchronize()
            t0 = time.perf_counter()
            bracket = kern._sample_bracket(d, None, w, m)
            times.append(time.perf_counter() - t0)
        return statistics.median(times), bracket

    for size in sizes:  # each sample size's bracket, and its host step
        step, (lo_s, hi_s) = with_sample(size, sample_step)
        out[f"sample_{size}_step_ms"] = step * 1e3
        out[f"sample_{size}_width_bits"] = float(hi_s - lo_s)
        cases[f"sample_{size}_bracket"] = (lo_s, hi_s, grid)
    for label, (lo, hi, blocks) in cases.items():
        once(lo, hi, blocks)  # compiled and warm
        out[label + "_ms"] = statistics.median(once(lo, hi, blocks) for _ in range(max(1, repeats)))
    if queues and fast32:  # the sampled bracket with its inside points queued, then binned (both kernels)
        saved = kern._QUEUE_FROM
        kern._QUEUE_FROM = 0
        try:
            _, _, inside = kern._sample_bracket_inside(d, None, w, m)
            out["queue_cap"] = float(kern._queue_cap(n, grid, inside))
            once(ulo, uhi, grid, inside)
            out["sampled_queued_ms"] = statistics.median(once(ulo, uhi, grid, inside) for _ in range(max(1, repeats)))
            # the queued pass with each sample size's bracket: a narrower bracket leaves fewer
            # warps with an inside point to queue (the pass is short of issue slots), for a
            # longer host step (sample_<size>_step_ms above)
            for size in sizes:
                lo_s, hi_s, inside_s = with_sample(size, lambda: kern._sample_bracket_inside(d, None, w, m))
                out[f"sample_{size}_inside"] = float(inside_s)
                once(lo_s, hi_s, grid, inside_s)
                out[f"sample_{size}_queued_ms"] = statistics.median(
                    once(lo_s, hi_s, grid, inside_s) for _ in range(max(1, repeats)))
        finally:
            kern._QUEUE_FROM = saved
    return out


def _device_info() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"python": platform.python_version(), "host": platform.node()}
    info["gpu"] = torch.cuda.get_device_name(0)
    info["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    info["torch"] = torch.__version__
    import rad

    info["rad"] = rad.__file__
    info["rad_cpu_backend"] = rad.backends()["auto"]
    for mod in ("numba", "numba_cuda", "cupy", "jax", "numpy"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception as exc:  # not installed here
            info[mod] = f"unavailable ({type(exc).__name__})"
    return info


def check_size(n: int, args: argparse.Namespace) -> dict[str, Any]:
    """Time and check one pool size; every part reports its own error."""
    import numpy as np
    import torch

    import rad
    from rad._backends import get_backend
    from torch_pipeline import torch_select

    res: dict[str, Any] = {"n": n, "m": args.m_frac * n, "b": args.b}
    m, b = args.m_frac * n, args.b
    sync = torch.cuda.synchronize
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    gains = torch.rand(n, device="cuda", dtype=torch.float32, generator=gen)
    sync()
    try:
        res["sum_s"], res["sum_runs"], _ = _timed(lambda: torch.sum(gains), args.repeats, sync)
    except Exception:
        res["sum_error"] = traceback.format_exc()[-2000:]
    # rad on the device (the first call compiles the kernels: warm up first)
    dev_idx = None
    try:
        t0 = time.perf_counter()
        rad.select(gains, m, b, rng=args.seed)
        sync()
        res["rad_first_call_s"] = time.perf_counter() - t0
        # untimed calls after the compiling one: in the seventeenth session's run the first
        # timed calls at 1e8 took 7.1 ms and the same code 5.1 ms later in the process
        for _ in range(args.warmup):
            rad.select(gains, m, b, rng=args.seed)
        sync()
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            res["rad_s"], res["rad_runs"], dev_idx = _timed(
                lambda: rad.select(gains, m, b, rng=args.seed), args.repeats, sync
            )
        res["rad_warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in rec})
        res["rad_profile"] = _profile(lambda: rad.select(gains, m, b, rng=args.seed), sync)
        res["rad_kernels"] = _kernel_table(lambda: rad.select(gains, m, b, rng=args.seed), sync)
        res["rad_returns"] = type(dev_idx).__module__ + "." + type(dev_idx).__name__
        res["rad_x_sum"] = res["rad_s"] / res["sum_s"] if "sum_s" in res else None
    except Exception:
        res["rad_error"] = traceback.format_exc()[-3000:]
    try:  # the float32 pass with and without its queue of inside points, calls alternated
        kern = get_backend("cuda")
        if hasattr(kern, "_QUEUE_FROM") and dev_idx is not None:
            chosen, runs = kern._QUEUE_FROM, {"queued": [], "binned": []}
            try:
                for _ in range(args.repeats):
                    for label, start in (("queued", 0), ("binned", 1 << 62)):
                        kern._QUEUE_FROM = start
                        t, _, idx = _timed(lambda: rad.select(gains, m, b, rng=args.seed), 1, sync)
                        runs[label].append(t)
                        res[f"rad_{label}_same_indices"] = bool(torch.equal(torch.as_tensor(idx), dev_idx))
            finally:
                kern._QUEUE_FROM = chosen
            for label, ts in runs.items():
                res[f"rad_{label}_s"] = statistics.median(ts)
    except Exception:
        res["rad_queue_error"] = traceback.format_exc()[-3000:]
    # rad's phases, straight from the cuda backend
    try:
        from numba import cuda

        kern = get_backend("cuda")
        d = cuda.as_cuda_array(gains)
        w = 1.0 - m / n
        phases: dict[str, float] = {}
        phases["threshold_search_s"], _, found = _timed(
            lambda: kern.threshold_search(d, None, w, m, 1), args.repeats, sync
        )
        tau = found[1]
        kern.threshold_levels(d, None, w, m, 1)  # compiles the level loop's kernels
        phases["threshold_levels_s"], _, _ = _timed(  # the 16-bit level loop (the bracket's fallback)
            lambda: kern.threshold_levels(d, None, w, m, 1), max(1, args.repeats // 2), sync
        )
        phases["support_sums_s"], _, sums = _timed(lambda: kern.support_sums(d, None, w, tau, 1), args.repeats, sync)
        if hasattr(kern, "_TILE_MAX_BLOCKS"):  # both layouts of the canonical sums (the same bits)
            keep = kern._TILE_MAX_BLOCKS
            try:
                for label, limit in (("tile", 1 << 62), ("lane", 0)):
                    kern._TILE_MAX_BLOCKS = limit
                    kern.support_sums(d, None, w, tau, 1)  # compiled
                    phases[f"support_sums_{label}_s"], _, other = _timed(
                        lambda: kern.support_sums(d, None, w, tau, 1), args.repeats, sync)
                    phases[f"support_sums_{label}_same"] = float(other == sums)
            finally:
                kern._TILE_MAX_BLOCKS = keep
        sol = rad.solve(gains, m, b)
        key = 12345
        phases["depround_s"], _, plain_idx = _timed(
            lambda: kern.depround_params(d, None, w, sol.params, b, key, 1), args.repeats, sync
        )
        if hasattr(kern, "support_sums_sketched"):  # the support pass recording the sketch, DepRound from it
            phases["support_sums_sketched_s"], _, (sk_sums, sketch) = _timed(
                lambda: kern.support_sums_sketched(d, None, w, sol.threshold, 1), args.repeats, sync)
            phases["support_sums_sketched_same"] = float(
                sk_sums == kern.support_sums(d, None, w, sol.threshold, 1))
            phases["depround_sketched_s"], _, sk_idx = _timed(
                lambda: kern.depround_sketched(d, None, w, sol.params, b, key, sketch, 1), args.repeats, sync)
            phases["depround_sketched_same"] = float(
                np.array_equal(sk_idx.copy_to_host(), plain_idx.copy_to_host()))
        # inside the search and DepRound (private pieces: where the next optimisation goes)
        phases["search_sample_bracket_s"], _, (ulo, uhi) = _timed(
            lambda: kern._sample_bracket(d, None, w, m), args.repeats, sync
        )
        fast32 = hasattr(kern, "_fast32") and kern._fast32(d, None, w)
        phases["search_pass_gather_resolve_s"], _, _ = _timed(
            (lambda: kern._bracketed32(d, w, m, 1, ulo, uhi)) if fast32 else (
                lambda: kern._bracketed(d, None, w, m, 1, ulo, uhi)), args.repeats, sync
        )
        phases["depround_two_phases_s"], _, _ = _timed(
            lambda: kern._round_blocks(d, *kern._losses_arg(None), w, kern._dummy(), False, sol.params.as_tuple(),
                                       key, None, n),
            args.repeats, sync,
        )
        res["rad_phases"] = phases
        res["bracket_probe"] = bracket_probe(d, w, m, args.repeats)
        res["device_solution"] = {"k_star": sol.k_star, "threshold": sol.threshold, "value": sol.value,
                                  "capped": sol.capped}
    except Exception:
        res["phases_error"] = traceback.format_exc()[-3000:]
    # the PyTorch pipeline (its float64 prefix sums need ~50 GB at 1e9: numba's deferred frees first)
    try:
        from numba import cuda

        cuda.current_context().deallocations.clear()
    except Exception:  # an older numba-cuda: its frees happen later
        pass
    torch.cuda.empty_cache()
    try:
        tg = torch.Generator(device="cuda").manual_seed(args.seed)
        torch_select(gains, m, b, generator=tg)  # warm up
        res["torch_s"], res["torch_runs"], (tidx, tk, ttau) = _timed(
            lambda: torch_select(gains, m, b, generator=tg), max(1, args.repeats), sync
        )
        res["torch_k_star"], res["torch_threshold"], res["torch_selected"] = tk, ttau, int(tidx.numel())
        if "rad_s" in res:
            res["torch_over_rad"] = res["torch_s"] / res["rad_s"]
    except Exception:
        res["torch_error"] = traceback.format_exc()[-3000:]
    # the CPU backend on a host copy: the same k*, threshold, value and indices
    try:
        host = gains.cpu().numpy()
        cpu = get_backend("auto").name
        t0 = time.perf_counter()
        ref = rad.solve(host, m, b)
        res["cpu_backend"] = cpu
        res["cpu_solve_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref_idx = rad.select(host, m, b, rng=args.seed)
        res["cpu_select_s"] = time.perf_counter() - t0
        dev = rad.solve(gains, m, b)
        res["same_k_star"] = dev.k_star == ref.k_star
        res["same_threshold"] = dev.threshold == ref.threshold
        res["same_value"] = dev.value == ref.value
        res["same_params"] = dev.params == ref.params
        if dev_idx is not None:
            res["same_indices"] = bool(np.array_equal(dev_idx.cpu().numpy(), ref_idx))
        res["cpu_solution"] = {"k_star": ref.k_star, "threshold": ref.threshold, "value": ref.value,
                               "capped": ref.capped}
    except Exception:
        res["cpu_check_error"] = traceback.format_exc()[-3000:]
    return res


def check_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """CuPy, JAX, numba and PyTorch inputs on a small pool: the same indices, the input's kind back."""
    import numpy as np

    import rad

    out: dict[str, Any] = {}
    n, m, b = 1_000_000, 50_000.0, 1000
    host = np.random.default_rng(args.seed).random(n).astype(np.float32)
    want = rad.select(host, m, b, rng=3)

    def record(name: str, make: Callable[[], Any], to_numpy: Callable[[Any], Any]) -> None:
        try:
            got = rad.select(make(), m, b, rng=3)
            out[name] = {"returns": type(got).__module__ + "." + type(got).__name__,
                         "same_indices": bool(np.array_equal(np.asarray(to_numpy(got)), want))}
        except Exception:
            out[name] = {"error": traceback.format_exc()[-2000:]}

    def torch_in() -> Any:
        import torch

        return torch.as_tensor(host, device="cuda")

    def cupy_in() -> Any:
        import cupy

        return cupy.asarray(host)

    def jax_in() -> Any:
        import jax

        return jax.device_put(host, jax.devices("gpu")[0])

    def numba_in() -> Any:
        from numba import cuda

        return cuda.to_device(host)

    record("torch", torch_in, lambda x: x.cpu().numpy())
    record("cupy", cupy_in, lambda x: x.get())
    record("jax", jax_in, lambda x: np.asarray(x))
    record("numba", numba_in, lambda x: x.copy_to_host())
    try:
        got = rad.select(torch_in(), m, b, rng=3, as_numpy=True)
        out["as_numpy"] = {"type": type(got).__name__, "same_indices": bool(np.array_equal(got, want))}
    except Exception:
        out["as_numpy"] = {"error": traceback.format_exc()[-2000:]}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", type=float, default=[1e8, 1e9])
    p.add_argument("--b", type=int, default=1000, help="batch size (default 1000)")
    p.add_argument("--m-frac", type=float, default=0.05, help="m as a fraction of n (default 0.05)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3, help="untimed selects before the timed ones (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.path.join(HERE, "results_gpu.json"))
    args = p.parse_args()
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        report["device"] = _device_info()
    except Exception:
        report["device_error"] = traceback.format_exc()[-2000:]
        print(json.dumps(report, indent=1))
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)
        return 1
    report["sizes"] = []
    for size in args.sizes:
        res = check_size(int(size), args)
        import torch

        torch.cuda.empty_cache()  # the pool's tensors are gone with check_size's frame
        report["sizes"].append(res)
        print(json.dumps({k: v for k, v in res.items() if not k.endswith("_runs")}, indent=1), flush=True)
        with open(args.out, "w") as fh:  # partial results survive a later failure
            json.dump(report, fh, indent=1)
    report["inputs"] = check_inputs(args)
    big = max(report["sizes"], key=lambda r: r["n"])
    report["targets"] = {
        "n": big["n"],
        "rad_x_sum<=3": (big.get("rad_x_sum") or float("inf")) <= 3.0,
        "torch_over_rad>=30": (big.get("torch_over_rad") or 0.0) >= 30.0,
        "same_k_star_and_threshold": bool(big.get("same_k_star") and big.get("same_threshold")),
    }
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1)
    print(json.dumps({"inputs": report["inputs"], "targets": report["targets"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

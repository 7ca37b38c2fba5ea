"""Print the before/after table of ``benchmarks/gpu_before_after.sh``'s two JSON files.

    python benchmarks/gpu_ab_summary.py DIR    # DIR holds results_gpu_before.json and results_gpu_after.json

Per pool size: the GPU sum pass, ``rad.select`` on the device, their ratio, the PyTorch
pipeline over rad, the checks against the CPU backend, and every phase the JSON records.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    runs = {}
    for label in ("before", "after"):
        path = os.path.join(folder, f"results_gpu_{label}.json")
        try:
            with open(path) as fh:
                runs[label] = {r["n"]: r for r in json.load(fh).get("sizes", [])}
        except (OSError, ValueError) as exc:
            print(f"{label}: {exc}")
    sizes = sorted({n for r in runs.values() for n in r})
    for n in sizes:
        print(f"n = {n:.0e}")
        for label, r in runs.items():
            if n not in r:
                continue
            row = r[n]
            errors = {k: v[-200:] for k, v in row.items() if k.endswith("error")}
            print(f"  {label:6s} sum {row.get('sum_s', 0) * 1e3:7.3f} ms  rad {row.get('rad_s', 0) * 1e3:7.2f} ms"
                  f"  rad/sum {row.get('rad_x_sum') or 0:6.1f}  torch/rad {row.get('torch_over_rad') or 0:5.2f}"
                  f"  same k*/tau/indices {row.get('same_k_star')}/{row.get('same_threshold')}/"
                  f"{row.get('same_indices')}  {errors or ''}")
            phases = {k: round(v * 1e3, 3) if k.endswith("_s") else v for k, v in row.get("rad_phases", {}).items()}
            print(f"         phases (ms): {phases}")
            print(f"         bracket probe (ms): {row.get('bracket_probe')}")
            for line in row.get("rad_kernels", "").splitlines()[3:11]:
                cols = line.split()
                if len(cols) > 8:
                    print(f"         {cols[0][:60]:60s} {cols[-5]:>10s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

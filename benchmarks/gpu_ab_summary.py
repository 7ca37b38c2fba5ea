"""Print the before/after table of ``benchmarks/gpu_before_after.sh``'s two JSON files.

    python benchmarks/gpu_ab_summary.py DIR    # DIR holds results_gpu_before.json and results_gpu_after.json

(and the later rounds' ``results_gpu_<label>_r<k>.json``, each printed under its own label)

Per pool size: the GPU sum pass, ``rad.select`` on the device, their ratio, the PyTorch
pipeline over rad, the checks against the CPU backend, and every phase the JSON records.
"""

from __future__ import annotations

import json
import os
import re
import sys


def main() -> int:
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    runs = {}
    # round 1's files, then those of later rounds (gpu_before_after.sh's ROUNDS: _r2, _r3, ...)
    names = sorted((f for f in os.listdir(folder) if re.fullmatch(r"results_gpu_(before|after)(_r\d+)?\.json", f)),
                   key=lambda f: (int(re.search(r"_r(\d+)", f).group(1)) if "_r" in f else 1, "after" in f))
    for name in names:
        label = name[len("results_gpu_"):-len(".json")]
        try:
            with open(os.path.join(folder, name)) as fh:
                runs[label] = {r["n"]: r for r in json.load(fh).get("sizes", [])}
        except (OSError, ValueError) as exc:
            print(f"{label}: {exc}")
    if not runs:
        print(f"no results_gpu_before*.json or results_gpu_after*.json in {folder}")
    sizes = sorted({n for r in runs.values() for n in r})
    for n in sizes:
        print(f"n = {n:.0e}")
        for label, r in runs.items():
            if n not in r:
                continue
            row = r[n]
            errors = {k: v[-200:] for k, v in row.items() if k.endswith("error")}
            print(f"  {label:9s} sum {row.get('sum_s', 0) * 1e3:7.3f} ms  rad {row.get('rad_s', 0) * 1e3:7.2f} ms"
                  f"  rad/sum {row.get('rad_x_sum') or 0:6.1f}  torch/rad {row.get('torch_over_rad') or 0:5.2f}"
                  f"  same k*/tau/indices {row.get('same_k_star')}/{row.get('same_threshold')}/"
                  f"{row.get('same_indices')}  {errors or ''}")
            alternated = {k: round(row[k] * 1e3, 2) for k in ("rad_queued_s", "rad_binned_s") if k in row}
            if alternated:
                print(f"         queue on / off, calls alternated (ms): {alternated}")
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

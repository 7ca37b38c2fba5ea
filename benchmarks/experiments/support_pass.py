"""The support pass of several builds of rad, alternated process by process.

Usage: python benchmarks/experiments/support_pass.py N REPS OUT.json NAME=PYTHONPATH [NAME=PYTHONPATH ...]

Each child times ``rad._core.support_sums`` (float32 uniform gains, RAD losses with
``w = 0.7``, ``tau = 0.3``: 70% of the points in the support) and the bandwidth probe
``rad._core.stream_sum`` on one and two threads, medians of 15. See README.md here for
the builds the experiment compares.
"""
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import sys, time, statistics, json, numpy as np
from rad import _core
n = int(float(sys.argv[1]))
g = np.random.default_rng(0).random(n, dtype=np.float32)
out = {}
for t in (1, 2):
    for name, f in (("support", lambda: _core.support_sums(g, None, 0.7, 0.3, t)),
                    ("probe", lambda: _core.stream_sum(g, t))):
        f()
        ts = []
        for _ in range(15):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        out[f"{name}_t{t}"] = statistics.median(ts)
out["h"] = _core.support_sums(g, None, 0.7, 0.3, 1)[0]
print(json.dumps(out))
'''


def main() -> None:
    n, reps, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    builds = dict(arg.split("=", 1) for arg in sys.argv[4:])
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    for _ in range(reps):
        for name, path in builds.items():
            r = subprocess.run([sys.executable, "-c", CHILD, n], capture_output=True, text=True, check=True,
                               env=dict(os.environ, PYTHONPATH=path))
            runs[name].append(json.loads(r.stdout.strip().splitlines()[-1]))
            print(name, runs[name][-1], flush=True)
    summary = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0] if k != "h"} for name, rs in runs.items()}
    print(json.dumps(summary, indent=1))
    with open(out_path, "w") as f:
        json.dump({"n": n, "runs": runs, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()

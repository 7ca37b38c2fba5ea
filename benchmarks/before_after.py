"""Before/after: rad.select of two builds of rad, alternated process by process (same machine,
same minutes). Usage: python benchmarks/before_after.py N REPS OUT.json OLD_PYTHONPATH NEW_PYTHONPATH [WORKLOAD]

The workload is the issue's (m = 0.3 n, b = 1000); with ``capped`` it is the capped path's
(m = 0.001 n, b = n / 10: caps bind); with ``m=F`` it is m = F n, b = 1000; with ``b=B`` it is
m = 0.3 n, b = B (B above n / 65,536: blocks with crossings in DepRound). The thread
counts and backends timed: AB_THREADS (default 1,2) and AB_BACKENDS (default cpp,numba).

Build the old one with: git archive <commit> | tar -x -C /tmp/old; cmake -S /tmp/old -B /tmp/old/build
-G Ninja; cmake --build /tmp/old/build; cp /tmp/old/build/_core*.so /tmp/old/python/rad/
"""
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import os, sys, time, statistics, json, numpy as np, rad
n = int(float(sys.argv[1]))
g = np.random.default_rng(0).random(n, dtype=np.float32)
capped = sys.argv[2] == "capped"
frac = float(sys.argv[2][2:]) if sys.argv[2].startswith("m=") else 0.3
budget = int(float(sys.argv[2][2:])) if sys.argv[2].startswith("b=") else 1000
m, b = (0.001 * n, n // 10) if capped else (frac * n, budget)
out = {}
backends = os.environ.get("AB_BACKENDS", "cpp,numba").split(",")
for be in backends:
    small = 1 << 20
    rad.select(g[:small], m * small / n, max(1, b * small // n), rng=0, backend=be)
for t in [int(x) for x in os.environ.get("AB_THREADS", "1,2").split(",")]:
    for be in backends:
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            idx = rad.select(g, m, b, rng=0, backend=be, threads=t)
            ts.append(time.perf_counter() - t0)
        out[f"{be}_t{t}"] = statistics.median(ts)
        out[f"{be}_t{t}_idx"] = int(idx.sum())
ts = []
for _ in range(5):
    t0 = time.perf_counter(); np.sum(g); ts.append(time.perf_counter() - t0)
out["np_sum"] = statistics.median(ts)
print(json.dumps(out))
'''
res = {"old": [], "new": []}
for _ in range(int(sys.argv[2])):
    for name, path in (("old", sys.argv[4]), ("new", sys.argv[5])):
        workload = sys.argv[6] if len(sys.argv) > 6 else "uncapped"
        r = subprocess.run([sys.executable, "-c", CHILD, sys.argv[1], workload], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=path))
        res[name].append(json.loads(r.stdout.strip().splitlines()[-1]))
        print(name, res[name][-1], flush=True)
summary = {}
for k in res["new"][0]:
    if k.endswith("_idx"):
        summary[k + "_same"] = all(r[k] == res["old"][0][k] for r in res["old"] + res["new"])
        continue
    o = statistics.median(r[k] for r in res["old"])
    nw = statistics.median(r[k] for r in res["new"])
    summary[k] = {"old": o, "new": nw, "speedup": o / nw}
print(json.dumps(summary, indent=1))
with open(sys.argv[3], "w") as f:
    json.dump({"runs": res, "summary": summary}, f, indent=1)

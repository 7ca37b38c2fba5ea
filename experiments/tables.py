"""Print the Markdown tables of ``experiments/REPORT.md`` from a run's result files.

Usage: ``PYTHONPATH=python python experiments/tables.py experiments/mnist1d``
(also regenerates the plots there with ``--plots``).
"""

from __future__ import annotations

import sys

import numpy as np

from rad.distill.loop import load_results, summarize
from rad.distill.stats import endpoints, paired_comparisons, paired_table


def _per_seed(result, key):
    return np.array([info[key] for info in result["seeds"].values()], dtype=float)


def main(path: str, plots: bool = False) -> None:
    res = load_results(path)
    cfg, env = res["config"], res["environment"]
    teacher = _per_seed(res, "teacher_test_acc")
    s0 = _per_seed(res, "student0_test_acc")
    m, m_true = _per_seed(res, "m"), _per_seed(res, "m_true")
    pool = _per_seed(res, "pool_size")
    full = np.array([r["student_test_acc"] for r in res["rows"] if r["strategy"] == "full_pool"])
    print(f"backend {env['keras_backend']}, keras {env['keras']}, total {env['total_time_s']:.0f} s, "
          f"{len(res['seeds'])} seeds")
    print(f"teacher test acc {teacher.mean():.4f} ± {teacher.std(ddof=1):.4f} "
          f"(min {teacher.min():.4f}, max {teacher.max():.4f})")
    print(f"student round 0 {s0.mean():.4f} ± {s0.std(ddof=1):.4f}")
    print(f"full pool distilled {full.mean():.4f} ± {full.std(ddof=1):.4f}")
    print(f"m_hat {m.mean():.0f} ± {m.std(ddof=1):.0f}, true m {m_true.mean():.0f} ± "
          f"{m_true.std(ddof=1):.0f}, pool {pool.mean():.0f}, m/n {np.mean(m / pool):.3f}")
    print(f"teacher val acc {_per_seed(res, 'teacher_val_acc').mean():.4f}, "
          f"pool acc {_per_seed(res, 'teacher_pool_acc').mean():.4f}")
    print("\n### student test accuracy\n")
    print(summarize(res))
    ep = endpoints(res)
    print("\n### endpoint: mean accuracy over rounds 1..T (mean ± std over seeds)\n")
    for s, d in ep.items():
        v = np.array(list(d.values()))
        if v.size < 2:
            continue
        print(f"| {s} | {v.mean():.4f} ± {v.std(ddof=1):.4f} |")
    print("\n### teacher accuracy on the selected inputs\n")
    print(summarize(res, "teacher_acc_selected", 3))
    print("\n### realized gain, Eq. (4)\n")
    print(summarize(res, "realized_gain", 1))
    print("\n### paired: RAD minus each, endpoint = mean accuracy over rounds 1..T\n")
    print(paired_table(res))
    print("\n### paired: RAD minus each, final-round accuracy (secondary)\n")
    print(paired_table(res, rounds=[int(cfg["rounds"])]))
    print("\n### paired: RAD minus each, realized gain Eq. (4) summed over rounds (secondary)\n")
    comps = paired_comparisons(res, metric="realized_gain")
    for c in comps:
        if c.baseline == "no_query":
            continue
        T = int(cfg["rounds"])
        print(f"| {c.baseline} | {T * c.mean:+.1f} ± {T * c.std:.1f} | {c.wins}/{c.n} | "
              f"{c.p_t:.2g} | {'-' if c.p_holm is None else f'{c.p_holm:.2g}'} |")
    if plots:
        from rad.distill.plots import make_all_plots

        for p in make_all_plots(res, path):
            print("wrote", p)


if __name__ == "__main__":
    main(sys.argv[1], "--plots" in sys.argv[2:])

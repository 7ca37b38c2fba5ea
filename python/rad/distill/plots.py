"""PNG plots of a :func:`rad.distill.run_experiment` result (matplotlib, Agg backend).

One function per figure of the paper that the run can reproduce: accuracy vs soft labels
(Fig. 3), teacher accuracy vs student margin (Fig. 1), RAD's sampling distribution
(Fig. 2) and the realized gain of Eq. (4) (Fig. 5); plus the paired differences.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

import numpy as np

__all__ = ["make_all_plots", "plot_accuracy_vs_queries", "plot_paired_differences",
           "plot_rad_distribution", "plot_realized_gain", "plot_teacher_vs_margin"]

_CONTROL_STYLE = {"oracle": dict(color="k", ls=":"), "no_query": dict(color="0.5", ls="--")}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(rows: list[dict[str, Any]], strategy: str, metric: str,
            key: str = "queries") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs = sorted({r[key] for r in rows if r["strategy"] == strategy})
    vals = [np.array([r[metric] for r in rows if r["strategy"] == strategy and r[key] == x],
                     dtype=float) for x in xs]
    mean = np.array([v.mean() for v in vals])
    std = np.array([v.std(ddof=1) if v.size > 1 else 0.0 for v in vals])
    return np.array(xs), mean, std


def _title(result: dict[str, Any]) -> str:
    c = result["config"]
    return (f"{c['dataset']}: |A|={c['n_labeled']}, b={c['b']}, "
            f"{len(result['seeds'])} seeds (mean ± 1 std)")


def plot_accuracy_vs_queries(result: dict[str, Any], path: str) -> str:
    """Student test accuracy vs soft labels queried (Fig. 3 shape), with the controls."""
    plt = _plt()
    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(9, 4.8))
    b, rounds = int(result["config"]["b"]), int(result["config"]["rounds"])
    for s in dict.fromkeys(r["strategy"] for r in rows):
        if s == "full_pool":
            continue
        if s == "no_query":
            _, mean, std = _series(rows, s, "student_test_acc", key="round")
            q = b * np.arange(len(mean))
        else:
            q, mean, std = _series(rows, s, "student_test_acc")
        style = _CONTROL_STYLE.get(s, {})
        ax.plot(q, mean, marker="o", ms=3, label=s + (" (control)" if s in _CONTROL_STYLE else ""),
                lw=2.4 if s == "rad" else 1.2, **style)
        ax.fill_between(q, mean - std, mean + std, alpha=0.10, color=style.get("color"))
    full = np.array([r["student_test_acc"] for r in rows if r["strategy"] == "full_pool"])
    if full.size:
        ax.axhline(full.mean(), color="tab:green", ls="-.", lw=1,
                   label=f"full pool distilled (upper bound) {full.mean():.3f}")
    teacher = np.array([info["teacher_test_acc"] for info in result["seeds"].values()])
    ax.set_xlim(-0.02 * b * rounds, b * rounds * 1.02)
    ax.set_xlabel("soft labels queried")
    ax.set_ylabel("student test accuracy")
    ax.set_title(_title(result) + f"; teacher {teacher.mean():.3f}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_teacher_vs_margin(result: dict[str, Any], path: str) -> str:
    """Teacher accuracy on pool points vs the round-0 student's margin (Fig. 1, deciles)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    xs, ys = [], []
    for info in result["seeds"].values():
        d = info["margin_vs_teacher"]
        ax.plot(d["student_margin"], d["teacher_acc"], color="0.7", lw=0.8)
        xs.append(d["student_margin"])
        ys.append(d["teacher_acc"])
    ax.plot(np.mean(xs, axis=0), np.mean(ys, axis=0), "o-", color="tab:blue",
            label="mean over seeds (grey: each seed)")
    ax.set_xlabel("round-0 student margin (top1 - top2), decile bins of the pool")
    ax.set_ylabel("teacher accuracy in the bin")
    ax.set_title("the teacher errs most where the student is unsure", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_rad_distribution(result: dict[str, Any], path: str,
                          accuracies: tuple[float, ...] = (0.5, 0.7, 0.9, 0.99)) -> str:
    """RAD's inclusion probabilities vs gain (Fig. 2) on the first seed's round-0 pool.

    Drawn for the run's estimated teacher accuracy ``1 - m/n`` and for hypothetical
    accuracies (``m = (1 - accuracy) n``), each with the default ``w = 1 - m/n``.
    """
    import rad

    plt = _plt()
    info = next(iter(result["seeds"].values()))
    g = np.asarray(info["pool_gains_round0"], dtype=np.float64)
    b = int(result["config"]["b"])
    order = np.argsort(-g)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    est = 1.0 - float(info["m"]) / g.size
    for acc in sorted(set(accuracies) | {round(est, 3)}):
        sol = rad.solve(g, (1.0 - acc) * g.size, b)
        p = np.asarray(sol.probabilities())[order]
        lab = f"teacher acc {acc:.3f}" + (" (this run's m)" if acc == round(est, 3) else "")
        ax.plot(np.arange(g.size), p, lw=2.2 if acc == round(est, 3) else 1.0,
                label=f"{lab}, k*={sol.k_star}")
    ax.set_xlabel("pool points, sorted by gain (1 - student margin), high to low")
    ax.set_ylabel("RAD inclusion probability")
    ax.set_title(f"RAD's sampling distribution, b={b}, n={g.size}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_realized_gain(result: dict[str, Any], path: str) -> str:
    """Realized gain of Eq. (4) per round (Fig. 5): correct gains minus ``w`` x wrong."""
    plt = _plt()
    rows = [r for r in result["rows"] if r["round"] > 0
            and r["strategy"] not in ("no_query", "full_pool")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in dict.fromkeys(r["strategy"] for r in rows):
        t, mean, std = _series(rows, s, "realized_gain", key="round")
        ax.errorbar(t + 0.03 * (zlib.crc32(s.encode()) % 7 - 3), mean, yerr=std, marker="o", ms=3,
                    capsize=2, label=s, lw=2.4 if s == "rad" else 1.0,
                    **_CONTROL_STYLE.get(s, {}))
    ax.set_xlabel("round")
    ax.set_ylabel("realized gain, Eq. (4)  (sum over the b picks)")
    ax.set_title("gain of correctly labeled picks minus w x gain of mislabeled picks",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_paired_differences(result: dict[str, Any], path: str, reference: str = "rad") -> str:
    """Per-seed ``reference - baseline`` on the endpoint (mean accuracy over rounds)."""
    from rad.distill.stats import endpoints

    plt = _plt()
    ep = endpoints(result)
    ref = ep[reference]
    names = [s for s in ep if s not in (reference, "full_pool")]
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, s in enumerate(names):
        seeds = sorted(set(ref) & set(ep[s]), key=int)
        d = 100 * np.array([ref[x] - ep[s][x] for x in seeds])
        ax.scatter(np.full(d.size, i) + np.linspace(-0.15, 0.15, d.size), d, s=12,
                   color="tab:blue")
        ax.errorbar(i + 0.3, d.mean(), yerr=d.std(ddof=1) if d.size > 1 else 0, fmt="s",
                    color="k", capsize=3)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, fontsize=8)
    ax.set_ylabel(f"{reference} minus strategy (pp)")
    ax.set_title("paired differences over seeds: mean test accuracy over rounds 1..T",
                 fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make_all_plots(result: dict[str, Any], output_dir: str) -> list[str]:
    """Write every plot into ``output_dir``; return their paths."""
    os.makedirs(output_dir, exist_ok=True)
    j = os.path.join
    out = [
        plot_accuracy_vs_queries(result, j(output_dir, "accuracy_vs_queries.png")),
        plot_teacher_vs_margin(result, j(output_dir, "teacher_acc_vs_margin.png")),
        plot_rad_distribution(result, j(output_dir, "rad_distribution.png")),
        plot_realized_gain(result, j(output_dir, "realized_gain.png")),
    ]
    if "rad" in result["config"]["strategies"] and len(result["seeds"]) > 1:
        out.append(plot_paired_differences(result, j(output_dir, "paired_differences.png")))
    return out

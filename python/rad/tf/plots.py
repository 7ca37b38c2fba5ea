"""PNG plots of a :func:`rad.tf.run_experiment` result (matplotlib, Agg backend)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["make_all_plots", "plot_accuracy_vs_queries", "plot_rad_distribution",
           "plot_teacher_vs_margin"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_accuracy_vs_queries(result: dict[str, Any], path: str) -> str:
    """Student test accuracy vs soft labels queried; mean ± 1 std shaded per strategy."""
    plt = _plt()
    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in dict.fromkeys(r["strategy"] for r in rows):
        q = sorted({r["queries"] for r in rows if r["strategy"] == s})
        acc = [np.array([r["student_test_acc"] for r in rows
                         if r["strategy"] == s and r["queries"] == qq]) for qq in q]
        mean = np.array([a.mean() for a in acc])
        std = np.array([a.std(ddof=1) if a.size > 1 else 0.0 for a in acc])
        ax.plot(q, mean, marker="o", ms=3, label=s, lw=2.2 if s == "rad" else 1.2)
        ax.fill_between(q, mean - std, mean + std, alpha=0.12)
    n_seeds = len(result["seeds"])
    ax.set_xlabel("soft labels queried")
    ax.set_ylabel("student test accuracy")
    ax.set_title(f"{result['config']['dataset']}: mean ± 1 std over {n_seeds} seeds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_teacher_vs_margin(result: dict[str, Any], path: str) -> str:
    """Teacher accuracy on pool points vs the round-0 student's margin (decile bins)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for seed, info in result["seeds"].items():
        d = info["margin_vs_teacher"]
        ax.plot(d["student_margin"], d["teacher_acc"], marker="o", ms=3, label=f"seed {seed}")
    ax.set_xlabel("student margin (top1 - top2), decile bins")
    ax.set_ylabel("teacher accuracy in the bin")
    ax.set_title("the teacher errs most where the student is unsure")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_rad_distribution(result: dict[str, Any], path: str,
                          accuracies: tuple[float, ...] = (0.5, 0.7, 0.9, 0.99)) -> str:
    """RAD's inclusion probabilities vs gain, for several hypothetical teacher accuracies.

    Uses the round-0 student's margin gains on the pool of the first seed and the run's
    ``b``; ``m = (1 - accuracy) n`` and the default ``w = 1 - m/n``.
    """
    import rad

    plt = _plt()
    info = next(iter(result["seeds"].values()))
    g = np.asarray(info["pool_gains_round0"], dtype=np.float64)
    b = int(result["config"]["b"])
    order = np.argsort(-g)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for acc in accuracies:
        m = (1.0 - acc) * g.size
        sol = rad.solve(g, m, b)
        p = np.asarray(sol.probabilities())[order]
        ax.plot(np.arange(g.size), p, label=f"teacher acc {acc:.2f} (k*={sol.k_star})")
    ax.set_xlabel("pool points, sorted by gain (1 - student margin), high to low")
    ax.set_ylabel("RAD inclusion probability")
    ax.set_title(f"RAD's sampling distribution, b={b}, n={g.size}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def make_all_plots(result: dict[str, Any], output_dir: str) -> list[str]:
    """Write the three plots into ``output_dir``; return their paths."""
    os.makedirs(output_dir, exist_ok=True)
    return [
        plot_accuracy_vs_queries(result, os.path.join(output_dir, "accuracy_vs_queries.png")),
        plot_teacher_vs_margin(result, os.path.join(output_dir, "teacher_acc_vs_margin.png")),
        plot_rad_distribution(result, os.path.join(output_dir, "rad_distribution.png")),
    ]

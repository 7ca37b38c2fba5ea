"""Paired comparisons over seeds, fixed before the run.

Endpoint (per seed and strategy): the student's test accuracy averaged over rounds
``1..T``. Within a seed every strategy shares the split, teacher, round-0 student and
initialisations, so strategies are compared by **paired** differences over seeds:
``d_s = endpoint(reference, s) - endpoint(baseline, s)``; reported as mean +- std, the
number of seeds the reference wins, a paired t-test and a Wilcoxon signed-rank test,
with Holm's step-down correction over the baselines of the family (the controls are
reported beside it, uncorrected).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PairedComparison", "endpoints", "holm", "paired_comparisons", "paired_table"]


@dataclass
class PairedComparison:
    """``reference - baseline`` on the endpoint, over seeds."""

    baseline: str
    n: int
    mean: float
    std: float
    wins: int
    p_t: float
    p_wilcoxon: float
    p_holm: float | None


def endpoints(result: dict[str, Any], metric: str = "student_test_acc",
              rounds: Sequence[int] | None = None) -> dict[str, dict[str, float]]:
    """``{strategy: {seed: mean of metric over rounds}}`` (rounds ``1..T`` by default)."""
    rows = result["rows"]
    if rounds is None:
        rounds = range(1, int(result["config"]["rounds"]) + 1)
    wanted = set(int(t) for t in rounds)
    acc: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        if int(r["round"]) in wanted:
            acc.setdefault(r["strategy"], {}).setdefault(str(r["seed"]), []).append(
                float(r[metric]))
    return {s: {seed: float(np.mean(v)) for seed, v in d.items()
                if len(v) == len(wanted)} for s, d in acc.items()}


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (monotone, capped at 1).

    A NaN p-value (a test that could not be made) stays NaN and is not counted among the
    tests.
    """
    p = np.asarray(pvalues, dtype=float)
    adj = np.full_like(p, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid])]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (order.size - rank) * p[i])
        adj[i] = min(1.0, running)
    return [float(v) for v in adj]


def _tests(d: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    # Every seed with the same difference (to the rounding of the per-round means): the
    # t statistic is 0/0, not a tiny p-value from 1e-17 of noise.
    spread = float(np.max(d) - np.min(d)) if d.size else 0.0
    if d.size < 2 or spread <= 1e-9 * max(1e-12, float(np.max(np.abs(d)))):
        zero = bool(np.all(np.abs(d) <= 1e-12))
        return (1.0 if zero else float("nan")), 1.0 if zero else float("nan")
    p_t = float(stats.ttest_1samp(d, 0.0).pvalue)
    p_w = float(stats.wilcoxon(d).pvalue) if np.any(d != 0) else 1.0
    return p_t, p_w


def paired_comparisons(result: dict[str, Any], reference: str = "rad",
                       family: Sequence[str] | None = None,
                       others: Sequence[str] = ("oracle", "no_query"),
                       metric: str = "student_test_acc",
                       rounds: Sequence[int] | None = None) -> list[PairedComparison]:
    """Paired ``reference - baseline`` comparisons; Holm over ``family``.

    Parameters
    ----------
    result : dict
        An experiment's results (``results.json``: its ``config`` and ``rows``).
    reference : str
        The strategy every other one is compared with.
    family : sequence of str, optional
        Baselines whose p-values are Holm-corrected together (default: every strategy
        in the config except the reference).
    others : sequence of str
        Also compared, uncorrected (controls).
    metric : str
        The row field compared, averaged over ``rounds`` per seed (:func:`endpoints`).
    rounds : sequence of int, optional
        The rounds averaged (default ``1..T``).

    Returns
    -------
    list of PairedComparison
        The family first (Holm-adjusted), then the others; seeds paired.
    """
    ep = endpoints(result, metric, rounds)
    if family is None:
        family = [s for s in result["config"]["strategies"] if s != reference]
    family = [s for s in family if s in ep]
    others = [s for s in others if s in ep and s not in family and s != reference]
    ref = ep[reference]
    out: list[PairedComparison] = []
    for s in list(family) + list(others):
        seeds = sorted(set(ref) & set(ep[s]), key=int)
        d = np.array([ref[x] - ep[s][x] for x in seeds])
        p_t, p_w = _tests(d)
        out.append(PairedComparison(s, d.size, float(d.mean()),
                                    float(d.std(ddof=1)) if d.size > 1 else 0.0,
                                    int((d > 0).sum()), p_t, p_w, None))
    adj = holm([c.p_t for c in out[:len(family)]]) if family else []
    for c, a in zip(out, adj):
        c.p_holm = a
    return out


def paired_table(result: dict[str, Any], reference: str = "rad", **kw: Any) -> str:
    """Markdown table of :func:`paired_comparisons` (differences in percentage points)."""
    comps = paired_comparisons(result, reference, **kw)
    lines = [f"| {reference} minus | n seeds | mean ± std (pp) | {reference} wins | "
             "paired t p | Holm p | Wilcoxon p |",
             "|---|---|---|---|---|---|---|"]
    for c in comps:
        holm_p = "-" if c.p_holm is None else f"{c.p_holm:.3f}"
        lines.append(f"| {c.baseline} | {c.n} | {100 * c.mean:+.2f} ± {100 * c.std:.2f} | "
                     f"{c.wins}/{c.n} | {c.p_t:.3f} | {holm_p} | {c.p_wilcoxon:.3f} |")
    return "\n".join(lines)

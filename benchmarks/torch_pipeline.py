"""The PyTorch baseline of the GPU benchmark: RAD in ten lines of sort and cumsum.

What a user writes without rad: sort the gains, find Theorem 1's ``k*`` with prefix sums
and ``argmax``, take ``q = min(1, b p*)`` and draw ``b`` points by systematic sampling. It
is fast on a GPU but not rad's answer: the capped probabilities are clipped instead of
solved (the batch game's optimum differs once a cap binds), systematic sampling is not
DepRound (its inclusions are not negatively correlated in the same way, and with clipped
``q`` the sample size can fall short of ``b``), and the float sums follow the GPU's order.
``benchmarks/device_check_gpu.py`` times it against ``rad.select`` on the same gains.

Usage::

    idx, kstar, tau = torch_select(gains, m, b, generator=torch.Generator("cuda").manual_seed(0))
"""

from __future__ import annotations

from typing import Any

__all__ = ["torch_select"]


def torch_select(
    gains: Any, m: float, b: int, *, w: float | None = None, generator: Any = None
) -> tuple[Any, int, float]:
    """RAD by sort + cumsum on the gains' device.

    Parameters
    ----------
    gains : torch.Tensor, shape (n,)
        Non-negative gains (float32 or float64) on any device.
    m : float
        The teacher's mistakes.
    b : int
        The batch size.
    w : float, optional
        RAD loss weight; default ``1 - m / n``.
    generator : torch.Generator, optional
        For the systematic sample's single uniform.

    Returns
    -------
    (indices, k_star, threshold)
        ``indices``: int64 tensor of at most ``b`` distinct indices (sorted); ``k_star``
        and ``threshold`` from the float64 prefix sums.
    """
    import torch

    n = gains.numel()
    w = 1.0 - m / n if w is None else w
    vals, order = torch.sort(gains, descending=True)  # 1. sort
    v = vals.double()
    inv = torch.reciprocal(v * (1.0 + w))
    inv[v <= 0] = 0.0
    h = torch.cumsum(inv, 0)  # 2. prefix sums (inclusive)
    gr = v * inv
    gsum = torch.cumsum(gr, 0)
    # 3. Theorem 1: position k joins while g_k H_{<k} >= G_{<k} - m (ties not grouped)
    joins = v * (h - inv) >= (gsum - gr) - m
    del gr, gsum
    kstar = int(torch.argmax((~joins).to(torch.int8)).item()) if not bool(joins.all()) else n
    kstar = max(kstar, 1)
    q = torch.clamp(b * inv[:kstar] / h[kstar - 1], max=1.0)  # 4. capped b p*, clipped
    cum = torch.cumsum(q, 0)  # 5. systematic sampling
    u = torch.rand((), device=gains.device, generator=generator, dtype=torch.float64)
    marks = u + torch.arange(b, device=gains.device, dtype=torch.float64)
    picks = torch.searchsorted(cum, marks, right=True)
    picks = torch.unique(picks[picks < kstar])
    idx, _ = torch.sort(order[picks])
    return idx, kstar, float(vals[kstar - 1].item())

"""Per-point gains from a student's class probabilities or logits.

RAD (and the uncertainty baselines it is compared with) score each pool point by how
uncertain the student is about it. This module turns an ``(n, k)`` matrix of student
outputs -- probabilities or logits, float16/float32/float64, possibly a read-only memory
map -- into one score per row:

* :func:`margins` -- ``top1 - top2`` in ``[0, 1]`` (lower = more uncertain);
* :func:`margin_gain` -- ``1 - (top1 - top2)`` in ``[0, 1]``, the paper's gain;
* :func:`exp_margin_gain` -- ``exp(-(top1 - top2))`` in ``[exp(-1), 1]``, the paper's open
  question (Section 6);
* :func:`entropy_gain` -- ``-sum_j p_j log p_j`` in nats (``0 log 0 = 0``), in
  ``[0, log k]``;
* :func:`least_confidence_gain` -- ``1 - top1`` in ``[0, 1 - 1/k]``.

All functions stream over blocks of rows: the only ``(rows, k)`` temporaries are one or
two blocks of about ``2**18`` elements (1 MiB in float32), so the extra memory is
``O(n)`` for the output plus ``O(block)``, whatever ``n`` is. For ``k <= 128`` a block is
transposed to ``(k, rows)`` so that every reduction runs over contiguous rows of the
block (a top-2 pass in ``3 k`` vectorised operations); for larger ``k`` a block is
partitioned in place.

The output dtype is float64 for float64 input and float32 otherwise (float16 input is
computed in float32).

Logits are handled without forming probabilities: with ``z1 >= z2`` the two largest
logits and ``s = sum_j exp(z_j - z1)`` (``>= 1``, no overflow),
``top1 - top2 = -expm1(z2 - z1) / s``, ``1 - top1 = 1 - 1/s`` and
``entropy = log s - sum_j exp(z_j - z1) (z_j - z1) / s``. Logits may be ``-inf``
(masked classes) but not ``NaN`` or ``+inf``, and every row needs a finite maximum.

Probabilities are validated (``validate=True``): entries ``>= 0`` and rows summing to 1
within ``atol`` (default :func:`default_atol`: ``max(1e-3, 4 k eps)`` with ``eps`` the
machine epsilon of the input dtype or float32, the larger precision, plus ``4 eps`` of the
dtype); the error names the first offending row. ``validate=False`` skips those checks
(garbage in, garbage out), which saves two passes over each block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "GAIN_KINDS",
    "GainKind",
    "compute_gains",
    "default_atol",
    "entropy_gain",
    "exp_margin_gain",
    "least_confidence_gain",
    "margin_gain",
    "margins",
]

GainKind = Literal["margin", "entropy", "least_confidence", "exp_margin"]
GAIN_KINDS: tuple[str, ...] = get_args(GainKind)

# What a kernel computes per row: the four gains plus the raw margin.
_Quantity = Literal["margin", "entropy", "least_confidence", "exp_margin", "raw_margin"]

_BLOCK_ELEMENTS = 1 << 18  # elements of one (rows, k) block: 1 MiB in float32
_SMALL_K = 128  # up to this many classes, blocks are transposed to (k, rows)
_LOGIT_FLOOR = -1.0e4  # exp(-1e4) == 0 in float32 and float64; avoids 0 * -inf


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def margins(
    x: ArrayLike,
    *,
    from_logits: bool = False,
    atol: float | None = None,
    validate: bool = True,
    chunk_rows: int | None = None,
) -> NDArray[np.floating]:
    """Margin ``top1 - top2`` between the two largest class probabilities of each row.

    Parameters
    ----------
    x : array_like, shape (n, k)
        Class probabilities (rows sum to 1) or, with ``from_logits=True``, logits.
        ``k >= 2``. float16, float32 or float64; memory maps are read block by block.
    from_logits : bool, default False
        Interpret ``x`` as logits (softmax is applied implicitly and stably).
    atol : float, optional
        Tolerance of the row-sum check for probabilities; default
        :func:`default_atol` of the dtype and ``k``.
    validate : bool, default True
        Check probabilities (non-negative, rows summing to 1). Logits are always
        checked for ``NaN``/``+inf`` (it is free).
    chunk_rows : int, optional
        Rows per block; default about ``2**18 / k``.

    Returns
    -------
    numpy.ndarray, shape (n,)
        float64 for float64 input, float32 otherwise. Lower means more uncertain.

    Raises
    ------
    TypeError
        If ``x`` is not a floating-point array.
    ValueError
        If ``x`` is not 2-D with ``k >= 2``, or fails validation (the message names the
        first offending row).
    """
    return _rowwise(x, "raw_margin", from_logits, atol, validate, chunk_rows)


def margin_gain(
    x: ArrayLike,
    *,
    from_logits: bool = False,
    atol: float | None = None,
    validate: bool = True,
    chunk_rows: int | None = None,
) -> NDArray[np.floating]:
    """The paper's gain ``1 - (top1 - top2)``, in ``[0, 1]``.

    Parameters and errors are those of :func:`margins`.

    Returns
    -------
    numpy.ndarray, shape (n,)
        float64 for float64 input, float32 otherwise. Higher means more informative.
    """
    return _rowwise(x, "margin", from_logits, atol, validate, chunk_rows)


def exp_margin_gain(
    x: ArrayLike,
    *,
    from_logits: bool = False,
    atol: float | None = None,
    validate: bool = True,
    chunk_rows: int | None = None,
) -> NDArray[np.floating]:
    """The alternative gain ``exp(-(top1 - top2))``, in ``[exp(-1), 1]``.

    The paper (Section 6) leaves open whether ``1 - margin`` or ``exp(-margin)`` is the
    better gain; both increase with the student's uncertainty. Parameters and errors are
    those of :func:`margins`.

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    return _rowwise(x, "exp_margin", from_logits, atol, validate, chunk_rows)


def entropy_gain(
    x: ArrayLike,
    *,
    from_logits: bool = False,
    atol: float | None = None,
    validate: bool = True,
    chunk_rows: int | None = None,
) -> NDArray[np.floating]:
    """Shannon entropy ``-sum_j p_j log p_j`` of each row, in nats (``0 log 0 = 0``).

    Parameters and errors are those of :func:`margins`.

    Returns
    -------
    numpy.ndarray, shape (n,)
        Values in ``[0, log k]``.
    """
    return _rowwise(x, "entropy", from_logits, atol, validate, chunk_rows)


def least_confidence_gain(
    x: ArrayLike,
    *,
    from_logits: bool = False,
    atol: float | None = None,
    validate: bool = True,
    chunk_rows: int | None = None,
) -> NDArray[np.floating]:
    """Least-confidence gain ``1 - top1``, in ``[0, 1 - 1/k]``.

    Parameters and errors are those of :func:`margins`.

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    return _rowwise(x, "least_confidence", from_logits, atol, validate, chunk_rows)


def compute_gains(
    x: ArrayLike,
    kind: GainKind = "margin",
    *,
    from_logits: bool = False,
    atol: float | None = None,
    validate: bool = True,
    chunk_rows: int | None = None,
) -> NDArray[np.floating]:
    """Gains of the given ``kind`` (one of :data:`GAIN_KINDS`).

    ``"margin"`` is :func:`margin_gain`, ``"entropy"`` :func:`entropy_gain`,
    ``"least_confidence"`` :func:`least_confidence_gain` and ``"exp_margin"``
    :func:`exp_margin_gain`. Other parameters are those of :func:`margins`.

    Raises
    ------
    ValueError
        If ``kind`` is unknown, or as :func:`margins`.
    """
    if kind not in GAIN_KINDS:
        raise ValueError(f"unknown gain kind {kind!r}; expected one of {GAIN_KINDS}")
    return _rowwise(x, kind, from_logits, atol, validate, chunk_rows)


def default_atol(dtype: np.dtype | type, k: int) -> float:
    """Default tolerance of the row-sum check: ``max(1e-3, 4 k eps_c + 4 eps(dtype))``.

    ``eps_c`` is the machine epsilon of the precision a softmax is computed in: the
    dtype's, but at least float32's (float16 probabilities come from a float32 softmax,
    stored rounded: each entry within ``eps(float16)/2``, so the row sum within about
    that, whatever ``k``). Loose enough for probabilities produced that way (a float32
    softmax over ``k`` classes sums to 1 within a few ``k eps``), tight enough to catch
    logits, unnormalised scores or column-normalised matrices; ``4 k eps(float16)`` had
    let rows summing to 0 or 4 through from 256 classes on.
    """
    compute = np.promote_types(np.dtype(dtype), np.float32)
    return max(1e-3, 4.0 * k * float(np.finfo(compute).eps) + 4.0 * float(np.finfo(dtype).eps))


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------


def _as_matrix(x: ArrayLike, from_logits: bool) -> tuple[np.ndarray, type]:
    """Validate type and shape; return the array (not copied) and the working dtype."""
    name = "logits" if from_logits else "probabilities"
    arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    if arr.dtype.kind != "f":
        raise TypeError(
            f"{name} must be a floating-point array (float16, float32 or float64), "
            f"got dtype {arr.dtype}"
        )
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, k) array, got shape {arr.shape}")
    if arr.shape[1] < 2:
        raise ValueError(f"{name} need at least 2 classes (k >= 2), got shape {arr.shape}")
    work = np.float64 if arr.dtype.itemsize >= 8 else np.float32
    return arr, work


def _resolve_rows(chunk_rows: int | None, k: int) -> int:
    if chunk_rows is None:
        return max(8, _BLOCK_ELEMENTS // k)
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)):
        raise TypeError(f"chunk_rows must be a positive int, got {chunk_rows!r}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    return int(chunk_rows)


def _resolve_atol(atol: float | None, dtype: np.dtype, k: int) -> float:
    if atol is None:
        return default_atol(dtype, k)
    atol = float(atol)
    if not atol >= 0.0:  # also rejects NaN
        raise ValueError(f"atol must be a non-negative number, got {atol!r}")
    return atol


def _rowwise(
    x: ArrayLike,
    what: _Quantity,
    from_logits: bool,
    atol: float | None,
    validate: bool,
    chunk_rows: int | None,
) -> NDArray[np.floating]:
    """Stream ``x`` block by block through the probability or logit kernel."""
    arr, work = _as_matrix(x, from_logits)
    n, k = arr.shape
    rows = _resolve_rows(chunk_rows, k)
    tol = _resolve_atol(atol, arr.dtype, k) if (validate and not from_logits) else None
    out: np.ndarray = np.empty(n, dtype=work)
    if n == 0:
        return out
    rows = min(rows, n)
    transposed = k <= _SMALL_K
    axis = 0 if transposed else 1
    buf = np.empty((k, rows) if transposed else (rows, k), dtype=work)
    kernel: Callable[..., None] = _logit_kernel if from_logits else _prob_kernel
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        part = arr[start:stop]
        block = buf[:, : stop - start] if transposed else buf[: stop - start]
        np.copyto(block, part.T if transposed else part, casting="same_kind")
        kernel(block, axis, what, tol, start, out[start:stop])
    return out


# --------------------------------------------------------------------------------------
# Kernels (each receives a block it owns and may overwrite)
# --------------------------------------------------------------------------------------


def _top2(block: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Largest and second-largest entry of each row (NaN propagates into ``top1``).

    For ``axis == 1`` the block is partitioned in place (row contents are permuted,
    which leaves every row-symmetric quantity unchanged).
    """
    if axis == 0:  # block is (k, rows): 3 k elementwise operations on contiguous rows
        top1 = block[0].copy()
        top2 = np.full_like(top1, -np.inf)
        tmp = np.empty_like(top1)
        for j in range(1, block.shape[0]):
            col = block[j]
            np.minimum(top1, col, out=tmp)
            np.maximum(top2, tmp, out=top2)
            np.maximum(top1, col, out=top1)
        return top1, top2
    k = block.shape[1]
    block.partition(k - 2, axis=1)  # NaN sorts last, so it lands in top1
    return block[:, k - 1].copy(), block[:, k - 2].copy()


def _row(block: np.ndarray, axis: int, i: int) -> np.ndarray:
    return block[:, i] if axis == 0 else block[i]


def _check_probs(block: np.ndarray, axis: int, tol: float, offset: int) -> None:
    """Raise ``ValueError`` naming the first row that is not a probability vector."""
    low = block.min(axis=axis)
    bad = ~(low >= 0)  # NaN is bad too
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        if np.isnan(_row(block, axis, i)).any():
            raise ValueError(f"probabilities contain NaN (row {offset + i})")
        raise ValueError(
            f"probabilities must be >= 0, but row {offset + i} has entry {float(low[i])!r}; "
            "pass from_logits=True if these are logits"
        )
    total = block.sum(axis=axis)
    bad = ~(np.abs(total - 1) <= tol)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        if not np.isfinite(total[i]):
            raise ValueError(f"probabilities contain inf (row {offset + i})")
        raise ValueError(
            f"probability rows must sum to 1 (within atol={tol:.3g}), but row "
            f"{offset + i} sums to {float(total[i])!r}; pass from_logits=True for logits, "
            "normalise the rows, or raise atol"
        )


def _finish_margin(margin: np.ndarray, what: _Quantity, out: np.ndarray) -> None:
    """Write the requested margin-based quantity into ``out``."""
    if what == "raw_margin":
        out[...] = margin
    elif what == "margin":
        np.subtract(1, margin, out=out)
    else:  # exp_margin
        np.negative(margin, out=out)
        np.exp(out, out=out)


def _prob_kernel(
    block: np.ndarray, axis: int, what: _Quantity, tol: float | None, offset: int, out: np.ndarray
) -> None:
    if tol is not None:
        _check_probs(block, axis, tol, offset)
    if what == "entropy":
        with np.errstate(divide="ignore"):
            logp = np.log(block)  # SIMD log; log 0 = -inf
        np.maximum(logp, _LOGIT_FLOOR, out=logp)  # so that 0 * log 0 = 0
        np.multiply(logp, block, out=logp)
        logp.sum(axis=axis, out=out)
        np.negative(out, out=out)
        np.maximum(out, 0, out=out)  # rounding (p slightly above 1) never goes negative
        return
    if what == "least_confidence":
        np.subtract(1, block.max(axis=axis), out=out)
        np.maximum(out, 0, out=out)  # a row within atol of 1 can have an entry above 1
        return
    top1, top2 = _top2(block, axis)
    np.subtract(top1, top2, out=top1)
    np.clip(top1, 0, 1, out=top1)  # the documented range, also for rows within atol of 1
    _finish_margin(top1, what, out)


def _check_logit_max(top1: np.ndarray, block: np.ndarray, axis: int, offset: int) -> None:
    bad = ~np.isfinite(top1)
    if not bad.any():
        return
    i = int(np.flatnonzero(bad)[0])
    row = _row(block, axis, i)
    if np.isnan(row).any() or np.isnan(top1[i]):
        raise ValueError(f"logits contain NaN (row {offset + i})")
    if top1[i] > 0:
        raise ValueError(f"logits contain +inf (row {offset + i})")
    raise ValueError(f"every logit of row {offset + i} is -inf; no class has probability > 0")


def _logit_kernel(
    block: np.ndarray, axis: int, what: _Quantity, tol: float | None, offset: int, out: np.ndarray
) -> None:
    del tol  # logits have no normalisation to check
    top1, top2 = _top2(block, axis)
    _check_logit_max(top1, block, axis, offset)
    with np.errstate(over="ignore"):  # z - z1 may overflow to -inf: exp gives 0, fine
        np.subtract(block, top1 if axis == 0 else top1[:, None], out=block)  # <= 0
    if what in ("entropy", "least_confidence"):
        # With t = s - 1 = sum of exp(z_j - z1) over every class but one top class, summed
        # directly (no 1 + t - 1 to cancel): 1 - max p = t / (1 + t) and
        # H = log1p(t) - sum_j e_j (z_j - z1) / (1 + t); a confident row keeps its tiny
        # gain (1 - 1/s was 0 for logits [40, 0, 0], whose 1 - max p is 8.5e-18).
        np.maximum(block, _LOGIT_FLOOR, out=block)  # -inf -> finite, exp still 0
        e = np.exp(block)
        top = np.expand_dims(np.argmax(block, axis=axis), axis)  # one top class (z_j - z1 = 0)
        np.put_along_axis(e, top, 0.0, axis=axis)
        t = e.sum(axis=axis)
        if what == "least_confidence":
            np.divide(t, 1 + t, out=out)
            return
        np.multiply(e, block, out=e)
        weighted = e.sum(axis=axis)  # sum_j e_j (z_j - z1) <= 0 (the top class adds 0)
        np.log1p(t, out=out)
        np.divide(weighted, 1 + t, out=weighted)
        np.subtract(out, weighted, out=out)
        np.maximum(out, 0, out=out)
        return
    np.exp(block, out=block)
    s = block.sum(axis=axis)  # >= 1
    np.subtract(top2, top1, out=top2)  # <= 0, -inf if the runner-up is masked
    np.expm1(top2, out=top2)
    np.subtract(0.0, top2, out=top2)  # 1 - exp(z2 - z1); +0.0 for tied top logits (negative gave -0.0)
    np.divide(top2, s, out=top2)
    _finish_margin(top2, what, out)

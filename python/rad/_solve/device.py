"""Device arrays: detect them, use them in place, solve and select on the GPU.

A *device array* is a CUDA array exposing ``__cuda_array_interface__`` (CuPy, PyTorch on
``cuda``, numba device arrays, JAX on GPU) or DLPack with a CUDA device. It is never copied
to the host: it is wrapped as a numba device array (zero copy) and handed to the ``cuda``
backend (:mod:`rad._backends.cuda_backend`). ``backend="auto"`` picks ``cuda`` for device
arrays; ``backend="cuda"`` with a host array, or a host backend with a device array, is an
error naming what to do.

The GPU path is Theorem 1's uncapped solution (the common case: ``b max p* <= 1``): the
sort-free search, the canonical support sums and the streaming DepRound all run on the
device, and give the CPU backends' ``k*``, threshold, value and indices bit for bit. The
rare paths that need a sort — a near tie the search hands to the sorted scan, the capped
path (large ``b``), ``b == n`` and subnormal rescaling — copy the arrays to the host once,
solve there with a CPU backend and say so with a :class:`DeviceFallbackWarning`; DepRound
then still runs on the device with the host's parameters (the same indices either way).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from rad._backends.params import Params

if TYPE_CHECKING:
    from rad._solve.game import Game
    from rad._solve.solution import Solution

__all__ = [
    "DeviceFallbackWarning",
    "as_device_vector",
    "is_device_array",
    "like_input",
    "resolve_device_game",
    "select_device",
    "solve_device",
]

_CUDA_DLPACK = (2, 13)  # kDLCUDA, kDLCUDAManaged
_INSTALL = (
    "install the [cuda] extra (pip install 'robust-active-distillation[cuda]', i.e. numba-cuda) "
    "on a machine with an NVIDIA GPU and its driver"
)


class DeviceFallbackWarning(RuntimeWarning):
    """A device game took a path that runs on the host (arrays copied once)."""


_F = TypeVar("_F", bound=Callable[..., Any])


def _quiet_launches(fn: _F) -> _F:
    """Run ``fn`` without numba-cuda's low-occupancy warnings.

    rad's per-block kernels launch small grids on small pools on purpose; the warning
    says nothing a user can act on.
    """

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU under-utilization")
            return fn(*args, **kwargs)

    return run  # type: ignore[return-value]


def is_device_array(x: object) -> bool:
    """Whether ``x`` is a CUDA array.

    That is: ``__cuda_array_interface__``, a numba device array, or DLPack on a CUDA
    device. Never imports numba or copies anything.
    """
    if isinstance(x, np.ndarray):
        return False
    try:
        if hasattr(x, "__cuda_array_interface__"):
            return True
        refused = False
    except Exception:  # PyTorch refuses it for a CUDA tensor that requires grad
        refused = True
    mod = type(x).__module__ or ""
    if mod.startswith("numba") and hasattr(x, "copy_to_host"):  # numba (and simulator) arrays
        return True
    dev = getattr(x, "__dlpack_device__", None)
    if callable(dev):  # the device type decides (a host array whose CAI property raised is host)
        try:
            return int(dev()[0]) in _CUDA_DLPACK
        except Exception:
            return refused
    return refused


def _cuda_module() -> Any:
    from rad._backends import import_numba_cuda

    try:
        cuda = import_numba_cuda()
    except ImportError as exc:
        raise ImportError(f"device arrays need numba-cuda ({exc}); {_INSTALL}") from exc
    return cuda


def _from_dlpack(x: object, name: str) -> Any:
    """Read a CUDA DLPack array without ``__cuda_array_interface__`` (e.g. JAX).

    Through CuPy or PyTorch, zero copy.
    """
    try:
        import cupy  # type: ignore[import-not-found, unused-ignore]

        return cupy.from_dlpack(x)
    except ImportError:
        pass
    try:
        import torch

        return torch.from_dlpack(x)  # type: ignore[attr-defined, unused-ignore]
    except ImportError:
        pass
    raise TypeError(
        f"{name} is a CUDA DLPack array ({type(x).__name__}) without __cuda_array_interface__: "
        "install CuPy or PyTorch so that rad can read it in place"
    )


def _device_copy(x: Any, dtype: Any) -> Any:
    from rad._backends import get_backend

    return get_backend("cuda").device_copy(x, dtype)  # type: ignore[attr-defined]


def as_device_vector(x: object, name: str, *, float64: bool = False) -> Any:
    """``x`` as a one-dimensional numba device array of float32/float64, in place.

    float32/float64 C-contiguous input is wrapped without a copy; other real dtypes
    (integers, bool, float16) and strided views are converted on the device (float64;
    ``float64=True`` converts float32 as well), never through the host.
    """
    cuda = _cuda_module()
    obj: Any = x
    try:
        has_cai = hasattr(x, "__cuda_array_interface__")
    except Exception as exc:  # PyTorch: "Can't get __cuda_array_interface__ on Variable that requires grad"
        raise TypeError(f"{name} cannot be read in place: {exc}") from exc
    mod = type(x).__module__ or ""
    if not has_cai and not (mod.startswith("numba") and hasattr(x, "copy_to_host")):
        obj = _from_dlpack(x, name)
    arr = obj if (mod.startswith("numba") and hasattr(obj, "copy_to_host")) else cuda.as_cuda_array(obj)
    dt = np.dtype(arr.dtype)
    if dt.kind not in "biuf":
        raise TypeError(
            f"{name} must be a real numeric array, got dtype {dt} ({type(x).__name__}); "
            "the cuda backend reads float32 or float64 in place"
        )
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {tuple(arr.shape)}")
    want = np.float64 if (float64 or dt not in (np.float32, np.float64)) else dt
    if dt != want or not arr.is_c_contiguous():
        arr = _device_copy(arr, want)
    return arr


def check_device_values(arr: Any, name: str, first_invalid: Any) -> None:
    """``ValueError`` naming the first NaN, infinite or negative entry (one value copied)."""
    bad = first_invalid(arr)
    if bad >= 0:
        v = float(arr[bad : bad + 1].copy_to_host()[0])
        kind = "NaN" if math.isnan(v) else ("infinite" if math.isinf(v) else "negative")
        raise ValueError(f"{name} must be finite and non-negative; {name}[{bad}] = {v!r} is {kind}")


def host_backend_error(name: str) -> TypeError:
    """A device array given to a host backend."""
    return TypeError(
        f"gains is a CUDA device array but backend={name!r} runs on the host: use backend='cuda' "
        "(or 'auto'), or copy the array to the host yourself"
    )


def host_array_error() -> TypeError:
    """A host array given to the cuda backend."""
    return TypeError(
        "backend='cuda' needs the gains on the GPU (a CuPy array, a PyTorch tensor on 'cuda', a "
        "JAX array on a GPU or a numba device array); got a host array: move it to the device "
        "or use backend='auto'"
    )


@_quiet_launches
def resolve_device_game(
    gains: object, m: object, b: object, *, w: object, losses: object, backend: str, threads: object, method: str
) -> Game:
    """:func:`rad._solve.game.resolve_game` for device gains: the same checks, on the device."""
    from rad._backends import get_backend
    from rad._backends.threads import resolve_threads
    from rad._solve.game import Game, default_w
    from rad._solve.validation import check_budget, check_mistakes, check_w

    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string, got {type(backend).__name__}")
    if backend not in ("auto", "cuda"):
        get_backend(backend)  # an unknown name is named as such
        raise host_backend_error(backend)
    kernels = get_backend("cuda")
    g = as_device_vector(gains, "gains")
    n = g.shape[0]
    if n == 0:
        raise ValueError("gains is empty: the pool must have at least one point")
    mistakes = check_mistakes(m, n)
    budget = check_budget(b, n)
    resolve_threads(threads, n)  # validated; the kernels use the whole device

    def first_invalid(x: Any) -> int:
        return int(kernels.first_invalid(x, 1))

    if losses is None:
        loss_array, weight = None, (default_w(mistakes, n) if w is None else check_w(w))
    else:
        if w is not None:
            raise ValueError("give either w (RAD losses w * gains) or losses, not both")
        if not is_device_array(losses):
            raise TypeError("losses must be on the same device as the gains (a CUDA array), got a host array")
        loss_array = as_device_vector(losses, "losses", float64=True)
        if loss_array.shape != g.shape:
            raise ValueError(f"losses must have the same shape as gains: {loss_array.shape} != {g.shape}")
        check_device_values(loss_array, "losses", first_invalid)
        weight = float("nan")
    game = Game(g, loss_array, weight, mistakes, budget, kernels, 1, method, values_checked=False)
    if game.sortfree and 0 < budget < n:
        return game  # the search reports a bad gain itself
    check_device_values(g, "gains", first_invalid)
    return replace(game, values_checked=True)


# --------------------------------------------------------------------------- solving


def _host_game(game: Any, why: str) -> Any:
    """The same game on host copies and a CPU backend (one copy, with a warning)."""
    from rad._backends import get_backend
    from rad._backends.threads import resolve_threads

    warnings.warn(
        f"rad: {why}; this path runs on the host: the device arrays are copied once "
        f"({game.n} points)",
        DeviceFallbackWarning,
        stacklevel=4,
    )
    cpu = None
    for cand in ("cpp", "numba", "numpy"):
        try:
            cpu = get_backend(cand)
            break
        except ImportError:
            continue
    gains = game.gains.copy_to_host()
    losses = None if game.losses is None else game.losses.copy_to_host()
    return replace(game, gains=gains, losses=losses, backend=cpu, threads=resolve_threads(None, game.n))


def _solution(game: Any, value: float, k_star: int, threshold: float, capped: bool, params: Params,
              sketch: Any = None) -> Any:
    from rad._solve.solution import Solution

    return Solution(
        value=value, k_star=k_star, threshold=threshold, w=game.w, m=game.m, b=game.b, n=game.n,
        capped=capped, params=params, gains=None, losses=None, round_sketch=sketch,
    )


def _solve_on_device(game: Any, with_sketch: bool = False) -> Any | None:
    """The uncapped Theorem 1 solution on the device, or None when a host path must decide.

    The same decisions, in the same order, as ``rad._solve.batch._solve_game``. With
    ``with_sketch`` (a select) the support pass also records the DepRound sketch, which
    the solution carries for a DepRound in the same call (its buffer is reused later).
    """
    kern, gains, losses, m, b, w_k = game.backend, game.gains, game.losses, game.m, game.b, game.kernel_w
    if b == 0:
        return _solution(game, 0.0, 0, float("inf"), False, Params("gain", 0.0))
    if b == game.n or not game.sortfree or not _magnitudes_fit(game):
        return None
    status, tau, kstar, g_total = kern.threshold_search(gains, losses, w_k, m, game.threads)
    if status == 2:
        check_device_values(gains, "gains", lambda x: kern.first_invalid(x, game.threads))
    if status != 0 or not g_total >= m or not tau > 0:
        return None
    sketch = None
    if with_sketch:
        (h, g, count, min_a), sketch = kern.support_sums_sketched(gains, losses, w_k, tau, game.threads)
    else:
        h, g, count, min_a = kern.support_sums(gains, losses, w_k, tau, game.threads)
    if not (math.isfinite(h) and math.isfinite(g)):
        return None
    nu = b / h
    if not nu <= min_a:
        return None
    if losses is not None and abs(g - m) <= 1e-3 * abs(g):
        return None  # G - m cancels: the value re-sums G exactly on the host
    from rad._solve.batch import _theorem1_value  # the CPU path's value, formed the same way

    value = b * _theorem1_value(None, losses, w_k, m, float(tau), g, h, count)
    return _solution(game, value, count, float(tau), False, Params("gain", nu, gain_cut=float(tau), gain_frac=1.0),
                     sketch)


def _magnitudes_fit(game: Any) -> bool:
    """Whether ``a = g + l`` and its sums stay finite unscaled.

    The test of ``rad._solve.batch.solve_game``, which scales pools near the float64
    maximum down first (then the host solves): float32 gains are bounded by their type's
    maximum (not read), float64 gains and losses by one device max pass each.
    """
    room = 1021 - (game.n + 2).bit_length()
    kern = game.backend
    if np.dtype(game.gains.dtype) == np.float32:
        g_max = float(np.finfo(np.float32).max)
    else:
        g_max = kern.max_value(game.gains)
    if game.losses is None:
        top = math.frexp(g_max)[1] + math.frexp(1.0 + game.kernel_w)[1]
    else:
        top = max(math.frexp(g_max)[1], math.frexp(kern.max_value(game.losses))[1]) + 1
    return bool(top <= room)


def _why(game: Any) -> str:
    if game.b == game.n:
        return "b == n (every point is selected; the value needs a sort)"
    if not game.sortfree:
        return "method='sorted' asks for the sorted scan"
    return "the solution is capped (b max p* > 1), a near tie, or extreme magnitudes (rescaled on the host)"


@_quiet_launches
def solve_device(game: Game, with_sketch: bool = False) -> tuple[Solution, Game]:
    """Solve a device game: ``(solution, game it was solved on)`` (a host game on fallback).

    ``with_sketch`` as :func:`_solve_on_device`'s (for :func:`select_device`).
    """
    from rad._solve.batch import solve_game

    sol = _solve_on_device(game, with_sketch)
    if sol is not None:
        return sol, game
    host = _host_game(game, _why(game)).with_values_checked()
    return solve_game(host), host


@_quiet_launches
def select_device(game: Any, key: int, *, as_numpy: bool = False, template: object = None) -> Any:
    """DepRound of a device game's optimal probabilities, on the device when possible."""
    if game.b == 0:
        out = np.zeros(0, dtype=np.int64)
        return out if as_numpy else like_input(_cuda_module().to_device(out), template)
    from rad._solve.batch import ValueOverflowWarning

    with warnings.catch_warnings():  # as rad.select on the host: the value is not returned
        warnings.simplefilter("ignore", ValueOverflowWarning)
        sol, solved = solve_device(game, with_sketch=True)
    idx: Any
    if solved is game:  # solved on the device: round there, from the support pass's sketch (same bits)
        idx = game.backend.depround_sketched(game.gains, game.losses, game.kernel_w, sol.params, game.b, key,
                                             sol.round_sketch, game.threads)
    elif sol.scale_exponent == 0:
        # params hold for the caller's arrays: round on the device (same bits as the host)
        idx = game.backend.depround_params(game.gains, game.losses, game.kernel_w, sol.params, game.b, key,
                                           game.threads)
    else:  # params of rescaled host copies: round those on the host
        assert sol.gains is not None
        host = solved.backend.depround_params(sol.gains, sol.losses, solved.kernel_w, sol.params, game.b, key,
                                              solved.threads)
        idx = _cuda_module().to_device(np.ascontiguousarray(host))
    return idx.copy_to_host() if as_numpy else like_input(idx, template)


def like_input(arr: Any, template: object) -> Any:
    """``arr`` (a numba device array) as the template's kind of device array, zero copy.

    CuPy, PyTorch or JAX when the template is one, else the numba device array.
    """
    mod = (type(template).__module__ or "").split(".")[0]
    try:
        if mod == "cupy":
            import cupy  # type: ignore[import-not-found, unused-ignore]

            return cupy.asarray(arr)
        if mod == "torch":
            import torch

            return torch.as_tensor(arr, device=template.device)  # type: ignore[attr-defined]
        if mod in ("jax", "jaxlib"):
            import jax.dlpack

            try:
                import cupy  # type: ignore[import-not-found, unused-ignore]

                return jax.dlpack.from_dlpack(cupy.asarray(arr))
            except ImportError:
                import torch

                return jax.dlpack.from_dlpack(torch.as_tensor(arr, device="cuda"))
    except ImportError:  # pragma: no cover - the template's own library is importable
        pass
    return arr

"""The ``rad`` command line: ``rad demo``, ``rad info``, ``rad experiment`` and ``rad verify``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

import numpy as np

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    import rad
    from rad._backends import get_backend
    from rad._backends.threads import resolve_threads

    n = args.n  # validated by the parser: an integer in [1, 2**40]
    m = args.mistake_rate * n
    b = min(_DEMO_B, n) if args.b is None else args.b  # args.b >= 1 by the parser
    if b > n:
        raise SystemExit(f"b (the budget) must be in [1, n={n}], got {b}")
    backend = get_backend(args.backend).name  # a backend that is not built: before any output
    resolve_threads(args.threads, n)  # a bad RAD_NUM_THREADS too
    print(f"rad demo: synthetic pool of n={n:,} gains ~ uniform(0, 1) float32, "
          f"m={m:,.0f} teacher mistakes ({args.mistake_rate:.0%}), budget b={b:,}")
    t0 = time.perf_counter()
    gains = np.random.default_rng(args.seed).random(n, dtype=np.float32)
    print(f"  generated the pool in {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    _warm_up(gains, m / n, b / n, args.backend, args.threads)
    if time.perf_counter() - t0 >= 0.5:  # Numba's first use: not the solve's time
        print(f"  compiled the {backend} kernels in {time.perf_counter() - t0:.1f} s "
              "(first use only: they are cached)")
    t0 = time.perf_counter()
    sol = rad.solve(gains, m, b, backend=args.backend, threads=args.threads)
    t_solve = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx = rad.select(gains, m, b, rng=args.seed, backend=args.backend, threads=args.threads)
    t_select = time.perf_counter() - t0
    print(f"  backend={backend} threads={resolve_threads(args.threads, n)}")
    print(f"  k* (support size)   = {sol.k_star:,}")
    print(f"  boundary gain       = {sol.threshold:.6f}")
    print(f"  game value OPT_b    = {sol.value:.6f}  (expected gain of the batch, worst case)")
    print(f"  probabilities capped= {sol.capped}")
    print(f"  solve time          = {t_solve:.3f} s")
    print(f"  select time         = {t_select:.3f} s  (solve + DepRound)")
    print(f"  selected {idx.shape[0]:,} distinct points; first: {idx[:8].tolist()}")
    return 0


def _warm_up(gains: np.ndarray, m_rate: float, b_rate: float, backend: str, threads: int | None) -> None:
    """Run the demo's calls on the first 2^20 points, so that a JIT backend compiles here.

    Once with the demo's ratios and once with ``b = 1`` (the DepRound sketch's path).
    """
    import warnings

    import rad

    part = gains[: 1 << 20]
    k = part.shape[0]
    with warnings.catch_warnings():  # the warm-up's own results (and NetHarmWarning) are dropped
        warnings.simplefilter("ignore")
        for b in {max(1, min(k, round(b_rate * k))), 1}:
            rad.select(part, m_rate * k, b, rng=0, backend=backend, threads=threads)


def _info(args: argparse.Namespace) -> int:
    import rad

    print(json.dumps({"version": rad.__version__, **rad.backends()}, indent=2))
    return 0


#: The largest pool ``rad demo`` will generate (4 TiB of float32).
_DEMO_MAX_N = 1 << 40
#: ``rad demo``'s budget when ``--b`` is not given (at most n).
_DEMO_B = 1000


def _pool_size(text: str) -> int:
    """``--n``: an integer count, also written as a float (``1e7``), in [1, 2**40]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value) or value != math.floor(value):
        raise argparse.ArgumentTypeError(f"must be a whole number of points, got {text!r}")
    if not 1 <= value <= _DEMO_MAX_N:
        raise argparse.ArgumentTypeError(f"must be in [1, 2**40], got {text!r}")
    return int(value)


def _whole(low: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {text!r}")
        return value

    return parse


def _rate(text: str) -> float:
    """``--mistake-rate``: a finite number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text!r}")
    return value


def _experiment(args: argparse.Namespace) -> int:
    from rad.distill.cli import run_from_args

    return run_from_args(args)


# ------------------------------------------------------------------------ rad verify


def _verify_usage_error(message: str) -> NoReturn:
    """Refuse a ``rad verify`` invocation.

    :func:`main` prints the message on one line and exits with status 2 (:class:`UsageError`).
    """
    raise SystemExit(message)


def _verify_parser_error(message: str) -> NoReturn:
    """The ``verify`` subparser's ``error``: argparse's message on one line, exit status 2."""
    message = f"{' '.join(message.split())} (see rad verify --help)"
    print(f"rad verify: error: {message}", file=sys.stderr)
    raise UsageError(message)


def _number_at_least(least: float) -> Callable[[str], float]:
    """An argparse type: a finite float ``>= least``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value < least:
            raise argparse.ArgumentTypeError(f"must be a finite number >= {least:g}, got {text!r}")
        return value

    return parse


def _readable_file(text: str) -> str:
    """An argparse type: an existing, readable file (checked before any computation)."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: no such file")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: it is a directory")
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: permission denied")
    return text


def _writable_npy(text: str) -> str:
    """An argparse type: a ``.npy`` path that can be written (``numpy.save`` adds ``.npy``)."""
    path = text if text.endswith(".npy") else text + ".npy"
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"cannot write {path!r}: it is a directory")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"cannot write {path!r}: no such directory {folder!r}")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {path!r}: permission denied")
    return path


#: Flags of the two modes, with their defaults: certifying a pool (--gains) and the
#: random instances (no --gains). A flag of the other mode is a usage error.
_VERIFY_FILE_FLAGS = {"m": None, "b": 1, "w": None, "losses": None, "q": None, "adversary": None}
_VERIFY_RANDOM_FLAGS = {"instances": 50, "seed": 0, "max_n": 30, "kinds": None}


def _verify_load(path: str, flag: str) -> np.ndarray:
    """One array from a ``.npy`` file, memory-mapped."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        why = "not a NumPy .npy file (save the array with numpy.save)" if "pickle" in str(exc) else str(exc)
        _verify_usage_error(f"cannot read {flag} from {path!r}: {why}")
    if not isinstance(arr, np.ndarray):  # an .npz archive
        arr.close()
        _verify_usage_error(f"{flag} {path!r} is an .npz archive; save one array with numpy.save")
    return arr


def _verify_random(args: argparse.Namespace) -> int:
    from rad.verify import lp
    from rad.verify.harness import INSTANCE_KINDS, InstanceCheck, check_random_instances

    kinds = INSTANCE_KINDS if args.kinds is None else tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    bad_kind = [k for k in kinds if k not in INSTANCE_KINDS]
    if bad_kind:
        _verify_usage_error(f"unknown --kinds {bad_kind}; choose from {', '.join(INSTANCE_KINDS)}")
    head = (f"{'#':>4} {'kind':<8} {'n':>4} {'m':>9} {'b':>4} {'LP value':>14} {'lower':>14} "
            f"{'upper':>14} {'rel gap':>9}  status")
    print(f"rad verify: {args.instances} random instances (seed {args.seed}, n <= {args.max_n}), "
          f"certificate vs "
          f"{'the LP oracle (HiGHS)' if lp.SCIPY_AVAILABLE else 'itself (SciPy missing: no LP)'}")
    print(head)
    print("-" * len(head))

    def row(check: InstanceCheck) -> None:
        inst = check.instance
        first = f"{check.index:>4} {inst.kind:<8} {inst.n:>4} {inst.m:>9.3f} {inst.b:>4}"
        if check.error is not None:
            print(f"{first}  ERROR {check.error}")
            return
        status = "ok" if check.passed else "FAIL (" + ", ".join(check.failures) + ")"
        print(f"{first} {check.lp_value:>14.7g} {check.lower:>14.7g} {check.upper:>14.7g} "
              f"{check.rel_gap:>9.1e}  {status}")

    report = check_random_instances(
        args.instances, kinds=kinds, seed=args.seed, max_n=args.max_n, rtol=args.rtol,
        method=args.method, backend=args.backend, threads=args.threads, on_check=row)
    print("-" * len(head))
    failures = report.failures
    print(f"{args.instances - failures}/{args.instances} passed in {report.seconds:.1f} s"
          + ("" if not failures else f"; {failures} FAILED"))
    return 1 if failures else 0


def _verify_file(args: argparse.Namespace) -> int:
    from rad._solve.validation import check_budget, check_mistakes
    from rad.verify.certificate import certificate

    if args.m is None:
        _verify_usage_error("--gains needs --m (the teacher's mistakes in the pool)")
    gains = _verify_load(args.gains, "--gains")
    losses = _verify_load(args.losses, "--losses") if args.losses else None
    q = _verify_load(args.q, "--q") if args.q else None
    n = gains.shape[0] if gains.ndim else 0
    try:  # the cheap checks, before the header (the certificate repeats them all)
        if gains.ndim != 1:
            raise ValueError(f"gains must be one-dimensional, got shape {gains.shape}")
        if n == 0:
            raise ValueError("gains is empty: the pool needs at least one point")
        for name, arr in (("losses", losses), ("q", q)):
            if arr is not None and arr.shape != gains.shape:
                raise ValueError(f"{name} must have shape {gains.shape} like gains, got {arr.shape}")
        check_mistakes(args.m, n)
        check_budget(args.b, n)
        if args.w is not None and losses is not None:  # as rad.solve refuses it, before any output
            raise ValueError("give --w or --losses, not both (--w sets the losses to w * gains)")
    except (ValueError, TypeError) as exc:
        _verify_usage_error(f"{args.gains}: {exc}")
    weights = f", losses from {args.losses}" if losses is not None else f", w={'1 - m/n' if args.w is None else args.w}"
    print(f"rad verify: {args.gains}: n={n:,} {gains.dtype}, m={args.m:,.6g}, b={args.b:,}" + weights
          + (f", q from {args.q}" if q is not None else ", q from rad.solve"))
    try:
        cert = certificate(gains, args.m, args.b, w=args.w, losses=losses, solution=q, rtol=args.rtol,
                           return_adversary=args.adversary is not None, method=args.method,
                           backend=args.backend, threads=args.threads)
    except (ValueError, TypeError) as exc:  # the instance's checks run before any computation
        _verify_usage_error(str(exc))
    print(f"  lower bound (q vs worst mistakes)    = {cert.lower:.17g}")
    print(f"  upper bound (adversary vs best batch) = {cert.upper:.17g}")
    if not math.isnan(cert.value):
        print(f"  solver's reported value               = {cert.value:.17g}")
    print(f"  gap                                   = {cert.gap:.3e}  "
          f"(relative {cert.rel_gap:.2e} of {cert.scale:.6g})")
    print(f"  sum q - b = {cert.q_sum - cert.b:.2e}, sum u - m = {cert.u_sum - cert.m:.2e}, "
          f"adversary: {cert.adversary_method}, backend: {cert.backend}, time: {cert.seconds:.2f} s")
    if args.adversary is not None:
        assert cert.adversary is not None
        try:
            np.save(args.adversary, cert.adversary)
        except OSError as exc:
            _verify_usage_error(f"cannot write --adversary {args.adversary!r}: {exc}")
        print(f"  adversary c = 1 - u written to {args.adversary}")
    print(("OPTIMAL: certified to rtol=" if cert.optimal else "NOT CERTIFIED at rtol=") + f"{cert.rtol:g}")
    return 0 if cert.optimal else 1


def _verify(args: argparse.Namespace) -> int:
    from rad._backends import get_backend

    mode, other = (
        (_VERIFY_FILE_FLAGS, _VERIFY_RANDOM_FLAGS) if args.gains else (_VERIFY_RANDOM_FLAGS, _VERIFY_FILE_FLAGS)
    )
    for name in other:
        if getattr(args, name) is not None:
            flag = "--" + name.replace("_", "-")
            _verify_usage_error(
                f"{flag} applies only with --gains (certifying your own pool)" if args.gains is None
                else f"{flag} applies only to the random instances (without --gains)")
    for name, default in mode.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    try:  # a backend that is not built is a usage error, before any computation
        get_backend(args.backend)
    except (ImportError, ValueError) as exc:
        _verify_usage_error(f"argument --backend: {exc}")
    return _verify_file(args) if args.gains else _verify_random(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rad", description="Robust Active Distillation")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="select from a built-in synthetic pool and report k*, value, time")
    demo.add_argument("--n", type=_pool_size, default=10_000_000, help="pool size (default 1e7)")
    demo.add_argument("--mistake-rate", type=_rate, default=0.3, help="m / n, in [0, 1] (default 0.3)")
    demo.add_argument("--b", type=_whole(1), help=f"budget, in [1, n] (default min({_DEMO_B}, n))")
    demo.add_argument("--seed", type=_whole(0), default=0, help="non-negative seed")
    demo.add_argument("--backend", default="auto", choices=["auto", "cpp", "numba", "numpy"])
    demo.add_argument("--threads", type=_whole(1), default=None, help="kernel threads (>= 1)")
    demo.set_defaults(func=_demo)
    info = sub.add_parser("info", help="print the version and which backends are built")
    info.set_defaults(func=_info)
    ver = sub.add_parser(
        "verify",
        help="check optimality: random instances against the LP and the certificate, or "
        "certify your own pool (--gains FILE.npy --m M --b B); exit 1 on any failure, "
        "2 on a bad invocation")
    ver.error = _verify_parser_error  # type: ignore[method-assign]  # one line, exit 2
    ver.add_argument("--gains", type=_readable_file,
                     help=".npy file of gains (memory-mapped): certify this instance")
    ver.add_argument("--m", type=_number_at_least(0), help="teacher mistakes in the pool (with --gains)")
    ver.add_argument("--b", type=_whole(0), help="batch size (with --gains; default 1)")
    ver.add_argument("--w", type=_number_at_least(0), help="RAD loss weight (with --gains; default 1 - m/n)")
    ver.add_argument("--losses", type=_readable_file,
                     help=".npy file of general losses instead of w * gains (with --gains)")
    ver.add_argument("--q", type=_readable_file,
                     help=".npy file of probabilities to certify instead of rad.solve's (with --gains)")
    ver.add_argument("--adversary", metavar="OUT.npy", type=_writable_npy,
                     help="write the adversary c = 1 - u here (with --gains)")
    ver.add_argument("--instances", type=_whole(1), help="random instances (default 50)")
    ver.add_argument("--seed", type=_whole(0), help="seed of the random instances (default 0)")
    ver.add_argument("--max-n", dest="max_n", type=_whole(1),
                     help="largest random pool (default 30)")
    ver.add_argument("--kinds", help="comma-separated families: uniform,ties,zeros,equal,heavy,"
                     "span,losses (rad.verify.harness.INSTANCE_KINDS; default all)")
    ver.add_argument("--method", default="auto", choices=["auto", "saddle", "search"],
                     help="how the certificate builds its adversary (default auto)")
    ver.add_argument("--rtol", type=_number_at_least(0), default=1e-9, help="relative gap tolerance")
    ver.add_argument("--backend", default="auto", choices=["auto", "cpp", "numba", "numpy"])
    ver.add_argument("--threads", type=_whole(1), default=None)
    ver.set_defaults(func=_verify)
    exp = sub.add_parser(
        "experiment",
        help="run the active-distillation loop (Algorithm 1) on Keras 3 (TensorFlow, JAX or "
        "PyTorch backend)")
    exp.add_argument("--config", help="JSON or TOML file with ExperimentConfig fields; "
                     "flags given on the command line override it")
    exp.add_argument("--keras-backend", dest="keras_backend",
                     choices=["tensorflow", "jax", "torch"],
                     help="Keras backend (default: $KERAS_BACKEND, else tensorflow)")
    exp.add_argument("--dataset", help="mnist1d, mnist_sample, digits, cifar10, cifar100, "
                     "svhn or imagenet")
    exp.add_argument("--data-dir", dest="data_dir",
                     help="tensorflow_datasets data directory (or the MNIST-1D cache)")
    exp.add_argument("--n-samples", dest="n_samples", type=int,
                     help="MNIST-1D: examples to generate (train + test)")
    exp.add_argument("--strategies", help="comma-separated names (default: all)")
    exp.add_argument("--seeds", help="comma-separated seeds, or N for 0..N-1")
    exp.add_argument("--rounds", type=int)
    exp.add_argument("--b", type=int, help="points queried per round")
    exp.add_argument("--n-labeled", dest="n_labeled", type=int)
    exp.add_argument("--n-val", dest="n_val", type=int, help="validation points for m")
    for role in ("teacher", "student"):
        exp.add_argument(f"--{role}-model", dest=f"{role}_model",
                         choices=["mlp", "cnn", "resnet", "mobilenet"])
        exp.add_argument(f"--{role}-width", dest=f"{role}_width", type=int)
        exp.add_argument(f"--{role}-depth", dest=f"{role}_depth", type=int,
                         help="ResNet-v2 depth (11, 20, 29, 56, 110)")
        exp.add_argument(f"--{role}-alpha", dest=f"{role}_alpha", type=float,
                         help="MobileNet width multiplier")
        exp.add_argument(f"--{role}-steps", dest=f"{role}_steps", type=int,
                         help="optimizer steps per training run")
    exp.add_argument("--teacher-path", dest="teacher_path", help="pre-trained Keras teacher")
    exp.add_argument("--temperature", type=float, help="distillation temperature (paper: 1)")
    exp.add_argument("--labeled-weight", dest="labeled_weight", type=float,
                     help="weight of the labeled points' one-hot term (paper: 1)")
    exp.add_argument("--learning-rate", dest="learning_rate", type=float)
    exp.add_argument("--lr-schedule", dest="lr_schedule", choices=["paper", "constant"])
    exp.add_argument("--batch-size", dest="batch_size", type=int)
    exp.add_argument("--conservative-m", dest="conservative_m", action="store_const",
                     const=True, help="use Lemma 1's conservative m (estimate_m)")
    exp.add_argument("--no-oracle", dest="oracle", action="store_const", const=False,
                     help="skip the ground-truth oracle strategy")
    exp.add_argument("--no-controls", dest="controls", action="store_const", const=False,
                     help="skip the no-query and full-pool controls")
    exp.add_argument("--tpu", help="TPU name (TensorFlow backend; else $TPU_NAME)")
    exp.add_argument("--output-dir", dest="output_dir",
                     help="write results.json/.csv and arrays.npz here")
    exp.add_argument("--plots", action="store_true", help="also write the PNG plots")
    exp.add_argument("--no-progress", dest="progress", action="store_const", const=False)
    exp.set_defaults(func=_experiment)
    return parser


#: Top-level (or dotted) module -> the extra of robust-active-distillation that installs it,
#: as in pyproject.toml's [project.optional-dependencies].
_EXTRA_OF = {
    "numba": "numba", "numba.cuda": "cuda", "numba_cuda": "cuda", "scipy": "verify",
    "dask": "dask", "distributed": "dask", "keras": "tf", "tensorflow": "tf",
    "matplotlib": "tf", "mlxtend": "tf", "sklearn": "tf", "mnist1d": "tf",
    "skactiveml": "integrations", "modAL": "integrations", "baal": "integrations",
}
#: Modules that no extra installs -> their pip names.
_PIP_NAME = {"jax": "jax", "torch": "torch", "tensorflow_datasets": "tensorflow-datasets"}


def _missing_module_message(exc: ImportError) -> str:
    """The one-line message for a missing module, with the install that provides it.

    Parameters
    ----------
    exc : ImportError
        The error; ``exc.name`` is the missing module when Python raised it.

    Returns
    -------
    str
        ``exc``'s own message when it already says what to ``pip install``; else that
        message with the extra of ``robust-active-distillation`` (or the package) that
        installs ``exc.name``, when known.
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
    if "pip install" in text:
        return text
    parts = (exc.name or "").split(".")
    for module in (".".join(parts[:i]) for i in range(len(parts), 0, -1)):
        if module in _EXTRA_OF:
            return (f"a required module is missing ({text}); install it with "
                    f"pip install 'robust-active-distillation[{_EXTRA_OF[module]}]'")
        if module in _PIP_NAME:
            return f"a required module is missing ({text}); install it with pip install {_PIP_NAME[module]}"
    return f"a required module is missing ({text})"


class UsageError(SystemExit):
    """A command refused its input: exit status 2, the message on one line of stderr.

    As argparse's own errors; ``str()`` is the message.
    """

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``rad`` command.

    Bad invocations end with exit status 2, never a traceback, and their message on one
    line of stderr (argparse's own usage errors outside ``rad verify`` print the usage
    lines above it): argparse's errors, a command's own refusal
    (``SystemExit`` with a message), and the library's ``ValueError``/``TypeError``
    (bad values, an unknown ``RAD_BACKEND``), ``OverflowError``, ``OSError`` (a file or
    directory that cannot be used), a missing optional dependency (``ImportError``, with
    the install that provides it) or ``MemoryError``.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    where = f"rad {args.command}"
    try:
        return int(args.func(args))
    except UsageError:
        raise
    except SystemExit as exc:
        if not isinstance(exc.code, str):
            raise
        message = " ".join(exc.code.split())  # one line
        print(message if message.startswith("rad") else f"{where}: error: {message}", file=sys.stderr)
        raise UsageError(message) from None
    except ImportError as exc:
        print(f"{where}: error: {_missing_module_message(exc)}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, OverflowError, OSError, MemoryError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{where}: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The ``rad`` command line: ``rad demo``, ``rad info``, ``rad experiment`` and ``rad verify``."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Sequence

import numpy as np

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    import rad
    from rad._backends import get_backend
    from rad._backends.threads import resolve_threads

    n = args.n  # validated by the parser: an integer in [1, 2**40]
    m = args.mistake_rate * n
    b = min(int(args.b), n)
    print(f"rad demo: synthetic pool of n={n:,} gains ~ uniform(0, 1) float32, "
          f"m={m:,.0f} teacher mistakes ({args.mistake_rate:.0%}), budget b={b:,}")
    t0 = time.perf_counter()
    gains = np.random.default_rng(args.seed).random(n, dtype=np.float32)
    print(f"  generated the pool in {time.perf_counter() - t0:.2f} s")
    backend = get_backend(args.backend).name
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


def _info(args: argparse.Namespace) -> int:
    import rad

    print(json.dumps({"version": rad.__version__, **rad.backends()}, indent=2))
    return 0


#: The largest pool ``rad demo`` will generate (4 TiB of float32).
_DEMO_MAX_N = 1 << 40


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


def _whole(low: int):
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
    try:
        from rad.distill.cli import run_from_args
    except ImportError as exc:  # Keras (the tf extra, or keras + a backend) is missing
        raise SystemExit(f"rad experiment needs Keras 3 and a backend (pip install rad[tf]): {exc}")
    return run_from_args(args)


_VERIFY_KINDS = ("uniform", "ties", "zeros", "equal", "heavy", "span", "losses")


def _verify_instance(rng: np.random.Generator, kind: str, max_n: int):
    """A random game instance of the given family: ``(gains, losses, m, b)``."""
    n = int(rng.integers(1, max_n + 1))
    losses = None
    if kind == "uniform":
        g = rng.random(n)
    elif kind == "ties":
        g = rng.choice([0.0, 0.25, 0.5, 1.0, 3.0], n)
    elif kind == "zeros":
        g = np.where(rng.random(n) < 0.4, 0.0, rng.random(n))
    elif kind == "equal":
        g = np.full(n, float(rng.choice([0.0, 1.0, 10.0 ** rng.uniform(-6, 6)])))
    elif kind == "heavy":
        g = rng.lognormal(0.0, 2.0, n) if rng.random() < 0.5 else rng.pareto(1.0, n)
        g = np.minimum(g, 1e6)
    elif kind == "span":
        g = 10.0 ** rng.uniform(-6, 6, n)
    else:  # general losses, not proportional to the gains
        g = rng.random(n) if rng.random() < 0.5 else rng.choice([0.0, 0.5, 1.0], n)
        losses = rng.choice([0.0, 0.5, 1.0], n) if rng.random() < 0.5 else 2 * rng.random(n)
    m_kind = rng.integers(0, 6)
    m = [0.0, float(n), float(rng.integers(0, n + 1)), float(rng.uniform(0, n)),
         max(float(n) - 1e-3, 0.0), float(rng.uniform(0, 0.5 * n))][m_kind]
    b = int(rng.choice([0, 1, min(2, n), max(n - 1, 0), n, int(rng.integers(0, n + 1))]))
    return g, losses, m, b


def _verify_random(args: argparse.Namespace) -> int:
    import warnings

    from rad._solve.solution import NetHarmWarning
    from rad.verify.certificate import certificate

    try:
        from rad.verify.lp import lp_batch
    except ImportError:  # SciPy missing: certificate only
        lp_batch = None
    kinds = _VERIFY_KINDS if args.kinds is None else tuple(k.strip() for k in args.kinds.split(","))
    bad_kind = [k for k in kinds if k not in _VERIFY_KINDS]
    if bad_kind:
        raise SystemExit(f"rad verify: unknown --kinds {bad_kind}; choose from {', '.join(_VERIFY_KINDS)}")
    if args.instances < 1 or args.max_n < 1:
        raise SystemExit("rad verify: --instances and --max-n must be >= 1")
    rng = np.random.default_rng(args.seed)
    head = f"{'#':>4} {'kind':<8} {'n':>4} {'m':>9} {'b':>4} {'LP value':>14} {'lower':>14} {'upper':>14} {'rel gap':>9}  status"
    print(f"rad verify: {args.instances} random instances (seed {args.seed}, n <= {args.max_n}), "
          f"certificate vs {'the LP oracle (HiGHS)' if lp_batch else 'itself (SciPy missing: no LP)'}")
    print(head)
    print("-" * len(head))
    failures = 0
    t0 = time.perf_counter()
    for i in range(args.instances):
        kind = kinds[i % len(kinds)]
        g, losses, m, b = _verify_instance(rng, kind, args.max_n)
        notes = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NetHarmWarning)
            try:
                cert = certificate(g, m, b, losses=losses, rtol=args.rtol, method=args.method,
                                   backend=args.backend)
            except Exception as exc:  # a crash is a failure, reported and counted
                print(f"{i:>4} {kind:<8} {g.shape[0]:>4} {m:>9.3f} {b:>4}  ERROR {type(exc).__name__}: {exc}")
                failures += 1
                continue
        lp_value = math.nan
        if lp_batch is not None:
            try:
                lp_value = lp_batch(g, m, b, losses=losses).value
            except RuntimeError as exc:  # HiGHS gave up: say so, count it
                notes.append(f"LP error: {exc}")
                lp_value = math.nan
        if lp_batch is not None and not notes:
            a_max = float(np.max(g + (losses if losses is not None else (1 - m / g.shape[0]) * g)))
            tol = 1e-8 * abs(lp_value) + 1e-9 * a_max + 1e-30
            # The adversary is refined only until the gap is within rtol * scale.
            if not abs(cert.upper - lp_value) <= max(tol, args.rtol * cert.scale):
                notes.append("upper != LP")
            if not abs(cert.lower - lp_value) <= max(tol, args.rtol * cert.scale):
                notes.append("lower != LP")
        if not cert.optimal:
            notes.append("gap")
        ok = not notes
        failures += not ok
        status = "ok" if ok else "FAIL (" + ", ".join(notes) + ")"
        print(f"{i:>4} {kind:<8} {g.shape[0]:>4} {m:>9.3f} {b:>4} {lp_value:>14.7g} {cert.lower:>14.7g} "
              f"{cert.upper:>14.7g} {cert.rel_gap:>9.1e}  {status}")
    print("-" * len(head))
    print(f"{args.instances - failures}/{args.instances} passed in {time.perf_counter() - t0:.1f} s"
          + ("" if not failures else f"; {failures} FAILED"))
    return 1 if failures else 0


def _verify_file(args: argparse.Namespace) -> int:
    from rad.verify.certificate import certificate

    def load(path: str, what: str) -> np.ndarray:
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise SystemExit(f"rad verify: cannot read {what} from {path!r}: {exc}")

    if args.m is None:
        raise SystemExit("rad verify: --gains needs --m (the teacher's mistakes in the pool)")
    gains = load(args.gains, "--gains")
    losses = load(args.losses, "--losses") if args.losses else None
    q = load(args.q, "--q") if args.q else None
    n = gains.shape[0] if gains.ndim else 0
    print(f"rad verify: {args.gains}: n={n:,} {gains.dtype}, m={args.m:,.6g}, b={args.b:,}"
          + (f", losses from {args.losses}" if losses is not None else f", w={'1 - m/n' if args.w is None else args.w}")
          + (f", q from {args.q}" if q is not None else ", q from rad.solve"))
    try:
        cert = certificate(gains, args.m, args.b, w=args.w, losses=losses, solution=q, rtol=args.rtol,
                           return_adversary=args.adversary is not None, method=args.method,
                           backend=args.backend, threads=args.threads)
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"rad verify: {exc}")
    print(f"  lower bound (q vs worst mistakes)    = {cert.lower:.17g}")
    print(f"  upper bound (adversary vs best batch) = {cert.upper:.17g}")
    if not math.isnan(cert.value):
        print(f"  solver's reported value               = {cert.value:.17g}")
    print(f"  gap                                   = {cert.gap:.3e}  (relative {cert.rel_gap:.2e} of {cert.scale:.6g})")
    print(f"  sum q - b = {cert.q_sum - cert.b:.2e}, sum u - m = {cert.u_sum - cert.m:.2e}, "
          f"adversary: {cert.adversary_method}, backend: {cert.backend}, time: {cert.seconds:.2f} s")
    if args.adversary is not None:
        np.save(args.adversary, cert.adversary)
        print(f"  adversary c = 1 - u written to {args.adversary}")
    print(("OPTIMAL: certified to rtol=" if cert.optimal else "NOT CERTIFIED at rtol=") + f"{cert.rtol:g}")
    return 0 if cert.optimal else 1


def _verify(args: argparse.Namespace) -> int:
    return _verify_file(args) if args.gains else _verify_random(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rad", description="Robust Active Distillation")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="select from a built-in synthetic pool and report k*, value, time")
    demo.add_argument("--n", type=_pool_size, default=10_000_000, help="pool size (default 1e7)")
    demo.add_argument("--mistake-rate", type=_rate, default=0.3, help="m / n, in [0, 1] (default 0.3)")
    demo.add_argument("--b", type=_whole(0), default=1000, help="budget (default 1000; at most n)")
    demo.add_argument("--seed", type=_whole(0), default=0, help="non-negative seed")
    demo.add_argument("--backend", default="auto", choices=["auto", "cpp", "numba", "numpy"])
    demo.add_argument("--threads", type=_whole(1), default=None, help="kernel threads (>= 1)")
    demo.set_defaults(func=_demo)
    info = sub.add_parser("info", help="print the version and which backends are built")
    info.set_defaults(func=_info)
    ver = sub.add_parser(
        "verify",
        help="check optimality: random instances against the LP and the certificate, or "
        "certify your own pool (--gains FILE.npy --m M --b B); exit 1 on any failure")
    ver.add_argument("--gains", help=".npy file of gains (memory-mapped): certify this instance")
    ver.add_argument("--m", type=float, help="teacher mistakes in the pool (with --gains)")
    ver.add_argument("--b", type=int, default=1, help="batch size (with --gains; default 1)")
    ver.add_argument("--w", type=float, default=None, help="RAD loss weight (default 1 - m/n)")
    ver.add_argument("--losses", help=".npy file of general losses instead of w * gains")
    ver.add_argument("--q", help=".npy file of probabilities to certify instead of rad.solve's")
    ver.add_argument("--adversary", metavar="OUT.npy", help="write the adversary c = 1 - u here")
    ver.add_argument("--instances", type=int, default=50, help="random instances (default 50)")
    ver.add_argument("--seed", type=int, default=0, help="seed of the random instances")
    ver.add_argument("--max-n", dest="max_n", type=int, default=30, help="largest random pool")
    ver.add_argument("--kinds", help="comma-separated families: " + ",".join(_VERIFY_KINDS))
    ver.add_argument("--method", default="auto", choices=["auto", "saddle", "search"],
                     help="how the certificate builds its adversary (default auto)")
    ver.add_argument("--rtol", type=float, default=1e-9, help="relative gap tolerance")
    ver.add_argument("--backend", default="auto", choices=["auto", "cpp", "numba", "numpy"])
    ver.add_argument("--threads", type=int, default=None)
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


class UsageError(SystemExit):
    """A command refused its input: exit status 2 (as argparse's own errors), the message on
    one line of stderr; ``str()`` is the message."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``rad`` command. Bad invocations end with one line on stderr and exit
    status 2, never a traceback: argparse's errors, a command's own refusal
    (``SystemExit`` with a message), and the library's ``ValueError``/``TypeError``
    (bad values, an unknown ``RAD_BACKEND``), ``OverflowError``, a missing optional
    dependency (``ImportError``) or ``MemoryError``."""
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
        extra = "tf" if args.command == "experiment" else "test"
        print(f"{where}: error: a required module is missing ({exc}); install it, e.g. "
              f"pip install 'robust-active-distillation[{extra}]'", file=sys.stderr)
        return 2
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{where}: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""``rad experiment``: config file and/or flags -> :func:`rad.distill.run_experiment`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rad.distill.loop import ExperimentConfig

__all__ = ["config_from_args", "run_from_args"]

_NOT_CONFIG = {"command", "func", "config", "plots", "keras_backend"}


def _read_config(path: str) -> dict[str, Any]:
    """The fields in the ``--config`` file (TOML if it ends in ``.toml``, else JSON).

    Raises
    ------
    SystemExit
        With a one-line message naming the file when it cannot be read or parsed.
    """
    kind = "TOML" if path.endswith(".toml") else "JSON"
    try:
        if kind == "TOML":
            import tomllib

            with open(path, "rb") as f:
                values = tomllib.load(f)
        else:
            with open(path) as f:
                values = json.load(f)
    except OSError as exc:
        raise SystemExit(f"rad experiment: cannot read --config {path!r}: "
                         f"{exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, TOMLDecodeError, UnicodeDecodeError
        raise SystemExit(f"rad experiment: --config {path!r} is not valid {kind}: {exc}") from None
    if not isinstance(values, dict):
        raise SystemExit(f"rad experiment: --config {path!r} must hold a {kind} object of "
                         f"ExperimentConfig fields, not a {type(values).__name__}")
    return values


def _prepare_output_dir(path: str) -> None:
    """Create the output directory if it is missing and check that it is writable.

    Called before any training, so that a bad ``--output-dir`` does not lose a run.

    Parameters
    ----------
    path : str
        The directory ``results.json``, ``results.csv`` and ``arrays.npz`` go to.

    Raises
    ------
    SystemExit
        With a one-line message naming the directory when it cannot be used.
    """
    if os.path.exists(path) and not os.path.isdir(path):
        raise SystemExit(f"rad experiment: --output-dir {path!r} is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise SystemExit(f"rad experiment: cannot create --output-dir {path!r}: "
                         f"{exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise SystemExit(f"rad experiment: cannot write to --output-dir {path!r}: permission denied")


def _seeds(value: Any) -> list[int]:
    if isinstance(value, int):
        return list(range(value))
    text = str(value).strip()
    if "," not in text:
        return list(range(int(text)))          # "N" means seeds 0..N-1
    return [int(s) for s in text.split(",") if s.strip()]


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    """Build an :class:`ExperimentConfig` from ``--config`` then the explicit flags.

    ``--seeds 0,1,2`` lists seeds (``--seeds 10`` means ``0..9``); ``--strategies
    rad,margin`` lists strategies.
    """
    from rad.distill.loop import ExperimentConfig

    values: dict[str, Any] = _read_config(args.config) if args.config else {}
    for key, value in vars(args).items():
        if key in _NOT_CONFIG or value is None:
            continue
        if key == "strategies":
            value = [s.strip() for s in value.split(",") if s.strip()]
        elif key == "seeds":
            value = _seeds(value)
        values[key] = value
    fields = {f.name for f in dataclasses.fields(ExperimentConfig)}
    unknown = set(values) - fields
    if unknown:
        raise SystemExit(f"rad experiment: unknown config keys {sorted(unknown)}")
    if isinstance(values.get("seeds"), (int, str)):  # a config's "seeds": N, as --seeds N
        values["seeds"] = _seeds(values["seeds"])
    for key in ("strategies", "seeds"):
        if key in values:
            values[key] = tuple(values[key])
    return ExperimentConfig(**values)


def run_from_args(args: argparse.Namespace) -> int:
    """Run the experiment the flags describe; print tables; write files and plots."""
    from rad.distill.backend import use_backend

    try:
        use_backend(getattr(args, "keras_backend", None))
    except ValueError as exc:
        raise SystemExit(f"rad experiment: {exc}") from None
    from rad.distill.loop import run_experiment, save_results, summarize
    from rad.distill.stats import paired_table

    cfg = config_from_args(args)
    try:
        cfg.validate()  # cheap: before the output directory is made and Keras trains
        if cfg.output_dir:
            _prepare_output_dir(cfg.output_dir)
        result = run_experiment(cfg)
    except (ValueError, FileNotFoundError) as exc:
        raise SystemExit(f"rad experiment: {exc}") from None
    for seed, s in result["seeds"].items():
        print(f"seed {seed}: teacher test acc {s['teacher_test_acc']:.4f}, student round 0 "
              f"{s['student0_test_acc']:.4f}, m = {s['m']:.1f} of {s['pool_size']} "
              f"(true {s['m_true']}; {s['m_source']}), w = {s['w']:.3f}")
    print("\nstudent test accuracy, mean ± std over seeds:")
    print(summarize(result))
    print("\nrealized gain, Eq. (4), mean ± std over seeds:")
    print(summarize(result, "realized_gain", digits=1))
    if "rad" in cfg.strategies and len(cfg.seeds) > 1:
        print("\nRAD minus each strategy, mean test accuracy over rounds 1..T (paired):")
        print(paired_table(result))
    if cfg.output_dir:
        jpath, cpath = save_results(result, cfg.output_dir)
        print(f"\nwrote {jpath}, {cpath} and arrays.npz")
        if getattr(args, "plots", False):
            from rad.distill.plots import make_all_plots

            for p in make_all_plots(result, cfg.output_dir):
                print(f"wrote {p}")
    print(f"total time {result['environment']['total_time_s']:.1f} s "
          f"({result['environment']['keras_backend']} backend)")
    return 0

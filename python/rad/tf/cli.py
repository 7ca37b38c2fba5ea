"""``rad experiment``: config file and/or flags -> :func:`rad.tf.run_experiment`."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

__all__ = ["config_from_args", "run_from_args"]

_NOT_CONFIG = {"command", "func", "config", "plots"}


def _read_config(path: str) -> dict[str, Any]:
    if path.endswith(".toml"):
        import tomllib

        with open(path, "rb") as f:
            return tomllib.load(f)
    with open(path) as f:
        return json.load(f)


def config_from_args(args: argparse.Namespace):
    """Build an :class:`ExperimentConfig` from ``--config`` then the explicit flags.

    ``--seeds 0,1,2`` lists seeds; ``--strategies rad,margin`` lists strategies.
    """
    from rad.tf.loop import ExperimentConfig

    values: dict[str, Any] = _read_config(args.config) if args.config else {}
    for key, value in vars(args).items():
        if key in _NOT_CONFIG or value is None:
            continue
        if key == "strategies":
            value = [s.strip() for s in value.split(",") if s.strip()]
        elif key == "seeds":
            value = [int(s) for s in value.split(",")]
        values[key] = value
    fields = {f.name for f in dataclasses.fields(ExperimentConfig)}
    unknown = set(values) - fields
    if unknown:
        raise SystemExit(f"rad experiment: unknown config keys {sorted(unknown)}")
    for key in ("strategies", "seeds"):
        if key in values:
            values[key] = tuple(values[key])
    return ExperimentConfig(**values)


def run_from_args(args: argparse.Namespace) -> int:
    from rad.tf.loop import run_experiment, save_results, summarize

    cfg = config_from_args(args)
    try:
        result = run_experiment(cfg)
    except (ValueError, FileNotFoundError) as exc:
        raise SystemExit(f"rad experiment: {exc}") from None
    info = result["seeds"]
    for seed, s in info.items():
        print(f"seed {seed}: teacher test acc {s['teacher_test_acc']:.4f}, "
              f"m = {s['m']:.1f} of {s['pool_size']} ({s['m_source']}), w = {s['w']:.3f}")
    print("\nstudent test accuracy, mean ± std over seeds:")
    print(summarize(result))
    print("\nteacher mistakes among the selected points, mean ± std over seeds:")
    print(summarize(result, "teacher_mistakes_selected"))
    if cfg.output_dir:
        jpath, cpath = save_results(result, cfg.output_dir)
        print(f"\nwrote {jpath} and {cpath}")
        if getattr(args, "plots", False):
            from rad.tf.plots import make_all_plots

            for p in make_all_plots(result, cfg.output_dir):
                print(f"wrote {p}")
    print(f"total time {result['environment']['total_time_s']:.1f} s")
    return 0

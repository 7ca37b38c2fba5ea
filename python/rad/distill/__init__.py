"""Experiment driver for Robust Active Distillation (Algorithm 1) on Keras 3.

Runs on any Keras backend: ``KERAS_BACKEND=tensorflow`` (default; ``tf.distribute`` for
TPUs and several GPUs), ``jax`` (``keras.distribution`` over several devices) or
``torch``. Install with ``pip install 'robust-active-distillation[tf]'`` (TensorFlow) or
bring Keras 3 with the backend of your choice. Nothing here is imported by ``import rad``, and the submodules
import Keras only when a function that needs it is called.

>>> from rad.distill import ExperimentConfig, run_experiment   # doctest: +SKIP
>>> res = run_experiment(ExperimentConfig(rounds=2, seeds=(0, 1)))  # doctest: +SKIP
"""

from __future__ import annotations

from rad._lazy import lazy_getattr

__all__ = [
    "ExperimentConfig",
    "available_strategies",
    "build_model",
    "load_dataset",
    "load_results",
    "make_all_plots",
    "paired_table",
    "pick_distribution_strategy",
    "run_experiment",
    "save_results",
    "summarize",
]

_LAZY = {
    "ExperimentConfig": "rad.distill.loop",
    "run_experiment": "rad.distill.loop",
    "save_results": "rad.distill.loop",
    "load_results": "rad.distill.loop",
    "summarize": "rad.distill.loop",
    "available_strategies": "rad.distill.selectors",
    "build_model": "rad.distill.models",
    "load_dataset": "rad.distill.data",
    "make_all_plots": "rad.distill.plots",
    "paired_table": "rad.distill.stats",
    "pick_distribution_strategy": "rad.distill.backend",
}


__getattr__ = lazy_getattr("rad.distill", _LAZY, globals())

"""TensorFlow/Keras experiment driver for Robust Active Distillation (Algorithm 1).

Install with ``pip install rad[tf]``. Nothing here is imported by ``import rad``; the
submodules import TensorFlow only when a function that needs it is called.

>>> from rad.tf import ExperimentConfig, run_experiment   # doctest: +SKIP
>>> res = run_experiment(ExperimentConfig(dataset="digits", model="mlp", rounds=2))  # doctest: +SKIP
"""

from __future__ import annotations

from rad._lazy import lazy_getattr


__all__ = [
    "ExperimentConfig",
    "available_strategies",
    "build_model",
    "load_dataset",
    "pick_distribution_strategy",
    "run_experiment",
    "save_results",
]

_LAZY = {
    "ExperimentConfig": "rad.tf.loop",
    "run_experiment": "rad.tf.loop",
    "save_results": "rad.tf.loop",
    "available_strategies": "rad.tf.selectors",
    "build_model": "rad.tf.models",
    "load_dataset": "rad.tf.data",
    "pick_distribution_strategy": "rad.tf.hardware",
}


__getattr__ = lazy_getattr("rad.tf", _LAZY, globals())

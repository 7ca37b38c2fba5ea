"""Pick a ``tf.distribute`` strategy: a named TPU, several GPUs, or the default."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["pick_distribution_strategy"]


def pick_distribution_strategy(tpu: str | None = None, *, verbose: bool = True) -> Any:
    """Return a ``tf.distribute.Strategy`` and print which one was chosen.

    A TPU is resolved only when one is named (``tpu`` or the ``TPU_NAME`` environment
    variable); an unnamed resolver would contact a metadata server. Otherwise several
    visible GPUs give a ``MirroredStrategy`` and anything else the default strategy.
    """
    import tensorflow as tf

    name = tpu or os.environ.get("TPU_NAME") or None
    if name:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
        desc = f"TPUStrategy on {name!r} ({strategy.num_replicas_in_sync} replicas)"
    else:
        gpus = tf.config.list_logical_devices("GPU")
        if len(gpus) > 1:
            strategy = tf.distribute.MirroredStrategy()
            desc = f"MirroredStrategy over {len(gpus)} GPUs"
        else:
            strategy = tf.distribute.get_strategy()
            desc = "default strategy on " + ("1 GPU" if gpus else "the CPU")
    if verbose:
        print(f"rad.tf: using {desc}")
    return strategy

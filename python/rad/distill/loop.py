"""The active-distillation loop (Algorithm 1 of "Robust Active Distillation"), on Keras 3.

For every seed (a trial: the paper reshuffles the data and redraws the labeled set):

1. split the training data into a validation set (``n_val`` points, used only to
   estimate the teacher's mistakes ``m``), a labeled set (``n_labeled``) and the
   unlabeled pool (the rest);
2. train the teacher on the labeled set (or load a pre-trained Keras model);
3. estimate ``m`` for the pool with ``rad.estimate_m`` on the validation set (the
   paper's ``m_hat = err(val) |pool|``, or Lemma 1's conservative value); RAD then uses
   ``w = 1 - m/n``;
4. train the student on the labeled set (round 0, shared by every strategy);
5. for each strategy and round ``t = 1..T``: select ``b`` pool inputs from the current
   student's outputs, query the teacher's softmax for those inputs only, add them to the
   training set and retrain the student **from scratch** with the KL divergence to its
   targets (one-hot for labeled points, the teacher's softmax for queried ones).

Faithful by default (paper, Sec. 5 and App. D): KL to the teacher's softmax at
``T = 1``; Adam with the paper's ResNet learning-rate schedule (``lr`` for the first 2/5
of training, then ``lr/10`` to 3/5, ``lr/100`` to 4/5, ``lr/1000`` to 9/10 and
``lr/2000`` to the end); a **fixed number of optimizer steps** per training run, so
that later rounds do not get more updates than earlier ones.

Within one seed every strategy sees the same split, teacher, round-0 student, per-round
initial weights and per-round minibatch order (for the same training-set size), so
differences come from the selected points only. Controls: the ``oracle`` strategy
(ground truth; see :mod:`rad.distill.selectors`), ``no_query`` (round ``t``'s
initialisation and steps on the labeled set alone: the step-matched run without new
queries) and ``full_pool`` (the whole pool soft-labeled: an upper bound).

For every strategy and round the paper's realized gain, Eq. (4) with ``l_i = w g_i``,
is recorded: ``sum_{correct} g_i - w sum_{wrong} g_i`` over the queried inputs, with
``g = 1 - margin`` of the student that selected them (Fig. 5).
"""

from __future__ import annotations

import csv
import json
import math
import numbers
import os
import platform
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["ALL_STRATEGIES", "ExperimentConfig", "TeacherOracle", "centered_selection", "load_results",
           "run_experiment", "save_results", "summarize"]

ALL_STRATEGIES = ("rad", "margin", "entropy", "least_confidence", "uniform", "coreset",
                  "cluster_margin", "unixkd")
LR_SCHEDULES = ("paper", "constant")
#: The k-center strategies: the labeled set A and the points queried so far are their
#: centers (Sener & Savarese's core-set), so they see A's embeddings too.
_CENTERED = frozenset({"coreset", "k_center"})


@dataclass
class ExperimentConfig:
    """Everything that defines a run (saved with the results).

    Model fields take ``"mlp"``, ``"cnn"`` (1-D convolutions for ``(L,)`` inputs),
    ``"resnet"`` (``*_depth`` in 11/20/29/56/110) or ``"mobilenet"`` (``*_alpha``).

    Attributes
    ----------
    dataset, data_dir, n_samples, data_seed, test_fraction, max_train
        Data (see :func:`rad.distill.data.load_dataset`); ``n_samples`` sizes MNIST-1D.
    teacher_steps, student_steps : int
        Optimizer steps of every training run (fixed, whatever the training-set size).
    batch_size, learning_rate, lr_schedule
        Adam with ``"paper"`` (the paper's piecewise-constant decay) or ``"constant"``.
    temperature : float
        ``T`` of the teacher's and student's softmax on queried points (loss scaled by
        ``T^2``); the paper distils at ``T = 1``.
    labeled_weight : float
        Weight of the labeled points' (one-hot, i.e. cross-entropy) term; 1 is the
        paper's single KL loss over the whole training set.
    conservative_m : bool
        Use Lemma 1's conservative ``m`` instead of the paper's ``m_hat``.
    oracle, controls : bool
        Also run the oracle strategy / the ``no_query`` and ``full_pool`` controls.
    unix_keep : float
        UNIXKD's share of clean (unmixed) points in a round's budget.
    steps_per_execution : int, optional
        Optimizer steps per compiled call (Keras ``steps_per_execution``; the same
        updates, less overhead). Default 25, or 1 on PyTorch (which allows only 1).
    """

    dataset: str = "mnist1d"
    data_dir: str | None = None
    n_samples: int | None = 30000
    data_seed: int = 0
    test_fraction: float = 1.0 / 6.0
    max_train: int | None = None
    teacher_model: str = "cnn"
    teacher_width: int = 64
    teacher_depth: int = 11
    teacher_alpha: float = 1.0
    teacher_path: str | None = None
    teacher_steps: int = 3000
    student_model: str = "mlp"
    student_width: int = 128
    student_depth: int = 11
    student_alpha: float = 0.25
    student_steps: int = 1000
    strategies: Sequence[str] = ALL_STRATEGIES
    oracle: bool = True
    controls: bool = True
    rounds: int = 5
    b: int = 500
    n_labeled: int = 2500
    n_val: int = 500
    seeds: Sequence[int] = (0,)
    batch_size: int = 128
    learning_rate: float = 3e-3
    lr_schedule: str = "paper"
    temperature: float = 1.0
    labeled_weight: float = 1.0
    delta: float = 0.05
    conservative_m: bool = False
    unix_keep: float = 2.0 / 3.0
    steps_per_execution: int | None = None
    tpu: str | None = None
    output_dir: str | None = None
    progress: bool = True

    def validate(self) -> None:
        """Raise ``ValueError`` for an inconsistent configuration."""
        from rad.distill.selectors import available_strategies

        bad = [s for s in self.strategies if s not in available_strategies()]
        if bad:
            raise ValueError(f"unknown strategies {bad}; available: {available_strategies()}")
        if not self.strategies:
            raise ValueError("give at least one strategy")
        for name in ("rounds", "b", "n_labeled", "n_val", "teacher_steps", "student_steps",
                     "batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for role in ("teacher", "student"):
            self.check_model(role)
        if not (0.0 < float(self.learning_rate) < math.inf):
            raise ValueError(f"learning_rate must be a finite number > 0, got {self.learning_rate}")
        if not 0.0 < float(self.delta) < 1.0:
            raise ValueError(f"delta (estimate_m's failure probability) must lie in (0, 1), got {self.delta}")
        if not 0.0 <= float(self.unix_keep) <= 1.0:
            raise ValueError(f"unix_keep must be in [0, 1], got {self.unix_keep}")
        bad_seeds = [x for x in self.seeds if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < 0]
        if bad_seeds:
            raise ValueError(f"seeds must be non-negative integers, got {bad_seeds}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not self.labeled_weight >= 0:
            raise ValueError(f"labeled_weight must be >= 0, got {self.labeled_weight}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if not self.seeds:
            raise ValueError("give at least one seed (--seeds N runs seeds 0..N-1; --seeds 0, runs seed 0)")

    def check_model(self, role: str, input_shape: tuple[int, ...] | None = None) -> None:
        """Raise ``ValueError`` (naming ``role``) unless the ``role`` model can be built."""
        from rad.distill.models import check_model

        try:
            check_model(getattr(self, f"{role}_model"), input_shape, depth=getattr(self, f"{role}_depth"),
                        alpha=getattr(self, f"{role}_alpha"))
        except ValueError as exc:
            raise ValueError(f"{role}_model: {exc}") from None

    @property
    def run_strategies(self) -> tuple[str, ...]:
        """The strategies run, the oracle last when it is on."""
        names = tuple(dict.fromkeys(self.strategies))
        if self.oracle and "oracle" not in names:
            names += ("oracle",)
        return names


class TeacherOracle:
    """The teacher behind a query counter: soft labels for the inputs of a selection.

    Every selection uses pool points that must not have been used before; a second use
    raises ``RuntimeError`` (the loop must never query a point twice).
    """

    def __init__(self, predict_logits: Callable[[np.ndarray], np.ndarray], x_pool: np.ndarray,
                 temperature: float) -> None:
        self._predict = predict_logits
        self._x = x_pool
        self.temperature = float(temperature)
        self.queries = 0
        self.queried: set[int] = set()

    def query(self, idx: np.ndarray, inputs: np.ndarray | None = None) -> np.ndarray:
        """Teacher softmax (at ``temperature``) on ``inputs`` (default ``x_pool[idx]``).

        Parameters
        ----------
        idx : array of int
            Pool points this query uses up (one per input).
        inputs : array, optional
            The inputs actually sent to the teacher (e.g. mixed-up ones), one per index.
        """
        idx = np.asarray(idx, dtype=np.int64)
        dup = self.queried.intersection(idx.tolist())
        if dup or np.unique(idx).size != idx.size:
            raise RuntimeError(f"teacher queried twice for pool points {sorted(dup)[:10]}")
        x = self._x[idx] if inputs is None else inputs
        if len(x) != idx.size:
            raise ValueError(f"{len(x)} inputs for {idx.size} pool points")
        self.queried.update(idx.tolist())
        self.queries += idx.size
        return _softmax(self._predict(x) / self.temperature)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    p: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return p


def _estimate_m(teacher_pred: np.ndarray, labels: np.ndarray, pool_size: int,
                delta: float, conservative: bool) -> tuple[float, str]:
    """``m`` for the pool from the validation set; returns (m, how it was obtained)."""
    from rad.estimate import estimate_m

    est = estimate_m(teacher_pred, labels, pool_size, delta=delta)
    m = float(est.conservative if conservative else est.m_hat)
    return min(max(m, 0.0), float(pool_size)), (
        "rad.estimate_m " + ("conservative (Lemma 1)" if conservative else "m_hat"))


def _margin_gain(probs: np.ndarray) -> np.ndarray:
    """``1 - (top1 - top2)``: the paper's default gain."""
    part = np.partition(probs, probs.shape[1] - 2, axis=1)
    gain: np.ndarray = 1.0 - (part[:, -1] - part[:, -2])
    return gain


class _Trainer:
    """Builds, trains and evaluates Keras models, reusing one compiled model per role.

    Retraining "from scratch" loads freshly initialised weights (drawn with the round's
    seed) into the role's model and zeroes its optimizer state, instead of building and
    compiling a new model: the compiled train step is traced once per role and run.
    """

    def __init__(self, cfg: ExperimentConfig, input_shape: tuple[int, ...], k: int,
                 placement: Any) -> None:
        self.cfg, self.input_shape, self.k, self.placement = cfg, input_shape, k, placement
        self._models: dict[tuple[str, int], Any] = {}
        self._embed: dict[int, Any] = {}

    def _build(self, role: str, seed: int) -> Any:
        from rad.distill.models import build_model

        c = self.cfg
        with self.placement.scope():
            return build_model(getattr(c, f"{role}_model"), self.input_shape, self.k,
                               width=getattr(c, f"{role}_width"),
                               depth=getattr(c, f"{role}_depth"),
                               alpha=getattr(c, f"{role}_alpha"), seed=seed)

    def _schedule(self, steps: int) -> Any:
        import keras

        lr = float(self.cfg.learning_rate)
        if self.cfg.lr_schedule == "constant":
            return keras.optimizers.schedules.PiecewiseConstantDecay([steps], [lr, lr])
        cuts = sorted({max(1, int(round(f * steps))) for f in (0.4, 0.6, 0.8, 0.9)})
        values = [lr, lr * 1e-1, lr * 1e-2, lr * 1e-3, lr * 5e-4][:len(cuts) + 1]
        return keras.optimizers.schedules.PiecewiseConstantDecay(cuts, values)

    def _loss(self) -> Callable[[Any, Any], Any]:
        import keras

        ops, k = keras.ops, self.k
        temperature, w_lab = float(self.cfg.temperature), float(self.cfg.labeled_weight)

        def distill_loss(y_true: Any, logits: Any) -> Any:
            p = y_true[:, :k]
            soft = y_true[:, k]
            t = 1.0 + soft * (temperature - 1.0)          # T on queried points, 1 on labeled
            logq = ops.log_softmax(logits / t[:, None], axis=-1)
            kl = ops.sum(p * (ops.log(ops.maximum(p, 1e-12)) - logq), axis=-1)
            return kl * (soft * temperature ** 2 + (1.0 - soft) * w_lab)

        return distill_loss

    def fresh(self, role: str, seed: int, steps: int) -> Any:
        """The role's model with new initial weights (``seed``) and a reset optimizer."""
        import keras

        key = (role, int(steps))
        new = self._build(role, seed)
        model = self._models.get(key)
        if model is None:
            spe = self.cfg.steps_per_execution
            if spe is None:   # several steps per compiled call; PyTorch allows only 1
                spe = 1 if keras.backend.backend() == "torch" else 25
            with self.placement.scope():
                new.compile(optimizer=keras.optimizers.Adam(self._schedule(steps)),
                            loss=self._loss(), steps_per_execution=int(spe))
            self._models[key] = new
            return new
        model.set_weights(new.get_weights())
        for v in model.optimizer.variables:
            if "learning_rate" not in v.path:
                v.assign(np.zeros(v.shape, dtype=keras.backend.standardize_dtype(v.dtype)))
        return model

    def fit(self, model: Any, x: np.ndarray, targets: np.ndarray, steps: int, seed: Sequence[int]) -> None:
        """Exactly ``steps`` Adam steps on minibatches of epoch-wise permutations.

        The minibatch order depends only on ``seed`` and ``len(x)``.
        """
        bs = int(self.cfg.batch_size)
        rng = np.random.default_rng(list(seed))
        n = x.shape[0]
        need = steps * bs
        order = np.concatenate([rng.permutation(n) for _ in range(-(-need // n))])[:need]
        row = max(1, int(np.prod(x.shape[1:])) * 4 + targets.shape[1] * 4)
        chunk = max(1, min(steps, (64 << 20) // (row * bs)))   # steps per fit call (<= 64 MB)
        t = targets.astype(np.float32)
        for s0 in range(0, steps, chunk):
            sel = order[s0 * bs:min(steps, s0 + chunk) * bs]
            model.fit(x[sel], t[sel], batch_size=bs, epochs=1, shuffle=False, verbose=0)

    def logits(self, model: Any, x: np.ndarray, chunk: int = 8192) -> np.ndarray:
        """Forward pass in chunks, as float64 NumPy."""
        import keras

        from rad.distill.backend import no_grad

        out = []
        with no_grad():
            for i in range(0, x.shape[0], chunk):
                out.append(keras.ops.convert_to_numpy(model(x[i:i + chunk], training=False)))
        return np.concatenate(out).astype(np.float64) if out else np.zeros((0, self.k))

    def embeddings(self, model: Any, x: np.ndarray) -> np.ndarray:
        from rad.distill.models import embedding_model

        emb = self._embed.get(id(model))
        if emb is None:
            emb = self._embed[id(model)] = embedding_model(model)
        return self.logits(emb, x)


def _targets(y_hard: np.ndarray, soft: np.ndarray, k: int) -> np.ndarray:
    """Stack one-hot labels (flag 0) and soft labels (flag 1) into ``(n, k + 1)``."""
    hard = np.zeros((y_hard.size, k + 1))
    hard[np.arange(y_hard.size), y_hard] = 1.0
    sl = np.concatenate([soft, np.ones((soft.shape[0], 1))], axis=1)
    return np.concatenate([hard, sl], axis=0)


class _Progress:
    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled, self.t0 = total, 0, enabled, time.perf_counter()
        self.tty = sys.stderr.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        frac = self.done / max(self.total, 1)
        el = time.perf_counter() - self.t0
        eta = el / self.done * (self.total - self.done)
        msg = (f"[{'#' * int(30 * frac):<30}] {self.done}/{self.total} {label:<36} "
               f"{el:6.0f}s elapsed, ~{eta:4.0f}s left")
        if self.tty:
            sys.stderr.write("\r" + msg + ("\n" if self.done == self.total else ""))
        else:
            sys.stderr.write(msg + "\n")
        sys.stderr.flush()


def _row(seed: int, strategy: str, t: int, **kw: Any) -> dict[str, Any]:
    base = dict(seed=seed, strategy=strategy, round=t, n_train=0, queries=0,
                student_test_acc=math.nan, teacher_acc_selected=math.nan,
                teacher_mistakes_selected=0, gain_correct=0.0, gain_wrong=0.0,
                realized_gain=0.0, wall_time_s=0.0, teacher_test_acc=math.nan,
                m=math.nan, w=math.nan)
    base.update(kw)
    return base


def centered_selection(strategy: str, labeled_emb: np.ndarray, pool_emb: np.ndarray, used: np.ndarray, b: int,
                       rng: Any) -> Any:
    """A k-center strategy's selection with the labeled set A as its initial centers.

    ``labeled_emb`` and ``pool_emb`` are the embeddings of A and of the pool: A goes ahead
    of the pool, as labeled points (never selected), with the points ``used`` so far; the
    selection's indices are the pool's. Sener & Savarese's core-set covers the unlabeled
    pool from the labeled set; started from a random pool point, k-center spends picks on
    regions A already covers.
    """
    from rad.distill.selectors import Selection, select
    from rad.selectors import PoolState

    n_a = labeled_emb.shape[0]
    state = PoolState(embeddings=np.concatenate([labeled_emb, pool_emb]),
                      labeled=np.concatenate([np.arange(n_a), n_a + np.asarray(used, dtype=np.int64)]))
    return Selection.clean(select(strategy, state, b, rng).indices - n_a)


def run_experiment(config: ExperimentConfig, *, teacher: Any = None) -> dict[str, Any]:
    """Run Algorithm 1 for every seed and strategy (and the controls); return the results.

    Parameters
    ----------
    config : ExperimentConfig
    teacher : keras.Model, optional
        A pre-trained teacher (outputs logits) used instead of training one; a path in
        ``config.teacher_path`` is loaded with ``keras.models.load_model``.

    Returns
    -------
    dict
        ``{"config", "environment", "seeds": {seed: {...}}, "rows": [...]}``. ``rows``
        has one record per (seed, strategy, round): ``student_test_acc``,
        ``teacher_acc_selected``, ``teacher_mistakes_selected``, ``gain_correct``,
        ``gain_wrong``, ``realized_gain`` (Eq. 4), ``queries`` (cumulative),
        ``n_train``, ``wall_time_s``. ``seeds[s]["selections"][strategy]`` lists each
        round's used pool indices; ``seeds[s]["mixed"]["unixkd"]`` the partners
        (``-1`` for clean inputs). Strategy names ``no_query`` and ``full_pool`` are the
        controls.
    """
    from rad.distill.backend import pick_distribution_strategy, prepare

    backend = prepare(deterministic=True)
    import keras

    from rad.distill.data import load_dataset
    from rad.distill.selectors import needs_embeddings, select
    from rad.selectors import PoolState

    cfg = config
    cfg.validate()
    placement = pick_distribution_strategy(cfg.tpu, verbose=cfg.progress)
    strategies = cfg.run_strategies
    rows: list[dict[str, Any]] = []
    per_seed: dict[str, Any] = {}
    n_steps = len(cfg.seeds) * (1 + len(strategies) * cfg.rounds
                                + (cfg.rounds + 1 if cfg.controls else 0))
    progress = _Progress(n_steps, cfg.progress)
    t_start = time.perf_counter()
    ds = load_dataset(cfg.dataset, data_dir=cfg.data_dir, test_fraction=cfg.test_fraction,
                      seed=cfg.data_seed, max_train=cfg.max_train, n_samples=cfg.n_samples,
                      data_seed=cfg.data_seed)
    n_total, k = len(ds.y_train), ds.num_classes
    for role in ("teacher", "student"):  # the data's shape, before any training
        cfg.check_model(role, ds.input_shape)
    if cfg.n_val + cfg.n_labeled + cfg.rounds * cfg.b > n_total:
        raise ValueError(
            f"n_val={cfg.n_val} + n_labeled={cfg.n_labeled} + rounds*b={cfg.rounds * cfg.b} "
            f"exceeds the {n_total} training points of {cfg.dataset}")
    trainer = _Trainer(cfg, ds.input_shape, k, placement)
    s_steps, t_steps = int(cfg.student_steps), int(cfg.teacher_steps)

    def accuracy(model: Any) -> float:
        return float(np.mean(trainer.logits(model, ds.x_test).argmax(1) == ds.y_test))

    for seed in cfg.seeds:
        seed = int(seed)
        rng = np.random.default_rng(seed)
        perm = rng.permutation(n_total)
        val_idx = perm[:cfg.n_val]
        lab_idx = perm[cfg.n_val:cfg.n_val + cfg.n_labeled]
        pool_idx = perm[cfg.n_val + cfg.n_labeled:]
        x_val, y_val = ds.x_train[val_idx], ds.y_train[val_idx]
        x_lab, y_lab = ds.x_train[lab_idx], ds.y_train[lab_idx]
        x_pool, y_pool = ds.x_train[pool_idx], ds.y_train[pool_idx]   # y_pool: evaluation only
        n_pool = len(pool_idx)
        hard = _targets(y_lab, np.zeros((0, k)), k)

        t0 = time.perf_counter()
        if teacher is not None:
            teacher_model, teacher_src = teacher, "given model"
        elif cfg.teacher_path:
            teacher_model = keras.models.load_model(cfg.teacher_path, compile=False)
            teacher_src = f"loaded from {cfg.teacher_path}"
        else:
            teacher_model = trainer.fresh("teacher", seed * 1000 + 900, t_steps)
            trainer.fit(teacher_model, x_lab, hard, t_steps, (seed, 900))
            teacher_src = f"trained on the {cfg.n_labeled} labeled points ({t_steps} steps)"
        teacher_test_acc = accuracy(teacher_model)
        val_pred = trainer.logits(teacher_model, x_val).argmax(1)
        m, m_source = _estimate_m(val_pred, y_val, n_pool, cfg.delta, cfg.conservative_m)
        w = 1.0 - m / n_pool
        # Diagnostics, never seen by a selector (except the oracle, a ground-truth control)
        # and not counted as queries: the teacher on the whole pool.
        teacher_pool_logits = trainer.logits(teacher_model, x_pool)
        teacher_right = teacher_pool_logits.argmax(1) == y_pool
        teacher_fn = lambda x, _m=teacher_model: trainer.logits(_m, x)  # noqa: E731

        student = trainer.fresh("student", seed * 1000, s_steps)
        trainer.fit(student, x_lab, hard, s_steps, (seed, 0))
        acc0 = accuracy(student)
        student0_weights = student.get_weights()
        probs0 = _softmax(trainer.logits(student, x_pool))
        emb0 = (trainer.embeddings(student, x_pool)
                if any(needs_embeddings(s) for s in strategies) else None)
        # k-center's initial centers are the labeled set A (Sener & Savarese): its
        # embeddings under the round-0 student
        emb_lab0 = (trainer.embeddings(student, x_lab)
                    if any(s in _CENTERED for s in strategies) else None)
        t_setup = time.perf_counter() - t0
        pool_margin = 1.0 - _margin_gain(probs0)
        edges = np.quantile(pool_margin, np.linspace(0, 1, 11))
        bins = np.clip(np.searchsorted(edges, pool_margin, side="right") - 1, 0, 9)
        margin_diag = {
            "student_margin": [float(pool_margin[bins == i].mean()) for i in range(10)],
            "teacher_acc": [float(teacher_right[bins == i].mean()) for i in range(10)],
        }
        progress.step(f"seed {seed} teacher+student0")
        common = dict(teacher_test_acc=teacher_test_acc, m=m, w=w)
        seed_info: dict[str, Any] = {
            "teacher": teacher_src, "teacher_test_acc": teacher_test_acc,
            "teacher_val_acc": float(np.mean(val_pred == y_val)),
            "teacher_pool_acc": float(teacher_right.mean()), "m": m,
            "m_true": int((~teacher_right).sum()), "m_source": m_source,
            "pool_size": n_pool, "w": w, "student0_test_acc": acc0,
            "setup_time_s": t_setup, "labeled": lab_idx.tolist(), "n_val": cfg.n_val,
            "n_test": int(len(ds.y_test)), "margin_vs_teacher": margin_diag,
            "pool_gains_round0": _margin_gain(probs0), "selections": {}, "mixed": {}}

        for strat in strategies:
            rows.append(_row(seed, strat, 0, n_train=cfg.n_labeled, student_test_acc=acc0,
                             **common))
            oracle = TeacherOracle(teacher_fn, x_pool, cfg.temperature)
            used = np.zeros(0, dtype=np.int64)
            x_q = np.zeros((0,) + ds.input_shape, np.float32)
            soft = np.zeros((0, k))
            sel_rng = np.random.default_rng([seed, zlib.crc32(strat.encode())])
            seed_info["selections"][strat] = []
            if strat == "unixkd":
                seed_info["mixed"][strat] = []
            for t in range(1, cfg.rounds + 1):
                t0 = time.perf_counter()
                if t == 1:
                    probs, emb = probs0, emb0
                else:
                    probs = _softmax(trainer.logits(student, x_pool))
                    emb = (trainer.embeddings(student, x_pool) if needs_embeddings(strat)
                           else None)
                params = {"keep": cfg.unix_keep} if strat == "unixkd" else {}
                if strat in _CENTERED:
                    assert emb_lab0 is not None and emb is not None
                    emb_lab = emb_lab0 if t == 1 else trainer.embeddings(student, x_lab)
                    sel = centered_selection(strat, emb_lab, emb, used, cfg.b, sel_rng)
                else:
                    pool = PoolState(probs=probs, embeddings=emb if needs_embeddings(strat)
                                     else None, m=m, labeled=used)
                    sel = select(strat, pool, cfg.b, sel_rng, teacher_correct=teacher_right,
                                 **params)
                idx = sel.indices
                if idx.size != cfg.b or np.intersect1d(idx, used).size:
                    raise RuntimeError(f"{strat} returned an invalid selection")
                inputs = sel.inputs(x_pool)
                soft_sel = oracle.query(idx, inputs)
                # Eq. (4): gains of the selecting student on the queried inputs; a mixed
                # input counts as correct when the teacher gives its dominant label.
                if (sel.mixed >= 0).any():
                    if t == 1:
                        student.set_weights(student0_weights)
                    gain = _margin_gain(_softmax(trainer.logits(student, inputs)))
                else:
                    gain = _margin_gain(probs[idx])
                correct = soft_sel.argmax(1) == y_pool[sel.dominant()]
                g_ok, g_bad = float(gain[correct].sum()), float(gain[~correct].sum())
                used = np.concatenate([used, idx])
                x_q = np.concatenate([x_q, inputs])
                soft = np.concatenate([soft, soft_sel])
                student = trainer.fresh("student", seed * 1000 + t, s_steps)
                x_train = np.concatenate([x_lab, x_q])
                trainer.fit(student, x_train, _targets(y_lab, soft, k), s_steps, (seed, t))
                rows.append(_row(
                    seed, strat, t, n_train=int(x_train.shape[0]), queries=int(oracle.queries),
                    student_test_acc=accuracy(student),
                    teacher_acc_selected=float(correct.mean()),
                    teacher_mistakes_selected=int((~correct).sum()),
                    gain_correct=g_ok, gain_wrong=g_bad, realized_gain=g_ok - w * g_bad,
                    wall_time_s=time.perf_counter() - t0, **common))
                seed_info["selections"][strat].append(idx.tolist())
                if strat == "unixkd":
                    seed_info["mixed"][strat].append(sel.mixed.tolist())
                progress.step(f"seed {seed} {strat} round {t}")

        if cfg.controls:
            rows.append(_row(seed, "no_query", 0, n_train=cfg.n_labeled,
                             student_test_acc=acc0, **common))
            for t in range(1, cfg.rounds + 1):
                t0 = time.perf_counter()
                student = trainer.fresh("student", seed * 1000 + t, s_steps)
                trainer.fit(student, x_lab, hard, s_steps, (seed, t))
                rows.append(_row(seed, "no_query", t, n_train=cfg.n_labeled,
                                 student_test_acc=accuracy(student),
                                 wall_time_s=time.perf_counter() - t0, **common))
                progress.step(f"seed {seed} no_query round {t}")
            t0 = time.perf_counter()
            soft_all = _softmax(teacher_pool_logits / cfg.temperature)
            student = trainer.fresh("student", seed * 1000 + cfg.rounds, s_steps)
            trainer.fit(student, np.concatenate([x_lab, x_pool]), _targets(y_lab, soft_all, k),
                        s_steps, (seed, cfg.rounds))
            correct = soft_all.argmax(1) == y_pool
            rows.append(_row(seed, "full_pool", cfg.rounds, n_train=cfg.n_labeled + n_pool,
                             queries=n_pool, student_test_acc=accuracy(student),
                             teacher_acc_selected=float(correct.mean()),
                             teacher_mistakes_selected=int((~correct).sum()),
                             wall_time_s=time.perf_counter() - t0, **common))
            progress.step(f"seed {seed} full_pool")
        per_seed[str(seed)] = seed_info

    result = {
        "config": asdict(cfg) | {"strategies": list(cfg.strategies), "seeds": list(cfg.seeds)},
        "environment": _environment(backend, placement.description,
                                    time.perf_counter() - t_start),
        "seeds": per_seed,
        "rows": rows,
    }
    if cfg.output_dir:
        save_results(result, cfg.output_dir)
    return result


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``).

    Runs are bit-identical on one machine; TensorFlow's CPU kernels differ by instruction
    set, so another CPU can train another teacher (experiments/REPORT.md).
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _environment(backend: str, placement: str, total: float) -> dict[str, Any]:
    import keras

    env = {"python": platform.python_version(), "keras": keras.__version__,
           "keras_backend": backend, "placement": placement, "numpy": np.__version__,
           "platform": platform.platform(), "cpu": _cpu_model(), "cpu_count": os.cpu_count(),
           "total_time_s": total}
    if backend == "tensorflow":
        import tensorflow as tf

        env["tensorflow"] = tf.__version__
    elif backend == "torch":
        import torch

        env["torch"] = torch.__version__
    else:
        import jax

        env["jax"] = jax.__version__
    return env


CSV_FIELDS = ("seed", "strategy", "round", "n_train", "queries", "student_test_acc",
              "teacher_acc_selected", "teacher_mistakes_selected", "gain_correct",
              "gain_wrong", "realized_gain", "wall_time_s", "teacher_test_acc", "m", "w")
#: Per-seed entries moved from ``results.json`` into ``arrays.npz``.
_ARRAY_KEYS = ("selections", "mixed", "pool_gains_round0", "labeled")


def save_results(result: dict[str, Any], output_dir: str | os.PathLike[str]) -> tuple[str, str]:
    """Write ``results.json``, ``results.csv`` and ``arrays.npz`` into ``output_dir``.

    ``results.json`` has the config, environment, per-seed summaries and rows;
    ``arrays.npz`` (compressed) the bulky per-seed arrays: ``{seed}/labeled``,
    ``{seed}/pool_gains_round0`` (first seed only), ``{seed}/selections/{strategy}``
    (rounds x b) and
    ``{seed}/mixed/{strategy}``. :func:`load_results` puts them back.
    """
    os.makedirs(output_dir, exist_ok=True)
    jpath = os.path.join(output_dir, "results.json")
    cpath = os.path.join(output_dir, "results.csv")
    arrays: dict[str, np.ndarray] = {}
    seeds = {}
    for i, (s, info) in enumerate(result["seeds"].items()):
        slim = {key: v for key, v in info.items() if key not in _ARRAY_KEYS}
        seeds[s] = slim
        arrays[f"{s}/labeled"] = np.asarray(info["labeled"], np.int32)
        if i == 0 and info.get("pool_gains_round0") is not None:   # Fig. 2 uses seed 1 only
            arrays[f"{s}/pool_gains_round0"] = np.asarray(info["pool_gains_round0"], np.float32)
        for kind in ("selections", "mixed"):
            for strat, per_round in info.get(kind, {}).items():
                arrays[f"{s}/{kind}/{strat}"] = np.asarray(per_round, np.int32)
    with open(jpath, "w") as f:
        json.dump({**result, "seeds": seeds}, f, indent=1, default=float)
    np.savez_compressed(os.path.join(output_dir, "arrays.npz"), **arrays)  # type: ignore[arg-type]
    with open(cpath, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        wr.writeheader()
        for r in result["rows"]:
            wr.writerow({key: r[key] for key in CSV_FIELDS})
    return jpath, cpath


def load_results(output_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Read what :func:`save_results` wrote (arrays back in ``seeds[s]``)."""
    with open(os.path.join(output_dir, "results.json")) as f:
        result: dict[str, Any] = json.load(f)
    apath = os.path.join(output_dir, "arrays.npz")
    if os.path.exists(apath):
        with np.load(apath) as arr:
            for key in arr.files:
                parts = key.split("/")
                info = result["seeds"][parts[0]]
                if len(parts) == 2:
                    info[parts[1]] = arr[key]
                else:
                    info.setdefault(parts[1], {})[parts[2]] = arr[key].tolist()
    return result


def summarize(result: dict[str, Any], metric: str = "student_test_acc",
              digits: int = 4) -> str:
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
                         f"{v.mean():.{digits}f} ± {v.std(ddof=1) if v.size > 1 else 0.0:.{digits}f}")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

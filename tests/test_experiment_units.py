"""Unit tests of the driver's pieces that need no Keras: selectors, oracle, stats, CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rad.distill.selectors import Oracle, Selection, UnixKD, available_strategies, select
from rad.distill.stats import endpoints, holm, paired_comparisons, paired_table
from rad.selectors import PoolState


def _pool(n=200, k=5, seed=0, labeled=()):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k) * 0.5, size=n)
    return PoolState(probs=probs, m=0.2 * n, labeled=np.asarray(labeled, dtype=np.int64))


def test_strategy_names():
    names = available_strategies()
    assert {"rad", "margin", "uniform", "unixkd", "oracle", "cluster_margin"} <= set(names)


def test_unixkd_keeps_the_most_uncertain_and_mixes_the_next():
    pool = _pool(labeled=[0, 1, 2])
    sel = UnixKD().select(pool, 30, rng=1)
    ent = pool.score("entropy")
    cand = np.setdiff1d(np.arange(pool.n), [0, 1, 2])
    ranked = cand[np.argsort(-ent[cand], kind="stable")]
    clean = sel.indices[sel.mixed < 0]
    mixed = sel.indices[sel.mixed >= 0]
    assert clean.size == 20 and mixed.size == 10
    assert set(clean) == set(ranked[:20])                       # most uncertain kept as is
    assert set(mixed) == set(ranked[20:30])                     # next ones mixed
    assert np.all(np.diff(sel.indices) > 0) and not set(sel.indices) & {0, 1, 2}
    assert np.all((sel.lam[sel.mixed >= 0] >= 0) & (sel.lam[sel.mixed >= 0] <= 1))
    assert np.all(sel.lam[sel.mixed < 0] == 0)
    again = UnixKD().select(pool, 30, rng=1)
    assert np.array_equal(again.indices, sel.indices) and np.array_equal(again.mixed, sel.mixed)


def test_selection_inputs_mix_with_the_partner():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    sel = Selection(np.array([1, 3]), np.array([-1, 5]), np.array([0.0, 0.25], np.float32))
    out = sel.inputs(x)
    assert np.allclose(out[0], x[1])
    assert np.allclose(out[1], 0.75 * x[3] + 0.25 * x[5])
    assert sel.dominant().tolist() == [1, 3]
    sel.lam[1] = 0.75
    assert sel.dominant().tolist() == [1, 5]


def test_oracle_takes_lowest_margin_among_correct():
    pool = _pool(labeled=[5])
    correct = np.zeros(pool.n, bool)
    correct[::2] = True
    idx = Oracle().select(pool, 10, rng=0, teacher_correct=correct)
    assert np.all(correct[idx]) and 5 not in idx
    margin = pool.score("raw_margin")
    ok = np.flatnonzero(correct)
    assert set(idx) == set(ok[np.argsort(margin[ok], kind="stable")[:10]])
    # fewer correct points than b: all of them, then the rest by margin
    few = np.zeros(pool.n, bool)
    few[[3, 7]] = True
    idx = Oracle().select(pool, 5, rng=0, teacher_correct=few)
    assert {3, 7} <= set(idx) and idx.size == 5


def test_select_dispatch():
    pool = _pool()
    assert select("margin", pool, 7, 0).indices.size == 7
    with pytest.raises(ValueError, match="ground truth"):
        select("oracle", pool, 7, 0)
    with pytest.raises(ValueError, match="unknown"):
        select("nope", pool, 7, 0)


def test_teacher_oracle_refuses_a_second_query():
    from rad.distill.loop import TeacherOracle

    x = np.zeros((5, 2), dtype=np.float32)
    oracle = TeacherOracle(lambda z: np.zeros((z.shape[0], 3)), x, temperature=1.0)
    p = oracle.query(np.array([0, 2]))
    assert p.shape == (2, 3) and np.allclose(p.sum(1), 1.0)
    assert oracle.queries == 2
    p = oracle.query(np.array([1]), inputs=np.ones((1, 2), np.float32))
    assert oracle.queries == 3
    with pytest.raises(RuntimeError, match="twice"):
        oracle.query(np.array([2, 3]))


def test_holm():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def _fake_result(diffs, rounds=3):
    rows = []
    for seed, d in enumerate(diffs):
        for t in range(rounds + 1):
            rows.append(dict(seed=seed, strategy="rad", round=t, student_test_acc=0.5 + d))
            rows.append(dict(seed=seed, strategy="uniform", round=t, student_test_acc=0.5))
            rows.append(dict(seed=seed, strategy="no_query", round=t,
                             student_test_acc=0.4 + 0.001 * seed))
    return {"config": {"rounds": rounds, "strategies": ["rad", "uniform"]}, "rows": rows}


def test_paired_comparisons():
    res = _fake_result([0.01, 0.02, 0.015, 0.03, 0.01])
    ep = endpoints(res)
    assert ep["rad"]["1"] == pytest.approx(0.52)
    (uni, nq) = paired_comparisons(res)
    assert uni.baseline == "uniform" and uni.n == 5 and uni.wins == 5
    assert uni.mean == pytest.approx(0.017)
    from scipy import stats

    d = [0.01, 0.02, 0.015, 0.03, 0.01]
    assert uni.p_t == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)   # t = 4.54, 4 df
    assert uni.p_t == pytest.approx(0.0105, abs=1e-4)
    assert uni.p_wilcoxon == pytest.approx(0.0625)                     # 2 / 2^5, exact
    assert uni.p_holm == pytest.approx(uni.p_t)                        # family of one
    assert nq.baseline == "no_query" and nq.p_holm is None
    table = paired_table(res)
    assert "| uniform | 5 | +1.70" in table and "| no_query |" in table


def test_paired_comparisons_null():
    res = _fake_result([0.0] * 4)
    (uni, _) = paired_comparisons(res)
    assert uni.mean == 0 and uni.p_t == 1.0 and uni.wins == 0


def test_coreset_starts_from_the_labeled_set():
    """The driver's k-center strategies cover the pool from the labeled set A (Sener &
    Savarese): with A in one cluster and a few pool points far away, the picks go there
    (started from a random pool point, 6 of 10 went to A's cluster)."""
    from rad.distill.loop import centered_selection

    rng = np.random.default_rng(0)
    a = rng.normal(size=(200, 2))
    pool = np.r_[rng.normal(size=(900, 2)), rng.normal(size=(100, 2)) + [10, 0]]
    used = np.array([950, 960])  # queried in an earlier round: centers too, never again
    sel = centered_selection("coreset", a, pool, used, 10, 0)
    idx = sel.indices
    assert idx.shape == (10,) and np.sum(idx >= 900) >= 8 and not np.isin(idx, used).any()
    centers = np.r_[a, pool[used], pool[idx]]
    radius = np.sqrt(((pool[:, None, :] - centers[None]) ** 2).sum(-1)).min(1).max()
    assert radius < 1.5  # (2.12 from a random start)


@pytest.mark.parametrize("field, value, message", [
    ("rounds", 0, "rounds must be positive"),
    ("delta", 1.5, "delta"),
    ("unix_keep", 1.5, "unix_keep"),
    ("learning_rate", -0.01, "learning_rate"),
    ("learning_rate", 0.0, "learning_rate"),
    ("student_model", "transformer", "student_model"),
    ("seeds", (0, -1), "seeds must be non-negative"),
])
def test_bad_configs_are_refused_before_training(field, value, message):
    from rad.distill.loop import ExperimentConfig

    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**{field: value}).validate()


def test_holm_keeps_a_missing_p_value_missing():
    adj = holm([0.01, float("nan"), 0.04])
    assert math.isnan(adj[1]) and adj[0] == pytest.approx(0.02) and adj[2] == pytest.approx(0.04)


def test_a_constant_difference_over_seeds_has_no_t_test():
    """Every seed with the same difference up to the rounding of the per-round means:
    the t statistic is 0/0 (NaN), not a p-value of 1e-15 from 1e-17 of noise."""
    d = -2 / 300
    res = _fake_result([d, d + 1.2e-16, d])  # one ulp of 0.5 apart after 0.5 + d
    (uni, _) = paired_comparisons(res)
    assert math.isnan(uni.p_t)


def test_config_and_cli_flags(tmp_path):
    from rad.cli import build_parser
    from rad.distill.cli import config_from_args
    from rad.distill.loop import ExperimentConfig

    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"dataset": "digits", "rounds": 7, "b": 5}))
    args = build_parser().parse_args(
        ["experiment", "--config", str(path), "--rounds", "2", "--seeds", "0,4",
         "--strategies", "rad,unixkd", "--student-model", "cnn", "--student-steps", "50",
         "--temperature", "2", "--lr-schedule", "constant", "--no-oracle",
         "--keras-backend", "torch"])
    cfg = config_from_args(args)
    assert (cfg.dataset, cfg.rounds, cfg.b) == ("digits", 2, 5)
    assert cfg.seeds == (0, 4) and cfg.strategies == ("rad", "unixkd")
    assert cfg.student_model == "cnn" and cfg.student_steps == 50
    assert cfg.temperature == 2.0 and cfg.lr_schedule == "constant" and cfg.oracle is False
    assert cfg.run_strategies == ("rad", "unixkd")
    args = build_parser().parse_args(["experiment", "--seeds", "3"])
    assert config_from_args(args).seeds == (0, 1, 2)
    path.write_text(json.dumps({"seeds": 3}))  # in a config too (it was 'int' is not iterable)
    assert config_from_args(build_parser().parse_args(["experiment", "--config", str(path)])).seeds == (0, 1, 2)
    # faithful defaults
    d = ExperimentConfig()
    assert (d.temperature, d.labeled_weight, d.lr_schedule) == (1.0, 1.0, "paper")
    assert d.n_labeled >= 4 * d.n_val and d.run_strategies[-1] == "oracle"
    with pytest.raises(ValueError, match="lr_schedule"):
        ExperimentConfig(lr_schedule="cosine").validate()
    with pytest.raises(ValueError, match="unknown strategies"):
        ExperimentConfig(strategies=("rad", "nope")).validate()


def test_committed_experiment_config_is_valid():
    import pathlib

    from rad.distill.loop import ExperimentConfig

    root = pathlib.Path(__file__).resolve().parents[1] / "experiments"
    for path in root.glob("*.json"):
        values = json.loads(path.read_text())
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        ExperimentConfig(**values).validate()


def test_make_mnist1d_is_cached_and_sized(tmp_path):
    pytest.importorskip("mnist1d")
    from rad.distill.data import make_mnist1d

    ds = make_mnist1d(300, test_fraction=0.2, seed=1, cache_dir=tmp_path)
    assert ds.x_train.shape == (240, 40) and ds.x_test.shape == (60, 40)
    assert abs(float(ds.x_train.mean())) < 1e-3 and math.isclose(ds.x_train.std(), 1, rel_tol=1e-3)
    assert len(list(tmp_path.glob("mnist1d_300_*.npz"))) == 1
    again = make_mnist1d(300, test_fraction=0.2, seed=1, cache_dir=tmp_path)
    assert np.array_equal(again.x_test, ds.x_test) and np.array_equal(again.y_train, ds.y_train)

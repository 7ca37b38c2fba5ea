"""Smoke test of the TensorFlow driver (``rad.tf``): tiny models, offline data, 2 rounds.

Skipped when TensorFlow (the ``tf`` extra) is not installed. Never touches the network:
it uses ``sklearn.datasets.load_digits`` only.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("sklearn")

from rad.tf.loop import ExperimentConfig, TeacherOracle, run_experiment, save_results  # noqa: E402
from rad.tf.selectors import available_strategies  # noqa: E402

B, ROUNDS, N_LABELED = 20, 2, 100


def _config(strategies, seeds=(3,)) -> ExperimentConfig:
    return ExperimentConfig(
        dataset="digits", teacher_model="mlp", teacher_width=32, student_model="mlp",
        student_width=16, strategies=tuple(strategies), rounds=ROUNDS, b=B,
        n_labeled=N_LABELED, n_val=300, teacher_epochs=3, student_epochs=3,
        seeds=seeds, progress=False)


@pytest.fixture(scope="module")
def result():
    return run_experiment(_config(available_strategies()))


def test_every_strategy_ran(result):
    names = {r["strategy"] for r in result["rows"]}
    assert names == set(available_strategies())
    assert "unixkd" in names and "rad" in names


def test_bookkeeping(result):
    info = result["seeds"]["3"]
    labeled = set(info["labeled"])
    assert len(labeled) == N_LABELED
    for strategy in available_strategies():
        rows = sorted((r for r in result["rows"] if r["strategy"] == strategy),
                      key=lambda r: r["round"])
        assert [r["round"] for r in rows] == list(range(ROUNDS + 1))
        for r in rows:
            assert r["queries"] == r["round"] * B                  # queries counted
            assert r["n_train"] == N_LABELED + r["round"] * B       # grows by b a round
            assert 0.0 <= r["student_test_acc"] <= 1.0
            if r["round"] > 0:
                assert 0.0 <= r["teacher_acc_selected"] <= 1.0
                assert r["teacher_mistakes_selected"] == round(B * (1 - r["teacher_acc_selected"]))
                assert 0.0 <= r["realized_gain"] <= B
                assert r["wall_time_s"] > 0
        sels = info["selections"][strategy]
        assert len(sels) == ROUNDS
        flat = [i for s in sels for i in s]
        assert all(len(s) == B for s in sels)
        assert len(set(flat)) == len(flat)                          # no point queried twice
        assert not labeled.intersection(flat)                       # never a labeled point
        assert all(0 <= i < info["pool_size"] for i in flat)
    assert 0.0 <= info["m"] <= info["pool_size"]
    assert info["w"] == pytest.approx(1 - info["m"] / info["pool_size"])


def test_rerun_reproduces_selections(result):
    strategies = ("rad", "coreset", "unixkd")
    again = run_experiment(_config(strategies))
    for s in strategies:
        assert again["seeds"]["3"]["selections"][s] == result["seeds"]["3"]["selections"][s]
        a = [r["student_test_acc"] for r in again["rows"] if r["strategy"] == s]
        b = [r["student_test_acc"] for r in result["rows"] if r["strategy"] == s]
        assert a == b


def test_results_files(result, tmp_path):
    jpath, cpath = save_results(result, tmp_path)
    loaded = json.loads(open(jpath).read())
    assert loaded["config"]["seeds"] == [3]
    with open(cpath) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(available_strategies()) * (ROUNDS + 1)


def test_oracle_refuses_a_second_query():
    x = np.zeros((5, 2), dtype=np.float32)
    oracle = TeacherOracle(lambda z: np.zeros((z.shape[0], 3)), x, temperature=2.0)
    p = oracle.query(np.array([0, 2]))
    assert p.shape == (2, 3) and np.allclose(p.sum(1), 1.0)
    assert oracle.queries == 2
    with pytest.raises(RuntimeError, match="twice"):
        oracle.query(np.array([2, 3]))


def test_unknown_strategy_is_rejected():
    with pytest.raises(ValueError, match="unknown strategies"):
        run_experiment(_config(["rad", "nope"]))


def test_tfds_sets_need_a_data_dir(tmp_path):
    from rad.tf.data import load_dataset

    with pytest.raises(ValueError, match="data_dir"):
        load_dataset("cifar10")
    with pytest.raises(FileNotFoundError):
        load_dataset("svhn", data_dir=str(tmp_path / "missing"))


def test_models_build_and_run():
    from rad.tf.models import build_model

    x = np.zeros((2, 16, 16, 3), dtype=np.float32)
    for name, kw in (("resnet", {"depth": 11}), ("mobilenet", {"alpha": 0.25}),
                     ("cnn", {"width": 8}), ("mlp", {"width": 8})):
        model = build_model(name, (16, 16, 3), 7, **kw)
        assert model(x).shape == (2, 7)
        assert model.get_layer("embedding") is not None
    assert build_model("cnn", (40,), 10, width=8)(np.zeros((1, 40), np.float32)).shape == (1, 10)
    with pytest.raises(ValueError, match="depth"):
        build_model("resnet", (16, 16, 3), 7, depth=12)


def test_default_distribution_strategy(monkeypatch, capsys):
    import tensorflow as tf

    from rad.tf.hardware import pick_distribution_strategy

    monkeypatch.delenv("TPU_NAME", raising=False)
    strategy = pick_distribution_strategy()
    assert isinstance(strategy, tf.distribute.Strategy)
    assert "using" in capsys.readouterr().out


def test_cli_flags_override_the_config_file(tmp_path):
    from rad.cli import build_parser
    from rad.tf.cli import config_from_args

    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"dataset": "digits", "rounds": 7, "b": 5}))
    args = build_parser().parse_args(
        ["experiment", "--config", str(path), "--rounds", "2", "--seeds", "0,4",
         "--strategies", "rad,unixkd", "--student-model", "cnn"])
    cfg = config_from_args(args)
    assert (cfg.dataset, cfg.rounds, cfg.b) == ("digits", 2, 5)
    assert cfg.seeds == (0, 4) and cfg.strategies == ("rad", "unixkd")
    assert cfg.student_model == "cnn"

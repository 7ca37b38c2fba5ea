"""Smoke test of the Keras 3 driver (``rad.distill``) on two backends: TensorFlow and PyTorch.

Keras picks its backend when it is first imported, so each backend runs in its own
subprocess (``KERAS_BACKEND`` set) that runs a tiny experiment twice on offline data
(MNIST-1D generated locally, 1,200 samples) and writes the results as JSON; the checks
run here. A backend whose package is not installed is skipped. Never touches the network.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

B, ROUNDS, N_LABELED, N_VAL, SEED = 20, 2, 120, 60, 3
STRATEGIES = ("rad", "margin", "entropy", "least_confidence", "uniform", "coreset",
              "cluster_margin", "unixkd")
RERUN = ("rad", "coreset", "unixkd", "oracle")

_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from rad.distill.loop import ExperimentConfig, run_experiment, save_results, load_results
    from rad.distill.models import build_model

    out, data_dir = sys.argv[1], sys.argv[2]
    def config(strategies, controls=True, oracle=True):
        return ExperimentConfig(
            dataset="mnist1d", n_samples=1200, test_fraction=0.25, data_dir=data_dir,
            teacher_model="cnn", teacher_width=16, teacher_steps=20, student_model="mlp",
            student_width=16, student_steps=10, batch_size=32, strategies=strategies,
            oracle=oracle, controls=controls, rounds={ROUNDS}, b={B}, n_labeled={N_LABELED},
            n_val={N_VAL}, seeds=({SEED},), progress=False)
    t0 = time.perf_counter()
    first = run_experiment(config({STRATEGIES}))
    t1 = time.perf_counter()
    again = run_experiment(config(tuple(s for s in {RERUN} if s != "oracle"), controls=False))
    save_results(first, out + "_files")
    loaded = load_results(out + "_files")
    shapes = {{}}
    x = np.zeros((2, 16, 16, 3), np.float32)
    for name, kw in (("resnet", {{"depth": 11}}), ("mobilenet", {{"alpha": 0.25}}),
                     ("cnn", {{"width": 8}}), ("mlp", {{"width": 8}})):
        model = build_model(name, (16, 16, 3), 7, **kw)
        shapes[name] = list(np.asarray(model.predict(x, verbose=0)).shape)
        assert model.get_layer("embedding") is not None
    m1 = build_model("cnn", (40,), 10, width=8)
    shapes["cnn1d"] = list(np.asarray(m1.predict(np.zeros((1, 40), np.float32), verbose=0)).shape)
    def strip(res):
        for info in res["seeds"].values():
            info["pool_gains_round0"] = None
        return res
    with open(out, "w") as f:
        json.dump({{"first": strip(first), "again": strip(again), "loaded": strip(loaded),
                   "shapes": shapes, "time_first": t1 - t0}}, f,
                  default=lambda o: o.tolist() if hasattr(o, "tolist") else float(o))
""").format(ROUNDS=ROUNDS, B=B, N_LABELED=N_LABELED, N_VAL=N_VAL, SEED=SEED,
            STRATEGIES=STRATEGIES, RERUN=RERUN)

_BACKEND_PACKAGE = {"tensorflow": "tensorflow", "torch": "torch"}


def _run(backend: str, tmp_path_factory) -> dict:
    if importlib.util.find_spec("keras") is None:
        pytest.skip("keras is not installed (the tf extra)")
    if importlib.util.find_spec(_BACKEND_PACKAGE[backend]) is None:
        pytest.skip(f"{backend} is not installed")
    if importlib.util.find_spec("mnist1d") is None:
        pytest.skip("mnist1d is not installed (the tf extra)")
    tmp = tmp_path_factory.mktemp(f"smoke_{backend}")
    out = str(tmp / "result.json")
    env = dict(os.environ, KERAS_BACKEND=backend, CUDA_VISIBLE_DEVICES="",
               TF_CPP_MIN_LOG_LEVEL="3", RAD_DATA_DIR=str(tmp))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, out, str(tmp)], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode:
        pytest.fail(f"{backend} run failed (exit status {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    with open(out) as f:
        res = json.load(f)
    res["stderr"] = proc.stderr
    return res


@pytest.fixture(scope="module", params=["tensorflow", "torch"])
def run(request, tmp_path_factory):
    return request.param, _run(request.param, tmp_path_factory)


def test_every_strategy_and_control_ran(run):
    backend, res = run
    first = res["first"]
    assert first["environment"]["keras_backend"] == backend
    names = {r["strategy"] for r in first["rows"]}
    assert names == set(STRATEGIES) | {"oracle", "no_query", "full_pool"}


def test_bookkeeping(run):
    _, res = run
    first = res["first"]
    info = first["seeds"][str(SEED)]
    n_pool = info["pool_size"]
    assert len(set(info["labeled"])) == N_LABELED
    assert 0.0 <= info["m"] <= n_pool and info["m_true"] >= 0
    assert info["w"] == pytest.approx(1 - info["m"] / n_pool)
    for strategy in STRATEGIES + ("oracle",):
        rows = sorted((r for r in first["rows"] if r["strategy"] == strategy),
                      key=lambda r: r["round"])
        assert [r["round"] for r in rows] == list(range(ROUNDS + 1))
        for r in rows:
            assert r["queries"] == r["round"] * B                  # queries counted
            assert r["n_train"] == N_LABELED + r["round"] * B       # grows by b a round
            assert 0.0 <= r["student_test_acc"] <= 1.0
            if r["round"] > 0:
                assert 0.0 <= r["teacher_acc_selected"] <= 1.0
                assert r["teacher_mistakes_selected"] == round(B * (1 - r["teacher_acc_selected"]))
                assert 0.0 <= r["gain_correct"] <= B and 0.0 <= r["gain_wrong"] <= B
                assert r["realized_gain"] == pytest.approx(
                    r["gain_correct"] - info["w"] * r["gain_wrong"])   # Eq. (4)
                assert r["wall_time_s"] > 0
        sels = info["selections"][strategy]
        flat = [i for s in sels for i in s]
        assert len(sels) == ROUNDS and all(len(s) == B for s in sels)
        assert len(set(flat)) == len(flat)                          # no point queried twice
        assert all(0 <= i < n_pool for i in flat)
    oracle = [r for r in first["rows"] if r["strategy"] == "oracle" and r["round"] > 0]
    assert all(r["teacher_acc_selected"] == 1.0 for r in oracle)   # only correct picks
    mixed = info["mixed"]["unixkd"]
    for per_round in mixed:
        partners = [p for p in per_round if p >= 0]
        assert len(per_round) == B and len(partners) == B - round(2 * B / 3)
        assert all(p < n_pool for p in partners)
    nq = [r for r in first["rows"] if r["strategy"] == "no_query"]
    assert [r["queries"] for r in nq] == [0] * (ROUNDS + 1)
    assert all(r["n_train"] == N_LABELED for r in nq)
    (full,) = [r for r in first["rows"] if r["strategy"] == "full_pool"]
    assert full["queries"] == n_pool and full["n_train"] == N_LABELED + n_pool
    assert 0.0 <= full["student_test_acc"] <= 1.0


def test_rerun_reproduces_selections_and_accuracy(run):
    _, res = run
    first, again = res["first"]["seeds"][str(SEED)], res["again"]["seeds"][str(SEED)]
    for s in RERUN:
        if s == "oracle":
            continue
        assert again["selections"][s] == first["selections"][s]
        a = [r["student_test_acc"] for r in res["again"]["rows"] if r["strategy"] == s]
        b = [r["student_test_acc"] for r in res["first"]["rows"] if r["strategy"] == s]
        assert a == b
    assert again["mixed"]["unixkd"] == first["mixed"]["unixkd"]


def test_results_files_round_trip(run):
    _, res = run
    first, loaded = res["first"], res["loaded"]
    assert json.dumps(loaded["rows"]) == json.dumps(first["rows"])   # NaN-safe
    for s, sels in first["seeds"][str(SEED)]["selections"].items():
        assert loaded["seeds"][str(SEED)]["selections"][s] == sels


def test_models_build_on_the_backend(run):
    _, res = run
    assert res["shapes"] == {"resnet": [2, 7], "mobilenet": [2, 7], "cnn": [2, 7],
                             "mlp": [2, 7], "cnn1d": [1, 10]}


def test_quiet_logs(run):
    _, res = run
    noise = [line for line in res["stderr"].splitlines()
             if any(w in line for w in ("absl", "oneDNN", "retracing", "Warning", "WARNING"))]
    assert not noise, noise[:5]

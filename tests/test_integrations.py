"""rad.integrations: each adapter inside its own library's loop, against rad.select and
against the library's own baselines.

CI installs the ``integrations`` extra, so there a missing library is a failure; locally
the tests skip when it is not installed (``CI`` unset).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import rad
from rad import gains as G
from rad import selectors as S

N, K, B = 400, 4, 25

# baal's logging calls threading's deprecated getName()
pytestmark = pytest.mark.filterwarnings("ignore:getName:DeprecationWarning")


def need(module: str) -> types.ModuleType:
    """Import a peer library: skip locally when missing, fail in CI (which installs it)."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module)


@pytest.fixture(scope="module")
def problem():
    """Four overlapping blobs; a teacher that is wrong on about 15% of points."""
    rng = np.random.default_rng(0)
    centers = rng.normal(scale=2.0, size=(K, 2))
    y_true = rng.integers(0, K, size=N + 200)
    X = centers[y_true] + rng.normal(size=(N + 200, 2))
    flip = rng.random(N + 200) < 0.15
    teacher = np.where(flip, (y_true + 1) % K, y_true)
    val = slice(N, N + 200)  # the validation split: teacher predictions and true labels
    return {
        "X": X[:N], "teacher": teacher[:N], "initial": rng.choice(N, 30, replace=False),
        "validation": (teacher[val], y_true[val]),
    }


def conservative_m(problem, pool_size: int) -> float:
    pred, labels = problem["validation"]
    return rad.estimate_m(pred, labels, pool_size=pool_size).conservative


def assert_batch(idx, b: int, allowed) -> None:
    idx = np.asarray(idx)
    assert idx.shape == (b,) and np.unique(idx).size == b
    assert set(idx.tolist()) <= set(np.asarray(allowed).tolist())


# ----------------------------------------------------------------------------- shared pieces


def test_missing_library_error_names_the_extra(tmp_path):
    """Hide a library behind an import hook: the adapter's error says what to install."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('skactiveml', 'modAL', 'baal'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import rad.integrations as I\n"
        "for name in ('RADSampling', 'RADQuery', 'RADHeuristic'):\n"
        "    try:\n"
        "        obj = getattr(I, name)\n"
        "        obj(m=1.0) if name == 'RADQuery' else None\n"
        "    except I.MissingExtraError as err:\n"
        "        print(name, '|', err)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=False, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert [line.split(" | ")[0] for line in lines] == ["RADSampling", "RADQuery", "RADHeuristic"]
    for line, dist in zip(lines, ("scikit-activeml", "modAL-python", "baal")):
        assert f"needs {dist}" in line and "robust-active-distillation[integrations]" in line


def test_resolve_m():
    from rad.integrations import resolve_m

    pred, labels = np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0])
    m, est = resolve_m(None, (pred, labels), 1000)
    assert est is not None and m == est.conservative == rad.estimate_m(pred, labels, 1000).conservative
    assert resolve_m(12.5, None, 1000) == (12.5, None)
    with pytest.raises(ValueError, match="exactly one"):
        resolve_m(None, None, 10)
    with pytest.raises(ValueError, match="exactly one"):
        resolve_m(3.0, (pred, labels), 10)
    with pytest.raises(ValueError, match="pair"):
        resolve_m(None, (pred,), 10)


def test_adapter_selection_names_m_as_the_adapter_takes_it():
    """The adapters' shared RAD step validated m through a PoolState the user never built
    ("PoolState.m must be in [0, n=400]" for RADSampling(m=1000.))."""
    from rad.integrations._common import rad_selection

    probs = np.full((N, K), 1.0 / K)
    with pytest.raises(ValueError, match=r"^m \(the teacher's mistakes in the pool\) must be in \[0, n=400\]"):
        rad_selection(probs, B, 1000.0, 0)
    with pytest.raises(TypeError, match="^m must be a real number"):
        rad_selection(probs, B, "3", 0)
    assert rad_selection(probs, B, 40.0, 0).indices.shape == (B,)


# ----------------------------------------------------------------------------- scikit-activeml


class TestScikitActiveML:
    @pytest.fixture(autouse=True)
    def _libs(self):
        need("skactiveml")

    def student(self):
        from skactiveml.classifier import SklearnClassifier
        from sklearn.linear_model import LogisticRegression

        return SklearnClassifier(LogisticRegression(max_iter=500), classes=np.arange(K))

    def run_loop(self, problem, random_state, cycles=3):
        from skactiveml.utils import MISSING_LABEL, check_random_state
        from sklearn.base import clone

        from rad.integrations import RADSampling

        X, teacher = problem["X"], problem["teacher"]
        y = np.full(N, MISSING_LABEL)
        y[problem["initial"]] = teacher[problem["initial"]]
        clf = self.student()
        qs = RADSampling(validation=problem["validation"], random_state=random_state)
        queries = []
        for _ in range(cycles):
            unlabeled = np.flatnonzero(np.isnan(y))
            idx, utilities = qs.query(X, y, clf, batch_size=B, return_utilities=True)
            assert_batch(idx, B, unlabeled)
            # the same selection as rad.select on the same gains, m and seed
            probs = clone(clf).fit(X, y).predict_proba(X[unlabeled])
            gains = G.margin_gain(probs)
            m = conservative_m(problem, unlabeled.size)
            assert qs.m_ == m
            seed = check_random_state(random_state, unlabeled.size + 1).randint(2**31 - 1)
            want = unlabeled[rad.select(gains, m, B, rng=seed)]
            np.testing.assert_array_equal(np.sort(idx), want)
            # utilities: q on the unlabeled points (sum b), NaN on labeled ones, and the
            # points already taken in the batch are NaN in later rows
            q = rad.solve(gains, m, B).probabilities()
            assert utilities.shape == (B, N)
            np.testing.assert_allclose(utilities[0, unlabeled], q, rtol=0, atol=1e-12)
            assert np.isnan(utilities[:, ~np.isnan(y)]).all()
            assert np.isnan(utilities[-1, idx[:-1]]).all() and not np.isnan(utilities[-1, idx[-1]])
            assert np.nansum(utilities[0]) == pytest.approx(B)
            queries.append(idx)
            y[idx] = teacher[idx]
        return queries

    def test_in_the_query_loop(self, problem):
        first = self.run_loop(problem, random_state=7)
        again = self.run_loop(problem, random_state=7)
        for a, b in zip(first, again):  # reproducible for a seed
            np.testing.assert_array_equal(a, b)
        other = self.run_loop(problem, random_state=8, cycles=1)
        assert not np.array_equal(np.sort(first[0]), np.sort(other[0]))

    def test_candidates_and_fixed_m(self, problem):
        from skactiveml.utils import MISSING_LABEL

        from rad.integrations import RADSampling

        X, teacher = problem["X"], problem["teacher"]
        y = np.full(N, MISSING_LABEL)
        y[problem["initial"]] = teacher[problem["initial"]]
        clf = self.student().fit(X, y)
        candidates = np.setdiff1d(np.arange(0, N, 3), problem["initial"])
        qs = RADSampling(m=20.0, random_state=1)
        idx, util = qs.query(X, y, clf, fit_clf=False, candidates=candidates, batch_size=B,
                             return_utilities=True)
        assert_batch(idx, B, candidates)
        outside = np.setdiff1d(np.arange(N), candidates)
        assert np.isnan(util[:, outside]).all()
        gains = G.margin_gain(clf.predict_proba(X[candidates]))
        assert qs.selection_.info["m"] == 20.0
        np.testing.assert_allclose(util[0, candidates], rad.solve(gains, 20.0, B).probabilities(),
                                   atol=1e-12)
        # candidates given as samples: indices refer to the candidate array
        idx2 = RADSampling(m=20.0, random_state=1).query(X, y, clf, fit_clf=False,
                                                         candidates=X[candidates], batch_size=B)
        np.testing.assert_array_equal(candidates[idx2], idx)
        with pytest.raises(ValueError, match="exactly one"):
            RADSampling(random_state=0).query(X, y, clf, batch_size=2)

    def test_rad_margin_picks_what_skactiveml_margin_picks(self, problem):
        from skactiveml.pool import UncertaintySampling
        from skactiveml.utils import MISSING_LABEL

        X, teacher = problem["X"], problem["teacher"]
        y = np.full(N, MISSING_LABEL)
        y[problem["initial"]] = teacher[problem["initial"]]
        clf = self.student().fit(X, y)
        theirs = UncertaintySampling(method="margin_sampling", random_state=0).query(
            X, y, clf, fit_clf=False, batch_size=B)
        pool = S.PoolState(probs=clf.predict_proba(X), labeled=problem["initial"])
        ours = S.Margin().select(pool, B, rng=0, return_scores=True)
        assert set(theirs.tolist()) == set(ours.indices.tolist())  # continuous scores: no ties


# ----------------------------------------------------------------------------- modAL


class FixedProbabilities:
    """A classifier whose predict_proba returns given rows (to feed invalid input)."""

    def __init__(self, probs):
        self.probs = probs

    def predict_proba(self, X):
        return self.probs[np.asarray(X, dtype=int).ravel()]


class TestModAL:
    @pytest.fixture(autouse=True)
    def _libs(self, monkeypatch):
        need("modAL")
        import inspect

        from modAL.models import learners

        # modAL 0.4.2.1 (its latest release) calls check_X_y(force_all_finite=...) in
        # ActiveLearner.teach/fit, a keyword scikit-learn 1.8 removed (it is
        # ensure_all_finite since 1.6): translate it so that modAL's own loop runs.
        original = learners.check_X_y
        if "force_all_finite" not in inspect.signature(original).parameters:
            def check_X_y(*args, force_all_finite=True, **kwargs):
                return original(*args, ensure_all_finite=force_all_finite, **kwargs)

            monkeypatch.setattr(learners, "check_X_y", check_X_y)

    def run_loop(self, problem, seed, cycles=3):
        from modAL.models import ActiveLearner
        from sklearn.linear_model import LogisticRegression

        from rad.integrations import RADQuery

        X, teacher, init = problem["X"], problem["teacher"], problem["initial"]
        strategy = RADQuery(validation=problem["validation"], random_state=seed)
        learner = ActiveLearner(estimator=LogisticRegression(max_iter=500),
                                query_strategy=strategy, X_training=X[init],
                                y_training=teacher[init])
        pool_idx = np.setdiff1d(np.arange(N), init)
        reference_rng = np.random.default_rng(seed)
        queries = []
        for _ in range(cycles):
            X_pool = X[pool_idx]
            gains = G.margin_gain(learner.predict_proba(X_pool))
            query_idx, rows = learner.query(X_pool, n_instances=B)
            assert_batch(query_idx, B, np.arange(pool_idx.size))
            np.testing.assert_array_equal(rows, X_pool[query_idx])
            m = conservative_m(problem, pool_idx.size)
            want = rad.select(gains, m, B, rng=reference_rng)
            np.testing.assert_array_equal(np.sort(query_idx), want)
            q = rad.solve(gains, m, B).probabilities()
            np.testing.assert_allclose(strategy.selection_.utilities, q, atol=1e-12)
            np.testing.assert_allclose(strategy.selection_.scores, q[query_idx], atol=1e-12)
            learner.teach(X_pool[query_idx], teacher[pool_idx[query_idx]])
            queries.append(pool_idx[query_idx])
            pool_idx = np.delete(pool_idx, query_idx)
        return queries

    def test_in_the_active_learner_loop(self, problem):
        first = self.run_loop(problem, seed=3)
        again = self.run_loop(problem, seed=3)
        for a, b in zip(first, again):
            np.testing.assert_array_equal(a, b)

    def test_rad_margin_picks_what_modal_margin_picks(self, problem):
        from modAL.uncertainty import margin_sampling
        from sklearn.linear_model import LogisticRegression

        X, teacher, init = problem["X"], problem["teacher"], problem["initial"]
        clf = LogisticRegression(max_iter=500).fit(X[init], teacher[init])
        theirs = margin_sampling(clf, X, n_instances=B)
        theirs = theirs[0] if isinstance(theirs, tuple) else theirs
        ours = S.Margin().select(S.PoolState(probs=clf.predict_proba(X)), B, rng=0)
        assert set(np.asarray(theirs).tolist()) == set(ours.tolist())

    def test_invalid_probabilities_are_refused(self):
        from rad.integrations import RADQuery

        probs = np.full((10, 3), 0.3)  # rows sum to 0.9
        with pytest.raises(ValueError, match="row 0"):
            RADQuery(m=1.0, random_state=0)(FixedProbabilities(probs), np.arange(10), 2)
        with pytest.raises(ValueError, match="exactly one"):
            RADQuery()
        with pytest.raises(ValueError, match="n_instances"):
            RADQuery(m=1.0)(FixedProbabilities(np.full((4, 2), 0.5)), np.arange(4), 0)


# ----------------------------------------------------------------------------- baal


class TestBaal:
    @pytest.fixture(autouse=True)
    def _libs(self):
        need("baal")

    @staticmethod
    def pool_probabilities(problem, mc: int = 0):
        from sklearn.linear_model import LogisticRegression

        init = problem["initial"]
        clf = LogisticRegression(max_iter=500).fit(problem["X"][init], problem["teacher"][init])
        probs = clf.predict_proba(problem["X"])
        if not mc:
            return probs
        rng = np.random.default_rng(1)  # MC samples: noisy copies, each row summing to 1
        noisy = probs[:, :, None] * rng.uniform(0.5, 1.5, size=(N, K, mc))
        return noisy / noisy.sum(axis=1, keepdims=True)

    def run_loop(self, problem, seed, mc: int = 0, cycles=3):
        import torch
        from baal.active import ActiveLearningDataset, ActiveLearningLoop
        from torch.utils.data import TensorDataset

        from rad.integrations import RADHeuristic

        table = self.pool_probabilities(problem, mc)
        dataset = TensorDataset(torch.arange(N), torch.as_tensor(problem["teacher"]))
        labelled = np.zeros(N, dtype=bool)
        labelled[problem["initial"]] = True
        active = ActiveLearningDataset(dataset, labelled=labelled)

        def get_probabilities(pool, **_):
            return table[[int(i) for i, _ in pool]]

        heuristic = RADHeuristic(query_size=B, validation=problem["validation"],
                                 random_state=seed)
        loop = ActiveLearningLoop(active, get_probabilities, heuristic=heuristic, query_size=B)
        reference_rng = np.random.default_rng(seed)
        queries = []
        for _ in range(cycles):
            pool_idx = np.flatnonzero(~active.labelled)
            before = set(np.flatnonzero(active.labelled).tolist())
            assert loop.step()
            new = np.array(sorted(set(np.flatnonzero(active.labelled).tolist()) - before))
            assert_batch(new, B, pool_idx)
            probs = table[pool_idx] if not mc else table[pool_idx].mean(axis=-1)
            gains = G.margin_gain(probs)
            m = conservative_m(problem, pool_idx.size)
            want = pool_idx[rad.select(gains, m, B, rng=reference_rng)]
            np.testing.assert_array_equal(new, want)
            assert heuristic.m_ == m
            queries.append(new)
        return queries

    def test_in_the_active_learning_loop(self, problem):
        first = self.run_loop(problem, seed=11)
        again = self.run_loop(problem, seed=11)
        for a, b in zip(first, again):
            np.testing.assert_array_equal(a, b)

    def test_mc_dropout_samples_are_averaged(self, problem):
        self.run_loop(problem, seed=12, mc=5, cycles=2)
        from rad.integrations import RADHeuristic

        samples = self.pool_probabilities(problem, mc=5)
        on_samples = RADHeuristic(B, m=40.0, random_state=0).get_ranks(samples)
        on_mean = RADHeuristic(B, m=40.0, random_state=0).get_ranks(samples.mean(axis=-1))
        np.testing.assert_array_equal(on_samples[0], on_mean[0])
        np.testing.assert_allclose(on_samples[1], on_mean[1])

    def test_ranks_and_uncertainties(self, problem):
        import torch

        from rad.integrations import RADHeuristic

        probs = self.pool_probabilities(problem)
        heuristic = RADHeuristic(B, m=40.0, random_state=5)
        ranks, q = heuristic.get_ranks(torch.as_tensor(probs))
        assert sorted(ranks.tolist()) == list(range(N))
        gains = G.margin_gain(probs)
        np.testing.assert_array_equal(np.sort(ranks[:B]),
                                      rad.select(gains, 40.0, B, rng=np.random.default_rng(5)))
        np.testing.assert_allclose(q, rad.solve(gains, 40.0, B).probabilities(), atol=1e-12)
        assert np.all(np.diff(q[ranks[B:]]) <= 0)  # the rest by decreasing q
        # batches from a generator are concatenated
        batches = (p for p in (probs[:150], probs[150:]))
        gen_ranks = RADHeuristic(B, m=40.0, random_state=5)(batches)
        np.testing.assert_array_equal(gen_ranks, ranks)

    def test_strict_where_baal_softmaxes(self, problem):
        from baal.active.heuristics import Margin

        from rad.integrations import RADHeuristic

        logits = np.random.default_rng(2).normal(size=(50, 3))
        Margin().get_ranks(logits)  # baal: silently applies a softmax
        with pytest.raises(ValueError, match="row"):
            RADHeuristic(5, m=2.0).get_ranks(logits)
        bad = np.full((20, 3), 1 / 3)
        bad[7] = [0.5, 0.4, 0.3]
        with pytest.raises(ValueError, match="row 7"):
            RADHeuristic(5, m=2.0).get_ranks(bad)
        with pytest.raises(ValueError, match=r"\(n, k\) or \(n, k, T\)"):
            RADHeuristic(5, m=2.0).get_ranks(np.full((4, 2, 2, 2), 0.5))

    def test_rad_margin_picks_what_baal_margin_picks(self, problem):
        from baal.active.heuristics import Margin

        probs = self.pool_probabilities(problem)
        theirs = Margin().get_ranks(probs)[0][:B]
        ours = S.Margin().select(S.PoolState(probs=probs), B, rng=0)
        assert set(theirs.tolist()) == set(ours.tolist())


def test_star_import_needs_no_peer_library():
    """``from rad.integrations import *`` imported every adapter's library (and failed
    unless all three were installed); it now takes the names that need none, and the
    adapters stay one attribute access away (listed by dir)."""
    code = ("import sys\n"
            "for lib in ('skactiveml', 'modAL', 'baal'):\n"
            "    sys.modules[lib] = None  # as if not installed\n"
            "ns = {}\n"
            "exec('from rad.integrations import *', ns)\n"
            "import rad.integrations as I\n"
            "print(sorted(k for k in ns if not k.startswith('__')), 'RADSampling' in dir(I))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['MissingExtraError', 'resolve_m'] True"

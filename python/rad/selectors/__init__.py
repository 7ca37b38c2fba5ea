"""Selection strategies: RAD and the baselines it is compared with, behind one interface.

Every selector is a small frozen dataclass (its hyper-parameters) with one method,

    strategy.select(pool, b, rng=None) -> numpy.ndarray  # sorted int64, b distinct indices
    strategy.select(pool, b, rng=None, return_scores=True) -> Selection  # + order, scores

where ``pool`` is a :class:`PoolState` holding whatever the selectors need (student
probabilities or logits, embeddings, gains, the estimated number of teacher mistakes
``m``, already-labeled indices, an optional candidate subset, precomputed clusters)
and ``rng`` follows SPEC 7
(``int | numpy.random.Generator | numpy.random.SeedSequence | None``, normalised with
:func:`numpy.random.default_rng`). Every selector

* returns exactly ``b`` distinct indices into the pool, sorted, as ``int64``;
* never returns an index listed in ``pool.labeled`` or outside ``pool.candidates``;
* with ``return_scores=True``, returns a :class:`Selection` holding the same indices,
  their pick order (k-center's greedy order, Cluster-Margin's round robin, best score
  first otherwise), their scores and every point's utility (RAD: the inclusion
  probabilities ``q``);
* gives identical output for the same ``rng`` seed;
* raises ``ValueError``/``TypeError`` naming the problem when ``b`` cannot be met
  (``b`` larger than the unlabeled pool) or an input is missing or malformed.

Everything is framework-free: NumPy arrays in, indices out (Cluster-Margin's
clustering also needs SciPy, the ``verify`` extra).

Selectors and their cost (``n`` pool points, ``b`` batch, ``k`` classes, ``d`` embedding
dimensions, ``L`` labeled points, ``B`` HAC bucket size):

* :class:`RAD` -- DepRound of the exact minimax batch probabilities (``rad.select``);
  O(n k) for the gains, then a few O(n) passes.
* :class:`Margin` -- the ``b`` smallest margins ``top1 - top2``; O(n k) + O(n).
* :class:`Entropy` -- the ``b`` largest predictive entropies; O(n k) + O(n).
* :class:`LeastConfidence` -- the ``b`` largest ``1 - top1``; O(n k) + O(n).
* :class:`Uniform` -- ``b`` points uniformly at random; O(b log L).
* :class:`Coreset` -- greedy k-center on embeddings (Sener & Savarese, 2018);
  O(n d (L + b)) time, O(n) extra memory.
* :class:`ClusterMargin` -- round robin over HAC clusters of the ``c = f b`` smallest
  margins (Citovsky et al., 2021); O(n k) + O(c B d) time, O(B^2) memory.

Neither clustering selector forms an ``n x n`` distance matrix: k-center keeps one
distance per point and works with matrix-vector products; HAC runs on buckets of at most
``bucket_size`` points (see :func:`hac_clusters`). Ties in the score-based selectors are
broken uniformly at random with ``rng`` (a sort-based selector would favour low indices).

Modules: :mod:`~rad.selectors.pool` (:class:`PoolState`, index sets, input checks),
:mod:`~rad.selectors.base` (the :class:`Strategy` interface and the registry),
:mod:`~rad.selectors.ranking` (best ``b`` by a score, random tie breaks),
:mod:`~rad.selectors.uncertainty`, :mod:`~rad.selectors.rad_selector`,
:mod:`~rad.selectors.kcenter` and :mod:`~rad.selectors.cluster_margin`.

Examples
--------
>>> import numpy as np
>>> from rad.selectors import PoolState, get_strategy
>>> rng = np.random.default_rng(0)
>>> probs = rng.dirichlet(np.ones(10), size=1000)
>>> pool = PoolState(probs=probs, labeled=np.arange(50))
>>> idx = get_strategy("margin").select(pool, 20, rng=0)
>>> idx.shape, bool(idx.min() >= 50)
((20,), True)
"""

from __future__ import annotations

# Importing a selector module registers its classes in STRATEGIES.
from rad.selectors.base import STRATEGIES, Selection, Strategy, available, get_strategy
from rad.selectors.cluster_margin import ClusterMargin, hac_clusters
from rad.selectors.kcenter import Coreset, covering_radius, k_center_greedy
from rad.selectors.pool import PoolState, RNGLike, as_generator
from rad.selectors.rad_selector import RAD
from rad.selectors.uncertainty import Entropy, LeastConfidence, Margin, Uniform

__all__ = [
    "RAD",
    "STRATEGIES",
    "ClusterMargin",
    "Coreset",
    "Entropy",
    "LeastConfidence",
    "Margin",
    "PoolState",
    "RNGLike",
    "Selection",
    "Strategy",
    "Uniform",
    "as_generator",
    "available",
    "covering_radius",
    "get_strategy",
    "hac_clusters",
    "k_center_greedy",
]

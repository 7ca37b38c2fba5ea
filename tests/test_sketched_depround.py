"""DepRound from the support pass's sketch (docs/design.md §3, "The DepRound sketch").

The C++ and Numba backends round a block with less than one unit of mass from bounds on
its exact units prefixes, reading only the part its pick lies in, and merge the leftovers
with their masses as intervals. Two things must hold: the bounds contain the exact
prefixes (checked against the NumPy quantisation of the exact ``q``, on pools built to
make the float sums of ``1/a`` as wrong as they can be), and the indices are those of the
plain rounding, which the other test files tie to the NumPy definition. ``slack_bits``
widens the bounds so that the undecided cases (a block read whole, a merge redone on
exact masses) happen on purpose.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rad
from conftest import BACKENDS
from rad._backends import get_backend
from rad._backends.canonical import BLOCK, ONE, quantize
from rad._backends.contract import SKETCH_PARTS
from rad._backends.params import Params, probabilities_from_params

SKETCHING = [name for name in ("cpp", "numba") if name in BACKENDS]
pytestmark = pytest.mark.skipif(not SKETCHING, reason="the sketched rounding is the C++ and Numba backends'")

PART = BLOCK // SKETCH_PARTS


@pytest.fixture(params=SKETCHING)
def sketching(request: pytest.FixtureRequest) -> str:
    return request.param


def _uncapped(gains: np.ndarray, m: float, b: int, losses: np.ndarray | None = None, backend: str = "cpp"):
    """A backend's search with its sums and sketch, and the uncapped path's params (or None)."""
    w = 0.0 if losses is not None else 1.0 - m / gains.shape[0]
    status, tau, kstar, _, sums, sketch = get_backend(backend).threshold_support(gains, losses, w, m, b, 1)
    if sums is None:
        return None
    h, _, _, min_a = sums
    nu = b / h
    if not nu <= min_a:
        return None
    return w, Params("gain", nu, gain_cut=tau, gain_frac=1.0), sketch


def _sketched(backend: str, gains, losses, w, params: Params, b: int, key: int, sketch, threads: int,
              slack_bits: int) -> np.ndarray:
    if backend == "cpp":
        from rad import _core

        return _core.depround_sketched(gains, losses, w, params.as_tuple(), b, key, sketch.prefixes, sketch.tau,
                                       threads, slack_bits)
    from rad._backends import numba_sketch

    return numba_sketch.depround(gains, losses, w, params, b, key, sketch, threads, slack_bits)


def _unit_bounds(backend: str, prefixes: np.ndarray, nu: float, slack_bits: int):
    if backend == "cpp":
        from rad import _core

        return _core.sketch_unit_bounds(prefixes, nu, slack_bits)
    from rad._backends import numba_sketch

    rows = prefixes.reshape(-1, SKETCH_PARTS)
    lo = np.zeros((rows.shape[0], SKETCH_PARTS + 1), np.int64)
    hi = np.zeros((rows.shape[0], SKETCH_PARTS + 1), np.int64)
    usable = np.array([numba_sketch._bounds(r, nu, slack_bits, lo[k], hi[k]) for k, r in enumerate(rows)])
    return lo, hi, usable


def _merge_spans(backend: str, ids, lo, hi, key: int, wanted: int):
    """``(decided, taken, last pick, stuck)`` of the backend's interval merge."""
    if backend == "cpp":
        from rad import _core

        return _core.merge_spans(ids, lo, hi, key, wanted)
    from rad._backends import numba_sketch

    return numba_sketch.merge_blocks(ids, lo, hi, key, wanted)


def _pool(kind: str, n: int, rng: np.random.Generator, f32: bool) -> np.ndarray:
    if kind == "uniform":
        g = rng.random(n)
    elif kind == "wide":  # 1/a spans 2^40 within every part: float sums lose the most
        g = np.exp2(rng.uniform(-40, 0, n))
    elif kind == "ties":
        g = rng.integers(1, 6, n) / 5.0
    elif kind == "spikes":  # most of a block's mass in a few points
        g = np.ones(n)
        g[rng.choice(n, n // 1000, replace=False)] = 1e-6
    else:  # "gaps": whole parts below the threshold (no mass), others dense
        g = np.where((np.arange(n) // PART) % 3 == 0, 1e-3 * rng.random(n), 0.5 + rng.random(n))
    return g.astype(np.float32 if f32 else np.float64)


@pytest.mark.parametrize("kind", ["uniform", "wide", "ties", "spikes", "gaps"])
@pytest.mark.parametrize("f32", [False, True])
def test_bounds_contain_the_exact_units_prefixes(sketching: str, kind: str, f32: bool) -> None:
    rng = np.random.default_rng(7)
    n = 5 * BLOCK + 123
    gains = _pool(kind, n, rng, f32)
    solved = _uncapped(gains, 0.2 * n, 3, backend=sketching)
    assert solved is not None
    w, params, sketch = solved
    units = quantize(probabilities_from_params(gains, None, w, params))
    lo, hi, usable = _unit_bounds(sketching, sketch.prefixes, params.nu, 0)
    assert usable[:-1].all() and not usable[-1]  # every whole block; not the short last one
    for blk in range(n // BLOCK):
        u = units[blk * BLOCK : (blk + 1) * BLOCK]
        exact = np.concatenate(([0], np.cumsum(u)[PART - 1 :: PART]))  # U(0..SKETCH_PARTS)
        assert np.all(lo[blk] <= exact) and np.all(exact <= hi[blk]), (kind, blk)
        # Bounds that decide: far narrower than one pick's units (here ~2^46 / n * b).
        assert hi[blk, -1] - lo[blk, -1] < 2**20


def _unit_totals(backend: str, prefixes: np.ndarray, nu: float, slack_bits: int):
    if backend == "cpp":
        from rad import _core

        return _core.sketch_unit_totals(prefixes, nu, slack_bits)
    from rad._backends import numba_sketch

    got = [numba_sketch._total(r, nu, slack_bits) for r in prefixes.reshape(-1, SKETCH_PARTS)]
    return (np.array([t[1] for t in got], np.int64), np.array([t[2] for t in got], np.int64),
            np.array([t[0] for t in got]))


def test_total_bounds_are_the_full_bounds_last(sketching: str) -> None:
    """DepRound draws from ``sketch_total``, the bounds of a block's total units alone
    (the monotone fix of ``sketch_bounds`` folded into one maximum); the full bounds are
    formed only for the blocks whose pick is read. Both must agree on every row: real
    sketches of every pool kind, with zero prefixes, -1 rows, rows made unusable (NaN,
    inf, negative, too large), rows whose later prefixes dip below earlier ones, and
    slack widened until the bounds straddle 0 or pass the cap."""
    rng = np.random.default_rng(11)
    rows = []
    for kind in ("uniform", "wide", "ties", "spikes", "gaps"):
        n = 4 * BLOCK + 77
        solved = _uncapped(_pool(kind, n, rng, True), 0.2 * n, 3, backend=sketching)
        assert solved is not None
        rows.append((solved[2].prefixes.reshape(-1, SKETCH_PARTS), solved[1].nu))
    base, nu = rows[0]
    odd = np.repeat(base[:1], 9, axis=0)
    odd[0, :40] = 0.0  # no support point in the first parts
    odd[1, 5] = np.nan
    odd[2, 100] = np.inf
    odd[3, 7] = -0.5
    odd[4, -1] = 2.0**80  # a sum past the cap
    odd[5, 60:] = odd[5, 59]  # flat tail: the earliest prefix holds the largest lower bound
    odd[6, 64:] = odd[6, 63] * (1 - 2.0**-30)  # later prefixes a little below earlier ones
    odd[7, :] = 0.0  # no mass
    odd[8, :] = -1.0  # a short block
    rows.append((odd, nu))
    compared = 0
    for prefixes, nu in rows:
        flat = np.ascontiguousarray(prefixes.ravel())
        for slack in (0, 20, 30, 40, 44, 50, 60):
            for scale in (1.0, 2.0**-20, 2.0**20):
                lo, hi, usable = _unit_bounds(sketching, flat, nu * scale, slack)
                tlo, thi, tusable = _unit_totals(sketching, flat, nu * scale, slack)
                np.testing.assert_array_equal(tusable, usable)
                np.testing.assert_array_equal(tlo[usable], lo[usable, -1])
                np.testing.assert_array_equal(thi[usable], hi[usable, -1])
                compared += int(usable.sum())
    assert compared > 200


def test_bounds_need_their_rounding_term(sketching: str) -> None:
    """Equal gains round every item's units the same way, so a block's exact units drift
    from the float estimate by ~0.4 a point: far more than the relative slack allows. The
    check above could fail; the per-point term of the bounds is what keeps it passing."""
    n = 40 * BLOCK
    gains = np.full(n, 0.7)
    w, params, sketch = _uncapped(gains, 0.2 * n, 1, backend=sketching)
    units = quantize(probabilities_from_params(gains, None, w, params))
    x = params.nu * float(ONE) * sketch.prefixes.reshape(-1, SKETCH_PARTS)[0]  # the estimate alone
    exact = np.cumsum(units[:BLOCK])[PART - 1 :: PART]
    assert np.max(np.abs(exact - x) - x * 2.0**-29) > 10_000
    lo, hi, _ = _unit_bounds(sketching, sketch.prefixes, params.nu, 0)
    assert np.all(lo[0, 1:] <= exact) and np.all(exact <= hi[0, 1:])
    assert _same_as_plain(sketching, gains, 0.2 * n, 1, keys=range(8), slack_bits=(0,)) > 0


def _same_as_plain(backend: str, gains: np.ndarray, m: float, b: int, keys, slack_bits, threads=(1, 2),
                   losses=None) -> int:
    """Sketched and plain rounding agree; returns how many comparisons were made."""
    solved = _uncapped(gains, m, b, losses, backend)
    if solved is None:
        return 0
    w, params, sketch = solved
    made = 0
    for key in keys:
        want = get_backend(backend).depround_params(gains, losses, w, params, b, key, 1)
        for t in threads:
            for s in slack_bits:
                got = _sketched(backend, gains, losses, w, params, b, key, sketch, t, s)
                np.testing.assert_array_equal(got, want, err_msg=f"key={key} threads={t} slack_bits={s}")
                made += 1
    return made


@pytest.mark.parametrize("kind", ["uniform", "wide", "ties", "spikes", "gaps"])
def test_sketched_rounding_is_the_plain_rounding(sketching: str, kind: str) -> None:
    rng = np.random.default_rng(11)
    n = 9 * BLOCK + 77
    gains = _pool(kind, n, rng, f32=kind == "uniform")
    # b below, near and above the number of blocks: sparse blocks, blocks near one unit
    # (read whole), dense blocks (never sketched).
    made = 0
    for b in (1, 4, 9, 10, 30):
        made += _same_as_plain(sketching, gains, 0.2 * n, b, keys=range(6), slack_bits=(0, 24, 34, 44))
    assert made > 0


def _parts_counts(backend: str) -> np.ndarray:
    """``(blocks rounded from parts, tried and undecided, parts read)`` since the last call."""
    if backend == "cpp":
        from rad import _core

        return np.array(_core.sketch_counts(True), np.int64)
    from rad._backends import numba_sketch

    return np.array(numba_sketch.parts_counts(True), np.int64)


@pytest.mark.parametrize("kind", ["uniform", "wide", "ties", "spikes", "gaps"])
def test_blocks_with_crossings_are_rounded_from_their_parts(sketching: str, kind: str) -> None:
    """With b above the number of blocks a block holds a few units of mass; it is rounded
    from the parts its crossings and picks lie in (sketch.hpp's round_block_from_parts,
    numba_sketch's _round_on_bounds on a block's parts) with the plain rounding's indices, also where widened
    bounds leave it undecided (rounded whole) and above 24 units (never from parts)."""
    rng = np.random.default_rng(13)
    n = 9 * BLOCK + 77
    gains = _pool(kind, n, rng, f32=kind in ("uniform", "gaps"))
    counts = np.zeros(3, np.int64)
    for b in (20, 60, 150):  # about 2, 7 and 17 units a block
        _parts_counts(sketching)
        assert _same_as_plain(sketching, gains, 0.2 * n, b, keys=range(4), slack_bits=(0,)) > 0
        from_parts, undecided, parts = _parts_counts(sketching)
        assert from_parts > 0 and parts < from_parts * SKETCH_PARTS, (b, from_parts, parts)  # not whole blocks
        assert _same_as_plain(sketching, gains, 0.2 * n, b, keys=range(4), slack_bits=(14, 20, 24)) > 0
        counts += _parts_counts(sketching)
    assert counts[1] > 0, counts  # the widened bounds left blocks undecided: rounded whole
    _parts_counts(sketching)
    assert _same_as_plain(sketching, gains, 0.2 * n, 9 * 30, keys=range(2), slack_bits=(0,)) > 0
    assert _parts_counts(sketching)[0] == 0  # 30 units a block: streamed


@pytest.mark.skipif("numba" not in BACKENDS, reason="Numba's merge redo")
def test_a_merge_undecided_by_parts_blocks_redoes_them_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the merge cannot decide on a parts block's leftover bounds, the blocks at or
    before the comparison are rounded whole: the same indices, and the same ones taken."""
    from rad._backends import numba_sketch

    rounded = []
    first = numba_sketch.Sketched.round_first

    def widened(self, blocks, *rest):  # the bounds widened (they still hold the exact mass)
        first(self, blocks, *rest)
        some = blocks[self.parts_hi[blocks] > 0]  # (a leftover of no mass stays a point)
        self.parts_lo[some] = np.maximum(1, self.parts_lo[some] - ONE // 8)
        self.parts_hi[some] = np.minimum(ONE - 1, self.parts_hi[some] + ONE // 8)
        rounded.append((self, self.parts.copy()))

    monkeypatch.setattr(numba_sketch.Sketched, "round_first", widened)
    n = 12 * BLOCK
    gains = _pool("uniform", n, np.random.default_rng(4), f32=True)
    assert _same_as_plain("numba", gains, 0.2 * n, 40, keys=range(4), slack_bits=(0,), threads=(1, 2)) > 0
    redone = sum(int(np.count_nonzero(before & ~sk.parts)) for sk, before in rounded)
    assert any(before.any() for _, before in rounded) and redone > 0, redone


def test_sketched_rounding_matches_the_numpy_definition(sketching: str) -> None:
    rng = np.random.default_rng(5)
    n = 4 * BLOCK + 999
    gains = rng.random(n).astype(np.float32)
    for key in range(3):
        want = rad.select(gains, 0.3 * n, 3, rng=key, backend="numpy")
        got = rad.select(gains, 0.3 * n, 3, rng=key, backend=sketching, threads=2)
        np.testing.assert_array_equal(got, want)


def test_select_passes_the_sketch_on(sketching: str) -> None:
    sol = rad.solve(np.random.default_rng(2).random(3 * BLOCK), 1000.0, 2, backend=sketching)
    assert sol.round_sketch is not None and sol.round_sketch.prefixes.shape == (3 * SKETCH_PARTS,)
    assert rad.solve(np.random.default_rng(2).random(3 * BLOCK), 1000.0, 2, backend="numpy").round_sketch is None


def test_given_losses(sketching: str) -> None:
    rng = np.random.default_rng(9)
    n = 6 * BLOCK
    gains = rng.random(n)
    losses = rng.random(n) * 0.5
    assert _same_as_plain(sketching, gains, 0.2 * n, 3, keys=range(4), slack_bits=(0, 30), losses=losses) > 0


def test_a_sketch_for_other_params_is_not_used(sketching: str) -> None:
    """Capped params (or another tau) take the plain path: the same indices regardless."""
    rng = np.random.default_rng(4)
    n = 3 * BLOCK
    gains = rng.random(n)
    w, params, sketch = _uncapped(gains, 0.2 * n, 2, backend=sketching)
    other = Params("gain", params.nu, gain_cut=params.gain_cut, gain_frac=0.5)
    be = get_backend(sketching)
    want = be.depround_params(gains, None, w, other, 1, 3, 1)
    np.testing.assert_array_equal(be.depround_sketched(gains, None, w, other, 1, 3, sketch, 1), want)


@pytest.mark.skipif("cpp" not in BACKENDS, reason="the C++ binding's check")
def test_a_sketch_of_the_wrong_size_is_refused() -> None:
    from rad import _core

    n = 3 * BLOCK
    gains = np.random.default_rng(4).random(n)
    w, params, sketch = _uncapped(gains, 0.2 * n, 2)
    with pytest.raises(ValueError, match=f"{SKETCH_PARTS} per block"):
        _core.depround_sketched(gains, None, w, params.as_tuple(), 2, 3, sketch.prefixes[:-1], sketch.tau, 1)


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["uniform", "wide", "ties", "spikes", "gaps"]),
    blocks=st.integers(2, 7),
    tail=st.integers(0, BLOCK - 1),
    b=st.integers(1, 150),  # up to ~70 units a block: blocks with crossings, read from parts or whole
    m_frac=st.sampled_from([0.01, 0.2, 0.5]),
    f32=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_sketched_rounding_property(kind, blocks, tail, b, m_frac, f32, seed) -> None:
    rng = np.random.default_rng(seed)
    n = blocks * BLOCK + tail
    gains = _pool(kind, n, rng, f32)
    for backend in SKETCHING:
        _same_as_plain(backend, gains, m_frac * n, b, keys=(seed % 1000, seed % 1000 + 1), slack_bits=(0, 30, 40),
                       threads=(2,))


def _canonical_merge(ids: np.ndarray, units: np.ndarray, key: int, wanted: int) -> tuple[list[int], int]:
    from rad._backends import canonical

    keep = units > 0
    taken, last = canonical.merge_leftovers(ids[keep], units[keep] / float(ONE), key, wanted)
    return sorted(taken), last


def _leftover_units(family: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if family == "halves":  # running masses land exactly on multiples of ONE
        return np.full(n, ONE // 2, np.int64)
    if family == "quarters":
        return rng.integers(1, 4, n) * (ONE // 4)
    if family == "near_one":
        return ONE - rng.integers(1, 1000, n)
    if family == "zeros":  # blocks without mass among the rest
        return np.where(rng.random(n) < 0.5, 0, rng.integers(1, ONE, n))
    return rng.integers(1, ONE, n)


@pytest.mark.parametrize("family", ["random", "halves", "quarters", "near_one", "zeros"])
def test_merge_spans_on_exact_masses_is_the_canonical_merge(sketching: str, family: str) -> None:
    rng = np.random.default_rng(21)
    for n in (1, 2, 7, 300):
        units = _leftover_units(family, n, rng)
        ids = np.sort(rng.choice(100 * n, n, replace=False)).astype(np.int64)
        wanted = int(round(units.sum() / ONE))
        for key in range(12):
            ok, taken, last, _ = _merge_spans(sketching, ids, units, units, key, wanted)
            assert ok
            assert (sorted(taken.tolist()), last) == _canonical_merge(ids, units, key, wanted), (family, n, key)


@pytest.mark.parametrize("width", [10, 10**6, 10**10, 10**12])
def test_a_decided_merge_holds_for_every_mass_within_its_bounds(sketching: str, width: int) -> None:
    """Whenever the merge decides from bounds, the canonical merge of any exact masses
    inside them (both ends, and random points) gives those indices; wider bounds leave
    more undecided, and both outcomes occur."""
    rng = np.random.default_rng(width)
    decided = undecided = 0
    for trial in range(60):
        n = int(rng.integers(2, 200))
        units = _leftover_units(["random", "quarters", "zeros"][trial % 3], n, rng)
        ids = np.sort(rng.choice(100 * n, n, replace=False)).astype(np.int64)
        wanted = int(round(units.sum() / ONE))
        spread = (rng.random(n) * width).astype(np.int64) * (units > 0)
        lo = np.maximum(units - spread, 0)
        hi = np.minimum(units + spread, ONE - 1)
        key = int(rng.integers(0, 2**63))
        ok, taken, last, stuck = _merge_spans(sketching, ids, lo, hi, key, wanted)
        if not ok:
            undecided += 1
            # Exact masses up to `stuck` decide that comparison: the merge decides, or
            # stops at a later leftover.
            lo2, hi2 = lo.copy(), hi.copy()
            lo2[: stuck + 1] = hi2[: stuck + 1] = units[: stuck + 1]
            ok2, _, _, stuck2 = _merge_spans(sketching, ids, lo2, hi2, key, wanted)
            assert ok2 or stuck2 > stuck, (width, trial, stuck, stuck2)
            continue
        decided += 1
        for exact in (lo, hi, lo + ((hi - lo) * rng.random(n)).astype(np.int64)):
            assert (sorted(taken.tolist()), last) == _canonical_merge(ids, exact, key, wanted), (width, trial)
    assert decided > 0
    if width >= 10**10:
        assert undecided > 0

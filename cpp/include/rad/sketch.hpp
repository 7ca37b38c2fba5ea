// DepRound that reads only the parts of the pool it picks from (docs/design.md §3, "The
// DepRound sketch"). The same indices as depround() in depround.hpp, bit for bit.
//
// With b much smaller than the number of blocks, most blocks hold less than one unit of
// mass: such a block has no crossing, and its rounding is one pick by inverse CDF (one or
// two uniforms) and a leftover of its whole mass. The support pass records each block's
// approximate prefix sums of 1/a at 128 points (the sketch); with the uncapped path's
// q = nu / a they bound every exact units prefix U(k) from both sides. A block whose
// bounds decide every comparison the canonical rounding makes reads one part of 512
// points (the one the pick lies in) instead of 65,536; the leftovers are then merged with
// their masses as intervals. Any comparison the bounds cannot decide is made on exact
// units instead: for a pick (a chance of a few in 10,000 a block) that block is rounded
// by round_chunked; for the merge, whose comparisons see the bounds of every leftover
// before them, the sketched blocks before the comparison are, until it is decided.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "rad/depround.hpp"
#include "rad/support.hpp"

namespace rad {

// Bounds [lo, hi] of an exact number of units.
struct Span {
    std::int64_t lo = 0, hi = 0;
};

// Bounds of the exact units prefixes U(k) = sum of units(q_i) over a block's first k parts
// (k = 0..kSketchParts) from its sketch row. Item i contributes units(fl(nu / a_i)), within
// 0.5 + 2^-8 of 2^46 fl(nu / a_i) = 2^46 nu (1/a_i)(1 + d), |d| <= 2^-53; the row holds
// float sums of fl(1/a_i) with relative error below 8200 * 2^-53 < 2^-39.9 (a lane adds at
// most 8,192 positive terms a block, then the eight lanes are added), and forming the
// bounds rounds a few times more. The slack used, 2^-36 relative and 0.51 units a point
// plus 2, covers all of it with room (the rounding term dominates: 33,000 units a block);
// `slack_bits` widens it further (tests use it to make the bounds undecided). A prefix
// that sums to exactly 0 holds no support point (the terms are positive): U is 0 there.
// A capped item (0 < a_i <= nu: units = kOne) breaks the lower bound only, in a block
// whose upper bound then reaches kOne, which is never sketched. Losses are non-negative
// (validated), so every point of q > 0 has a > 0 and is in the support pass's sums.
// False when the row is unusable.
inline bool sketch_bounds(const double* row, double nu, int slack_bits, Span* U) {
    const double widen = std::ldexp(1.0, slack_bits);
    const double rel = std::ldexp(1.0, -36) * widen, scale = nu * kUnitScale;
    const double cap = std::ldexp(1.0, 62);
    U[0] = {0, 0};
    for (std::int64_t k = 1; k <= kSketchParts; ++k) {
        const double p = row[k - 1];
        if (!(p >= 0.0) || !(p <= cap)) return false;  // -1: a short block; NaN or inf: unusable
        if (p == 0.0) {
            U[k] = {0, 0};
            continue;
        }
        const double x = scale * p, abs = (0.51 * static_cast<double>(k * kSketchSpan) + 2.0) * widen;
        const double lo = x - x * rel - abs, hi = x + x * rel + abs;
        if (!(hi < cap)) return false;
        U[k].lo = lo > 0 ? static_cast<std::int64_t>(std::floor(lo)) : 0;
        U[k].hi = static_cast<std::int64_t>(std::ceil(hi));
    }
    // U is non-decreasing: each bound also holds for its neighbours' side.
    for (std::int64_t k = 1; k <= kSketchParts; ++k) U[k].lo = std::max(U[k].lo, U[k - 1].lo);
    for (std::int64_t k = kSketchParts - 1; k >= 0; --k) U[k].hi = std::min(U[k].hi, U[k + 1].hi);
    return true;
}

// U(kSketchParts) of sketch_bounds alone (the total's bounds, after its monotone fix): the
// largest lower bound of any prefix, floored, and the last prefix's upper bound. The draws
// need only the total; the other bounds are formed for the ~b blocks whose pick is read
// (sketch_bounds for all 15,259 blocks at 1e9 points, one at a time, took 5.3 ms on one
// AMD Zen 5 core; this takes 0.65 ms). The same values as sketch_bounds: floor and the clamp
// at 0 are monotone, so the largest floored bound is the floored largest one. False when
// sketch_bounds is.
inline bool sketch_total(const double* row, double nu, int slack_bits, Span& total) {
    using namespace simd;
    const double widen = std::ldexp(1.0, slack_bits);
    const double rel = std::ldexp(1.0, -36) * widen, scale = nu * kUnitScale;
    const double cap = std::ldexp(1.0, 62);
    static_assert(kSketchParts % 8 == 0, "whole vectors");
    const d8 zero = splat8(0.0), capv = splat8(cap), relv = splat8(rel), scalev = splat8(scale);
    d8 lo_max = zero;
    l8 bad = {};
    for (std::int64_t k0 = 0; k0 < kSketchParts; k0 += 8) {
        const d8 p = load8(row + k0);
        double points[8];  // k = k0 + 1 .. k0 + 8: the prefix's number of points is k kSketchSpan
        for (int j = 0; j < 8; ++j) points[j] = static_cast<double>((k0 + 1 + j) * kSketchSpan);
        const d8 kk = load8(points);
        const d8 x = scalev * p, abs = (splat8(0.51) * kk + splat8(2.0)) * splat8(widen);
        const d8 lo = x - x * relv - abs, hi = x + x * relv + abs;
        // not (p >= 0 and p <= cap), or (p != 0 and not hi < cap): unusable
        bad |= ~((p >= zero) & (p <= capv)) | ((p != zero) & ~(hi < capv));
        lo_max = select(lo > lo_max, lo, lo_max);  // a p == 0 entry's lo is below 0
    }
    for (int j = 0; j < 8; ++j)
        if (bad[j]) return false;
    double lo = 0.0;
    for (int j = 0; j < 8; ++j) lo = std::max(lo, lo_max[j]);
    const double p = row[kSketchParts - 1], x = scale * p;
    const double hi = x + x * rel + (0.51 * static_cast<double>(kSketchParts * kSketchSpan) + 2.0) * widen;
    total.lo = lo > 0 ? static_cast<std::int64_t>(std::floor(lo)) : 0;
    total.hi = p == 0.0 ? 0 : static_cast<std::int64_t>(std::ceil(hi));
    return true;
}

// One sketched block's rounding before its pool is read: its draws, made. decided ==
// false where a comparison depends on where the exact units lie within their bounds; a
// decided block with mass has its pick at the first item with U(item end) > t for the
// target t in [tlo, thi] (pick_in_parts finds it).
struct SketchDraw {
    bool decided = false;
    Span mass;
    std::int64_t tlo = 0, thi = 0;

    bool has_pick() const { return decided && mass.hi > 0; }
};

// The canonical rounding of a block of kBlock items with total units T < kOne (no
// crossing: resolve() of one run, depround.hpp) from the bounds of T (sketch_total), up to
// reading the pool: the draws on `rs`. The pick does not change the block's leftover mass,
// so the merge runs on the masses and only the blocks whose leftover it takes are read:
// about b parts, where reading every block's part cost most of a sketched DepRound at 1e9
// points.
inline SketchDraw draw_sketched_block(Span total, Stream& rs) {
    SketchDraw out;
    if (!(total.hi < kOne)) return out;  // a crossing or a certain item may be there
    if (total.hi == 0) {                 // no mass: no draw, no leftover
        out.decided = true;
        return out;
    }
    if (total.lo == 0) return out;  // mass or none: undecided
    // resolve(0, len, 0, 0, -1): the first target hits iff T > t; else a second uniform
    // aims at floor(u2 T), known within the bounds of T.
    std::int64_t tlo = first_target(rs, 0), thi = tlo;
    if (!(total.lo > tlo)) {
        if (total.hi > tlo) return out;
        const double u = rs.next();
        tlo = static_cast<std::int64_t>(u * static_cast<double>(total.lo));
        thi = static_cast<std::int64_t>(u * static_cast<double>(total.hi));
    }
    out.decided = true;
    out.mass = total;
    out.tlo = tlo, out.thi = thi;
    return out;
}

// The pick of a drawn block (global index), from its prefixes' bounds U (sketch_bounds),
// reading the parts that can hold it through `fill`; -1 when it depends on where the exact
// units lie within their bounds.
template <class FillFn>
std::int64_t pick_in_parts(const Span* U, const SketchDraw& d, std::int64_t lo_index, FillFn&& fill) {
    // Parts k1..k2 can hold the pick: k1 is the first whose end can exceed tlo, k2 the last
    // whose start can be at or below thi.
    std::int64_t k1 = 0;
    while (k1 < kSketchParts - 1 && !(U[k1 + 1].hi > d.tlo)) ++k1;
    std::int64_t k2 = kSketchParts - 1;
    while (k2 > k1 && !(U[k2].lo <= d.thi)) --k2;
    const std::int64_t first = k1 * kSketchSpan, count = (k2 + 1 - k1) * kSketchSpan;
    thread_local std::vector<double> q;
    thread_local std::vector<std::int64_t> c;
    q.resize(static_cast<size_t>(count));
    c.resize(static_cast<size_t>(count));
    fill(first, count, q.data());
    running_units(q.data(), count, c.data());
    // With the exact prefix B = U(k1) in [U[k1].lo, U[k1].hi], the pick is the first j with
    // B + c_j > t: decided when every (B, t) within the bounds gives the same j.
    const std::int64_t xlo = d.tlo - U[k1].hi, xhi = d.thi - U[k1].lo;
    const auto ia = std::upper_bound(c.begin(), c.end(), xlo) - c.begin();
    const auto ib = std::upper_bound(c.begin(), c.end(), xhi) - c.begin();
    if (ia != ib || ia >= count) return -1;
    return lo_index + first + ia;
}

// One round_sequence (depround.hpp's round_chunked) of a sequence of items whose running
// masses are known within bounds, on stream `rs`, pairing at most `max_crossings`
// crossings when that is not negative: the same draws and the same comparisons, each made
// for the whole range of values the bounds allow. `src` gives, for positions in [0, n):
//   cum(i)            the bounds of the running mass M_i after item i;
//   run(s, e)         the bounds of the mass of items [s, e);
//   mass(i)           the bounds of item i's own mass;
//   search(s, e, xlo, xhi, strict)
//                     the first i in [s, e) with M_i > x (strict) or >= x, the same for
//                     every M within the bounds and every x in [xlo, xhi] (e if none can),
//                     calling fail(i) where it is not;
//   fail(i)           marks the rounding undecided, i the last position whose bounds
//                     entered the comparison;
//   ok()              false once failed.
// A sequence of leftovers' masses (round_spans) and a block's parts read on demand
// (round_block_from_parts) are its two sources.
struct SpanRound {
    bool decided = true;
    std::vector<std::int64_t> taken;  // positions in the sequence
    std::int64_t last = -1;           // the final run's survivor (position), or -1
    Span left;                        // the bounds of its mass
    std::int64_t stuck = -1;          // undecided: the last position whose bounds entered the comparison
};

template <class Src>
SpanRound round_on_bounds(Src& src, std::int64_t n, Stream& rs, std::int64_t max_crossings) {
    SpanRound out;
    auto undecided = [&]() {
        out.decided = false;
        out.stuck = src.stuck();
        return out;
    };
    auto resolve = [&](std::int64_t s, std::int64_t e, std::int64_t base, Span m_start, std::int64_t carry) {
        if (s >= e) return carry;
        const Span run = src.run(s, e);
        if (run.hi <= 0) return carry;  // no mass in the run
        if (run.lo <= 0) return src.fail(e - 1), carry;
        std::int64_t t = first_target(rs, base);
        if (m_start.lo > t) return carry;
        if (m_start.hi > t) return src.fail(s - 1), carry;
        std::int64_t i = src.search(s, e, t, t, true);
        if (!src.ok() || i < e) return i;
        const Span c = src.cum(e - 1);
        const std::int64_t tot_lo = c.lo - base, tot_hi = c.hi - base;
        if (tot_hi <= 0) return carry;
        if (tot_lo <= 0) return src.fail(e - 1), carry;
        const double u = rs.next();
        const std::int64_t tlo = base + static_cast<std::int64_t>(u * static_cast<double>(tot_lo));
        const std::int64_t thi = base + static_cast<std::int64_t>(u * static_cast<double>(tot_hi));
        if (m_start.lo > thi) return carry;
        if (m_start.hi > tlo) return src.fail(s - 1), carry;
        i = src.search(s, e, tlo, thi, true);
        if (!src.ok() || i < e) return i;
        return src.fail(e - 1), carry;  // the last item with mass (rounding's own edge case): exactly
    };
    std::int64_t base = 0, start = 0, carry = -1;
    Span m_start{0, 0};
    for (std::int64_t crossings = 0; max_crossings < 0 || crossings < max_crossings; ++crossings) {
        const std::int64_t j = src.search(start, n, base + kOne, base + kOne, false);
        if (!src.ok()) return undecided();
        if (j >= n) break;
        const std::int64_t pick = resolve(start, j, base, m_start, carry);
        if (!src.ok()) return undecided();
        if (pick < 0) {
            out.taken.push_back(j);
            carry = -1;
        } else {
            // survivor_taken: u (alpha + beta) < beta, alpha + beta = 2 kOne - (M_j - base),
            // beta = kOne - q_j.
            const Span cj = src.cum(j), qj = src.mass(j);
            if (!src.ok()) return undecided();
            const double u = rs.next();
            const double sum_lo = static_cast<double>(2 * kOne - (cj.hi - base));
            const double sum_hi = static_cast<double>(2 * kOne - (cj.lo - base));
            const double beta_lo = static_cast<double>(kOne - qj.hi);
            const double beta_hi = static_cast<double>(kOne - qj.lo);
            bool survivor;
            if (u * sum_hi < beta_lo) survivor = true;
            else if (u * sum_lo >= beta_hi) survivor = false;
            else return src.fail(j), undecided();
            out.taken.push_back(survivor ? pick : j);
            carry = survivor ? j : pick;
        }
        base += kOne;
        m_start = src.cum(j);
        start = j + 1;
    }
    out.last = resolve(start, n, base, m_start, carry);
    if (!src.ok()) return undecided();
    const Span c = n > 0 ? src.cum(n - 1) : Span{0, 0};
    out.left = {c.lo - base, c.hi - base};
    return out;
}

// round_on_bounds of a sequence of masses known within bounds (exact ones have lo == hi):
// the running masses' bounds are the sums of the masses' bounds.
inline SpanRound round_spans(const Span* mass, std::int64_t n, Stream rs, std::int64_t max_crossings) {
    struct Seq {
        const Span* masses;
        std::int64_t n;
        std::vector<std::int64_t> CL, CH;  // bounds of cum
        bool good = true;
        std::int64_t at = -1;
        std::int64_t cl(std::int64_t i) const { return i < 0 ? std::int64_t{0} : CL[static_cast<size_t>(i)]; }
        std::int64_t ch(std::int64_t i) const { return i < 0 ? std::int64_t{0} : CH[static_cast<size_t>(i)]; }
        Span cum(std::int64_t i) const { return {cl(i), ch(i)}; }
        Span run(std::int64_t s, std::int64_t e) const { return {cl(e - 1) - cl(s - 1), ch(e - 1) - ch(s - 1)}; }
        Span mass(std::int64_t i) const { return masses[i]; }
        void fail(std::int64_t i) {
            good = false;
            at = std::max<std::int64_t>(0, std::min(n - 1, i));
        }
        bool ok() const { return good; }
        std::int64_t stuck() const { return at; }
        // no earlier i can (its upper bound does not), and this one must (its lower bound does)
        std::int64_t search(std::int64_t s, std::int64_t e, std::int64_t xlo, std::int64_t xhi, bool strict) {
            auto first = [&](const std::vector<std::int64_t>& C, std::int64_t x) {
                const auto b = C.begin() + s, en = C.begin() + e;
                return (strict ? std::upper_bound(b, en, x) : std::lower_bound(b, en, x)) - C.begin();
            };
            const std::int64_t i = first(CH, xlo), i_last = first(CL, xhi);
            if (i != i_last) fail(std::min(e - 1, i_last));
            return i;
        }
    } seq{mass, n, std::vector<std::int64_t>(static_cast<size_t>(n)), std::vector<std::int64_t>(static_cast<size_t>(n))};
    std::int64_t sl = 0, sh = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        seq.CL[static_cast<size_t>(i)] = sl += mass[i].lo;
        seq.CH[static_cast<size_t>(i)] = sh += mass[i].hi;
    }
    return round_on_bounds(seq, n, rs, max_crossings);
}

// canonical.merge_leftovers (its levels of kMergeGroup) of leftovers with masses known
// within bounds, owing `wanted` picks: `ids`, `mass` and, per leftover, the last block
// its mass depends on (`dep`). Appends the taken ids to `out` and sets `last`; false, with
// `out` unchanged and `stuck` set to the last block whose exact mass would decide the
// comparison, when one depends on where the masses lie within their bounds. A leftover
// enters a level only with mass (as in the canonical merge), so a mass whose bounds
// straddle 0 is undecided too. The leftovers' total is `wanted` units up to rounding noise
// far wider than these bounds; the merge never pairs the crossing of the last unit, so it
// never asks on which side of it the total lies. A group's comparisons see the bounds of
// at most 64 masses, which keeps them decided: at 1e9 points and b = 1000 the single
// sequence of 15,259 leftovers had left a quarter of the keys undecided, groups of 64 1%.
// The first level is read in place (`count` leftovers at `ids`, `mass`, `dep`): a copy of
// 15,259 leftovers (1e9 points) is three fresh allocations past the allocator's mmap
// threshold, whose page faults cost several times the merge itself.
inline bool merge_spans(const std::int64_t* ids, const Span* mass, const std::int64_t* dep, std::int64_t count,
                        std::uint64_t key, std::int64_t wanted, std::vector<std::int64_t>& out, std::int64_t& last,
                        std::int64_t& stuck) {
    std::vector<std::int64_t> taken, level_ids, level_dep;  // the levels after the first
    std::vector<Span> level_mass;
    std::uint64_t group = 0;
    for (std::int64_t total = count;; total = static_cast<std::int64_t>(level_ids.size())) {
        const bool final_round = total <= kMergeGroup;
        std::vector<std::int64_t> next_ids, next_dep;
        std::vector<Span> next_mass;
        for (std::int64_t lo = 0; lo < std::max<std::int64_t>(total, 1); lo += kMergeGroup) {  // one empty final round
            const std::int64_t cnt = final_round ? total : std::min(kMergeGroup, total - lo);
            const std::uint64_t stream = final_round ? kMergeStream : kMergeStream - 1 - group++;
            const std::int64_t owed = wanted - static_cast<std::int64_t>(taken.size());
            const SpanRound r = round_spans(mass + lo, cnt, Stream(stream_state(key, stream)),
                                            final_round ? std::max<std::int64_t>(0, owed - 1) : -1);
            if (!r.decided) {
                stuck = dep[static_cast<size_t>(lo + r.stuck)];
                return false;
            }
            for (std::int64_t p : r.taken) taken.push_back(ids[static_cast<size_t>(lo + p)]);
            if (final_round) {
                out.insert(out.end(), taken.begin(), taken.end());
                last = r.last >= 0 ? ids[static_cast<size_t>(lo + r.last)] : -1;
                return true;
            }
            if (r.left.hi == 0) continue;  // no mass: not in the next level
            if (r.left.lo == 0 || r.last < 0) {
                stuck = dep[static_cast<size_t>(lo + cnt - 1)];
                return false;
            }
            next_ids.push_back(ids[static_cast<size_t>(lo + r.last)]);
            next_mass.push_back(r.left);
            next_dep.push_back(dep[static_cast<size_t>(lo + cnt - 1)]);
        }
        level_ids.swap(next_ids);
        level_mass.swap(next_mass);
        level_dep.swap(next_dep);
        ids = level_ids.data();
        mass = level_mass.data();
        dep = level_dep.data();
    }
}

inline bool merge_spans(const std::vector<std::int64_t>& ids, const std::vector<Span>& mass,
                        const std::vector<std::int64_t>& dep, std::uint64_t key, std::int64_t wanted,
                        std::vector<std::int64_t>& out, std::int64_t& last, std::int64_t& stuck) {
    return merge_spans(ids.data(), mass.data(), dep.data(), static_cast<std::int64_t>(ids.size()), key, wanted, out,
                       last, stuck);
}

// A block with a unit of mass or more (b above the number of blocks: about b / blocks
// units a block) has crossings. Its canonical rounding (round_chunked in depround.hpp)
// needs, at each crossing and each run's target, the first item whose exact units prefix
// passes a value; from the bounds U of the prefixes at the parts' ends, only the parts
// where that item can lie are read (about two a pick). A read part gives its items'
// exact units and their running sums from the part's start, B + c_i, with the unknown
// exact prefix B at the part's start within [U[k].lo, U[k].hi]: each comparison is made
// for every B within those bounds, as round_spans does for masses known within bounds,
// and one that depends on B leaves the block undecided (it is then rounded whole).
// Certain items (units kOne: q = 1) are taken by the exact rounding with no mass, which
// the bounds do not model; a part that can hold one has bounds at least kOne apart, so
// blocks with such a part are not rounded here (sketched_parts_eligible).
// Above kPartsUnitsMax units a block reads about a third of its parts (two a unit), each
// at about three times a streamed item's cost: round_chunked streams it faster (n = 3e7 on
// one thread: 22 units a block 20 ms from parts against 29 streamed; 33 units 1e8 points
// on two threads slower from parts).
constexpr std::int64_t kPartsUnitsMax = 24;

inline bool sketched_parts_eligible(const Span* U) {
    if (!(U[kSketchParts].hi < kPartsUnitsMax * kOne)) return false;
    for (std::int64_t k = 0; k < kSketchParts; ++k)
        if (!(U[k + 1].hi - U[k].lo < kOne / 2)) return false;
    return U[kSketchParts].lo > 0;
}

// What the sketched rounding did, summed over calls (a test hook: _core.sketch_counts).
struct SketchCounts {
    std::atomic<std::int64_t> from_parts{0}, from_parts_undecided{0}, parts_read{0};
};
inline SketchCounts& sketch_counts() {
    static SketchCounts counts;
    return counts;
}

struct PartsRound {
    bool decided = false;
    std::vector<std::int64_t> taken;  // global indices, ascending
    std::int64_t left_index = -1;     // the final run's survivor (global), or -1
    Span left;                        // the bounds of its mass
    std::int64_t parts_read = 0;
};

// round_on_bounds' source for one block of kBlock items read part by part
// (round_block_from_parts): U the bounds of the exact prefixes at the parts' ends.
template <class FillFn>
struct BlockParts {
    static constexpr std::int64_t S = kSketchSpan, len = kBlock;
    const Span* U;
    FillFn& fill;
    std::int64_t* loc;
    double* q;
    bool read[kSketchParts] = {};
    bool good = true;
    std::int64_t reads = 0;
    void need(std::int64_t k) {
        if (read[k]) return;
        read[k] = true;
        ++reads;
        const std::int64_t count = std::min(S, len - k * S);  // S (not a constant: GCC then warns of the tails)
        fill(k * S, count, q);
        running_units(q, count, loc + k * S);
        // a certain item cannot be here (sketched_parts_eligible): its units would be kOne
        if (loc[k * S + count - 1] >= kOne) good = false;
    }
    // B + c_i, and at a part's last item also the bounds of the next part's start
    Span cum(std::int64_t i) {
        const std::int64_t k = i / S;
        const bool last = i % S == S - 1;
        if (last && !read[k]) return U[k + 1];
        need(k);
        Span r{U[k].lo + loc[i], U[k].hi + loc[i]};
        if (last) r = {std::max(r.lo, U[k + 1].lo), std::min(r.hi, U[k + 1].hi)};
        return r;
    }
    Span run(std::int64_t s, std::int64_t e) {
        if (s / S == (e - 1) / S) {  // within one part: exact
            need(s / S);
            const std::int64_t r = loc[e - 1] - (s % S ? loc[s - 1] : 0);
            return {r, r};
        }
        const Span b0 = s > 0 ? cum(s - 1) : Span{0, 0}, c1 = cum(e - 1);
        return {c1.lo - b0.hi, c1.hi - b0.lo};
    }
    Span mass(std::int64_t i) {  // exact: a difference within one part
        need(i / S);
        const std::int64_t m = i % S ? loc[i] - loc[i - 1] : loc[i];
        return {m, m};
    }
    void fail(std::int64_t) { good = false; }
    bool ok() const { return good; }
    std::int64_t stuck() const { return 0; }
    // In a read part M_i = B + c_i, c non-decreasing: two binary searches, with B at
    // either bound; a part whose end's bound cannot reach xlo is skipped unread.
    std::int64_t search(std::int64_t s, std::int64_t e, std::int64_t xlo, std::int64_t xhi, bool strict) {
        auto first = [&](std::int64_t i0, std::int64_t i1, std::int64_t x) {  // first c_i hitting x
            return (strict ? std::upper_bound(loc + i0, loc + i1, x) : std::lower_bound(loc + i0, loc + i1, x)) - loc;
        };
        for (std::int64_t k = s / S; k * S < e; ++k) {
            if (!(strict ? U[k + 1].hi > xlo : U[k + 1].hi >= xlo)) continue;  // no item of part k can
            need(k);
            if (!good) return e;
            const std::int64_t i0 = std::max(s, k * S), i1 = std::min(e, (k + 1) * S);
            const std::int64_t earliest = first(i0, i1, xlo - U[k].hi), latest = first(i0, i1, xhi - U[k].lo);
            if (latest < i1) {
                if (earliest != latest) good = false;
                return latest;
            }
            if (earliest < i1) {  // here for some values, later for others
                good = false;
                return e;
            }
        }
        return e;
    }
};

// round_chunked (depround.hpp) of one whole block of kBlock items on stream `rs`, from the
// bounds U of its prefixes (sketch_bounds; sketched_parts_eligible), reading parts through
// fill(first, count, q) (local indices); global index = lo_index + local index.
template <class FillFn>
PartsRound round_block_from_parts(const Span* U, Stream rs, std::int64_t lo_index, FillFn&& fill) {
    thread_local std::vector<std::int64_t> loc;  // read parts: running units from the part's start
    thread_local std::vector<double> q;
    loc.resize(static_cast<size_t>(kBlock));
    q.resize(static_cast<size_t>(kSketchSpan));
    BlockParts<FillFn> parts{U, fill, loc.data(), q.data()};
    SpanRound r = round_on_bounds(parts, kBlock, rs, -1);
    PartsRound out;
    out.parts_read = parts.reads;
    if (!r.decided) return out;
    // after the last crossing the exact leftover lies in [0, kOne)
    out.left = {std::max<std::int64_t>(0, r.left.lo), std::min(kOne - 1, r.left.hi)};
    out.left_index = r.last >= 0 ? lo_index + r.last : -1;
    out.taken = std::move(r.taken);
    std::sort(out.taken.begin(), out.taken.end());
    for (std::int64_t& t : out.taken) t += lo_index;
    out.decided = true;
    return out;
}

// depround() of the uncapped path's q = nu / a (g >= tau; params gain_cut == tau,
// gain_frac == 1) with the sketch the support pass recorded at tau. Blocks whose sketch
// decides are rounded from it; every other block, and every sketched block when the merge
// is undecided, by round_chunked. The same indices as depround() with the same fill.
template <class FillFn>
Indices depround_sketched(std::int64_t n, std::int64_t b, std::uint64_t key, int threads, double nu,
                          const double* sketch, int slack_bits, FillFn&& fill) {
    const std::int64_t nb = num_blocks(n);
    if (!(nu > 0)) return depround(n, b, key, threads, fill);
    BlockRuns runs;
    runs.taken.resize(static_cast<size_t>(nb));
    std::vector<std::int64_t> ids(static_cast<size_t>(nb), -1);
    std::vector<Span> mass(static_cast<size_t>(nb));
    std::vector<char> sketched(static_cast<size_t>(nb), 0);
    auto exact = [&](std::int64_t blk) {
        runs.taken[static_cast<size_t>(blk)].clear();
        const Leftover l = round_block(n, blk, 0, 0, key, runs.taken[static_cast<size_t>(blk)], fill);
        const std::int64_t u = units(l.mass);  // exact: a multiple of 2^-46 below 1
        ids[static_cast<size_t>(blk)] = l.index;
        mass[static_cast<size_t>(blk)] = {u, u};
    };
    // A sketched block's leftover enters the merge as -2 - blk until the merge takes it:
    // only then are its parts read for the pick (draw_sketched_block).
    std::vector<SketchDraw> drawn(static_cast<size_t>(nb));
    parallel_for(nb, threads, [&](std::int64_t blk) {
        const std::int64_t lo = blk * kBlock;
        Span total;
        if (n - lo >= kBlock && sketch_total(sketch + blk * kSketchParts, nu, slack_bits, total)) {
            Stream rs(stream_state(key, static_cast<std::uint64_t>(blk)));
            const SketchDraw d = draw_sketched_block(total, rs);
            if (d.decided) {
                drawn[static_cast<size_t>(blk)] = d;
                ids[static_cast<size_t>(blk)] = d.has_pick() ? -2 - blk : -1;
                mass[static_cast<size_t>(blk)] = d.mass;
                sketched[static_cast<size_t>(blk)] = 1;
                return;
            }
            Span U[kSketchParts + 1];
            if (!(total.hi < kOne) && sketch_bounds(sketch + blk * kSketchParts, nu, slack_bits, U) &&
                sketched_parts_eligible(U)) {  // crossings: the parts they lie in
                PartsRound r = round_block_from_parts(U, Stream(stream_state(key, static_cast<std::uint64_t>(blk))), lo,
                                                      [&](std::int64_t i0, std::int64_t cnt, double* dst) { fill(lo + i0, cnt, dst); });
                sketch_counts().parts_read += r.parts_read;
                if (r.decided) {
                    ++sketch_counts().from_parts;
                    runs.taken[static_cast<size_t>(blk)] = std::move(r.taken);
                    ids[static_cast<size_t>(blk)] = r.left_index;
                    mass[static_cast<size_t>(blk)] = r.left;
                    sketched[static_cast<size_t>(blk)] = 2;
                    return;
                }
                ++sketch_counts().from_parts_undecided;
            }
        }
        exact(blk);
    }, small_grain(nb, threads));  // most blocks only draw (~30 ns)
    if (cancelled()) return {};  // discarded by the caller
    const std::int64_t in_blocks = taken_in_blocks(runs);  // the redo below keeps it (checked)
    std::vector<std::int64_t> picks;
    std::int64_t last = -1, stuck = -1;
    // The leftovers with mass, in block order (a sketched block's mass is 0 only if its
    // bounds say so; one whose bounds straddle 0 was rounded exactly).
    auto leftovers = [&](std::vector<std::int64_t>& li, std::vector<Span>& lm, std::vector<std::int64_t>& ld) {
        li.clear(), lm.clear(), ld.clear();
        for (std::int64_t blk = 0; blk < nb; ++blk)
            if (mass[static_cast<size_t>(blk)].hi > 0) {
                li.push_back(ids[static_cast<size_t>(blk)]);
                lm.push_back(mass[static_cast<size_t>(blk)]);
                ld.push_back(blk);
            }
    };
    std::vector<std::int64_t> li, ld;
    std::vector<Span> lm;
    // Undecided: exact masses for the sketched blocks at or before the comparison's last
    // one, the nearest first, in batches that double (a decided comparison stays decided).
    for (std::int64_t batch = std::max(64, 16 * threads);; batch *= 2) {
        leftovers(li, lm, ld);
        if (merge_spans(li, lm, ld, key, b - in_blocks, picks, last, stuck)) break;
        std::vector<std::int64_t> redo;
        std::vector<char> kind;
        for (std::int64_t blk = stuck; blk >= 0 && static_cast<std::int64_t>(redo.size()) < batch; --blk)
            if (sketched[static_cast<size_t>(blk)]) redo.push_back(blk), kind.push_back(sketched[static_cast<size_t>(blk)]);
        if (redo.empty()) throw std::runtime_error("internal error: DepRound's merge undecided on exact masses");
        std::vector<std::size_t> took(redo.size());
        for (std::size_t k = 0; k < redo.size(); ++k) took[k] = runs.taken[static_cast<size_t>(redo[k])].size();
        parallel_for(static_cast<std::int64_t>(redo.size()), threads, [&](std::int64_t k) {
            const std::int64_t blk = redo[static_cast<size_t>(k)];
            exact(blk);
            sketched[static_cast<size_t>(blk)] = 0;
        });
        if (cancelled()) return {};
        // under one unit of mass nothing is taken; from the parts, what the exact rounding takes
        for (std::size_t k = 0; k < redo.size(); ++k)
            if (runs.taken[static_cast<size_t>(redo[k])].size() != (kind[k] == 1 ? 0 : took[k]))
                throw std::runtime_error("internal error: a sketched block took other indices");
    }
    // The picks of the leftovers the merge took (and of the last one) whose blocks are
    // still unread: their parts now, or the whole block where the bounds leave the pick
    // undecided (the merge saw only the mass, which the pick does not change).
    std::vector<std::int64_t*> unread;
    for (std::int64_t& p : picks)
        if (p < -1) unread.push_back(&p);
    if (last < -1) unread.push_back(&last);
    parallel_for(static_cast<std::int64_t>(unread.size()), threads, [&](std::int64_t k) {
        std::int64_t& id = *unread[static_cast<size_t>(k)];
        const std::int64_t blk = -2 - id, lo = blk * kBlock;
        Span U[kSketchParts + 1];
        sketch_bounds(sketch + blk * kSketchParts, nu, slack_bits, U);  // usable: it was drawn from
        id = pick_in_parts(U, drawn[static_cast<size_t>(blk)], lo,
                           [&](std::int64_t i0, std::int64_t cnt, double* dst) { fill(lo + i0, cnt, dst); });
        if (id < 0) {
            exact(blk);
            id = ids[static_cast<size_t>(blk)];
        }
    });
    if (cancelled()) return {};
    for (const std::int64_t* p : unread)
        if (*p < 0 || !runs.taken[static_cast<size_t>(*p / kBlock)].empty())
            throw std::runtime_error("internal error: a sketched block's pick");
    return finish_depround(runs, in_blocks, std::move(picks), last, b, threads);
}

}  // namespace rad

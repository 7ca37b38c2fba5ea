// DepRound (paper Algorithm 2) by sequential pairing with skip-ahead (docs/design.md §1).
// Mirrors round_sequence / merge_leftovers (python/rad/_backends/canonical.py) exactly.
//
// Fixed point: q becomes Q = trunc(min(q, 1) * 2^46 + 0.5) units of kOne = 2^46 (0 for
// q <= 0); Q == kOne is certain (taken, no mass). The running mass M of the others is an
// exact int64 prefix sum (a block's stays below 2^62, its targets below 2^63), so each item's chance is exactly
// Q / kOne and any summation order gives the same bits. M crosses a multiple of kOne at
// *crossing* items; between two crossings lies a *run*, whose members (the carried item
// and the run's items) collapse to one survivor picked with probability proportional to
// mass — inverse CDF: one 46-bit uniform offset t aimed at base + t (a second only if the
// run's mass falls short). At the crossing item j the survivor (S units) and j are paired
// exactly as in Algorithm 2: the survivor is taken with probability
// (kOne - Q_j) / ((kOne - S) + (kOne - Q_j)). Crossings and picks are found by binary
// search on M, so the work per block is a streaming pass plus O(b log B).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rad/parallel.hpp"
#include "rad/rng.hpp"

namespace rad {

constexpr int kUnitBits = 46;
constexpr std::int64_t kOne = std::int64_t{1} << kUnitBits;
constexpr double kUnitScale = static_cast<double>(kOne);

// canonical.quantize of one probability.
inline std::int64_t units(double p) {
    const double x = p > 0.0 ? (p < 1.0 ? p : 1.0) : 0.0;  // branch-free: vectorises
    return static_cast<std::int64_t>(x * kUnitScale + 0.5);
}

// units() of eight probabilities: the same operations, lane by lane.
RAD_SIMD_INLINE simd::l8 units8(const double* q) {
    using namespace simd;
    const d8 p = load8(q), one = splat8(1.0), zero = splat8(0.0);
    const d8 x = select(p > zero, select(p < one, p, one), zero);
    return to_int64_small(x * splat8(kUnitScale) + splat8(0.5));  // in [0.5, 2^46 + 0.5]
}

// c[j] = units(q[0]) + ... + units(q[j]) for j in [0, count): eight at a time.
inline void running_units(const double* q, std::int64_t count, std::int64_t* c) {
    std::int64_t run = 0, j = 0;
    for (; j + 8 <= count; j += 8) {
        const simd::l8 u = units8(q + j);
        const simd::l8 s = simd::inclusive_prefix(u) + run;
        simd::store(c + j, s);
        run += simd::hsum(u);
    }
    for (; j < count; ++j) c[j] = run += units(q[j]);
}

// Units back to a probability (exact: below 2^53).
inline double from_units(std::int64_t u) { return static_cast<double>(u) / kUnitScale; }

struct Leftover {
    std::int64_t index = -1;
    double mass = 0.0;  // a multiple of 2^-46 in [0, 1)
};

// The pairing at crossing item j (Algorithm 2): true when the survivor is taken.
inline bool survivor_taken(Stream& rs, std::int64_t held, std::int64_t qj) {
    const std::int64_t alpha = kOne - held, beta = kOne - qj;
    return rs.next() * static_cast<double>(alpha + beta) < static_cast<double>(beta);
}

// A run's first target: base plus the uniform's top 46 bits.
inline std::int64_t first_target(Stream& rs, std::int64_t base) {
    return base + static_cast<std::int64_t>(rs.next() * kUnitScale);
}

// Appends base_index + i for every set bit i of words[0..nwords) (bit i % 64 of word
// i / 64), in ascending order.
inline void append_set_bits(const std::uint64_t* words, std::int64_t nwords, std::int64_t base_index,
                            std::vector<std::int64_t>& out) {
    std::size_t count = 0;
    for (std::int64_t k = 0; k < nwords; ++k) count += static_cast<std::size_t>(__builtin_popcountll(words[k]));
    if (count == 0) return;
    const std::size_t at = out.size();
    out.resize(at + count + 8);  // store_indices8's room
    std::int64_t* dst = out.data() + at;
    const auto* bytes = reinterpret_cast<const unsigned char*>(words);  // byte c: items 8 c .. 8 c + 7
    for (std::int64_t k = 0; k < nwords; ++k)
        if (words[k] != 0)
            for (std::int64_t c = 8 * k; c < 8 * k + 8; ++c) dst += simd::store_indices8(bytes[c], base_index + 8 * c, dst);
    out.resize(at + count);
}

// Round local items [0, len) (global index = base_index + local index); append taken global
// indices in ascending order. One streaming pass keeps the
// chunk offsets O_c (exact int64 sums of kChunk items' units); a crossing, a pick or a mass
// is then found by a galloping, then binary, search over the chunk ends O_{c+1} and a
// re-summation of the one chunk that holds it. The same M, the same decisions, the
// same draws as canonical.round_sequence (tests compare every backend with the NumPy
// definition), with 8 bytes of scratch per kChunk items plus, in a dense block, 8 per item
// (its running mass M, so a lookup there is one read: no division, no re-summation).
//
// fill(i0, count, out) writes q of local items [i0, i0 + count) (vectorisable); it is
// called once per item by the pass, and again for a chunk looked up in a sparse stretch.
// With max_crossings >= 0 no crossing is paired after that many (canonical.round_sequence).
template <class Fill>
Leftover round_chunked(std::int64_t len, std::int64_t base_index, Stream& rs, std::vector<std::int64_t>& taken,
                       Fill&& fill, std::int64_t max_crossings = -1) {
    if (len == 0) return {};
    constexpr std::int64_t kChunk = 8;  // items per stored offset (any width gives the same M)
    constexpr std::int64_t kSub = 256;  // items per fill call (a multiple of kChunk)
    const std::int64_t nch = (len + kChunk - 1) / kChunk;
    thread_local std::vector<std::int64_t> off_buf, cum_buf, cross_buf;
    off_buf.resize(static_cast<size_t>(nch) + 1);
    cum_buf.resize(static_cast<size_t>(len));
    std::int64_t* O = off_buf.data();
    std::int64_t* cum_of = cum_buf.data();  // from keep_from on: each item's running mass M
    O[0] = 0;
    // From keep_from on, the crossing items (M passes a multiple of kOne: every item's mass
    // is below kOne, so at most one per item), in ascending order, found by the pass: the
    // loop below reads them instead of searching.
    cross_buf.resize(static_cast<size_t>(len) + kChunk);
    std::int64_t* crossings_at = cross_buf.data();
    std::int64_t n_cross = 0;
    // The taken items, one bit each (item i: bit i % 8 of byte i / 8): the pass stores a
    // chunk's certain items as one byte, the pairing sets its picks' bits, and the end reads
    // them out in ascending order (a capped pool takes every few items: no merge of lists).
    thread_local std::vector<std::uint64_t> taken_buf;
    taken_buf.assign(static_cast<size_t>((len + 63) / 64), 0);
    auto* taken_bytes = reinterpret_cast<unsigned char*>(taken_buf.data());
    auto mark_taken = [&](std::int64_t i) { taken_bytes[i / 8] |= static_cast<unsigned char>(1u << (i % 8)); };
    double sub[kSub];
    // Items' running masses are kept from the point where the block turns out dense (more
    // than one unit of mass per kDenseItems items so far): there lookups are many (a capped
    // pool picks every few items). A sparse block is looked up a few times per pick, and
    // refilling the one chunk (kChunk divisions) is cheaper than storing every item's M.
    constexpr std::int64_t kDenseItems = 2048;
    std::int64_t keep_from = len;
    for (std::int64_t s0 = 0; s0 < len; s0 += kSub) {
        const std::int64_t cnt = std::min(kSub, len - s0);
        if (keep_from == len && s0 > 0 && O[s0 / kChunk] > kOne / kDenseItems * s0) keep_from = s0;
        fill(s0, cnt, sub);
        // Units (branch-free, one 8-wide vector per chunk: kChunk == 8) and the chunk
        // offsets in one pass, and in a dense stretch each item's running mass; a certain
        // item (units == kOne) is taken here and keeps 0 units (a capped pool has one every
        // dozen items).
        const bool dense = s0 >= keep_from;
        if (cnt == kSub) {
            using namespace simd;
            const l8 certain_units = l8{} + kOne;
            std::int64_t run = O[s0 / kChunk];  // in a register: O may alias cum_of for the compiler
            l8 any_certain = {};
            for (std::int64_t c0 = 0; c0 < kSub; c0 += kChunk) {
                l8 u = units8(sub + c0);
                const l8 certain = u == certain_units;
                u = u & ~certain;  // 0 where certain
                if (dense) {
                    taken_bytes[(s0 + c0) / kChunk] = static_cast<unsigned char>(movemask(certain));
                    const l8 c = inclusive_prefix(u) + run;
                    store(cum_of + s0 + c0, c);
                    // Item p crosses where M's whole units grow: (M_p >> 46) > (M_{p-1} >> 46).
                    const l8 prev = shift_in(c, run);
                    const unsigned cross = movemask(shift_right_nonneg(c, kUnitBits) != shift_right_nonneg(prev, kUnitBits));
                    n_cross += store_indices8(cross, s0 + c0, crossings_at + n_cross);
                } else {
                    any_certain |= certain;  // a vector OR: the sparse pass stays as lean as it was
                }
                run += simd::hsum(u);
                O[(s0 + c0) / kChunk + 1] = run;
            }
            if (!dense && movemask(any_certain) != 0)  // rare: a certain item in a sparse stretch
                for (std::int64_t c0 = 0; c0 < kSub; c0 += kChunk)
                    taken_bytes[(s0 + c0) / kChunk] = static_cast<unsigned char>(movemask(units8(sub + c0) == certain_units));
        } else {
            std::int64_t run = O[s0 / kChunk];
            for (std::int64_t c0 = 0; c0 < cnt; c0 += kChunk) {
                const std::int64_t c1 = std::min(cnt, c0 + kChunk);
                for (std::int64_t i = c0; i < c1; ++i) {
                    std::int64_t u = units(sub[i]);
                    if (u == kOne) {
                        mark_taken(s0 + i);
                        u = 0;
                    }
                    if (dense && ((run + u) >> kUnitBits) > (run >> kUnitBits)) crossings_at[n_cross++] = s0 + i;
                    run += u;
                    if (dense) cum_of[s0 + i] = run;
                }
                O[(s0 + c0) / kChunk + 1] = run;
            }
        }
    }
    // One chunk of a sparse stretch again: its units and running sums (cum[i] = O_c + local).
    std::int64_t cm[kChunk], cc[kChunk];
    std::int64_t loaded = -1;
    auto load = [&](std::int64_t c) {
        if (c == loaded) return;
        loaded = c;
        const std::int64_t lo = c * kChunk, clen = std::min(kChunk, len - lo);
        double q[kChunk];
        fill(lo, clen, q);
        std::int64_t run = O[c];
        for (std::int64_t j = 0; j < clen; ++j) {
            const std::int64_t u = units(q[j]);
            cm[j] = u == kOne ? 0 : u;  // certain items were taken by the pass
            cc[j] = run += cm[j];
        }
    };
    auto cum = [&](std::int64_t i) {  // M after item i
        if (i >= keep_from) return cum_of[i];
        load(i / kChunk);
        return cc[i % kChunk];
    };
    auto mass = [&](std::int64_t i) {  // item i's units (0 for a certain item)
        if (i >= keep_from) return cum_of[i] - (i > keep_from ? cum_of[i - 1] : O[i / kChunk]);
        load(i / kChunk);
        return cm[i % kChunk];
    };
    // First i in [s, e) with cum[i] > x (strict) or >= x; e if none. cum is non-decreasing
    // and the last item of chunk c has cum = O_{c+1}.
    auto search = [&](std::int64_t s, std::int64_t e, std::int64_t x, bool strict) -> std::int64_t {
        if (s >= e) return e;
        auto hit = [&](std::int64_t v) { return strict ? v > x : v >= x; };
        const std::int64_t cs = s / kChunk;
        for (std::int64_t i = s; i < std::min(e, (cs + 1) * kChunk); ++i)
            if (hit(cum(i))) return i;
        const std::int64_t ce = (e - 1) / kChunk;  // chunk of the last item
        if (ce <= cs) return e;
        // Smallest chunk c in (cs, ce] whose end O_{c+1} hits; chunk ce may end past e.
        // Galloping first: in a dense block the answer is a few chunks away.
        std::int64_t lo = cs + 1, hi = ce + 1;
        for (std::int64_t step = 1; lo + step - 1 < hi; step *= 2) {
            const std::int64_t probe = lo + step - 1;
            if (hit(O[probe + 1])) {
                hi = probe;
                break;
            }
            lo = probe + 1;
        }
        while (lo < hi) {
            const std::int64_t mid = lo + (hi - lo) / 2;
            if (hit(O[mid + 1])) hi = mid;
            else lo = mid + 1;
        }
        if (lo > ce) return e;
        for (std::int64_t i = lo * kChunk; i < std::min(e, (lo + 1) * kChunk); ++i)
            if (hit(cum(i))) return i;
        return e;
    };
    auto before = [&](std::int64_t i) { return i > 0 ? cum(i - 1) : std::int64_t{0}; };
    auto last_positive = [&](std::int64_t e) -> std::int64_t {  // one exists before e
        std::int64_t i = e - 1;
        for (;;) {
            const std::int64_t c = i / kChunk;
            if (O[c + 1] > O[c])
                for (; i >= c * kChunk; --i)
                    if (mass(i) > 0) return i;
            i = c * kChunk - 1;
        }
    };
    auto resolve = [&](std::int64_t s, std::int64_t e, std::int64_t base, std::int64_t m_start, std::int64_t carry) {
        if (s >= e || cum(e - 1) == before(s)) return carry;  // no mass in the run
        std::int64_t target = first_target(rs, base);
        if (m_start > target) return carry;
        std::int64_t i = search(s, e, target, true);
        if (i < e) return i;
        const std::int64_t total = cum(e - 1) - base;
        if (!(total > 0)) return carry;
        target = base + static_cast<std::int64_t>(rs.next() * static_cast<double>(total));
        if (m_start > target) return carry;
        i = search(s, e, target, true);
        if (i < e) return i;
        return last_positive(e);
    };
    // Taken at a crossing: the crossing item j or the run's survivor (marked in taken_bytes).
    std::int64_t base = 0, m_start = 0, start = 0, carry = -1;
    std::int64_t next_cross = 0;  // the first of crossings_at not yet passed
    for (std::int64_t crossings = 0; max_crossings < 0 || crossings < max_crossings; ++crossings) {
        // The first item from `start` on with M >= base + kOne: after the crossings so far
        // M_{start-1} lies in [base, base + kOne), so from keep_from on it is the next
        // crossing item at or after `start`.
        std::int64_t j;
        if (start >= keep_from) {
            while (next_cross < n_cross && crossings_at[next_cross] < start) ++next_cross;
            j = next_cross < n_cross ? crossings_at[next_cross] : len;
        } else {
            j = search(start, len, base + kOne, false);
        }
        if (j >= len) break;
        const std::int64_t pick = resolve(start, j, base, m_start, carry);
        const std::int64_t held = before(j) - base;
        if (pick < 0) {
            mark_taken(j);
            carry = -1;
        } else if (survivor_taken(rs, held, mass(j))) {
            mark_taken(pick);
            carry = j;
        } else {
            mark_taken(j);
            carry = pick;
        }
        base += kOne;
        m_start = cum(j);
        start = j + 1;
    }
    const std::int64_t pick = resolve(start, len, base, m_start, carry);
    append_set_bits(taken_buf.data(), static_cast<std::int64_t>(taken_buf.size()), base_index, taken);
    return {pick >= 0 ? base_index + pick : -1, from_units(O[nch] - base)};
}

// round_chunked over an array q[0..len).
inline Leftover round_sequence(const double* q, std::int64_t len, std::int64_t base_index, Stream& rs,
                               std::vector<std::int64_t>& taken, std::int64_t max_crossings = -1) {
    return round_chunked(
        len, base_index, rs, taken,
        [q](std::int64_t i0, std::int64_t cnt, double* dst) { std::copy(q + i0, q + i0 + cnt, dst); }, max_crossings);
}

// Leftovers per group in the merge's levels (canonical.MERGE_GROUP).
constexpr std::int64_t kMergeGroup = 64;

// canonical.merge_leftovers: the leftovers (index, mass) in block order rounded into
// taken indices (appended) and one final leftover. Up to kMergeGroup leftovers are one
// round_sequence on kMergeStream; more are merged in levels, each rounded in groups of
// kMergeGroup, group g (counted across levels) on stream kMergeStream - 1 - g, the
// groups' leftovers with mass forming the next level.
// The last round pairs at most wanted - 1 crossings taken by the merge in all (`wanted`:
// the picks the merge owes); its final survivor is the last pick.
inline Leftover merge_leftovers(std::vector<std::int64_t> ids, std::vector<double> masses, std::uint64_t key,
                                std::int64_t wanted, std::vector<std::int64_t>& out) {
    std::uint64_t group = 0;
    std::vector<std::int64_t> local;
    const auto out0 = static_cast<std::int64_t>(out.size());
    auto round = [&](std::int64_t lo, std::int64_t cnt, std::uint64_t stream, std::int64_t max_crossings) {
        Stream rs(stream_state(key, stream));
        local.clear();
        const Leftover l = round_sequence(masses.data() + lo, cnt, 0, rs, local, max_crossings);
        for (std::int64_t i : local) out.push_back(ids[static_cast<size_t>(lo + i)]);
        return Leftover{l.index >= 0 ? ids[static_cast<size_t>(lo + l.index)] : -1, l.mass};
    };
    while (static_cast<std::int64_t>(ids.size()) > kMergeGroup) {
        std::vector<std::int64_t> next_ids;
        std::vector<double> next_mass;
        const auto total = static_cast<std::int64_t>(ids.size());
        for (std::int64_t lo = 0; lo < total; lo += kMergeGroup) {
            const Leftover l = round(lo, std::min(kMergeGroup, total - lo), kMergeStream - 1 - group++, -1);
            if (l.mass > 0) {
                next_ids.push_back(l.index);
                next_mass.push_back(l.mass);
            }
        }
        ids.swap(next_ids);
        masses.swap(next_mass);
    }
    const std::int64_t owed = wanted - (static_cast<std::int64_t>(out.size()) - out0);
    return round(0, static_cast<std::int64_t>(ids.size()), kMergeStream, std::max<std::int64_t>(0, owed - 1));
}

// The block phase of DepRound on items [0, n) whose global indices start at `offset`:
// block j is rounded on stream first_stream + j; each block's taken global indices
// (ascending) and its leftover are returned, in block order. A whole pool is one call with
// offset 0 and first_stream 0; a chunk of a distributed pool is one call per chunk.
struct BlockRuns {
    std::vector<std::vector<std::int64_t>> taken;
    std::vector<Leftover> left;
};

// Block `blk` of items [0, n) rounded on stream first_stream + blk: its taken global
// indices (ascending) appended to `taken`, its leftover returned.
//
// Items of probability 0 never cross, pair or get picked, and add no mass: the sequence of
// the others alone gives the same crossings, the same draws and the same picks. So a block
// whose items are mostly of probability 0 (a capped pool's, whose support is its top, a
// tenth of the pool at b = n / 10) is rounded over its other items, gathered first with
// their indices; the first kSub of a block decide (more than half of them positive: the
// block is rounded as it is). Only the time depends on the choice.
template <class FillFn>
Leftover round_block(std::int64_t n, std::int64_t blk, std::int64_t offset, std::uint64_t first_stream,
                     std::uint64_t key, std::vector<std::int64_t>& taken, FillFn& fill) {
    Stream rs(stream_state(key, first_stream + static_cast<std::uint64_t>(blk)));
    const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock), len = hi - lo;
    auto block_fill = [&](std::int64_t i0, std::int64_t cnt, double* dst) { fill(lo + i0, cnt, dst); };
    constexpr std::int64_t kSub = 256;
    thread_local std::vector<double> kept_q;
    thread_local std::vector<std::int64_t> kept_at;  // their local indices, ascending
    kept_q.resize(static_cast<std::size_t>(len) + 8);  // (room for a whole vector's store)
    kept_at.resize(static_cast<std::size_t>(len) + 8);
    std::int64_t kept = 0;
    alignas(64) double sub[kSub];
    for (std::int64_t s0 = 0; s0 < len; s0 += kSub) {
        const std::int64_t cnt = std::min(kSub, len - s0);
        block_fill(s0, cnt, sub);
        std::int64_t i = 0;
#if defined(__AVX512F__)
        // Branch-free: each eight probabilities' positive ones compressed, with their indices
        // (a branch per item mispredicted on a tenth of them and took half the time).
        for (; i + 8 <= cnt; i += 8) {
            const __m512d q = _mm512_load_pd(sub + i);
            const __mmask8 pos = _mm512_cmp_pd_mask(q, _mm512_setzero_pd(), _CMP_GT_OQ);
            _mm512_storeu_pd(kept_q.data() + kept, _mm512_maskz_compress_pd(pos, q));
            kept += simd::store_indices8(pos, s0 + i, kept_at.data() + kept);
        }
#endif
        for (; i < cnt; ++i) {  // branch-free too: written always, kept when positive
            kept_q[static_cast<std::size_t>(kept)] = sub[i];
            kept_at[static_cast<std::size_t>(kept)] = s0 + i;
            kept += sub[i] > 0;
        }
        if (s0 == 0 && 2 * kept > cnt)  // dense: round the block as it is
            return round_chunked(len, offset + lo, rs, taken, block_fill);
    }
    const std::size_t before = taken.size();
    Leftover left = round_sequence(kept_q.data(), kept, 0, rs, taken);
    for (std::size_t k = before; k < taken.size(); ++k) taken[k] = offset + lo + kept_at[static_cast<std::size_t>(taken[k])];
    if (left.index >= 0) left.index = offset + lo + kept_at[static_cast<std::size_t>(left.index)];
    return left;
}

template <class FillFn>
BlockRuns round_blocks(std::int64_t n, std::int64_t offset, std::uint64_t first_stream, std::uint64_t key,
                       int threads, FillFn&& fill) {
    const std::int64_t nb = num_blocks(n);
    BlockRuns out;
    out.taken.resize(static_cast<size_t>(nb));
    out.left.resize(static_cast<size_t>(nb));
    for_each_block(n, threads, [&](std::int64_t blk) {
        out.left[blk] = round_block(n, blk, offset, first_stream, key, out.taken[blk], fill);
    });
    return out;
}

// How many indices the blocks took.
inline std::int64_t taken_in_blocks(const BlockRuns& runs) {
    std::int64_t count = 0;
    for (const auto& t : runs.taken) count += static_cast<std::int64_t>(t.size());
    return count;
}

// An index vector whose elements are left uninitialised until written: the selection of a
// large budget (8 bytes a pick) is written once, by the threads that fill it, instead of
// being zeroed first on one thread.
using Indices = std::vector<std::int64_t, uninitialised_allocator<std::int64_t>>;

// The blocks' taken indices end to end (ascending) with the sorted `extra` indices merged
// in: one allocation of the final size, each run merged into its place in parallel (the
// extra indices up to a run's last one go with that run).
inline Indices concatenate(std::vector<std::vector<std::int64_t>>& runs, const std::vector<std::int64_t>& extra = {},
                           int threads = 1) {
    const std::size_t nr = runs.size();
    std::vector<std::size_t> extra_end(nr), at(nr);  // run k's extras end, and where run k goes
    std::size_t e = 0, total = 0;
    for (std::size_t k = 0; k < nr; ++k) {
        at[k] = total;
        const std::size_t e0 = e;
        if (!runs[k].empty())
            e = static_cast<std::size_t>(std::upper_bound(extra.begin() + static_cast<std::ptrdiff_t>(e), extra.end(),
                                                          runs[k].back()) - extra.begin());
        extra_end[k] = e;
        total += runs[k].size() + (e - e0);
    }
    Indices out(total + (extra.size() - e));
    parallel_for(static_cast<std::int64_t>(nr), threads, [&](std::int64_t k) {
        auto& t = runs[static_cast<std::size_t>(k)];
        const std::size_t e0 = k > 0 ? extra_end[static_cast<std::size_t>(k) - 1] : 0;
        std::merge(t.begin(), t.end(), extra.begin() + static_cast<std::ptrdiff_t>(e0),
                   extra.begin() + static_cast<std::ptrdiff_t>(extra_end[static_cast<std::size_t>(k)]),
                   out.begin() + static_cast<std::ptrdiff_t>(at[static_cast<std::size_t>(k)]));
        std::vector<std::int64_t>().swap(t);
    }, small_grain(static_cast<std::int64_t>(nr), threads));  // mostly empty runs where b << n
    std::copy(extra.begin() + static_cast<std::ptrdiff_t>(e), extra.end(), out.begin() + static_cast<std::ptrdiff_t>(total));
    return out;
}

// round_blocks with the taken indices end to end (rad.dask's per-chunk rounding).
struct BlockPhase {
    Indices taken;
    std::vector<Leftover> left;
};

template <class FillFn>
BlockPhase depround_blocks(std::int64_t n, std::int64_t offset, std::uint64_t first_stream, std::uint64_t key,
                           int threads, FillFn&& fill) {
    BlockRuns runs = round_blocks(n, offset, first_stream, key, threads, fill);
    return {concatenate(runs.taken, {}, threads), std::move(runs.left)};
}

// q(i) for i in [i0, i0 + count): the default fill of the block pass.
template <class QFn>
auto fill_from(QFn& q) {
    return [&q](std::int64_t i0, std::int64_t cnt, double* dst) {
        for (std::int64_t j = 0; j < cnt; ++j) dst[j] = q(i0 + j);
    };
}

// The end of DepRound: the blocks' taken indices (`in_blocks` of them) and the leftovers'
// picks, plus the final leftover `last` where one index is still missing
// (canonical.finish_in_place), sorted, as exactly b distinct indices.
inline Indices finish_depround(BlockRuns& runs, std::int64_t in_blocks, std::vector<std::int64_t> picks,
                               std::int64_t last, std::int64_t b, int threads) {
    if (in_blocks + static_cast<std::int64_t>(picks.size()) == b - 1 && last >= 0) picks.push_back(last);
    std::sort(picks.begin(), picks.end());
    Indices out = concatenate(runs.taken, picks, threads);
    bool distinct = std::adjacent_find(out.begin(), out.end()) == out.end();
    if (static_cast<std::int64_t>(out.size()) != b || !distinct)
        throw std::runtime_error("internal error: DepRound produced " + std::to_string(out.size()) +
                                 " indices for a budget of " + std::to_string(b));
    return out;
}

// Exactly b distinct indices (sorted) with the inclusion probabilities `fill` writes:
// blocks of kBlock items rounded independently on stream `block`, leftovers merged in
// block order.
template <class FillFn>
Indices depround(std::int64_t n, std::int64_t b, std::uint64_t key, int threads, FillFn&& fill) {
    BlockRuns runs = round_blocks(n, 0, 0, key, threads, fill);
    std::vector<std::int64_t> ids;
    std::vector<double> masses;
    for (const Leftover& l : runs.left)
        if (l.mass > 0) {
            ids.push_back(l.index);
            masses.push_back(l.mass);
        }
    const std::int64_t in_blocks = taken_in_blocks(runs);
    std::vector<std::int64_t> picks;  // from the leftovers: at most one per block
    const Leftover last = merge_leftovers(std::move(ids), std::move(masses), key, b - in_blocks, picks);
    return finish_depround(runs, in_blocks, std::move(picks), last.index, b, threads);
}

}  // namespace rad

// DepRound (paper Algorithm 2) by sequential pairing with skip-ahead (docs/design.md §1).
// Mirrors round_sequence (python/rad/_backends/canonical.py) and depround_q exactly.
//
// Within a block: items with q >= kCertain are taken, q <= 0 skipped; the running mass
// M of the others is the chunked prefix sum below (its exact bits are part of the
// contract). M crosses an integer at *crossing* items; between two crossings lies a
// *run*, whose members (the carried item and the run's items) collapse to one survivor
// picked with probability proportional to mass — inverse CDF: one uniform t aimed at
// k + t (a second only if the run's mass falls short). At the crossing item j the survivor
// (mass S) and j are paired exactly as in Algorithm 2: the survivor is taken with
// probability (1 - q_j) / ((1 - S) + (1 - q_j)). Crossings and picks are found by binary
// search on M, so the work per block is a few vectorisable passes plus O(b log B).
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "rad/parallel.hpp"
#include "rad/rng.hpp"

namespace rad {

// Only q == 1 is certain (taken without pairing): every other item moves M by less than
// 1 (its rounded sum by at most 1), so M crosses one integer at a time, and an item however
// close to 1 sheds its mass 1 - q into the pairing (canonical.CERTAIN).
constexpr double kCertain = 1.0;
// M is summed sequentially inside chunks of kChunk items, chunk totals sequentially:
// M_i = O_c + L_i, O_{c+1} = O_c + L_last(c). Short dependency chains; exact same bits
// in every backend.
constexpr std::int64_t kChunk = 8;

struct Leftover {
    std::int64_t index = -1;
    double mass = 0.0;
};

// Round q[0..len) (global index = base + local index); append taken global indices.
inline Leftover round_sequence(const double* q, std::int64_t len, std::int64_t base, Stream& rs,
                               std::vector<std::int64_t>& taken) {
    thread_local std::vector<double> mass_buf, cum_buf;
    thread_local std::vector<std::int32_t> npos_buf;
    mass_buf.resize(static_cast<size_t>(len));
    cum_buf.resize(static_cast<size_t>(len));
    npos_buf.resize(static_cast<size_t>(len) + 1);
    double* mass = mass_buf.data();
    double* cum = cum_buf.data();
    std::int32_t* npos = npos_buf.data();
    npos[0] = 0;
    for (std::int64_t i = 0; i < len; ++i) {
        const double p = q[i];
        const bool certain = p >= kCertain;
        if (certain) taken.push_back(base + i);
        mass[i] = (certain || !(p > 0.0)) ? 0.0 : p;
        npos[i + 1] = npos[i] + (mass[i] > 0.0);
    }
    double off = 0.0;
    for (std::int64_t c0 = 0; c0 < len; c0 += kChunk) {
        const std::int64_t c1 = std::min(len, c0 + kChunk);
        double local = 0.0;
        for (std::int64_t i = c0; i < c1; ++i) {
            local += mass[i];
            cum[i] = off + local;
        }
        off = off + local;
    }
    auto resolve = [&](std::int64_t s, std::int64_t e, double k, double m_start, std::int64_t carry) {
        if (npos[e] - npos[s] == 0) return carry;
        double target = k + rs.next();
        if (m_start > target) return carry;
        std::int64_t i = std::upper_bound(cum + s, cum + e, target) - cum;
        if (i < e) return i;
        const double total = cum[e - 1] - k;
        if (!(total > 0)) return carry;
        target = k + rs.next() * total;
        if (m_start > target) return carry;
        i = std::upper_bound(cum + s, cum + e, target) - cum;
        if (i < e) return i;
        for (i = e - 1; !(mass[i] > 0.0); --i) {
        }
        return i;
    };
    double k = 0.0, m_start = 0.0;
    std::int64_t start = 0, carry = -1;
    for (;;) {
        const std::int64_t j = std::lower_bound(cum + start, cum + len, k + 1.0) - cum;
        if (j >= len) break;
        const std::int64_t pick = resolve(start, j, k, m_start, carry);
        const double held = (j > 0 ? cum[j - 1] : 0.0) - k;
        const double alpha = 1.0 - held, beta = 1.0 - mass[j];
        if (pick < 0) {
            taken.push_back(base + j);
            carry = -1;
        } else if (rs.next() * (alpha + beta) < beta) {
            taken.push_back(base + pick);
            carry = j;
        } else {
            taken.push_back(base + j);
            carry = pick;
        }
        k += 1.0;
        m_start = cum[j];
        start = j + 1;
    }
    const std::int64_t pick = resolve(start, len, k, m_start, carry);
    return {pick >= 0 ? base + pick : -1, len ? cum[len - 1] - k : 0.0};
}

// round_sequence without its three block-length arrays: one streaming pass keeps only the
// chunk offsets O_c (and counts of positive items per chunk); a crossing, a pick or a mass
// is then found by binary search over the chunk ends O_{c+1} and a recomputation of the
// one chunk of kChunk items that holds it. The same M bits, the same decisions, the same
// draws as round_sequence (tests compare every backend with the NumPy definition), with
// 12 bytes of scratch per 8 items (96 KiB per block, in L2) and q read once per block.
//
// fill(i0, count, out) writes q of local items [i0, i0 + count) (vectorisable);
// at(i) returns q of local item i (for the few chunks looked up again).
template <class Fill, class At>
Leftover round_chunked(std::int64_t len, std::int64_t base, Stream& rs, std::vector<std::int64_t>& taken, Fill&& fill,
                       At&& at) {
    if (len == 0) return {};
    constexpr std::int64_t kSub = 256;  // items per fill call (a multiple of kChunk)
    const std::int64_t nch = (len + kChunk - 1) / kChunk;
    thread_local std::vector<double> off_buf;
    thread_local std::vector<std::int32_t> pos_buf;
    off_buf.resize(static_cast<size_t>(nch) + 1);
    pos_buf.resize(static_cast<size_t>(nch) + 1);
    double* O = off_buf.data();
    std::int32_t* P = pos_buf.data();
    O[0] = 0.0;
    P[0] = 0;
    double sub[kSub];
    for (std::int64_t s0 = 0; s0 < len; s0 += kSub) {
        const std::int64_t cnt = std::min(kSub, len - s0);
        fill(s0, cnt, sub);
        for (std::int64_t c0 = 0; c0 < cnt; c0 += kChunk) {
            const std::int64_t c1 = std::min(cnt, c0 + kChunk);
            double local = 0.0;
            std::int32_t pc = 0;
            for (std::int64_t i = c0; i < c1; ++i) {
                const double p = sub[i];
                const bool certain = p >= kCertain;
                if (certain) taken.push_back(base + s0 + i);
                const double ms = (certain || !(p > 0.0)) ? 0.0 : p;
                local += ms;
                pc += ms > 0.0;
            }
            const std::int64_t c = (s0 + c0) / kChunk;
            O[c + 1] = O[c] + local;
            P[c + 1] = P[c] + pc;
        }
    }
    // One chunk again: its masses and running sums (cum[i] = O_c + L_i).
    double cm[kChunk], cc[kChunk];
    std::int64_t loaded = -1, clen = 0;
    auto load = [&](std::int64_t c) {
        if (c == loaded) return;
        loaded = c;
        const std::int64_t lo = c * kChunk;
        clen = std::min(kChunk, len - lo);
        double local = 0.0;
        for (std::int64_t j = 0; j < clen; ++j) {
            const double p = at(lo + j);
            cm[j] = (p >= kCertain || !(p > 0.0)) ? 0.0 : p;
            local += cm[j];
            cc[j] = O[c] + local;
        }
    };
    auto cum = [&](std::int64_t i) {
        load(i / kChunk);
        return cc[i % kChunk];
    };
    auto mass = [&](std::int64_t i) {
        load(i / kChunk);
        return cm[i % kChunk];
    };
    // First i in [s, e) with cum[i] > x (strict) or >= x; e if none. cum is non-decreasing
    // and the last item of chunk c has cum = O_{c+1}.
    auto search = [&](std::int64_t s, std::int64_t e, double x, bool strict) -> std::int64_t {
        if (s >= e) return e;
        auto hit = [&](double v) { return strict ? v > x : v >= x; };
        const std::int64_t cs = s / kChunk;
        load(cs);
        for (std::int64_t i = s; i < std::min(e, (cs + 1) * kChunk); ++i)
            if (hit(cc[i - cs * kChunk])) return i;
        const std::int64_t ce = (e - 1) / kChunk;  // chunk of the last item
        if (ce <= cs) return e;
        // Smallest chunk c in (cs, ce] whose end O_{c+1} hits; chunk ce may end past e.
        std::int64_t lo = cs + 1, hi = ce + 1;
        while (lo < hi) {
            const std::int64_t mid = lo + (hi - lo) / 2;
            if (hit(O[mid + 1])) hi = mid;
            else lo = mid + 1;
        }
        if (lo > ce) return e;
        load(lo);
        for (std::int64_t i = lo * kChunk; i < std::min(e, lo * kChunk + clen); ++i)
            if (hit(cc[i - lo * kChunk])) return i;
        return e;
    };
    auto positives_before = [&](std::int64_t x) -> std::int64_t {
        const std::int64_t c = x / kChunk;
        std::int64_t r = P[c];
        if (x % kChunk) {
            load(c);
            for (std::int64_t j = 0; j < x - c * kChunk; ++j) r += cm[j] > 0.0;
        }
        return r;
    };
    auto last_positive = [&](std::int64_t e) -> std::int64_t {  // one exists before e
        std::int64_t i = e - 1;
        for (;;) {
            const std::int64_t c = i / kChunk;
            if (P[c + 1] - P[c] > 0) {
                load(c);
                for (; i >= c * kChunk; --i)
                    if (cm[i - c * kChunk] > 0.0) return i;
            }
            i = c * kChunk - 1;
        }
    };
    auto resolve = [&](std::int64_t s, std::int64_t e, double k, double m_start, std::int64_t carry) {
        if (positives_before(e) - positives_before(s) == 0) return carry;
        double target = k + rs.next();
        if (m_start > target) return carry;
        std::int64_t i = search(s, e, target, true);
        if (i < e) return i;
        const double total = cum(e - 1) - k;
        if (!(total > 0)) return carry;
        target = k + rs.next() * total;
        if (m_start > target) return carry;
        i = search(s, e, target, true);
        if (i < e) return i;
        return last_positive(e);
    };
    double k = 0.0, m_start = 0.0;
    std::int64_t start = 0, carry = -1;
    for (;;) {
        const std::int64_t j = search(start, len, k + 1.0, false);
        if (j >= len) break;
        const std::int64_t pick = resolve(start, j, k, m_start, carry);
        const double held = (j > 0 ? cum(j - 1) : 0.0) - k;
        const double alpha = 1.0 - held, beta = 1.0 - mass(j);
        if (pick < 0) {
            taken.push_back(base + j);
            carry = -1;
        } else if (rs.next() * (alpha + beta) < beta) {
            taken.push_back(base + pick);
            carry = j;
        } else {
            taken.push_back(base + j);
            carry = pick;
        }
        k += 1.0;
        m_start = cum(j);
        start = j + 1;
    }
    const std::int64_t pick = resolve(start, len, k, m_start, carry);
    return {pick >= 0 ? base + pick : -1, O[nch] - k};
}

// The block phase of DepRound on items [0, n) whose global indices start at `offset`:
// block j is rounded on stream first_stream + j; taken global indices and each block's
// leftover (in block order) are returned. A whole pool is one call with offset 0 and
// first_stream 0; a chunk of a distributed pool is one call per chunk.
struct BlockPhase {
    std::vector<std::int64_t> taken;
    std::vector<Leftover> left;
};

template <class QFn, class FillFn>
BlockPhase depround_blocks(std::int64_t n, std::int64_t offset, std::uint64_t first_stream, std::uint64_t key,
                           int threads, QFn&& q, FillFn&& fill) {
    const std::int64_t nb = num_blocks(n);
    std::vector<std::vector<std::int64_t>> taken(static_cast<size_t>(nb));
    BlockPhase out;
    out.left.resize(static_cast<size_t>(nb));
    for_each_block(n, threads, [&](std::int64_t blk) {
        Stream rs(stream_state(key, first_stream + static_cast<std::uint64_t>(blk)));
        const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
        out.left[blk] = round_chunked(
            hi - lo, offset + lo, rs, taken[blk],
            [&](std::int64_t i0, std::int64_t cnt, double* dst) { fill(lo + i0, cnt, dst); },
            [&](std::int64_t i) { return q(lo + i); });
    });
    std::size_t total = 0;
    for (auto& t : taken) total += t.size();
    out.taken.reserve(total);
    for (auto& t : taken) {
        out.taken.insert(out.taken.end(), t.begin(), t.end());
        std::vector<std::int64_t>().swap(t);
    }
    return out;
}

// q(i) for i in [i0, i0 + count): the default fill of the block pass.
template <class QFn>
auto fill_from(QFn& q) {
    return [&q](std::int64_t i0, std::int64_t cnt, double* dst) {
        for (std::int64_t j = 0; j < cnt; ++j) dst[j] = q(i0 + j);
    };
}

template <class QFn>
BlockPhase depround_blocks(std::int64_t n, std::int64_t offset, std::uint64_t first_stream, std::uint64_t key,
                           int threads, QFn&& q) {
    return depround_blocks(n, offset, first_stream, key, threads, q, fill_from(q));
}

// Exactly b distinct indices (sorted) with inclusion probabilities q(i): blocks of kBlock
// items rounded independently on stream `block`, leftovers merged in block order.
template <class QFn, class FillFn>
std::vector<std::int64_t> depround(std::int64_t n, std::int64_t b, std::uint64_t key, int threads, QFn&& q,
                                   FillFn&& fill) {
    BlockPhase phase = depround_blocks(n, 0, 0, key, threads, q, fill);
    std::vector<std::int64_t> ids;
    std::vector<double> masses;
    for (const Leftover& l : phase.left)
        if (l.mass > 0) {
            ids.push_back(l.index);
            masses.push_back(l.mass);
        }
    std::vector<std::int64_t> out = std::move(phase.taken);
    Stream ms(stream_state(key, kMergeStream));
    std::vector<std::int64_t> merged;
    const Leftover last = round_sequence(masses.data(), static_cast<std::int64_t>(masses.size()), 0, ms, merged);
    for (std::int64_t i : merged) out.push_back(ids[i]);
    if (static_cast<std::int64_t>(out.size()) == b - 1 && last.index >= 0) out.push_back(ids[last.index]);
    std::sort(out.begin(), out.end());
    bool distinct = std::adjacent_find(out.begin(), out.end()) == out.end();
    if (static_cast<std::int64_t>(out.size()) != b || !distinct)
        throw std::runtime_error("internal error: DepRound produced " + std::to_string(out.size()) +
                                 " indices for a budget of " + std::to_string(b));
    return out;
}

template <class QFn>
std::vector<std::int64_t> depround(std::int64_t n, std::int64_t b, std::uint64_t key, int threads, QFn&& q) {
    return depround(n, b, key, threads, q, fill_from(q));
}

}  // namespace rad

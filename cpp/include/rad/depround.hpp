// DepRound (paper Algorithm 2) by sequential pairing with skip-ahead (DESIGN §1).
// Mirrors _round_sequence / depround_q in python/rad/_numpy_backend.py exactly.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "rad/parallel.hpp"
#include "rad/rng.hpp"

namespace rad {

struct Leftover {
    std::int64_t index = -1;
    double mass = 0.0;
};

// Round q(lo..hi) sequentially. Items with q >= 1 are taken, q <= 0 skipped. Between two
// integer crossings of the running sum M lies a run; its members (the carried item and
// the run's items) collapse to one survivor picked by inverse CDF: one uniform t aimed
// at k + t, a second only if the run's mass falls short. At the crossing item j the
// survivor (mass S) and j are paired as in Algorithm 2.
template <class QFn>
Leftover round_sequence(std::int64_t lo, std::int64_t hi, QFn&& q, Stream& rs, std::vector<std::int64_t>& taken) {
    double M = 0.0, k = 0.0, m_start = 0.0, target = 0.0;
    std::int64_t carry = -1, pick = -1, run_start = lo;
    bool drawn = false, found = false;
    auto resolve = [&](std::int64_t end) -> std::int64_t {
        if (!drawn) return carry;
        if (found) return pick;
        const double total = M - k;
        if (!(total > 0)) return carry;
        const double t2 = k + rs.next() * total;
        if (m_start > t2) return carry;
        double c = m_start;
        std::int64_t last = -1;
        for (std::int64_t i = run_start; i < end; ++i) {
            const double p = q(i);
            if (p >= 1.0 || !(p > 0.0)) continue;
            c += p;
            last = i;
            if (c > t2) return i;
        }
        return last;
    };
    for (std::int64_t i = lo; i < hi; ++i) {
        const double p = q(i);
        if (p >= 1.0) {
            taken.push_back(i);
            continue;
        }
        // Zero-probability items fall through without a branch of their own: they add
        // nothing to M, cannot cross, and never become the pick (M does not grow).
        const double Mn = M + p;
        if (Mn >= k + 1.0) {
            const std::int64_t survivor = resolve(i);
            const double alpha = 1.0 - (M - k), beta = 1.0 - p;
            if (survivor < 0) {
                taken.push_back(i);
                carry = -1;
            } else if (rs.next() * (alpha + beta) < beta) {
                taken.push_back(survivor);
                carry = i;
            } else {
                taken.push_back(i);
                carry = survivor;
            }
            k += 1.0;
            M = Mn;
            m_start = M;
            run_start = i + 1;
            drawn = found = false;
        } else {
            if (!drawn) {
                if (!(p > 0.0)) continue;
                target = k + rs.next();
                drawn = true;
                if (m_start > target) {
                    pick = carry;
                    found = true;
                }
            }
            M = Mn;
            if (!found && M > target) {
                pick = i;
                found = true;
            }
        }
    }
    return {resolve(hi), M - k};
}

// Exactly b distinct indices (sorted) with inclusion probabilities q(i): blocks of kBlock
// items rounded independently on stream `block`, leftovers merged in block order.
template <class QFn>
std::vector<std::int64_t> depround(std::int64_t n, std::int64_t b, std::uint64_t key, int threads, QFn&& q) {
    const std::int64_t nb = num_blocks(n);
    std::vector<std::vector<std::int64_t>> taken(static_cast<size_t>(nb));
    std::vector<Leftover> left(static_cast<size_t>(nb));
    for_each_block(n, threads, [&](std::int64_t blk) {
        Stream rs(stream_state(key, static_cast<std::uint64_t>(blk)));
        const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
        // Probabilities of the block first (a vectorisable loop), then the sequential pass.
        thread_local std::vector<double> buf;
        buf.resize(static_cast<size_t>(hi - lo));
        double* bp = buf.data();
        for (std::int64_t i = lo; i < hi; ++i) bp[i - lo] = q(i);
        left[blk] = round_sequence(lo, hi, [bp, lo](std::int64_t i) { return bp[i - lo]; }, rs, taken[blk]);
    });
    std::vector<std::int64_t> ids;
    std::vector<double> masses;
    std::size_t total = 0;
    for (std::int64_t blk = 0; blk < nb; ++blk) {
        total += taken[blk].size();
        if (left[blk].mass > 0) {
            ids.push_back(left[blk].index);
            masses.push_back(left[blk].mass);
        }
    }
    std::vector<std::int64_t> out;
    out.reserve(total + ids.size());
    for (auto& t : taken) {
        out.insert(out.end(), t.begin(), t.end());
        std::vector<std::int64_t>().swap(t);
    }
    Stream ms(stream_state(key, kMergeStream));
    std::vector<std::int64_t> merged;
    const Leftover last = round_sequence(
        0, static_cast<std::int64_t>(masses.size()), [&](std::int64_t i) { return masses[i]; }, ms, merged);
    for (std::int64_t i : merged) out.push_back(ids[i]);
    if (static_cast<std::int64_t>(out.size()) == b - 1 && last.index >= 0) out.push_back(ids[last.index]);
    std::sort(out.begin(), out.end());
    bool distinct = std::adjacent_find(out.begin(), out.end()) == out.end();
    if (static_cast<std::int64_t>(out.size()) != b || !distinct)
        throw std::runtime_error("internal error: DepRound produced " + std::to_string(out.size()) +
                                 " indices for a budget of " + std::to_string(b));
    return out;
}

}  // namespace rad

// One evaluation of the dual function F(nu) of the batch game on pre-sorted arrays
// (the capped path of python/rad/_solve/capped.py; capped_eval — mirrored operation by
// operation, with the canonical blocked prefix sums of parallel.hpp, so the iterates of
// the outer search are the same bits on every backend).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "rad/parallel.hpp"

namespace rad {

struct CappedEval {
    double value, slope;
    bool fill_loss;
    double cut, resid, group_total;
};

// Block totals/offsets of K non-negative terms, with inclusive prefixes on demand.
template <int K, class Term>
struct Prefixes {
    const Term& term;
    std::int64_t n;
    CanonicalSums<K, Term> sums;
    Prefixes(const Term& t, std::int64_t n_, int threads) : term(t), n(n_), sums(n_, threads, t) {}

    // Inclusive canonical prefixes of every term at position i (i >= 0).
    void at(std::int64_t i, double* out) const {
        const std::int64_t blk = i / kBlock;
        double acc[K] = {}, t[K];
        for (std::int64_t p = blk * kBlock; p <= i; ++p) {
            term(p, t);
            for (int k = 0; k < K; ++k) acc[k] += t[k];
        }
        for (int k = 0; k < K; ++k) out[k] = acc[k] + sums.offsets[blk * K + k];
    }
    // Exclusive prefixes (all zero at 0).
    void excl(std::int64_t i, double* out) const {
        if (i == 0) {
            for (int k = 0; k < K; ++k) out[k] = 0.0;
            return;
        }
        at(i - 1, out);
    }
    double total(int k) const { return sums.grand[k]; }
    // Sum of term k over [s, e), summed directly (never a difference of prefixes):
    // sequential to the end of s's block, whole blocks' totals, then sequential over the
    // last block's part, added in that order (mirrors _range_sum in numpy_backend.py).
    double range(int k, std::int64_t s, std::int64_t e) const {
        if (e <= s) return 0.0;
        const std::int64_t bs = s / kBlock, be = (e - 1) / kBlock;
        double t[K];
        double acc = 0.0;
        const std::int64_t first_hi = bs == be ? e : (bs + 1) * kBlock;
        for (std::int64_t p = s; p < first_hi; ++p) {
            term(p, t);
            acc += t[k];
        }
        if (bs == be) return acc;
        for (std::int64_t b2 = bs + 1; b2 < be; ++b2) acc += sums.totals[b2 * K + k];
        double tail = 0.0;
        for (std::int64_t p = be * kBlock; p < e; ++p) {
            term(p, t);
            tail += t[k];
        }
        return acc + tail;
    }
    // First position whose inclusive prefix of term 0 is >= target, or n.
    std::int64_t first_reaching(double target) const {
        const std::int64_t nb = num_blocks(n);
        for (std::int64_t blk = 0; blk < nb; ++blk) {
            if (!(sums.offsets[blk * K] + sums.totals[blk * K] >= target)) continue;
            double acc = 0.0, t[K];
            const std::int64_t hi = std::min(n, (blk + 1) * kBlock);
            for (std::int64_t p = blk * kBlock; p < hi; ++p) {
                term(p, t);
                acc += t[0];
                if (acc + sums.offsets[blk * K] >= target) return p;
            }
        }
        return n;
    }
};

inline CappedEval capped_eval(const double* g_g, const double* a_g, const std::int64_t* ends_g, std::int64_t n_ends_g,
                              const double* l_l, const double* a_l, const std::int64_t* ends_l, std::int64_t n_ends_l,
                              std::int64_t n, double nu, double b, double m, int threads) {
    // g-order terms: cap, g*cap, [a>nu] g/a, [a>nu] 1/a
    auto tg = [&](std::int64_t i, double* t) {
        const double a = a_g[i];
        const double cap = (a <= nu) ? 1.0 : nu / a;
        const bool above = a > nu;
        t[0] = cap;
        t[1] = g_g[i] * cap;
        t[2] = above ? g_g[i] / a : 0.0;
        t[3] = above ? 1.0 / a : 0.0;
    };
    Prefixes<4, decltype(tg)> pg(tg, n, threads);
    double e[4];
    if (pg.total(0) >= b) {
        const std::int64_t i = pg.first_reaching(b);
        const std::int64_t j = std::upper_bound(ends_g, ends_g + n_ends_g, i) - ends_g;
        const std::int64_t start = j > 0 ? ends_g[j - 1] : 0;
        pg.excl(start, e);
        const double before = e[0];
        const double cut = g_g[start];
        const double resid = b - before;
        CappedEval r;
        r.value = e[1] + cut * resid - m * nu;
        r.slope = (e[2] - cut * e[3]) - m;
        r.fill_loss = false;
        r.cut = cut;
        r.resid = resid;
        r.group_total = pg.range(0, start, ends_g[j]);
        return r;
    }
    // l-order terms: room = 1 - cap, l*room, [a>nu] l/a, [a>nu] 1/a, cap
    auto tl = [&](std::int64_t i, double* t) {
        const double a = a_l[i];
        const double cap = (a <= nu) ? 1.0 : nu / a;
        const bool above = a > nu;
        const double room = 1.0 - cap;
        t[0] = room;
        t[1] = l_l[i] * room;
        t[2] = above ? l_l[i] / a : 0.0;
        t[3] = above ? 1.0 / a : 0.0;
        t[4] = cap;
    };
    Prefixes<5, decltype(tl)> pl(tl, n, threads);
    const double rest = b - pg.total(0);
    const std::int64_t i = pl.first_reaching(rest);
    std::int64_t t = std::upper_bound(ends_l, ends_l + n_ends_l, i) - ends_l;
    t = std::min(t, n_ends_l - 1);
    // The boundary group is decided from the caps after a position (the rooms of [0, end)
    // hold the rest iff end + sum_{p >= end} cap_p >= b), summed directly: b - sum cap -
    // sum room carries the rounding of b onto a point whose loss can dwarf the value.
    auto covered = [&](std::int64_t end) { return end >= b || pl.range(4, end, n) >= b - end; };
    while (t > 0 && covered(ends_l[t - 1])) --t;
    while (t < n_ends_l - 1 && !covered(ends_l[t])) ++t;
    const std::int64_t start = t > 0 ? ends_l[t - 1] : 0;
    double el[5];
    pl.excl(start, el);
    const double cut = l_l[start];
    const double resid = (b - static_cast<double>(start)) - pl.range(4, start, n);
    CappedEval r;
    r.value = pg.total(1) - el[1] - cut * resid - m * nu;
    // cut * (sum of 1/a from the boundary on, in loss order), summed directly: as a
    // difference of two totals it cancels when a tiny a earlier in the order dominates.
    r.slope = pg.total(2) + cut * pl.range(3, start, n) + el[2] - m;
    r.fill_loss = true;
    r.cut = cut;
    r.resid = resid;
    r.group_total = pl.range(0, start, ends_l[t]);
    return r;
}

// Per-span sequential totals of 1/a, g/a and g over the sorted gains (a = g + w g; a term
// of 1/a and g/a only where a > 0): the block offsets of the RAD capped path's O(log n)
// evaluations (python/rad/_solve/capped_rad.py; span_sums in numpy_backend.py). Three rows
// of n_spans, row-major; span divides kBlock, so each block's spans go to one thread.
// Four whole spans run side by side in the lanes of a vector (each lane still adds its own
// span's terms in order: the same bits as one span at a time), so the divisions vectorise.
template <class T>
std::vector<double> span_sums(const T* g, std::int64_t n, double w, std::int64_t span, int threads) {
    using simd::d4;
    using simd::l4;
    const std::int64_t ns = (n + span - 1) / span, per = kBlock / span;
    std::vector<double> out(static_cast<size_t>(3 * ns), 0.0);
    auto one_span = [&](std::int64_t s) {
        double inv = 0.0, ga = 0.0, gs = 0.0;
        for (std::int64_t i = s * span, e = std::min(n, (s + 1) * span); i < e; ++i) {
            const double x = static_cast<double>(g[i]);
            const double a = w * x + x;
            if (a > 0) {
                inv += 1.0 / a;
                ga += x / a;
            }
            gs += x;
        }
        out[s] = inv;
        out[ns + s] = ga;
        out[2 * ns + s] = gs;
    };
    const d4 zero = simd::splat(0.0), one = simd::splat(1.0), wv = simd::splat(w);
    for_each_block(n, threads, [&](std::int64_t blk) {
        const std::int64_t s_end = std::min(ns, (blk + 1) * per);
        std::int64_t s = blk * per;
        for (; s + 4 <= s_end && (s + 4) * span <= n; s += 4) {  // four whole spans
            d4 inv = zero, ga = zero, gs = zero;
            const T* p = g + s * span;
            for (std::int64_t i = 0; i < span; ++i) {
                const d4 x = {static_cast<double>(p[i]), static_cast<double>(p[span + i]),
                              static_cast<double>(p[2 * span + i]), static_cast<double>(p[3 * span + i])};
                const d4 a = wv * x + x;
                const l4 pos = a > zero;
                const d4 safe = simd::select(pos, a, one);
                inv += simd::select(pos, one / safe, zero);  // + 0.0 where a <= 0: the sum unchanged
                ga += simd::select(pos, x / safe, zero);
                gs += x;
            }
            for (int j = 0; j < 4; ++j) {
                out[s + j] = inv[j];
                out[ns + s + j] = ga[j];
                out[2 * ns + s + j] = gs[j];
            }
        }
        for (; s < s_end; ++s) one_span(s);
    });
    return out;
}

// The least T at or above t: for a value x of type T, x >= t exactly when x >= at_least<T>(t).
template <class T>
T at_least(double t) {
    T c = static_cast<T>(t);
    if (static_cast<double>(c) < t) c = std::nextafter(c, std::numeric_limits<T>::infinity());
    return c;
}

#if defined(__AVX512F__)
// One 512-bit vector of T for gather_at_least: its lanes, load, >= compare and the
// compress-and-store of a part (the compressed lanes written under a prefix mask).
template <class T>
struct Lanes512;
template <>
struct Lanes512<float> {
    using V = __m512;
    using M = __mmask16;
    static constexpr int kCount = 16;
    static V splat(float c) { return _mm512_set1_ps(c); }
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static M at_least(V v, V c) { return _mm512_cmp_ps_mask(v, c, _CMP_GE_OQ); }
    static void store_part(float* dst, M m, int count, V v) {
        _mm512_mask_storeu_ps(dst, static_cast<M>((1u << count) - 1), _mm512_maskz_compress_ps(m, v));
    }
};
template <>
struct Lanes512<double> {
    using V = __m512d;
    using M = __mmask8;
    static constexpr int kCount = 8;
    static V splat(double c) { return _mm512_set1_pd(c); }
    static V load(const double* p) { return _mm512_loadu_pd(p); }
    static M at_least(V v, V c) { return _mm512_cmp_pd_mask(v, c, _CMP_GE_OQ); }
    static void store_part(double* dst, M m, int count, V v) {
        _mm512_mask_storeu_pd(dst, static_cast<M>((1u << count) - 1), _mm512_maskz_compress_pd(m, v));
    }
};
#endif

// How many of x[lo, hi) are >= c_hi and how many lie in [c, c_hi) (c <= c_hi), and (with
// dst_hi, dst_lo) those values written to dst_hi and dst_lo in order; without kTwo, c_hi is
// c and no value goes to dst_lo. AVX-512: sixteen floats (eight doubles) per compare, each
// part compressed in a register and written by a masked store. (A part that stays empty
// must not be stored to even under an empty mask: every block's empty part would begin at
// the same address, and the blocks' threads would contend for that cache line.)
template <class T, bool kTwo>
std::pair<std::int64_t, std::int64_t> gather_at_least(const T* x, std::int64_t lo, std::int64_t hi, T c, T c_hi,
                                                      T* dst_hi, T* dst_lo) {
    std::int64_t kh = 0, kl = 0, i = lo;
#if defined(__AVX512F__)
    using L = Lanes512<T>;
    const typename L::V cv = L::splat(c), hv = L::splat(c_hi);
    auto one = [&](typename L::V v) {
        const typename L::M mh = L::at_least(v, hv);
        const int nh = __builtin_popcount(mh);
        if (dst_hi) L::store_part(dst_hi + kh, mh, nh, v);
        kh += nh;
        if constexpr (kTwo) {
            const auto ml = static_cast<typename L::M>(L::at_least(v, cv) & ~mh);
            const int nl = __builtin_popcount(ml);
            if (dst_lo) L::store_part(dst_lo + kl, ml, nl, v);
            kl += nl;
        }
    };
    // Runs of four vectors, each loaded during the run before it: the stores' addresses
    // depend on the values loaded (through kh, kl), and loads issued after such a store
    // wait for it (as in approx_pass_range). The last run's look-ahead reloads itself.
    constexpr std::int64_t kRun = 4 * L::kCount;
    if (i + kRun <= hi) {
        const std::int64_t last_run = hi - kRun;
        typename L::V run[4];
        for (int q = 0; q < 4; ++q) run[q] = L::load(x + i + q * L::kCount);
        for (; i + kRun <= hi; i += kRun) {
            prefetch_lines(x + i, kRun * static_cast<std::int64_t>(sizeof(T)));
            const T* next = x + std::min(i + kRun, last_run);
            for (int q = 0; q < 4; ++q) {
                const typename L::V v = run[q];
                run[q] = L::load(next + q * L::kCount);
                one(v);
            }
        }
    }
    for (; i + L::kCount <= hi; i += L::kCount) one(L::load(x + i));
#elif defined(__AVX2__)
    if constexpr (std::is_same_v<T, float>) {
        // Eight floats per compare, each part left-packed (simd::left_pack8) and written by
        // a masked store of its lanes only (the next block's values may follow them); an
        // empty part is not stored to at all.
        const __m256 cv = _mm256_set1_ps(c), hv = _mm256_set1_ps(c_hi);
        auto part = [&](T* dst, unsigned mask, __m256 v) {
            const int count = __builtin_popcount(mask);
            if (dst && count) {
                const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                _mm256_maskstore_ps(dst, keep, _mm256_castsi256_ps(simd::left_pack8(_mm256_castps_si256(v), mask)));
            }
            return count;
        };
        for (; i + 8 <= hi; i += 8) {
            if (((i - lo) & 63) == 0) prefetch_lines(x + i, 64 * static_cast<std::int64_t>(sizeof(T)));
            const __m256 v = _mm256_loadu_ps(x + i);
            const __m256 ge_hi = _mm256_cmp_ps(v, hv, _CMP_GE_OQ);
            kh += part(dst_hi ? dst_hi + kh : nullptr, static_cast<unsigned>(_mm256_movemask_ps(ge_hi)), v);
            if constexpr (kTwo) {
                const __m256 ge = _mm256_andnot_ps(ge_hi, _mm256_cmp_ps(v, cv, _CMP_GE_OQ));
                kl += part(dst_lo ? dst_lo + kl : nullptr, static_cast<unsigned>(_mm256_movemask_ps(ge)), v);
            }
        }
    }
#endif
    for (; i < hi; ++i) {
        const T v = x[i];
        if (v >= c_hi) {
            if (dst_hi) dst_hi[kh] = v;
            ++kh;
        } else if (kTwo && v >= c) {
            if (dst_lo) dst_lo[kl] = v;
            ++kl;
        }
    }
    return {kh, kl};
}

// The top's values: every element is written by the gather or the cut (no zeroing first).
template <class T>
using TopValues = std::vector<T, uninitialised_allocator<T>>;

// The values >= t (the capped path's top of the pool, sorted afterwards in
// python/rad/_solve/capped_rad.py): those >= max(t, split) first, then the rest, each part
// in index order, and the first part's size (each part is sorted on its own thread).
// Each block counts its values, then writes them at its offsets.
template <class T>
std::pair<TopValues<T>, std::int64_t> values_at_least(const T* g, std::int64_t n, double t, double split,
                                                        int threads) {
    const T c = at_least<T>(t), c_split = at_least<T>(split);
    // One part (the second when split is above every value of T) or two.
    const bool two = c_split > c && c_split < std::numeric_limits<T>::infinity();
    const T c_hi = two ? c_split : c;
    const std::int64_t nb = num_blocks(n);
    std::vector<std::int64_t> off_hi(static_cast<size_t>(nb) + 1, 0), off_lo(static_cast<size_t>(nb) + 1, 0);
    auto gather = [&](std::int64_t blk, T* dst_hi, T* dst_lo) {
        const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
        return two ? gather_at_least<T, true>(g, lo, hi, c, c_hi, dst_hi, dst_lo)
                   : gather_at_least<T, false>(g, lo, hi, c, c_hi, dst_hi, dst_lo);
    };
    for_each_block(n, threads, [&](std::int64_t blk) {
        const auto counts = gather(blk, nullptr, nullptr);
        off_hi[static_cast<size_t>(blk) + 1] = counts.first;
        off_lo[static_cast<size_t>(blk) + 1] = counts.second;
    });
    for (std::int64_t blk = 0; blk < nb; ++blk) off_hi[blk + 1] += off_hi[blk];
    off_lo[0] = off_hi[nb];
    for (std::int64_t blk = 0; blk < nb; ++blk) off_lo[blk + 1] += off_lo[blk];
    TopValues<T> out(static_cast<size_t>(off_lo[nb]));
    for_each_block(n, threads, [&](std::int64_t blk) { gather(blk, out.data() + off_hi[blk], out.data() + off_lo[blk]); });
    // Without a split every value is in the one part gathered as "hi": it is the second part.
    return {std::move(out), two || c_split <= c ? off_hi[nb] : 0};
}

// The values >= t in parts by the `splits`: part j holds the values v with
// #{i : v < splits[i]} == j (with descending splits, the values in [splits[j], splits[j-1])),
// each part in index order; and the parts' ends. The capped path's top cut into one part a
// thread for the sorts (docs/design.md §1, "The top of the pool"). As values_at_least, two
// passes (count, write); each block's values >= t are gathered a chunk at a time into the
// thread's own buffer, their parts formed there, then counted or written to their places.
template <class T>
std::pair<TopValues<T>, std::vector<std::int64_t>> values_at_least_in_parts(const T* g, std::int64_t n, double t,
                                                                           const std::vector<double>& splits,
                                                                           int threads) {
    const T c = at_least<T>(t);
    const size_t parts = splits.size() + 1;
    std::vector<T> cuts(splits.size());
    for (size_t i = 0; i < splits.size(); ++i) cuts[i] = at_least<T>(splits[i]);  // v < cut exactly when v < split
    const std::int64_t nb = num_blocks(n);
    constexpr std::int64_t kChunk = 4096;
    // body(values, their parts, count) for each chunk of block blk's values >= c
    auto each_chunk = [&](std::int64_t blk, auto&& body) {
        T vals[kChunk];
        std::uint32_t id[kChunk];
        for (std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock); lo < hi; lo += kChunk) {
            const std::int64_t len = gather_at_least<T, false>(g, lo, std::min(hi, lo + kChunk), c, c, vals, nullptr).first;
            // a part is a count of compares (the cuts' order does not matter): one cut for
            // the whole chunk at a time, so the loops vectorise
            for (std::int64_t i = 0; i < len; ++i) id[i] = 0;
            for (const T cut : cuts)
                for (std::int64_t i = 0; i < len; ++i) id[i] += vals[i] < cut ? 1u : 0u;
            body(vals, id, len);
        }
    };
    // offsets[j * nb + blk]: block blk's count of part j, then where those values go
    // (part-major, then block: each part in index order)
    std::vector<std::int64_t> offsets(parts * static_cast<size_t>(nb), 0);
    auto at = [&](size_t j, std::int64_t blk) -> std::int64_t& { return offsets[j * static_cast<size_t>(nb) + static_cast<size_t>(blk)]; };
    for_each_block(n, threads, [&](std::int64_t blk) {
        std::vector<std::int64_t> count(parts, 0);  // (the blocks' counts of a part share cache lines)
        each_chunk(blk, [&](const T*, const std::uint32_t* id, std::int64_t len) {
            for (std::int64_t i = 0; i < len; ++i) ++count[id[i]];
        });
        for (size_t j = 0; j < parts; ++j) at(j, blk) = count[j];
    });
    std::vector<std::int64_t> ends(parts);
    std::int64_t run = 0;
    for (size_t j = 0; j < parts; ++j) {
        for (std::int64_t blk = 0; blk < nb; ++blk) run += std::exchange(at(j, blk), run);
        ends[j] = run;
    }
    TopValues<T> out(static_cast<size_t>(run));
    for_each_block(n, threads, [&](std::int64_t blk) {
        std::vector<std::int64_t> pos(parts);
        for (size_t j = 0; j < parts; ++j) pos[j] = at(j, blk);
        each_chunk(blk, [&](const T* vals, const std::uint32_t* id, std::int64_t len) {
            for (std::int64_t i = 0; i < len; ++i) out[static_cast<size_t>(pos[id[i]]++)] = vals[i];
        });
    });
    return {std::move(out), std::move(ends)};
}

}  // namespace rad

// The O(n) kernels over the support (policy lives in python/rad/_solve/batch.py).
// Every floating-point expression mirrors python/rad/_backends/numpy_backend.py operation by
// operation (the build disables FMA contraction), so all backends agree bit for bit.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>
#include <vector>

#include "rad/parallel.hpp"
#include "rad/reciprocal.hpp"

namespace rad {

// Where the losses come from: an explicit array, or w * gain (RAD losses).
struct Losses {
    const double* values = nullptr;
    double w = 0.0;
    double at(std::int64_t i, double g) const { return values ? values[i] : w * g; }
};

// The five scalars of a solution (python/rad/_backends/params.py, Params).
struct Params {
    bool fill_loss = false;
    double nu = 0.0;
    double gain_cut = std::numeric_limits<double>::infinity();
    double gain_frac = 0.0;
    double loss_cut = std::numeric_limits<double>::infinity();
    double loss_frac = 0.0;
};

// Inclusion probability of one point (the rule documented in rad._backends.params).
inline double probability(double g, double l, const Params& p) {
    const double a = g + l;
    const double cap = (a <= p.nu) ? 1.0 : p.nu / a;
    if (!p.fill_loss) {
        if (g > p.gain_cut) return cap;
        if (g == p.gain_cut) return p.gain_frac * cap;
        return 0.0;
    }
    if (l < p.loss_cut) return 1.0;
    if (l == p.loss_cut) return cap + p.loss_frac * (1.0 - cap);
    return cap;
}

// probability() for items [i0, i0 + count) into out, branch-free so that it vectorises:
// the same operations on the same operands (the division is evaluated for every item and
// selected away where the cap is 1), hence the same bits.
template <class T>
void probability_fill(const T* g, Losses L, const Params& p, std::int64_t i0, std::int64_t count, double* out) {
    const double nu = p.nu, gc = p.gain_cut, gf = p.gain_frac, lc = p.loss_cut, lf = p.loss_frac;
    prefetch_lines(g + i0, count * static_cast<std::int64_t>(sizeof(T)));  // callers stream forward
    if (L.values) prefetch_lines(L.values + i0, count * static_cast<std::int64_t>(sizeof(double)));
    auto run = [&](auto has_losses) {
        if (!p.fill_loss) {
            std::int64_t j = 0;
            {
                // The loop below, eight items per step as one vector.
                using namespace simd;
                const d8 nuv = splat8(nu), gcv = splat8(gc), gfv = splat8(gf), one = splat8(1.0), zero = splat8(0.0),
                         w = splat8(L.w);
                for (; j + 8 <= count; j += 8) {
                    const d8 gi = load8(g + i0 + j);
                    const d8 l = decltype(has_losses)::value ? load8(L.values + i0 + j) : w * gi;
                    const d8 a = gi + l;
                    const d8 d = nuv / a;
                    const d8 cap = select(a <= nuv, one, d);
                    const d8 part = gfv * cap;
                    const d8 v = select(gi > gcv, cap, select(gi == gcv, part, zero));
                    store(out + j, v);
                }
            }
            for (; j < count; ++j) {
                const double gi = g[i0 + j];
                const double l = decltype(has_losses)::value ? L.values[i0 + j] : L.w * gi;
                const double a = gi + l;
                const double d = nu / a;
                const double cap = (a <= nu) ? 1.0 : d;
                const double part = gf * cap;
                out[j] = gi > gc ? cap : (gi == gc ? part : 0.0);
            }
        } else {
            for (std::int64_t j = 0; j < count; ++j) {
                const double gi = g[i0 + j];
                const double l = decltype(has_losses)::value ? L.values[i0 + j] : L.w * gi;
                const double a = gi + l;
                const double d = nu / a;
                const double cap = (a <= nu) ? 1.0 : d;
                const double with_loss = cap + lf * (1.0 - cap);
                out[j] = l < lc ? 1.0 : (l == lc ? with_loss : cap);
            }
        }
    };
    if (L.values) run(std::true_type{});
    else run(std::false_type{});
}

// A valid gain (or q): finite and not negative (-0.0 passes, NaN fails).
template <class T>
inline bool valid_value(T v) {
    return v >= T(0) && v <= std::numeric_limits<T>::max();
}

// Index of the first NaN, infinite or negative value, or -1.
template <class T>
std::int64_t first_invalid(const T* x, std::int64_t n, int threads) {
    const std::int64_t nb = num_blocks(n);
    std::vector<std::int64_t> first(static_cast<size_t>(nb), -1);
    for_each_block(n, threads, [&](std::int64_t blk) {
        const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
        // valid_value with a non-short-circuit & and one flag per run: the check vectorises
        // (&& did not: 2 ns a value).
        constexpr std::int64_t kRun = 64;
        bool ok = true;
        std::int64_t i = lo;
        for (; ok && i + kRun <= hi; i += kRun) {
            prefetch_lines(x + i, kRun * static_cast<std::int64_t>(sizeof(T)));
            int run_ok = 1;
            for (std::int64_t j = i; j < i + kRun; ++j)
                run_ok &= static_cast<int>(x[j] >= T(0)) & static_cast<int>(x[j] <= std::numeric_limits<T>::max());
            ok = run_ok != 0;
        }
        for (; ok && i < hi; ++i) ok = valid_value(x[i]);
        if (ok) return;
        for (std::int64_t i = lo; i < hi; ++i)
            if (!valid_value(x[i])) {
                first[blk] = i;
                return;
            }
    });
    for (std::int64_t f : first)
        if (f >= 0) return f;
    return -1;
}

struct ScanResult {
    std::int64_t kstar;
    double g_total;
};

// Theorem 1's k* in descending-gain order `perm`: a tie group starting at position p
// joins iff g_p * H_p >= G_p - m (exclusive canonical prefix sums of 1/a and g/a).
template <class T>
ScanResult theorem1_scan(const T* g, Losses L, const std::int64_t* perm, std::int64_t n, double m, int threads) {
    auto term = [&](std::int64_t pos, double* t) {
        const std::int64_t i = perm[pos];
        const double gi = g[i];
        const double a = gi + L.at(i, gi);
        t[0] = a > 0 ? 1.0 / a : 0.0;
        t[1] = a > 0 ? gi / a : 0.0;
    };
    CanonicalSums<2, decltype(term)> sums(n, threads, term);
    const std::int64_t nb = num_blocks(n);
    std::vector<std::int64_t> fail(static_cast<size_t>(nb), n);
    for_each_block(n, threads, [&](std::int64_t blk) {
        const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
        const double off_h = sums.offsets[blk * 2], off_g = sums.offsets[blk * 2 + 1];
        double acc_h = 0.0, acc_g = 0.0, t[2];
        for (std::int64_t p = lo; p < hi; ++p) {
            const double gp = g[perm[p]];
            if (p == 0 || gp != static_cast<double>(g[perm[p - 1]])) {
                const double h_excl = p == 0 ? 0.0 : (p == lo ? off_h : acc_h + off_h);
                const double g_excl = p == 0 ? 0.0 : (p == lo ? off_g : acc_g + off_g);
                if (!(gp * h_excl >= g_excl - m)) {
                    fail[blk] = p;
                    return;
                }
            }
            term(p, t);
            acc_h += t[0];
            acc_g += t[1];
        }
    });
    std::int64_t kstar = n;
    for (std::int64_t f : fail) kstar = std::min(kstar, f);
    return {kstar, sums.grand[1]};
}

// Per block, over points with g >= tau and a > 0: lane totals of r = 1/a and g*r
// (combined as in parallel.hpp), count and min a. One streaming, vectorisable pass.
struct BlockSums {
    std::vector<double> h, g, min_a;
    std::vector<std::int64_t> count;

    BlockSums() = default;
    explicit BlockSums(std::int64_t nb)
        : h(static_cast<size_t>(nb)), g(static_cast<size_t>(nb)), min_a(static_cast<size_t>(nb)),
          count(static_cast<size_t>(nb)) {}
};

// The points a support pass also collects (threshold_support in threshold.hpp): the
// indices i of its block with lo <= g[i] < hi, in index order.
template <class T>
struct Collect {
    T lo, hi;
    std::vector<std::int64_t>* out;
};

// The DepRound sketch (docs/design.md §3): per block, kSketchParts approximate prefix
// sums of r = 1/a over the support, one at the end of each part of kSketchSpan points
// (the last is the block total). A whole block only; a short last block gets -1s.
// DepRound reads one part per sparse block: 512 points (at 1e9 points on two threads its
// time was 66 ms with parts of 2,048, 23 ms with 512, 20 ms with 256), for 16 bytes per
// block-kilopoint of sketch (15.6 MB at 1e9).
constexpr std::int64_t kSketchParts = 128;
constexpr std::int64_t kSketchSpan = kBlock / kSketchParts;

#if defined(__AVX512F__) || defined(__AVX2__)
// The bits of |x|: for valid values (not negative, or -0.0) they order as the values do.
inline std::uint32_t magnitude_bits(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u & 0x7FFFFFFFu;
}
#endif

#if defined(__AVX512F__)
// Bit j set iff lo <= p[j] < hi, j < 64, for valid values p[j] and lo, hi not negative
// (lo_bits = magnitude_bits(lo), width = the bits from lo to hi, 0 if hi <= lo): one
// unsigned compare of the raw bits per sixteen points, where the double compares of the
// support pass took two per eight (the collecting pass 17.0 -> 13.7 ms at 1e8 points, one
// AMD Zen 5 thread).
inline std::uint64_t float_range_hits(const float* p, std::uint32_t lo_bits, std::uint32_t width) {
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF), lo = _mm512_set1_epi32(static_cast<int>(lo_bits)),
                  w = _mm512_set1_epi32(static_cast<int>(width));
    std::uint64_t hits = 0;
    for (int q = 0; q < 4; ++q) {
        const __m512i u = _mm512_and_si512(_mm512_loadu_si512(p + 16 * q), abs);
        hits |= static_cast<std::uint64_t>(_mm512_cmplt_epu32_mask(_mm512_sub_epi32(u, lo), w)) << (16 * q);
    }
    return hits;
}
#elif defined(__AVX2__)
// float_range_hits with AVX2: no unsigned compare, so (u - lo) < width as
// min(u - lo, width - 1) == u - lo; eight points per compare.
inline std::uint64_t float_range_hits(const float* p, std::uint32_t lo_bits, std::uint32_t width) {
    if (width == 0) return 0;
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), lo = _mm256_set1_epi32(static_cast<int>(lo_bits)),
                  last = _mm256_set1_epi32(static_cast<int>(width - 1));
    std::uint64_t hits = 0;
    for (int q = 0; q < 8; ++q) {
        const __m256i u = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * q)), abs);
        const __m256i d = _mm256_sub_epi32(u, lo);
        const __m256i in = _mm256_cmpeq_epi32(_mm256_min_epu32(d, last), d);
        hits |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(in)))) << (8 * q);
    }
    return hits;
}
#endif

// How this process's support passes form 1/a (rad/reciprocal.hpp): 1 divide, 2 mixed;
// chosen by timing the first time it is asked (defined below support_block).
inline int support_reciprocal_mode();

// Block `blk` of a pool of n points, summed into `out` at `blk` as support_block_sums
// does; with Collecting, it also appends the block's points in [collect.lo, collect.hi)
// to *collect.out; with a `sketch` (kSketchParts entries), it records the block's row.
// Without WithG (threshold_support with RAD losses: rad_support_sums) it sums only 1/a
// and the count: out.g is NaN and out.min_a infinite.
template <bool Collecting, class T, bool WithG = true>
void support_block(const T* g, Losses L, std::int64_t n, std::int64_t blk, double tau, BlockSums& out,
                   Collect<T> collect = {}, double* sketch = nullptr) {
    const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
    const double inf = std::numeric_limits<double>::infinity();
    double lh[kLanes] = {}, lg[kLanes] = {}, mn[kLanes];
    std::int64_t c[kLanes] = {};
    for (int j = 0; j < kLanes; ++j) mn[j] = inf;
    auto item = [&](std::int64_t i, int j) {
        const double gi = g[i];
        const double a = gi + L.at(i, gi);
        const bool in = gi >= tau && a > 0;
        const double r = 1.0 / a;
        lh[j] += in ? r : 0.0;
        c[j] += in;
        if constexpr (WithG) {
            lg[j] += in ? gi * r : 0.0;
            mn[j] = in ? std::min(mn[j], a) : mn[j];
        }
        if (Collecting && g[i] >= collect.lo && g[i] < collect.hi) collect.out->push_back(i);
    };
    std::int64_t i = lo;
    // The vector part, compiled for each way of forming 1/a: `mixed` (a std::bool_constant)
    // takes every other vector's reciprocals by reciprocal_rn, the rest by the divider.
    auto vector_part = [&]([[maybe_unused]] auto mixed) {
        // One 8-wide vector (simd::d8): lane j adds item p % 8 == j in order, the same
        // operations as item(), so the same bits (vectorised for certain).
        using namespace simd;
        const d8 zero = splat8(0.0), one = splat8(1.0), tv = splat8(tau), w = splat8(L.w);
        const d8 clo = splat8(static_cast<double>(collect.lo)), chi = splat8(static_cast<double>(collect.hi));
        d8 hv = zero, sv = zero, mv = splat8(inf);
        l8 cv = {};
#if defined(__AVX512F__) || defined(__AVX2__)
        constexpr bool kBitsTest = Collecting && std::is_same_v<T, float>;
#else
        constexpr bool kBitsTest = false;
#endif
        // `newton`: this vector's RN(1/a) by reciprocal_rn (the same bits as the division).
        auto step8 = [&](std::int64_t p, [[maybe_unused]] auto newton) __attribute__((always_inline)) {
            const d8 x = load8(g + p);
            const d8 a = L.values ? x + load8(L.values + p) : x + w * x;
#if defined(__AVX512F__)
            // With masks kept as masks (as approx_pass_range): adding r where `in` and +0.0
            // elsewhere is adding r where `in` (a lane's sum is never -0.0), the same bits.
            const __m512d xv = reinterpret_cast<__m512d>(x), av = reinterpret_cast<__m512d>(a);
            const __mmask8 in = _mm512_mask_cmp_pd_mask(_mm512_cmp_pd_mask(xv, reinterpret_cast<__m512d>(tv), _CMP_GE_OQ),
                                                        av, reinterpret_cast<__m512d>(zero), _CMP_GT_OQ);
            d8 r;
            if constexpr (decltype(newton)::value) r = reinterpret_cast<d8>(reciprocal_rn(av, in));
            else r = one / a;
            hv = reinterpret_cast<d8>(_mm512_mask_add_pd(reinterpret_cast<__m512d>(hv), in, reinterpret_cast<__m512d>(hv),
                                                         reinterpret_cast<__m512d>(r)));
            cv = reinterpret_cast<l8>(_mm512_mask_sub_epi64(reinterpret_cast<__m512i>(cv), in, reinterpret_cast<__m512i>(cv),
                                                            _mm512_set1_epi64(-1)));
            if constexpr (WithG) {
                sv = reinterpret_cast<d8>(_mm512_mask_add_pd(reinterpret_cast<__m512d>(sv), in, reinterpret_cast<__m512d>(sv),
                                                             reinterpret_cast<__m512d>(x * r)));
                const __mmask8 lower = _mm512_mask_cmp_pd_mask(in, av, reinterpret_cast<__m512d>(mv), _CMP_LT_OQ);
                mv = reinterpret_cast<d8>(_mm512_mask_mov_pd(reinterpret_cast<__m512d>(mv), lower, av));
            }
#else
            const d8 r = one / a;
            const l8 in = (x >= tv) & (a > zero);
            hv += select(in, r, zero);
            cv -= in;
            if constexpr (WithG) {
                sv += select(in, x * r, zero);
                mv = select(in & (a < mv), a, mv);
            }
#endif
            // Collecting: the lanes of the collected range (a few hundred points of the pool:
            // rarely any), appended by the caller of a run. Two compares into a mask
            // register; the vector compares, their AND and a movemask, with a branch every
            // eight items, made the collecting pass 20.3 ms against 13.3 without (1e8, one
            // thread), 16.5 so. Float32 gains take float_range_hits instead.
            if constexpr (Collecting && !kBitsTest) {
#if defined(__AVX512F__)
                return static_cast<unsigned>(_mm512_mask_cmp_pd_mask(
                    _mm512_cmp_pd_mask(reinterpret_cast<__m512d>(x), reinterpret_cast<__m512d>(clo), _CMP_GE_OQ),
                    reinterpret_cast<__m512d>(x), reinterpret_cast<__m512d>(chi), _CMP_LT_OQ));
#else
                return movemask((x >= clo) & (x < chi));
#endif
            } else {
                return 0u;
            }
        };
        // The collected items of a run of steps from `p`, given their hit masks OR-ed at
        // each step's offset (bit q + j: item p + q + j).
        auto append = [&](std::int64_t p, std::uint64_t hits) {
            for (; hits; hits &= hits - 1) collect.out->push_back(p + __builtin_ctzll(hits));
        };
        constexpr std::int64_t kRun = 64;
        const bool sketching = sketch != nullptr && hi - lo == kBlock;
#if defined(__AVX512F__) || defined(__AVX2__)
        const std::uint32_t lo_bits = magnitude_bits(static_cast<float>(collect.lo)),
                            hi_bits = magnitude_bits(static_cast<float>(collect.hi)),
                            width = hi_bits > lo_bits ? hi_bits - lo_bits : 0;
#endif
        for (; i + kRun <= hi; i += kRun) {
            if (sketching && i > lo && ((i - lo) & (kSketchSpan - 1)) == 0) {
                // any order: the sketch is a bound, not a canonical sum
                sketch[(i - lo) / kSketchSpan - 1] = ((hv[0] + hv[1]) + (hv[2] + hv[3])) + ((hv[4] + hv[5]) + (hv[6] + hv[7]));
            }
            prefetch_lines(g + i, kRun * sizeof(T));
            if (L.values) prefetch_lines(L.values + i, kRun * sizeof(double));
            std::uint64_t hits = 0;
            for (std::int64_t q = 0; q < kRun; q += 2 * kLanes) {
                hits |= static_cast<std::uint64_t>(step8(i + q, std::false_type{})) << q;
                hits |= static_cast<std::uint64_t>(step8(i + q + kLanes, mixed)) << (q + kLanes);
            }
#if defined(__AVX512F__) || defined(__AVX2__)
            if constexpr (kBitsTest) hits = float_range_hits(reinterpret_cast<const float*>(g + i), lo_bits, width);
#endif
            if (Collecting && hits) append(i, hits);
        }
        for (; i + kLanes <= hi; i += kLanes) {
            unsigned hits = step8(i, std::false_type{});  // 0 where kBitsTest: the range tested here instead
            if constexpr (kBitsTest)
                for (int j = 0; j < kLanes; ++j) hits |= static_cast<unsigned>(g[i + j] >= collect.lo && g[i + j] < collect.hi) << j;
            if (Collecting && hits) append(i, hits);
        }
        for (int j = 0; j < kLanes; ++j) lh[j] = hv[j], lg[j] = sv[j], mn[j] = mv[j], c[j] = cv[j];
    };
    if (support_reciprocal_mode() == 2) vector_part(std::true_type{});
    else vector_part(std::false_type{});
    for (; i < hi; ++i) item(i, static_cast<int>((i - lo) % kLanes));
    out.h[blk] = combine_lanes(lh);
    out.g[blk] = WithG ? combine_lanes(lg) : std::numeric_limits<double>::quiet_NaN();
    if (sketch != nullptr) {
        if (hi - lo == kBlock) sketch[kSketchParts - 1] = out.h[blk];
        else std::fill(sketch, sketch + kSketchParts, -1.0);
    }
    std::int64_t cc = 0;
    double m = inf;
    for (int j = 0; j < kLanes; ++j) {
        cc += c[j];
        m = std::min(m, mn[j]);
    }
    out.count[blk] = cc;
    out.min_a[blk] = m;
}

inline int support_reciprocal_mode() {
#if defined(__AVX512F__)
    int mode = reciprocal_mode_slot().load(std::memory_order_acquire);
    if (mode != 0) return mode;
    static std::mutex choosing;  // one thread times; a caller arriving meanwhile waits
    std::lock_guard<std::mutex> lock(choosing);
    mode = reciprocal_mode_slot().load(std::memory_order_acquire);
    if (mode != 0) return mode;
    // The pass's own loop on one block in cache (uniform float gains in [0.5, 1), RAD
    // losses, every point in the support), the best of five alternated timings each way
    // (about 0.5 ms in all, once per process). Mixed must win by a tenth: the in-cache
    // timing of Newton's method alone had chosen it where, in memory, it lost.
    static std::vector<float> block = [] {
        std::vector<float> b(static_cast<size_t>(kBlock));
        std::uint64_t z = 0x9E3779B97F4A7C15ull;
        for (float& x : b) {
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            x = 0.5f + static_cast<float>(z >> 40) * 0x1p-25f;
        }
        return b;
    }();
    BlockSums out(1);
    double best[2] = {1e300, 1e300};
    for (int trial = 0; trial < 5; ++trial)
        for (int m = 1; m <= 2; ++m) {
            reciprocal_mode_slot().store(m, std::memory_order_release);
            const auto t0 = std::chrono::steady_clock::now();
            support_block<false, float, false>(block.data(), Losses{nullptr, 0.7}, kBlock, 0, 0.0, out);
            best[m - 1] = std::min(best[m - 1], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    mode = best[1] < 0.9 * best[0] ? 2 : 1;
    reciprocal_mode_slot().store(mode, std::memory_order_release);
    return mode;
#else
    return 1;
#endif
}

// With a `sketch` (kSketchParts entries per block), the DepRound sketch too.
template <class T, bool WithG = true>
BlockSums support_block_sums(const T* g, Losses L, std::int64_t n, double tau, int threads,
                             double* sketch = nullptr) {
    BlockSums out(num_blocks(n));
    support_reciprocal_mode();  // chosen before the threads start, if not yet
    for_each_block(n, threads, [&](std::int64_t blk) {
        support_block<false, T, WithG>(g, L, n, blk, tau, out, {}, sketch ? sketch + blk * kSketchParts : nullptr);
    });
    return out;
}

struct SupportSums {
    double h, g;
    std::int64_t count;
    double min_a;
};

// The canonical totals of support_block_sums: block totals added sequentially.
inline SupportSums totals_of(const BlockSums& bs) {
    SupportSums out{sum_blocks(bs.h), sum_blocks(bs.g), 0, std::numeric_limits<double>::infinity()};
    for (size_t blk = 0; blk < bs.count.size(); ++blk) {
        out.count += bs.count[blk];
        out.min_a = std::min(out.min_a, bs.min_a[blk]);
    }
    return out;
}

template <class T>
SupportSums support_sums(const T* g, Losses L, std::int64_t n, double tau, int threads) {
    return totals_of(support_block_sums(g, L, n, tau, threads));
}

// The support sums threshold_support hands over with RAD losses (a = (1 + w) g): its
// pass sums only 1/a and the count (support_block without WithG); G is count / (1 + w)
// (each g/a is 1/(1 + w) within a few ulps, and the solution uses H and the count alone:
// rad._solve.batch._theorem1_value) and min a is a(tau) (a grows with g). Precondition:
// every a finite (rad._solve.batch rescales the gains where (1 + w) max g would overflow).
inline SupportSums rad_support_sums(SupportSums s, double w, double tau) {
    s.g = static_cast<double>(s.count) / (1.0 + w);
    s.min_a = s.count > 0 ? tau + w * tau : std::numeric_limits<double>::infinity();
    return s;
}

// Number of q_i > 0 and the smallest gain among them.
template <class T>
std::pair<std::int64_t, double> support_stats(const T* g, Losses L, std::int64_t n, const Params& P, int threads) {
    const std::int64_t nb = num_blocks(n);
    std::vector<std::int64_t> counts(static_cast<size_t>(nb), 0);
    std::vector<double> mins(static_cast<size_t>(nb), std::numeric_limits<double>::infinity());
    for_each_block(n, threads, [&](std::int64_t blk) {
        const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
        std::int64_t c = 0;
        double mn = std::numeric_limits<double>::infinity();
        for (std::int64_t i = lo; i < hi; ++i) {
            const double gi = g[i];
            if (probability(gi, L.at(i, gi), P) > 0) {
                ++c;
                mn = std::min(mn, gi);
            }
        }
        counts[blk] = c;
        mins[blk] = mn;
    });
    std::int64_t c = 0;
    double mn = std::numeric_limits<double>::infinity();
    for (std::int64_t blk = 0; blk < nb; ++blk) {
        c += counts[blk];
        mn = std::min(mn, mins[blk]);
    }
    return {c, mn};
}

template <class T>
void materialize(const T* g, Losses L, std::int64_t n, const Params& P, double* out, int threads) {
    for_each_block(n, threads, [&](std::int64_t blk) {
        const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
        for (std::int64_t i = lo; i < hi; ++i) {
            const double gi = g[i];
            out[i] = probability(gi, L.at(i, gi), P);
        }
    });
}

}  // namespace rad

// Fixed-size blocks and the canonical summation order (mirrors canonical_prefix in
// python/rad/_backends/canonical.py): sequential inside aligned blocks of kBlock items,
// block totals summed sequentially. Results do not depend on the thread count.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef RAD_HAVE_OPENMP
#include <omp.h>
#endif
#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace rad {

constexpr std::int64_t kBlock = std::int64_t{1} << 16;

inline std::int64_t num_blocks(std::int64_t n) { return (n + kBlock - 1) / kBlock; }

inline bool has_openmp() {
#ifdef RAD_HAVE_OPENMP
    return true;
#else
    return false;
#endif
}

inline int thread_id() {
#ifdef RAD_HAVE_OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

// Cooperative cancellation (Ctrl-C): the bindings run long kernels on a worker thread and
// set this flag when Python reports a signal; kernels check it once per block (or per
// 2^16 items) and stop early. A cancelled kernel's result is discarded by the caller.
inline std::atomic<bool>& cancel_flag() {
    static std::atomic<bool> flag{false};
    return flag;
}
inline bool cancelled() { return cancel_flag().load(std::memory_order_relaxed); }
// Bumped whenever the flag is raised or lowered: a kernel run that saw no change ran whole.
inline std::atomic<std::uint64_t>& cancel_epoch() {
    static std::atomic<std::uint64_t> epoch{0};
    return epoch;
}

// Software prefetch for the streaming passes: ask for the cache lines `kPrefetchBytes`
// ahead of `p`. Each pass reads one stream and does a division per point; with the
// hardware prefetcher alone the project's VM reads such a stream at ~4 GB/s per core,
// with this ~1.6x faster (benchmarks/RESULTS.md). A prefetch never faults, so reading
// ahead past the end of an array is harmless.
constexpr std::int64_t kPrefetchBytes = 4096;

template <class T>
inline void prefetch_lines(const T* p, std::int64_t bytes) {
    const char* c = reinterpret_cast<const char*>(p) + kPrefetchBytes;
    for (std::int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
}

// Run body(k) for every k in [0, count), on up to `threads` threads, `grain` k at a time.
// Each grab of work is an atomic on a line the threads share: a body of a few hundred
// nanoseconds (a DepRound sketch row, an empty run to concatenate) wants a grain of dozens.
template <class Body>
void parallel_for(std::int64_t count, int threads, Body&& body, int grain = 1) {
#ifdef RAD_HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, grain) num_threads(std::max(1, threads)) if (count > grain && threads > 1)
#endif
    for (std::int64_t k = 0; k < count; ++k)
        if (!cancelled()) body(k);
}

// An allocator whose elements are left uninitialised until written (a vector of it is
// not zeroed first on one thread): large outputs that their passes write whole.
template <class V>
struct uninitialised_allocator : std::allocator<V> {
    template <class U>
    struct rebind {
        using other = uninitialised_allocator<U>;
    };
    uninitialised_allocator() = default;
    template <class U>
    uninitialised_allocator(const uninitialised_allocator<U>&) noexcept {}
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

// A grain for parallel_for over `count` small bodies: up to 64, but at least 16 grabs a
// thread, so that a few slow bodies (a block rounded exactly) still spread.
inline int small_grain(std::int64_t count, int threads) {
    return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(64, count / (16 * std::max(1, threads)))));
}

// Run body(block) for every block, on up to `threads` threads.
template <class Body>
void for_each_block(std::int64_t n, int threads, Body&& body) {
    parallel_for(num_blocks(n), threads, body);
}

// Canonical sums of K quantities: per-block sequential totals, then offsets.
// term(i, out) writes the K terms of item i.
template <int K, class Term>
struct CanonicalSums {
    std::vector<double> totals;   // nb * K, block totals
    std::vector<double> offsets;  // nb * K, exclusive block offsets (sequential)
    double grand[K];              // canonical grand totals

    CanonicalSums(std::int64_t n, int threads, Term term) {
        const std::int64_t nb = num_blocks(n);
        totals.assign(static_cast<size_t>(nb * K), 0.0);
        offsets.assign(static_cast<size_t>(nb * K), 0.0);
        for_each_block(n, threads, [&](std::int64_t blk) {
            double acc[K] = {};
            double t[K];
            const std::int64_t lo = blk * kBlock, hi = std::min(n, lo + kBlock);
            for (std::int64_t i = lo; i < hi; ++i) {
                term(i, t);
                for (int k = 0; k < K; ++k) acc[k] += t[k];
            }
            for (int k = 0; k < K; ++k) totals[blk * K + k] = acc[k];
        });
        for (int k = 0; k < K; ++k) {
            double run = 0.0;
            for (std::int64_t blk = 0; blk < nb; ++blk) {
                offsets[blk * K + k] = run;
                run += totals[blk * K + k];
            }
            // numpy: prefix[n-1] = offset[last] + local[last] = offset[last] + total[last]
            grand[k] = nb ? offsets[(nb - 1) * K + k] + totals[(nb - 1) * K + k] : 0.0;
        }
    }
};

// Canonical *totals* (no prefixes needed) in a vector-friendly order: inside each block,
// item p goes to lane p % 8 (sequential per lane), lanes combine as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), block totals add sequentially. Mirrors
// block_totals in python/rad/_backends/canonical.py.
constexpr int kLanes = 8;

inline double combine_lanes(const double* l) {
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

inline double sum_blocks(const std::vector<double>& block_totals) {
    double run = 0.0;
    for (double t : block_totals) run += t;
    return run;
}

// Four-wide vectors (GCC/Clang vector extensions; the streaming passes use the eight-wide
// d8 below, the capped path's span sums these): written so that they vectorise for certain
// (masks and selects, no branches, no division under a condition). IEEE operations lane by
// lane: the same bits as scalar code.
namespace simd {
typedef double d4 __attribute__((vector_size(32)));
typedef std::int64_t l4 __attribute__((vector_size(32)));
typedef float f4 __attribute__((vector_size(16)));

inline d4 splat(double x) { return d4{x, x, x, x}; }
inline d4 select(l4 m, d4 a, d4 b) { return reinterpret_cast<d4>((reinterpret_cast<l4>(a) & m) | (reinterpret_cast<l4>(b) & ~m)); }
inline d4 load(const float* p) {
    f4 f;
    std::memcpy(&f, p, sizeof f);
    return __builtin_convertvector(f, d4);
}
// Bit j set iff lane j of the mask is set.
inline unsigned movemask(l4 m) {
#if defined(__AVX__)
    return static_cast<unsigned>(__builtin_ia32_movmskpd256(reinterpret_cast<d4>(m)));
#else
    return static_cast<unsigned>((m[0] & 1) | (m[1] & 2) | (m[2] & 4) | (m[3] & 8));
#endif
}
inline d4 load(const double* p) {
    d4 d;
    std::memcpy(&d, p, sizeof d);
    return d;
}

// The vector helpers below are always inlined: called, they pass their operands through
// memory (a lambda of the support pass was not inlined once its vectors were Wides).
#define RAD_SIMD_INLINE inline __attribute__((always_inline))

// The same bits as another type of the same size (a vector of other lanes).
template <class To, class From>
RAD_SIMD_INLINE To as(const From& x) {
    static_assert(sizeof(To) == sizeof(From), "the same size");
    To t;
    std::memcpy(&t, &x, sizeof t);
    return t;
}

// Eight-wide: lane j of one vector is lane j of the canonical order (item p % 8 == j).
// Sixteen-wide for the float32 passes. The same IEEE operations lane by lane whatever the
// machine's vectors, so the same bits.
//
// With AVX-512 each is one register (GCC vector extensions). Elsewhere each is a Wide:
// an array of the machine's own vectors (32 bytes with AVX, else 16) with the same
// operators. GCC keeps a 64-byte vector type the target lacks in memory and compares it
// lane by lane: with AVX2 alone the support pass took 119 ms per 1e8 points against 25
// as two 32-byte halves (benchmarks/RESULTS.md, the twentieth session).
#if defined(__AVX512F__)
typedef double d8 __attribute__((vector_size(64)));
typedef std::int64_t l8 __attribute__((vector_size(64)));
typedef float f16 __attribute__((vector_size(64)));
typedef std::int32_t i16 __attribute__((vector_size(64)));
typedef std::uint32_t u16 __attribute__((vector_size(64)));

RAD_SIMD_INLINE d8 load8(const float* p) {
    typedef float f8 __attribute__((vector_size(32)));
    f8 f;
    std::memcpy(&f, p, sizeof f);
    return reinterpret_cast<d8>(_mm512_cvtps_pd(reinterpret_cast<__m256>(f)));  // one instruction, not four
}
// Truncated toward zero, lane by lane.
RAD_SIMD_INLINE l8 to_int64(d8 x) { return __builtin_convertvector(x, l8); }
#else
#if defined(__AVX__)
constexpr std::size_t kPartBytes = 32;
#else
constexpr std::size_t kPartBytes = 16;
#endif
template <class E>
struct PartOf {
    typedef E type __attribute__((vector_size(kPartBytes)));
};
// The signed integer of E's size (lanes of 4 or 8 bytes): a comparison's lanes are 0 or -1.
template <class E>
using MaskOf = std::conditional_t<sizeof(E) == 8, std::int64_t, std::int32_t>;
template <class T>
struct Same {  // a non-deduced context: a scalar operand converts to the lanes' type
    using type = T;
};

template <class E, int N>
struct Wide {
    using P = typename PartOf<E>::type;
    static constexpr int kPer = static_cast<int>(kPartBytes / sizeof(E)), kParts = N / kPer;
    static_assert(kParts * kPer == N, "whole parts");
    P p[kParts];
    RAD_SIMD_INLINE E operator[](int j) const { return p[j / kPer][j % kPer]; }
};
template <class E, int N>
using MaskFor = Wide<MaskOf<E>, N>;

#define RAD_WIDE_BINARY(OP)                                                                       \
    template <class E, int N>                                                                     \
    RAD_SIMD_INLINE Wide<E, N> operator OP(Wide<E, N> a, const Wide<E, N>& b) {                            \
        for (int k = 0; k < Wide<E, N>::kParts; ++k) a.p[k] = a.p[k] OP b.p[k];                   \
        return a;                                                                                 \
    }                                                                                             \
    template <class E, int N>                                                                     \
    RAD_SIMD_INLINE Wide<E, N> operator OP(Wide<E, N> a, typename Same<E>::type s) {                       \
        for (int k = 0; k < Wide<E, N>::kParts; ++k) a.p[k] = a.p[k] OP s;                        \
        return a;                                                                                 \
    }                                                                                             \
    template <class E, int N>                                                                     \
    RAD_SIMD_INLINE Wide<E, N>& operator OP##=(Wide<E, N>& a, const Wide<E, N>& b) {                       \
        for (int k = 0; k < Wide<E, N>::kParts; ++k) a.p[k] = a.p[k] OP b.p[k];                   \
        return a;                                                                                 \
    }
RAD_WIDE_BINARY(+)
RAD_WIDE_BINARY(-)
RAD_WIDE_BINARY(*)
RAD_WIDE_BINARY(/)
RAD_WIDE_BINARY(&)
RAD_WIDE_BINARY(|)
#undef RAD_WIDE_BINARY

#define RAD_WIDE_COMPARE(OP)                                                                      \
    template <class E, int N>                                                                     \
    RAD_SIMD_INLINE MaskFor<E, N> operator OP(const Wide<E, N>& a, const Wide<E, N>& b) {                  \
        MaskFor<E, N> m;                                                                          \
        for (int k = 0; k < Wide<E, N>::kParts; ++k)                                              \
            m.p[k] = (typename MaskFor<E, N>::P)(a.p[k] OP b.p[k]);                               \
        return m;                                                                                 \
    }
RAD_WIDE_COMPARE(<)
RAD_WIDE_COMPARE(<=)
RAD_WIDE_COMPARE(>)
RAD_WIDE_COMPARE(>=)
RAD_WIDE_COMPARE(==)
RAD_WIDE_COMPARE(!=)
#undef RAD_WIDE_COMPARE

template <class E, int N>
RAD_SIMD_INLINE Wide<E, N> operator~(Wide<E, N> a) {
    for (int k = 0; k < Wide<E, N>::kParts; ++k) a.p[k] = ~a.p[k];
    return a;
}
template <class E, int N>
RAD_SIMD_INLINE Wide<E, N> operator>>(Wide<E, N> a, int bits) {
    for (int k = 0; k < Wide<E, N>::kParts; ++k) a.p[k] = a.p[k] >> bits;
    return a;
}

typedef Wide<double, 8> d8;
typedef Wide<std::int64_t, 8> l8;
typedef Wide<float, 16> f16;
typedef Wide<std::int32_t, 16> i16;
typedef Wide<std::uint32_t, 16> u16;

RAD_SIMD_INLINE d8 load8(const float* p) {
    d8 d;
    for (int k = 0; k < d8::kParts; ++k) {
#if defined(__AVX__)
        d.p[k] = as<d8::P>(_mm256_cvtps_pd(_mm_loadu_ps(p + 4 * k)));  // GCC split the generic form via memory
#else
        typedef float half __attribute__((vector_size(kPartBytes / 2)));  // a part's lanes, as floats
        half f;
        std::memcpy(&f, p + k * d8::kPer, sizeof f);
        d.p[k] = __builtin_convertvector(f, d8::P);
#endif
    }
    return d;
}
RAD_SIMD_INLINE l8 to_int64(const d8& x) {
    l8 r;
    for (int k = 0; k < d8::kParts; ++k) r.p[k] = __builtin_convertvector(x.p[k], l8::P);
    return r;
}
#endif

// to_int64 for lanes in [0, 2^52) (DepRound's units): without AVX-512 there is no vector
// conversion to int64 (GCC converted lane by lane), but an integer below 2^52 plus 2^52
// is exact, and its low bits are the integer.
RAD_SIMD_INLINE l8 to_int64_small(const d8& x) {
#if defined(__AVX512F__)
    return to_int64(x);
#elif defined(__AVX__)
    const __m256d magic = _mm256_set1_pd(0x1p52);
    l8 r;
    for (int k = 0; k < d8::kParts; ++k) {
        const __m256d t = _mm256_add_pd(_mm256_round_pd(as<__m256d>(x.p[k]), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), magic);
        r.p[k] = as<l8::P>(as<l8::P>(t) - as<l8::P>(magic));
    }
    return r;
#else
    return to_int64(x);
#endif
}

// Lane j: a's where mask lane j is set (all ones), else b's.
template <class M, class V>
RAD_SIMD_INLINE V select(const M& m, const V& a, const V& b) {
    return as<V>((as<M>(a) & m) | (as<M>(b) & ~m));
}
RAD_SIMD_INLINE d8 splat8(double x) { return d8{} + x; }
// v >> bits for lanes that are not negative: a logical shift, which AVX2 has for 64-bit
// lanes (its arithmetic one is AVX-512's: GCC shifted lane by lane).
RAD_SIMD_INLINE l8 shift_right_nonneg(const l8& v, int bits) {
#if !defined(__AVX512F__) && defined(__AVX2__)
    l8 r;
    for (int k = 0; k < l8::kParts; ++k) r.p[k] = as<l8::P>(_mm256_srli_epi64(as<__m256i>(v.p[k]), bits));
    return r;
#else
    return v >> bits;
#endif
}
// A vector's lanes to memory, part by part (GCC moved a whole Wide through the stack).
template <class V, class E>
RAD_SIMD_INLINE void store(E* dst, const V& v) {
#if defined(__AVX512F__)
    std::memcpy(dst, &v, sizeof v);
#else
    for (int k = 0; k < V::kParts; ++k) std::memcpy(dst + k * V::kPer, &v.p[k], sizeof v.p[k]);
#endif
}
// A vector of lanes from memory, part by part (a whole Wide copied through the stack
// and reloaded in parts stalled its loads: DepRound's units 16.6 -> 4.5 ms at 1e7).
template <class V, class E>
RAD_SIMD_INLINE V load(const E* src) {
    V v;
#if defined(__AVX512F__)
    std::memcpy(&v, src, sizeof v);
#else
    for (int k = 0; k < V::kParts; ++k) std::memcpy(&v.p[k], src + k * V::kPer, sizeof v.p[k]);
#endif
    return v;
}
RAD_SIMD_INLINE d8 load8(const double* p) { return load<d8>(p); }
// The sum of the eight lanes (integers: any order gives the same value).
RAD_SIMD_INLINE std::int64_t hsum(const l8& v) {
#if defined(__AVX512F__)
    return _mm512_reduce_add_epi64(reinterpret_cast<__m512i>(v));
#elif defined(__AVX2__)
    const __m256i s = _mm256_add_epi64(as<__m256i>(v.p[0]), as<__m256i>(v.p[1]));
    const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return _mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1);
#else
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
#endif
}
// Lane j holds v[0] + ... + v[j] (integers: exact in any order).
RAD_SIMD_INLINE l8 inclusive_prefix(l8 v) {
#if defined(__AVX512F__)
    const l8 z = {};
    v += __builtin_shufflevector(z, v, 0, 8, 9, 10, 11, 12, 13, 14);
    v += __builtin_shufflevector(z, v, 0, 1, 8, 9, 10, 11, 12, 13);
    v += __builtin_shufflevector(z, v, 0, 1, 2, 3, 8, 9, 10, 11);
    return v;
#elif defined(__AVX2__)
    // Within each half: add the lanes moved up by one, then by two; then half 0's last to half 1.
    const __m256i z = _mm256_setzero_si256();
    __m256i h[2];
    for (int k = 0; k < 2; ++k) {
        __m256i x = as<__m256i>(v.p[k]);
        x = _mm256_add_epi64(x, _mm256_blend_epi32(_mm256_permute4x64_epi64(x, 0x90), z, 0x03));  // 0, x0, x1, x2
        x = _mm256_add_epi64(x, _mm256_permute2x128_si256(x, x, 0x08));                          // 0, 0, x0, x1
        h[k] = x;
    }
    h[1] = _mm256_add_epi64(h[1], _mm256_permute4x64_epi64(h[0], 0xFF));
    l8 r;
    r.p[0] = as<l8::P>(h[0]);
    r.p[1] = as<l8::P>(h[1]);
    return r;
#else
    std::int64_t x[8];
    std::memcpy(x, &v, sizeof x);
    for (int j = 1; j < 8; ++j) x[j] += x[j - 1];
    return as<l8>(x);
#endif
}
// first, v[0], ..., v[6]: the lanes moved up by one.
RAD_SIMD_INLINE l8 shift_in(const l8& v, std::int64_t first) {
#if defined(__AVX512F__)
    return __builtin_shufflevector(v, l8{} + first, 8, 0, 1, 2, 3, 4, 5, 6);
#elif defined(__AVX2__)
    const __m256i a = as<__m256i>(v.p[0]), b = as<__m256i>(v.p[1]);
    l8 r;  // each half's lanes up by one (0x90: lanes 0, 0, 1, 2), its lane 0 from before it
    r.p[0] = as<l8::P>(_mm256_blend_epi32(_mm256_permute4x64_epi64(a, 0x90), _mm256_set1_epi64x(first), 0x03));
    r.p[1] = as<l8::P>(_mm256_blend_epi32(_mm256_permute4x64_epi64(b, 0x90), _mm256_permute4x64_epi64(a, 0xFF), 0x03));
    return r;
#else
    std::int64_t x[8];
    x[0] = first;
    std::memcpy(x + 1, &v, 7 * sizeof(std::int64_t));
    return as<l8>(x);
#endif
}
// Bit j set iff lane j of the mask is set.
RAD_SIMD_INLINE unsigned movemask(const l8& m) {
#if defined(__AVX512DQ__)
    return static_cast<unsigned>(_mm512_movepi64_mask(reinterpret_cast<__m512i>(m)));
#elif defined(__AVX512F__)
    return static_cast<unsigned>(_mm512_cmpneq_epi64_mask(reinterpret_cast<__m512i>(m), _mm512_setzero_si512()));
#elif defined(__AVX__)
    return static_cast<unsigned>(__builtin_ia32_movmskpd256(as<d4>(m.p[0]))) |
           static_cast<unsigned>(__builtin_ia32_movmskpd256(as<d4>(m.p[1]))) << 4;
#else
    unsigned r = 0;
    for (int j = 0; j < 8; ++j) r |= static_cast<unsigned>(m[j] & 1) << j;
    return r;
#endif
}
RAD_SIMD_INLINE unsigned movemask(const i16& m) {
#if defined(__AVX512DQ__)
    return static_cast<unsigned>(_mm512_movepi32_mask(reinterpret_cast<__m512i>(m)));
#elif defined(__AVX512F__)
    return static_cast<unsigned>(_mm512_cmpneq_epi32_mask(reinterpret_cast<__m512i>(m), _mm512_setzero_si512()));
#elif defined(__AVX__)
    typedef float f8 __attribute__((vector_size(32)));
    return static_cast<unsigned>(__builtin_ia32_movmskps256(as<f8>(m.p[0]))) |
           static_cast<unsigned>(__builtin_ia32_movmskps256(as<f8>(m.p[1]))) << 8;
#else
    unsigned r = 0;
    for (int j = 0; j < 16; ++j) r |= static_cast<unsigned>(m[j] & 1) << j;
    return r;
#endif
}
// Writes first + j for every set bit j of the eight-bit `mask` to dst in ascending order and
// returns how many. With AVX-512 one compress of eight indices, stored whole (a caller's
// next store overwrites the slots past them): dst needs room for 8.
RAD_SIMD_INLINE int store_indices8(unsigned mask, std::int64_t first, std::int64_t* dst) {
#if defined(__AVX512F__)
    const __m512i idx = _mm512_add_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(first));
    _mm512_storeu_si512(dst, _mm512_maskz_compress_epi64(static_cast<__mmask8>(mask), idx));
    return __builtin_popcount(mask);
#else
    int k = 0;
    for (unsigned b = mask; b != 0; b &= b - 1) dst[k++] = first + __builtin_ctz(b);
    return k;
#endif
}
#if defined(__AVX2__)
// For each eight-bit mask, the lanes whose bit is set, in order, as bytes (then 0s): the
// permutation that left-packs them (AVX2 has no compress).
struct LeftPack8 {
    std::uint64_t at[256];
    constexpr LeftPack8() : at() {
        for (int m = 0; m < 256; ++m) {
            std::uint64_t v = 0;
            int k = 0;
            for (int j = 0; j < 8; ++j)
                if (m >> j & 1) v |= static_cast<std::uint64_t>(j) << (8 * k++);
            at[m] = v;
        }
    }
};
constexpr LeftPack8 kLeftPack8{};

// The lanes of v whose bit is set in the eight-bit `mask`, moved to the front in order
// (the lanes after them are unspecified): AVX2's stand-in for a compress.
RAD_SIMD_INLINE __m256i left_pack8(__m256i v, unsigned mask) {
    const __m256i order = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(kLeftPack8.at + mask)));
    return _mm256_permutevar8x32_epi32(v, order);
}
#endif

}  // namespace simd

}  // namespace rad

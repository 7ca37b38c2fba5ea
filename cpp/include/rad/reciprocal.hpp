// 1/a in float64, correctly rounded, with or without the divider (docs/design.md §3,
// "The support pass's reciprocal").
//
// The support pass sums RN(1/a) over the support; every backend divides (IEEE), so the
// sums agree bit for bit. On some cores vdivpd's throughput bounds that pass: on the
// 16-CPU Intel Xeon host of benchmarks/RESULTS.md it takes 0.75 ns a value on one thread
// (1.57 on sixteen), where rcp14pd, two Newton steps, Markstein's last correction and a
// check that the result is RN(1/a) take 0.62 (1.22); on AMD's Zen 5 the divider wins
// (0.12 against 0.31). Both give the same bits (the check sends any lane it cannot vouch
// for to the divider), so the choice is made by timing both once per process, or by
// set_reciprocal_mode (the test hook _core.set_support_reciprocal).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace rad {

#if defined(__AVX512F__)
// RN(1/a) on the lanes of `need` (the other lanes: anything). Where y, the Newton
// estimate, is within an ulp or so of 1/a, r = 1 - a y is exact (one FMA) and
// 1/a - y = r / a, so y is RN(1/a) when |r| is below a times half the gap between y and
// its neighbour on 1/a's side (no ties: 1/a is halfway between two doubles only where it
// is exact). A lane that fails, or whose a is zero, negative, not finite or so large that
// 1/a is subnormal, is divided. benchmarks/cpp_reciprocal.cpp checks it against vdivpd.
inline __m512d reciprocal_rn(__m512d a, __mmask8 need) {
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d y = _mm512_rcp14_pd(a);                           // |error| < 2^-14
    y = _mm512_fmadd_pd(y, _mm512_fnmadd_pd(a, y, one), y);  // ~2^-28
    y = _mm512_fmadd_pd(y, _mm512_fnmadd_pd(a, y, one), y);  // within an ulp or so
    y = _mm512_fmadd_pd(_mm512_fnmadd_pd(a, y, one), y, y);  // Markstein's last step
    const __m512d r = _mm512_fnmadd_pd(a, y, one);
    const __m512d e = _mm512_getexp_pd(y);  // floor(log2 y)
    const __m512i mant = _mm512_and_si512(_mm512_castpd_si512(y), _mm512_set1_epi64(0x000FFFFFFFFFFFFFLL));
    const __mmask8 pow2 = _mm512_cmpeq_epi64_mask(mant, _mm512_setzero_si512());
    const __mmask8 below = _mm512_cmp_pd_mask(r, _mm512_setzero_pd(), _CMP_LT_OQ);  // 1/a < y
    // half the gap: 2^(e - 53), or 2^(e - 54) below a power of two
    const __m512d e53 = _mm512_sub_pd(e, _mm512_set1_pd(53.0));
    const __m512d shift = _mm512_mask_sub_pd(e53, pow2 & below, e53, one);
    const __m512d limit = _mm512_scalef_pd(a, shift);  // a times half the gap (exact)
    const __mmask8 ok = _mm512_cmp_pd_mask(_mm512_abs_pd(r), limit, _CMP_LT_OQ);
    const __mmask8 redo = need & static_cast<__mmask8>(~ok);
    if (__builtin_expect(redo != 0, 0)) y = _mm512_mask_div_pd(y, redo, one, a);
    return y;
}
#endif

// 0: not chosen yet (time both at the next use), 1: divide, 2: Newton.
inline std::atomic<int>& reciprocal_mode_slot() {
    static std::atomic<int> mode{0};
    return mode;
}

#if defined(__AVX512F__)
// Seconds for `reps` sweeps of 1/x over `x` (4,096 values in L1) by each method.
template <bool Newton>
double time_reciprocals(const double* x, int reps) {
    const auto t0 = std::chrono::steady_clock::now();
    __m512d acc = _mm512_setzero_pd();
    for (int rep = 0; rep < reps; ++rep)
        for (int i = 0; i < 4096; i += 8) {
            const __m512d a = _mm512_loadu_pd(x + i);
            acc = _mm512_add_pd(acc, Newton ? reciprocal_rn(a, 0xFF) : _mm512_div_pd(_mm512_set1_pd(1.0), a));
        }
    volatile double sink = _mm512_reduce_add_pd(acc);
    (void)sink;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether Newton's reciprocals beat the divider on this core: the better of five
// alternated trials of each (about 0.1 ms in all).
inline bool newton_is_faster() {
    alignas(64) double x[4096];
    for (int i = 0; i < 4096; ++i) x[i] = 1.0 + i * (1.0 / 4096.0) + 1e-7 * (i % 7);
    double div = 1e300, newton = 1e300;
    for (int trial = 0; trial < 5; ++trial) {
        div = std::min(div, time_reciprocals<false>(x, 2));
        newton = std::min(newton, time_reciprocals<true>(x, 2));
    }
    return newton < div;
}
#endif

// Whether the support pass forms 1/a by Newton's method (AVX-512 builds only; the same
// bits either way). Chosen at the first call unless set_reciprocal_mode chose.
inline bool newton_reciprocals() {
#if defined(__AVX512F__)
    int mode = reciprocal_mode_slot().load(std::memory_order_acquire);
    if (mode == 0) {
        // The first use is often from every thread of a pass at once: one times, the
        // others wait for its choice (timings taken side by side would disturb each other).
        static std::mutex choosing;
        std::lock_guard<std::mutex> lock(choosing);
        mode = reciprocal_mode_slot().load(std::memory_order_acquire);
        if (mode == 0) {
            mode = newton_is_faster() ? 2 : 1;
            reciprocal_mode_slot().store(mode, std::memory_order_release);
        }
    }
    return mode == 2;
#else
    return false;
#endif
}

// 0: choose by timing at the next use, 1: always divide, 2: Newton where the build has
// AVX-512 (elsewhere the divider).
inline void set_reciprocal_mode(int mode) { reciprocal_mode_slot().store(mode, std::memory_order_release); }

}  // namespace rad

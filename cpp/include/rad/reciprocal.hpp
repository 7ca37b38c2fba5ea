// 1/a in float64, correctly rounded, with or without the divider (docs/design.md §3,
// "The support pass's reciprocal").
//
// The support pass sums RN(1/a) over the support; every backend divides (IEEE), so the
// sums agree bit for bit. On some cores vdivpd's throughput bounds that pass: on the
// 16-CPU Intel Xeon host of benchmarks/RESULTS.md it takes 0.75 ns a value on one thread,
// and the pass 80 ms per 1e8 points. reciprocal_rn forms the same bits without it (the
// check sends any lane it cannot vouch for to the divider).
#pragma once
#include <atomic>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace rad {

#if defined(__AVX512F__)
// Newton's estimate of 1/a: rcp14, two Newton steps and Markstein's last correction
// (within an ulp or so of 1/a for the a reciprocal_rn takes without dividing).
inline __m512d reciprocal_estimate(__m512d a) {
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d y = _mm512_rcp14_pd(a);                           // |error| < 2^-14
    y = _mm512_fmadd_pd(y, _mm512_fnmadd_pd(a, y, one), y);  // ~2^-28
    y = _mm512_fmadd_pd(y, _mm512_fnmadd_pd(a, y, one), y);  // within an ulp or so
    return _mm512_fmadd_pd(_mm512_fnmadd_pd(a, y, one), y, y);  // Markstein's last step
}

// The lanes where y is RN(1/a). Where y is within an ulp or so of 1/a, r = 1 - a y is
// exact (one FMA) and 1/a - y = r / a, so y is RN(1/a) when |r| is below a times half the
// gap between y and its neighbour on 1/a's side (no ties: 1/a is halfway between two
// doubles only where it is exact). A lane whose a is zero, negative, not finite or so
// large that 1/a is subnormal fails.
inline __mmask8 is_rounded_reciprocal(__m512d a, __m512d y) {
    const __m512d one = _mm512_set1_pd(1.0);
    const __m512d r = _mm512_fnmadd_pd(a, y, one);
    const __m512d e = _mm512_getexp_pd(y);  // floor(log2 y)
    const __m512i mant = _mm512_and_si512(_mm512_castpd_si512(y), _mm512_set1_epi64(0x000FFFFFFFFFFFFFLL));
    const __mmask8 pow2 = _mm512_cmpeq_epi64_mask(mant, _mm512_setzero_si512());
    const __mmask8 below = _mm512_cmp_pd_mask(r, _mm512_setzero_pd(), _CMP_LT_OQ);  // 1/a < y
    // half the gap: 2^(e - 53), or 2^(e - 54) below a power of two
    const __m512d e53 = _mm512_sub_pd(e, _mm512_set1_pd(53.0));
    const __m512d shift = _mm512_mask_sub_pd(e53, pow2 & below, e53, one);
    const __m512d limit = _mm512_scalef_pd(a, shift);  // a times half the gap (exact)
    return _mm512_cmp_pd_mask(_mm512_abs_pd(r), limit, _CMP_LT_OQ);
}

// RN(1/a) on the lanes of `need` (the other lanes: anything): Newton's estimate where the
// check vouches for it, the divider elsewhere. benchmarks/cpp_reciprocal.cpp checks it
// against vdivpd.
inline __m512d reciprocal_rn(__m512d a, __mmask8 need) {
    const __m512d y = reciprocal_estimate(a);
    const __mmask8 redo = need & static_cast<__mmask8>(~is_rounded_reciprocal(a, y));
    if (__builtin_expect(redo != 0, 0)) return _mm512_mask_div_pd(y, redo, _mm512_set1_pd(1.0), a);
    return y;
}
#endif

// How the support pass forms RN(1/a): 0 not chosen yet (support_reciprocal_mode() in
// support.hpp times the pass both ways at its first use), 1 the divider for every vector,
// 2 "mixed": every other vector of eight by reciprocal_rn, so the divider and the FMA
// units work side by side (Newton's method alone keeps the FMA ports busy and was slower
// than the divider inside the pass on both cores measured; benchmarks/RESULTS.md).
inline std::atomic<int>& reciprocal_mode_slot() {
    static std::atomic<int> mode{0};
    return mode;
}

// 0: choose by timing at the next use, 1: always divide, 2: mixed where the build has
// AVX-512 (elsewhere the divider).
inline void set_reciprocal_mode(int mode) { reciprocal_mode_slot().store(mode, std::memory_order_release); }

}  // namespace rad

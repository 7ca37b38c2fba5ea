// What order-free exact support sums would cost in C++ (AVX-512), beside the Numba probe
// benchmarks/exact_sum_probe.py: one thread, 1e8 float32 uniform gains, RAD losses
// (w = 0.7), the support g >= tau (82% of the points). Three passes over the same array:
//   read  - a plain float sum (what one read of the pool costs here);
//   lanes - the canonical layout's arithmetic: a = x + w x, 1/a under the support mask,
//           added into eight float64 lanes (one zmm add per eight items);
//   fixed - the same terms added exactly into a fixed-point accumulator (one 64-bit
//           window of 12 binades below the largest term, 32-bit halves into two 64-bit
//           sums; the terms outside the window are counted: none for uniform gains);
//   f32   - a cheaper term tried instead (not rad's definition): 1/g from vdivps, one
//           float64 correction y + y (1 - g y) (g y exact in float64, no FMA), the sum
//           times 1 / (1 + w) at the end; "rel" prints its relative distance from lanes.
// A timing twin: its arithmetic is the Numba probe's, which checks its total against
// math.fsum (this file checks nothing). Not part of rad; build and run by hand on an
// AVX-512 machine:
//   g++ -O3 -march=native -ffp-contract=off -o /tmp/exact_sum_probe benchmarks/exact_sum_probe_avx512.cpp
//   /tmp/exact_sum_probe
#include <immintrin.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
static inline std::uint64_t bits_of(double d) { std::uint64_t u; std::memcpy(&u, &d, 8); return u; }
// the canonical layout: lane j of 8 sums items i = j mod 8 in order: one zmm add per 8 items
__attribute__((noinline)) double lanes_pass(const float* g, long n, double w, double tau) {
    const __m512d W = _mm512_set1_pd(w), T = _mm512_set1_pd(tau), Z = _mm512_setzero_pd(), O = _mm512_set1_pd(1.0);
    __m512d acc = Z;
    for (long i = 0; i + 8 <= n; i += 8) {
        __m512d x = _mm512_cvtps_pd(_mm256_loadu_ps(g + i));
        __m512d a = _mm512_add_pd(x, _mm512_mul_pd(W, x));
        __mmask8 k = _mm512_cmp_pd_mask(x, T, _CMP_GE_OQ) & _mm512_cmp_pd_mask(a, Z, _CMP_GT_OQ);
        __m512d r = _mm512_maskz_div_pd(k, O, a);
        acc = _mm512_add_pd(acc, r);
    }
    return _mm512_reduce_add_pd(acc);
}
__attribute__((noinline)) void fixed_pass(const float* g, long n, double w, double tau, long base, std::uint64_t* out) {
    const __m512d W = _mm512_set1_pd(w), T = _mm512_set1_pd(tau), Z = _mm512_setzero_pd(), O = _mm512_set1_pd(1.0);
    const __m512i M = _mm512_set1_epi64((1ll << 52) - 1), ONE = _mm512_set1_epi64(1ll << 52), B = _mm512_set1_epi64(base),
                  TW = _mm512_set1_epi64(12), LOW = _mm512_set1_epi64(0xFFFFFFFFll);
    __m512i hs = _mm512_setzero_si512(), ls = hs; unsigned long nout = 0;
    for (long i = 0; i + 8 <= n; i += 8) {
        __m512d x = _mm512_cvtps_pd(_mm256_loadu_ps(g + i));
        __m512d a = _mm512_add_pd(x, _mm512_mul_pd(W, x));
        __mmask8 k = _mm512_cmp_pd_mask(x, T, _CMP_GE_OQ) & _mm512_cmp_pd_mask(a, Z, _CMP_GT_OQ);
        __m512i b = _mm512_castpd_si512(_mm512_maskz_div_pd(k, O, a));
        __m512i off = _mm512_sub_epi64(_mm512_srli_epi64(b, 52), B);
        __mmask8 fits = _mm512_mask_cmplt_epu64_mask(k, off, TW);
        __m512i v = _mm512_sllv_epi64(_mm512_or_si512(_mm512_and_si512(b, M), ONE), off);
        hs = _mm512_mask_add_epi64(hs, fits, hs, _mm512_srli_epi64(v, 32));
        ls = _mm512_mask_add_epi64(ls, fits, ls, _mm512_and_si512(v, LOW));
        nout += __builtin_popcount(k & ~fits);
    }
    out[0] = _mm512_reduce_add_epi64(hs), out[1] = _mm512_reduce_add_epi64(ls), out[2] = nout;
}
__attribute__((noinline)) double f32_pass(const float* g, long n, float tau) {
    const __m512 T = _mm512_set1_ps(tau), O = _mm512_set1_ps(1.0f);
    const __m512d Od = _mm512_set1_pd(1.0);
    __m512d acc0 = _mm512_setzero_pd(), acc1 = acc0;
    for (long i = 0; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(g + i);
        __mmask16 k = _mm512_cmp_ps_mask(x, T, _CMP_GE_OQ);
        __m512 y = _mm512_div_ps(O, x);
        __m512d x0 = _mm512_cvtps_pd(_mm512_castps512_ps256(x)), x1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1));
        __m512d y0 = _mm512_cvtps_pd(_mm512_castps512_ps256(y)), y1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(y, 1));
        __m512d e0 = _mm512_sub_pd(Od, _mm512_mul_pd(x0, y0)), e1 = _mm512_sub_pd(Od, _mm512_mul_pd(x1, y1));
        __m512d t0 = _mm512_add_pd(y0, _mm512_mul_pd(y0, e0)), t1 = _mm512_add_pd(y1, _mm512_mul_pd(y1, e1));
        acc0 = _mm512_mask_add_pd(acc0, static_cast<__mmask8>(k), acc0, t0);
        acc1 = _mm512_mask_add_pd(acc1, static_cast<__mmask8>(k >> 8), acc1, t1);
    }
    return _mm512_reduce_add_pd(acc0) + _mm512_reduce_add_pd(acc1);
}
__attribute__((noinline)) double read_pass(const float* g, long n) {
    __m512 acc = _mm512_setzero_ps();
    for (long i = 0; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(g + i));
    return _mm512_reduce_add_ps(acc);
}
int main() {
    long n = 100000000; std::vector<float> g(n);
    std::mt19937_64 rng(0); std::uniform_real_distribution<float> U(0, 1);
    for (auto& x : g) x = U(rng);
    double w = 0.7, tau = 0.18075937032699585;
    double t = (double)(float)tau; long e_top = (long)(bits_of(1.0 / (t + w * t)) >> 52);
    std::uint64_t out[3]; double s = 0;
    for (int rep = 0; rep < 7; ++rep) {
        auto t0 = std::chrono::steady_clock::now(); double ln = lanes_pass(g.data(), n, w, tau); s += ln;
        auto t1 = std::chrono::steady_clock::now(); fixed_pass(g.data(), n, w, tau, e_top - 11, out);
        auto t2 = std::chrono::steady_clock::now(); double sum = read_pass(g.data(), n);
        auto t3 = std::chrono::steady_clock::now(); double f = f32_pass(g.data(), n, static_cast<float>(tau)) / (1 + w);
        auto t4 = std::chrono::steady_clock::now();
        std::printf("lanes %.1f ms  fixed %.1f ms  read %.1f ms  f32 %.1f ms  (outside %llu, rel %.2g, %g %g)\n",
            std::chrono::duration<double, std::milli>(t1 - t0).count(), std::chrono::duration<double, std::milli>(t2 - t1).count(),
            std::chrono::duration<double, std::milli>(t3 - t2).count(), std::chrono::duration<double, std::milli>(t4 - t3).count(),
            (unsigned long long)out[2], (ln - f) / ln, s, sum);
    }
}

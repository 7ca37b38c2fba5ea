// Reciprocals without the divider: what they would save in the two passes, and whether the
// float64 one is exact. The support pass sums 1/a (float64, a = g + w g for float32 gains)
// and is bound by vdivpd on some cores; the first pass sums 1/g in float32 (vdivps).
//
// Four kernels, each summing reciprocals of the same values, eight or sixteen lanes at a
// time, values in L1/L2 (each thread its own copy), on 1 thread and on all threads:
//   div64    vdivpd: 1 / a, the support pass's operation
//   newton64 rcp14pd, two Newton steps, a last correction (Markstein's), and a check that
//            the result is 1 / a correctly rounded (|1 - a y| below half an ulp of y, the
//            lower half-gap where y is a power of two and 1 / a below it); lanes that fail
//            the check are divided. The same bits as div64, by construction.
//   div32    vdivps: 1 / g, the first pass's operation
//   rcp32    rcp14ps and one Newton step (within about 2^-23 of 1 / g: not IEEE, which the
//            first pass's margins would have to absorb)
// Before timing, newton64 is checked against the division on every float32 gain in
// [1, 2) times several w and a spread of exponents, plus powers of two and all-ones
// mantissas: the mismatches (must be 0) and how many lanes fell back are printed.
//
//   g++ -O3 -march=native -ffp-contract=off -fopenmp -Icpp/include -o /tmp/cpp_reciprocal benchmarks/cpp_reciprocal.cpp
//   /tmp/cpp_reciprocal [THREADS=all]          # one JSON line
// AVX-512 only (prints {"skipped": ...} elsewhere).
#include <immintrin.h>
#include <omp.h>

#include "rad/reciprocal.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#if defined(__AVX512F__)
namespace {

// y = RN(1 / a) as rad::reciprocal_rn forms it (cpp/include/rad/reciprocal.hpp), counting
// the lanes its check sends to the divider.
inline __m512d reciprocal_exact(__m512d a, std::int64_t* fallbacks) {
    const __m512d y = rad::reciprocal_estimate(a);
    const __mmask8 ok = rad::is_rounded_reciprocal(a, y);
    if (ok != 0xFF) {
        *fallbacks += 8 - __builtin_popcount(ok);
        return _mm512_mask_div_pd(y, static_cast<__mmask8>(~ok), _mm512_set1_pd(1.0), a);
    }
    return y;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ns per value of `kernel` over `reps` sweeps of each thread's own copy of `x`.
template <class Kernel>
double time_kernel(int threads, const std::vector<double>& x, int reps, Kernel kernel) {
    double best = 1e300;
    for (int trial = 0; trial < 5; ++trial) {
        auto t0 = std::chrono::steady_clock::now();
        double sink = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        {
            std::vector<double> mine(x);
            sink += kernel(mine, reps);
        }
        const double s = seconds_since(t0);
        if (sink == 42.0) std::puts("");
        best = std::min(best, s);
    }
    return best * 1e9 / (static_cast<double>(x.size()) * reps);
}

}  // namespace

int main(int argc, char** argv) {
    const int all = omp_get_max_threads();
    const int threads = argc > 1 ? std::atoi(argv[1]) : all;
    // ---- exactness: newton64 against the division
    std::int64_t checked = 0, mismatches = 0, fallbacks = 0;
    auto check = [&](const double* a, std::int64_t n) {
        for (std::int64_t i = 0; i + 8 <= n; i += 8) {
            const __m512d v = _mm512_loadu_pd(a + i);
            double got[8], want[8];
            _mm512_storeu_pd(got, reciprocal_exact(v, &fallbacks));
            for (int j = 0; j < 8; ++j) want[j] = 1.0 / a[i + j];
            mismatches += std::memcmp(got, want, sizeof got) != 0;
            checked += 8;
        }
    };
    const double ws[] = {0.0, 0.999, 0.7, 1.0 / 3.0, 1e-9, 0.5};
    const int exps[] = {0, -1, 1, -20, 37, -126, -140, 100};
    std::vector<double> buf(1 << 16);
    for (double w : ws)
        for (int ex : exps) {
            std::int64_t k = 0;
            for (std::uint32_t m = 0; m < (1u << 23); ++m) {  // every float32 mantissa
                const float g = std::ldexp(1.0f + static_cast<float>(m) * 0x1p-23f, ex);
                const double gd = g;
                buf[static_cast<size_t>(k++)] = gd + w * gd;  // a, as the passes form it
                if (k == static_cast<std::int64_t>(buf.size())) {
                    check(buf.data(), k);
                    k = 0;
                }
            }
            check(buf.data(), k - k % 8);
        }
    // ---- throughput: values like the support pass's (uniform gains, w = 0.7)
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<float> U(1e-3f, 1.0f);
    std::vector<double> a(8192);
    std::vector<float> g32(8192);
    for (size_t i = 0; i < a.size(); ++i) {
        g32[i] = U(rng);
        a[i] = static_cast<double>(g32[i]) * 1.7;
    }
    std::vector<double> g32d(g32.begin(), g32.end());  // (the timing helper copies doubles)
    const int reps = 2000;
    auto div64 = [](std::vector<double>& x, int r) {
        __m512d s0 = _mm512_setzero_pd(), one = _mm512_set1_pd(1.0);
        for (int k = 0; k < r; ++k)
            for (size_t i = 0; i < x.size(); i += 8) s0 = _mm512_add_pd(s0, _mm512_div_pd(one, _mm512_loadu_pd(&x[i])));
        return _mm512_reduce_add_pd(s0);
    };
    std::int64_t fb = 0;
    auto newton64 = [&fb](std::vector<double>& x, int r) {
        __m512d s0 = _mm512_setzero_pd();
        std::int64_t local = 0;
        for (int k = 0; k < r; ++k)
            for (size_t i = 0; i < x.size(); i += 8) s0 = _mm512_add_pd(s0, reciprocal_exact(_mm512_loadu_pd(&x[i]), &local));
#pragma omp atomic
        fb += local;
        return _mm512_reduce_add_pd(s0);
    };
    auto div32 = [](std::vector<double>& x, int r) {
        std::vector<float> f(x.begin(), x.end());
        __m512 s0 = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
        for (int k = 0; k < r; ++k)
            for (size_t i = 0; i < f.size(); i += 16) s0 = _mm512_add_ps(s0, _mm512_div_ps(one, _mm512_loadu_ps(&f[i])));
        return static_cast<double>(_mm512_reduce_add_ps(s0));
    };
    auto rcp32 = [](std::vector<double>& x, int r) {
        std::vector<float> f(x.begin(), x.end());
        __m512 s0 = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
        for (int k = 0; k < r; ++k)
            for (size_t i = 0; i < f.size(); i += 16) {
                const __m512 v = _mm512_loadu_ps(&f[i]);
                __m512 y = _mm512_rcp14_ps(v);
                y = _mm512_fmadd_ps(y, _mm512_fnmadd_ps(v, y, one), y);
                s0 = _mm512_add_ps(s0, y);
            }
        return static_cast<double>(_mm512_reduce_add_ps(s0));
    };
    std::printf("{\"threads\": %d, \"checked\": %lld, \"mismatches\": %lld, \"check_fallbacks\": %lld", threads,
                static_cast<long long>(checked), static_cast<long long>(mismatches), static_cast<long long>(fallbacks));
    for (int t : {1, threads}) {
        std::printf(", \"t%d\": {\"div64_ns\": %.4f, \"newton64_ns\": %.4f, \"div32_ns\": %.4f, \"rcp32_ns\": %.4f}", t,
                    time_kernel(t, a, reps, div64), time_kernel(t, a, reps, newton64),
                    time_kernel(t, g32d, reps, div32), time_kernel(t, g32d, reps, rcp32));
        if (t == threads) break;
    }
    std::printf(", \"timed_fallbacks\": %lld}\n", static_cast<long long>(fb));
    return mismatches != 0;
}
#else
int main() {
    std::puts("{\"skipped\": \"needs AVX-512\"}");
    return 0;
}
#endif

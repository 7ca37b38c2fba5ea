// Where the float32 first pass's time goes on a core: its AVX-512 loop (approx_pass_range
// in cpp/include/rad/threshold.hpp, copied here in outline) with parts left out, in
// memory on THREADS threads (contiguous ranges, as approx_pass) and in cache on one thread.
// Parts: r = the reciprocal and its sums, c = the count above, x = the extrema (the
// invalid-value and zero watch, the smallest bits above), i = the inside points'
// compress-store, b = their binning (2^14 fine bins: count, float reciprocal, minimum),
// p = the software prefetch. "all" is the pass's loop (less its flushes); "none" is the
// loads and one integer add. The production pass (approx_pass) is timed too.
// Float32 uniform gains, m = 0.3 n, RAD losses w = 0.7, the sample's bracket.
//   g++ -O3 -march=native -ffp-contract=off -fopenmp -DRAD_HAVE_OPENMP -Icpp/include \
//       -o /tmp/cpp_first_pass_parts benchmarks/cpp_first_pass_parts.cpp
//   /tmp/cpp_first_pass_parts [N=1e8] [THREADS=1]
// AVX-512 only.
#include "rad/threshold.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <omp.h>

#if defined(__AVX512F__)
using namespace rad;

enum : unsigned { kR = 1, kC = 2, kX = 4, kI = 8, kP = 16, kB = 32, kAll = 63 };

struct Out {
    double h = 0;
    std::int64_t above = 0, inside = 0;
    std::uint32_t mx = 0, mz = 0, mn = 0;
};

// The pass's loop over [lo, hi) (whole runs of 64 only) with the parts in Keep.
template <unsigned Keep>
void loop(const float* g, std::int64_t lo, std::int64_t hi, std::uint32_t ulo, std::uint32_t uhi, Out& o) {
    int sh = 0;
    while (((uhi - ulo - 1) >> sh) >= static_cast<std::uint32_t>(kApproxFine)) ++sh;
    thread_local std::vector<ApproxBin> fine(kApproxFine);
    auto drain = [&](int count, const float* buf) {
        if constexpr ((Keep & kB) != 0)
            for (int j = 0; j < count; ++j) approx_bin_add(fine.data(), ulo, sh, buf[j]);
    };
    constexpr int kRun = 64;
    const __m512i lo_u = _mm512_set1_epi32(static_cast<int>(ulo)), hi_u = _mm512_set1_epi32(static_cast<int>(uhi)),
                  abs_u = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512i mx = _mm512_setzero_si512(), mz = _mm512_set1_epi32(-1), mn = _mm512_set1_epi32(-1), n_up = _mm512_setzero_si512();
    __m512i any = _mm512_setzero_si512();
    __m512d h0 = _mm512_setzero_pd(), h1 = _mm512_setzero_pd();
    alignas(64) float buf[2048 + kRun];
    int nbuf = 0;
    std::int64_t inside = 0;
    std::int64_t i = lo;
    __m512i ahead[4];
    const std::int64_t last_run = hi - kRun;
    if (lo <= last_run)
        for (int q = 0; q < 4; ++q) ahead[q] = _mm512_loadu_si512(g + lo + 16 * q);
    for (; i + kRun <= hi; i += kRun) {
        if constexpr ((Keep & kP) != 0) prefetch_lines(g + i, kRun * sizeof(float));
        __m512 run = _mm512_setzero_ps();
        const float* next = g + std::min(i + kRun, last_run);
        for (int q = 0; q < kRun; q += 16) {
            const __m512i raw = ahead[q / 16];
            ahead[q / 16] = _mm512_loadu_si512(next + q);
            if constexpr (Keep == 0) {
                any = _mm512_add_epi32(any, raw);
                continue;
            }
            const __m512i u = _mm512_and_si512(raw, abs_u);
            const __mmask16 up = _mm512_cmpge_epu32_mask(u, hi_u);
            if constexpr ((Keep & kR) != 0) {
                const __m512 x = _mm512_castsi512_ps(raw);
                const __m512 y0 = _mm512_maskz_rcp14_ps(up, x);
                const __m512 r = _mm512_maskz_fmadd_ps(up, y0, _mm512_fnmadd_ps(x, y0, one), y0);
                run = _mm512_add_ps(run, r);
            }
            if constexpr ((Keep & kC) != 0) n_up = _mm512_mask_sub_epi32(n_up, up, n_up, _mm512_set1_epi32(-1));
            if constexpr ((Keep & kX) != 0) {
                mx = _mm512_max_epu32(mx, raw);
                mz = _mm512_min_epu32(mz, u);
                mn = _mm512_mask_min_epu32(mn, up, mn, u);
            }
            if constexpr ((Keep & kI) != 0) {
                const __mmask16 in = _mm512_mask_cmpge_epu32_mask(static_cast<__mmask16>(~up), u, lo_u);
                _mm512_storeu_si512(reinterpret_cast<void*>(buf + nbuf), _mm512_maskz_compress_epi32(in, u));
                nbuf += __builtin_popcount(in);
            } else {
                any = _mm512_add_epi32(any, u);
            }
        }
        if constexpr ((Keep & kR) != 0) {
            h0 = _mm512_add_pd(h0, _mm512_cvtps_pd(_mm512_castps512_ps256(run)));
            h1 = _mm512_add_pd(h1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(run), 1))));
        }
        if (nbuf > 2048 - kRun) drain(nbuf, buf), inside += nbuf, nbuf = 0;
    }
    drain(nbuf, buf);
    o.h += _mm512_reduce_add_pd(_mm512_add_pd(h0, h1));
    o.above += _mm512_reduce_add_epi32(n_up) + _mm512_reduce_add_epi32(any);
    o.inside += inside + nbuf;
    o.mx ^= static_cast<std::uint32_t>(_mm512_reduce_max_epu32(mx));
    o.mz ^= static_cast<std::uint32_t>(_mm512_reduce_min_epu32(mz));
    o.mn ^= static_cast<std::uint32_t>(_mm512_reduce_min_epu32(mn));
    o.h += fine[7].h;
}

template <unsigned Keep>
double in_memory(const std::vector<float>& g, int threads, std::uint32_t ulo, std::uint32_t uhi, double& sink) {
    const std::int64_t n = static_cast<std::int64_t>(g.size());
    std::vector<double> ts;
    for (int rep = 0; rep < 7; ++rep) {
        std::vector<Out> outs(static_cast<size_t>(threads));
        const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int t = 0; t < threads; ++t) loop<Keep>(g.data(), n * t / threads, n * (t + 1) / threads, ulo, uhi, outs[static_cast<size_t>(t)]);
        ts.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        for (const Out& o : outs) sink += o.h + static_cast<double>(o.above + o.inside + o.mx + o.mz + o.mn);
    }
    std::sort(ts.begin(), ts.end());
    return ts[3] * 1e8 / static_cast<double>(n);
}

template <unsigned Keep>
double in_cache(const std::vector<float>& g, std::uint32_t ulo, std::uint32_t uhi, double& sink) {
    constexpr std::int64_t nc = 65536;
    const long reps = 3000;
    double best = 1e300;
    for (int k = 0; k < 3; ++k) {
        Out o;
        const auto t0 = std::chrono::steady_clock::now();
        for (long r = 0; r < reps; ++r) loop<Keep>(g.data(), 0, nc, ulo, uhi, o);
        best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                                  (static_cast<double>(nc) * reps) * 1e8);
        sink += o.h + static_cast<double>(o.above + o.inside);
    }
    return best;
}

template <unsigned Keep>
void row(const char* name, const std::vector<float>& g, int threads, std::uint32_t ulo, std::uint32_t uhi, double& sink) {
    const double mem = in_memory<Keep>(g, threads, ulo, uhi, sink), cache = in_cache<Keep>(g, ulo, uhi, sink);
    std::printf("%-22s in memory %7.2f ms   in cache (1 thread) %7.2f ms   per 1e8 points\n", name, mem, cache);
}

int main(int argc, char** argv) {
    const long n = argc > 1 ? static_cast<long>(atof(argv[1])) : 100000000;
    const int threads = argc > 2 ? atoi(argv[2]) : 1;
    std::vector<float> g(static_cast<size_t>(n));
#pragma omp parallel num_threads(threads)
    {  // each thread writes (first touches) its own range, as the passes will read them
        std::mt19937_64 rng(static_cast<std::uint64_t>(omp_get_thread_num()) + 1);
        std::uniform_real_distribution<float> U(0, 1);
#pragma omp for schedule(static)
        for (long i = 0; i < n; ++i) g[static_cast<size_t>(i)] = U(rng);
    }
    const double m = 0.3 * static_cast<double>(n), w = 0.7;
    const Bracket<float> br = sample_bracket(g.data(), Losses{nullptr, w}, n, m, threads);
    double sink = 0;
    std::vector<double> prod;
    for (int rep = 0; rep < 7; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        const ApproxPass p = approx_pass(g.data(), n, threads, br.lo, br.hi);
        prod.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        sink += p.tot.h;
    }
    std::sort(prod.begin(), prod.end());
    std::printf("n = %ld, %d threads; approx_pass (the pass itself) %.2f ms per 1e8 points in memory\n", n, threads,
                prod[3] * 1e8 / static_cast<double>(n));
    row<kAll>("all", g, threads, br.lo, br.hi, sink);
    row<kAll & ~kB>("all but binning", g, threads, br.lo, br.hi, sink);
    row<kAll & ~kI & ~kB>("all but inside", g, threads, br.lo, br.hi, sink);
    row<kAll & ~kR>("all but reciprocal", g, threads, br.lo, br.hi, sink);
    row<kAll & ~kX>("all but extrema", g, threads, br.lo, br.hi, sink);
    row<kAll & ~kC>("all but count", g, threads, br.lo, br.hi, sink);
    row<kAll & ~kP>("all but prefetch", g, threads, br.lo, br.hi, sink);
    row<kR | kP>("reciprocal only", g, threads, br.lo, br.hi, sink);
    row<kI | kB | kP>("inside only", g, threads, br.lo, br.hi, sink);
    row<kP>("compare only", g, threads, br.lo, br.hi, sink);
    row<0>("none (loads)", g, threads, br.lo, br.hi, sink);
    std::printf("[%g]\n", sink);
}
#else
int main() { std::printf("{\"skipped\": \"AVX-512 only\"}\n"); }
#endif

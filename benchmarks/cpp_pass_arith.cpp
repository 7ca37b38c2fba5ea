// The C++ float32 passes' arithmetic apart from their memory traffic: the first pass
// (approx_pass_range) and the support pass (support_block, 1/a and the count) repeated over
// a pool that stays in cache, against the first pass over a pool of N points in memory
// (approx_pass with the sample's bracket). Per-point times scaled to ms per 1e8 points.
// Float32 uniform gains, m = 0.3 n, RAD losses w = 0.7; the cached pool is binned with
// the bracket of the large one (about 3% of the points inside).
//   g++ -O3 -march=native -ffp-contract=off -fopenmp -DRAD_HAVE_OPENMP -Icpp/include \
//       -o /tmp/cpp_pass_arith benchmarks/cpp_pass_arith.cpp
//   /tmp/cpp_pass_arith [N=1e8] [THREADS=1] [CACHED=65536]
#include "rad/threshold.hpp"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
using namespace rad;
int main(int argc, char** argv) {
    const long n = argc > 1 ? static_cast<long>(atof(argv[1])) : 100000000;
    const int threads = argc > 2 ? atoi(argv[2]) : 1;
    const long nc = argc > 3 ? atol(argv[3]) : 65536;
    std::vector<float> g(n);
    std::mt19937_64 rng(0);
    std::uniform_real_distribution<float> U(0, 1);
    for (auto& x : g) x = U(rng);
    const double m = 0.3 * n, w = 0.7;
    const Losses L{nullptr, w};
    const Bracket<float> br = sample_bracket(g.data(), L, n, m, threads);
    auto now = [] { return std::chrono::steady_clock::now(); };
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    std::vector<double> mem;
    for (int rep = 0; rep < 7; ++rep) {
        const auto t0 = now();
        const ApproxPass p = approx_pass(g.data(), n, threads, br.lo, br.hi);
        mem.push_back(ms(t0, now()));
        if (p.tot.unsafe) return 1;
    }
    std::sort(mem.begin(), mem.end());
    // The cached pool: the first nc points, passed over until about 3e8 points are done.
    int sh = 0;
    while (((br.hi - br.lo - 1) >> sh) >= static_cast<std::uint32_t>(kApproxFine)) ++sh;
    std::vector<ApproxBin> fine(kApproxFine);
    const long reps = std::max(1L, 300000000L / nc);
    double first = 1e300, support = 1e300, sink = 0.0;
    for (int k = 0; k < 5; ++k) {
        auto t0 = now();
        for (long r = 0; r < reps; ++r) {
            ApproxAcc acc;
            approx_pass_range(g.data(), 0, nc, br.lo, br.hi, sh, acc, fine.data());
            sink += acc.h;
        }
        first = std::min(first, ms(t0, now()) / (static_cast<double>(nc) * reps) * 1e8);
        BlockSums out(num_blocks(nc));
        t0 = now();
        for (long r = 0; r < reps; ++r)
            for (long b = 0; b < num_blocks(nc); ++b) {
                support_block<false, float, false>(g.data(), L, nc, b, 0.3, out);
                sink += out.h[b];
            }
        support = std::min(support, ms(t0, now()) / (static_cast<double>(nc) * reps) * 1e8);
    }
    std::printf("first pass in memory %.1f ms (median of 7, n = %ld, %d threads) | in cache, per 1e8 points: "
                "first pass %.1f ms, support pass %.1f ms [%g]\n",
                mem[3], n, threads, first, support, sink);
}

// The C++ select's stages on one pool, timed inside one process (no Python): the sample,
// the float32 first pass, threshold_support (sample + first pass + the collecting support
// pass + the blocks summed again), one plain read (stream_sum), the support pass alone
// (1/a and the count, as threshold_support runs it with RAD losses), the collecting pass
// with and without the DepRound sketch, how many blocks threshold_support sums twice, and
// the support pass with either way of forming 1/a (divide, mixed: rad/reciprocal.hpp), and the
// share of the pool inside the sample's bracket (the points the first pass bins).
// Float32 uniform gains, m = MFRAC n (default 0.3), RAD losses w = 1 - m/n.
//   g++ -O3 -march=native -ffp-contract=off -fopenmp -DRAD_HAVE_OPENMP -Icpp/include \
//       -o /tmp/cpp_stages benchmarks/cpp_stages.cpp
//   /tmp/cpp_stages [N=1e8] [THREADS=1] [MFRAC=0.3]
#include "rad/threshold.hpp"
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
using namespace rad;
int main(int argc, char** argv) {
    long n = argc > 1 ? static_cast<long>(atof(argv[1])) : 100000000; int threads = argc > 2 ? atoi(argv[2]) : 1;
    double mfrac = argc > 3 ? atof(argv[3]) : 0.3;
    std::vector<float> g(n);
    std::mt19937_64 rng(0); std::uniform_real_distribution<float> U(0, 1);
    for (auto& x : g) x = U(rng);
    double m = mfrac * n, w = 1.0 - m / n;
    Losses L{nullptr, w};
    auto now = [] { return std::chrono::steady_clock::now(); };
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    for (int rep = 0; rep < 5; ++rep) {
        auto t0 = now();
        auto br = sample_bracket(g.data(), L, n, m, threads);
        auto t1 = now();
        auto loc = first_pass(g.data(), L, n, m, threads, br, kApproxMarginBits);
        auto t2 = now();
        auto ss = threshold_support(g.data(), L, n, m, 1000, threads);
        auto t3 = now();
        double s = stream_sum(g.data(), n, threads);
        auto t4 = now();
        auto bs = support_block_sums<float, false>(g.data(), L, n, ss.search.tau, threads);
        auto t5 = now();
        BlockSums bs2(num_blocks(n));
        std::vector<std::vector<std::int64_t>> hits(static_cast<size_t>(num_blocks(n)));
        std::vector<double> sk(static_cast<size_t>(num_blocks(n) * kSketchParts));
        auto t6 = now();
        for_each_block(n, threads, [&](std::int64_t blk) {
            Collect<float> c{loc.bin_lo, loc.bin_hi, &hits[static_cast<size_t>(blk)]};
            support_block<true, float, false>(g.data(), L, n, blk, static_cast<double>(loc.bin_hi), bs2, c, sk.data() + blk * kSketchParts);
        });
        auto t7 = now();
        auto t8 = now();
        for_each_block(n, threads, [&](std::int64_t blk) {
            Collect<float> c{loc.bin_lo, loc.bin_hi, &hits[static_cast<size_t>(blk)]};
            support_block<true, float, false>(g.data(), L, n, blk, static_cast<double>(loc.bin_hi), bs2, c, nullptr);
        });
        auto t9 = now();
        for_each_block(n, threads, [&](std::int64_t blk) {
            support_block<false, float, false>(g.data(), L, n, blk, static_cast<double>(loc.bin_hi), bs2, {}, sk.data() + blk * kSketchParts);
        });
        auto t10 = now();
        std::printf("collecting+sketch %.1f  collecting only %.1f  sketch only %.1f ms\n", ms(t6, t7), ms(t8, t9), ms(t9, t10));
        // the support pass (H only) with each way of forming 1/a (rad/reciprocal.hpp)
        const int chosen = support_reciprocal_mode();
        double by[2];
        for (int mode = 1; mode <= 2; ++mode) {
            set_reciprocal_mode(mode);
            auto u0 = now();
            auto bm = support_block_sums<float, false>(g.data(), L, n, ss.search.tau, threads);
            by[mode - 1] = ms(u0, now());
            if (bm.h != bs.h) std::printf("the support sums differ with mode %d\n", mode);
        }
        set_reciprocal_mode(chosen);
        std::printf("support(H only) divide %.1f  mixed %.1f ms (chosen: %s)\n", by[0], by[1], chosen == 2 ? "mixed" : "divide");
        // blocks holding a point between where the support pass sums from (the first pass's
        // estimate of tau, else bin_hi) and tau: the ones threshold_support sums twice
        long redo = 0, nb = num_blocks(n), inbin = 0;
        if (!loc.done) {
            const double from = std::isnan(loc.steer) ? static_cast<double>(loc.bin_hi) : loc.steer;
            const double lo_r = std::min(from, ss.search.tau), hi_r = std::max(from, ss.search.tau);
            for (long blk = 0; blk < nb; ++blk) {
                bool hit = false;
                for (long i = blk * kBlock; i < std::min(n, (blk + 1) * kBlock); ++i) {
                    inbin += g[i] >= loc.bin_lo && g[i] < loc.bin_hi;
                    hit |= g[i] >= lo_r && g[i] < hi_r;
                }
                redo += hit;
            }
        }
        long in_bracket = 0;  // the points the first pass bins (inside the sample's bracket)
        for (long i = 0; i < n; ++i) in_bracket += ordered_bits(g[i]) >= br.lo && ordered_bits(g[i]) < br.hi;
        std::printf("steer %.9g bin [%.9g, %.9g) tau %.9g | bracket [%.9g, %.9g) holds %.3f%% of the pool\n", loc.steer,
                    (double)loc.bin_lo, (double)loc.bin_hi, ss.search.tau, (double)from_bits<float>(br.lo),
                    (double)from_bits<float>(br.hi), 100.0 * in_bracket / n);
        std::printf("sample %.1f  first_pass %.1f  threshold_support %.1f  read %.1f  support(H only) %.1f ms | done %d bin_count %ld in-bin %ld redo %ld of %ld blocks (%g)\n",
                    ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4), ms(t4, t5), (int)loc.done, (long)loc.bin_count, inbin, redo, nb, s + bs.h[0]);
    }
}

// Fixed-size blocks and the canonical summation order (mirrors canonical_prefix in
// python/rad/_backends/canonical.py): sequential inside aligned blocks of kBlock items,
// block totals summed sequentially. Results do not depend on the thread count.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#ifdef RAD_HAVE_OPENMP
#include <omp.h>
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

// Run body(block) for every block, on up to `threads` threads.
template <class Body>
void for_each_block(std::int64_t n, int threads, Body&& body) {
    const std::int64_t nb = num_blocks(n);
#ifdef RAD_HAVE_OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::max(1, threads)) if (nb > 1 && threads > 1)
#endif
    for (std::int64_t blk = 0; blk < nb; ++blk)
        if (!cancelled()) body(blk);
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

}  // namespace rad

// Sort-free search for Theorem 1's support (docs/design.md §1, "threshold form"; §3); the Python loop is python/rad/_backends/radix_select.py.
//
// With D(t) = t * H(>t) - G(>t) + m  (H, G: sums of 1/a and g/a over points with g > t),
// a tie group at gain y joins the support iff D(y) >= 0 (this is g_k H_{k-1} >= G_{k-1} - m
// of the sorted scan), and D is increasing in t. So the support is {g >= tau} where tau
// is the smallest gain with D >= 0: a radix select over the float bit patterns. Each level
// histograms 16 bits (count, sum 1/a, sum g/a, min per bin, per thread), scans bins from
// the top to the first one whose lower edge has D < 0, and descends into it; a bin with
// few points is gathered and resolved exactly.
//
// The sums here are added in a different order than the sorted path's canonical prefix
// sums, so a group whose D lies within rounding of 0 is reported as a near tie and the
// caller falls back to the sorted path: the two paths always agree on k* and tau.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "rad/support.hpp"
#include "rad/parallel.hpp"
#include "rad/radix_sort.hpp"

namespace rad {

struct ThresholdResult {
    int status;            // 0: ok, 1: near tie (use the sorted path), 2: invalid value seen
    double tau;            // smallest gain in the support
    std::int64_t kstar;    // number of points with g >= tau
    double g_total;        // sum of g/a over a > 0
};

struct HistBin {
    std::int64_t count = 0;
    double h = 0.0, g = 0.0;
    double min = std::numeric_limits<double>::infinity();
};

template <class T>
inline T from_bits(uint_of<T> u) {
    T x;
    std::memcpy(&x, &u, sizeof(T));
    return x;
}

template <class T>
ThresholdResult threshold_search(const T* g, Losses L, std::int64_t n, double m, int threads) {
    using U = uint_of<T>;
    constexpr int kDigit = 16;
    constexpr int kBins = 1 << kDigit;
    constexpr int kBits = 8 * static_cast<int>(sizeof(U));
    constexpr std::int64_t kGatherMax = std::int64_t{1} << 18;
    const int nt = std::max(1, threads);
    const double inf = std::numeric_limits<double>::infinity();

    ThresholdResult res{0, 0.0, 0, 0.0};
    double acc_h = 0.0, acc_g = 0.0;    // sums over points above the current range
    std::int64_t acc_n = 0;
    double last_min = inf;               // smallest gain among points known to join
    double pass_d = inf;                 // D at the lower edge of the last bin that joined
    double fail_d = -inf;                // D at the lower edge of the bin that failed
    double scale = m;                    // magnitude of the terms of D, for the tie margin
    U prefix = 0;
    int shift = kBits - kDigit;
    std::vector<HistBin> hist(static_cast<size_t>(nt) * kBins);

    for (int level = 0;; ++level) {
        std::fill(hist.begin(), hist.end(), HistBin{});
        const int pshift = shift + kDigit;  // bits above this level's digit
        const bool all = level == 0;
        bool bad = false;
#ifdef RAD_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) reduction(|| : bad)
#endif
        for (int t = 0; t < nt; ++t) {
            HistBin* h = &hist[static_cast<size_t>(t) * kBins];
            const std::int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
            for (std::int64_t i = lo; i < hi; ++i) {
                const T v = g[i];
                if (all && !(v >= T(0) && v <= std::numeric_limits<T>::max())) {
                    bad = true;
                    continue;
                }
                const U u = ordered_bits(v);
                if (!all && pshift < kBits && (u >> pshift) != prefix) continue;
                HistBin& bin = h[(u >> shift) & (kBins - 1)];
                const double gi = v;
                const double a = gi + L.at(i, gi);
                const double r = a > 0 ? 1.0 / a : 0.0;
                bin.count += 1;
                bin.h += r;
                bin.g += gi * r;
                bin.min = std::min(bin.min, gi);
            }
        }
        if (bad) {
            res.status = 2;
            return res;
        }
        for (int t = 1; t < nt; ++t)
            for (int b = 0; b < kBins; ++b) {
                HistBin& d = hist[b];
                const HistBin& s = hist[static_cast<size_t>(t) * kBins + b];
                d.count += s.count;
                d.h += s.h;
                d.g += s.g;
                d.min = std::min(d.min, s.min);
            }
        if (level == 0) {
            for (int b = 0; b < kBins; ++b) res.g_total += hist[b].g;
            scale += res.g_total;
        }
        // Scan bins from the top; stop at the first whose lower edge has D < 0.
        int boundary = -1, lowest = -1;
        for (int b = kBins - 1; b >= 0; --b) {
            const HistBin& bin = hist[b];
            if (!bin.count) continue;
            lowest = b;
            const double edge = static_cast<double>(from_bits<T>(static_cast<U>((pshift < kBits ? prefix << pshift : U(0)) | (static_cast<U>(b) << shift))));
            const double hh = acc_h + bin.h, gg = acc_g + bin.g;
            const double d_edge = edge * hh - gg + m;
            if (d_edge < 0) {
                boundary = b;
                fail_d = d_edge;
                break;
            }
            pass_d = d_edge;
            acc_h = hh;
            acc_g = gg;
            acc_n += bin.count;
            last_min = bin.min;
        }
        if (boundary < 0) {
            // Every group in range joins: resolve the lowest bin for its smallest gain.
            if (lowest < 0) break;
            const HistBin& bin = hist[lowest];
            acc_h -= bin.h;
            acc_g -= bin.g;
            acc_n -= bin.count;
            boundary = lowest;
        }
        const HistBin& bin = hist[boundary];
        if (bin.count > kGatherMax && shift > 0) {
            prefix = static_cast<U>((pshift < kBits ? prefix << kDigit : U(0)) | static_cast<U>(boundary));
            shift -= kDigit;
            continue;
        }
        // Gather the boundary bin and resolve its tie groups exactly in descending order.
        const U key = static_cast<U>((pshift < kBits ? prefix << kDigit : U(0)) | static_cast<U>(boundary));
        std::vector<std::vector<std::pair<double, double>>> parts(static_cast<size_t>(nt));
#ifdef RAD_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
        for (int t = 0; t < nt; ++t) {
            const std::int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
            for (std::int64_t i = lo; i < hi; ++i) {
                const T v = g[i];
                if ((ordered_bits(v) >> shift) != key) continue;
                const double gi = v;
                parts[t].emplace_back(gi, gi + L.at(i, gi));
            }
        }
        std::vector<std::pair<double, double>> items;
        for (auto& p : parts) items.insert(items.end(), p.begin(), p.end());
        std::sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
        double h = acc_h, gs = acc_g, tau = last_min;
        std::int64_t k = acc_n;
        // D of the last joining and first failing groups; when one of them lies in another
        // bin, D at that bin's edge bounds it (D is increasing): |D| there is no smaller.
        double d_in = pass_d, d_out = fail_d;
        for (size_t s = 0; s < items.size();) {
            const double y = items[s].first;
            const double d = y * h - gs + m;
            if (d < 0) {
                d_out = d;
                break;
            }
            // The very first group's D is exactly m (no sums yet): never a rounding question.
            d_in = k == 0 ? inf : d;
            tau = y;
            for (; s < items.size() && items[s].first == y; ++s, ++k) {
                const double a = items[s].second;
                if (a > 0) {
                    h += 1.0 / a;
                    gs += y / a;
                }
            }
        }
        res.tau = tau;
        res.kstar = k;
        // Near tie: a decision within rounding of D = 0 (terms of D are ~ t H + G + m).
        const double margin = 1e-10 * (std::abs(tau) * h + gs + m);
        if (std::abs(d_in) < margin || std::abs(d_out) < margin || std::abs(res.g_total - m) < 1e-10 * scale)
            res.status = 1;
        // 1/a overflowed (subnormal input): the sums mean nothing, let the sorted scan decide.
        if (!std::isfinite(h) || !std::isfinite(gs) || !std::isfinite(res.g_total) || std::isnan(d_in) || std::isnan(d_out))
            res.status = 1;
        return res;
    }
    return res;
}

}  // namespace rad

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
#include <memory>
#include <new>
#include <numeric>
#include <type_traits>
#include <vector>

#include "rad/support.hpp"
#include "rad/parallel.hpp"
#include "rad/radix_sort.hpp"

namespace rad {

struct ThresholdResult {
    int status;            // 0: ok, 1: near tie (use the sorted path), 2: invalid value seen,
                           // 3 (threshold_support only): the caps bind, tau unresolved (NaN),
                           // kstar an upper bound of k* below b
    double tau;            // smallest gain in the support
    std::int64_t kstar;    // number of points with g >= tau
    double g_total;        // sum of g/a over a > 0
};

// The sums above, their count, the minimum gain among them and D at the last edge passed,
// before a bin joined. Where every bin passes, the lowest bin is resolved point by point
// from this state, not by subtracting its sums: a sum above that is far smaller than the
// bin's (a loss 1e15 times the others') would cancel to noise
// (radix_select.scan_bins' twin).
struct Reopened {
    double h, g;
    std::int64_t n;
    double min, d;

    void restore(double& acc_h, double& acc_g, std::int64_t& acc_n, double& last_min, double& pass_d) const {
        acc_h = h, acc_g = g, acc_n = n, last_min = min, pass_d = d;
    }
};

struct HistBin {
    std::int64_t count = 0;
    double h = 0.0, g = 0.0;
    double min = std::numeric_limits<double>::infinity();

    void add(const HistBin& o) {
        count += o.count;
        h += o.h;
        g += o.g;
        min = std::min(min, o.min);
    }
};

// The per-thread histograms (rows of `bins` in `hist`, one per thread) added into row 0,
// row by row: each bin's additions in the same order whatever the split. The `nt` threads
// fold a slice of the bins each (16 rows of the float32 pass's 16,384 bins, 6 MB, took
// 0.3 ms on one thread: a tenth of a 16-thread read of 1e8 points).
template <class Bin>
void fold_rows(Bin* hist, int nt, int bins) {
    const int slices = nt > 1 && static_cast<std::int64_t>(nt) * bins >= (1 << 16) ? nt : 1;
    parallel_for(slices, slices, [&](std::int64_t k) {
        const int b0 = static_cast<int>(bins * k / slices), b1 = static_cast<int>(bins * (k + 1) / slices);
        for (int t = 1; t < nt; ++t)
            for (int b = b0; b < b1; ++b) hist[b].add(hist[static_cast<size_t>(t) * bins + b]);
    });
}

template <class Bin>
void fold_rows(std::vector<Bin>& hist, int nt, int bins) {
    fold_rows(hist.data(), nt, bins);
}

// Uninitialised room for the threads' rows of bins, each row constructed by the thread
// that fills it (construct_row), so in parallel and where that thread's cache is: one
// thread constructing sixteen rows of the float32 pass (6 MB, freshly mapped pages) took
// 0.6-2 ms on this 2-core VM, a sixth of the whole pass on sixteen threads. The bins must
// be trivially destructible.
template <class Bin>
class ThreadRows {
   public:
    explicit ThreadRows(std::size_t count)
        : p_(static_cast<Bin*>(::operator new(count * sizeof(Bin), std::align_val_t(64)))) {}
    ~ThreadRows() { ::operator delete(p_, std::align_val_t(64)); }
    ThreadRows(const ThreadRows&) = delete;
    ThreadRows& operator=(const ThreadRows&) = delete;
    // Row t of `bins` bins, value-initialised (call once per row, from its thread).
    Bin* construct_row(int t, int bins) {
        Bin* row = p_ + static_cast<std::size_t>(t) * static_cast<std::size_t>(bins);
        std::uninitialized_value_construct_n(row, bins);
        return row;
    }
    Bin* data() { return p_; }

   private:
    static_assert(std::is_trivially_destructible_v<Bin>);
    Bin* p_;
};

template <class T>
inline T from_bits(uint_of<T> u) {
    T x;
    std::memcpy(&x, &u, sizeof(T));
    return x;
}

// Exact resolution of a gathered boundary bin (items: (g, a)), given the sums of the
// points known to join and the D values that bound the decisions around the bin.
inline ThresholdResult resolve_gathered(std::vector<std::pair<double, double>>& items, double acc_h, double acc_g,
                                        std::int64_t acc_n, double last_min, double pass_d, double fail_d, double m,
                                        double g_total, double scale) {
    const double inf = std::numeric_limits<double>::infinity();
    ThresholdResult res{0, 0.0, 0, g_total};
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
    if (std::abs(d_in) < margin || std::abs(d_out) < margin || std::abs(g_total - m) < 1e-10 * scale) res.status = 1;
    // 1/a overflowed (subnormal input): the sums mean nothing, let the sorted scan decide.
    if (!std::isfinite(h) || !std::isfinite(gs) || !std::isfinite(g_total) || std::isnan(d_in) || std::isnan(d_out))
        res.status = 1;
    return res;
}

template <class T>
ThresholdResult threshold_radix(const T* g, Losses L, std::int64_t n, double m, int threads) {
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
#pragma omp parallel for num_threads(nt) schedule(static) reduction(|| : bad) if (nt > 1)
#endif
        for (int t = 0; t < nt; ++t) {
            HistBin* h = &hist[static_cast<size_t>(t) * kBins];
            const std::int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
            for (std::int64_t i = lo; i < hi; ++i) {
                if ((i & 0xFFFF) == 0 && cancelled()) break;
                const T v = g[i];
                if (all && !valid_value(v)) {
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
        fold_rows(hist, nt, kBins);
        if (level == 0) {
            for (int b = 0; b < kBins; ++b) res.g_total += hist[b].g;
            scale += res.g_total;
        }
        // Scan bins from the top; stop at the first whose lower edge has D < 0.
        int boundary = -1, lowest = -1;
        Reopened before{acc_h, acc_g, acc_n, last_min, pass_d};
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
            before = {acc_h, acc_g, acc_n, last_min, pass_d};
            pass_d = d_edge;
            acc_h = hh;
            acc_g = gg;
            acc_n += bin.count;
            last_min = bin.min;
        }
        if (boundary < 0) {
            // Every group in range joins: resolve the lowest bin for its smallest gain, from
            // the state before it joined (Reopened).
            if (lowest < 0) break;
            before.restore(acc_h, acc_g, acc_n, last_min, pass_d);
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
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
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
        return resolve_gathered(items, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, m, res.g_total, scale);
    }
    return res;
}

// ------------------------------------------------------------------ bracketed first pass
//
// The default search (docs/design.md §3): a strided sample of the gains brackets tau
// between two gains, [lo, hi) in ordered bits. One streaming pass then validates every
// gain, sums g/a over the pool, sums (count, 1/a, g/a, min g) over the points above the
// bracket with vector lanes, and histograms only the few points inside the bracket into
// kFine bins (per thread 128 KiB, in L2). The boundary fine bin is then gathered by a
// compare-only pass and resolved exactly as in the radix search. A bracket that misses
// tau (D at its top edge < 0, or D at its bottom edge >= 0 with points below) or a
// boundary bin with more than kGatherMax points sends the search to threshold_radix:
// the result never depends on the bracket, only the speed does.

constexpr int kFineBits = 12;
constexpr int kFine = 1 << kFineBits;
constexpr std::int64_t kBracketGatherMax = std::int64_t{1} << 18;

template <class T>
struct Bracket {
    uint_of<T> lo, hi;  // ordered bits: the bracket is lo <= u < hi
};

// The whole range of finite non-negative values: every point inside the bracket.
template <class T>
Bracket<T> full_bracket() {
    return {uint_of<T>(0), ordered_bits(std::numeric_limits<T>::infinity())};
}

// The size of refine_bracket's sample at n points: its cost (a strided read and the sums
// of the points above the bracket, on every thread) against the first pass's binning of
// the points inside (about 7 / sqrt(size) of the pool, also on every thread) is least
// near (7 n)^(2/3) when a sample point and an inside point cost alike; as a power of two
// in [2^16, 2^22] (2^20 at 1e8, 2^22 at 1e9), and none below 2^24 points (0). Where it
// refines, sample_bracket's own sample is 2^14 points.
constexpr int kSampleBitsBeforeRefine = 14;
inline std::int64_t refine_size(std::int64_t n) {
    if (n < (std::int64_t{1} << 24)) return 0;
    const double best = std::cbrt(std::pow(7.0 * static_cast<double>(n), 2.0));
    const int bits = static_cast<int>(std::lround(std::log2(best)));
    return std::int64_t{1} << std::min(22, std::max(16, bits));
}

// Sums over sampled points of D(t) = t H - G + m's terms and of their squares: a point
// above t adds (t - g) x to D (x = 1/a), and (t - g)^2 x^2 = t^2 x^2 - 2 t g x^2 + g^2 x^2.
struct SampleSums {
    double h = 0.0, g = 0.0;              // x, g x
    double q0 = 0.0, q1 = 0.0, q2 = 0.0;  // x^2, g x^2, g^2 x^2

    void add_point(double y, double a) {
        if (!(a > 0)) return;
        const double x = 1.0 / a, xx = x * x;
        h += x, g += y * x, q0 += xx, q1 += y * xx, q2 += y * y * xx;
    }
    void add(const SampleSums& o) { h += o.h, g += o.g, q0 += o.q0, q1 += o.q1, q2 += o.q2; }
    // D at t with each sampled point standing for f of the pool's, and its standard
    // deviation (sampling with replacement; the raw second moment, so an upper bound).
    double d(double t, double f, double m) const { return t * f * h - f * g + m; }
    double sd(double t, double f) const { return f * std::sqrt(std::max(0.0, t * t * q0 - 2.0 * t * q1 + q2)); }
};

// The sample's bracket `br` narrowed by a larger strided sample of `size` points (runs of
// 256, on `threads` threads). Each run sums SampleSums over its points above br and keeps
// the few inside; those are binned into 4,096 equal ranges of br's bits, and a scan down
// the bins puts the new bracket's edges where
// - D's estimate at a bin's lower edge is within 4 standard deviations of 0 (a margin in
//   D: it follows tie groups, where a rank's estimate jumps from one group to the next), and
// - the ranks r -+ (4 sqrt(r) + 32) around the first bin whose edge fails, as sample_bracket
//   draws its own (the +32 for a tau among the first few points),
// whichever is wider: about sqrt(size / 2^14) times narrower than br. A bracket only steers
// the speed (the pass detects a miss and falls back), so the sums above may be approximate
// (float reciprocals with RAD losses); they are added run by run in run order, so the
// bracket does not depend on the thread count. Always within br; br itself where the
// sample holds an invalid value or the scan leaves br.
template <class T>
Bracket<T> refine_bracket(const T* g, Losses L, std::int64_t n, double m, int threads, Bracket<T> br,
                          std::int64_t size) {
    using U = uint_of<T>;
    constexpr std::int64_t kRun = 256;
    size -= size % kRun;
    if (size < 2 * kRun || size > n / 2 || br.hi <= br.lo) return br;
    const std::int64_t runs = size / kRun, stride = (n - kRun) / (runs - 1);
    const int nt = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(std::max(1, threads), runs / 16)));
    std::vector<SampleSums> run_sums(static_cast<size_t>(runs));
    std::vector<std::int64_t> run_above(static_cast<size_t>(runs));
    std::vector<std::vector<T>> keys(static_cast<size_t>(nt));
    std::vector<std::vector<double>> avals(static_cast<size_t>(nt));
    std::vector<char> bad(static_cast<size_t>(nt), 0);
    const T hi_v = from_bits<T>(br.hi), lo_v = from_bits<T>(br.lo);
    const double c = 1.0 / (1.0 + L.w);  // g / a with RAD losses
#ifdef RAD_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int t = 0; t < nt; ++t) {
        std::vector<T>& kt = keys[static_cast<size_t>(t)];
        std::vector<double>& at = avals[static_cast<size_t>(t)];
        T buf[kRun];
        for (std::int64_t r = runs * t / nt; r < runs * (t + 1) / nt && !bad[static_cast<size_t>(t)]; ++r) {
            const T* x = g + stride * r;
            // The run a few runs on: a strided read waits a memory latency a line otherwise.
            constexpr std::int64_t kAhead = 4;
            if (r + kAhead < runs) prefetch_lines(g + stride * (r + kAhead) - kPrefetchBytes / sizeof(T), kRun * sizeof(T));
            bool ok = true;
            std::int64_t above = 0;
            SampleSums& rs = run_sums[static_cast<size_t>(r)];
            if (L.values) {
                for (std::int64_t j = 0; j < kRun; ++j) {
                    const T v = x[j];
                    ok &= valid_value(v);
                    const double a = static_cast<double>(v) + L.values[stride * r + j];
                    if (v >= hi_v) {
                        ++above;
                        rs.add_point(v, a);
                    } else if (v >= lo_v) {
                        kt.push_back(v);
                        at.push_back(a);
                    }
                }
            } else {
                // With a = g / c: x = c / g, g x = c, and the squares c^2 / g^2, c^2 / g, c^2.
                // The reciprocals of the points above and their squares summed in T's lanes;
                // the few points inside found from their bits.
                using V = std::conditional_t<sizeof(T) == 4, simd::f16, simd::d8>;
                using M = std::conditional_t<sizeof(T) == 4, simd::i16, simd::l8>;
                constexpr int kLanes = 64 / sizeof(T);
                const V zero = {}, one = zero + T(1), top = zero + hi_v, bottom = zero + lo_v,
                        big = zero + std::numeric_limits<T>::max();
                V s1 = zero, s2 = zero;
                M up_n = {}, invalid = {};
                std::uint64_t in_bits[kRun / kLanes];  // lane k of vector q: bit k of word q
                for (std::int64_t j = 0; j < kRun; j += kLanes) {
                    const V v = simd::load<V>(x + j);
                    const M up = v >= top;
                    invalid |= ~((v >= zero) & (v <= big));
                    up_n -= up;
                    const V rv = simd::select(up, one / v, zero);
                    s1 += rv;
                    s2 += rv * rv;
                    in_bits[j / kLanes] = simd::movemask((v >= bottom) & ~up);
                }
                double r1 = 0.0, r2 = 0.0;
                for (int k = 0; k < kLanes; ++k) r1 += s1[k], r2 += s2[k], above += up_n[k], ok &= invalid[k] == 0;
                rs.h = c * r1, rs.g = c * static_cast<double>(above);
                rs.q0 = c * c * r2, rs.q1 = c * c * r1, rs.q2 = c * c * static_cast<double>(above);
                std::int64_t nin = 0;  // the inside: a loop over their bits (one mispredicted exit a run)
                for (std::int64_t q = 0; q < kRun / kLanes; ++q)
                    for (std::uint64_t bits = in_bits[q]; bits; bits &= bits - 1)
                        buf[nin++] = x[q * kLanes + __builtin_ctzll(bits)];
                kt.insert(kt.end(), buf, buf + nin);
            }
            if (!ok) bad[static_cast<size_t>(t)] = 1;
            run_above[static_cast<size_t>(r)] = above;
        }
    }
    for (char b : bad)
        if (b) return br;
    SampleSums s;
    std::int64_t above = 0;
    for (std::int64_t r = 0; r < runs; ++r) s.add(run_sums[static_cast<size_t>(r)]), above += run_above[static_cast<size_t>(r)];
    // The points inside into kBins equal ranges of br's bits, in run order (one thread).
    constexpr int kBins = 1 << 12;
    int sh = 0;
    while (sh < static_cast<int>(8 * sizeof(U)) && ((br.hi - br.lo - 1) >> sh) >= static_cast<U>(kBins)) ++sh;
    std::vector<std::int64_t> cnt(kBins, 0);
    std::vector<SampleSums> bins(kBins);
    for (int t = 0; t < nt; ++t) {
        const std::vector<T>& kt = keys[static_cast<size_t>(t)];
        const std::vector<double>& at = avals[static_cast<size_t>(t)];
        for (size_t j = 0; j < kt.size(); ++j) {
            const double y = kt[j];
            const size_t k = static_cast<size_t>((ordered_bits(kt[j]) - br.lo) >> sh);
            ++cnt[k];
            bins[k].add_point(y, L.values ? at[j] : y + L.w * y);
        }
    }
    // Down the bins from br's top edge, D at each bin's lower edge with the sums over the
    // points at or above it (a point at t adds nothing to D(t)).
    const double f = static_cast<double>(n) / static_cast<double>(size), kSigmas = 4.0;
    auto edge_bits = [&](std::int64_t k) { return static_cast<U>(br.lo + (static_cast<U>(k) << sh)); };
    if (s.d(static_cast<double>(hi_v), f, m) + kSigmas * s.sd(static_cast<double>(hi_v), f) < 0) return br;
    Bracket<T> by_d = br;
    bool sure_above = true;          // every edge so far certainly at or above tau
    std::int64_t fail = -1, before = 0;  // the first bin whose edge fails; the points above it
    for (std::int64_t k = kBins - 1, seen = 0; k >= 0; --k) {
        s.add(bins[static_cast<size_t>(k)]);
        const double e = static_cast<double>(from_bits<T>(edge_bits(k))), d = s.d(e, f, m), sd = s.sd(e, f);
        // D(e) >= 0 certainly: tau is at most the smallest gain at or above e, and that
        // lies below the top of the lowest bin at or above e that holds a sampled point.
        sure_above &= d - kSigmas * sd >= 0;
        if (sure_above && cnt[static_cast<size_t>(k)] > 0) by_d.hi = std::min(br.hi, edge_bits(k + 1));
        if (fail < 0 && d < 0) fail = k, before = seen;
        if (d + kSigmas * sd < 0) {  // D(e) < 0 certainly: tau lies above e
            by_d.lo = edge_bits(k);
            break;
        }
        seen += cnt[static_cast<size_t>(k)];
    }
    // The rank margin: the bins holding the inside ranks before - delta and
    // before + count + delta (r counted from the top of the whole sample; with no bin
    // failing, tau's rank is the last).
    if (fail < 0) before = std::accumulate(cnt.begin(), cnt.end(), std::int64_t{0});
    const std::int64_t in_fail = fail < 0 ? 0 : cnt[static_cast<size_t>(fail)];
    const std::int64_t delta = static_cast<std::int64_t>(4.0 * std::sqrt(static_cast<double>(above + before + in_fail / 2) + 1.0)) + 32;
    Bracket<T> by_rank = br;
    std::int64_t seen = 0;
    for (std::int64_t q = kBins - 1; q >= 0; --q) {
        const std::int64_t cq = cnt[static_cast<size_t>(q)];
        if (seen <= before - delta && before - delta < seen + cq) by_rank.hi = std::min(br.hi, edge_bits(q + 1));
        seen += cq;
        if (seen > before + in_fail + delta) {
            by_rank.lo = edge_bits(q);
            break;
        }
    }
    return Bracket<T>{std::min(by_d.lo, by_rank.lo), std::max(by_d.hi, by_rank.hi)};
}

// A bracket for tau from a strided sample of 2^14 to 2^20 gains (contiguous runs of 64):
// the sample's own threshold scan with sums scaled by n / sample size gives a rank r;
// the bracket spans the sample ranks r -+ (4 sqrt(r) + 32). From 2^24 points the sample
// is 2^14 and refine_bracket narrows its bracket.
template <class T>
Bracket<T> sample_bracket(const T* g, Losses L, std::int64_t n, double m, int threads) {
    // The sample's size trades its own cost (read, sort and scan on one thread) against the
    // bracket pass's binning of the points inside the bracket (about 7 / sqrt(sample) of
    // the pool, spread over the threads): the sum is least near (n / (4 threads))^(2/3),
    // taken to the nearest power of two in [2^14, 2^20] (2^16 at 1e8 points on 1 or 2
    // threads, 2^18 at 1e9 on 2). Tuned when a sample point cost ~100 ns and an inside
    // point ~8 ns; both are cheaper now (a value sort, the inside points binned in
    // batches), and 2^16 was still the fastest of 2^15-2^17 at 1e8 on two threads.
    const double best = std::cbrt(std::pow(static_cast<double>(n) / (4.0 * std::max(1, threads)), 2.0));
    const int bits = static_cast<int>(std::lround(std::log2(std::max(best, 1.0))));
    const std::int64_t kSample = std::int64_t{1} << (refine_size(n) ? kSampleBitsBeforeRefine : std::min(20, std::max(14, bits)));
    constexpr std::int64_t kRun = 64;
    // The sample's gains, and with explicit losses each one's a = g + l (with RAD losses a
    // follows from the gain: a = g + w g, formed where the scan needs it). Values only:
    // pairs of doubles were 4 MB at 2^18 points, written and, in a fresh process, faulted in.
    std::vector<T> keys;
    std::vector<double> avals;
    keys.reserve(static_cast<size_t>(std::min(n, kSample)));
    if (L.values) avals.reserve(keys.capacity());
    auto take = [&](std::int64_t i) {
        const T v = g[i];
        if (!valid_value(v)) return false;
        keys.push_back(v);
        if (L.values) avals.push_back(static_cast<double>(v) + L.values[i]);
        return true;
    };
    if (n <= kSample) {
        for (std::int64_t i = 0; i < n; ++i)
            if (!take(i)) return full_bracket<T>();
    } else {
        const std::int64_t runs = kSample / kRun, stride = (n - kRun) / (runs - 1);
        for (std::int64_t c = 0; c < runs; ++c) {
            const std::int64_t start = stride * c;
            // A few runs on (see refine_bracket).
            if (c + 8 < runs) prefetch_lines(g + start + 8 * stride - kPrefetchBytes / sizeof(T), kRun * sizeof(T));
            for (std::int64_t i = start; i < start + kRun; ++i)
                if (!take(i)) return full_bracket<T>();
        }
    }
    const std::int64_t ns = static_cast<std::int64_t>(keys.size());
    if (ns == 0) return full_bracket<T>();
    // Descending by gain: a radix sort of the sample's own values (a comparison sort of
    // the pairs took ~4 ms of a 1e8 select's ~150 on two threads; this runs on one); with
    // explicit losses a radix argsort, whose order carries the a values along.
    std::vector<std::int64_t> order;
    if (L.values) {
        order.resize(static_cast<size_t>(ns));
        radix_argsort(keys.data(), ns, true, order.data(), 1);
    } else {
        radix_sort_descending(keys.data(), ns);
    }
    // The j-th largest sample point's (g, a).
    auto at = [&](std::int64_t j) -> std::pair<double, double> {
        if (order.empty()) {
            const double gj = keys[static_cast<size_t>(j)];
            return {gj, gj + L.w * gj};  // as in any pass over the pool
        }
        const size_t o = static_cast<size_t>(order[static_cast<size_t>(j)]);
        return {static_cast<double>(keys[o]), avals[o]};
    };
    const double f = static_cast<double>(n) / static_cast<double>(ns);
    double h = 0.0, gs = 0.0;
    std::int64_t r = ns;
    for (std::int64_t j = 0; j < ns; ++j) {
        const double y = at(j).first;
        if (y * f * h - f * gs + m < 0) {
            r = j;
            break;
        }
        const double a = at(j).second;
        if (a > 0) {
            h += 1.0 / a;
            gs += y / a;
        }
    }
    const std::int64_t delta = static_cast<std::int64_t>(4.0 * std::sqrt(static_cast<double>(r) + 1.0)) + 32;
    Bracket<T> br = full_bracket<T>();
    if (r - delta >= 0) br.hi = ordered_bits(static_cast<T>(at(r - delta).first)) + 1;
    if (r + delta < ns) br.lo = ordered_bits(static_cast<T>(at(r + delta).first));
    return refine_bracket(g, L, n, m, threads, br, refine_size(n));
}

struct alignas(64) BracketAcc {
    double g_total = 0.0, h = 0.0, g = 0.0;
    double min = std::numeric_limits<double>::infinity();
    std::int64_t above = 0, below = 0;
    bool bad = false;
};


// One thread's share [lo, hi) of the bracket pass. Values are compared, not bits: for
// non-negative floats v >= from_bits(u) iff ordered_bits(v) >= u. Eight points per step
// (one 8-wide vector); a point inside the bracket is divided again when it is binned.
template <class T, bool HasLosses>
void bracket_pass_range(const T* g, Losses L, std::int64_t lo, std::int64_t hi, uint_of<T> ulo, uint_of<T> uhi,
                        int sh, BracketAcc& acc, HistBin* fine) {
    using U = uint_of<T>;
    using namespace simd;
    constexpr int kRun = 64;
    const double inf = std::numeric_limits<double>::infinity();
    auto inside = [&](std::int64_t i, double r) {  // r = 1/a of point i (0 where a = 0)
        const double gi = g[i];
        const std::size_t b = static_cast<std::size_t>((ordered_bits(g[i]) - ulo) >> sh);
        HistBin& bin = fine[b];  // one cache line holds a bin's four sums
        bin.count += 1;
        bin.h += r;
        bin.g += gi * r;
        bin.min = std::min(bin.min, gi);
    };
    const d8 lo_v = splat8(static_cast<double>(from_bits<T>(ulo))), hi_v = splat8(static_cast<double>(from_bits<T>(uhi)));
    const d8 zero = splat8(0.0), one = splat8(1.0), w = splat8(L.w), maxv = splat8(static_cast<double>(std::numeric_limits<T>::max()));
    d8 t = zero, h = zero, s = zero, mnv = splat8(inf);
    l8 n_up = {}, n_ge_lo = {}, bad = {};
    // The indices of the points inside, compressed into `buf` by the vector loop and binned
    // in batches (as in approx_pass_range: a branch per run on them cost more than the rest).
    constexpr int kBuf = 1024;
    alignas(64) std::int64_t buf[kBuf + kRun];
    int nbuf = 0;
    auto drain = [&]() {
        for (int j = 0; j < nbuf; ++j) {
            const std::int64_t k = buf[j];
            const double gk = g[k];
            const double a = gk + (HasLosses ? L.values[k] : L.w * gk);  // as the vector loop
            inside(k, a > 0 ? 1.0 / a : 0.0);
        }
        nbuf = 0;
    };
    std::int64_t i = lo;
    for (; i + kRun <= hi; i += kRun) {
        if (((i - lo) & 0xFFFF) == 0 && cancelled()) break;
        prefetch_lines(g + i, kRun * sizeof(T));
        if constexpr (HasLosses) prefetch_lines(L.values + i, kRun * sizeof(double));
        for (int q = 0; q < kRun; q += 8) {
            const d8 x = load8(g + i + q);
            d8 a;
            if constexpr (HasLosses) a = x + load8(L.values + i + q);
            else a = x + w * x;
            const d8 r = select(a > zero, one / a, zero);  // 1/0 = inf, selected away
            const d8 gr = x * r;
            t += gr;
            const l8 up = x >= hi_v, ge_lo = x >= lo_v;
            h += select(up, r, zero);
            s += select(up, gr, zero);
            n_up -= up;
            n_ge_lo -= ge_lo;
            mnv = select(up & (x < mnv), x, mnv);
            bad |= ~((x >= zero) & (x <= maxv));
            nbuf += store_indices8(movemask(ge_lo & ~up), i + q, buf + nbuf);
        }
        if (nbuf > kBuf - kRun) drain();
    }
    drain();
    double lt[8], lh[8], lg[8], lmin[8];
    bool any_bad = false;
    std::int64_t above = 0, below = i - lo;  // below: the points not >= lo (all valid here)
    for (int j = 0; j < 8; ++j) {
        lt[j] = t[j], lh[j] = h[j], lg[j] = s[j], lmin[j] = mnv[j];
        above += n_up[j];
        below -= n_ge_lo[j];
        any_bad |= bad[j] != 0;
    }
    for (; i < hi; ++i) {
        const T v = g[i];
        any_bad |= !valid_value(v);
        const U u = ordered_bits(v);
        const double gi = v;
        const double a = gi + (HasLosses ? L.values[i] : L.w * gi);
        const double r = a > 0 ? 1.0 / a : 0.0;
        lt[0] += gi * r;
        if (u >= uhi) {
            lh[0] += r;
            lg[0] += gi * r;
            above += 1;
            lmin[0] = std::min(lmin[0], gi);
        } else if (u < ulo) {
            below += 1;
        } else {
            inside(i, r);
        }
    }
    acc.g_total = combine_lanes(lt);
    acc.h = combine_lanes(lh);
    acc.g = combine_lanes(lg);
    acc.above = above;
    acc.below = below;
    for (int j = 0; j < 8; ++j) acc.min = std::min(acc.min, lmin[j]);
    acc.bad = any_bad;
}

// One thread's share [lo, hi) of the gather: the (g, a) of the points with
// bin_lo <= g < bin_hi, appended to out. Runs of 64 are tested branch-free first.
template <class T>
void gather_range(const T* g, Losses L, std::int64_t lo, std::int64_t hi, T bin_lo, T bin_hi,
                  std::vector<std::pair<double, double>>& out) {
    constexpr int kRun = 64;
    auto one = [&](std::int64_t p) {
        const T v = g[p];
        if (!(v >= bin_lo && v < bin_hi)) return;
        const double gi = v;
        out.emplace_back(gi, gi + L.at(p, gi));
    };
    std::int64_t i = lo;
    for (; i + kRun <= hi; i += kRun) {
        if (((i - lo) & 0xFFFF) == 0 && cancelled()) break;
        prefetch_lines(g + i, kRun * static_cast<std::int64_t>(sizeof(T)));
        int hit = 0;
        for (int j = 0; j < kRun; ++j) hit |= (g[i + j] >= bin_lo) & (g[i + j] < bin_hi);
        if (hit)
            for (int j = 0; j < kRun; ++j) one(i + j);
    }
    for (; i < hi; ++i) one(i);
}

// The bracket pass's answer: either final (`done`: a fallback ran, or an invalid value),
// or the boundary fine bin [bin_lo, bin_hi) still to be resolved from its points with the
// sums and D values around it (the arguments of resolve_gathered).
template <class T>
struct Located {
    bool done = false;
    ThresholdResult result{};
    T bin_lo{}, bin_hi{};
    std::int64_t bin_count = 0, acc_n = 0;
    double acc_h = 0, acc_g = 0, last_min = 0, pass_d = 0, fail_d = 0, g_total = 0, scale = 0;
    // Where D's zero is estimated to lie in [bin_lo, bin_hi] (NaN: no estimate). The
    // support pass of threshold_support sums from there (see threshold_support_bracketed).
    double steer = std::numeric_limits<double>::quiet_NaN();
    int nt = 1;

    ThresholdResult resolve(std::vector<std::pair<double, double>>& items, double m) const {
        return resolve_gathered(items, acc_h, acc_g, acc_n, last_min, pass_d, fail_d, m, g_total, scale);
    }
};

// The bracket pass with a given bracket (the sample's, or any: tests pass brackets that
// miss), up to the boundary bin.
template <class T>
Located<T> bracket_locate(const T* g, Losses L, std::int64_t n, double m, int threads, Bracket<T> br) {
    using U = uint_of<T>;
    constexpr int kBits = 8 * static_cast<int>(sizeof(U));
    const double inf = std::numeric_limits<double>::infinity();
    Located<T> out;
    auto fallback = [&]() {
        out.done = true;
        out.result = threshold_radix(g, L, n, m, threads);
        return out;
    };
    if (n == 0) return fallback();
    const U full_hi = full_bracket<T>().hi;
    br.hi = std::max(U(1), std::min(br.hi, full_hi));
    if (br.lo >= br.hi) br.lo = br.hi - 1;
    const U ulo = br.lo, uhi = br.hi;
    int sh = 0;
    while (sh < kBits && ((uhi - ulo - 1) >> sh) >= static_cast<U>(kFine)) ++sh;
    const int nt = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(std::max(1, threads), num_blocks(n))));
    std::vector<BracketAcc> acc(static_cast<size_t>(nt));
    std::vector<HistBin> fine(static_cast<size_t>(nt) * kFine);
#ifdef RAD_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int t = 0; t < nt; ++t) {
        const std::int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
        const size_t off = static_cast<size_t>(t) * kFine;
        if (L.values)
            bracket_pass_range<T, true>(g, L, lo, hi, ulo, uhi, sh, acc[t], &fine[off]);
        else
            bracket_pass_range<T, false>(g, L, lo, hi, ulo, uhi, sh, acc[t], &fine[off]);
    }
    BracketAcc tot;
    for (int t = 0; t < nt; ++t) {
        tot.bad |= acc[t].bad;
        tot.g_total += acc[t].g_total;
        tot.h += acc[t].h;
        tot.g += acc[t].g;
        tot.above += acc[t].above;
        tot.below += acc[t].below;
        tot.min = std::min(tot.min, acc[t].min);
    }
    if (tot.bad) {
        out.done = true;
        out.result = ThresholdResult{2, 0.0, 0, 0.0};
        return out;
    }
    fold_rows(fine, nt, kFine);
    const double g_total = tot.g_total, scale = m + g_total;
    double acc_h = tot.h, acc_g = tot.g, last_min = tot.min, pass_d = inf, fail_d = -inf;
    std::int64_t acc_n = tot.above;
    if (tot.above > 0) {
        const double d = static_cast<double>(from_bits<T>(uhi)) * acc_h - acc_g + m;
        if (d < 0) return fallback();  // tau lies above the bracket
        pass_d = d;
    }
    int boundary = -1, lowest = -1;
    Reopened before{acc_h, acc_g, acc_n, last_min, pass_d};
    for (int b = kFine - 1; b >= 0; --b) {
        if (!fine[b].count) continue;
        lowest = b;
        const double edge = static_cast<double>(from_bits<T>(static_cast<U>(ulo + (static_cast<U>(b) << sh))));
        const double h2 = acc_h + fine[b].h, g2 = acc_g + fine[b].g;
        const double d_edge = edge * h2 - g2 + m;
        if (d_edge < 0) {
            boundary = b;
            fail_d = d_edge;
            break;
        }
        before = {acc_h, acc_g, acc_n, last_min, pass_d};
        pass_d = d_edge;
        acc_h = h2;
        acc_g = g2;
        acc_n += fine[b].count;
        last_min = fine[b].min;
    }
    if (boundary < 0) {
        if (lowest < 0) return fallback();  // nothing inside the bracket: let the radix search decide
        if (tot.below > 0) {
            // Every group inside joins; the points below fail iff D at the bracket's
            // bottom edge (an upper bound of their D) is negative.
            const double d_lo = static_cast<double>(from_bits<T>(ulo)) * acc_h - acc_g + m;
            if (!(d_lo < 0)) return fallback();  // tau may lie below the bracket
            fail_d = d_lo;
        }
        before.restore(acc_h, acc_g, acc_n, last_min, pass_d);
        boundary = lowest;
    }
    if (fine[boundary].count > kBracketGatherMax) return fallback();
    // The boundary fine bin as a range of values [bin_lo, bin_hi): ordered bits are the raw
    // bits of non-negative values, and every value is valid by now.
    const U bin_lo_bits = static_cast<U>(ulo + (static_cast<U>(boundary) << sh));
    const U bin_hi_bits = static_cast<U>(std::min<std::uint64_t>(
        uhi, static_cast<std::uint64_t>(ulo) + (static_cast<std::uint64_t>(boundary + 1) << sh)));
    out.bin_lo = from_bits<T>(bin_lo_bits);
    out.bin_hi = from_bits<T>(bin_hi_bits);
    out.bin_count = fine[boundary].count;
    out.acc_h = acc_h, out.acc_g = acc_g, out.acc_n = acc_n, out.last_min = last_min;
    out.pass_d = pass_d, out.fail_d = fail_d, out.g_total = g_total, out.scale = scale;
    out.nt = nt;
    return out;
}

// ------------------------------------------------------------------ float32 first pass
//
// With float32 gains and RAD losses (a = (1 + w) g) the bracket pass needs 1/a only to
// decide which fine bins may hold tau: threshold_support's support pass that follows sums
// the points above them exactly, and resolve_gathered decides with those sums. So this
// pass works on the float values themselves, sixteen to a vector, with no division in
// double: H~ = c * sum 1/x over x >= hi (c = 1/(1 + w); the reciprocals in float, summed
// in float over runs of four vectors, then in double), G~ = c * count (each g_i / a_i is
// 1/(1 + w) within a few ulps). Inside the bracket each point's float 1/x is added in double.
// Each float reciprocal is within 2^-24 (1 + 2^-4) of 1/x (rcp14 and one Newton step on
// AVX-512, the IEEE quotient elsewhere: within 2^-24) and each run's float sum within
// 3 * 2^-24 (positive terms), so |H~ - H| < 2^-21 H, and |D~ - D| < 2^-21 (t H + G + m) at any
// edge t. A bin edge whose D~ lies within 2^-margin_bits (t H~ + G~ + m) of zero (20 by
// default: twice the error) is undecided, and the range handed on spans every bin from
// the first undecided one down to the first certainly failing one: tau lies in it.
// Gains above 2^125 (1/x would be subnormal in float) or 1 + w above 2^897 (a = (1 + w) g
// could overflow: rad_support_sums needs every a finite) send the search to the exact pass
// (bracket_locate), as does an invalid value; a bracket reaching below 2^-125 starts there.
// The double sums are flushed every 2^16 points, so the bound holds at any n.

constexpr int kApproxFineBits = 14;
constexpr int kApproxFine = 1 << kApproxFineBits;
constexpr int kApproxMarginBits = 20;

struct ApproxBin {
    std::int64_t count = 0;
    double h = 0.0;  // sum of the float 1/x, in double
    double min = std::numeric_limits<double>::infinity();

    void add(const ApproxBin& o) {
        count += o.count;
        h += o.h;
        min = std::min(min, o.min);
    }
};

struct alignas(64) ApproxAcc {
    double h = 0.0;  // sum of 1/x over x >= hi
    double min = std::numeric_limits<double>::infinity();
    std::int64_t above = 0, below = 0, positive = 0;
    bool unsafe = false;  // an invalid value, or one outside the float reciprocal's range

    void add(const ApproxAcc& o) {
        h += o.h;
        min = std::min(min, o.min);
        above += o.above, below += o.below, positive += o.positive;
        unsafe |= o.unsafe;
    }
};

// A point inside the bracket [ulo, ...) into its fine bin (2^sh bits wide) with its float
// reciprocal (the IEEE quotient) added in double. It comes as its magnitude.
inline void approx_bin_add(ApproxBin* fine, std::uint32_t ulo, int sh, float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    ApproxBin& bin = fine[(u - ulo) >> sh];
    bin.count += 1;
    bin.h += 1.0f / v;
    bin.min = std::min(bin.min, static_cast<double>(v));
}

// One thread's share [lo, hi) of the float32 first pass.
inline void approx_pass_range(const float* g, std::int64_t lo, std::int64_t hi, std::uint32_t ulo, std::uint32_t uhi,
                              int sh, ApproxAcc& acc, ApproxBin* fine) {
    using namespace simd;
    // The raw bits as unsigned integers, sign bit cleared (-0.0 is 0): for the valid
    // values below 2^125 they order as the values do. Every pattern above the bits of
    // 2^125 but -0.0's (negative, infinite, NaN, too large) is flagged.
    constexpr std::uint32_t kSafeBits = 0x7E000000u;  // 2^125
    constexpr int kRun = 64;          // points per float partial sum (four vectors)
    constexpr std::int64_t kFlush = 1 << 16;  // points per flush of the int32 lane counts
    const f16 zero = {}, one = zero + 1.0f;
    const u16 uz = {}, lo_u = uz + ulo, hi_u = uz + uhi, all_u = uz + 0xFFFFFFFFu, abs_u = uz + 0x7FFFFFFFu;
    u16 mn = all_u;  // the smallest bits above the bracket
    // Invalid values and zeros are watched with two vector extrema, not per-point masks
    // and counters (those cost a third of the pass's arithmetic: 1e8 points in cache, one
    // AMD Zen 5 core, 14.9 -> 10.7 ms without the invalid-value mask, 11.3 without the
    // count of nonzero gains): the largest raw bits (above kSafeBits: an invalid or too
    // large value, or -0.0) and the smallest magnitude (0: a zero). Either sends the
    // points since the last flush to `settle`'s exact recount (in cache), which only pools
    // holding zeros or negative values pay.
    u16 mx = uz, mz = all_u;
    i16 n_up = {};
    d8 h0 = splat8(0.0), h1 = splat8(0.0);
    double h = 0.0;
    bool bad = false;
    std::int64_t above = 0, inside_n = 0, positive = 0, settled = lo;
    // The points [settled, to): the nonzero ones counted, invalid values flagged.
    auto settle = [&](std::int64_t to) {
        std::uint32_t top = 0, low = 0xFFFFFFFFu;
        for (int j = 0; j < 16; ++j) {
            top = std::max(top, static_cast<std::uint32_t>(mx[j]));
            low = std::min(low, static_cast<std::uint32_t>(mz[j]));
        }
        std::int64_t zeros = 0;
        if (top > kSafeBits || low == 0) {
            for (std::int64_t k = settled; k < to; ++k) {
                std::uint32_t r;
                std::memcpy(&r, g + k, sizeof r);
                bad |= r > kSafeBits && r != 0x80000000u;
                zeros += (r & 0x7FFFFFFFu) == 0;
            }
        }
        positive += (to - settled) - zeros;
        settled = to;
        mx = uz, mz = all_u;
    };
    // The lane counts (at most 4,096 each) and sums, every 2^16 points and at the end.
    auto flush = [&](std::int64_t to) {
        for (int j = 0; j < 16; ++j) above += n_up[j];
        n_up = i16{};
        for (int j = 0; j < 8; ++j) h += h0[j] + h1[j];
        h0 = h1 = splat8(0.0);
        settle(to);
    };
    // A point inside the bracket goes to its fine bin with its float reciprocal (the IEEE
    // quotient, as the vector's), in index order. It comes as its magnitude (the bits the
    // bracket was tested on): a negative value, flagged unsafe, must still find a bin.
    auto inside = [&](float v) {
        approx_bin_add(fine, ulo, sh, v);
        ++inside_n;
    };
    // The inside points are compressed into `buf` by the vector loop and binned in batches:
    // binning them from the vector loop took a branch per run whose outcome is random
    // (about a third of the runs hold one), which cost as much as the rest of the pass.
    constexpr int kBuf = 2048;
    alignas(64) float buf[kBuf + kRun];
    int nbuf = 0;
    auto drain = [&]() {
        for (int j = 0; j < nbuf; ++j) inside(buf[j]);
        nbuf = 0;
    };
    std::int64_t i = lo;
#if !defined(__AVX512F__) && defined(__AVX2__)
    const __m256i abs8 = _mm256_set1_epi32(0x7FFFFFFF), lo8 = _mm256_set1_epi32(static_cast<int>(ulo)),
                  hi8 = _mm256_set1_epi32(static_cast<int>(uhi)), ones8 = _mm256_set1_epi32(-1);
    const __m256 one8 = _mm256_set1_ps(1.0f);
#endif
#if defined(__AVX512F__)
    // Each run's four vectors are loaded during the run before it. The compressed stores'
    // addresses depend on the loaded values (through nbuf), and a load issued after such a
    // store waited for it; loaded a run ahead, the loads do not queue behind the stores
    // (1e8 points in memory, one AMD Zen 5 thread: 19.0 -> 16.6 ms). The last run's
    // look-ahead reloads itself rather than read past hi.
    const std::int64_t last_run = hi - kRun;
    __m512i ahead[4];
    if (lo <= last_run)
        for (int q = 0; q < 4; ++q) ahead[q] = _mm512_loadu_si512(g + lo + 16 * q);
#endif
    for (; i + kRun <= hi; i += kRun) {
        if (((i - lo) & (kFlush - 1)) == 0) {
            if (cancelled()) break;
            flush(i);
        }
        prefetch_lines(g + i, kRun * sizeof(float));
        f16 run = zero;
#if defined(__AVX512F__)
        const float* next = g + std::min(i + kRun, last_run);
#endif
        for (int q = 0; q < kRun; q += 16) {
#if defined(__AVX512F__)
            // The loop below in AVX-512 intrinsics: the masks stay masks (the vector-extension
            // form made each compare a vector, then a mask again). The same operations on the
            // same lanes.
            const __m512i raw = ahead[q / 16];
            ahead[q / 16] = _mm512_loadu_si512(next + q);
            const __m512i u = _mm512_and_si512(raw, reinterpret_cast<__m512i>(abs_u));
            const __mmask16 up = _mm512_cmpge_epu32_mask(u, reinterpret_cast<__m512i>(hi_u));
            const __mmask16 in = _mm512_mask_cmpge_epu32_mask(static_cast<__mmask16>(~up), u, reinterpret_cast<__m512i>(lo_u));
            // 1/x by rcp14 and one Newton step (FMAs): within (2^-24 + 2^-28) of 1/x for the
            // normal floats of [2^-125, 2^125], where vdivps is within 2^-24; the bound of
            // the sums (2^-21, see above) holds with either. The divider's throughput was
            // most of this pass on Intel server cores (16-CPU Xeon host: vdivps 0.23 ns a
            // value, this 0.08; benchmarks/cpp_reciprocal.cpp).
            const __m512 x = _mm512_castsi512_ps(raw);
            const __m512 y0 = _mm512_maskz_rcp14_ps(up, x);
            const __m512 r = _mm512_maskz_fmadd_ps(up, y0, _mm512_fnmadd_ps(x, y0, reinterpret_cast<__m512>(one)), y0);
            run = reinterpret_cast<f16>(_mm512_add_ps(reinterpret_cast<__m512>(run), r));
            const __m512i minus_one = _mm512_set1_epi32(-1);
            n_up = reinterpret_cast<i16>(_mm512_mask_sub_epi32(reinterpret_cast<__m512i>(n_up), up, reinterpret_cast<__m512i>(n_up), minus_one));
            mx = reinterpret_cast<u16>(_mm512_max_epu32(reinterpret_cast<__m512i>(mx), raw));
            mz = reinterpret_cast<u16>(_mm512_min_epu32(reinterpret_cast<__m512i>(mz), u));
            mn = reinterpret_cast<u16>(_mm512_mask_min_epu32(reinterpret_cast<__m512i>(mn), up, reinterpret_cast<__m512i>(mn), u));
            // Compressed in a register, then stored whole (the buffer has room): a masked
            // compress to memory is slow on some cores (AMD's Zen 4 microcodes it).
            _mm512_storeu_si512(reinterpret_cast<void*>(buf + nbuf), _mm512_maskz_compress_epi32(in, u));
            nbuf += __builtin_popcount(in);
#elif defined(__AVX2__)
            // The same operations eight lanes at a time (lanes 0-7 of the sixteen, then 8-15),
            // the inside points left-packed by a permutation from a table (the bit loop below
            // mispredicts on a third of the vectors).
            for (int half = 0; half < 2; ++half) {
                const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + i + q + 8 * half));
                const __m256i u = _mm256_and_si256(raw, abs8);
                const __m256i up = _mm256_cmpeq_epi32(_mm256_max_epu32(u, hi8), u);  // u >= hi, unsigned
                const __m256i ge = _mm256_cmpeq_epi32(_mm256_max_epu32(u, lo8), u);  // u >= lo
                const __m256 r = _mm256_and_ps(_mm256_div_ps(one8, _mm256_castsi256_ps(raw)), _mm256_castsi256_ps(up));
                run.p[half] += as<f16::P>(r);
                n_up.p[half] -= as<i16::P>(up);
                mx.p[half] = as<u16::P>(_mm256_max_epu32(as<__m256i>(mx.p[half]), raw));
                mz.p[half] = as<u16::P>(_mm256_min_epu32(as<__m256i>(mz.p[half]), u));
                const __m256i cand = _mm256_or_si256(u, _mm256_xor_si256(up, ones8));  // u where up, else all ones
                mn.p[half] = as<u16::P>(_mm256_min_epu32(as<__m256i>(mn.p[half]), cand));
                const unsigned in = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_andnot_si256(up, ge))));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(buf + nbuf), left_pack8(u, in));
                nbuf += __builtin_popcount(in);
            }
#else
            const f16 x = load<f16>(g + i + q);
            const u16 raw = as<u16>(x), u = raw & abs_u;
            const i16 up = u >= hi_u, ge = u >= lo_u;
            const f16 r = one / x;
            run += select(up, r, zero);
            n_up -= up;
            mx = select(raw > mx, raw, mx);
            mz = select(u < mz, u, mz);
            const u16 cand = select(up, u, all_u);
            mn = select(cand < mn, cand, mn);
            const unsigned k = movemask(ge & ~up);
            const f16 uf = as<f16>(u);
            for (unsigned b = k; b; b &= b - 1) buf[nbuf++] = uf[__builtin_ctz(b)];
#endif
        }
        // the run's sums, lanes 0-7 and 8-15, in double
#if defined(__AVX512F__)
        typedef float f8 __attribute__((vector_size(32)));
        f8 lo8, hi8;
        std::memcpy(&lo8, &run, sizeof lo8);
        std::memcpy(&hi8, reinterpret_cast<const char*>(&run) + sizeof lo8, sizeof hi8);
        h0 += __builtin_convertvector(lo8, d8);
        h1 += __builtin_convertvector(hi8, d8);
#else
        float lanes[16];
        store(lanes, run);
        h0 += load8(lanes);
        h1 += load8(lanes + 8);
#endif
        if (nbuf > kBuf - kRun) drain();
    }
    drain();
    flush(i);
    std::uint32_t mbits = 0xFFFFFFFFu;
    for (int j = 0; j < 16; ++j) mbits = std::min(mbits, static_cast<std::uint32_t>(mn[j]));
    double m = mbits == 0xFFFFFFFFu ? std::numeric_limits<double>::infinity() : static_cast<double>(from_bits<float>(mbits));
    for (; i < hi; ++i) {
        const float v = g[i], x = std::fabs(v);  // magnitudes, as in the vector loop
        bad |= !(v >= 0.0f && v <= 0x1p125f);
        positive += v > 0.0f;
        if (x >= from_bits<float>(uhi)) {
            h += 1.0 / static_cast<double>(x);
            above += 1;
            m = std::min(m, static_cast<double>(x));
        } else if (x >= from_bits<float>(ulo)) {
            inside(x);
        }
    }
    acc.h = h;
    acc.min = m;
    acc.above = above;
    acc.below = (hi - lo) - above - inside_n;
    acc.positive = positive;
    acc.unsafe = bad;
}

// The float32 first pass over a bracket [ulo, uhi) of bits (ulo < uhi) on up to `threads`
// threads: the totals, and the fine bins (2^sh bits each) of the points inside.
struct ApproxPass {
    ApproxAcc tot;
    std::vector<ApproxBin> fine;  // kApproxFine bins (the threads' rows, folded into the first)
    int sh = 0, nt = 1;
};

inline ApproxPass approx_pass(const float* g, std::int64_t n, int threads, std::uint32_t ulo, std::uint32_t uhi) {
    ApproxPass p;
    while (p.sh < 32 && ((uhi - ulo - 1) >> p.sh) >= static_cast<std::uint32_t>(kApproxFine)) ++p.sh;
    p.nt = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(std::max(1, threads), num_blocks(n))));
    const int nt = p.nt;
    std::vector<ApproxAcc> acc(static_cast<size_t>(nt));
    ThreadRows<ApproxBin> rows(static_cast<size_t>(nt) * kApproxFine);
#ifdef RAD_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int t = 0; t < nt; ++t)
        approx_pass_range(g, n * t / nt, n * (t + 1) / nt, ulo, uhi, p.sh, acc[t], rows.construct_row(t, kApproxFine));
    for (const ApproxAcc& a : acc) p.tot.add(a);
    fold_rows(rows.data(), nt, kApproxFine);
    p.fine.assign(rows.data(), rows.data() + kApproxFine);
    return p;
}

// The float32 first pass with bracket `br` up to the range of fine bins that holds tau
// (Located with acc_h, acc_g and pass_d unknown: threshold_support takes them from the
// support pass's exact sums; fail_d is an upper bound of D). `exact` comes back set where
// this pass cannot decide (see above): the caller runs bracket_locate instead.
struct ApproxLocated {
    bool exact = false;
    Located<float> loc;
};

inline ApproxLocated approx_locate(const float* g, double w, std::int64_t n, double m, int threads, Bracket<float> br,
                                   int margin_bits = kApproxMarginBits) {
    using U = std::uint32_t;
    const double inf = std::numeric_limits<double>::infinity();
    ApproxLocated out;
    Located<float>& loc = out.loc;
    auto fallback = [&]() {
        loc.done = true;
        loc.result = threshold_radix(g, Losses{nullptr, w}, n, m, threads);
        return out;
    };
    if (n == 0) return fallback();
    const U full_hi = full_bracket<float>().hi;
    br.hi = std::max(U(1), std::min(br.hi, full_hi));
    if (br.lo >= br.hi) br.lo = br.hi - 1;
    // A bracket reaching below 2^-125 (the sample's, where tau lies among its smallest
    // gains) starts at 2^-125 instead: the few gains below it, if any, are then below the
    // bracket, which the walk checks like any others.
    const U tiny = ordered_bits(0x1p-125f);
    if (br.lo < tiny && br.hi > tiny) br.lo = tiny;
    const U ulo = br.lo, uhi = br.hi;
    if (!(from_bits<float>(ulo) >= 0x1p-125f) || !(1.0 + w <= 0x1p897)) {  // a = (1 + w) g finite
        out.exact = true;
        return out;
    }
    const ApproxPass pass = approx_pass(g, n, threads, ulo, uhi);
    const ApproxAcc& tot = pass.tot;
    const std::vector<ApproxBin>& fine = pass.fine;
    const int sh = pass.sh;
    if (tot.unsafe || cancelled()) {
        out.exact = true;
        return out;
    }
    const double c = 1.0 / (1.0 + w), eps = std::ldexp(1.0, -margin_bits);
    const double g_total = c * static_cast<double>(tot.positive);
    // D~ at edge t with sums (h, count) and its margin of doubt.
    auto d_of = [&](double t, double h, std::int64_t k) { return t * (c * h) - c * static_cast<double>(k) + m; };
    auto doubt = [&](double t, double h, std::int64_t k) { return eps * (t * (c * h) + c * static_cast<double>(k) + m); };
    double h = tot.h, fail_ub = -inf, last_min = tot.min;
    std::int64_t k = tot.above;
    // D~ at the range's upper and lower edges (t_hi, d_hi), (t_lo, d_lo), for the estimate
    // of D's zero (Located::steer).
    double t_hi = from_bits<float>(uhi), d_hi = m, t_lo = 0.0, d_lo = inf;
    if (k > 0) {
        const double t = from_bits<float>(uhi), d = d_of(t, h, k);
        if (!std::isfinite(d)) {
            out.exact = true;
            return out;
        }
        if (d < doubt(t, h, k)) return fallback();  // tau above the bracket, or may be
        d_hi = d;
    }
    auto edge = [&](int b) { return static_cast<double>(from_bits<float>(static_cast<U>(ulo + (static_cast<U>(b) << sh)))); };
    int top = -1, bot = -1, lowest = -1;
    std::int64_t in_range = 0, above_range = k;
    double min_above = last_min;  // last_min before the last joining bin
    for (int b = kApproxFine - 1; b >= 0; --b) {
        const ApproxBin& bin = fine[b];
        if (!bin.count) continue;
        lowest = b;
        h += bin.h;
        k += bin.count;
        const double t = edge(b), d = d_of(t, h, k), e = doubt(t, h, k);
        if (top < 0 && d >= e) {  // every group of the bin joins
            min_above = last_min;
            last_min = bin.min;
            above_range = k;
            t_hi = t, d_hi = d;
            continue;
        }
        if (top < 0) top = b;
        in_range += bin.count;
        if (d < -e) {  // D < 0 at the bin's lower edge: tau is in this bin or above
            bot = b;
            fail_ub = d + e;
            t_lo = t, d_lo = d;
            break;
        }
    }
    if (lowest < 0) return fallback();  // nothing inside the bracket: let the radix search decide
    if (top < 0) {  // every group inside joins: resolve the lowest bin for its smallest gain
        top = lowest;
        in_range = fine[lowest].count;
        above_range -= fine[lowest].count;
        last_min = min_above;
        d_hi = inf;  // D~ at this bin's upper edge was not kept: no estimate
    }
    if (bot < 0) {
        bot = lowest;
        if (tot.below > 0) {
            // The points below fail iff D at the bracket's bottom edge (an upper bound of
            // their D) is negative.
            const double t = from_bits<float>(ulo), d = d_of(t, h, k), e = doubt(t, h, k);
            if (!(d < -e)) return fallback();  // tau may lie below the bracket
            fail_ub = d + e;
            t_lo = t, d_lo = d;
        }
    }
    if (!std::isfinite(h)) {
        out.exact = true;
        return out;
    }
    if (in_range > kBracketGatherMax) return fallback();
    loc.bin_lo = from_bits<float>(static_cast<U>(ulo + (static_cast<U>(bot) << sh)));
    loc.bin_hi = from_bits<float>(static_cast<U>(
        std::min<std::uint64_t>(uhi, static_cast<std::uint64_t>(ulo) + (static_cast<std::uint64_t>(top + 1) << sh))));
    loc.bin_count = in_range;
    loc.acc_n = above_range;
    loc.acc_h = loc.acc_g = std::numeric_limits<double>::quiet_NaN();  // from the support pass
    loc.last_min = last_min;
    loc.pass_d = std::numeric_limits<double>::quiet_NaN();  // from the support pass
    loc.fail_d = fail_ub, loc.g_total = g_total, loc.scale = m + g_total;
    loc.nt = pass.nt;
    // Between the range's edges D is continuous and piecewise linear in t, of slope H(>t)
    // (a point at y adds c/y to H and c to G, and t c/y - c is 0 at t = y), and H barely
    // changes across the range: D's zero lies where the line through (t_lo, d_lo) and
    // (t_hi, d_hi) crosses 0, within D~'s error over the slope (a few dozen points of 1e8
    // uniform gains). tau is the first gain at or above it. threshold_support_bracketed
    // then subtracts the range's points above the estimate from the support pass's sums,
    // for sums over g >= bin_hi. Its rounding (at most in_range ulps of H, as resolve_gathered's
    // own sums of the range) must stay within 1% of resolve_gathered's margin,
    // 1e-10 (t H + G + m) >= 1e-10 (c k + m): else no estimate.
    const double h_bound = 2.0 * c * h;  // H~ over g >= bin_lo, with room for its error
    const bool subtraction_safe = static_cast<double>(in_range + 1) * 0x1p-52 * h_bound *
                                      static_cast<double>(loc.bin_hi) <= 1e-12 * (c * static_cast<double>(k) + m);
    if (subtraction_safe && d_hi > 0 && d_lo < 0 && std::isfinite(d_hi) && std::isfinite(d_lo) && t_hi > t_lo) {
        const double t0 = t_lo + (t_hi - t_lo) * (-d_lo / (d_hi - d_lo));
        loc.steer = std::min(std::max(t0, static_cast<double>(loc.bin_lo)), static_cast<double>(loc.bin_hi));
    }
    return out;
}

// The search with a given bracket: the bracket pass, then a gather of the boundary bin
// (two compares per point) and its exact resolution.
template <class T>
ThresholdResult threshold_bracketed(const T* g, Losses L, std::int64_t n, double m, int threads, Bracket<T> br) {
    const Located<T> loc = bracket_locate(g, L, n, m, threads, br);
    if (loc.done) return loc.result;
    const int nt = loc.nt;
    std::vector<std::vector<std::pair<double, double>>> parts(static_cast<size_t>(nt));
#ifdef RAD_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int t = 0; t < nt; ++t) gather_range(g, L, n * t / nt, n * (t + 1) / nt, loc.bin_lo, loc.bin_hi, parts[t]);
    std::vector<std::pair<double, double>> items;
    items.reserve(static_cast<size_t>(loc.bin_count));
    for (auto& p : parts) items.insert(items.end(), p.begin(), p.end());
    return loc.resolve(items, m);
}

// The default sort-free search: a sample bracket, then the bracketed pass.
template <class T>
ThresholdResult threshold_search(const T* g, Losses L, std::int64_t n, double m, int threads) {
    return threshold_bracketed(g, L, n, m, threads, sample_bracket(g, L, n, m, threads));
}

// threshold_search and, where it resolves (status 0, tau > 0) and b <= k*, the canonical
// support sums over g >= tau (docs/design.md §3), with one read of the gains fewer: the
// support pass runs before tau is known, over g >= bin_hi (the top of the fine bins that
// hold tau), and collects those bins' points instead of a separate gather. tau is resolved
// from them with the support pass's sums of the points above (exact, where the first pass
// may have approximated: approx_locate). Then a block holding no collected point at or
// above tau has the same terms over g >= tau in the same order (any point in [tau, bin_hi)
// is one of them), so only the blocks that hold one are summed again. The same bits as
// the two kernels in turn.
struct SearchSums {
    ThresholdResult search;
    bool has_sums = false;
    SupportSums sums{};
    // With the sums: the DepRound sketch at tau (support.hpp). Every row is written by the
    // support pass, so it is not zeroed first (15.6 MB at 1e9 points, on one thread).
    using Sketch = std::vector<double, uninitialised_allocator<double>>;
    Sketch sketch;
    // Where the collecting support pass summed from when it was below the gathered range's
    // top (the first pass's estimate of tau), else NaN.
    double steered_from = std::numeric_limits<double>::quiet_NaN();
};

// The first pass for threshold_support: the float32 pass where it applies and decides,
// else the exact bracket pass.
template <class T>
Located<T> first_pass(const T* g, Losses L, std::int64_t n, double m, int threads, Bracket<T> br, int margin_bits) {
    if constexpr (std::is_same_v<T, float>) {
        if (!L.values) {
            ApproxLocated a = approx_locate(g, L.w, n, m, threads, br, margin_bits);
            if (!a.exact) return a.loc;
        }
    }
    return bracket_locate(g, L, n, m, threads, br);
}

// threshold_support with a given bracket and margin (tests pass brackets that miss, and
// wide margins so that the gathered range spans many bins).
// `steer_at` in [0, 1] (tests) sums from bin_lo + steer_at (bin_hi - bin_lo) where the
// first pass gave an estimate, in place of the estimate.
template <class T>
SearchSums threshold_support_bracketed(const T* g, Losses L, std::int64_t n, double m, std::int64_t b, int threads,
                                       Bracket<T> br, int margin_bits = kApproxMarginBits, double steer_at = -1.0) {
    SearchSums out;
    Located<T> loc = first_pass(g, L, n, m, threads, br, margin_bits);
    if (steer_at >= 0 && !std::isnan(loc.steer))
        loc.steer = static_cast<double>(loc.bin_lo) + steer_at * (static_cast<double>(loc.bin_hi) - loc.bin_lo);
    auto wants_sums = [&](const ThresholdResult& r) { return r.status == 0 && r.tau > 0 && b <= r.kstar; };
    // With RAD losses the passes sum only 1/a and the count (rad_support_sums).
    const bool rad = L.values == nullptr;
    auto totals = [&](const BlockSums& bs, double tau) {
        return rad ? rad_support_sums(totals_of(bs), L.w, tau) : totals_of(bs);
    };
    if (loc.done) {
        out.search = loc.result;
        if (wants_sums(out.search) && !cancelled()) {
            out.sketch.resize(static_cast<size_t>(num_blocks(n) * kSketchParts));
            const double tau = out.search.tau;
            out.sums = totals(rad ? support_block_sums<T, false>(g, L, n, tau, threads, out.sketch.data())
                                  : support_block_sums<T, true>(g, L, n, tau, threads, out.sketch.data()),
                              tau);
            out.has_sums = true;
        }
        return out;
    }
    // The caps bind whatever tau is: b is above every k* the range allows (k* is at most the
    // points at or above bin_lo) and G_n >= m beyond the near-tie margin. The caller needs
    // neither tau nor the sums then (rad._solve.batch takes the capped path, which uses
    // max(b, k*) = b), so the support pass is skipped.
    const std::int64_t k_max = loc.acc_n + loc.bin_count;
    if (b > k_max && loc.g_total - m >= 1e-10 * loc.scale) {
        out.search = {3, std::numeric_limits<double>::quiet_NaN(), k_max, loc.g_total};
        return out;
    }
    const std::int64_t nb = num_blocks(n);
    BlockSums bs(nb);
    std::vector<std::vector<std::int64_t>> hits(static_cast<size_t>(nb));  // boundary points per block
    const double above = static_cast<double>(loc.bin_hi);
    // The pass sums over g >= from: the first pass's estimate of tau where it gave one, so
    // that few blocks hold a point between it and tau (each is summed again below: 242 of
    // 1,526 at 1e8 uniform gains when the pass summed from bin_hi), else bin_hi.
    const double from = std::isnan(loc.steer) ? above : loc.steer;
    if (from < above) out.steered_from = from;
    SearchSums::Sketch sketch(static_cast<size_t>(nb * kSketchParts));  // rows redone below with the sums
    // Block blk summed over g >= t into bs (collecting the range's points where asked).
    auto sum_block = [&](std::int64_t blk, double t, auto collecting) {
        constexpr bool C = decltype(collecting)::value;
        const Collect<T> c = C ? Collect<T>{loc.bin_lo, loc.bin_hi, &hits[static_cast<size_t>(blk)]} : Collect<T>{};
        double* row = sketch.data() + blk * kSketchParts;
        if (rad) support_block<C, T, false>(g, L, n, blk, t, bs, c, row);
        else support_block<C, T, true>(g, L, n, blk, t, bs, c, row);
    };
    support_reciprocal_mode();  // chosen before the threads start, if not yet
    for_each_block(n, threads, [&](std::int64_t blk) { sum_block(blk, from, std::true_type{}); });
    if (cancelled()) return out;
    std::vector<std::pair<double, double>> items;
    items.reserve(static_cast<size_t>(loc.bin_count));
    for (const auto& h : hits)
        for (std::int64_t i : h) {
            const double gi = g[i];
            items.emplace_back(gi, gi + L.at(i, gi));
        }
    // The sums over g >= bin_hi (min_a unused): the pass's, less the range's points it
    // summed (from < bin_hi; approx_locate bounds the rounding this adds).
    SupportSums over = totals_of(bs);
    for (const auto& [gi, a] : items)
        if (gi >= from && a > 0) {
            const double r = 1.0 / a;
            over.h -= r;
            over.g -= gi * r;
            over.count -= 1;
        }
    const SupportSums up = rad ? rad_support_sums(over, L.w, above) : over;
    // D of the smallest gain above the range (the last joining group, where the range's
    // first group fails) from these sums: its own group adds y/a - y/a to D, so the sums
    // may include it. Exact, where the first pass had only a bound.
    const double pass_d = loc.acc_n > 0 ? loc.last_min * up.h - up.g + m : std::numeric_limits<double>::infinity();
    out.search = resolve_gathered(items, up.h, up.g, loc.acc_n, loc.last_min, pass_d, loc.fail_d, m, loc.g_total,
                                  loc.scale);
    if (!wants_sums(out.search)) return out;
    const double tau = out.search.tau;
    // The blocks holding a point between from and tau (all of them collected) summed again
    // over g >= tau; the others' sums over g >= from are theirs over g >= tau.
    const double lo_r = std::min(from, tau), hi_r = std::max(from, tau);
    std::vector<std::int64_t> redo;
    for (std::int64_t blk = 0; blk < nb; ++blk)
        for (std::int64_t i : hits[static_cast<size_t>(blk)])
            if (static_cast<double>(g[i]) >= lo_r && static_cast<double>(g[i]) < hi_r) {
                redo.push_back(blk);
                break;
            }
    parallel_for(static_cast<std::int64_t>(redo.size()), threads, [&](std::int64_t k) {
        sum_block(redo[static_cast<size_t>(k)], tau, std::false_type{});
    });
    if (cancelled()) return out;
    out.sums = totals(bs, tau);
    out.has_sums = true;
    out.sketch = std::move(sketch);
    return out;
}

template <class T>
SearchSums threshold_support(const T* g, Losses L, std::int64_t n, double m, std::int64_t b, int threads) {
    return threshold_support_bracketed(g, L, n, m, b, threads, sample_bracket(g, L, n, m, threads));
}

// One streaming read of x (the floor rad.select is measured against): a parallel sum in
// 32-byte vector lanes of T (what np.sum does, on every thread), each thread over a
// contiguous range.
template <class T>
double stream_sum(const T* x, std::int64_t n, int threads) {
    typedef T v __attribute__((vector_size(32)));
    constexpr int kL = static_cast<int>(32 / sizeof(T));
    const int nt = std::max(1, threads);
    double total = 0.0;
#ifdef RAD_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : total) if (nt > 1)
#endif
    for (int t = 0; t < nt; ++t) {
        const std::int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
        v s0 = {}, s1 = {}, s2 = {}, s3 = {}, c;
        std::int64_t i = lo;
        for (; i + 4 * kL <= hi; i += 4 * kL) {
            prefetch_lines(x + i, 128);  // as the passes do: the floor is the best plain read
            std::memcpy(&c, x + i, 32);
            s0 += c;
            std::memcpy(&c, x + i + kL, 32);
            s1 += c;
            std::memcpy(&c, x + i + 2 * kL, 32);
            s2 += c;
            std::memcpy(&c, x + i + 3 * kL, 32);
            s3 += c;
        }
        const v s = (s0 + s1) + (s2 + s3);
        double acc = 0.0;
        for (int j = 0; j < kL; ++j) acc += s[j];
        for (; i < hi; ++i) acc += x[i];
        total += acc;
    }
    return total;
}

}  // namespace rad

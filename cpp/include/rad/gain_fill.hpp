// The capped path's gain fill on the sorted top of the pool: F(nu), its slope and the
// boundary group, and where the gain fill begins. The same operations in the same order
// as python/rad/_solve/capped_rad.py's SortedRadGains (gain_fill, gain_fill_from and the
// sums they use), so the same bits; the Python methods stay the reference (and the path
// of the backends without the C++ core). docs/design.md §1, "Dualising" and "The top of
// the pool", gives the formulas.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace rad {

template <class T>
struct SortedGainFill {
    const T* g;              // the held gains, descending: ranks [0, size)
    std::int64_t size;
    double w;                // RAD losses: a = g + w g
    std::int64_t span;       // points per span of the offsets
    const double* offsets;   // 3 rows of spans + 1: running totals of 1/a, g/a and g at each span's start
    const double* totals;    // 3 rows of spans: each span's sequential total
    std::int64_t spans;
    bool complete;           // the whole pool is held

    double x(std::int64_t i) const { return static_cast<double>(g[i]); }
    double a(std::int64_t i) const {  // as rad_terms forms it: w x, then + x
        const double xi = x(i);
        double ai = w * xi;
        ai += xi;
        return ai;
    }
    // Term `row` of rank i (0: 1/a, 1: g/a, 2: g), 0 where a is not positive (rad_terms).
    double term(int row, std::int64_t i) const {
        if (row == 2) return x(i);
        const double ai = a(i);
        if (!(ai > 0)) return 0.0;
        return row == 0 ? 1.0 / ai : x(i) / ai;
    }
    double offset(int row, std::int64_t k) const { return offsets[row * (spans + 1) + k]; }
    double total(int row, std::int64_t k) const { return totals[row * spans + k]; }

    // Sum of term `row` over ranks [0, s): the span's offset plus its sequential sum so far.
    double prefix(int row, std::int64_t s) const {
        const std::int64_t blk = s / span, r = s % span;
        const double base = offset(row, blk);
        if (r == 0) return base;
        const std::int64_t lo = blk * span;
        double run = term(row, lo);
        for (std::int64_t i = lo + 1; i < lo + r; ++i) run += term(row, i);
        return base + run;
    }
    // Sum of g over ranks [s, e), added in rank order (the partial spans' terms and the
    // whole spans' totals between them, one sequence).
    double range_sum_g(std::int64_t s, std::int64_t e) const {
        if (e <= s) return 0.0;
        const std::int64_t bs = s / span, be = (e - 1) / span;
        if (bs == be) {
            double run = x(s);
            for (std::int64_t i = s + 1; i < e; ++i) run += x(i);
            return run;
        }
        double run = x(s);
        for (std::int64_t i = s + 1; i < (bs + 1) * span; ++i) run += x(i);
        for (std::int64_t k = bs + 1; k < be; ++k) run += total(2, k);
        for (std::int64_t i = be * span; i < e; ++i) run += x(i);
        return run;
    }
    // The first k in [lo, hi) with hit(k), or hi; hit is false, then true (Python's bisect).
    template <class Hit>
    static std::int64_t first_hit(std::int64_t lo, std::int64_t hi, Hit&& hit) {
        while (lo < hi) {
            const std::int64_t mid = lo + (hi - lo) / 2;
            if (hit(mid)) hi = mid;
            else lo = mid + 1;
        }
        return lo;
    }
    // k: how many points have a > nu, searched in ranks [lo, hi) (the answer is known to lie
    // in [lo, hi]).
    std::int64_t capped_count(double nu, std::int64_t lo, std::int64_t hi) const {
        return first_hit(lo, hi, [&](std::int64_t i) { return a(i) <= nu; });
    }
    std::int64_t count_above(double value) const {  // gains > value
        return first_hit(0, size, [&](std::int64_t i) { return x(i) <= value; });
    }
    std::int64_t count_at_least(double value) const {  // gains >= value
        return first_hit(0, size, [&](std::int64_t i) { return x(i) < value; });
    }
    double cap_of(double gain, double nu) const {
        const double ag = gain + w * gain;
        return ag <= nu ? 1.0 : nu / ag;
    }
    double caps(double nu, std::int64_t k, std::int64_t s) const {  // C(s)
        if (s <= k) return nu * prefix(0, s);
        return nu * prefix(0, k) + static_cast<double>(s - k);
    }
    // Smallest s >= 1 with C(s) >= b (C(size) >= b assumed; base = C(k)).
    std::int64_t first_reaching(double nu, std::int64_t k, double base, double b) const {
        if (base >= b) {  // inside the capped prefix: the span by its offsets, then the point
            // the first span end j with C(j span) >= b
            const std::int64_t j = first_hit(0, spans + 1, [&](std::int64_t o) { return nu * offset(0, o) >= b; });
            if (j == 0) return 1;  // (b <= 0: C(1) >= b; the capped path never asks)
            const std::int64_t first = (j - 1) * span, last = std::min(j * span, k);
            const double off = offset(0, j - 1);
            double run = 0.0;
            for (std::int64_t i = first; i < last; ++i) {
                run = i == first ? term(0, i) : run + term(0, i);
                if (nu * (off + run) >= b) return i + 1;
            }
            return first + 1;  // (numpy's argmax of no hit)
        }
        std::int64_t t = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(b - base)));  // t points at cap 1
        while (t > 1 && base + static_cast<double>(t - 1) >= b) --t;
        while (base + static_cast<double>(t) < b) ++t;
        return k + t;
    }

    // F(nu) of the gain fill: status 0 and (value, slope, cut, resid, group total); status 1
    // where the budget reaches the loss order; status 2 where the fill goes on below the
    // values held (BeyondTop).
    int fill(double nu, double b, double m, double out[5]) const {
        const std::int64_t k = capped_count(nu, 0, size);
        const double base = nu * prefix(0, k);  // C(k); C(size) = C(k) + (size - k)
        if (base + static_cast<double>(size - k) < b) return complete ? 1 : 2;
        const std::int64_t s = first_reaching(nu, k, base, b);
        const double at = x(s - 1);
        const std::int64_t start = count_above(at), end = count_at_least(at);
        const double cut = x(start);
        const double resid = b - caps(nu, k, start);
        const std::int64_t j = std::min(start, k);
        const double ga = prefix(1, j), inv = prefix(0, j);
        out[0] = ((nu * ga + range_sum_g(k, start)) + cut * resid) - m * nu;
        out[1] = (ga - cut * inv) - m;
        out[2] = cut;
        out[3] = resid;
        out[4] = static_cast<double>(end - start) * cap_of(cut, nu);
        return 0;
    }

    // The least nu (to the bit) where the caps of the held ranks hold b: status 0 and nu;
    // status 1 where nu = 0 does; status 2 where they never do (size < b: BeyondTop).
    int fill_from(double b, double a_max, double* nu_out) const {
        if (static_cast<double>(size) < b) return 2;
        std::int64_t k_lo = capped_count(0.0, 0, size);
        if (caps(0.0, k_lo, size) >= b) return 1;
        std::int64_t lo = 0, hi;
        std::memcpy(&hi, &a_max, sizeof hi);
        std::int64_t k_hi = 0;  // the counts at lo and hi (k falls as nu grows)
        while (hi - lo > 1) {
            const std::int64_t mid = lo + (hi - lo) / 2;
            double nu;
            std::memcpy(&nu, &mid, sizeof nu);
            const std::int64_t k = capped_count(nu, k_hi, k_lo);
            if (caps(nu, k, size) >= b) {
                hi = mid;
                k_hi = k;
            } else {
                lo = mid;
                k_lo = k;
            }
        }
        std::memcpy(nu_out, &hi, sizeof hi);
        return 0;
    }
};

}  // namespace rad

// rad._core: thin, zero-copy pybind11 bindings. Arrays arrive validated, contiguous and
// of the exact dtype (python/rad/_backends/cpp_backend.py); the GIL is released around
// kernels. Every entry point still checks what would make a kernel read or write out of
// bounds (array lengths, index ranges, budgets, thread counts) and throws
// std::invalid_argument (Python ValueError), so a direct rad._core call cannot crash.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>
#if defined(_WIN32)
#include <process.h>
#else
#include <unistd.h>
#endif

#include "rad/capped.hpp"
#include "rad/depround.hpp"
#include "rad/gain_fill.hpp"
#include "rad/support.hpp"
#include "rad/radix_sort.hpp"
#include "rad/sketch.hpp"
#include "rad/threshold.hpp"

namespace py = pybind11;
using rad::Losses;
using rad::Params;

template <class T>
using Arr = py::array_t<T, py::array::c_style>;
using OptLosses = std::optional<Arr<double>>;
using ParamTuple = std::tuple<int, double, double, double, double, double>;

namespace {

// A check's message as a C string: a std::string parameter would be built (a heap
// allocation for a long message) at every call, also when the check passes, and
// merge_spans checks every item.
void require(bool ok, const char* message) {
    if (!ok) throw std::invalid_argument(message);
}

void require(bool ok, const std::string& message) {
    if (!ok) throw std::invalid_argument(message);
}

// The thread policy lives in Python (rad._backends.threads); here only a guard: at least
// one thread, and never more than the machine has (results do not depend on the count).
int checked_threads(int threads) {
    require(threads >= 1, "threads must be >= 1, got " + std::to_string(threads));
#ifdef RAD_HAVE_OPENMP
    return std::min(threads, std::max(1, omp_get_num_procs()));
#else
    return 1;
#endif
}

void check_losses(const OptLosses& losses, std::int64_t n) {
    if (losses) {
        require(losses->size() == n, "losses has " + std::to_string(losses->size()) + " entries, gains has " +
                                         std::to_string(n));
    }
}

void check_budget(std::int64_t b, std::int64_t n) {
    require(b >= 0 && b <= n, "b must be in [0, " + std::to_string(n) + "], got " + std::to_string(b));
}

// Group ends of a sorted array: strictly increasing, the last one n.
void check_ends(const Arr<std::int64_t>& ends, std::int64_t n, const char* name) {
    const std::int64_t k = ends.size();
    require(k >= 1 || n == 0, std::string(name) + " is empty");
    const std::int64_t* e = ends.data();
    std::int64_t prev = 0;
    bool ok = true;  // no message built per element: this loop runs once per tie group
    for (std::int64_t i = 0; i < k; ++i) {
        ok &= (e[i] > prev) & (e[i] <= n);
        prev = e[i];
    }
    require(ok, std::string(name) + " must increase strictly within (0, n]");
    require(k == 0 || prev == n, std::string(name) + " must end at n = " + std::to_string(n));
}

Losses make_losses(const OptLosses& losses, double w) {
    Losses L;
    if (losses) L.values = losses->data();
    L.w = w;
    return L;
}

Params make_params(const ParamTuple& t) {
    Params p;
    p.fill_loss = std::get<0>(t) != 0;
    p.nu = std::get<1>(t);
    p.gain_cut = std::get<2>(t);
    p.gain_frac = std::get<3>(t);
    p.loss_cut = std::get<4>(t);
    p.loss_frac = std::get<5>(t);
    return p;
}

// This process's id (a forked child's differs from its parent's).
inline long current_pid() {
#if defined(_WIN32)
    return static_cast<long>(_getpid());
#else
    return static_cast<long>(getpid());
#endif
}

// Long kernels stay interruptible: for pools of 2^22 points or more the kernel runs on a
// persistent worker thread (one for the process, so its OpenMP team is reused) while the
// calling, GIL-holding thread waits in 50 ms slices with the GIL released and asks Python
// for pending signals in between. On Ctrl-C the kernels' cancel flag is set, the worker
// stops at its next check (per block / 2^16 items) and KeyboardInterrupt propagates; the
// partial result is discarded. A call that finds the worker busy (another Python thread)
// runs inline. In a forked child (fork() copies only the calling thread) the parent's
// worker does not exist: the child starts a worker of its own (the copy is left alone).
class Worker {
   public:
    static Worker& get() {  // called with the GIL held: no two threads at once
        static Worker* w = nullptr;  // never destroyed: no join at interpreter exit
        static long owner = -1;      // the process w's thread runs in
        const long pid = current_pid();
        if (w == nullptr || owner != pid) {
            w = new Worker();
            owner = pid;
        }
        return *w;
    }
    bool try_claim() {
        std::lock_guard<std::mutex> lk(mu_);
        if (busy_) return false;
        busy_ = true;
        return true;
    }
    void submit(std::function<void()> job) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            job_ = std::move(job);
            done_ = false;
        }
        cv_.notify_all();
    }
    bool wait_for(std::chrono::milliseconds d) {
        std::unique_lock<std::mutex> lk(mu_);
        return cv_.wait_for(lk, d, [&] { return done_; });
    }
    void release() {
        std::lock_guard<std::mutex> lk(mu_);
        busy_ = false;
    }

   private:
    Worker() : thread_([this] { loop(); }) { thread_.detach(); }
    void loop() {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [&] { return static_cast<bool>(job_); });
                job = std::move(job_);
                job_ = nullptr;
            }
            job();
            {
                std::lock_guard<std::mutex> lk(mu_);
                done_ = true;
            }
            cv_.notify_all();
        }
    }
    std::mutex mu_;
    std::condition_variable cv_;
    std::function<void()> job_;
    bool done_ = true, busy_ = false;
    std::thread thread_;
};

template <class F>
auto interruptible(std::int64_t n, F&& f) -> decltype(f()) {
    using R = decltype(f());
    Worker& w = Worker::get();
    if (n < (std::int64_t{1} << 22) || !w.try_claim()) {
        // Inline; if another call's cancellation overlapped this run (the flag is global),
        // run again once it is lowered: a result (or an error) is never a cancelled run's.
        py::gil_scoped_release nogil;
        for (;;) {
            const std::uint64_t e0 = rad::cancel_epoch().load();
            if (rad::cancelled()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                continue;
            }
            try {
                R r = f();
                if (!rad::cancelled() && rad::cancel_epoch().load() == e0) return r;
            } catch (...) {
                if (!rad::cancelled() && rad::cancel_epoch().load() == e0) throw;
            }
        }
    }
    std::optional<R> result;
    std::exception_ptr err;
    w.submit([&] {
        try {
            result.emplace(f());
        } catch (...) {
            err = std::current_exception();
        }
    });
    for (;;) {
        bool finished;
        {
            py::gil_scoped_release nogil;
            finished = w.wait_for(std::chrono::milliseconds(50));
        }
        if (finished) break;
        if (PyErr_CheckSignals() != 0) {
            rad::cancel_flag().store(true);
            ++rad::cancel_epoch();
            {
                py::gil_scoped_release nogil;
                while (!w.wait_for(std::chrono::milliseconds(50))) {
                }
            }
            rad::cancel_flag().store(false);
            ++rad::cancel_epoch();
            w.release();
            throw py::error_already_set();
        }
    }
    w.release();
    if (err) std::rethrow_exception(err);
    return std::move(*result);
}

template <class V, class A>
py::array_t<V> to_array(std::vector<V, A>&& v) {
    auto* heap = new std::vector<V, A>(std::move(v));
    py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<V, A>*>(p); });
    return py::array_t<V>(static_cast<py::ssize_t>(heap->size()), heap->data(), owner);
}

// DepRound of the probabilities `params` defines (depround_params), or with the sketch
// threshold_support recorded at tau where one is given and the params are the uncapped
// path's (gain fill, gain_cut == tau, gain_frac == 1; depround_sketched in sketch.hpp).
template <class T>
py::array_t<std::int64_t> depround_of(Arr<T>& g, OptLosses& losses, double w, ParamTuple params, std::int64_t b,
                                      std::uint64_t key, int threads, const double* sketch = nullptr, double tau = 0,
                                      int slack_bits = 0) {
    const Losses L = make_losses(losses, w);
    const Params P = make_params(params);
    const T* gp = g.data();
    const std::int64_t n = g.size();
    threads = checked_threads(threads);
    check_losses(losses, n);
    check_budget(b, n);
    const bool sketched = sketch != nullptr && !P.fill_loss && P.gain_frac == 1.0 && P.gain_cut == tau && tau > 0;
    auto fill = [&](std::int64_t i0, std::int64_t cnt, double* out) { rad::probability_fill(gp, L, P, i0, cnt, out); };
    rad::Indices out;
    out = interruptible(n, [&] {
        return sketched ? rad::depround_sketched(n, b, key, threads, P.nu, sketch, slack_bits, fill)
                        : rad::depround(n, b, key, threads, fill);
    });
    return to_array(std::move(out));
}

template <class T>
void bind_for(py::module_& m) {
    m.def("first_invalid", [](Arr<T> x, int threads) {
        threads = checked_threads(threads);
        const T* p = x.data();
        const std::int64_t n = x.size();
        return interruptible(n, [&] { return rad::first_invalid(p, n, threads); });
    }, py::arg("x").noconvert(), py::arg("threads"));

    // In place, ascending (the capped path's parts of the top; see radix_sort_ascending).
    m.def("sort_in_place", [](py::array_t<T> x) {
        require(x.ndim() == 1 && (x.flags() & py::array::c_style) && x.writeable(),
                "sort_in_place needs a writable, contiguous 1-D array");
        T* p = x.mutable_data();
        const std::int64_t n = x.size();
        py::gil_scoped_release nogil;
        rad::radix_sort_ascending(p, n);
    }, py::arg("x").noconvert());

    m.def("argsort", [](Arr<T> x, bool descending, int threads) {
        threads = checked_threads(threads);
        const std::int64_t n = x.size();
        py::array_t<std::int64_t> perm(n);
        const T* p = x.data();
        std::int64_t* out = perm.mutable_data();
        interruptible(n, [&] {
            rad::radix_argsort(p, n, descending, out, threads);
            return 0;
        });
        return perm;
    }, py::arg("x").noconvert(), py::arg("descending"), py::arg("threads"));

    m.def("theorem1_scan", [](Arr<T> g, OptLosses losses, double w, Arr<std::int64_t> perm, double m, int threads) {
        threads = checked_threads(threads);
        const std::int64_t n = g.size();
        check_losses(losses, n);
        require(perm.size() == n, "perm has " + std::to_string(perm.size()) + " entries, gains has " + std::to_string(n));
        const std::int64_t* pp = perm.data();
        bool in_range = true;  // one test per element, the message only on failure
        for (std::int64_t i = 0; i < n; ++i) in_range &= (pp[i] >= 0) & (pp[i] < n);
        require(in_range, "perm holds an index outside [0, n)");
        const Losses L = make_losses(losses, w);
        const T* gp = g.data();
        auto r = interruptible(n, [&] { return rad::theorem1_scan(gp, L, pp, n, m, threads); });
        return std::make_tuple(r.kstar, r.g_total);
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("perm"), py::arg("m"), py::arg("threads"));

    m.def("threshold_search", [](Arr<T> g, OptLosses losses, double w, double m, int threads) {
        const Losses L = make_losses(losses, w);
        const T* gp = g.data();
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        auto r = interruptible(n, [&] { return rad::threshold_search(gp, L, n, m, threads); });
        return std::make_tuple(r.status, r.tau, r.kstar, r.g_total);
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("m"), py::arg("threads"));

    // threshold_search and, where b <= k*, the support sums over g >= tau, sharing a read.
    m.def("threshold_support", [](Arr<T> g, OptLosses losses, double w, double m, std::int64_t b, int threads) {
        const Losses L = make_losses(losses, w);
        const T* gp = g.data();
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        auto r = interruptible(n, [&] { return rad::threshold_support(gp, L, n, m, b, threads); });
        py::object sketch = py::none();
        if (r.has_sums) sketch = to_array(std::move(r.sketch));
        return std::make_tuple(r.search.status, r.search.tau, r.search.kstar, r.search.g_total, r.has_sums, r.sums.h,
                               r.sums.g, r.sums.count, r.sums.min_a, sketch);
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("m"), py::arg("b"), py::arg("threads"));

    // Test hook: threshold_support with a chosen bracket [lo, hi) of gain values and the
    // float32 first pass's margin 2^-margin_bits (wide margins gather many fine bins);
    // steer_at in [0, 1] moves where the support pass sums from within the gathered range
    // (where the first pass estimated tau), any value giving the same answer; the last
    // element is where it summed from (NaN: the range's top).
    m.def("threshold_support_bracketed", [](Arr<T> g, OptLosses losses, double w, double m, std::int64_t b, int threads,
                                            double lo, double hi, int margin_bits, double steer_at) {
        const Losses L = make_losses(losses, w);
        const T* gp = g.data();
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        require(lo >= 0 && hi >= 0 && !std::isnan(lo) && !std::isnan(hi), "the bracket must be non-negative");
        require(margin_bits >= 1 && margin_bits <= 52, "margin_bits must be in [1, 52]");
        require(steer_at < 0 || steer_at <= 1, "steer_at must be in [0, 1], or negative for the estimate");
        const rad::Bracket<T> br{rad::ordered_bits(static_cast<T>(lo)), rad::ordered_bits(static_cast<T>(hi))};
        auto r = interruptible(
            n, [&] { return rad::threshold_support_bracketed(gp, L, n, m, b, threads, br, margin_bits, steer_at); });
        return std::make_tuple(r.search.status, r.search.tau, r.search.kstar, r.search.g_total, r.has_sums, r.sums.h,
                               r.sums.g, r.sums.count, r.sums.min_a, r.steered_from);
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("m"), py::arg("b"), py::arg("threads"),
       py::arg("lo"), py::arg("hi"), py::arg("margin_bits"), py::arg("steer_at") = -1.0);

    // Test hook: the bracketed first pass with a chosen bracket [lo, hi) of gain values
    // (the above set is g >= hi); a bracket that misses tau must still give the exact answer.
    m.def("threshold_bracketed", [](Arr<T> g, OptLosses losses, double w, double m, int threads, double lo, double hi) {
        const Losses L = make_losses(losses, w);
        const T* gp = g.data();
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        require(lo >= 0 && hi >= 0 && !std::isnan(lo) && !std::isnan(hi), "the bracket must be non-negative");
        const rad::Bracket<T> br{rad::ordered_bits(static_cast<T>(lo)), rad::ordered_bits(static_cast<T>(hi))};
        auto r = interruptible(n, [&] { return rad::threshold_bracketed(gp, L, n, m, threads, br); });
        return std::make_tuple(r.status, r.tau, r.kstar, r.g_total);
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("m"), py::arg("threads"), py::arg("lo"),
       py::arg("hi"));

    // Test hook: the sampled bracket [lo, hi) (ordered bits) of the default search.
    m.def("sample_bracket", [](Arr<T> g, OptLosses losses, double w, double m, int threads) {
        const Losses L = make_losses(losses, w);
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        const rad::Bracket<T> br = rad::sample_bracket(g.data(), L, n, m, threads);
        return std::make_tuple(static_cast<std::uint64_t>(br.lo), static_cast<std::uint64_t>(br.hi));
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("m"), py::arg("threads"));

    // Test hook: refine_bracket of the bracket [lo, hi) (ordered bits) with a sample of `size`.
    m.def("refine_bracket", [](Arr<T> g, OptLosses losses, double w, double m, int threads, std::uint64_t lo,
                               std::uint64_t hi, std::int64_t size) {
        const Losses L = make_losses(losses, w);
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        using U = rad::uint_of<T>;
        const U top = rad::ordered_bits(std::numeric_limits<T>::infinity());
        require(lo <= hi && hi <= top, "the bracket must be ordered bits of non-negative values, lo <= hi");
        const rad::Bracket<T> br = rad::refine_bracket(g.data(), L, n, m, threads, rad::Bracket<T>{static_cast<U>(lo), static_cast<U>(hi)}, size);
        return std::make_tuple(static_cast<std::uint64_t>(br.lo), static_cast<std::uint64_t>(br.hi));
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("m"), py::arg("threads"), py::arg("lo"),
       py::arg("hi"), py::arg("size"));

    // Bandwidth probe for the benchmarks: one parallel vectorised sum (float64 lanes).
    m.def("stream_sum", [](Arr<T> x, int threads) {
        threads = checked_threads(threads);
        const T* p = x.data();
        const std::int64_t n = x.size();
        return interruptible(n, [&] { return rad::stream_sum(p, n, threads); });
    }, py::arg("x").noconvert(), py::arg("threads"));

    m.def("support_sums", [](Arr<T> g, OptLosses losses, double w, double tau, int threads) {
        const Losses L = make_losses(losses, w);
        const T* gp = g.data();
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        auto r = interruptible(n, [&] { return rad::support_sums(gp, L, n, tau, threads); });
        return std::make_tuple(r.h, r.g, r.count, r.min_a);
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("tau"), py::arg("threads"));

    m.def("span_sums", [](Arr<T> g, double w, std::int64_t span, int threads) {
        threads = checked_threads(threads);
        require(span > 0 && rad::kBlock % span == 0, "span_sums: the span must divide the block size");
        const T* gp = g.data();
        const std::int64_t n = g.size();
        std::vector<double> r;
        r = interruptible(n, [&] { return rad::span_sums(gp, n, w, span, threads); });
        py::array_t<double> out({static_cast<py::ssize_t>(3), static_cast<py::ssize_t>((n + span - 1) / span)});
        std::copy(r.begin(), r.end(), out.mutable_data());
        return out;
    }, py::arg("g").noconvert(), py::arg("w"), py::arg("span"), py::arg("threads"));

    m.def("values_at_least", [](Arr<T> g, double t, const std::vector<double>& splits, int threads) {
        threads = checked_threads(threads);
        require(!std::isnan(t), "t must not be NaN");
        for (const double s : splits) require(!std::isnan(s), "splits must not be NaN");
        const T* gp = g.data();
        const std::int64_t n = g.size();
        std::pair<rad::TopValues<T>, std::vector<std::int64_t>> r;
        r = interruptible(n, [&] {
            // One split or none: the vector compares' two parts; more: each value's part formed.
            if (splits.size() > 1) return rad::values_at_least_in_parts(gp, n, t, splits, threads);
            const double split = splits.empty() ? std::numeric_limits<double>::infinity() : splits[0];
            auto [top, first] = rad::values_at_least(gp, n, t, split, threads);
            const auto total = static_cast<std::int64_t>(top.size());
            return std::make_pair(std::move(top), splits.empty() ? std::vector<std::int64_t>{total}
                                                                 : std::vector<std::int64_t>{first, total});
        });
        return py::make_tuple(to_array(std::move(r.first)), to_array(std::move(r.second)));
    }, py::arg("g").noconvert(), py::arg("t"), py::arg("splits"), py::arg("threads"));

    // The capped path's gain fill on the sorted top (rad/gain_fill.hpp; the reference is
    // rad._solve.capped_rad.SortedRadGains): the context's arrays are passed each call.
    auto gain_fill_context = [](Arr<T>& g, Arr<double>& offsets, Arr<double>& totals, double w, std::int64_t span,
                                bool complete) {
        require(span > 0, "span must be positive");
        require(totals.ndim() == 2 && totals.shape(0) == 3 && offsets.ndim() == 2 && offsets.shape(0) == 3 &&
                    offsets.shape(1) == totals.shape(1) + 1 && totals.shape(1) == (g.size() + span - 1) / span,
                "offsets and totals must be (3, spans + 1) and (3, spans) for the held gains");
        return rad::SortedGainFill<T>{g.data(), g.size(), w, span, offsets.data(), totals.data(), totals.shape(1), complete};
    };
    m.def("gain_fill", [gain_fill_context](Arr<T> g, Arr<double> offsets, Arr<double> totals, double w, std::int64_t span,
                                           bool complete, double nu, double b, double m) {
        const auto fill = gain_fill_context(g, offsets, totals, w, span, complete);
        double out[5] = {};
        const int status = g.size() ? fill.fill(nu, b, m, out) : (complete ? 1 : 2);
        return py::make_tuple(status, out[0], out[1], out[2], out[3], out[4]);
    }, py::arg("g").noconvert(), py::arg("offsets"), py::arg("totals"), py::arg("w"), py::arg("span"),
       py::arg("complete"), py::arg("nu"), py::arg("b"), py::arg("m"));
    m.def("gain_fill_from", [gain_fill_context](Arr<T> g, Arr<double> offsets, Arr<double> totals, double w,
                                                std::int64_t span, bool complete, double b, double a_max) {
        const auto fill = gain_fill_context(g, offsets, totals, w, span, complete);
        double nu = 0.0;
        const int status = fill.fill_from(b, a_max, &nu);
        return py::make_tuple(status, nu);
    }, py::arg("g").noconvert(), py::arg("offsets"), py::arg("totals"), py::arg("w"), py::arg("span"),
       py::arg("complete"), py::arg("b"), py::arg("a_max"));

    m.def("support_block_sums", [](Arr<T> g, OptLosses losses, double w, double tau, int threads) {
        const Losses L = make_losses(losses, w);
        const T* gp = g.data();
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        rad::BlockSums r;
        r = interruptible(n, [&] { return rad::support_block_sums(gp, L, n, tau, threads); });
        return std::make_tuple(py::array_t<double>(r.h.size(), r.h.data()), py::array_t<double>(r.g.size(), r.g.data()),
                               py::array_t<std::int64_t>(r.count.size(), r.count.data()),
                               py::array_t<double>(r.min_a.size(), r.min_a.data()));
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("tau"), py::arg("threads"));

    m.def("depround_blocks", [](Arr<T> g, OptLosses losses, double w, ParamTuple params, std::uint64_t key,
                                std::int64_t offset, std::uint64_t first_stream, int threads) {
        const Losses L = make_losses(losses, w);
        const Params P = make_params(params);
        const T* gp = g.data();
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        rad::BlockPhase ph;
        ph = interruptible(n, [&] {
            return rad::depround_blocks(
                n, offset, first_stream, key, threads,
                [&](std::int64_t i0, std::int64_t cnt, double* out) { rad::probability_fill(gp, L, P, i0, cnt, out); });
        });
        py::array_t<std::int64_t> idx(ph.left.size());
        py::array_t<double> mass(ph.left.size());
        for (size_t j = 0; j < ph.left.size(); ++j) {
            idx.mutable_data()[j] = ph.left[j].index;
            mass.mutable_data()[j] = ph.left[j].mass;
        }
        return std::make_tuple(to_array(std::move(ph.taken)), idx, mass);
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("params"), py::arg("key"),
       py::arg("offset"), py::arg("first_stream"), py::arg("threads"));

    m.def("support_stats", [](Arr<T> g, OptLosses losses, double w, ParamTuple params, int threads) {
        const Losses L = make_losses(losses, w);
        const Params P = make_params(params);
        const T* gp = g.data();
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        return interruptible(n, [&] { return rad::support_stats(gp, L, n, P, threads); });
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("params"), py::arg("threads"));

    m.def("materialize", [](Arr<T> g, OptLosses losses, double w, ParamTuple params, int threads) {
        const Losses L = make_losses(losses, w);
        const Params P = make_params(params);
        const std::int64_t n = g.size();
        threads = checked_threads(threads);
        check_losses(losses, n);
        py::array_t<double> out(n);
        const T* gp = g.data();
        double* op = out.mutable_data();
        interruptible(n, [&] {
            rad::materialize(gp, L, n, P, op, threads);
            return 0;
        });
        return out;
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("params"), py::arg("threads"));

    m.def("depround_params", [](Arr<T> g, OptLosses losses, double w, ParamTuple params, std::int64_t b,
                                std::uint64_t key, int threads) {
        return depround_of(g, losses, w, params, b, key, threads);
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("params"), py::arg("b"),
       py::arg("key"), py::arg("threads"));

    // depround_params with the sketch threshold_support recorded at tau (depround_of): the
    // same indices, reading only the parts of the pool that hold a pick. slack_bits widens
    // the sketch's bounds (a test hook; 0 in use).
    m.def("depround_sketched", [](Arr<T> g, OptLosses losses, double w, ParamTuple params, std::int64_t b,
                                  std::uint64_t key, Arr<double> sketch, double tau, int threads, int slack_bits) {
        const std::int64_t want = rad::num_blocks(g.size()) * rad::kSketchParts;
        require(sketch.size() == want, "the sketch has " + std::to_string(sketch.size()) + " entries, not " +
                                           std::to_string(want) + " (" + std::to_string(rad::kSketchParts) +
                                           " per block of the gains)");
        require(slack_bits >= 0 && slack_bits <= 60, "slack_bits must be in [0, 60]");
        return depround_of(g, losses, w, params, b, key, threads, sketch.data(), tau, slack_bits);
    }, py::arg("gains").noconvert(), py::arg("losses"), py::arg("w"), py::arg("params"), py::arg("b"),
       py::arg("key"), py::arg("sketch").noconvert(), py::arg("tau"), py::arg("threads"), py::arg("slack_bits") = 0);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "rad's compiled kernels (C++17, OpenMP). Use the rad package, not this module.";
    bind_for<float>(m);
    bind_for<double>(m);
    m.def("depround_q", [](Arr<double> q, std::int64_t b, std::uint64_t key, int threads) {
        threads = checked_threads(threads);
        const double* qp = q.data();
        const std::int64_t n = q.size();
        check_budget(b, n);
        rad::Indices out;
        auto q_at = [&](std::int64_t i) { return qp[i]; };
        out = interruptible(n, [&] { return rad::depround(n, b, key, threads, rad::fill_from(q_at)); });
        return to_array(std::move(out));
    }, py::arg("q").noconvert(), py::arg("b"), py::arg("key"), py::arg("threads"));
    // Test and benchmark hook: how the support pass forms RN(1/a) (rad/reciprocal.hpp; the
    // same bits either way): "auto" (timed at the next use), "divide" or "mixed".
    m.def("set_support_reciprocal", [](const std::string& mode) {
        require(mode == "auto" || mode == "divide" || mode == "mixed",
                "the support reciprocal must be 'auto', 'divide' or 'mixed', not '" + mode + "'");
        rad::set_reciprocal_mode(mode == "auto" ? 0 : mode == "divide" ? 1 : 2);
    }, py::arg("mode"));
    // The method the support pass uses (chosen now if it was not yet): "divide" or "mixed".
    m.def("support_reciprocal", [] { return std::string(rad::support_reciprocal_mode() == 2 ? "mixed" : "divide"); });
    // Test hook: 1/a for every a, eight at a time by rad::reciprocal_rn where `newton` and
    // the build has AVX-512 (the divider elsewhere and for the tail).
    m.def("support_reciprocals", [](Arr<double> a, bool newton) {
        const std::int64_t n = a.size();
        py::array_t<double> out(n);
        const double* ap = a.data();
        double* op = out.mutable_data();
        std::int64_t i = 0;
#if defined(__AVX512F__)
        for (; newton && i + 8 <= n; i += 8)
            _mm512_storeu_pd(op + i, rad::reciprocal_rn(_mm512_loadu_pd(ap + i), 0xFF));
#endif
        for (; i < n; ++i) op[i] = 1.0 / ap[i];
        return out;
    }, py::arg("a").noconvert(), py::arg("newton"));
    // Test hook: the float32 first pass's sums (threshold.hpp, approx_pass_range) over a
    // bracket [lo, hi) of gain values: (sum of float 1/x over x >= hi, n above, n below,
    // n positive, unsafe); the tests hold the sum to its documented error bound.
    m.def("approx_first_pass_sums", [](Arr<float> g, double lo, double hi, int threads) {
        threads = checked_threads(threads);
        require(lo >= 0 && hi > lo && !std::isnan(lo) && !std::isnan(hi), "the bracket must be 0 <= lo < hi");
        const float* gp = g.data();
        const std::int64_t n = g.size();
        const std::uint32_t ulo = rad::ordered_bits(static_cast<float>(lo)), uhi = rad::ordered_bits(static_cast<float>(hi));
        require(ulo < uhi, "the bracket must hold a float value");
        const rad::ApproxPass p = interruptible(n, [&] { return rad::approx_pass(gp, n, threads, ulo, uhi); });
        return std::make_tuple(p.tot.h, p.tot.above, p.tot.below, p.tot.positive, p.tot.unsafe);
    }, py::arg("gains").noconvert(), py::arg("lo"), py::arg("hi"), py::arg("threads"));
    // Test hook: the bounds sketch.hpp derives from each block's sketch row (units prefixes
    // U(0..kSketchParts)), and whether the row is usable; the tests check exact prefixes against them.
    m.def("sketch_unit_bounds", [](Arr<double> sketch, double nu, int slack_bits) {
        require(sketch.size() % rad::kSketchParts == 0, "the sketch must have SKETCH_PARTS entries per block");
        require(slack_bits >= 0 && slack_bits <= 60, "slack_bits must be in [0, 60]");
        const std::int64_t nb = sketch.size() / rad::kSketchParts;
        constexpr std::int64_t kw = rad::kSketchParts + 1;
        py::array_t<std::int64_t> lo({nb, kw}), hi({nb, kw});
        py::array_t<bool> usable(nb);
        for (std::int64_t blk = 0; blk < nb; ++blk) {
            rad::Span U[kw];
            usable.mutable_data()[blk] = rad::sketch_bounds(sketch.data() + blk * rad::kSketchParts, nu, slack_bits, U);
            for (std::int64_t k = 0; k < kw; ++k) {
                lo.mutable_data()[blk * kw + k] = U[k].lo;
                hi.mutable_data()[blk * kw + k] = U[k].hi;
            }
        }
        return std::make_tuple(lo, hi, usable);
    }, py::arg("sketch").noconvert(), py::arg("nu"), py::arg("slack_bits"));
    // Test hook: sketch_total's bounds of each block's total units (what DepRound draws
    // from) and whether the row is usable; the tests check them against sketch_bounds'.
    m.def("sketch_unit_totals", [](Arr<double> sketch, double nu, int slack_bits) {
        require(sketch.size() % rad::kSketchParts == 0, "the sketch must have SKETCH_PARTS entries per block");
        require(slack_bits >= 0 && slack_bits <= 60, "slack_bits must be in [0, 60]");
        const std::int64_t nb = sketch.size() / rad::kSketchParts;
        py::array_t<std::int64_t> lo(nb), hi(nb);
        py::array_t<bool> usable(nb);
        for (std::int64_t blk = 0; blk < nb; ++blk) {
            rad::Span total;
            usable.mutable_data()[blk] = rad::sketch_total(sketch.data() + blk * rad::kSketchParts, nu, slack_bits, total);
            lo.mutable_data()[blk] = total.lo;
            hi.mutable_data()[blk] = total.hi;
        }
        return std::make_tuple(lo, hi, usable);
    }, py::arg("sketch").noconvert(), py::arg("nu"), py::arg("slack_bits"));
    // Test hook: how many blocks the sketched rounding rounded from the parts their
    // crossings lie in, how many of those the bounds left undecided (rounded whole), and
    // the parts read, summed over calls since the last reset.
    m.def("sketch_counts", [](bool reset) {
        auto& c = rad::sketch_counts();
        auto out = std::make_tuple(c.from_parts.load(), c.from_parts_undecided.load(), c.parts_read.load());
        if (reset) c.from_parts = 0, c.from_parts_undecided = 0, c.parts_read = 0;
        return out;
    }, py::arg("reset") = false);
    // Test hook: sketch.hpp's merge on masses known within [lo, hi] units, as
    // canonical.merge_leftovers takes the leftovers with mass: (decided, taken, last,
    // stuck), stuck a position of the input (a mass whose bounds straddle 0 is undecided).
    m.def("merge_spans", [](Arr<std::int64_t> ids, Arr<std::int64_t> lo, Arr<std::int64_t> hi, std::uint64_t key,
                            std::int64_t wanted) {
        require(ids.size() == lo.size() && ids.size() == hi.size(), "merge_spans: ids, lo and hi differ in length");
        // kept per thread: fresh vectors of 15,259 leftovers (1e9 points) would be mmapped
        // anew at each call, and their page faults cost more than the merge
        thread_local std::vector<std::int64_t> li, ld;
        thread_local std::vector<rad::Span> lm;
        li.clear();
        ld.clear();
        lm.clear();
        std::vector<std::int64_t> out;
        std::int64_t last = -1, stuck = -1;
        for (std::int64_t i = 0; i < ids.size(); ++i) {
            require(0 <= lo.data()[i] && lo.data()[i] <= hi.data()[i] && hi.data()[i] < rad::kOne,
                    "merge_spans: each mass must satisfy 0 <= lo <= hi < 2^46");
            if (hi.data()[i] == 0) continue;
            if (lo.data()[i] == 0) return std::make_tuple(false, to_array(std::move(out)), last, i);
            li.push_back(ids.data()[i]);
            lm.push_back({lo.data()[i], hi.data()[i]});
            ld.push_back(i);
        }
        const bool ok = rad::merge_spans(li, lm, ld, key, wanted, out, last, stuck);
        return std::make_tuple(ok, to_array(std::move(out)), last, stuck);
    }, py::arg("ids").noconvert(), py::arg("lo").noconvert(), py::arg("hi").noconvert(), py::arg("key"),
       py::arg("wanted"));
    m.def("merge_leftovers", [](Arr<std::int64_t> ids, Arr<double> masses, std::uint64_t key, std::int64_t wanted) {
        require(ids.size() == masses.size(), "merge_leftovers: ids and masses differ in length");
        std::vector<std::int64_t> out;
        const rad::Leftover last = rad::merge_leftovers(std::vector<std::int64_t>(ids.data(), ids.data() + ids.size()),
                                                        std::vector<double>(masses.data(), masses.data() + masses.size()),
                                                        key, wanted, out);
        return std::make_tuple(to_array(std::move(out)), last.index);
    }, py::arg("ids").noconvert(), py::arg("masses").noconvert(), py::arg("key"), py::arg("wanted"));
    m.def("capped_eval", [](Arr<double> g_g, Arr<double> a_g, Arr<std::int64_t> ends_g, Arr<double> l_l,
                            Arr<double> a_l, Arr<std::int64_t> ends_l, double nu, double b, double m, int threads) {
        threads = checked_threads(threads);
        const std::int64_t n = g_g.size();
        require(a_g.size() == n && l_l.size() == n && a_l.size() == n, "capped_eval: the sorted arrays differ in length");
        check_ends(ends_g, n, "ends_g");
        check_ends(ends_l, n, "ends_l");
        require(n > 0, "capped_eval needs at least one point");
        const double *gg = g_g.data(), *ag = a_g.data(), *ll = l_l.data(), *al = a_l.data();
        const std::int64_t *eg = ends_g.data(), *el = ends_l.data();
        const std::int64_t neg = ends_g.size(), nel = ends_l.size();
        auto r = interruptible(n, [&] { return rad::capped_eval(gg, ag, eg, neg, ll, al, el, nel, n, nu, b, m, threads); });
        return std::make_tuple(r.value, r.slope, r.fill_loss, r.cut, r.resid, r.group_total);
    });
    m.attr("BLOCK") = rad::kBlock;
    m.attr("SKETCH_PARTS") = rad::kSketchParts;
    m.attr("has_openmp") = rad::has_openmp();
}

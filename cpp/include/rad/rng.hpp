// Counter-based uniforms shared with the Python backends (docs/design.md §2 "RNG").
// uniform(state, c) is a pure function, so every block of the pool draws the same
// numbers whichever thread or backend processes it. Mirrors python/rad/_backends/rng.py.
#pragma once
#include <cstdint>

namespace rad {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr std::uint64_t kMergeStream = ~std::uint64_t{0};

inline std::uint64_t splitmix64(std::uint64_t z) {
    z += kGolden;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

inline std::uint64_t stream_state(std::uint64_t key, std::uint64_t stream) {
    return splitmix64(key ^ splitmix64(stream));
}

// One stream: the c-th draw is splitmix64(state + c * golden), mapped to [0, 1).
class Stream {
  public:
    explicit Stream(std::uint64_t state) : state_(state) {}
    double next() {
        std::uint64_t z = splitmix64(state_ + counter_ * kGolden);
        ++counter_;
        return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
    }

  private:
    std::uint64_t state_;
    std::uint64_t counter_ = 0;
};

}  // namespace rad

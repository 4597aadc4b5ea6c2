// A small, fully specified random generator (splitmix64) whose whole state is
// one integer, so checkpoints can store it and every platform draws the same
// sequence (std:: distributions are not portable across standard libraries).
#pragma once

#include <cmath>
#include <cstdint>

namespace cclab::train {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), n > 0 (the modulo bias is below 2^-40 for our n).
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  // Standard normal (Box-Muller; one draw per call keeps the state simple).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  std::uint64_t state() const { return state_; }
  void set_state(std::uint64_t s) { state_ = s; }

 private:
  std::uint64_t state_;
};

// The purposes derive_seed separates, two ASCII letters each.
inline constexpr std::uint64_t kSeedShuffle = 0x5348;   // "SH": shuffle of an epoch
inline constexpr std::uint64_t kSeedInit = 0x494e;      // "IN": a rank's initial weights
inline constexpr std::uint64_t kSeedGenerate = 0x4745;  // "GE": a generated dataset

// A seed for one purpose (e.g. "shuffle of epoch e") derived from the run seed.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t purpose, std::uint64_t index) {
  Rng r(seed ^ (purpose * 0x9e3779b97f4a7c15ull));
  r.set_state(r.next() ^ index);
  return r.next();
}

}  // namespace cclab::train

// Rng (xoshiro256** seeded by splitmix64) and the tensor initialisers.
// The algorithms are documented in runtime.hpp; the constants below are the
// ones in Vigna's reference implementations (prng.di.unimi.it).
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

#include "internal.hpp"
#include "wfgen/runtime.hpp"

namespace wfgen::rt {

namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Writes gen() converted to the tensor's dtype into every element, in
// row-major order of the visible shape.
template <class Gen>
void fill_with(const Tensor& t, Gen&& gen) {
  const Shape shape = t.shape(), strides = t.strides();
  visit_dtype(t.dtype(), [&]<class E>(std::type_identity<E>) {
    E* d = static_cast<E*>(t.raw_data());
    internal::for_each_offset(t.rank(), shape.data(), strides.data(), [&](std::int64_t o) {
      d[o] = gen(std::type_identity<E>{});
    });
  });
}

}  // namespace

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void Rng::seed(std::uint64_t seed) {
  // splitmix64 never yields four zero words in a row, so the xoshiro state
  // is never all-zero (the one state it cannot leave).
  std::uint64_t sm = seed;
  for (std::uint64_t& w : s_) w = splitmix64(sm);
  has_spare_ = false;
  spare_ = 0.0;
}

std::uint64_t Rng::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }

double Rng::normal(double mean, double std) {
  if (has_spare_) {
    has_spare_ = false;
    return mean + std * spare_;
  }
  // 1 - u1 lies in (0, 1], so the logarithm is finite.
  const double u1 = uniform01();
  const double u2 = uniform01();
  const double r = std::sqrt(-2.0 * std::log(1.0 - u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return mean + std * (r * std::cos(theta));
}

void fill_uniform(const Tensor& t, double lo, double hi, Rng& rng) {
  if (!(lo < hi)) {
    fail(ErrorCode::InvalidArgument, "fill_uniform got range [" + std::to_string(lo) +
                                                ", " + std::to_string(hi) +
                                                "), expected lo < hi");
  }
  fill_with(t, [&]<class E>(std::type_identity<E>) -> E {
    const double v = rng.uniform(lo, hi);
    if constexpr (std::is_same_v<E, float>) {
      // Rounding to float can land on hi itself; keep the range half-open.
      const float f = static_cast<float>(v);
      return static_cast<double>(f) >= hi ? std::nextafter(f, -std::numeric_limits<float>::infinity())
                                          : f;
    } else if constexpr (std::is_floating_point_v<E>) {
      return v;
    } else {
      return internal::convert_checked<E>(std::floor(v), "fill_uniform");
    }
  });
}

void fill_normal(const Tensor& t, double mean, double std, Rng& rng) {
  if (!(std >= 0.0)) {
    fail(ErrorCode::InvalidArgument,
                "fill_normal got std " + std::to_string(std) + ", expected std >= 0");
  }
  fill_with(t, [&]<class E>(std::type_identity<E>) -> E {
    const double v = rng.normal(mean, std);
    if constexpr (std::is_floating_point_v<E>) {
      return static_cast<E>(v);
    } else {
      return internal::convert_checked<E>(std::round(v), "fill_normal");
    }
  });
}

}  // namespace wfgen::rt

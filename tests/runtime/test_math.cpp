// rt::math::erf (gelu's, vectorisable) against std::erf in double;
// rt::math::exp (the accurate exp every generated kernel calls) and
// rt::math::fast::exp (the one a build opts into with `math: fast`) against
// the correctly rounded result (std::exp in double, rounded once to float),
// over every float of the range step 2^-10 and at the edges. The bounds
// asserted here are the ones kernel_math.hpp and docs/performance-history.md state.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "wfgen/kernel_math.hpp"
#include "wfgen/layer_norm.hpp"

namespace {

// Distance in units in the last place between two finite floats of one sign
// (the bit patterns of floats of one sign are ordered as integers).
std::int64_t ulps(float a, float b) {
  const std::int64_t ia = std::bit_cast<std::int32_t>(a), ib = std::bit_cast<std::int32_t>(b);
  return ia > ib ? ia - ib : ib - ia;
}

float reference(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }

template <class Exp>
std::int64_t worst_ulps(Exp exp, float lo, float hi, float& where) {
  std::int64_t worst = 0;
  for (float x = lo; x <= hi; x += 0x1p-10f) {
    const std::int64_t u = ulps(exp(x), reference(x));
    if (u > worst) worst = u, where = x;
  }
  return worst;
}

}  // namespace

TEST_CASE("math::exp is within 1 ulp over the normal range, edges exact", "[math][exp]") {
  float where = 0;
  // exp(x) is a normal float for x >= -87.33; below, subnormals, whose ulp is fixed.
  const std::int64_t worst = worst_ulps([](float x) { return wfgen::rt::math::exp(x); }, -87.0f, 88.5f, where);
  INFO("worst at x = " << where);
  CHECK(worst <= 1);
  // The subnormal range rounds once (2^k in two factors): within 1 ulp of a subnormal too.
  for (float x = -103.0f; x < -87.5f; x += 0.25f) CHECK(ulps(wfgen::rt::math::exp(x), reference(x)) <= 1);
  CHECK(wfgen::rt::math::exp(0.0f) == 1.0f);
  CHECK(wfgen::rt::math::exp(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isinf(wfgen::rt::math::exp(std::numeric_limits<float>::infinity())));
  CHECK(std::isinf(wfgen::rt::math::exp(89.0f)));
  CHECK(std::isnan(wfgen::rt::math::exp(std::numeric_limits<float>::quiet_NaN())));
}

// exp_in_place and exp_shifted (fused row kernels call them on the row
// they cache): on AVX-512 builds their own vector exp (the "native:" tests
// run this file compiled for this machine), elsewhere a loop of the scalar
// exp. Each within its bound of the correctly rounded exp, one element at a
// time (the masked tail) and in rows of every length around the vector
// width, whose elements must not depend on where they sit, whose neighbours
// past n must stay untouched, and whose sum is returned. `clamp_lo` and
// `clamp_hi`: where the inputs are clamped (exp of anything below is exp of
// clamp_lo).
template <class InPlace>
void check_exp_in_place(InPlace in_place, float lo, float hi, std::int64_t bound, float clamp_lo, float clamp_hi) {
  const auto one = [&](float x) {
    in_place(&x, 1);
    return x;
  };
  float where = 0;
  const std::int64_t worst = worst_ulps(one, lo, hi, where);
  INFO("worst at x = " << where << ": " << worst << " ulp");
  CHECK(worst <= bound);
  for (std::int64_t n = 0; n <= 40; ++n) {
    std::vector<float> row(static_cast<std::size_t>(n) + 16, -7.0f);
    for (std::int64_t c = 0; c < n; ++c) row[static_cast<std::size_t>(c)] = -20.0f + 0.75f * static_cast<float>(c);
    const float sum = in_place(row.data(), n);
    double want_sum = 0;
    for (std::int64_t c = 0; c < n; ++c) {
      const float x = -20.0f + 0.75f * static_cast<float>(c);
      INFO("n = " << n << ", c = " << c);
      CHECK(row[static_cast<std::size_t>(c)] == one(x));
      CHECK(ulps(row[static_cast<std::size_t>(c)], reference(x)) <= bound);
      want_sum += row[static_cast<std::size_t>(c)];
    }
    INFO("n = " << n);
    CHECK(std::fabs(sum - want_sum) <= 1e-6 * want_sum);
    for (std::size_t c = static_cast<std::size_t>(n); c < row.size(); ++c) CHECK(row[c] == -7.0f);
  }
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(one(0.0f) == 1.0f);
  CHECK(one(-0.0f) == 1.0f);
  CHECK(std::isnan(one(std::numeric_limits<float>::quiet_NaN())));
  CHECK(one(-inf) == one(clamp_lo));
  CHECK(one(-1000.0f) == one(clamp_lo));
  CHECK(one(inf) == one(clamp_hi));
  CHECK(one(1000.0f) == one(clamp_hi));
  // A NaN anywhere in a row makes the sum NaN, the other elements untouched.
  std::vector<float> with_nan = {1.0f, std::numeric_limits<float>::quiet_NaN(), -2.0f};
  CHECK(std::isnan(in_place(with_nan.data(), 3)));
  CHECK(with_nan[0] == one(1.0f));
  CHECK(with_nan[2] == one(-2.0f));
}

TEST_CASE("math::exp_in_place: math::exp's bounds and edges, a row at a time", "[math][exp]") {
  namespace math = wfgen::rt::math;
  const auto in_place = [](float* x, std::int64_t n) { return math::exp_in_place(x, n); };
  check_exp_in_place(in_place, -87.0f, 88.5f, 1, -104.0f, 89.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x = -103.0f; x < -87.5f; x += 0.25f) {  // subnormal results, rounded once
    float y = x;
    math::exp_in_place(&y, 1);
    CHECK(ulps(y, reference(x)) <= 1);
  }
  std::vector<float> edges = {-inf, 89.0f, inf};
  math::exp_in_place(edges.data(), 3);
  CHECK(edges[0] == 0.0f);
  CHECK(std::isinf(edges[1]));
  CHECK(std::isinf(edges[2]));
  std::vector<double> d = {-700.0, -1.5, 0.0, 2.25, 700.0};
  const double sum = math::exp_in_place(d.data(), static_cast<std::int64_t>(d.size()));
  CHECK(d[1] == math::exp(-1.5));
  CHECK(d[3] == math::exp(2.25));
  CHECK(d[4] == math::exp(700.0));
  CHECK(std::fabs(sum - ((((d[0] + d[1]) + d[2]) + d[3]) + d[4])) <= 1e-15 * sum);
}

TEST_CASE("math::exp_shifted is exp_in_place of src - shift, into another row", "[math][exp]") {
  namespace math = wfgen::rt::math;
  for (std::int64_t n = 0; n <= 40; ++n) {
    std::vector<float> src(static_cast<std::size_t>(n)), dst(static_cast<std::size_t>(n) + 16, -7.0f), fast_dst = dst;
    for (std::int64_t c = 0; c < n; ++c) src[static_cast<std::size_t>(c)] = -30.0f + 1.25f * static_cast<float>(c);
    std::vector<float> want = src, fast_want = src;
    for (auto* v : {&want, &fast_want})
      for (float& x : *v) x -= 2.5f;
    const float want_sum = math::exp_in_place(want.data(), n), fast_want_sum = math::fast::exp_in_place(fast_want.data(), n);
    CHECK(math::exp_shifted(dst.data(), src.data(), 2.5f, n) == want_sum);
    CHECK(math::fast::exp_shifted(fast_dst.data(), src.data(), 2.5f, n) == fast_want_sum);
    // A row to prefetch meanwhile (`ahead`) changes nothing written or returned.
    std::vector<float> later(static_cast<std::size_t>(n) + 1, 1.0f), with_ahead(dst.size(), -7.0f);
    CHECK(math::exp_shifted(with_ahead.data(), src.data(), 2.5f, n, later.data()) == want_sum);
    CHECK(std::equal(with_ahead.begin(), with_ahead.end(), dst.begin()));
    for (std::int64_t c = 0; c < n; ++c) {
      INFO("n = " << n << ", c = " << c);
      CHECK(dst[static_cast<std::size_t>(c)] == want[static_cast<std::size_t>(c)]);
      CHECK(fast_dst[static_cast<std::size_t>(c)] == fast_want[static_cast<std::size_t>(c)]);
      CHECK(ulps(dst[static_cast<std::size_t>(c)], reference(src[static_cast<std::size_t>(c)] - 2.5f)) <= 1);
    }
    for (std::size_t c = static_cast<std::size_t>(n); c < dst.size(); ++c) CHECK((dst[c] == -7.0f && fast_dst[c] == -7.0f));
  }
  std::vector<double> d = {1.0, 2.0, 3.0}, into(3);
  math::exp_shifted(into.data(), d.data(), 0.5, 3);
  CHECK(into[2] == math::exp(2.5));
}

// exp_minus_max (softmax's exp(x - max), the upper clamp left out): the
// same elements and sum as exp_shifted by the row's max, for every length
// around the vector width and rows reaching far below their max, with -inf,
// +inf and NaN in them; both variants.
TEST_CASE("math::exp_minus_max is exp_shifted by the row's max", "[math][exp]") {
  namespace math = wfgen::rt::math;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const auto check_row = [](const std::vector<float>& src) {
    const auto n = static_cast<std::int64_t>(src.size());
    const float max = math::max_row(src.data(), n);
    for (const bool fast : {false, true}) {
      std::vector<float> want(src.size() + 16, -7.0f), got = want;
      const float want_sum = fast ? math::fast::exp_shifted(want.data(), src.data(), max, n)
                                  : math::exp_shifted(want.data(), src.data(), max, n);
      const float got_sum = fast ? math::fast::exp_minus_max(got.data(), src.data(), max, n)
                                 : math::exp_minus_max(got.data(), src.data(), max, n);
      INFO("n = " << n << ", fast = " << fast << ", max = " << max);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);  // NaN payloads and -0 too
      CHECK(((got_sum == want_sum) || (std::isnan(got_sum) && std::isnan(want_sum))));
    }
  };
  for (std::int64_t n = 0; n <= 40; ++n) {
    std::vector<float> row(static_cast<std::size_t>(n));
    for (std::int64_t c = 0; c < n; ++c) row[static_cast<std::size_t>(c)] = 40.0f - 7.5f * static_cast<float>(c);  // down to -260
    check_row(row);
    if (n > 0) {
      for (const float special : {-inf, inf, nan}) {
        std::vector<float> with = row;
        with[static_cast<std::size_t>(n / 2)] = special;
        check_row(with);
      }
    }
  }
  check_row(std::vector<float>(19, -inf));  // max -inf: every x - max is NaN
  check_row(std::vector<float>(21, inf));
  CHECK(math::exp_minus_max(static_cast<float*>(nullptr), static_cast<const float*>(nullptr), 0.0f, 0) == 0.0f);
}

TEST_CASE("math::fast::exp_in_place: within fast::exp's bound, clamped where it is", "[math][exp]") {
  namespace fast = wfgen::rt::math::fast;
  check_exp_in_place([](float* x, std::int64_t n) { return fast::exp_in_place(x, n); }, -87.0f, 88.3f, 6, -87.3f, 88.37f);
  float above = 88.37f;
  fast::exp_in_place(&above, 1);
  CHECK(above > 2.3e38f);
  CHECK(std::isfinite(above));
}

// max_row and min_row (fused row kernels call max_row for the max of an
// input's row): against a plain loop, NaN anywhere (each position, each
// length around the two-vector step) giving NaN, empty rows their start.
TEST_CASE("math::max_row and min_row: every length and tail, NaN anywhere, empty rows", "[math]") {
  namespace math = wfgen::rt::math;
  const float inf = std::numeric_limits<float>::infinity();
  for (std::int64_t n = 0; n <= 70; ++n) {
    std::vector<float> row(static_cast<std::size_t>(n));
    std::vector<double> drow(row.size());
    for (std::int64_t c = 0; c < n; ++c) {
      // Each length's largest and smallest at a different column.
      row[static_cast<std::size_t>(c)] = static_cast<float>((c * 37 + n * 11) % 101) - 50.0f;
      drow[static_cast<std::size_t>(c)] = row[static_cast<std::size_t>(c)];
    }
    float hi = -inf, lo = inf;
    for (float v : row) hi = v > hi ? v : hi, lo = v < lo ? v : lo;
    INFO("n = " << n);
    CHECK(math::max_row(row.data(), n) == hi);
    CHECK(math::min_row(row.data(), n) == lo);
    CHECK(math::max_row(drow.data(), n) == static_cast<double>(hi));
    CHECK(math::min_row(drow.data(), n) == static_cast<double>(lo));
    for (std::int64_t at = 0; at < n; ++at) {
      std::vector<float> with_nan = row;
      with_nan[static_cast<std::size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
      INFO("NaN at " << at);
      CHECK(std::isnan(math::max_row(with_nan.data(), n)));
      CHECK(std::isnan(math::min_row(with_nan.data(), n)));
    }
  }
  std::vector<float> all_low = {-inf, -inf, -inf};
  CHECK(math::max_row(all_low.data(), 3) == -inf);
  CHECK(math::min_row(all_low.data(), 3) == -inf);
  std::vector<float> negatives(20, -3.0f);  // the masked tail's other lanes must not count
  negatives[19] = -2.0f;
  CHECK(math::max_row(negatives.data(), 19) == -3.0f);
  CHECK(math::max_row(negatives.data(), 20) == -2.0f);
}

TEST_CASE("math::fast::exp is within 6 ulp from -87 to 88.3, clamped outside as documented", "[math][exp]") {
  namespace fast = wfgen::rt::math::fast;
  float where = 0;
  const std::int64_t worst = worst_ulps([](float x) { return fast::exp(x); }, -87.0f, 88.3f, where);
  INFO("worst at x = " << where << ": " << worst << " ulp");
  CHECK(worst <= 6);  // every float of [-87, 88.3] checked once by hand: 6 at x = 0.3466
  CHECK(worst >= 1);  // it is a different, coarser exp (a test that catches math::exp standing in for it)
  CHECK(fast::exp(0.0f) == 1.0f);
  // Below -87.3: exp(-87.3) ~ 1.2e-38, a normal float; above 88.37: exp(88.37).
  CHECK(fast::exp(-std::numeric_limits<float>::infinity()) > 0.0f);
  CHECK(fast::exp(-std::numeric_limits<float>::infinity()) < 1.3e-38f);
  CHECK(fast::exp(-1000.0f) == fast::exp(-87.3f));
  CHECK(std::isfinite(fast::exp(1000.0f)));
  CHECK(fast::exp(1000.0f) == fast::exp(88.37f));
  CHECK(fast::exp(88.37f) > 2.3e38f);
  CHECK(std::isnan(fast::exp(std::numeric_limits<float>::quiet_NaN())));
  // Everything else is math's: doubles keep the accurate exp, sigmoid uses the fast one.
  CHECK(fast::exp(1.5) == wfgen::rt::math::exp(1.5));
  CHECK(fast::sigmoid(0.5f) == 1.0f / (1.0f + fast::exp(-0.5f)));
  CHECK(fast::max(1.0f, 2.0f) == 2.0f);
}

TEST_CASE("math::erf is within 2 ulp of the correctly rounded erf, +-inf and NaN as std::erf", "[math][erf]") {
  auto ref = [](float x) { return static_cast<float>(std::erf(static_cast<double>(x))); };
  std::int64_t worst = 0;
  float where = 0;
  auto check = [&](float x) {
    const std::int64_t u = ulps(wfgen::rt::math::erf(x), ref(x));
    if (u > worst) worst = u, where = x;
  };
  // Both ranges and the switch between them at 0.927734375, where erf
  // leaves 1 (from 3.92 on it is 1.0f), and the small and subnormal inputs
  // (erf(x) ~ 1.128 x, normal and subnormal); each sign (ulps compares
  // floats of one sign).
  for (float x = 0; x <= 5.0f; x += 0x1p-12f) check(x), check(-x);
  for (float x = 0x1p-126f; x < 1e-3f; x *= 1.37f) check(x), check(-x);
  for (float x : {0x1p-149f, 0x1p-140f, 0x1.8p-130f}) check(x), check(-x);
  for (float x = 0.92f; x < 0.94f; x = std::nextafter(x, 1.0f)) check(x);
  INFO("worst at x = " << where << ": " << worst << " ulp");
  CHECK(worst <= 2);
  CHECK(wfgen::rt::math::erf(0.0f) == 0.0f);
  CHECK(wfgen::rt::math::erf(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(wfgen::rt::math::erf(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(wfgen::rt::math::erf(1e30f) == 1.0f);
  CHECK(std::isnan(wfgen::rt::math::erf(std::numeric_limits<float>::quiet_NaN())));
  // Large |x|, where the tail's exp(q) leaves the normal range (q < -87.3
  // from |x| ~ 9.3 on; exp without its subnormal range there): exactly +-1
  // up to the largest float.
  for (float x = 4.0f; x < 3e38f; x *= 1.0625f) {
    INFO("x = " << x);
    CHECK(wfgen::rt::math::erf(x) == 1.0f);
    CHECK(wfgen::rt::math::erf(-x) == -1.0f);
  }
  CHECK(wfgen::rt::math::erf(std::numeric_limits<float>::max()) == 1.0f);
}

// scaled_softmax_row (the scaled_softmax kernel's contiguous rows): the
// same bits as its general path (scale, max_row, exp_minus_max, times 1 /
// the sum, zeros after n) for every kept length of rows around the vector
// width and the register path's 64 columns, with -inf, +inf and NaN in
// them; within a few ulp of softmax in double; and in place.
TEST_CASE("math::scaled_softmax_row: the general path's bits, zeros past n, NaN and infinities", "[math][exp]") {
  namespace math = wfgen::rt::math;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const auto general = [](float* dst, const float* src, float scale, std::int64_t n, std::int64_t cols) {
    for (std::int64_t j = 0; j < n; ++j) dst[j] = scale * src[j];
    const float inv = 1.0f / math::exp_minus_max(dst, dst, math::max_row(dst, n), n);
    for (std::int64_t j = 0; j < n; ++j) dst[j] *= inv;
    for (std::int64_t j = n; j < cols; ++j) dst[j] = 0.0f;
  };
  const auto check_row = [&](const std::vector<float>& src, std::int64_t n, float scale) {
    const auto cols = static_cast<std::int64_t>(src.size());
    std::vector<float> want(src.size() + 16, -7.0f), got = want, in_place = src;
    general(want.data(), src.data(), scale, n, cols);
    math::scaled_softmax_row(got.data(), src.data(), scale, n, cols);
    math::scaled_softmax_row(in_place.data(), in_place.data(), scale, n, cols);
    INFO("cols " << cols << " n " << n << " scale " << scale);
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);  // -7 past cols: untouched
    CHECK(std::memcmp(in_place.data(), want.data(), in_place.size() * sizeof(float)) == 0);
  };
  for (const std::int64_t cols : {1, 2, 15, 16, 17, 31, 33, 48, 63, 64, 65, 100}) {
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c) row[static_cast<std::size_t>(c)] = static_cast<float>((c * 37 + cols * 11) % 101) - 50.0f;
    for (std::int64_t n = 0; n <= cols; ++n) {
      check_row(row, n, 0.25f);
      check_row(row, n, 3.0f);  // exps far below the max: 0
      if (n == 0) continue;
      for (const float special : {-inf, inf, nan}) {
        std::vector<float> with = row;
        with[static_cast<std::size_t>((n - 1) / 2)] = special;
        check_row(with, n, 0.25f);
      }
      // Against softmax in double, a row of moderate values.
      std::vector<float> got(row.size());
      math::scaled_softmax_row(got.data(), row.data(), 0.125f, n, cols);
      double max = -HUGE_VAL, sum = 0;
      for (std::int64_t j = 0; j < n; ++j) max = std::max(max, 0.125 * row[static_cast<std::size_t>(j)]);
      for (std::int64_t j = 0; j < n; ++j) sum += std::exp(0.125 * row[static_cast<std::size_t>(j)] - max);
      for (std::int64_t j = 0; j < cols; ++j) {
        const double want = j < n ? std::exp(0.125 * row[static_cast<std::size_t>(j)] - max) / sum : 0.0;
        INFO("cols " << cols << " n " << n << " j " << j);
        CHECK(std::fabs(got[static_cast<std::size_t>(j)] - want) <= 4e-7 * want + 1e-37);
      }
    }
  }
  std::vector<float> all_low(64, -inf), out(64);  // max -inf: every x - max is NaN, as the general path
  math::scaled_softmax_row(out.data(), all_low.data(), 1.0f, 10, 64);
  CHECK(std::isnan(out[0]));
  CHECK(std::isnan(out[9]));
  CHECK(out[10] == 0.0f);
  CHECK(out[63] == 0.0f);
  std::vector<float> with_nan(64, 1.0f);
  with_nan[40] = nan;
  math::scaled_softmax_row(out.data(), with_nan.data(), 1.0f, 64, 64);
  CHECK(std::isnan(out[0]));
  math::scaled_softmax_row(out.data(), with_nan.data(), 1.0f, 40, 64);  // the NaN past the kept columns: no effect
  CHECK(out[0] == 1.0f / 40.0f);
  CHECK(out[40] == 0.0f);
}

// layer_norm's row helpers (their AVX-512 moments of rows of 16, 32, ...
// 128 floats, the loops for every other length): the mean and 1 / sqrt(var
// + eps) of each row against double, rows far from 0 (the two-pass
// variance), and forward_row's output; in place too.
TEST_CASE("layer_norm::row_moments and forward_row against double, short rows in vectors and the rest", "[math]") {
  namespace ln = wfgen::rt::math::layer_norm;
  for (std::int64_t n = 1; n <= 130; ++n) {
    for (const float offset : {0.0f, 1000.0f}) {
      std::vector<float> x(static_cast<std::size_t>(n)), g(x.size()), b(x.size());
      for (std::int64_t c = 0; c < n; ++c) {
        const auto i = static_cast<std::size_t>(c);
        x[i] = offset + static_cast<float>((c * 37 + n * 11) % 101) / 25.0f - 2.0f;
        g[i] = 1.0f + 0.01f * static_cast<float>(c % 7);
        b[i] = 0.1f * static_cast<float>(c % 5) - 0.2f;
      }
      double mean = 0, var = 0;
      for (float v : x) mean += v;
      mean /= static_cast<double>(n);
      for (float v : x) var += (v - mean) * (v - mean);
      const double rstd = 1.0 / std::sqrt(var / static_cast<double>(n) + 1e-5);
      const ln::RowMoments<float> m = ln::row_moments(x.data(), 1, n, 1e-5f);
      INFO("n " << n << " offset " << offset);
      CHECK(std::fabs(m.mean - mean) <= 1e-6 * (1 + std::fabs(mean)));
      // Rows near 1000 keep ~7 bits of their spread after rounding to float;
      // the float sums lose a few more.
      CHECK(std::fabs(m.rstd - rstd) <= (offset == 0 ? 2e-6 : 2e-3) * rstd);
      std::vector<float> out(x.size()), in_place = x;
      ln::forward_row(out.data(), 1, x.data(), 1, g.data(), 1, b.data(), 1, n, 1e-5f);
      ln::forward_row(in_place.data(), 1, in_place.data(), 1, g.data(), 1, b.data(), 1, n, 1e-5f);
      std::int64_t bad = 0;
      for (std::int64_t c = 0; c < n; ++c) {
        const auto i = static_cast<std::size_t>(c);
        const double want = (x[i] - mean) * rstd * g[i] + b[i];
        if (!(std::fabs(out[i] - want) <= (offset == 0 ? 1e-5 : 5e-3) * (1 + std::fabs(want)))) ++bad;
        if (in_place[i] != out[i]) ++bad;
      }
      CHECK(bad == 0);
    }
  }
}

// The bound kernel_math.hpp states for erf against the exact result (in
// double), in units of the float ulp at the exact value: 0.99 with FMA
// contraction, 1.16 without (every 7th float of [-5, 5], measured once);
// here a grid of both ranges, the switch at 0.927734375 and the tail's
// last ulps below 1, asserting 1.2.
TEST_CASE("math::erf is within 1.2 ulp of the exact erf", "[math][erf]") {
  double worst = 0;
  float where = 0;
  auto check = [&](float x) {
    const double want = std::erf(static_cast<double>(x));
    int e = 0;
    std::frexp(std::fabs(want), &e);
    const double err = std::fabs(static_cast<double>(wfgen::rt::math::erf(x)) - want) / std::ldexp(1.0, std::max(e - 24, -149));
    if (err > worst) worst = err, where = x;
  };
  for (float x = 0; x <= 5.0f; x += 0x1p-13f) check(x), check(-x);
  for (float x = 0.90f; x < 0.96f; x = std::nextafter(x, 1.0f)) check(x), check(-x);
  for (float x = 0x1p-126f; x < 1e-3f; x *= 1.37f) check(x), check(-x);
  INFO("worst at x = " << where << ": " << worst << " ulp");
  CHECK(worst <= 1.2);
}

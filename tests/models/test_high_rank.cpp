// The high_rank build of models.yaml: ranks 5 and 6 (and 0), whose stdlib kernels
// are generated only because this build calls them (demand_ranks), against
// naive loops over flat row-major indices written here.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "high_rank.hpp"
#include "wfgen/runtime.hpp"

using wfgen::rt::DType;
using wfgen::rt::Shape;
using wfgen::rt::Tensor;

namespace {

// Distinct, non-symmetric values: a wrong stride or axis shows.
std::vector<double> values(std::int64_t n, double scale) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = scale * std::sin(0.7 * static_cast<double>(i) + 0.3);
  return v;
}

// The row-major offset of `idx` in `shape`, where a dim of size 1 broadcasts.
std::int64_t offset(const std::vector<std::int64_t>& shape, const std::array<std::int64_t, 6>& idx) {
  std::int64_t at = 0;
  for (std::size_t k = 0; k < shape.size(); ++k) at = at * shape[k] + (shape[k] == 1 ? 0 : idx[k]);
  return at;
}

// Calls f(idx) for every index of `shape` (rank 6) in row-major order.
template <class F>
void each(const std::vector<std::int64_t>& shape, F f) {
  std::array<std::int64_t, 6> i{};
  for (i[0] = 0; i[0] < shape[0]; ++i[0])
    for (i[1] = 0; i[1] < shape[1]; ++i[1])
      for (i[2] = 0; i[2] < shape[2]; ++i[2])
        for (i[3] = 0; i[3] < shape[3]; ++i[3])
          for (i[4] = 0; i[4] < shape[4]; ++i[4])
            for (i[5] = 0; i[5] < shape[5]; ++i[5]) f(i);
}

void require_values(const Tensor& got, const Shape& shape, const std::vector<double>& want) {
  REQUIRE(got.dtype() == DType::f64);
  REQUIRE(got.shape() == shape);
  Tensor c = got.contiguous();
  for (std::size_t k = 0; k < want.size(); ++k) {
    INFO("element " << k);
    REQUIRE(c.data<double>()[k] == Approx(want[k]).epsilon(1e-12).margin(1e-12));
  }
}

}  // namespace

TEST_CASE("ranks 5 and 6: a channel shuffle, a broadcast element-wise expression and reductions match naive loops") {
  const std::vector<std::int64_t> ys = {2, 3, 2, 2, 3, 2}, zs = {1, 3, 1, 2, 1, 2};
  const std::int64_t n = 2, c = 6, h = 3, w = 2, groups = 2;
  const std::vector<double> x = values(n * c * h * w, 1.0), y = values(144, 0.5), z = values(12, 2.0);
  wfgen_models::high_rank m;
  const double a = 1.5, b = -0.25;
  auto out = m.forward(Tensor::from_data<double>({n, c, h, w}, x), Tensor::from_data<double>({2, 3, 2, 2, 3, 2}, y),
                       Tensor::from_data<double>({1, 3, 1, 2, 1, 2}, z), Tensor::from_data<double>({}, {a}),
                       Tensor::from_data<double>({}, {b}));
  REQUIRE(out.size() == 5);
  // Rank 0 (ONNX's scalars, e.g. a loss divided by a sum of weights): the
  // element-wise kernels' demand rank 0.
  require_values(out[4], {}, {a / b + a * b});

  // Channel shuffle: output channel j reads input channel (j % groups) * (c / groups) + j / groups.
  std::vector<double> s(x.size());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t j = 0; j < c; ++j)
      for (std::int64_t p = 0; p < h * w; ++p) {
        const std::int64_t from = (j % groups) * (c / groups) + j / groups;
        s[static_cast<std::size_t>((b * c + j) * h * w + p)] = x[static_cast<std::size_t>((b * c + from) * h * w + p)];
      }
  require_values(out[0], {n, c, h, w}, s);

  std::vector<double> e(y.size());
  each(ys, [&](const auto& i) {
    const double yv = y[static_cast<std::size_t>(offset(ys, i))], zv = z[static_cast<std::size_t>(offset(zs, i))];
    e[static_cast<std::size_t>(offset(ys, i))] = std::exp(yv) * zv + yv;
  });
  require_values(out[1], {2, 3, 2, 2, 3, 2}, e);

  // sum over axis 2 and max over axis 3, kept as dims of size 1.
  const std::vector<std::int64_t> rs = {2, 3, 1, 2, 3, 2}, ms = {2, 3, 2, 1, 3, 2};
  std::vector<double> r(72, 0.0), mx(72, -INFINITY);
  each(ys, [&](const auto& i) {
    const std::size_t k = static_cast<std::size_t>(offset(ys, i));
    r[static_cast<std::size_t>(offset(rs, i))] += e[k];
    double& best = mx[static_cast<std::size_t>(offset(ms, i))];
    best = std::max(best, y[k] - z[static_cast<std::size_t>(offset(zs, i))]);
  });
  require_values(out[2], {2, 3, 1, 2, 3, 2}, r);
  require_values(out[3], {2, 3, 2, 1, 3, 2}, mx);
}

// References of the layer normalisation builtins (stdlib/nodes.yaml's
// layer_norm, layer_norm_grad and layer_norm_param_grad), from the
// definitions in double: a row's mean, its biased variance, xhat = (x -
// mean) / sqrt(var + eps), and the gradients written out term by term
// (not the kernels' closed form). Tolerances: the kernel's float sums run
// over a row (n terms) or down the rows, so an element's error is bounded
// by rtol times the number of terms times the size of the terms, with
// `big` = max |xhat| of the row as the scale of xhat's error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "references.hpp"

namespace kt {

struct RowStats {
  double mean = 0, rstd = 0, big = 0;  // big: max |xhat| over the row
};

// The stats of row `row` of X viewed as [rows n].
inline RowStats row_stats(const Dense& X, std::int64_t row, std::int64_t n, double eps) {
  RowStats s;
  const auto x = [&](std::int64_t j) { return X.f[static_cast<std::size_t>(row * n + j)]; };
  for (std::int64_t j = 0; j < n; ++j) s.mean += x(j) / static_cast<double>(n);
  double var = 0;
  for (std::int64_t j = 0; j < n; ++j) var += (x(j) - s.mean) * (x(j) - s.mean) / static_cast<double>(n);
  s.rstd = 1.0 / std::sqrt(var + eps);
  for (std::int64_t j = 0; j < n; ++j) s.big = std::max(s.big, std::fabs(x(j)) * s.rstd);
  return s;
}

// OUT[.. j] = xhat_j * G[j] + B[j].
inline Expected ref_layer_norm(const Dense& X, const Dense& G, const Dense& B, double eps, DType t) {
  Expected e{Dense::make(X.shape, false), {}};
  const std::int64_t n = X.shape.back();
  const Tol tol = tol_for(t);
  e.tol.assign(static_cast<std::size_t>(X.numel()), 0.0);
  for (std::int64_t row = 0; n > 0 && row < X.numel() / n; ++row) {
    const RowStats s = row_stats(X, row, n, eps);
    for (std::int64_t j = 0; j < n; ++j) {
      const auto o = static_cast<std::size_t>(row * n + j);
      const double g = G.f[static_cast<std::size_t>(j)], b = B.f[static_cast<std::size_t>(j)];
      e.val.f[o] = (X.f[o] - s.mean) * s.rstd * g + b;
      e.tol[o] = tol.rtol * (static_cast<double>(n) + 8.0) * (1.0 + s.big) * std::fabs(g) + tol.rtol * 4.0 * std::fabs(b) + tol.atol;
    }
  }
  return e;
}

// OUT = d/dX of sum(DOUT * layer_norm(X)), through xhat's three paths: x_j
// itself, the mean, and the variance:
// dx_j = rstd (gd_j - mean_k gd_k) - (x_j - mean) rstd^3 mean_k(gd_k (x_k - mean)), gd = G * DOUT.
inline Expected ref_layer_norm_grad(const Dense& DOUT, const Dense& X, const Dense& G, double eps, DType t) {
  Expected e{Dense::make(X.shape, false), {}};
  const std::int64_t n = X.shape.back();
  const Tol tol = tol_for(t);
  e.tol.assign(static_cast<std::size_t>(X.numel()), 0.0);
  for (std::int64_t row = 0; n > 0 && row < X.numel() / n; ++row) {
    const RowStats s = row_stats(X, row, n, eps);
    const auto at = [&](const Dense& d, std::int64_t j) { return d.f[static_cast<std::size_t>(row * n + j)]; };
    double mean_gd = 0, mean_gdc = 0, big_gd = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const double gd = G.f[static_cast<std::size_t>(j)] * at(DOUT, j);
      mean_gd += gd / static_cast<double>(n);
      mean_gdc += gd * (at(X, j) - s.mean) / static_cast<double>(n);
      big_gd = std::max(big_gd, std::fabs(gd));
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const auto o = static_cast<std::size_t>(row * n + j);
      const double gd = G.f[static_cast<std::size_t>(j)] * at(DOUT, j);
      e.val.f[o] = s.rstd * (gd - mean_gd) - (at(X, j) - s.mean) * s.rstd * s.rstd * s.rstd * mean_gdc;
      e.tol[o] = tol.rtol * (static_cast<double>(n) + 8.0) * s.rstd * big_gd * (2.0 + s.big) * (1.0 + s.big) + tol.atol;
    }
  }
  return e;
}

// OUT[c] = sum_r DOUT[r c] * xhat[r c] (G's gradient), or sum_r DOUT[r c] (beta: B's).
inline Expected ref_layer_norm_param_grad(const Dense& DOUT, const Dense& X, double eps, bool beta, DType t) {
  const std::int64_t rows = X.shape[0], n = X.shape[1];
  Expected e{Dense::make({n}, false), {}};
  const Tol tol = tol_for(t);
  e.tol.assign(static_cast<std::size_t>(n), tol.atol);
  for (std::int64_t r = 0; r < rows; ++r) {
    const RowStats s = row_stats(X, r, n, eps);
    for (std::int64_t c = 0; c < n; ++c) {
      const auto k = static_cast<std::size_t>(r * n + c);
      const double xhat = (X.f[k] - s.mean) * s.rstd, d = DOUT.f[k];
      e.val.f[static_cast<std::size_t>(c)] += beta ? d : d * xhat;
      e.tol[static_cast<std::size_t>(c)] +=
          tol.rtol * static_cast<double>(rows + n + 16) * std::fabs(d) * (beta ? 1.0 : 1.0 + s.big);
    }
  }
  return e;
}

}  // namespace kt

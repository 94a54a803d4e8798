// The depthwise convolution of the stdlib node depthwise_conv2d (a grouped
// convolution with one input channel per group, as in MobileNet): each
// (n, c) plane of the output is the correlation of X's plane with C's own
// k_h x k_w filter. Part of the kernel layer, included by kernel_support.hpp;
// the generated kernel splits the planes across the threads and calls
// DepthwiseConv::plane on each.
//
// Why not im2col + a batched GEMM: a depthwise product is a 1 x (kh kw) by
// (kh kw) x pixels GEMM per channel, all memory traffic (im2col writes 9
// copies of the image, the GEMM reads them back) and per-call overhead.
// Here every output element is its 9 (or 25) taps summed in registers, the
// output row written once.
#pragma once

#include <algorithm>
#include <cstdint>

namespace wfgen::rt {

// The geometry of a depthwise convolution, as the node's arguments and the
// tensors' shapes and strides (elements) give it.
struct DepthwiseGeometry {
  std::int64_t h, w, ho, wo;          // the input plane and the output plane
  std::int64_t kh, kw;                // the filter
  std::int64_t sh, sw, ph, pw, dh, dw;  // stride, padding (before), dilation
  std::int64_t xs_row, xs_col;        // X's strides along H and W
  std::int64_t ws_row, ws_col;        // W's strides along k_h and k_w
  std::int64_t os_row, os_col;        // OUT's strides along h_out and w_out
};

template <class T>
class DepthwiseConv {
 public:
  explicit DepthwiseConv(const DepthwiseGeometry& g) noexcept : g_(g) {
    // The output columns whose every tap reads inside the row: x*sw - pw >= 0
    // and x*sw - pw + (kw - 1)*dw <= w - 1. Rows the same way.
    auto inside = [](std::int64_t n, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d,
                     std::int64_t& lo, std::int64_t& hi) {
      lo = std::min<std::int64_t>((p + s - 1) / s, out);
      const std::int64_t last = n - 1 - (k - 1) * d + p;  // x*s <= last
      hi = last < 0 ? 0 : std::min<std::int64_t>(last / s + 1, out);
      hi = std::max(hi, lo);
    };
    inside(g.h, g.ho, g.kh, g.sh, g.ph, g.dh, y_lo_, y_hi_);
    inside(g.w, g.wo, g.kw, g.sw, g.pw, g.dw, x_lo_, x_hi_);
  }

  // OUT's plane `out` from X's plane `x` and C's filter `f`.
  void plane(const T* x, const T* f, T* out) const noexcept {
    const DepthwiseGeometry& g = g_;
    const bool unit = g.xs_col == 1 && g.os_col == 1 && g.dw == 1;
    for (std::int64_t y = 0; y < g.ho; ++y) {
      T* o = out + y * g.os_row;
      if (!unit || y < y_lo_ || y >= y_hi_ || !interior(x, f, o, y)) {
        border(x, f, o, y, 0, g.wo);
        continue;
      }
      border(x, f, o, y, 0, x_lo_);
      border(x, f, o, y, x_hi_, g.wo);
    }
  }

 private:
  // Columns [x0, x1) of output row y, every tap checked against the image:
  // the padding, and any shape or stride.
  void border(const T* x, const T* f, T* o, std::int64_t y, std::int64_t x0, std::int64_t x1) const noexcept {
    const DepthwiseGeometry& g = g_;
    for (std::int64_t ox = x0; ox < x1; ++ox) {
      T s = T(0);
      for (std::int64_t i = 0; i < g.kh; ++i) {
        const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
        if (iy < 0 || iy >= g.h) continue;
        for (std::int64_t j = 0; j < g.kw; ++j) {
          const std::int64_t ix = ox * g.sw - g.pw + j * g.dw;
          if (ix >= 0 && ix < g.w) s += f[i * g.ws_row + j * g.ws_col] * x[iy * g.xs_row + ix * g.xs_col];
        }
      }
      o[ox * g.os_col] = s;
    }
  }

  // Columns [x_lo_, x_hi_) of a row whose taps are all inside the image,
  // for the filters and strides of MobileNet-like networks (3 x 3 and 5 x 5,
  // stride 1 or 2, contiguous rows): false for any other, which border() does.
  bool interior(const T* x, const T* f, T* o, std::int64_t y) const noexcept {
    const DepthwiseGeometry& g = g_;
    if (g.kh == 3 && g.kw == 3 && g.sw == 1) return taps<3, 1>(x, f, o, y), true;
    if (g.kh == 3 && g.kw == 3 && g.sw == 2) return taps<3, 2>(x, f, o, y), true;
    if (g.kh == 5 && g.kw == 5 && g.sw == 1) return taps<5, 1>(x, f, o, y), true;
    if (g.kh == 5 && g.kw == 5 && g.sw == 2) return taps<5, 2>(x, f, o, y), true;
    return false;
  }

  // The K x K taps of each column summed in registers, in the order border()
  // sums them (row i, then column j), the column loop vectorised: constant
  // K and stride make the loads fixed offsets (stride 2: an interleaved load).
  template <int K, int S>
  void taps(const T* x, const T* f, T* __restrict o, std::int64_t y) const noexcept {
    const DepthwiseGeometry& g = g_;
    T wk[K][K];
    const T* rows[K];
    for (int i = 0; i < K; ++i) {
      for (int j = 0; j < K; ++j) wk[i][j] = f[i * g.ws_row + j * g.ws_col];
      rows[i] = x + (y * g.sh - g.ph + i * g.dh) * g.xs_row;
    }
    const std::int64_t pw = g.pw;
    for (std::int64_t ox = x_lo_; ox < x_hi_; ++ox) {
      T s = T(0);
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < K; ++j) s += wk[i][j] * rows[i][ox * S - pw + j];
      o[ox] = s;
    }
  }

  DepthwiseGeometry g_;
  std::int64_t y_lo_ = 0, y_hi_ = 0, x_lo_ = 0, x_hi_ = 0;
};

}  // namespace wfgen::rt

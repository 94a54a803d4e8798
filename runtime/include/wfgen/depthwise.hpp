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
#include <type_traits>

#include "wfgen/gemm.hpp"  // detail::GemmBuffer, the padded copy's per-thread buffer

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

// The epilogue of a convolution that has none: each sum is stored as it is.
struct StoreSum {
  template <class T>
  T operator()(T sum) const noexcept {
    return sum;
  }
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
    // The plane with its padding, as far as the taps reach: rows and columns
    // 0 .. (out - 1) s + (k - 1) d of the padded image.
    hp_ = g.ho > 0 ? (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1 : 0;
    wp_ = g.wo > 0 ? (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1 : 0;
    padded_ = g.dw == 1 && g.os_col == 1 && hp_ * wp_ <= kPadded && g.ho * g.wo > 0 && has_taps(g.kh, g.kw, g.sw);
  }

  // OUT's plane `out` from X's plane `x` and C's filter `f`. Each element
  // ends as epilogue(its sum): a bias and an activation that fusion gave
  // the kernel (fuse.cpp's epilogues), applied while the plane (a small
  // one, padded) or the row (a large one) just written is in L1, rather
  // than in a second pass over the whole output once it has left the
  // caches. A loop of its own (finish()), not inside the taps' loop:
  // there, its compare and blend made the vectorised stride-2 taps up to
  // 40 % slower; and over a whole contiguous plane, not row by row, for
  // short rows (7 or 14 elements: mostly the loop's scalar tail).
  template <class Epilogue = StoreSum>
  void plane(const T* x, const T* f, T* out, Epilogue epilogue = {}) const noexcept {
    const DepthwiseGeometry& g = g_;
    if (padded_) {
      // The copy and the stride-1 run, 2 x kPadded elements (32 KiB of f32,
      // 64 KiB of f64): a buffer per thread, allocated on its first padded
      // plane and kept, not the stack (Emscripten's default stack is 64 KiB
      // for the whole wasm program).
      thread_local detail::GemmBuffer<T> buf;
      thread_local PadLayout zeros;  // the layout whose zeros buf's copy half holds
      T* const pad = buf.get(static_cast<std::size_t>(2 * kPadded));
      const PadLayout layout{pad, hp_, wp_, g.ph, g.pw, g.h, g.w};
      padded(x, f, out, pad, zeros == layout);
      zeros = layout;
      finish(out, epilogue);
      return;
    }
    const bool unit = g.xs_col == 1 && g.os_col == 1 && g.dw == 1;
    for (std::int64_t y = 0; y < g.ho; ++y) {
      T* o = out + y * g.os_row;
      if (!unit || y < y_lo_ || y >= y_hi_ || !interior(x, f, o, y)) {
        border(x, f, o, y, 0, g.wo);
      } else {
        border(x, f, o, y, 0, x_lo_);
        border(x, f, o, y, x_hi_, g.wo);
      }
    }
    finish(out, epilogue);
  }

 private:
  // The planes whose padded copy fits kPadded elements (up to
  // 64 x 64 floats: MobileNet's 28 x 28, 14 x 14 and 7 x 7 planes, where
  // the border rows and columns are 14 to 49 % of the outputs) are copied
  // into it with zeros around, and every output row is then an interior row:
  // one vectorised loop over all its columns, no checked scalar border.
  // Larger planes keep the split (their border is a few percent).
  static constexpr std::int64_t kPadded = 4096;

  // Where a padded copy has its zeros: the buffer and the geometry that
  // places them. Only the image's part of the copy changes from plane to
  // plane, so the zeros written for the first plane of a layout stay for
  // the next ones, which copy X's rows alone: the row-by-row fills (two
  // short calls a row) took a fifth of MobileNetV2's 14 x 14 and 7 x 7
  // planes (960 x 7 x 7 at stride 1: 81 -> 63 us at one thread).
  struct PadLayout {
    const T* buffer = nullptr;
    std::int64_t hp = 0, wp = 0, ph = 0, pw = 0, h = 0, w = 0;
    bool operator==(const PadLayout& o) const noexcept {
      return buffer == o.buffer && hp == o.hp && wp == o.wp && ph == o.ph && pw == o.pw && h == o.h && w == o.w;
    }
  };

  // The epilogue over the output plane `out`, just written: one loop over
  // a contiguous plane, else row by row.
  template <class Epilogue>
  void finish(T* out, const Epilogue& epilogue) const noexcept {
    if constexpr (!std::is_same_v<Epilogue, StoreSum>) {
      const DepthwiseGeometry& g = g_;
      if (g.os_col == 1 && g.os_row == g.wo) {
        for (std::int64_t i = 0; i < g.ho * g.wo; ++i) out[i] = epilogue(out[i]);
        return;
      }
      for (std::int64_t y = 0; y < g.ho; ++y)
        for (std::int64_t i = 0; i < g.wo; ++i) out[y * g.os_row + i * g.os_col] = epilogue(out[y * g.os_row + i * g.os_col]);
    }
  }

  static bool has_taps(std::int64_t kh, std::int64_t kw, std::int64_t sw) noexcept {
    return kh == kw && (kh == 3 || kh == 5) && (sw == 1 || sw == 2);
  }

  // X's plane copied into `pad` (hp_ x wp_, zeros where the taps read the
  // padding; `zeroed`: they are there already, from the last plane of the
  // same layout), then every output row from it; `pad` holds 2 x kPadded
  // elements, the second half for the stride-1 run.
  void padded(const T* x, const T* f, T* out, T* pad, bool zeroed) const noexcept {
    const DepthwiseGeometry& g = g_;
    const std::int64_t c0 = std::min(g.pw, wp_), c1 = std::min(g.pw + g.w, wp_);  // X's columns in the copy
    for (std::int64_t r = 0; r < hp_; ++r) {
      T* row = pad + r * wp_;
      const std::int64_t iy = r - g.ph;
      if (iy < 0 || iy >= g.h || c1 <= c0) {
        if (!zeroed) std::fill(row, row + wp_, T(0));
        continue;
      }
      if (!zeroed) std::fill(row, row + c0, T(0));
      const T* src = x + iy * g.xs_row;
      if (g.xs_col == 1) std::copy(src, src + (c1 - c0), row + c0);
      else
        for (std::int64_t c = c0; c < c1; ++c) row[c] = src[(c - g.pw) * g.xs_col];
      if (!zeroed) std::fill(row + c1, row + wp_, T(0));
    }
    if (g.sh == 1 && g.sw == 1 && g.wo < 32) {
      // Short rows at stride 1: the whole plane as one run over the copy's
      // width (column q of the run reads pad[q + i dh wp + j], as an output
      // column does), the columns past wo of each row computed and dropped.
      T* run = pad + kPadded;
      const std::int64_t n = (g.ho - 1) * wp_ + g.wo;
      const T* rows[5];
      for (std::int64_t i = 0; i < g.kh; ++i) rows[i] = pad + i * g.dh * wp_;
      if (g.kh == 3) taps<3, 1>(rows, f, run, 0, 0, n);
      else taps<5, 1>(rows, f, run, 0, 0, n);
      for (std::int64_t y = 0; y < g.ho; ++y) std::copy(run + y * wp_, run + y * wp_ + g.wo, out + y * g.os_row);
      return;
    }
    const T* rows[5];
    for (std::int64_t y = 0; y < g.ho; ++y) {
      for (std::int64_t i = 0; i < g.kh; ++i) rows[i] = pad + (y * g.sh + i * g.dh) * wp_;
      T* o = out + y * g.os_row;
      if (g.kh == 3 && g.sw == 1) taps<3, 1>(rows, f, o, 0, 0, g.wo);
      else if (g.kh == 3) taps<3, 2>(rows, f, o, 0, 0, g.wo);
      else if (g.sw == 1) taps<5, 1>(rows, f, o, 0, 0, g.wo);
      else taps<5, 2>(rows, f, o, 0, 0, g.wo);
    }
  }

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
    if (!has_taps(g.kh, g.kw, g.sw)) return false;
    const T* rows[5];
    for (std::int64_t i = 0; i < g.kh; ++i) rows[i] = x + (y * g.sh - g.ph + i * g.dh) * g.xs_row;
    if (g.kh == 3 && g.sw == 1) taps<3, 1>(rows, f, o, g.pw, x_lo_, x_hi_);
    else if (g.kh == 3) taps<3, 2>(rows, f, o, g.pw, x_lo_, x_hi_);
    else if (g.sw == 1) taps<5, 1>(rows, f, o, g.pw, x_lo_, x_hi_);
    else taps<5, 2>(rows, f, o, g.pw, x_lo_, x_hi_);
    return true;
  }

  // Columns [x0, x1) of an output row from the K input rows its taps read
  // (column ox reads rows[i][ox*S - shift + j]), each column's K x K taps
  // summed in registers in the order border() sums them (row i, then column
  // j), the column loop vectorised: constant K and stride make the loads
  // fixed offsets (stride 2: an interleaved load).
  template <int K, int S>
  void taps(const T* const* rows, const T* f, T* __restrict o, std::int64_t shift, std::int64_t x0,
            std::int64_t x1) const noexcept {
    const DepthwiseGeometry& g = g_;
    T wk[K][K];
    const T* r[K];
    for (int i = 0; i < K; ++i) {
      for (int j = 0; j < K; ++j) wk[i][j] = f[i * g.ws_row + j * g.ws_col];
      r[i] = rows[i];
    }
    for (std::int64_t ox = x0; ox < x1; ++ox) {
      T s = T(0);
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < K; ++j) s += wk[i][j] * r[i][ox * S - shift + j];
      o[ox] = s;
    }
  }

  DepthwiseGeometry g_;
  std::int64_t y_lo_ = 0, y_hi_ = 0, x_lo_ = 0, x_hi_ = 0;
  std::int64_t hp_ = 0, wp_ = 0;  // the padded copy's rows and columns
  bool padded_ = false;
};

}  // namespace wfgen::rt

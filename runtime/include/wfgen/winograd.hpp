// The 3 x 3, stride-1 convolution of the stdlib node winograd_conv2d by
// Winograd's minimal filtering F(m x m, 3 x 3) (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2015). Part of the kernel
// layer, included by kernel_support.hpp; the generated kernel builds a
// WinogradConv and calls run() with its device's GEMM.
//
// Why: im2col + GEMM spends 9 multiply-adds per output, input channel and
// output channel, and the GEMMs of ResNet's 3 x 3 convolutions already run
// near the core's peak, so only fewer multiply-adds make them faster. The
// output is cut into m x m tiles; each tile's (m + 2) x (m + 2) input patch
// d and each filter g are transformed (V = B^T d B, U = G g G^T), the
// convolution becomes alpha^2 = (m + 2)^2 independent products over the
// channels, M_k = U_k V_k (a GEMM each: output channels x input channels by
// input channels x tiles), and each output tile is A^T M A. Per output,
// input and output channel: alpha^2 / m^2 multiply-adds, 16/4 (2.25x fewer)
// for F(2 x 2, 3 x 3), 36/16 (4x fewer) for F(4 x 4, 3 x 3), at the cost of
// the transforms (linear in the tensors' sizes) and of rounding: the
// transforms' sums of up to 5 terms with coefficients up to 8 (F(4 x 4))
// add a few ulps of the largest term, about 1e-6 of the terms' magnitude
// in fp32 where a direct sum is nearer 1e-7: inside a tolerance relative to
// the output's scale (the bench's), not always inside 1e-3 of an output
// that cancels to near zero (ONNX's per-element check; `wfgen import
// --no-winograd` keeps every Conv on im2col + matmul).
//
// Threads: the filter transform is split over the output channels, the
// input transform over the (n, c) planes, the alpha^2 products over the
// pool (each on one thread, the GEMM then not splitting itself), the output
// transform over the (n, m) planes: every sum in a fixed order, the same
// bits at any thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "wfgen/gemm.hpp"  // detail::GemmBuffer
#include "wfgen/parallel.hpp"

namespace wfgen::rt {

// The geometry of a 3 x 3 stride-1 convolution, as the node's arguments
// and the tensors' shapes and strides (elements) give it: X[n c h w],
// W[m c 3 3], OUT[n m ho wo], ho = h + 2 ph - 2, wo = w + 2 pw - 2.
struct WinogradGeometry {
  std::int64_t n, c, h, w;  // X
  std::int64_t m, ho, wo;   // OUT's channels and plane
  std::int64_t ph, pw;      // the padding before the first row and column
  std::array<std::int64_t, 4> xs, ws, os;  // the strides of X, W and OUT
};

// The epilogue of a Winograd convolution without one: each sum stored as it is.
struct WinogradStore {
  template <class T>
  T operator()(T sum, std::int64_t, std::int64_t, std::int64_t, std::int64_t) const noexcept {
    return sum;
  }
};

namespace detail {

// The 1-D transforms of F(m, 3), applied along the columns of a tile and
// then along its rows (the 2-D transforms are separable). Each reads its
// terms at d[0], d[s], d[2 s]... and writes out[0], out[t], ...; L values
// side by side at each (the tiles of a block), so the arithmetic runs over
// vectors of tiles.
template <int Mt>
struct WinogradF;

// F(2, 3): B^T, G, A^T of Lavin & Gray with alpha = 4.
template <>
struct WinogradF<2> {
  static constexpr int alpha = 4;
  template <class T, int L>
  static void input(const T* d, int s, T* out, int t) noexcept {
    for (int l = 0; l < L; ++l) {
      const T d0 = d[l], d1 = d[s + l], d2 = d[2 * s + l], d3 = d[3 * s + l];
      out[l] = d0 - d2;
      out[t + l] = d1 + d2;
      out[2 * t + l] = d2 - d1;
      out[3 * t + l] = d1 - d3;
    }
  }
  template <class T, int L>
  static void filter(const T* g, int s, T* out, int t) noexcept {
    for (int l = 0; l < L; ++l) {
      const T g0 = g[l], g1 = g[s + l], g2 = g[2 * s + l];
      out[l] = g0;
      out[t + l] = (g0 + g1 + g2) * T(0.5);
      out[2 * t + l] = (g0 - g1 + g2) * T(0.5);
      out[3 * t + l] = g2;
    }
  }
  template <class T, int L>
  static void output(const T* p, int s, T* out, int t) noexcept {
    for (int l = 0; l < L; ++l) {
      const T p0 = p[l], p1 = p[s + l], p2 = p[2 * s + l], p3 = p[3 * s + l];
      out[l] = p0 + p1 + p2;
      out[t + l] = p1 - p2 - p3;
    }
  }
};

// F(4, 3): alpha = 6, the points 0, +-1, +-2 and infinity.
template <>
struct WinogradF<4> {
  static constexpr int alpha = 6;
  template <class T, int L>
  static void input(const T* d, int s, T* out, int t) noexcept {
    for (int l = 0; l < L; ++l) {
      const T d0 = d[l], d1 = d[s + l], d2 = d[2 * s + l], d3 = d[3 * s + l], d4 = d[4 * s + l], d5 = d[5 * s + l];
      out[l] = T(4) * d0 - T(5) * d2 + d4;
      out[t + l] = d3 + d4 - T(4) * (d1 + d2);
      out[2 * t + l] = d4 - d3 + T(4) * (d1 - d2);
      out[3 * t + l] = d4 - d2 + T(2) * (d3 - d1);
      out[4 * t + l] = d4 - d2 - T(2) * (d3 - d1);
      out[5 * t + l] = T(4) * d1 - T(5) * d3 + d5;
    }
  }
  template <class T, int L>
  static void filter(const T* g, int s, T* out, int t) noexcept {
    for (int l = 0; l < L; ++l) {
      const T g0 = g[l], g1 = g[s + l], g2 = g[2 * s + l];
      out[l] = g0 / T(4);
      out[t + l] = -(g0 + g1 + g2) / T(6);
      out[2 * t + l] = -(g0 - g1 + g2) / T(6);
      out[3 * t + l] = g0 / T(24) + g1 / T(12) + g2 / T(6);
      out[4 * t + l] = g0 / T(24) - g1 / T(12) + g2 / T(6);
      out[5 * t + l] = g2;
    }
  }
  template <class T, int L>
  static void output(const T* p, int s, T* out, int t) noexcept {
    for (int l = 0; l < L; ++l) {
      const T p0 = p[l], p1 = p[s + l], p2 = p[2 * s + l], p3 = p[3 * s + l], p4 = p[4 * s + l], p5 = p[5 * s + l];
      const T a = p1 + p2, b = p1 - p2, c = p3 + p4, e = p3 - p4;
      out[l] = p0 + a + c;
      out[t + l] = b + T(2) * e;
      out[2 * t + l] = a + T(4) * c;
      out[3 * t + l] = b + T(8) * e + p5;
    }
  }
};

}  // namespace detail

// The output tile of F(m x m, 3 x 3) for a shape: 4 (4x fewer
// multiply-adds than the direct sum) where the plane has room for its
// 4 x 4 tiles, else 2 (a partial tile at the edge computes outputs nobody
// reads: F(4) pays for 16 per tile where 7 x 7 has 1 to 3 in the last
// row and column).
inline int winograd_tile(const WinogradGeometry& g) noexcept { return g.ho >= 8 && g.wo >= 8 ? 4 : 2; }

template <class T>
class WinogradConv {
 public:
  // `tile`: m, 2 or 4; 0 chooses by the shape (winograd_tile).
  explicit WinogradConv(const WinogradGeometry& g, int tile = 0) noexcept : g_(g), tile_(tile == 0 ? winograd_tile(g) : tile) {}

  int tile() const noexcept { return tile_; }

  // OUT = the convolution of X with W, each element epilogue(sum, n, m, y,
  // x) as it is stored (a bias, a residual, an activation: fusion's), with
  // `gemm` rt::gemm's signature (rt::gemm, or the blas device's blas_gemm).
  template <class Gemm, class Epilogue = WinogradStore>
  void run(const T* x, const T* w, T* out, Gemm&& gemm, Epilogue epilogue = {}) const {
    if (g_.n <= 0 || g_.m <= 0 || g_.ho <= 0 || g_.wo <= 0) return;
    if (tile_ == 4) run_tiled<4>(x, w, out, gemm, epilogue);
    else run_tiled<2>(x, w, out, gemm, epilogue);
  }

 private:
  // Tiles (filters) transformed together, side by side (the vectors of the 1-D transforms).
  static constexpr int kBlock = 16;

  // The distances (elements) between the alpha^2 matrices U_k, V_k, P_k.
  struct Strides {
    std::int64_t u, v, p;
  };
  // A matrix of n elements, then a cache line (of f32; two of f64) more:
  // the transforms read or write the alpha^2 matrices side by side, and
  // sizes that are multiples of 4 KiB (U of 256 x 256 channels, V of 256
  // channels by 16 tiles) would put all 16 or 36 streams in one set of the
  // caches. Measured: ResNet-18's 256-channel 14 x 14 convolution's filter
  // transform took 23 ms instead of 0.x ms.
  static std::int64_t apart(std::int64_t n) noexcept { return n + 16; }

  template <int Mt, class Gemm, class Epilogue>
  void run_tiled(const T* x, const T* w, T* out, Gemm& gemm, const Epilogue& epilogue) const {
    constexpr int A = detail::WinogradF<Mt>::alpha;
    const WinogradGeometry& g = g_;
    const std::int64_t th = (g.ho + Mt - 1) / Mt, tw = (g.wo + Mt - 1) / Mt, tiles = g.n * th * tw;
    // U[k][m][c], V[k][c][tile], P[k][m][tile], k the point (i, j) of the
    // alpha x alpha tile: the products P_k = U_k V_k are row-major GEMMs.
    // Buffers of the calling thread, kept from call to call.
    thread_local detail::GemmBuffer<T> u_buf, v_buf, p_buf;
    const Strides s{apart(g.m * g.c), apart(g.c * tiles), apart(g.m * tiles)};
    T* const u = u_buf.get(static_cast<std::size_t>(A * A * s.u));
    T* const v = v_buf.get(static_cast<std::size_t>(A * A * s.v));
    T* const p = p_buf.get(static_cast<std::size_t>(A * A * s.p));
    filters<Mt>(w, u, s.u);
    inputs<Mt>(x, v, s.v, th, tw);
    const std::int64_t work = g.m * g.c * tiles;  // multiply-adds of one product
    parallel_for(0, A * A, work >= (std::int64_t{1} << 16) ? 1 : A * A, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t k = lo; k < hi; ++k)
        gemm(g.m, tiles, g.c, u + k * s.u, g.c, std::int64_t{1}, v + k * s.v, tiles, std::int64_t{1}, p + k * s.p, tiles,
             std::int64_t{1}, false, GemmEpilogue<T>{});
    });
    outputs<Mt>(p, out, s.p, th, tw, epilogue);
  }

  // U[k][m][c] = (G W[m c] G^T)[k] (U_k `stride` elements apart), split
  // over the output channels, kBlock input channels side by side.
  template <int Mt>
  void filters(const T* w, T* u, std::int64_t stride) const {
    constexpr int A = detail::WinogradF<Mt>::alpha, L = kBlock;
    const WinogradGeometry& g = g_;
    parallel_for(0, g.m, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(1, g.c)), [&](std::int64_t lo, std::int64_t hi) {
      T f[3][3][L], gf[A][3][L], uf[A][A][L];
      for (std::int64_t m = lo; m < hi; ++m) {
        for (std::int64_t c0 = 0; c0 < g.c; c0 += L) {
          const std::int64_t count = std::min<std::int64_t>(L, g.c - c0);
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j)
              for (int l = 0; l < L; ++l)
                f[i][j][l] = l < count ? w[m * g.ws[0] + (c0 + l) * g.ws[1] + i * g.ws[2] + j * g.ws[3]] : T(0);
          for (int j = 0; j < 3; ++j) detail::WinogradF<Mt>::template filter<T, L>(&f[0][j][0], 3 * L, &gf[0][j][0], 3 * L);  // G f
          for (int i = 0; i < A; ++i) detail::WinogradF<Mt>::template filter<T, L>(&gf[i][0][0], L, &uf[i][0][0], L);  // (G f) G^T
          T* dst = u + m * g.c + c0;
          for (int i = 0; i < A; ++i)
            for (int j = 0; j < A; ++j) std::memcpy(dst + (i * A + j) * stride, &uf[i][j][0], static_cast<std::size_t>(count) * sizeof(T));
        }
      }
    });
  }

  // V[k][c][tile] = (B^T d B)[k] for each tile's input patch d, split over
  // the (n, c) planes. Each plane is first copied with zeros around it into
  // a buffer of the thread (th m + 2 rows of tw m + 2), so that every tile,
  // those at the edges too, reads its patch without a check.
  template <int Mt>
  void inputs(const T* x, T* v, std::int64_t stride, std::int64_t th, std::int64_t tw) const {
    const WinogradGeometry& g = g_;
    const std::int64_t hp = th * Mt + 2, wp = tw * Mt + 2;
    parallel_for(0, g.n * g.c, std::max<std::int64_t>(1, 16384 / (hp * wp)), [&](std::int64_t lo, std::int64_t hi) {
      thread_local detail::GemmBuffer<T> pad_buf;
      T* const pad = pad_buf.get(static_cast<std::size_t>(hp * wp));
      for (std::int64_t nc = lo; nc < hi; ++nc) {
        const std::int64_t n = nc / g.c, c = nc % g.c;
        copy_padded(x + n * g.xs[0] + c * g.xs[1], pad, hp, wp);
        T* dst = v + c * g.n * th * tw + n * th * tw;
        for (std::int64_t ty = 0; ty < th; ++ty)
          for (std::int64_t tx = 0; tx < tw; tx += kBlock)
            input_block<Mt>(pad + ty * Mt * wp + tx * Mt, wp, dst + ty * tw + tx, stride, std::min<std::int64_t>(kBlock, tw - tx));
      }
    });
  }

  // X's plane into `pad` (hp x wp), row ph and column pw holding its first
  // element, zeros elsewhere.
  void copy_padded(const T* x, T* pad, std::int64_t hp, std::int64_t wp) const noexcept {
    const WinogradGeometry& g = g_;
    std::fill(pad, pad + hp * wp, T(0));
    const std::int64_t rows = std::min(g.h, hp - g.ph), cols = std::min(g.w, wp - g.pw);
    for (std::int64_t y = 0; y < rows; ++y) {
      const T* src = x + y * g.xs[2];
      T* row = pad + (y + g.ph) * wp + g.pw;
      if (g.xs[3] == 1) std::memcpy(row, src, static_cast<std::size_t>(cols) * sizeof(T));
      else
        for (std::int64_t i = 0; i < cols; ++i) row[i] = src[i * g.xs[3]];
    }
  }

  // `count` tiles side by side (count <= kBlock), the first one's patch at
  // `pad` (rows wp apart, the next tile's Mt columns on): their V, point k
  // at dst[k * kstride + tile].
  template <int Mt>
  static void input_block(const T* pad, std::int64_t wp, T* dst, std::int64_t kstride, std::int64_t count) noexcept {
    constexpr int A = detail::WinogradF<Mt>::alpha, L = kBlock;
    T d[A][A][L], t[A][A][L], r[A][A][L];
    for (int i = 0; i < A; ++i)
      for (int j = 0; j < A; ++j)
        for (int l = 0; l < L; ++l) d[i][j][l] = l < count ? pad[i * wp + l * Mt + j] : T(0);
    for (int j = 0; j < A; ++j) detail::WinogradF<Mt>::template input<T, L>(&d[0][j][0], A * L, &t[0][j][0], A * L);  // B^T d
    for (int i = 0; i < A; ++i) detail::WinogradF<Mt>::template input<T, L>(&t[i][0][0], L, &r[i][0][0], L);  // (B^T d) B
    for (int i = 0; i < A; ++i)
      for (int j = 0; j < A; ++j) std::memcpy(dst + (i * A + j) * kstride, &r[i][j][0], static_cast<std::size_t>(count) * sizeof(T));
  }

  // OUT[n m] = A^T P A per tile, then the epilogue, split over the (n, m)
  // planes; each plane's tiles go through a buffer of the thread (th Mt
  // rows of tw Mt), from which the outputs inside OUT are stored.
  template <int Mt, class Epilogue>
  void outputs(const T* p, T* out, std::int64_t stride, std::int64_t th, std::int64_t tw, const Epilogue& epilogue) const {
    const WinogradGeometry& g = g_;
    const std::int64_t tiles = g.n * th * tw, hq = th * Mt, wq = tw * Mt;
    parallel_for(0, g.n * g.m, std::max<std::int64_t>(1, 16384 / (hq * wq)), [&](std::int64_t lo, std::int64_t hi) {
      thread_local detail::GemmBuffer<T> plane_buf;
      T* const plane = plane_buf.get(static_cast<std::size_t>(hq * wq));
      for (std::int64_t nm = lo; nm < hi; ++nm) {
        const std::int64_t n = nm / g.m, m = nm % g.m;
        const T* src = p + m * tiles + n * th * tw;
        for (std::int64_t ty = 0; ty < th; ++ty)
          for (std::int64_t tx = 0; tx < tw; tx += kBlock)
            output_block<Mt>(src + ty * tw + tx, stride, plane + ty * Mt * wq + tx * Mt, wq, std::min<std::int64_t>(kBlock, tw - tx));
        T* o = out + n * g.os[0] + m * g.os[1];
        for (std::int64_t y = 0; y < g.ho; ++y)
          for (std::int64_t i = 0; i < g.wo; ++i) o[y * g.os[2] + i * g.os[3]] = epilogue(plane[y * wq + i], n, m, y, i);
      }
    });
  }

  // `count` tiles side by side: point k of tile l at src[k * kstride + l];
  // their Mt x Mt outputs into `plane` (rows wq apart, the next tile's Mt
  // columns on).
  template <int Mt>
  static void output_block(const T* src, std::int64_t kstride, T* plane, std::int64_t wq, std::int64_t count) noexcept {
    constexpr int A = detail::WinogradF<Mt>::alpha, L = kBlock;
    T q[A][A][L], t[Mt][A][L], y[Mt][Mt][L];
    for (int i = 0; i < A; ++i)
      for (int j = 0; j < A; ++j)
        for (int l = 0; l < L; ++l) q[i][j][l] = l < count ? src[(i * A + j) * kstride + l] : T(0);
    for (int j = 0; j < A; ++j) detail::WinogradF<Mt>::template output<T, L>(&q[0][j][0], A * L, &t[0][j][0], A * L);  // A^T q
    for (int i = 0; i < Mt; ++i) detail::WinogradF<Mt>::template output<T, L>(&t[i][0][0], L, &y[i][0][0], L);  // (A^T q) A
    for (int i = 0; i < Mt; ++i)
      for (int l = 0; l < count; ++l)
        for (int j = 0; j < Mt; ++j) plane[i * wq + l * Mt + j] = y[i][j][l];
  }

  WinogradGeometry g_;
  int tile_;
};

}  // namespace wfgen::rt

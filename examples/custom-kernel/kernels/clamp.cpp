// The kernel of the node Clamp. wfgen reads this file with Clang, checks
// the signature against the node's DSL line (X: input view, OUT: output
// view, then the arguments lo and hi in the element type) and #includes it
// into the generated kernels, one instance per dtype and rank.
#include <cstdint>

#include <wfgen/runtime_types.hpp>

namespace user {

template <class T, int R>
void clamp(wfgen::rt::View<const T, R> x, wfgen::rt::View<T, R> out, T lo, T hi) {
  // Walks every index with an odometer; the views carry the strides.
  std::int64_t idx[R > 0 ? R : 1] = {};
  const std::int64_t total = out.size();
  for (std::int64_t n = 0; n < total; ++n) {
    std::int64_t xo = 0, oo = 0;
    for (int d = 0; d < R; ++d) {
      xo += idx[d] * x.strides[d];
      oo += idx[d] * out.strides[d];
    }
    T v = x.data[xo];
    out.data[oo] = v < lo ? lo : (v > hi ? hi : v);
    for (int d = R - 1; d >= 0; --d) {
      if (++idx[d] < out.shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace user

// A user kernel: wfgen reads this file with Clang, checks the signature
// against the node ScaleShift and calls it from the generated kernels.
#include <cstdint>

#include <wfgen/runtime_types.hpp>

namespace user {

template <class T, int R>
void scale_shift(wfgen::rt::View<const T, R> x, wfgen::rt::View<T, R> out, T alpha, T beta) {
  // Plain odometer over every index, strides from the views.
  std::int64_t idx[R > 0 ? R : 1] = {};
  const std::int64_t total = out.size();
  for (std::int64_t n = 0; n < total; ++n) {
    std::int64_t xo = 0, oo = 0;
    for (int d = 0; d < R; ++d) {
      xo += idx[d] * x.strides[d];
      oo += idx[d] * out.strides[d];
    }
    out.data[oo] = alpha * x.data[xo] + beta;
    for (int d = R - 1; d >= 0; --d) {
      if (++idx[d] < out.shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace user

// Concrete overloads that together serve f32/f64 at ranks 1 and 2, one of
// them declared before it is defined, plus a fixed-dtype index output.
#include <cstdint>
#include <vector>
#include <wfgen/runtime_types.hpp>

namespace kernels {
using wfgen::rt::View;

void argmax(View<const float, 1> x, View<std::int64_t, 1> idx, const std::vector<std::int64_t>& axes);

void argmax(View<const float, 1> x, View<std::int64_t, 1> idx, const std::vector<std::int64_t>& axes) {
  (void)x, (void)idx, (void)axes;
}
void argmax(View<const double, 1> x, View<std::int64_t, 1> idx, const std::vector<std::int64_t>& axes) {
  (void)x, (void)idx, (void)axes;
}
void argmax(const View<const float, 2>& x, View<std::int64_t, 2> idx, const std::vector<std::int64_t>& axes) {
  (void)x, (void)idx, (void)axes;
}
void argmax(const View<const double, 2>& x, View<std::int64_t, 2> idx, const std::vector<std::int64_t>& axes) {
  (void)x, (void)idx, (void)axes;
}
}  // namespace kernels

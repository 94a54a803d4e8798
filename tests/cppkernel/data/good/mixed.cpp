// A template for every dtype plus a hand-tuned overload for f32 rank 1,
// in an anonymous namespace; the header comes from an -I directory.
#include <wfgen/runtime_types.hpp>
#include "extra_helpers.hpp"

namespace {
template <class T, int R>
void negate(wfgen::rt::View<const T, R> x, wfgen::rt::View<T, R> y) {
  for (long i = 0; i < y.size(); ++i) y.data[i] = helpers::neg(x.data[i]);
}

void negate(wfgen::rt::View<const float, 1> x, wfgen::rt::View<float, 1> y) {
  for (long i = 0; i < y.size(); ++i) y.data[i] = -x.data[i];
}
}  // namespace

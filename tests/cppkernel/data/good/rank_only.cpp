// Over the rank only, float data.
#include <wfgen/runtime_types.hpp>

template <int R>
void relu(wfgen::rt::View<const float, R> x, wfgen::rt::View<float, R> y) {
  for (long i = 0; i < y.size(); ++i) y.data[i] = x.data[i] > 0 ? x.data[i] : 0;
}

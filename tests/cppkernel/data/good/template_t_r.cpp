// A kernel templated over the dtype and the rank: serves every pair.
#include <cstdint>
#include <wfgen/runtime_types.hpp>

template <class T, int R>
void add(wfgen::rt::View<const T, R> a, wfgen::rt::View<const T, R> b, wfgen::rt::View<T, R> out) {
  // Element-wise over contiguous views only, to keep the example short.
  for (std::int64_t i = 0; i < out.size(); ++i) out.data[i] = a.data[i] + b.data[i];
}

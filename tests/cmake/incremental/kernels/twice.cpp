#include <cstdint>

#include <wfgen/runtime_types.hpp>

void twice(wfgen::rt::View<const float, 2> x, wfgen::rt::View<float, 2> out) {
  for (std::int64_t i = 0; i < out.shape[0]; ++i)
    for (std::int64_t j = 0; j < out.shape[1]; ++j)
      out.data[i * out.strides[0] + j * out.strides[1]] = 2.0f * x.data[i * x.strides[0] + j * x.strides[1]];
}

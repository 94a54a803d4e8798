// Template parameters in the other order, a view taken by const reference,
// and an alias template for inputs.
#include <wfgen/runtime_types.hpp>

namespace rt = wfgen::rt;

template <class T, int R>
using In = rt::View<const T, R>;

template <int N, typename E>
void copy(const In<E, N>& src, rt::View<E, N> dst) {
  for (long i = 0; i < dst.size(); ++i) dst.data[i] = src.data[i];
}

// Over the dtype only, rank fixed at 2; scalars of each kind.
#include <cstdint>
#include <span>
#include <vector>
#include <wfgen/runtime_types.hpp>

using wfgen::rt::View;

template <class T>
void scale(const View<const T, 2>& x, View<T, 2> y, T alpha, double beta, std::int64_t axis, int count,
           bool accumulate, std::span<const std::int64_t> dims, const std::vector<double>& weights) {
  (void)axis, (void)count, (void)dims, (void)weights;
  for (std::int64_t i = 0; i < y.size(); ++i)
    y.data[i] = static_cast<T>(alpha * x.data[i] + (accumulate ? beta * y.data[i] : 0));
}

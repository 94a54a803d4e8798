// node: function=sofmax params=x:in,y:out dtypes=f32 ranks=2
// expect: spec.yaml:4:7: error: no function 'sofmax' in kernel file 'not_found.cpp'; did you mean 'softmax'?
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

template <class T, int R>
void softmax(View<const T, R> x, View<T, R> y);
void softplus(View<const float, 2> x, View<float, 2> y);

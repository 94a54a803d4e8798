// node: function=op params=x:in,y:out dtypes=f32 ranks=2
// expect: template_extra.cpp:7:27: error: template parameter 'Policy' of 'op' is not supported; a kernel template has at most one type parameter (the dtype) and one integer parameter (the rank)
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

template <class T, int R, class Policy>
void op(View<const T, R> x, View<T, R> y);

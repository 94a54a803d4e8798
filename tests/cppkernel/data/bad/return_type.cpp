// node: function=op params=x:in,y:out dtypes=f32 ranks=1
// expect: return_type.cpp:7:1: error: function 'op' returns 'int', expected 'void'; kernels write their results through View<T, R> parameters
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

int op(View<const float, 1> x, View<float, 1> y);

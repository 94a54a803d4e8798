// node: function=op params=x:in,y:out dtypes=f32 ranks=1
// expect: mixed_dtypes.cpp:8:29: error: parameter 'y' of 'op' has element type 'float' but parameter 'x' has 'T'; all views of a kernel share one dtype
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

template <class T>
void op(View<const T, 1> x, View<float, 1> y);

// node: function=op params=x:in,y:out dtypes=f32 ranks=1
// expect: mixed_ranks.cpp:7:33: error: parameter 'y' of 'op' has rank 2 but parameter 'x' has rank 1; all views of a kernel share one rank
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void op(View<const float, 1> x, View<float, 2> y);

// node: function=op params=x:in,y:out dtypes=f32,f64 ranks=1,2
// expect: overload_gap.cpp:7:6: error: no overload of 'op' serves f64 rank 2
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void op(View<const float, 1> x, View<float, 1> y);
void op(View<const float, 2> x, View<float, 2> y);
void op(View<const double, 1> x, View<double, 1> y);

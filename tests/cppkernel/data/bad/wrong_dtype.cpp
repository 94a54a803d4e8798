// node: function=relu params=x:in,y:out dtypes=f32 ranks=2
// expect: wrong_dtype.cpp:7:11: error: parameter 'x' of 'relu' is 'View<const double, 2>', expected element type float (f32) for input 'x'
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void relu(View<const double, 2> x, View<double, 2> y);

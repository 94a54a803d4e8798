// node: function=relu params=x:in,y:out dtypes=f32 ranks=2
// expect: wrong_rank.cpp:7:11: error: parameter 'x' of 'relu' is 'View<const float, 3>' of rank 3, expected rank 2 for input 'x'
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void relu(View<const float, 3> x, View<float, 3> y);

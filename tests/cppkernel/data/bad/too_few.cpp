// node: function=matmul params=A:in,B:in,C:out,alpha:float dtypes=f32 ranks=2
// expect: too_few.cpp:7:6: error: function 'matmul' has 2 parameters, expected 4 parameters: A (View<const float, 2>), B (View<const float, 2>), C (View<float, 2>), alpha (float or double)
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void matmul(View<const float, 2> a, View<float, 2> c);

// node: function=relu params=x:in,y:out dtypes=f32 ranks=2
// expect: too_many.cpp:8:11: error: function 'relu' has 3 parameters, expected 2 parameters: x (View<const float, 2>), y (View<float, 2>)
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void relu(View<const float, 2> x, View<float, 2> y,
          int extra);

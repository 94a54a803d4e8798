// node: function=op params=x:in,y:out dtypes=f32,f64 ranks=1
// expect: deleted.cpp:7:6: error: function 'op' serves only float (f32) but the implementation lists dtypes float (f32), double (f64); make the element type a template parameter or add an overload per dtype
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void op(View<const float, 1> x, View<float, 1> y);
void op(View<const double, 1> x, View<double, 1> y) = delete;

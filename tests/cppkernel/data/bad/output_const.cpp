// node: function=add params=A:in,B:in,C:out dtypes=f32 ranks=1
// expect: output_const.cpp:7:58: error: parameter 'c' of 'add' is 'const View<const float, 1>&', a read-only view, but output 'C' is written by the kernel; expected 'View<float, 1>'
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void add(View<const float, 1> a, View<const float, 1> b, const View<const float, 1>& c);

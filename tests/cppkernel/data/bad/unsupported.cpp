// node: function=op params=x:in,y:out,z:out dtypes=f32 ranks=1
// expect: unsupported.cpp:9:9: error: parameter 'x' of 'op' has type 'const float*', expected 'View<const float, 1>' for input 'x'
// expect: unsupported.cpp:9:25: error: parameter 'y' of 'op' is 'View<float, 1>&', a non-const reference; take the output 'y' by value or by const reference
// expect: unsupported.cpp:9:44: error: parameter 'z' of 'op' is 'View<long long, 1>' with element type 'long long', which is not a dtype; expected float, double, std::int32_t, std::int64_t, std::uint8_t or a template parameter
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void op(const float* x, View<float, 1>& y, View<long long, 1> z);

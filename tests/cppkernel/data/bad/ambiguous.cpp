// node: function=op params=x:in,y:out dtypes=f32 ranks=2
// expect: spec.yaml:4:7: error: function name 'op' is ambiguous in kernel file 'ambiguous.cpp': a::op, b::op; name one of them qualified
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

namespace a { void op(View<const float, 2> x, View<float, 2> y); }
namespace b { void op(View<const float, 2> x, View<float, 2> y); }

// node: function=add params=a:in,out:out dtypes=f32 ranks=1
// expect: compile_error.cpp:9:29: error: use of undeclared identifier 'undefined_thing'
// expect: spec.yaml:4:7: note: while reading kernel file 'compile_error.cpp' for function 'add'
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void add(View<const float, 1> a, View<float, 1> out) {
  out.data[0] = a.data[0] + undefined_thing;
}

// node: function=add params=a:in,out:out dtypes=f32 ranks=1
// expect: missing_include.cpp:4:10: error: 'no_such_header.hpp' file not found
// expect: spec.yaml:4:7: note: while reading kernel file 'missing_include.cpp' for function 'add'
#include "no_such_header.hpp"
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void add(View<const float, 1> a, View<float, 1> out);

// node: function=helper_kernel params=x:in,y:out dtypes=f32 ranks=2
// expect: spec.yaml:4:7: error: function 'helper_kernel' is not in kernel file 'in_header.cpp' but in 'inc/helper.hpp', which it includes; name that file in the spec
#include "inc/helper.hpp"

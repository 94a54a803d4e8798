#include <wfgen/runtime_types.hpp>

// Takes only the output: the node also has the input X.
void twice(wfgen::rt::View<float, 1> out) { (void)out; }

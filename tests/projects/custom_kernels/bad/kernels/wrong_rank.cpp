#include <wfgen/runtime_types.hpp>

void twice(wfgen::rt::View<const float, 3> x, wfgen::rt::View<float, 2> out) { (void)x; (void)out; }

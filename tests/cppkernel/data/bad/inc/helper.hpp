#pragma once
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;
void helper_kernel(View<const float, 2> x, View<float, 2> y);

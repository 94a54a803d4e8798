// The row kernels of hand_rows.inc compiled with -ffast-math on top of the
// bench's flags (bench/CMakeLists.txt): reductions reassociated and
// vectorised, exp from glibc's vector math library (libmvec).
#include <cmath>
#include <cstdint>

#include "hand_loops.hpp"

#if !defined(__FAST_MATH__)
#error "hand_loops_fast.cpp must be compiled with -ffast-math"
#endif

namespace bench::hand_fast {

#include "hand_rows.inc"

}  // namespace bench::hand_fast

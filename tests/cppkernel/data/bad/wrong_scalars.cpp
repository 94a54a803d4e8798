// node: function=op params=x:in,y:out,n:int,alpha:float,flag:bool,dims:ints,ws:floats dtypes=f32 ranks=1
// expect: wrong_scalars.cpp:13:51: error: parameter 'n' of 'op' has type 'float', expected an integer type for argument 'n'
// expect: wrong_scalars.cpp:13:60: error: parameter 'alpha' of 'op' has type 'int', expected float or double for argument 'alpha'
// expect: wrong_scalars.cpp:13:71: error: parameter 'flag' of 'op' has type 'int', expected bool for argument 'flag'
// expect: wrong_scalars.cpp:14:9: error: parameter 'dims' of 'op' has type 'std::span<const int>', expected std::span<const std::int64_t> or const std::vector<std::int64_t>& for argument 'dims'
// expect: wrong_scalars.cpp:14:36: error: parameter 'ws' of 'op' has type 'std::vector<float>', expected std::span<const double> or const std::vector<double>& for argument 'ws'
#include <span>
#include <vector>
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

void op(View<const float, 1> x, View<float, 1> y, float n, int alpha, int flag,
        std::span<const int> dims, std::vector<float> ws);

// node: function=op params=x:in,y:out dtypes=f32 ranks=2
// expect: rank_expression.cpp:8:29: error: parameter 'y' of 'op' is 'View<T, R + 1>' with rank 'R + 1'; expected an integer or the template parameter of the rank
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

template <class T, int R>
void op(View<const T, R> x, View<T, R + 1> y);

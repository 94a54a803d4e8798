// node: function=op params=x:in,y:out dtypes=f32 ranks=1,2,3
// expect: serves_only_rank.cpp:8:6: error: function 'op' serves only rank 2 but the implementation lists ranks 1, 2, 3; make the rank a template parameter or add an overload per rank
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

template <class T>
void op(View<const T, 2> x, View<T, 2> y);

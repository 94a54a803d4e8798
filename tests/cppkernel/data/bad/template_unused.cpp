// node: function=op params=x:in,y:out,scale:float dtypes=f32 ranks=2
// expect: template_unused.cpp:7:11: error: template parameter 'T' of 'op' is not the element type of any view parameter
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

template <class T, int R>
void op(View<const float, R> x, View<float, R> y, T scale);

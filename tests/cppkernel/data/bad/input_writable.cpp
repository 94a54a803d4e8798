// node: function=add params=A:in,B:in,C:out dtypes=f32,f64 ranks=1,2,3
// expect: input_writable.cpp:8:30: error: parameter 'b' of 'add' is 'View<T, R>', a writable view, but input 'B' is not written by the kernel; expected 'View<const T, R>'
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

template <class T, int R>
void add(View<const T, R> a, View<T, R> b, View<T, R> c);

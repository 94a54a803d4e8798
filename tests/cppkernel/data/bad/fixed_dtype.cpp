// node: function=argmax params=x:in,idx:out:i64 dtypes=f32 ranks=2
// expect: fixed_dtype.cpp:8:33: error: parameter 'idx' of 'argmax' is 'View<std::int32_t, R>', expected element type std::int64_t (i64) for output 'idx'
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

template <class T, int R>
void argmax(View<const T, R> x, View<std::int32_t, R> idx);

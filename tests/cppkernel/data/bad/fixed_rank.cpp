// node: function=argmax params=x:in,idx:out:i64:r1 dtypes=f32 ranks=2
// expect: fixed_rank.cpp:8:33: error: parameter 'idx' of 'argmax' is 'View<std::int64_t, R>' of rank R, expected rank 1 for output 'idx'
#include <cstdint>
#include <wfgen/runtime_types.hpp>
using wfgen::rt::View;

template <class T, int R>
void argmax(View<const T, R> x, View<std::int64_t, R> idx);

#pragma once
namespace helpers {
template <class T> T neg(T v) { return -v; }
}  // namespace helpers

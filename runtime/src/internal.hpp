// Helpers shared by the runtime's own sources; not installed, not public.
#pragma once

#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "wfgen/runtime.hpp"

namespace wfgen::rt::internal {

// The largest byte size of a buffer: the address space (PTRDIFF_MAX).
inline constexpr std::int64_t kMaxBytes = PTRDIFF_MAX;

// Checked sizes of model support (view_refs.cpp), shared with the binding
// code (model_support.cpp): "(2 ? 3)", with ? for Size::kInvalid, of a
// shape or of n dims; and a shape's element count and bytes, or the error
// (a size computed from the inputs overflowed, a negative size, more than
// kMaxBytes).
std::string shape_text(std::initializer_list<std::int64_t> shape);
std::string dims_str(const std::int64_t* d, int n);
Status checked_bytes(DType dtype, std::initializer_list<std::int64_t> shape, std::int64_t& numel, std::int64_t& bytes);

// Shortest round-trip spelling; floats always show a decimal point ("1.0")
// so they are not mistaken for integers.
template <class E>
std::string format_element(E v) {
  if constexpr (std::is_floating_point_v<E>) {
    char buf[64];
#if defined(__cpp_lib_to_chars)
    const auto res = std::to_chars(buf, buf + sizeof(buf), v);
    std::string s(buf, res.ptr);
#else
    // libc++ before 17 (emscripten 3.1.6's) has no floating-point to_chars:
    // the fewest %g digits that read back as v, a round trip too (in %g's
    // spelling: "1e+05" where to_chars writes "100000").
    int len = 0;
    for (int digits = 1; digits <= std::numeric_limits<E>::max_digits10; ++digits) {
      len = std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(v));
      if (v != v || static_cast<E>(std::strtod(buf, nullptr)) == v) break;
    }
    std::string s(buf, static_cast<std::size_t>(len));
#endif
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // 'n': nan, inf
    return s;
  } else {
    return std::to_string(static_cast<std::int64_t>(v));
  }
}


// Validates a shape given by the user (rank <= kMaxRank, sizes >= 0, element
// count fits int64) and returns its element count; `what` names the caller.
std::int64_t checked_numel(const Shape& shape, const char* what);
// The same as a Status (the count in `n`).
Status numel_status(const Shape& shape, const char* what, std::int64_t& n);

// Calls f(offset_a, offset_b) for every index of `shape`, in row-major order,
// where offset_x = sum(index[i] * strides_x[i]) in elements. Does nothing if
// any size is 0; calls f(0, 0) once for rank 0.
template <class F>
void for_each_offset_pair(int rank, const std::int64_t* shape, const std::int64_t* strides_a,
                          const std::int64_t* strides_b, F&& f) {
  for (int i = 0; i < rank; ++i) {
    if (shape[i] == 0) return;
  }
  if (rank == 0) {
    f(std::int64_t{0}, std::int64_t{0});
    return;
  }
  // An odometer over the outer axes; the innermost axis is a plain loop.
  std::int64_t index[kMaxRank] = {};
  std::int64_t base_a = 0, base_b = 0;
  const int last = rank - 1;
  for (;;) {
    std::int64_t a = base_a, b = base_b;
    for (std::int64_t k = 0; k < shape[last]; ++k, a += strides_a[last], b += strides_b[last]) {
      f(a, b);
    }
    int axis = last - 1;
    for (; axis >= 0; --axis) {
      base_a += strides_a[axis];
      base_b += strides_b[axis];
      if (++index[axis] < shape[axis]) break;
      base_a -= strides_a[axis] * shape[axis];
      base_b -= strides_b[axis] * shape[axis];
      index[axis] = 0;
    }
    if (axis < 0) return;
  }
}

// Single-view form of for_each_offset_pair: f(offset) in row-major order.
template <class F>
void for_each_offset(int rank, const std::int64_t* shape, const std::int64_t* strides, F&& f) {
  for_each_offset_pair(rank, shape, strides, strides,
                       [&](std::int64_t off, std::int64_t) { f(off); });
}

// `value` converted to E. Integer dtypes truncate toward zero and reject NaN
// and out-of-range values, because converting those is undefined behaviour.
template <class E>
E convert_checked(double value, const char* what) {
  if constexpr (std::is_floating_point_v<E>) {
    return static_cast<E>(value);
  } else {
    // 2^63 and friends are exact in double; compare against the half-open
    // range [min, max + 1) so the largest value still converts.
    const double lo = static_cast<double>(std::numeric_limits<E>::min());
    const double hi = static_cast<double>(std::numeric_limits<E>::max()) + 1.0;
    if (!(value >= lo && value < hi)) {
      fail(ErrorCode::InvalidArgument,
                  std::string(what) + " value " + std::to_string(value) + " does not fit dtype " +
                      dtype_name(dtype_of_v<E>));
    }
    return static_cast<E>(value);
  }
}

// --- matching parameters by name (parameter_matching.cpp) ---

// Where parameters come from, for the messages: "parameter file P: " and
// "the file", or "copy_parameters_from: " and "the source model".
struct ParameterSource {
  std::string context;
  const char* noun;
  const char* call;  // the call to name a scope with
  ErrorCode code;
};

// For each of the model's `names`, the index in `source_names` it is taken
// from: the same name (the same model at the top level), else scope + "/" +
// name for the scope given, else for the one scope that holds every name.
// Missing names, names left over under the scope, duplicates and an
// ambiguous scope are errors (where.code) that name them.
Status match_parameters(std::span<const std::string> source_names, std::span<const std::string> names, std::string_view scope,
                        const ParameterSource& where, std::vector<std::size_t>& from);

// "" when a source parameter of dtype code `dtype_code` and shape `dims`
// fits `to`, else what differs ("parameter 'W' has shape (4 3), expected (3 4)").
std::string parameter_mismatch(const std::string& name, const std::string& source_name, std::uint8_t dtype_code,
                               std::span<const std::int64_t> dims, const Tensor& to);

// A name read from a file, safe to show in a message: control and non-ASCII
// bytes as \xNN, at most 64 characters.
std::string printable_name(const std::string& s);

}  // namespace wfgen::rt::internal

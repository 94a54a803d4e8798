// Error codes and shape formatting used in every runtime message.
#include <string>

#include "wfgen/runtime.hpp"

namespace wfgen::rt {

namespace {

// Indexed by ErrorCode; the static_assert below keeps it in step with the enum.
constexpr const char* kErrorCodeNames[] = {
    "shape mismatch", "dtype mismatch", "rank mismatch",      "out of bounds",  "invalid view",
    "null buffer",    "aliased buffer", "bad parameter file", "out of memory", "invalid argument",
};
static_assert(sizeof(kErrorCodeNames) / sizeof(kErrorCodeNames[0]) == kErrorCodeCount,
              "kErrorCodeNames must name every ErrorCode");
static_assert(static_cast<int>(ErrorCode::InvalidArgument) == kErrorCodeCount - 1,
              "kErrorCodeCount must match ErrorCode");

}  // namespace

const char* error_code_name(ErrorCode code) {
  const auto i = static_cast<int>(code);
  return i >= 0 && i < kErrorCodeCount ? kErrorCodeNames[i] : "unknown error";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

std::string shape_to_string(std::span<const std::int64_t> dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(dims[i]);
  }
  s += ')';
  return s;
}

}  // namespace wfgen::rt

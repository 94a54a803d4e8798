// Error codes, Status and fail() (error.hpp).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "wfgen/error.hpp"

namespace wfgen::rt {

namespace {

// Indexed by ErrorCode; the static_assert below keeps it in step with the enum.
constexpr const char* kErrorCodeNames[] = {
    "shape mismatch", "dtype mismatch", "rank mismatch",      "out of bounds",  "invalid view",
    "null buffer",    "aliased buffer", "bad parameter file", "out of memory", "invalid argument",
    "size overflow",
};
static_assert(sizeof(kErrorCodeNames) / sizeof(kErrorCodeNames[0]) == kErrorCodeCount,
              "kErrorCodeNames must name every ErrorCode");
static_assert(static_cast<int>(ErrorCode::SizeOverflow) == kErrorCodeCount - 1,
              "kErrorCodeCount must match ErrorCode");

std::atomic<FatalHandler> g_fatal_handler{nullptr};
std::mutex g_fatal_mutex;
Status g_fatal_error;  // guarded by g_fatal_mutex

}  // namespace

const char* error_code_name(ErrorCode code) {
  const auto i = static_cast<int>(code);
  return i >= 0 && i < kErrorCodeCount ? kErrorCodeNames[i] : "unknown error";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

std::string Status::to_string() const {
  return ok() ? std::string("ok") : std::string(error_code_name(code_)) + ": " + message_;
}

void set_fatal_handler(FatalHandler handler) noexcept { g_fatal_handler.store(handler); }

Status last_fatal_error() {
  std::lock_guard lock(g_fatal_mutex);
  return g_fatal_error;
}

void fail(ErrorCode code, const std::string& message) {
#if WFGEN_EXCEPTIONS
  throw Error(code, message);
#else
  const Status status(code, message);
  {
    std::lock_guard lock(g_fatal_mutex);
    g_fatal_error = status;
  }
  if (FatalHandler h = g_fatal_handler.load()) h(status);
  std::fprintf(stderr, "wfgen: %s: %s\n", error_code_name(code), message.c_str());
  std::fflush(stderr);
  std::abort();
#endif
}

void fail(const Status& status) {
  if (status.ok()) fail(ErrorCode::InvalidArgument, "fail() called with a Status that is ok");
  fail(status.code(), status.message());
}

}  // namespace wfgen::rt

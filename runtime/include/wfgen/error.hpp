// Errors of the wfgen runtime: the error codes, the exception type, the
// Status of the non-throwing API, and fail(), the one way the runtime,
// generated kernels and generated models report an error. Part of the
// kernel layer (below the model API of runtime.hpp): std-only, no tensors.
#pragma once

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace wfgen::rt {

// What went wrong, so callers (and tests) can branch without parsing text.
// Append only: the values are part of the error-code API.
enum class ErrorCode : std::uint8_t {
  ShapeMismatch,     // shapes that had to agree did not
  DTypeMismatch,     // element type differs from the one asked for
  RankMismatch,      // number of dimensions differs from the one asked for
  OutOfBounds,       // an index or byte range lies outside its tensor or buffer
  InvalidView,       // the view cannot be expressed with strides over the same storage
  NullBuffer,        // a tensor without storage, or a null user pointer
  AliasedBuffer,     // two buffers overlap where they must not
  BadParameterFile,  // a parameter file is truncated or does not match the model
  OutOfMemory,       // an allocation failed
  InvalidArgument,   // any other bad argument (negative size, step 0, ...)
  SizeOverflow,      // a run-time size, element count, byte count or offset does not fit in 64 bits
};
inline constexpr int kErrorCodeCount = 11;

// "shape mismatch", "dtype mismatch", ...
const char* error_code_name(ErrorCode code);

// Every error the runtime reports. Messages name the values involved and what
// was expected; they start lowercase and end without a period.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// The error-code API: what the non-throwing entry points of generated model
// classes (try_forward(), try_run(), ...) return instead of throwing an Error.
// A default-constructed Status is success; a failed one carries the ErrorCode
// and the message the Error would have had.
//
//   std::vector<wfgen::rt::Tensor> out;
//   wfgen::rt::Status st = model.try_forward(out, X);
//   if (!st.ok()) std::fprintf(stderr, "%s: %s\n", wfgen::rt::error_code_name(st.code()), st.message().c_str());
class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(ErrorCode code, std::string message) : failed_(true), code_(code), message_(std::move(message)) {}
  static Status from(const Error& e) { return Status(e.code(), e.what()); }

  bool ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return ok(); }
  // Meaningful only when !ok().
  ErrorCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "ok", or "shape mismatch: <message>".
  std::string to_string() const;

 private:
  bool failed_ = false;
  ErrorCode code_ = ErrorCode::InvalidArgument;
  std::string message_;
};

// Whether the runtime (and the generated code including this header) is
// compiled with C++ exceptions. Define WFGEN_NO_EXCEPTIONS, or compile with
// -fno-exceptions, for builds without them (see fail()).
#if defined(WFGEN_NO_EXCEPTIONS) || !(defined(__cpp_exceptions) || defined(__EXCEPTIONS))
#define WFGEN_EXCEPTIONS 0
#else
#define WFGEN_EXCEPTIONS 1
#endif

// The one way the runtime and generated code report an error. With
// exceptions: throws Error(code, message). Without (-fno-exceptions, the
// runtime compiled the same way): records the error (last_fatal_error()),
// calls the fatal handler, which by default prints "wfgen: <code name>:
// <message>" to stderr, and aborts. The try_ entry points of generated
// models validate their inputs before running, so bad input returns a
// Status there and never reaches this abort.
[[noreturn]] void fail(ErrorCode code, const std::string& message);
[[noreturn]] void fail(const Status& status);

// Runs f() (returning void or a Status) and gives its error as a Status. With
// exceptions, whatever f throws is caught: an Error keeps its code,
// std::bad_alloc is OutOfMemory, anything else InvalidArgument. Without, f()
// just runs (a fail() inside aborts). The try_ entry points of generated
// models run through it, so they never throw.
template <class F>
Status capture(F&& f) {
#if WFGEN_EXCEPTIONS
  try {
#endif
    if constexpr (std::is_same_v<decltype(std::forward<F>(f)()), Status>) {
      return std::forward<F>(f)();
    } else {
      std::forward<F>(f)();
      return {};
    }
#if WFGEN_EXCEPTIONS
  } catch (const Error& e) {
    return Status::from(e);
  } catch (const std::bad_alloc& e) {
    return Status(ErrorCode::OutOfMemory, std::string("out of memory (") + e.what() + ")");
  } catch (const std::exception& e) {
    return Status(ErrorCode::InvalidArgument, e.what());
  } catch (...) {
    return Status(ErrorCode::InvalidArgument, "an exception that is not a std::exception");
  }
#endif
}

// Builds without exceptions: called by fail() before it aborts; must not
// return (if it does, fail() aborts). Null restores the default handler.
using FatalHandler = void (*)(const Status& status);
void set_fatal_handler(FatalHandler handler) noexcept;
// The error of the last fail() in a build without exceptions (for a fatal
// handler or a debugger); ok() if none.
Status last_fatal_error();

}  // namespace wfgen::rt

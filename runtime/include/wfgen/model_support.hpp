// What generated model files use besides the VM: building tensor-table
// entries (arena slices and views of them), checking inputs against the
// model's symbolic shapes, initialising parameters, and parameter files.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wfgen/runtime.hpp"

namespace wfgen::rt {

// --- tensor-table entries -----------------------------------------------------

// A contiguous row-major tensor at `data`.
TensorRef contiguous_ref(void* data, DType dtype, std::initializer_list<std::int64_t> shape);
// Axes reordered: result axis k is base axis perm[k].
TensorRef permute_ref(const TensorRef& base, std::initializer_list<int> perm);
// Numpy broadcasting to `shape`: new leading axes and size-1 axes get stride 0.
TensorRef broadcast_ref(const TensorRef& base, std::initializer_list<std::int64_t> shape);
// A new shape of the same size; the base must be contiguous (wfgen copies first otherwise).
TensorRef reshape_ref(const TensorRef& base, std::initializer_list<std::int64_t> shape);
// Per axis: start and step (the result's shape is given).
TensorRef slice_ref(const TensorRef& base, std::initializer_list<std::int64_t> starts, std::initializer_list<std::int64_t> steps,
                    std::initializer_list<std::int64_t> shape);
// Drop axis `axis` (its size must be 1).
TensorRef squeeze_ref(const TensorRef& base, int axis);
// Insert a size-1 axis at `axis`.
TensorRef unsqueeze_ref(const TensorRef& base, int axis);

// Element count and bytes of a shape (0 for an empty one).
std::int64_t numel_of(std::initializer_list<std::int64_t> shape);
std::size_t bytes_of(DType dtype, std::initializer_list<std::int64_t> shape);

// A Tensor that owns a copy of a table entry's elements (outputs of a model
// live in its arena, which the next call reuses).
Tensor copy_out(const TensorRef& ref);

// --- inputs -----------------------------------------------------------------------

// One dim of a model input as declared: a number, or a run-time symbol.
struct InputDim {
  const char* symbol;   // null: `size` is the declared size
  std::int64_t size;
};

// Binds run-time symbols from the inputs and checks every input's dtype and
// shape. Errors are rt::Error (ShapeMismatch, DTypeMismatch, RankMismatch)
// with a report in the layout of wfgen's Shape-Error: the model, its where
// line, the inputs given, and what was expected.
class InputBinder {
 public:
  InputBinder(const char* model, const char* where, std::span<const char* const> symbols);
  // Checks one input and binds the symbols it determines.
  void bind(const char* name, const Tensor& t, DType dtype, std::initializer_list<InputDim> dims);
  std::int64_t value(std::size_t symbol) const { return values_[symbol]; }

 private:
  [[noreturn]] void fail(ErrorCode code, const std::string& report) const;
  const char* model_;
  const char* where_;
  std::span<const char* const> symbols_;
  std::vector<std::int64_t> values_;
  std::vector<std::string> given_;
};

// --- parameters -------------------------------------------------------------------

enum class InitKind : std::uint8_t { Zeros, Ones, Constant, Uniform, Normal, Xavier, He };

// Fills a parameter as its spec says. Xavier: uniform in +-sqrt(6 / (fan_in +
// fan_out)); He: normal(0, sqrt(2 / fan_in)); fan_in is the size of the
// first axis and fan_out of the last (the X @ W layout), both the size of a
// 1-D parameter. Random draws come from `rng` in parameter order, so a seed
// gives the same weights on every platform (uniform exactly; normal up to
// the C library's log/cos).
void init_parameter(Tensor& t, InitKind kind, double a, double b, Rng& rng);

// Parameter files: "WFGENPRM", version 1, the count, then per parameter its
// name, dtype, rank, dims and data (little-endian), then an FNV-1a 64
// checksum of everything before it. load_parameters checks magic, version,
// names, dtypes, shapes and the checksum, and changes nothing on error.
void save_parameters(const std::string& path, std::span<const std::string> names, std::span<const Tensor> tensors);
void load_parameters(const std::string& path, std::span<const std::string> names, std::span<Tensor> tensors);

}  // namespace wfgen::rt

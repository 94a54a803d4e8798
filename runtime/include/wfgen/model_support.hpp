// What generated model files use besides the VM: building tensor-table
// entries (arena slices and views of them), checking inputs against the
// model's symbolic shapes, initialising parameters, and parameter files.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "wfgen/runtime.hpp"

namespace wfgen::rt {

// --- tensor-table entries -----------------------------------------------------

// Each fails (an rt::Error: SizeOverflow, InvalidArgument, ShapeMismatch,
// RankMismatch) on a size, axis or shape that does not fit; RefBuilder
// below gives the same entries with the error as a Status.
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

// The same entries for generated bind_(), which must report a bad run-time
// size as a Status (try_forward() under -fno-exceptions): each method
// returns the entry, or an empty TensorRef once a check failed, and
// status() keeps the first failure, naming the tensor ("the tensor TID6 of
// the model: broadcast_ref: a view of shape (? 5) ..."). Besides what the
// functions above check, every view checks that its sizes are valid
// (no Size::kInvalid, none negative) and that its element count fits in
// int64 (SizeOverflow): a broadcast view needs no bytes of its own, so no
// buffer size catches a (2^40 2^40) one.
class RefBuilder {
 public:
  TensorRef contiguous(const char* name, void* data, DType dtype, std::initializer_list<std::int64_t> shape);
  TensorRef permute(const char* name, const TensorRef& base, std::initializer_list<int> perm);
  TensorRef broadcast(const char* name, const TensorRef& base, std::initializer_list<std::int64_t> shape);
  TensorRef reshape(const char* name, const TensorRef& base, std::initializer_list<std::int64_t> shape);
  TensorRef slice(const char* name, const TensorRef& base, std::initializer_list<std::int64_t> starts,
                  std::initializer_list<std::int64_t> steps, std::initializer_list<std::int64_t> shape);
  TensorRef squeeze(const char* name, const TensorRef& base, int axis);
  TensorRef unsqueeze(const char* name, const TensorRef& base, int axis);
  const Status& status() const noexcept { return status_; }

 private:
  TensorRef keep(const char* name, Status st, const TensorRef& r);
  Status status_;
};

// Element count and bytes of a shape (0 for an empty one). A negative size is
// Error(InvalidArgument); a count or byte size beyond int64 (PTRDIFF_MAX
// bytes) is Error(SizeOverflow), never a wrapped size.
std::int64_t numel_of(std::initializer_list<std::int64_t> shape);
std::size_t bytes_of(DType dtype, std::initializer_list<std::int64_t> shape);

// --- run-time sizes ---------------------------------------------------------------

// A run-time dim in generated code (`batch`, `h_out`): std::int64_t whose
// arithmetic cannot wrap. The sizes of a model's tensors are formulas of the
// dims its inputs bind (`batch * 1024`, `(h - 3) / 2 + 1`); with Size, a
// result that does not fit in int64, or a division by zero, is the value
// Size::kInvalid, which every later operation keeps and which bytes_of /
// ArenaPlan::bytes report as Error(SizeOverflow) (so a huge input dim never
// becomes a small wrapped size). `/` is floor division, as in the Subscript
// DSL. Converts implicitly to std::int64_t, so it fits in shapes.
class Size {
 public:
  static constexpr std::int64_t kInvalid = INT64_MIN;

  constexpr Size(std::int64_t v) noexcept : v_(v) {}  // NOLINT: implicit on purpose
  constexpr operator std::int64_t() const noexcept { return v_; }
  constexpr bool valid() const noexcept { return v_ != kInvalid; }

  friend constexpr Size operator+(Size a, Size b) noexcept { return op('+', a.v_, b.v_); }
  friend constexpr Size operator-(Size a, Size b) noexcept { return op('-', a.v_, b.v_); }
  friend constexpr Size operator*(Size a, Size b) noexcept { return op('*', a.v_, b.v_); }
  friend constexpr Size operator/(Size a, Size b) noexcept { return op('/', a.v_, b.v_); }
  // Mixed with integer literals (`batch * 1024`, `2 - h`).
  template <class T> requires std::is_integral_v<T>
  friend constexpr Size operator+(Size a, T b) noexcept { return op('+', a.v_, static_cast<std::int64_t>(b)); }
  template <class T> requires std::is_integral_v<T>
  friend constexpr Size operator+(T a, Size b) noexcept { return op('+', static_cast<std::int64_t>(a), b.v_); }
  template <class T> requires std::is_integral_v<T>
  friend constexpr Size operator-(Size a, T b) noexcept { return op('-', a.v_, static_cast<std::int64_t>(b)); }
  template <class T> requires std::is_integral_v<T>
  friend constexpr Size operator-(T a, Size b) noexcept { return op('-', static_cast<std::int64_t>(a), b.v_); }
  template <class T> requires std::is_integral_v<T>
  friend constexpr Size operator*(Size a, T b) noexcept { return op('*', a.v_, static_cast<std::int64_t>(b)); }
  template <class T> requires std::is_integral_v<T>
  friend constexpr Size operator*(T a, Size b) noexcept { return op('*', static_cast<std::int64_t>(a), b.v_); }
  template <class T> requires std::is_integral_v<T>
  friend constexpr Size operator/(Size a, T b) noexcept { return op('/', a.v_, static_cast<std::int64_t>(b)); }
  template <class T> requires std::is_integral_v<T>
  friend constexpr Size operator/(T a, Size b) noexcept { return op('/', static_cast<std::int64_t>(a), b.v_); }

 private:
  static constexpr std::int64_t op(char o, std::int64_t a, std::int64_t b) noexcept {
    if (a == kInvalid || b == kInvalid) return kInvalid;
    std::int64_t r = 0;
    switch (o) {
      case '+': return __builtin_add_overflow(a, b, &r) || r == kInvalid ? kInvalid : r;
      case '-': return __builtin_sub_overflow(a, b, &r) || r == kInvalid ? kInvalid : r;
      case '*': return __builtin_mul_overflow(a, b, &r) || r == kInvalid ? kInvalid : r;
      default: {
        if (b == 0 || (a == INT64_MIN && b == -1)) return kInvalid;
        r = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --r;  // floor division
        return r;
      }
    }
  }
  std::int64_t v_;
};

// How generated bind_() lays out a model's arena: slot by slot, each as large
// as the largest tensor it holds, rounded up to kAlignment. Every size is
// checked; the first negative size, overflow (a Size::kInvalid dim, a byte
// count or arena beyond PTRDIFF_MAX) is kept as status() and later calls
// return 0, so bind_() reports it once, naming the shape.
class ArenaPlan {
 public:
  // Bytes of a tensor of `shape` (0 after an error).
  std::size_t bytes(DType dtype, std::initializer_list<std::int64_t> shape);
  // Reserves the next slot for the largest of `sizes`; returns its offset.
  std::size_t slot(std::initializer_list<std::size_t> sizes);
  std::size_t total() const noexcept { return total_; }
  const Status& status() const noexcept { return status_; }
  // Makes `arena` (a u8 tensor) at least total() bytes (at least 64): keeps
  // it if it is large enough, else allocates a new one (OutOfMemory if that
  // fails). Returns status() if it is not ok.
  Status allocate(Tensor& arena) const;

 private:
  std::size_t total_ = 0;
  Status status_;
};

// A zero-filled tensor in `out`, or OutOfMemory / SizeOverflow / InvalidArgument
// as a Status (generated bind_() sizes gradient buffers of inputs with it).
Status try_zeros(Tensor& out, DType dtype, const Shape& shape);

// A Tensor that owns a copy of a table entry's elements (outputs of a model
// live in its arena, which the next call reuses).
Tensor copy_out(const TensorRef& ref);
// The same into `out`, OutOfMemory (or a bad ref) as a Status.
Status try_copy_out(const TensorRef& ref, Tensor& out);

// --- caller-owned outputs (forward_into, run_into) ----------------------------------

// Makes `out` a tensor of `dtype` and `shape` for a model to write its
// output `name` into: kept as it is (the caller's memory, any strides) when
// it already has that dtype and shape, otherwise replaced by a new
// contiguous tensor (not zeroed: the model writes every element), so the
// first call allocates and later ones reuse it.
// SizeOverflow / InvalidArgument for a bad run-time size, OutOfMemory.
Status prepare_output(const char* name, Tensor& out, DType dtype, std::initializer_list<std::int64_t> shape);

// Whether a generated model may give outputs[k] to the kernel that computes
// that output as its destination (no copy), instead of computing into its
// arena and copying: outputs[k] is row-major contiguous (the layout the
// kernel gets in the arena) and shares no memory with an input, a
// parameter or another output (a kernel could overwrite an input that a
// later instruction still reads).
bool can_write_directly(std::span<const Tensor> outputs, std::size_t k, std::span<const Tensor> inputs,
                        std::span<const Tensor> params);

// For an output that is copied: AliasedBuffer if `dst` (the caller's
// tensor) overlaps `src` (what the model computed, which may be an input or
// a view of one) other than as the identical view, where copying would
// read elements it has already overwritten.
Status check_output_copy(const char* name, const TensorRef& dst, const TensorRef& src);

// Copies the elements of `src` into `dst`: same dtype and shape, any
// strides, not overlapping unless identical (check_output_copy). One
// memmove when both are row-major contiguous. No checks: generated
// forward_into() copies entries it checked when it bound them.
void copy_elements(const TensorRef& dst, const TensorRef& src) noexcept;

// --- forward() and run(): outputs the model allocates -------------------------------

// What forward() and run() return: the N output tensors, held inline (no
// allocation), in the order of the model's `->` list. It reads like the
// std::vector it converts to:
//
//   y = model.forward(x)[0];                  // a handle on the model's result
//   auto [logits, loss] = model.forward(X, T);
//   std::vector<Tensor> all = model.forward(X, T);
//   for (const Tensor& t : model.forward(X, T)) ...
template <std::size_t N>
class Results {
 public:
  static constexpr std::size_t size() noexcept { return N; }
  static constexpr bool empty() noexcept { return N == 0; }
  Tensor& operator[](std::size_t k) & noexcept { return tensors_[k]; }
  const Tensor& operator[](std::size_t k) const& noexcept { return tensors_[k]; }
  Tensor&& operator[](std::size_t k) && noexcept { return std::move(tensors_[k]); }
  // operator[] with a bounds check: InvalidArgument past the end.
  const Tensor& at(std::size_t k) const {
    if (k >= N) fail(ErrorCode::InvalidArgument, "Results::at(" + std::to_string(k) + ") of " + std::to_string(N) + " outputs");
    return tensors_[k];
  }
  Tensor* begin() noexcept { return tensors_.data(); }
  Tensor* end() noexcept { return tensors_.data() + N; }
  const Tensor* begin() const noexcept { return tensors_.data(); }
  const Tensor* end() const noexcept { return tensors_.data() + N; }
  Tensor* data() noexcept { return tensors_.data(); }
  const Tensor* data() const noexcept { return tensors_.data(); }
  Tensor& front() noexcept { return tensors_.front(); }
  Tensor& back() noexcept { return tensors_.back(); }

  // Structured bindings (auto [a, b] = ...).
  template <std::size_t I> Tensor& get() & noexcept { return std::get<I>(tensors_); }
  template <std::size_t I> const Tensor& get() const& noexcept { return std::get<I>(tensors_); }
  template <std::size_t I> Tensor&& get() && noexcept { return std::move(std::get<I>(tensors_)); }

  operator std::vector<Tensor>() const& { return std::vector<Tensor>(begin(), end()); }  // NOLINT: implicit on purpose
  operator std::vector<Tensor>() && {  // NOLINT: implicit on purpose
    return std::vector<Tensor>(std::make_move_iterator(begin()), std::make_move_iterator(end()));
  }

 private:
  std::array<Tensor, N> tensors_;
};

// The model's own outputs, which forward() and run() write and return by
// reference: allocated by the model (not zeroed) and handed out without a
// copy, the kernels writing them directly where forward_into() would write
// the caller's tensors (else the model copies into them). Every call writes
// the same set again, so the steady state touches one output buffer, as
// forward_into() does, and `y = model.forward(x)[0]` changes no reference
// count (y already shares the set's storage). A handle the caller keeps sees
// the next call's values; clone() keeps a result.
//
// The one exception keeps the inputs intact: when an input of the call lies
// in the set's memory (`h = model.forward(h)[0]`, a result or a view of one
// passed back), the model writes its other set, and when an input lies in
// that one too, a new set (the old tensors stay with whoever holds them).
template <std::size_t N>
class ResultSets {
 public:
  // The set to compute into for a call on `inputs` (the model's input
  // handles, which take_inputs_() has set): with `same_binding` (the model
  // is bound to the current set and no input changed since), the current
  // one, which the binding's inputs do not overlap; otherwise the current
  // one unless an input lies in its memory, then the other, and if that
  // holds one too, a fresh set. Undefined tensors in it are allocated by the
  // binding.
  Results<N>& pick(std::span<const Tensor> inputs, bool same_binding) noexcept {
    if (!same_binding && holds_any(sets_[last_], inputs)) {
      last_ ^= 1;
      if (holds_any(sets_[last_], inputs)) {
        for (Tensor& t : sets_[last_]) t = Tensor();
      }
    }
    return sets_[last_];
  }
  // The set the last call wrote.
  Results<N>& current() noexcept { return sets_[last_]; }
  const Results<N>& current() const noexcept { return sets_[last_]; }

 private:
  // Whether the storage of an input overlaps that of a tensor of `set`:
  // whole storages compared, two loads each (a borrowed view of a result is
  // another Storage over the same bytes, so pointers alone would miss it).
  static bool holds_any(const Results<N>& set, std::span<const Tensor> inputs) noexcept {
    for (const Tensor& r : set) {
      if (!r.defined()) continue;
      const std::byte* lo = r.storage()->data();
      const std::byte* hi = lo + r.storage()->bytes();
      for (const Tensor& in : inputs) {
        if (!in.defined()) continue;
        const std::byte* in_lo = in.storage()->data();
        if (in_lo < hi && lo < in_lo + in.storage()->bytes()) return true;
      }
    }
    return false;
  }
  std::array<Results<N>, 2> sets_;
  int last_ = 0;
};

// --- inputs -----------------------------------------------------------------------

// Converts the integer input `name` (token ids, class labels: a build's
// input_dtypes) into `out`, a contiguous f32 or f64 tensor of its shape,
// value by value, before a forward pass. InvalidArgument naming the input and
// the element when a value is negative or too large for `out`'s dtype to
// hold exactly (2^24 for f32, 2^53 for f64). A value past the end of the
// table it indexes is not an error here: gather and one_hot give zeros there.
Status load_indices(const char* name, const Tensor& in, Tensor& out);

// One dim of a model input as declared: a number, or a run-time symbol.
struct InputDim {
  const char* symbol;   // null: `size` is the declared size
  std::int64_t size;
};

// Binds run-time symbols from the inputs and checks every input's dtype and
// shape. Errors (ShapeMismatch, DTypeMismatch, RankMismatch, NullBuffer for
// an input that was not set, SizeOverflow for an input whose bytes do not fit
// in PTRDIFF_MAX) carry a report in the layout of wfgen's Shape-Error: the
// model, its where line, the inputs given, and what was expected.
class InputBinder {
 public:
  InputBinder(const char* model, const char* where, std::span<const char* const> symbols);
  // Checks one input and binds the symbols it determines; the error as a Status.
  Status check(const char* name, const Tensor& t, DType dtype, std::initializer_list<InputDim> dims);
  // The same, failing (fail(): an rt::Error) on error.
  void bind(const char* name, const Tensor& t, DType dtype, std::initializer_list<InputDim> dims);
  std::int64_t value(std::size_t symbol) const { return values_[symbol]; }

 private:
  Status report(ErrorCode code, const std::string& report) const;
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

// Checks that every tensor in `tensors` is defined (NullBuffer otherwise:
// "<what> <name> was not set") and, when `distinct`, that no two overlap in
// memory (AliasedBuffer). `names` is parallel to `tensors`.
Status check_tensors(const char* what, std::span<const std::string> names, std::span<const Tensor> tensors, bool distinct);

// Parameter files: "WFGENPRM", version 1, the count, then per parameter its
// name, dtype, rank, dims and data (little-endian), then an FNV-1a 64
// checksum of everything before it. load_parameters checks magic, version,
// names, dtypes, shapes and the checksum, and changes nothing on error.
// Both check first that every tensor is defined (NullBuffer); load_parameters
// also that no two destination tensors overlap (AliasedBuffer). The try_
// forms return the error as a Status (for builds without exceptions).
//
// load_parameters matches parameters by name, never by position, so a file
// written by one build of a model loads into another build of it
// (docs/runtime-api.md, "Moving parameters between builds"): each of `names`
// is read from the file's parameter of that name; when the file does not hold
// them all at the top level, from "<scope>/<name>", for the one scope that
// holds them all (a training build that calls the model names its
// parameters "<Model>_0/linear_0.W"), or for `scope` when given; the other
// way round, each "<scope>/<name>" of `names` is read from the file's <name>
// when one scope of `names` covers them all (an inference build's file into
// the training build). A name not
// in the file, a parameter of the file left over under the scope, two scopes
// that both fit, or a dtype or shape that differs is a BadParameterFile error
// that names them.
void save_parameters(const std::string& path, std::span<const std::string> names, std::span<const Tensor> tensors);
void load_parameters(const std::string& path, std::span<const std::string> names, std::span<Tensor> tensors,
                     std::string_view scope = {});
Status try_save_parameters(const std::string& path, std::span<const std::string> names, std::span<const Tensor> tensors);
Status try_load_parameters(const std::string& path, std::span<const std::string> names, std::span<Tensor> tensors,
                           std::string_view scope = {});

// The same in memory: copies `source` (another model's parameters(), e.g. a
// training build's after some steps) into `tensors`, matched by name as
// load_parameters matches a file's. Errors are InvalidArgument; on error
// nothing changes. Generated models call it as copy_parameters_from(model).
void copy_parameters(std::span<const std::pair<std::string, Tensor>> source, std::span<const std::string> names,
                     std::span<Tensor> tensors, std::string_view scope = {});
Status try_copy_parameters(std::span<const std::pair<std::string, Tensor>> source, std::span<const std::string> names,
                           std::span<Tensor> tensors, std::string_view scope = {});

}  // namespace wfgen::rt

template <std::size_t N>
struct std::tuple_size<wfgen::rt::Results<N>> : std::integral_constant<std::size_t, N> {};
template <std::size_t I, std::size_t N>
struct std::tuple_element<I, wfgen::rt::Results<N>> {
  using type = wfgen::rt::Tensor;
};

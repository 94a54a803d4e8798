// wfgen_runtime: the one public header of the library that generated kernels
// and generated model files link against. Std-only: the C++20 standard
// library and std::thread, nothing else.
//
// A short tour:
//
//   using namespace wfgen::rt;
//   Tensor a = Tensor::from_data<float>({2, 3}, {0, 1, 2, 3, 4, 5});
//   Tensor b = a.T();                         // a view: shape (3 2), strides (1 3)
//   View<const float, 2> v = b.cview<float, 2>();  // what a generated kernel takes
//   parallel_for(0, v.shape[0], 64, [&](std::int64_t lo, std::int64_t hi) {
//     for (std::int64_t i = lo; i < hi; ++i) { /* rows lo..hi-1 */ }
//   });
//   Rng rng(42);
//   Tensor w = Tensor::empty(DType::f32, {784, 256});
//   fill_normal(w, 0.0, 0.02, rng);           // same numbers on every platform
//   std::cout << b << "\n";                   // {CPUTENSOR[float] :shape (3 2) ...}
//
// Sections: shapes and dtype dispatch, storage, tensors, arena, random
// numbers. The layer below it, which generated kernels use without the model
// API, has its own headers, included here: errors (error.hpp), threads
// (parallel.hpp), element types, views and TensorRef (runtime_types.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "wfgen/error.hpp"
#include "wfgen/parallel.hpp"
#include "wfgen/runtime_types.hpp"

namespace wfgen::rt {

// ---------------------------------------------------------------------------
// Shapes and dtype dispatch
// ---------------------------------------------------------------------------

// Sizes or strides of a tensor, outermost dimension first.
using Shape = std::vector<std::int64_t>;

// "(3 4)", as cl-waffe2 prints shapes; "()" for rank 0.
std::string shape_to_string(std::span<const std::int64_t> dims);

// Calls f(std::type_identity<T>{}) with the C++ element type of `t`, so one
// generic lambda serves every dtype.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  static_assert(kDTypeCount == 5, "visit_dtype must list every DType");
  switch (t) {
    case DType::f32: return std::forward<F>(f)(std::type_identity<float>{});
    case DType::f64: return std::forward<F>(f)(std::type_identity<double>{});
    case DType::i32: return std::forward<F>(f)(std::type_identity<std::int32_t>{});
    case DType::i64: return std::forward<F>(f)(std::type_identity<std::int64_t>{});
    case DType::u8: return std::forward<F>(f)(std::type_identity<std::uint8_t>{});
  }
  fail(ErrorCode::InvalidArgument, "unknown dtype code " + std::to_string(static_cast<int>(t)));
}

// ---------------------------------------------------------------------------
// Storage
// ---------------------------------------------------------------------------

// Alignment of every buffer the runtime allocates: a cache line, and enough
// for any SIMD load a generated kernel may use.
inline constexpr std::size_t kAlignment = 64;

// A byte buffer that tensors share through std::shared_ptr. Either owned
// (allocated here, 64-byte aligned, zero-initialised, freed with the last
// reference) or borrowed (a user pointer that is never freed; `keep_alive`
// may hold whatever owns that memory, e.g. the arena block it lies in).
class Storage {
 public:
  // Error(OutOfMemory) when the allocation fails; try_allocate returns null instead.
  static std::shared_ptr<Storage> allocate(std::size_t bytes);
  static std::shared_ptr<Storage> try_allocate(std::size_t bytes);
  // try_allocate() without zeroing the bytes (buffers of 4 MiB and more are
  // fresh pages, zero anyway): for memory the caller writes in full before
  // anything reads it, such as a generated model's outputs.
  static std::shared_ptr<Storage> try_allocate_uninitialized(std::size_t bytes);
  static std::shared_ptr<Storage> borrow(void* data, std::size_t bytes,
                                         std::shared_ptr<const void> keep_alive = {});

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  std::byte* data() const noexcept { return data_; }
  std::size_t bytes() const noexcept { return bytes_; }
  bool owned() const noexcept { return owned_; }

 private:
  Storage(std::byte* data, std::size_t bytes, bool owned, std::shared_ptr<const void> keep_alive);
  static std::shared_ptr<Storage> try_allocate_impl(std::size_t bytes, bool zeroed);

  std::byte* data_;
  std::size_t bytes_;
  bool owned_;
  std::shared_ptr<const void> keep_alive_;
};

// ---------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------

// A strided view of a Storage, as cl-waffe2's AbstractTensor without the graph
// slots: dtype, rank, visible shape, strides (elements), initial offset
// (elements) and the shared storage. Copying a Tensor copies the handle, not
// the data; every view operation below shares the storage and never copies
// (except contiguous(), clone() and reshape_or_copy(), which say so).
//
// Like std::shared_ptr, constness is shallow: a const Tensor& still lets you
// write its elements. Element access methods are templates on the C++ element
// type and check it against dtype().
class Tensor {
 public:
  // An undefined tensor: no storage, rank 0. defined() is false.
  Tensor() = default;
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  // Copies the sizes and strides of o's rank only (entries past the rank
  // mean nothing): `y = model.forward(x)[0]` on a 16-float model spent 2 ns
  // of its 33 storing the two 64-byte arrays in full.
  Tensor& operator=(const Tensor& o) noexcept {
    storage_ = o.storage_;
    dtype_ = o.dtype_;
    rank_ = o.rank_;
    offset_ = o.offset_;
    for (int i = 0; i < o.rank_; ++i) {
      shape_[i] = o.shape_[i];
      strides_[i] = o.strides_[i];
    }
    return *this;
  }

  // --- factories -----------------------------------------------------------
  // Owned, contiguous (row-major) and zero-filled: the storage is always
  // zero-initialised, so empty() and zeros() give the same result.
  static Tensor empty(DType dtype, const Shape& shape);
  static Tensor zeros(DType dtype, const Shape& shape);
  // empty() for builds without exceptions: the tensor in `out`, or the error
  // (RankMismatch, InvalidArgument, SizeOverflow, OutOfMemory) as a Status.
  static Status try_empty(DType dtype, const Shape& shape, Tensor& out);
  // try_empty() whose elements are not initialised (not zeroed): for a
  // tensor that is written in full before it is read. Generated models
  // allocate their outputs with it.
  static Status try_uninitialized(DType dtype, const Shape& shape, Tensor& out);
  // Every element set to `value` converted to dtype; throws InvalidArgument if
  // an integer dtype cannot represent it.
  static Tensor full(DType dtype, const Shape& shape, double value);

  // Copies `values` (row-major, values.size() == numel) into a new tensor.
  template <class E>
  static Tensor from_data(const Shape& shape, std::vector<E> values);

  // Wraps user memory without copying or taking ownership; the caller keeps
  // `ptr` alive as long as the tensor (and its views) are used. Strides are in
  // elements and may be zero or negative; default is row-major contiguous.
  // A pointer to const is accepted for inputs; the tensor does not enforce
  // constness, so do not write through it.
  template <class E>
  static Tensor borrow(E* ptr, const Shape& shape);
  template <class E>
  static Tensor borrow(E* ptr, const Shape& shape, const Shape& strides);

  // A rank-0 tensor holding one value.
  template <class E>
  static Tensor scalar(E value);

  // --- queries -------------------------------------------------------------
  bool defined() const noexcept { return storage_ != nullptr; }
  DType dtype() const noexcept { return dtype_; }
  int rank() const noexcept { return rank_; }
  Shape shape() const { return Shape(shape_.begin(), shape_.begin() + rank_); }
  Shape strides() const { return Shape(strides_.begin(), strides_.begin() + rank_); }
  // Size and stride of one axis; negative axes count from the end.
  std::int64_t dim(int axis) const;
  std::int64_t stride(int axis) const;
  std::int64_t offset() const noexcept { return offset_; }
  std::int64_t numel() const noexcept;
  std::size_t nbytes() const noexcept { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  // Row-major with no gaps. Dimensions of size 1 may have any stride, and a
  // tensor without elements is contiguous.
  bool is_contiguous() const noexcept;
  const std::shared_ptr<Storage>& storage() const noexcept { return storage_; }

  // Pointer to the first element (storage base + offset). Throws NullBuffer for
  // an undefined tensor and DTypeMismatch if E is not the element type.
  template <class E>
  E* data() const {
    check_dtype(dtype_of_v<E>, "data");
    return reinterpret_cast<E*>(raw_data());
  }
  // The same pointer, untyped.
  void* raw_data() const {
    if (!storage_) [[unlikely]] fail_undefined();
    return storage_->data() + offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
  }

  // Bounds-checked element access: one index per axis, each in [0, size).
  template <class E>
  E& at(std::initializer_list<std::int64_t> index) const {
    return at<E>(std::span<const std::int64_t>(index.begin(), index.size()));
  }
  template <class E>
  E& at(std::span<const std::int64_t> index) const {
    E* base = data<E>();
    return base[element_offset(index)];
  }
  // The only element of a tensor with numel() == 1, of any rank.
  template <class E>
  E item() const {
    check_single_element();
    return *data<E>();
  }

  // Typed strided view for kernels. Throws DTypeMismatch / RankMismatch when
  // E or R differ from the tensor's dtype and rank.
  template <class E, int R>
  View<E, R> view() const {
    static_assert(!std::is_const_v<E>, "use cview<T, R>() for a read-only view");
    check_rank(R, "view");
    View<E, R> v;
    v.data = data<E>();
    for (int i = 0; i < R; ++i) {
      v.shape[i] = shape_[i];
      v.strides[i] = strides_[i];
    }
    return v;
  }
  template <class E, int R>
  View<const E, R> cview() const {
    return view<std::remove_const_t<E>, R>();
  }

  TensorRef ref() const;
  // True if ref() would return `r`: the same first-element pointer, dtype,
  // shape and strides (false for an undefined tensor). Inline and without
  // allocation: how a generated model sees in a few compares that the
  // tensors of this call are the ones it is bound to (forward_into()).
  bool matches(const TensorRef& r) const noexcept {
    return has_layout(r) && r.data == storage_->data() + offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
  }
  // The same dtype, shape and strides as `r`, whatever the memory (false for
  // an undefined tensor or a null `r`).
  bool has_layout(const TensorRef& r) const noexcept {
    if (!storage_ || r.data == nullptr || r.dtype != dtype_ || r.rank != rank_) return false;
    for (int i = 0; i < rank_; ++i)
      if (r.shape[i] != shape_[i] || r.strides[i] != strides_[i]) return false;
    return true;
  }

  // --- views (share storage, never copy) ------------------------------------
  // Python slicing along one axis: start/stop may be negative (counted from
  // the end), out-of-range values are clamped, nullopt means "from the
  // beginning"/"to the end" in the direction of `step`, which may be negative
  // but not zero. t.slice(0, std::nullopt, std::nullopt, -1) reverses axis 0.
  Tensor slice(int axis, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
               std::int64_t step = 1) const;
  // NumPy broadcasting: dimensions are matched from the right; a size-1 (or
  // missing) dimension repeats with stride 0, any other must be equal.
  Tensor broadcast_to(const Shape& shape) const;
  // Result axis i is this tensor's axis perm[i].
  Tensor permute(const std::vector<int>& perm) const;
  Tensor transpose(int axis_a, int axis_b) const;
  // Swaps the last two axes.
  Tensor T() const;
  // A view with the same elements in row-major order and another shape; one
  // entry may be -1 and is inferred. Throws InvalidView when the strides do
  // not allow a view (e.g. reshaping a transposed matrix to 1-D).
  Tensor reshape(const Shape& shape) const;
  // reshape(), falling back to a contiguous copy when a view is impossible.
  Tensor reshape_or_copy(const Shape& shape) const;
  // Removes one axis of size 1 / every axis of size 1.
  Tensor squeeze(int axis) const;
  Tensor squeeze() const;
  // Inserts an axis of size 1 before `axis` (axis == rank appends).
  Tensor unsqueeze(int axis) const;

  // --- copies --------------------------------------------------------------
  // This tensor if already contiguous, otherwise a contiguous copy.
  Tensor contiguous() const;
  // Always a new contiguous copy with its own storage.
  Tensor clone() const;
  // Writes src's elements into this tensor's (same dtype and shape).
  void copy_from(const Tensor& src) const;
  // Sets every element to `value` converted to dtype (see full()).
  void fill(double value) const;

  // cl-waffe2 style print, eliding the middle of long axes with "~" / "...".
  std::string to_string() const;

 private:
  friend class Arena;

  static Tensor make(DType dtype, const Shape& shape, std::shared_ptr<Storage> storage,
                     std::int64_t offset);
  static Tensor borrow_raw(void* ptr, DType dtype, const Shape& shape, const Shape* strides);

  [[noreturn]] static void fail_undefined();
  void check_dtype(DType wanted, const char* what) const;
  void check_rank(int wanted, const char* what) const;
  void check_single_element() const;
  std::int64_t element_offset(std::span<const std::int64_t> index) const;

  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::f32;
  int rank_ = 0;
  std::array<std::int64_t, kMaxRank> shape_{};
  std::array<std::int64_t, kMaxRank> strides_{};
  std::int64_t offset_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// True if the elements of `a` and `b` may share memory: their byte ranges
// (from lowest to highest reachable element) overlap. Used to reject an output
// buffer that aliases an input (ErrorCode::AliasedBuffer).
bool may_alias(const Tensor& a, const Tensor& b);

template <class E>
Tensor Tensor::from_data(const Shape& shape, std::vector<E> values) {
  Tensor t = empty(dtype_of_v<E>, shape);
  if (static_cast<std::int64_t>(values.size()) != t.numel()) {
    fail(ErrorCode::ShapeMismatch, "from_data got " + std::to_string(values.size()) +
                                              " values for shape " + shape_to_string(shape) +
                                              ", expected " + std::to_string(t.numel()));
  }
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(E));
  return t;
}

template <class E>
Tensor Tensor::borrow(E* ptr, const Shape& shape) {
  return borrow_raw(const_cast<std::remove_const_t<E>*>(ptr), dtype_of_v<E>, shape, nullptr);
}

template <class E>
Tensor Tensor::borrow(E* ptr, const Shape& shape, const Shape& strides) {
  return borrow_raw(const_cast<std::remove_const_t<E>*>(ptr), dtype_of_v<E>, shape, &strides);
}

template <class E>
Tensor Tensor::scalar(E value) {
  Tensor t = empty(dtype_of_v<E>, {});
  *t.data<E>() = value;
  return t;
}

// ---------------------------------------------------------------------------
// Arena
// ---------------------------------------------------------------------------

// One 64-byte-aligned, zero-initialised block that memory planning carves
// into tensors at fixed byte offsets. Tensors keep the block they were made
// from alive: after reserve() grows the arena (a new block, old contents
// copied), tensors issued earlier still point into the old block, so re-issue
// them from the arena.
class Arena {
 public:
  Arena() = default;
  explicit Arena(std::size_t bytes);

  std::size_t capacity() const noexcept;
  std::byte* data() const noexcept;
  // Ensures capacity() >= bytes; never shrinks.
  void reserve(std::size_t bytes);
  // A contiguous tensor over bytes [byte_offset, byte_offset + nbytes). The
  // offset must be a multiple of the dtype size and the range must fit.
  Tensor tensor(DType dtype, const Shape& shape, std::size_t byte_offset) const;

 private:
  std::shared_ptr<Storage> block_;
};

// ---------------------------------------------------------------------------
// Random numbers
// ---------------------------------------------------------------------------

// SplitMix64 (Steele, Lea, Flood 2014; Vigna's reference code): adds
// 0x9E3779B97F4A7C15 to `state` and returns a mix of the new state.
// Seeding only; see Rng.
std::uint64_t splitmix64(std::uint64_t& state);

// xoshiro256** 1.0 (Blackman & Vigna 2018), seeded by filling its four words
// with the first four splitmix64 outputs from `seed`. All arithmetic is on
// 64-bit unsigned integers, so next_u64() and uniform01() give the same
// sequence on every platform and compiler.
//
//  - uniform01(): (next_u64() >> 11) * 2^-53, in [0, 1), exactly.
//  - uniform(lo, hi): lo + (hi - lo) * uniform01().
//  - normal(mean, std): Box–Muller on two uniforms u1, u2:
//      r = sqrt(-2 ln(1 - u1)), z0 = r cos(2 pi u2), z1 = r sin(2 pi u2);
//    returns mean + std * z0 and keeps z1 for the next call. Reproducible
//    wherever std::log/sqrt/cos/sin agree (they do across glibc builds; other
//    C libraries may differ in the last bit).
class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) { this->seed(seed); }
  void seed(std::uint64_t seed);

  std::uint64_t next_u64();
  double uniform01();
  double uniform(double lo, double hi);
  double normal(double mean = 0.0, double std = 1.0);

 private:
  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// Fill `t` element by element in row-major order of its visible shape (so the
// values do not depend on its strides). f32 values are kept below `hi`; integer
// dtypes get floor(uniform(lo, hi)) / round-to-nearest normals.
void fill_uniform(const Tensor& t, double lo, double hi, Rng& rng);
void fill_normal(const Tensor& t, double mean, double std, Rng& rng);

}  // namespace wfgen::rt

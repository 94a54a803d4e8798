// Storage, Tensor factories, queries, views and copies.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "internal.hpp"
#include "wfgen/runtime.hpp"

// Large buffers come from mmap on Linux; not under AddressSanitizer, which
// checks only what goes through its allocator.
#if defined(__SANITIZE_ADDRESS__)
#define WFGEN_RT_MAP_LARGE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WFGEN_RT_MAP_LARGE 0
#endif
#endif
#if !defined(WFGEN_RT_MAP_LARGE) && defined(__linux__)
#define WFGEN_RT_MAP_LARGE 1
#include <sys/mman.h>
#endif
#ifndef WFGEN_RT_MAP_LARGE
#define WFGEN_RT_MAP_LARGE 0
#endif

namespace wfgen::rt {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

std::string dims_str(const std::int64_t* dims, int rank) {
  return shape_to_string(std::span<const std::int64_t>(dims, static_cast<std::size_t>(rank)));
}

// a * b, or SizeOverflow when it does not fit in int64 (a shape whose
// element count overflows cannot be allocated or indexed).
std::int64_t mul_checked(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    fail(ErrorCode::SizeOverflow,
                std::string(what) + ": " + str(a) + " * " + str(b) + " overflows int64");
  }
  return r;
}

// Maps a possibly negative axis into [0, rank).
int normalize_axis(int axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank) {
    fail(ErrorCode::OutOfBounds,
                std::string(what) + " axis " + std::to_string(axis) + " is out of range for rank " +
                    std::to_string(rank) + ", expected " + std::to_string(-rank) + ".." +
                    std::to_string(rank - 1));
  }
  return axis < 0 ? axis + rank : axis;
}

// Lowest and highest element offsets (relative to the first element) that a
// strided view reaches; both 0 for a view without elements. SizeOverflow
// when the extent does not fit in int64 (huge strides of a borrowed pointer).
std::pair<std::int64_t, std::int64_t> offset_extent(int rank, const std::int64_t* shape,
                                                    const std::int64_t* strides) {
  std::int64_t lo = 0, hi = 0;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] == 0) return {0, 0};
  }
  for (int i = 0; i < rank; ++i) {
    std::int64_t reach = 0;
    std::int64_t& side = strides[i] < 0 ? lo : hi;
    if (__builtin_mul_overflow(strides[i], shape[i] - 1, &reach) || __builtin_add_overflow(side, reach, &side)) {
      fail(ErrorCode::SizeOverflow, "a view of shape " + dims_str(shape, rank) + " with strides " + dims_str(strides, rank) +
                                        " spans more elements than fit in int64");
    }
  }
  return {lo, hi};
}

// torch's computeStride / numpy's _attempt_nocopy_reshape: walks both shapes
// from the innermost dimension, grouping old dimensions into chunks that are
// contiguous with respect to each other; each chunk must be split exactly by
// a run of new dimensions. Returns false when a new dimension would have to
// span two chunks, i.e. the elements are not evenly spaced for it.
bool view_strides(int old_rank, const std::int64_t* old_shape, const std::int64_t* old_strides,
                  const Shape& new_shape, std::int64_t* new_strides) {
  const int new_rank = static_cast<int>(new_shape.size());
  std::int64_t numel = 1;
  for (int i = 0; i < old_rank; ++i) numel *= old_shape[i];
  if (numel == 0 || old_rank == 0) {
    // No elements (any strides describe them) or a single element: row-major.
    std::int64_t s = 1;
    for (int i = new_rank - 1; i >= 0; --i) {
      new_strides[i] = s;
      s *= std::max<std::int64_t>(new_shape[i], 1);
    }
    return true;
  }
  int view_d = new_rank - 1;
  std::int64_t chunk_base_stride = old_strides[old_rank - 1];
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (int tensor_d = old_rank - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    const bool chunk_ends =
        tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return false;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  return view_d == -1;
}

// Element-wise copy between two views of the same dtype and shape.
void copy_elements(const Tensor& dst, const Tensor& src) {
  if (dst.is_contiguous() && src.is_contiguous()) {
    if (dst.nbytes()) std::memmove(dst.raw_data(), src.raw_data(), dst.nbytes());
    return;
  }
  const Shape shape = dst.shape(), ds = dst.strides(), ss = src.strides();
  visit_dtype(dst.dtype(), [&]<class E>(std::type_identity<E>) {
    E* d = static_cast<E*>(dst.raw_data());
    const E* s = static_cast<const E*>(src.raw_data());
    internal::for_each_offset_pair(dst.rank(), shape.data(), ds.data(), ss.data(),
                                   [&](std::int64_t od, std::int64_t os) { d[od] = s[os]; });
  });
}

}  // namespace

namespace internal {

Status numel_status(const Shape& shape, const char* what, std::int64_t& n) {
  if (shape.size() > static_cast<std::size_t>(kMaxRank)) {
    return Status(ErrorCode::RankMismatch, std::string(what) + " got shape " + shape_to_string(shape) + " of rank " +
                                               std::to_string(shape.size()) + ", expected at most rank " +
                                               std::to_string(kMaxRank));
  }
  n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) {
      return Status(ErrorCode::InvalidArgument, std::string(what) + " got shape " + shape_to_string(shape) + ", expected sizes >= 0");
    }
  }
  for (std::int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) {
      return Status(ErrorCode::SizeOverflow, std::string(what) + " got shape " + shape_to_string(shape) +
                                                 ": its element count overflows int64");
    }
  }
  return {};
}

std::int64_t checked_numel(const Shape& shape, const char* what) {
  std::int64_t n = 0;
  if (Status st = numel_status(shape, what, n); !st.ok()) fail(st);
  return n;
}

}  // namespace internal

using internal::checked_numel;

// --- Storage ----------------------------------------------------------------

Storage::Storage(std::byte* data, std::size_t bytes, bool owned,
                 std::shared_ptr<const void> keep_alive)
    : data_(data), bytes_(bytes), owned_(owned), keep_alive_(std::move(keep_alive)) {}

namespace {

// Bytes a buffer of `bytes` occupies: whole cache lines (at least one), so a
// zero-byte tensor still has a distinct, aligned address and vector loads
// never cross the end. The caller checked that this does not overflow.
std::size_t rounded_bytes(std::size_t bytes) {
  return std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

#if WFGEN_RT_MAP_LARGE
// Large buffers are mapped straight from the kernel, aligned to 2 MiB and
// marked for transparent huge pages (as PyTorch's CPU allocator does). A
// model's forward() returns a fresh output every call: through malloc, a
// 64 MiB one costs 16384 page faults (each a trap to the hypervisor on a
// virtual machine) plus a memset; mapped, 32 faults on pages the kernel
// hands over zeroed. Which path a buffer took follows from its size alone.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kLargeBuffer = std::size_t{4} << 20;

bool is_large(std::size_t rounded) { return rounded >= kLargeBuffer; }
std::size_t mapped_bytes(std::size_t rounded) { return (rounded + kHugePage - 1) / kHugePage * kHugePage; }

// Zeroed memory of mapped_bytes(rounded) bytes at a 2 MiB boundary, or null.
void* map_large(std::size_t rounded) {
  const std::size_t length = mapped_bytes(rounded);
  if (length > std::numeric_limits<std::size_t>::max() - kHugePage) return nullptr;
  // Map one huge page more and unmap what lies before and after the aligned part.
  void* p = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > base) ::munmap(p, aligned - base);
  if (const std::size_t tail = base + kHugePage - aligned; tail > 0) ::munmap(reinterpret_cast<void*>(aligned + length), tail);
#ifdef MADV_HUGEPAGE
  ::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // a hint: failing is harmless
#endif
  return reinterpret_cast<void*>(aligned);
}
#endif

}  // namespace

Storage::~Storage() {
  if (!owned_) return;
#if WFGEN_RT_MAP_LARGE
  if (const std::size_t rounded = rounded_bytes(bytes_); is_large(rounded)) {
    ::munmap(data_, mapped_bytes(rounded));
    return;
  }
#endif
  ::operator delete(data_, std::align_val_t{kAlignment});
}

std::shared_ptr<Storage> Storage::try_allocate(std::size_t bytes) { return try_allocate_impl(bytes, true); }

std::shared_ptr<Storage> Storage::try_allocate_uninitialized(std::size_t bytes) { return try_allocate_impl(bytes, false); }

std::shared_ptr<Storage> Storage::try_allocate_impl(std::size_t bytes, bool zeroed) {
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max() - kAlignment;
  if (bytes > kMax) return nullptr;
  const std::size_t rounded = rounded_bytes(bytes);
  void* p = nullptr;
#if WFGEN_RT_MAP_LARGE
  if (is_large(rounded)) {
    p = map_large(rounded);  // already zeroed
    if (p == nullptr) return nullptr;
  }
#endif
  if (p == nullptr) {
    p = ::operator new(rounded, std::align_val_t{kAlignment}, std::nothrow);
    if (p == nullptr) return nullptr;
    if (zeroed) std::memset(p, 0, rounded);
  }
  // From here on the Storage owns p; if it cannot be made, free p the way its destructor would.
  auto* storage = new (std::nothrow) Storage(static_cast<std::byte*>(p), bytes, true, {});
  if (storage == nullptr) {
    Storage owner(static_cast<std::byte*>(p), bytes, true, {});
    return nullptr;
  }
  return std::shared_ptr<Storage>(storage);  // deletes `storage` (and so p) if it cannot allocate its count
}

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes) {
  std::shared_ptr<Storage> s = try_allocate(bytes);
  if (!s) fail(ErrorCode::OutOfMemory, "cannot allocate " + std::to_string(bytes) + " bytes");
  return s;
}

std::shared_ptr<Storage> Storage::borrow(void* data, std::size_t bytes,
                                         std::shared_ptr<const void> keep_alive) {
  if (data == nullptr && bytes != 0) {
    fail(ErrorCode::NullBuffer,
                "cannot borrow a null pointer for " + std::to_string(bytes) + " bytes");
  }
  return std::shared_ptr<Storage>(
      new Storage(static_cast<std::byte*>(data), bytes, false, std::move(keep_alive)));
}

// --- Tensor: factories --------------------------------------------------------

Tensor Tensor::make(DType dtype, const Shape& shape, std::shared_ptr<Storage> storage,
                    std::int64_t offset) {
  Tensor t;
  t.dtype_ = dtype;
  t.rank_ = static_cast<int>(shape.size());
  std::int64_t s = 1;
  for (int i = t.rank_ - 1; i >= 0; --i) {
    t.shape_[i] = shape[i];
    t.strides_[i] = s;
    s *= std::max<std::int64_t>(shape[i], 1);
  }
  t.storage_ = std::move(storage);
  t.offset_ = offset;
  return t;
}

namespace {

Status try_new_tensor(DType dtype, const Shape& shape, bool zeroed, Tensor& out,
                      Tensor (*make)(DType, const Shape&, std::shared_ptr<Storage>)) {
  std::int64_t n = 0, bytes = 0;
  if (Status st = internal::numel_status(shape, "empty", n); !st.ok()) return st;
  if (__builtin_mul_overflow(n, static_cast<std::int64_t>(dtype_size(dtype)), &bytes)) {
    return Status(ErrorCode::SizeOverflow, "empty got shape " + shape_to_string(shape) + " of dtype " + dtype_name(dtype) +
                                               ": its byte count overflows int64");
  }
  std::shared_ptr<Storage> storage = zeroed ? Storage::try_allocate(static_cast<std::size_t>(bytes))
                                            : Storage::try_allocate_uninitialized(static_cast<std::size_t>(bytes));
  if (!storage) return Status(ErrorCode::OutOfMemory, "cannot allocate " + std::to_string(bytes) + " bytes");
  out = make(dtype, shape, std::move(storage));
  return {};
}

}  // namespace

Status Tensor::try_uninitialized(DType dtype, const Shape& shape, Tensor& out) {
  return try_new_tensor(dtype, shape, false, out, [](DType d, const Shape& s, std::shared_ptr<Storage> st) { return make(d, s, std::move(st), 0); });
}

Status Tensor::try_empty(DType dtype, const Shape& shape, Tensor& out) {
  return try_new_tensor(dtype, shape, true, out, [](DType d, const Shape& s, std::shared_ptr<Storage> st) { return make(d, s, std::move(st), 0); });
}

Tensor Tensor::empty(DType dtype, const Shape& shape) {
  Tensor t;
  if (Status st = try_empty(dtype, shape, t); !st.ok()) fail(st);
  return t;
}

Tensor Tensor::zeros(DType dtype, const Shape& shape) {
  checked_numel(shape, "zeros");  // so errors name the function the user called
  return empty(dtype, shape);
}

Tensor Tensor::full(DType dtype, const Shape& shape, double value) {
  checked_numel(shape, "full");
  Tensor t = empty(dtype, shape);
  t.fill(value);
  return t;
}

Tensor Tensor::borrow_raw(void* ptr, DType dtype, const Shape& shape, const Shape* strides) {
  const std::int64_t n = checked_numel(shape, "borrow");
  Tensor t = make(dtype, shape, nullptr, 0);
  if (strides) {
    if (strides->size() != shape.size()) {
      fail(ErrorCode::RankMismatch, "borrow got strides " + shape_to_string(*strides) +
                                               " for shape " + shape_to_string(shape) +
                                               ", expected " + std::to_string(shape.size()) +
                                               " strides");
    }
    std::copy(strides->begin(), strides->end(), t.strides_.begin());
  }
  if (ptr == nullptr && n != 0) {
    fail(ErrorCode::NullBuffer,
                "borrow got a null pointer for shape " + shape_to_string(shape));
  }
  // The storage spans every reachable element; with negative strides it
  // starts below `ptr`, which then sits at a positive offset.
  const auto [lo, hi] = offset_extent(t.rank_, t.shape_.data(), t.strides_.data());
  const auto esize = static_cast<std::int64_t>(dtype_size(dtype));
  const std::int64_t bytes = n == 0 ? 0 : mul_checked(hi - lo + 1, esize, "borrow");
  std::byte* base = static_cast<std::byte*>(ptr) + lo * esize;
  t.storage_ = Storage::borrow(n == 0 ? ptr : base, static_cast<std::size_t>(bytes));
  t.offset_ = n == 0 ? 0 : -lo;
  return t;
}

// --- Tensor: queries ----------------------------------------------------------

std::int64_t Tensor::dim(int axis) const { return shape_[normalize_axis(axis, rank_, "dim")]; }

std::int64_t Tensor::stride(int axis) const {
  return strides_[normalize_axis(axis, rank_, "stride")];
}

std::int64_t Tensor::numel() const noexcept {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= shape_[i];
  return n;
}

bool Tensor::is_contiguous() const noexcept {
  if (numel() == 0) return true;
  std::int64_t expected = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void Tensor::fail_undefined() { fail(ErrorCode::NullBuffer, "tensor is undefined (it has no storage)"); }

void Tensor::check_dtype(DType wanted, const char* what) const {
  if (!storage_) fail_undefined();
  if (wanted != dtype_) {
    fail(ErrorCode::DTypeMismatch, std::string(what) + " asked for dtype " +
                                              dtype_name(wanted) + " of a tensor of dtype " +
                                              dtype_name(dtype_) + ", expected " +
                                              dtype_name(dtype_));
  }
}

void Tensor::check_rank(int wanted, const char* what) const {
  if (wanted != rank_) {
    fail(ErrorCode::RankMismatch, std::string(what) + " asked for rank " +
                                             std::to_string(wanted) + " of a tensor of shape " +
                                             dims_str(shape_.data(), rank_) + ", expected rank " +
                                             std::to_string(rank_));
  }
}

void Tensor::check_single_element() const {
  if (numel() != 1) {
    fail(ErrorCode::ShapeMismatch, "item needs a tensor with one element, got shape " +
                                              dims_str(shape_.data(), rank_));
  }
}

std::int64_t Tensor::element_offset(std::span<const std::int64_t> index) const {
  if (static_cast<int>(index.size()) != rank_) {
    fail(ErrorCode::RankMismatch, "at got " + std::to_string(index.size()) +
                                             " indices for a tensor of shape " +
                                             dims_str(shape_.data(), rank_) + ", expected " +
                                             std::to_string(rank_));
  }
  std::int64_t off = 0;
  for (int i = 0; i < rank_; ++i) {
    if (index[i] < 0 || index[i] >= shape_[i]) {
      fail(ErrorCode::OutOfBounds, "index " + str(index[i]) + " is out of bounds for axis " +
                                              std::to_string(i) + " of shape " +
                                              dims_str(shape_.data(), rank_) + ", expected 0.." +
                                              str(shape_[i] - 1));
    }
    off += index[i] * strides_[i];
  }
  return off;
}

TensorRef Tensor::ref() const {
  TensorRef r{};
  r.data = raw_data();
  r.dtype = dtype_;
  r.rank = rank_;
  for (int i = 0; i < rank_; ++i) {
    r.shape[i] = shape_[i];
    r.strides[i] = strides_[i];
  }
  return r;
}

// --- Tensor: views ------------------------------------------------------------

Tensor Tensor::slice(int axis, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                     std::int64_t step) const {
  const int a = normalize_axis(axis, rank_, "slice");
  if (step == 0 || step == std::numeric_limits<std::int64_t>::min()) {
    fail(ErrorCode::InvalidArgument,
                "slice step " + str(step) + " is invalid, expected a nonzero step");
  }
  // CPython's PySlice_AdjustIndices, with nullopt as Python's None.
  const std::int64_t len = shape_[a];
  auto adjust = [&](std::int64_t v) {
    if (v < 0) {
      v += len;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= len) {
      v = step < 0 ? len - 1 : len;
    }
    return v;
  };
  const std::int64_t b = start ? adjust(*start) : (step < 0 ? len - 1 : 0);
  const std::int64_t e = stop ? adjust(*stop) : (step < 0 ? -1 : len);
  std::int64_t n = 0;
  if (step > 0 && b < e) n = (e - b - 1) / step + 1;
  if (step < 0 && e < b) n = (b - e - 1) / (-step) + 1;

  Tensor t = *this;
  t.shape_[a] = n;
  t.strides_[a] = mul_checked(strides_[a], step, "slice");
  if (n > 0) t.offset_ = offset_ + b * strides_[a];
  return t;
}

Tensor Tensor::broadcast_to(const Shape& shape) const {
  const int out_rank = static_cast<int>(shape.size());
  checked_numel(shape, "broadcast_to");
  if (out_rank < rank_) {
    fail(ErrorCode::ShapeMismatch, "cannot broadcast shape " +
                                              dims_str(shape_.data(), rank_) + " to " +
                                              shape_to_string(shape) +
                                              ", expected a target of rank " +
                                              std::to_string(rank_) + " or more");
  }
  Tensor t = *this;
  t.rank_ = out_rank;
  const int lead = out_rank - rank_;
  for (int i = 0; i < out_rank; ++i) {
    const int j = i - lead;  // matching axis of this tensor, if any
    t.shape_[i] = shape[i];
    if (j < 0 || (shape_[j] == 1 && shape[i] != 1)) {
      t.strides_[i] = 0;
    } else if (shape_[j] == shape[i]) {
      t.strides_[i] = strides_[j];
    } else {
      fail(ErrorCode::ShapeMismatch,
                  "cannot broadcast shape " + dims_str(shape_.data(), rank_) + " to " +
                      shape_to_string(shape) + ": axis " + std::to_string(j) + " has size " +
                      str(shape_[j]) + ", expected 1 or " + str(shape[i]));
    }
  }
  return t;
}

Tensor Tensor::permute(const std::vector<int>& perm) const {
  auto perm_str = [&] {
    std::string s = "(";
    for (std::size_t i = 0; i < perm.size(); ++i) s += (i ? " " : "") + std::to_string(perm[i]);
    return s + ")";
  };
  if (static_cast<int>(perm.size()) != rank_) {
    fail(ErrorCode::RankMismatch, "permute " + perm_str() + " has " +
                                             std::to_string(perm.size()) +
                                             " axes for a tensor of rank " +
                                             std::to_string(rank_) + ", expected " +
                                             std::to_string(rank_));
  }
  Tensor t = *this;
  bool seen[kMaxRank] = {};
  for (int i = 0; i < rank_; ++i) {
    const int p = normalize_axis(perm[i], rank_, "permute");
    if (seen[p]) {
      fail(ErrorCode::InvalidArgument, "permute " + perm_str() +
                                                  " repeats axis " + std::to_string(p) +
                                                  ", expected a permutation of 0.." +
                                                  std::to_string(rank_ - 1));
    }
    seen[p] = true;
    t.shape_[i] = shape_[p];
    t.strides_[i] = strides_[p];
  }
  return t;
}

Tensor Tensor::transpose(int axis_a, int axis_b) const {
  const int a = normalize_axis(axis_a, rank_, "transpose");
  const int b = normalize_axis(axis_b, rank_, "transpose");
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::T() const {
  if (rank_ < 2) {
    fail(ErrorCode::RankMismatch, "T swaps the last two axes, got shape " +
                                             dims_str(shape_.data(), rank_) +
                                             ", expected rank 2 or more");
  }
  return transpose(rank_ - 2, rank_ - 1);
}

namespace {

// The requested shape with its -1 entry (if any) replaced by the size that
// keeps `numel` elements.
Shape infer_reshape(const Shape& requested, std::int64_t numel, const std::int64_t* old_shape,
                    int old_rank) {
  Shape shape = requested;
  int infer_at = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) {
        fail(ErrorCode::InvalidArgument, "reshape to " + shape_to_string(requested) +
                                                    " has more than one -1, expected at most one");
      }
      infer_at = static_cast<int>(i);
    } else if (shape[i] < 0) {
      fail(ErrorCode::InvalidArgument, "reshape to " + shape_to_string(requested) +
                                                  " has a negative size, expected sizes >= 0 "
                                                  "or a single -1");
    } else {
      known = mul_checked(known, shape[i], "reshape");
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0) {
      fail(ErrorCode::ShapeMismatch,
                  "cannot reshape shape " + dims_str(old_shape, old_rank) + " to " +
                      shape_to_string(requested) + ": the -1 cannot be inferred for " +
                      str(numel) + " elements");
    }
    shape[infer_at] = numel / known;
    known = numel;
  }
  if (known != numel) {
    fail(ErrorCode::ShapeMismatch,
                "cannot reshape shape " + dims_str(old_shape, old_rank) + " (" + str(numel) +
                    " elements) to " + shape_to_string(requested) + " (" + str(known) +
                    " elements), expected the same number of elements");
  }
  checked_numel(shape, "reshape");
  return shape;
}

}  // namespace

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape target = infer_reshape(shape, numel(), shape_.data(), rank_);
  Tensor t = *this;
  t.rank_ = static_cast<int>(target.size());
  std::copy(target.begin(), target.end(), t.shape_.begin());
  if (!view_strides(rank_, shape_.data(), strides_.data(), target, t.strides_.data())) {
    fail(ErrorCode::InvalidView,
                "cannot reshape shape " + dims_str(shape_.data(), rank_) + " with strides " +
                    dims_str(strides_.data(), rank_) + " to " + shape_to_string(target) +
                    " without copying, expected evenly spaced elements; use reshape_or_copy");
  }
  return t;
}

Tensor Tensor::reshape_or_copy(const Shape& shape) const {
  const Shape target = infer_reshape(shape, numel(), shape_.data(), rank_);
  Tensor t = *this;
  t.rank_ = static_cast<int>(target.size());
  std::copy(target.begin(), target.end(), t.shape_.begin());
  if (view_strides(rank_, shape_.data(), strides_.data(), target, t.strides_.data())) return t;
  return clone().reshape(target);
}

Tensor Tensor::squeeze(int axis) const {
  const int a = normalize_axis(axis, rank_, "squeeze");
  if (shape_[a] != 1) {
    fail(ErrorCode::ShapeMismatch, "squeeze axis " + std::to_string(axis) + " of shape " +
                                              dims_str(shape_.data(), rank_) + " has size " +
                                              str(shape_[a]) + ", expected 1");
  }
  Tensor t = *this;
  for (int i = a; i + 1 < rank_; ++i) {
    t.shape_[i] = shape_[i + 1];
    t.strides_[i] = strides_[i + 1];
  }
  t.shape_[rank_ - 1] = 0;
  t.strides_[rank_ - 1] = 0;
  t.rank_ = rank_ - 1;
  return t;
}

Tensor Tensor::squeeze() const {
  Tensor t = *this;
  t.shape_.fill(0);
  t.strides_.fill(0);
  t.rank_ = 0;
  for (int i = 0; i < rank_; ++i) {
    if (shape_[i] == 1) continue;
    t.shape_[t.rank_] = shape_[i];
    t.strides_[t.rank_] = strides_[i];
    ++t.rank_;
  }
  return t;
}

Tensor Tensor::unsqueeze(int axis) const {
  if (rank_ == kMaxRank) {
    fail(ErrorCode::RankMismatch, "unsqueeze of shape " + dims_str(shape_.data(), rank_) +
                                             " exceeds the maximum rank " +
                                             std::to_string(kMaxRank));
  }
  const int a = normalize_axis(axis, rank_ + 1, "unsqueeze");
  Tensor t = *this;
  for (int i = rank_; i > a; --i) {
    t.shape_[i] = shape_[i - 1];
    t.strides_[i] = strides_[i - 1];
  }
  // Any stride is valid for a size-1 axis; this one keeps the tensor
  // row-major-looking for code that inspects strides.
  t.shape_[a] = 1;
  t.strides_[a] = a < rank_ ? shape_[a] * strides_[a] : 1;
  t.rank_ = rank_ + 1;
  return t;
}

// --- Tensor: copies -----------------------------------------------------------

Tensor Tensor::contiguous() const {
  if (!storage_) fail_undefined();
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  if (!storage_) fail_undefined();
  Tensor t = empty(dtype_, shape());
  copy_elements(t, *this);
  return t;
}

void Tensor::copy_from(const Tensor& src) const {
  if (!storage_ || !src.storage_) {
    fail(ErrorCode::NullBuffer, "copy_from needs two defined tensors");
  }
  if (src.dtype_ != dtype_) {
    fail(ErrorCode::DTypeMismatch, std::string("copy_from got a source of dtype ") +
                                              dtype_name(src.dtype_) + ", expected " +
                                              dtype_name(dtype_));
  }
  if (src.rank_ != rank_ || !std::equal(shape_.begin(), shape_.begin() + rank_, src.shape_.begin())) {
    fail(ErrorCode::ShapeMismatch, "copy_from got a source of shape " +
                                              dims_str(src.shape_.data(), src.rank_) +
                                              ", expected " + dims_str(shape_.data(), rank_));
  }
  // Overlapping views (e.g. a tensor and its reversal) would read elements
  // already overwritten; copy the source aside first.
  if (may_alias(*this, src) && !(is_contiguous() && src.is_contiguous())) {
    copy_elements(*this, src.clone());
  } else {
    copy_elements(*this, src);
  }
}

void Tensor::fill(double value) const {
  const Shape shape = this->shape(), strides = this->strides();
  visit_dtype(dtype(), [&]<class E>(std::type_identity<E>) {
    const E v = internal::convert_checked<E>(value, "fill");
    E* d = static_cast<E*>(raw_data());
    internal::for_each_offset(rank_, shape.data(), strides.data(), [&](std::int64_t o) { d[o] = v; });
  });
}

bool may_alias(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.numel() == 0 || b.numel() == 0) return false;
  auto range = [](const Tensor& t) {
    const Shape shape = t.shape(), strides = t.strides();
    const auto [lo, hi] = offset_extent(t.rank(), shape.data(), strides.data());
    const auto esize = static_cast<std::int64_t>(dtype_size(t.dtype()));
    const auto base = reinterpret_cast<std::uintptr_t>(t.raw_data());
    return std::pair{base + lo * esize, base + (hi + 1) * esize};
  };
  const auto [a_lo, a_hi] = range(a);
  const auto [b_lo, b_hi] = range(b);
  return a_lo < b_hi && b_lo < a_hi;
}

}  // namespace wfgen::rt

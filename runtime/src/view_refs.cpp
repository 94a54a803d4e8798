// The TensorRefs of a generated model's tensor table (model_support.hpp):
// contiguous arena tensors and the views over them, checked (sizes, ranks,
// overflow), as throwing *_ref functions and as RefBuilder, which keeps
// the first error as a Status; and the checked sizes the other parts of
// model support share (internal.hpp).
#include "wfgen/model_support.hpp"

#include "internal.hpp"

#include <algorithm>
#include <climits>
#include <string>

namespace wfgen::rt {

namespace internal {

std::string shape_text(std::initializer_list<std::int64_t> shape) {
  std::string s = "(";
  int k = 0;
  for (auto d : shape) s += (k++ ? " " : "") + (d == Size::kInvalid ? std::string("?") : std::to_string(d));
  return s + ")";
}

// Element count and bytes of `shape`, or the error: a size computed from
// the inputs overflowed (Size::kInvalid), a negative size, or a count or
// byte size beyond kMaxBytes.
Status checked_bytes(DType dtype, std::initializer_list<std::int64_t> shape, std::int64_t& numel, std::int64_t& bytes) {
  numel = 1;
  for (auto d : shape) {
    if (d == Size::kInvalid) {
      return Status(ErrorCode::SizeOverflow, "a tensor of shape " + shape_text(shape) +
                                                 ": a size computed from the inputs' sizes does not fit in int64 (or divides by zero)");
    }
    if (d < 0) {
      return Status(ErrorCode::InvalidArgument, "a tensor of shape " + shape_text(shape) + " has a negative size, expected sizes >= 0");
    }
  }
  for (auto d : shape) {
    if (__builtin_mul_overflow(numel, d, &numel)) {
      return Status(ErrorCode::SizeOverflow, "a tensor of shape " + shape_text(shape) + " has more elements than fit in int64");
    }
  }
  const auto esize = static_cast<std::int64_t>(dtype_size(dtype));
  if (__builtin_mul_overflow(numel, esize, &bytes) || bytes > kMaxBytes) {
    return Status(ErrorCode::SizeOverflow, "a tensor of shape " + shape_text(shape) + " and dtype " + dtype_name(dtype) + " needs " +
                                               std::to_string(numel) + " * " + std::to_string(esize) +
                                               " bytes, more than fit in the address space (PTRDIFF_MAX)");
  }
  return {};
}

std::string dims_str(const std::int64_t* d, int n) {
  std::string s = "(";
  for (int k = 0; k < n; ++k) s += (k ? " " : "") + (d[k] == Size::kInvalid ? std::string("?") : std::to_string(d[k]));
  return s + ")";
}

}  // namespace internal

using internal::checked_bytes;
using internal::dims_str;
using internal::shape_text;

namespace {

TensorRef empty_ref(void* data, DType dtype, int rank) {
  TensorRef r{};
  r.data = data;
  r.dtype = dtype;
  r.rank = rank;
  return r;
}



// a * b and a + b for strides and offsets, or SizeOverflow naming `what`.
Status checked_mul(std::int64_t a, std::int64_t b, const char* what, std::int64_t& r) {
  if (__builtin_mul_overflow(a, b, &r)) {
    return Status(ErrorCode::SizeOverflow, std::string(what) + ": " + std::to_string(a) + " * " + std::to_string(b) + " overflows int64");
  }
  return {};
}

Status checked_add(std::int64_t a, std::int64_t b, const char* what, std::int64_t& r) {
  if (__builtin_add_overflow(a, b, &r)) {
    return Status(ErrorCode::SizeOverflow, std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows int64");
  }
  return {};
}


Status rank_status(int rank, const char* what) {
  if (rank < 0 || rank > kMaxRank) {
    return Status(ErrorCode::InvalidArgument, std::string(what) + ": rank " + std::to_string(rank) + " is out of range (0 to " +
                                                  std::to_string(kMaxRank) + ")");
  }
  return {};
}

// What every view checks of its own shape: no size computed from the inputs
// overflowed (Size::kInvalid), none is negative, and the element count fits
// in int64. A view needs no bytes of its own, so this is the only place a
// broadcast to (2^40 2^40), whose stride-0 axes fit in any buffer, is caught
// before a kernel counts its elements.
Status view_shape_status(const std::int64_t* shape, int rank, const char* what) {
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == Size::kInvalid) {
      return Status(ErrorCode::SizeOverflow, std::string(what) + ": a view of shape " + dims_str(shape, rank) +
                                                 ": a size computed from the inputs' sizes does not fit in int64 (or divides by zero)");
    }
    if (shape[d] < 0) {
      return Status(ErrorCode::InvalidArgument, std::string(what) + ": a view of shape " + dims_str(shape, rank) +
                                                    " has a negative size, expected sizes >= 0");
    }
  }
  for (int d = 0; d < rank; ++d) {
    if (__builtin_mul_overflow(n, shape[d], &n)) {
      return Status(ErrorCode::SizeOverflow, std::string(what) + ": a view of shape " + dims_str(shape, rank) +
                                                 " has more elements than fit in int64");
    }
  }
  return {};
}

// The *_ref helpers as Status: the result in `r` when ok. The throwing
// functions and RefBuilder are both made of these.

Status make_contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape, TensorRef& r) {
  const int rank = static_cast<int>(shape.size());
  if (Status st = rank_status(rank, "contiguous_ref"); !st.ok()) return st;
  std::int64_t numel = 0, bytes = 0;
  if (Status st = checked_bytes(dtype, shape, numel, bytes); !st.ok()) return st;
  r = empty_ref(data, dtype, rank);
  int k = 0;
  for (auto d : shape) r.shape[k++] = d;
  std::int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    r.strides[d] = stride;
    stride *= std::max<std::int64_t>(r.shape[d], 1);  // cannot overflow: numel fits (or a size is 0)
  }
  return {};
}

Status make_permute(const TensorRef& base, std::initializer_list<int> perm, TensorRef& r) {
  if (static_cast<int>(perm.size()) != base.rank) {
    return Status(ErrorCode::RankMismatch, "permute_ref got " + std::to_string(perm.size()) + " axes for a tensor of rank " +
                                               std::to_string(base.rank));
  }
  r = empty_ref(base.data, base.dtype, base.rank);
  int k = 0;
  for (int p : perm) {
    if (p < 0 || p >= base.rank) {
      return Status(ErrorCode::InvalidArgument, "permute_ref: axis " + std::to_string(p) + " of a tensor of rank " + std::to_string(base.rank));
    }
    r.shape[k] = base.shape[p];
    r.strides[k] = base.strides[p];
    ++k;
  }
  return {};
}

Status make_broadcast(const TensorRef& base, std::initializer_list<std::int64_t> shape, TensorRef& r) {
  const int rank = static_cast<int>(shape.size());
  if (Status st = rank_status(rank, "broadcast_ref"); !st.ok()) return st;
  r = empty_ref(base.data, base.dtype, rank);
  int k = 0;
  for (auto d : shape) r.shape[k++] = d;
  if (Status st = view_shape_status(r.shape, rank, "broadcast_ref"); !st.ok()) return st;
  if (base.rank > rank) {
    return Status(ErrorCode::ShapeMismatch, "cannot broadcast " + dims_str(base.shape, base.rank) + " to " + dims_str(r.shape, rank));
  }
  for (int d = 0; d < rank; ++d) {
    const int b = d - (rank - base.rank);
    if (b < 0 || (base.shape[b] == 1 && r.shape[d] != 1)) {
      r.strides[d] = 0;
    } else if (base.shape[b] == r.shape[d]) {
      r.strides[d] = base.strides[b];
    } else {
      return Status(ErrorCode::ShapeMismatch, "cannot broadcast " + dims_str(base.shape, base.rank) + " to " + dims_str(r.shape, rank));
    }
  }
  return {};
}

Status make_reshape(const TensorRef& base, std::initializer_list<std::int64_t> shape, TensorRef& r) {
  std::int64_t n = 1;
  for (int d = 0; d < base.rank; ++d)
    if (Status st = checked_mul(n, base.shape[d], "reshape_ref", n); !st.ok()) return st;
  std::int64_t numel = 0, bytes = 0;
  if (Status st = checked_bytes(DType::u8, shape, numel, bytes); !st.ok()) return st;
  if (numel != n) {
    return Status(ErrorCode::ShapeMismatch, "cannot reshape " + dims_str(base.shape, base.rank) + " (" + std::to_string(n) +
                                                " elements) to " + shape_text(shape));
  }
  return make_contiguous(base.data, base.dtype, shape, r);
}

Status make_slice(const TensorRef& base, std::initializer_list<std::int64_t> starts, std::initializer_list<std::int64_t> steps,
                  std::initializer_list<std::int64_t> shape, TensorRef& r) {
  if (static_cast<int>(starts.size()) > base.rank || static_cast<int>(steps.size()) > base.rank ||
      static_cast<int>(shape.size()) != base.rank) {
    return Status(ErrorCode::RankMismatch, "slice_ref got " + std::to_string(starts.size()) + " starts, " +
                                               std::to_string(steps.size()) + " steps and shape " + shape_text(shape) +
                                               " for a tensor of rank " + std::to_string(base.rank));
  }
  r = base;
  std::int64_t offset = 0;
  int k = 0;
  for (auto s : starts) {
    std::int64_t step_off = 0;
    if (Status st = checked_mul(s, base.strides[k], "slice_ref", step_off); !st.ok()) return st;
    if (Status st = checked_add(offset, step_off, "slice_ref", offset); !st.ok()) return st;
    ++k;
  }
  k = 0;
  for (auto s : steps) {
    if (Status st = checked_mul(base.strides[k], s, "slice_ref", r.strides[k]); !st.ok()) return st;
    ++k;
  }
  k = 0;
  for (auto d : shape) r.shape[k++] = d;
  if (Status st = view_shape_status(r.shape, r.rank, "slice_ref"); !st.ok()) return st;
  std::int64_t byte_off = 0;
  if (Status st = checked_mul(offset, static_cast<std::int64_t>(dtype_size(base.dtype)), "slice_ref", byte_off); !st.ok()) return st;
  r.data = static_cast<char*>(base.data) + byte_off;
  return {};
}

Status make_squeeze(const TensorRef& base, int axis, TensorRef& r) {
  if (axis < 0 || axis >= base.rank || base.shape[axis] != 1) {
    return Status(ErrorCode::InvalidArgument, "squeeze_ref: axis " + std::to_string(axis) + " of a tensor of shape " +
                                                  dims_str(base.shape, base.rank) + ", expected an axis of size 1");
  }
  r = empty_ref(base.data, base.dtype, base.rank - 1);
  for (int d = 0, k = 0; d < base.rank; ++d) {
    if (d == axis) continue;
    r.shape[k] = base.shape[d];
    r.strides[k] = base.strides[d];
    ++k;
  }
  return {};
}

Status make_unsqueeze(const TensorRef& base, int axis, TensorRef& r) {
  if (Status st = rank_status(base.rank + 1, "unsqueeze_ref"); !st.ok()) return st;
  if (axis < 0 || axis > base.rank) {
    return Status(ErrorCode::InvalidArgument, "unsqueeze_ref: axis " + std::to_string(axis) + " of a tensor of rank " +
                                                  std::to_string(base.rank) + ", expected 0.." + std::to_string(base.rank));
  }
  r = empty_ref(base.data, base.dtype, base.rank + 1);
  for (int d = 0, k = 0; d < base.rank + 1; ++d) {
    if (d == axis) {
      r.shape[d] = 1;
      r.strides[d] = 0;
      continue;
    }
    r.shape[d] = base.shape[k];
    r.strides[d] = base.strides[k];
    ++k;
  }
  return {};
}

// The throwing form of a make_* call.
template <class F>
TensorRef ref_or_fail(F&& make) {
  TensorRef r{};
  if (Status st = make(r); !st.ok()) fail(st);
  return r;
}

}  // namespace

TensorRef contiguous_ref(void* data, DType dtype, std::initializer_list<std::int64_t> shape) {
  return ref_or_fail([&](TensorRef& r) { return make_contiguous(data, dtype, shape, r); });
}
TensorRef permute_ref(const TensorRef& base, std::initializer_list<int> perm) {
  return ref_or_fail([&](TensorRef& r) { return make_permute(base, perm, r); });
}
TensorRef broadcast_ref(const TensorRef& base, std::initializer_list<std::int64_t> shape) {
  return ref_or_fail([&](TensorRef& r) { return make_broadcast(base, shape, r); });
}
TensorRef reshape_ref(const TensorRef& base, std::initializer_list<std::int64_t> shape) {
  return ref_or_fail([&](TensorRef& r) { return make_reshape(base, shape, r); });
}
TensorRef slice_ref(const TensorRef& base, std::initializer_list<std::int64_t> starts, std::initializer_list<std::int64_t> steps,
                    std::initializer_list<std::int64_t> shape) {
  return ref_or_fail([&](TensorRef& r) { return make_slice(base, starts, steps, shape, r); });
}
TensorRef squeeze_ref(const TensorRef& base, int axis) {
  return ref_or_fail([&](TensorRef& r) { return make_squeeze(base, axis, r); });
}
TensorRef unsqueeze_ref(const TensorRef& base, int axis) {
  return ref_or_fail([&](TensorRef& r) { return make_unsqueeze(base, axis, r); });
}

// --- RefBuilder ---------------------------------------------------------------------

TensorRef RefBuilder::keep(const char* name, Status st, const TensorRef& r) {
  if (status_.ok() && !st.ok()) status_ = Status(st.code(), std::string("the tensor ") + name + " of the model: " + st.message());
  return status_.ok() ? r : TensorRef{};
}

TensorRef RefBuilder::contiguous(const char* name, void* data, DType dtype, std::initializer_list<std::int64_t> shape) {
  TensorRef r{};
  return keep(name, status_.ok() ? make_contiguous(data, dtype, shape, r) : Status(), r);
}
TensorRef RefBuilder::permute(const char* name, const TensorRef& base, std::initializer_list<int> perm) {
  TensorRef r{};
  return keep(name, status_.ok() ? make_permute(base, perm, r) : Status(), r);
}
TensorRef RefBuilder::broadcast(const char* name, const TensorRef& base, std::initializer_list<std::int64_t> shape) {
  TensorRef r{};
  return keep(name, status_.ok() ? make_broadcast(base, shape, r) : Status(), r);
}
TensorRef RefBuilder::reshape(const char* name, const TensorRef& base, std::initializer_list<std::int64_t> shape) {
  TensorRef r{};
  return keep(name, status_.ok() ? make_reshape(base, shape, r) : Status(), r);
}
TensorRef RefBuilder::slice(const char* name, const TensorRef& base, std::initializer_list<std::int64_t> starts,
                            std::initializer_list<std::int64_t> steps, std::initializer_list<std::int64_t> shape) {
  TensorRef r{};
  return keep(name, status_.ok() ? make_slice(base, starts, steps, shape, r) : Status(), r);
}
TensorRef RefBuilder::squeeze(const char* name, const TensorRef& base, int axis) {
  TensorRef r{};
  return keep(name, status_.ok() ? make_squeeze(base, axis, r) : Status(), r);
}
TensorRef RefBuilder::unsqueeze(const char* name, const TensorRef& base, int axis) {
  TensorRef r{};
  return keep(name, status_.ok() ? make_unsqueeze(base, axis, r) : Status(), r);
}

std::int64_t numel_of(std::initializer_list<std::int64_t> shape) {
  std::int64_t numel = 0, bytes = 0;
  if (Status st = checked_bytes(DType::u8, shape, numel, bytes); !st.ok()) fail(st);
  return numel;
}

std::size_t bytes_of(DType dtype, std::initializer_list<std::int64_t> shape) {
  std::int64_t numel = 0, bytes = 0;
  if (Status st = checked_bytes(dtype, shape, numel, bytes); !st.ok()) fail(st);
  return static_cast<std::size_t>(bytes);
}

}  // namespace wfgen::rt

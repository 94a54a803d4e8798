#include "wfgen/model_support.hpp"

#include "internal.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace wfgen::rt {

namespace {

TensorRef empty_ref(void* data, DType dtype, int rank) {
  TensorRef r{};
  r.data = data;
  r.dtype = dtype;
  r.rank = rank;
  return r;
}

constexpr std::int64_t kMaxBytes = PTRDIFF_MAX;

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

std::string dims_str(const std::int64_t* d, int n) {
  std::string s = "(";
  for (int k = 0; k < n; ++k) s += (k ? " " : "") + (d[k] == Size::kInvalid ? std::string("?") : std::to_string(d[k]));
  return s + ")";
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

// --- run-time sizes ---------------------------------------------------------------

std::size_t ArenaPlan::bytes(DType dtype, std::initializer_list<std::int64_t> shape) {
  if (!status_.ok()) return 0;
  std::int64_t numel = 0, bytes = 0;
  Status st = checked_bytes(dtype, shape, numel, bytes);
  if (!st.ok()) {
    status_ = Status(st.code(), "the model's arena: " + st.message());
    return 0;
  }
  return static_cast<std::size_t>(bytes);
}

std::size_t ArenaPlan::slot(std::initializer_list<std::size_t> sizes) {
  if (!status_.ok()) return 0;
  std::size_t largest = 0;
  for (auto b : sizes) largest = std::max(largest, b);
  const std::size_t at = total_;
  // Both below PTRDIFF_MAX, so the sums below cannot wrap a size_t.
  const std::size_t rounded = (largest + (kAlignment - 1)) / kAlignment * kAlignment;
  if (rounded > static_cast<std::size_t>(kMaxBytes) - total_) {
    status_ = Status(ErrorCode::SizeOverflow, "the model's arena needs more than PTRDIFF_MAX bytes (" + std::to_string(total_) +
                                                  " bytes, then a slot of " + std::to_string(largest) + ")");
    return 0;
  }
  total_ += rounded;
  return at;
}

Status ArenaPlan::allocate(Tensor& arena) const {
  if (!status_.ok()) return status_;
  const std::size_t need = std::max<std::size_t>(total_, kAlignment);
  if (arena.defined() && arena.nbytes() >= need) return {};
  return try_zeros(arena, DType::u8, {static_cast<std::int64_t>(need)});
}

Status try_zeros(Tensor& out, DType dtype, const Shape& shape) {
  for (auto d : shape) {
    if (d == Size::kInvalid) {
      return Status(ErrorCode::SizeOverflow, "a tensor of shape " + shape_to_string(shape) +
                                                 ": a size computed from the inputs' sizes does not fit in int64 (or divides by zero)");
    }
  }
  return Tensor::try_empty(dtype, shape, out);  // zero-filled
}

Tensor copy_out(const TensorRef& ref) {
  Tensor out;
  if (Status st = try_copy_out(ref, out); !st.ok()) fail(st);
  return out;
}

Status try_copy_out(const TensorRef& ref, Tensor& out) {
  if (ref.rank < 0 || ref.rank > kMaxRank || static_cast<int>(ref.dtype) >= kDTypeCount) {
    return Status(ErrorCode::InvalidArgument, "copy_out got a tensor of rank " + std::to_string(ref.rank) + " and dtype code " +
                                                  std::to_string(static_cast<int>(ref.dtype)));
  }
  Shape shape(ref.shape, ref.shape + ref.rank);
  Shape strides(ref.strides, ref.strides + ref.rank);
  Tensor result;
  if (Status st = Tensor::try_empty(ref.dtype, shape, result); !st.ok()) return st;
  visit_dtype(ref.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    Tensor view = Tensor::borrow(static_cast<E*>(ref.data), shape, strides);
    result.copy_from(view);
  });
  out = std::move(result);
  return {};
}

// --- integer inputs ------------------------------------------------------------------

Status load_indices(const char* name, const Tensor& in, Tensor& out) {
  if (in.dtype() != DType::i32 && in.dtype() != DType::i64 && in.dtype() != DType::u8) {
    return Status(ErrorCode::DTypeMismatch, std::string("the input ") + name + " has dtype " + dtype_name(in.dtype()) +
                                                ", but the model takes integer indices (i32, i64 or u8).");
  }
  if (out.dtype() != DType::f32 && out.dtype() != DType::f64) {
    return Status(ErrorCode::DTypeMismatch, std::string("load_indices: the values of ") + name + " must be f32 or f64, not " +
                                                dtype_name(out.dtype()));
  }
  if (in.shape() != out.shape() || !out.is_contiguous()) {
    return Status(ErrorCode::ShapeMismatch, std::string("load_indices: the values of ") + name + " have shape " +
                                                shape_to_string(out.shape()) + ", the input " + shape_to_string(in.shape()));
  }
  const std::int64_t exact = out.dtype() == DType::f32 ? (std::int64_t{1} << 24) : (std::int64_t{1} << 53);
  const int r = in.rank();
  const Shape shape = in.shape(), strides = in.strides();
  const std::int64_t n = in.numel();
  Status bad;
  visit_dtype(in.dtype(), [&](auto in_tag) {
    using I = typename decltype(in_tag)::type;
    if constexpr (std::is_integral_v<I>) {
      const I* src = in.data<I>();
      visit_dtype(out.dtype(), [&](auto out_tag) {
        using F = typename decltype(out_tag)::type;
        if constexpr (std::is_floating_point_v<F>) {
          F* dst = out.data<F>();
          std::int64_t index[kMaxRank] = {}, at = 0;
          for (std::int64_t k = 0; k < n; ++k) {
            const auto v = static_cast<std::int64_t>(src[at]);
            if (v < 0 || v > exact) {
              std::string where = "(";
              for (int d = 0; d < r; ++d) where += (d ? " " : "") + std::to_string(index[d]);
              bad = Status(ErrorCode::InvalidArgument,
                           std::string("the input ") + name + " holds " + std::to_string(v) + " at " + where + "), but an index must be " +
                               (v < 0 ? std::string("0 or more") : "at most " + std::to_string(exact) + " (" + dtype_name(out.dtype()) +
                                                                     " holds larger integers inexactly)") + ".");
              return;
            }
            dst[k] = static_cast<F>(v);
            // Next element in row-major order: the last axis fastest.
            for (int d = r - 1; d >= 0; --d) {
              at += strides[static_cast<std::size_t>(d)];
              if (++index[d] < shape[static_cast<std::size_t>(d)]) break;
              at -= index[d] * strides[static_cast<std::size_t>(d)];
              index[d] = 0;
            }
          }
        }
      });
    }
  });
  return bad;
}

// --- caller-owned outputs --------------------------------------------------------------

namespace {

// Row-major contiguous with exactly the strides contiguous_ref gives.
bool row_major(const TensorRef& r) {
  std::int64_t stride = 1;
  for (int d = r.rank - 1; d >= 0; --d) {
    if (r.strides[d] != stride) return false;
    stride *= std::max<std::int64_t>(r.shape[d], 1);
  }
  return true;
}

// Byte range [lo, hi) of a tensor with elements (its extent fits: it is a
// Tensor's, or was checked by VM::prepare); false if it has none.
bool byte_range(const TensorRef& r, __int128& lo, __int128& hi) {
  __int128 min_off = 0, max_off = 0;
  for (int d = 0; d < r.rank; ++d) {
    if (r.shape[d] <= 0) return false;
    const __int128 span = static_cast<__int128>(r.strides[d]) * (r.shape[d] - 1);
    (span < 0 ? min_off : max_off) += span;
  }
  const auto size = static_cast<__int128>(dtype_size(r.dtype));
  const auto base = static_cast<__int128>(reinterpret_cast<std::uintptr_t>(r.data));
  lo = base + min_off * size;
  hi = base + (max_off + 1) * size;
  return true;
}

}  // namespace

Status prepare_output(const char* name, Tensor& out, DType dtype, std::initializer_list<std::int64_t> shape) {
  std::int64_t numel = 0, bytes = 0;
  if (Status st = checked_bytes(dtype, shape, numel, bytes); !st.ok()) {
    return Status(st.code(), std::string("the output ") + name + ": " + st.message());
  }
  bool same = out.defined() && out.dtype() == dtype && out.rank() == static_cast<int>(shape.size());
  int k = 0;
  for (auto d : shape) same = same && out.dim(k++) == d;
  if (same) return {};
  return Tensor::try_uninitialized(dtype, Shape(shape), out);
}

bool can_write_directly(std::span<const Tensor> outputs, std::size_t k, std::span<const Tensor> inputs,
                        std::span<const Tensor> params) {
  const Tensor& out = outputs[k];
  if (!out.defined() || !row_major(out.ref())) return false;
  for (const Tensor& t : inputs)
    if (may_alias(out, t)) return false;
  for (const Tensor& t : params)
    if (may_alias(out, t)) return false;
  for (std::size_t j = 0; j < outputs.size(); ++j)
    if (j != k && may_alias(out, outputs[j])) return false;
  return true;
}

Status check_output_copy(const char* name, const TensorRef& dst, const TensorRef& src) {
  __int128 dlo = 0, dhi = 0, slo = 0, shi = 0;
  if (!byte_range(dst, dlo, dhi) || !byte_range(src, slo, shi) || dhi <= slo || shi <= dlo) return {};
  bool identical = dst.data == src.data && dst.rank == src.rank;
  for (int d = 0; identical && d < dst.rank; ++d) identical = dst.shape[d] == src.shape[d] && (dst.shape[d] == 1 || dst.strides[d] == src.strides[d]);
  if (identical) return {};
  return Status(ErrorCode::AliasedBuffer, std::string("the output ") + name + " of shape " + dims_str(dst.shape, dst.rank) +
                                              " and strides " + dims_str(dst.strides, dst.rank) +
                                              " overlaps the tensor it is copied from (strides " + dims_str(src.strides, src.rank) +
                                              "), expected separate memory or the identical view");
}

void copy_elements(const TensorRef& dst, const TensorRef& src) noexcept {
  const std::size_t esize = dtype_size(dst.dtype);
  if (row_major(dst) && row_major(src)) {
    std::int64_t n = 1;
    for (int d = 0; d < dst.rank; ++d) n *= dst.shape[d];
    if (n > 0 && dst.data != src.data) std::memmove(dst.data, src.data, static_cast<std::size_t>(n) * esize);
    return;
  }
  visit_dtype(dst.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    E* d = static_cast<E*>(dst.data);
    const E* s = static_cast<const E*>(src.data);
    internal::for_each_offset_pair(dst.rank, dst.shape, dst.strides, src.strides,
                                   [&](std::int64_t od, std::int64_t os) { d[od] = s[os]; });
  });
}

// --- inputs -----------------------------------------------------------------------

InputBinder::InputBinder(const char* model, const char* where, std::span<const char* const> symbols)
    : model_(model), where_(where), symbols_(symbols), values_(symbols.size(), -1) {}

Status InputBinder::report(ErrorCode code, const std::string& report) const {
  std::ostringstream os;
  os << "[wfgen] Shape-Error: Couldn't step forward because of shape-error.\n\n";
  os << "The operation was : <Model: " << model_ << " (" << where_ << ")>\n\n";
  os << "Input(s)            : (";
  for (std::size_t k = 0; k < given_.size(); ++k) os << (k ? " " : "") << given_[k];
  os << ")\n\nHere's a list of reports.\n\n1. " << report;
  return Status(code, os.str());
}

void InputBinder::bind(const char* name, const Tensor& t, DType dtype, std::initializer_list<InputDim> dims) {
  if (Status st = check(name, t, dtype, dims); !st.ok()) rt::fail(st);
}

Status InputBinder::check(const char* name, const Tensor& t, DType dtype, std::initializer_list<InputDim> dims) {
  given_.push_back(t.defined() ? shape_to_string(t.shape()) : std::string("unset"));
  if (!t.defined()) return report(ErrorCode::NullBuffer, std::string("the input ") + name + " was not set.");
  if (t.dtype() != dtype) {
    return report(ErrorCode::DTypeMismatch, std::string("the input ") + name + " has dtype " + dtype_name(t.dtype()) +
                                                ", but the model takes " + dtype_name(dtype) + ".");
  }
  std::string expected = "(";
  int k = 0;
  for (const auto& d : dims) expected += (k++ ? " " : "") + (d.symbol ? std::string(d.symbol) : std::to_string(d.size));
  expected += ")";
  if (t.rank() != static_cast<int>(dims.size())) {
    return report(ErrorCode::RankMismatch, std::string("Couldn't identify the rank of ") + name + ": expected " +
                                               std::to_string(dims.size()) + " dims " + expected + ", but got " +
                                               std::to_string(t.rank()) + ": " + shape_to_string(t.shape()) + ".");
  }
  // Tensors keep their element count in int64; the bytes must fit as well
  // (PTRDIFF_MAX), or the model's size arithmetic could not hold them.
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(t.numel(), static_cast<std::int64_t>(dtype_size(dtype)), &bytes)) {
    return report(ErrorCode::SizeOverflow, std::string("the input ") + name + " of shape " + shape_to_string(t.shape()) +
                                               " has more bytes than fit in the address space.");
  }
  int axis = 0;
  for (const auto& d : dims) {
    std::int64_t got = t.dim(axis);
    if (!d.symbol) {
      if (got != d.size) {
        return report(ErrorCode::ShapeMismatch, std::string("Couldn't identify axis ") + std::to_string(axis) + " of " + name +
                                                    ": it is " + std::to_string(d.size) + "\n but got: " + std::to_string(got) +
                                                    ".\n Expected " + name + " = " + expected + ", but got: " +
                                                    shape_to_string(t.shape()));
      }
    } else {
      std::size_t s = 0;
      while (s < symbols_.size() && std::string_view(symbols_[s]) != d.symbol) ++s;
      if (s == symbols_.size()) return Status(ErrorCode::InvalidArgument, std::string("unknown symbol ") + d.symbol);
      if (values_[s] < 0) {
        values_[s] = got;
      } else if (values_[s] != got) {
        return report(ErrorCode::ShapeMismatch, std::string("Couldn't identify ") + d.symbol + ": " + d.symbol +
                                                    " is determined as " + std::to_string(values_[s]) + "\n but got: " +
                                                    std::to_string(got) + " at axis " + std::to_string(axis) + " of " + name +
                                                    ".\n Expected " + name + " = " + expected + ", but got: " +
                                                    shape_to_string(t.shape()));
      }
    }
    ++axis;
  }
  return {};
}

// --- parameters -------------------------------------------------------------------

void init_parameter(Tensor& t, InitKind kind, double a, double b, Rng& rng) {
  std::int64_t fan_in = t.rank() == 0 ? 1 : t.dim(0);
  std::int64_t fan_out = t.rank() == 0 ? 1 : t.dim(t.rank() - 1);
  switch (kind) {
    case InitKind::Zeros: t.fill(0.0); return;
    case InitKind::Ones: t.fill(1.0); return;
    case InitKind::Constant: t.fill(a); return;
    case InitKind::Uniform: fill_uniform(t, a, b, rng); return;
    case InitKind::Normal: fill_normal(t, a, b, rng); return;
    case InitKind::Xavier: {
      double limit = std::sqrt(6.0 / static_cast<double>(std::max<std::int64_t>(1, fan_in + fan_out)));
      fill_uniform(t, -limit, limit, rng);
      return;
    }
    case InitKind::He: fill_normal(t, 0.0, std::sqrt(2.0 / static_cast<double>(std::max<std::int64_t>(1, fan_in))), rng); return;
  }
}

namespace {

constexpr char kMagic[8] = {'W', 'F', 'G', 'E', 'N', 'P', 'R', 'M'};
constexpr std::uint32_t kVersion = 1;

struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  void add(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
};

class Writer {
 public:
  explicit Writer(std::vector<char>& out) : out_(out) {}
  void bytes(const void* p, std::size_t n) { out_.insert(out_.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n); }
  template <class T>
  void put(T v) {
    static_assert(std::endian::native == std::endian::little, "parameter files are little-endian");
    bytes(&v, sizeof v);
  }

 private:
  std::vector<char>& out_;
};

// Reads the parameter file's bytes in order; the first problem is kept as
// error() (BadParameterFile) and every later read gives zeros.
class Reader {
 public:
  Reader(const std::vector<char>& in, const std::string& path) : in_(in), path_(path) {}
  bool bytes(void* p, std::size_t n) {
    if (!error_.ok()) return false;
    if (n > in_.size() - pos_) {
      fail("the file is truncated (needed " + std::to_string(n) + " more bytes at offset " + std::to_string(pos_) + ")");
      return false;
    }
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  template <class T>
  T get() {
    T v{};
    if (!bytes(&v, sizeof v)) return T{};
    return v;
  }
  std::size_t pos() const { return pos_; }
  // Past n bytes the caller checked are there.
  void skip(std::size_t n) { pos_ += n; }
  bool ok() const { return error_.ok(); }
  // Keeps the first error.
  void fail(const std::string& why) {
    if (error_.ok()) error_ = Status(ErrorCode::BadParameterFile, "parameter file " + path_ + ": " + why);
  }
  const Status& error() const { return error_; }

 private:
  const std::vector<char>& in_;
  const std::string& path_;
  std::size_t pos_ = 0;
  Status error_;
};

}  // namespace

Status check_tensors(const char* what, std::span<const std::string> names, std::span<const Tensor> tensors, bool distinct) {
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    if (!tensors[k].defined()) {
      return Status(ErrorCode::NullBuffer, std::string(what) + " " + (k < names.size() ? "'" + names[k] + "'" : std::to_string(k)) +
                                               " is an undefined tensor (no storage), expected a tensor to " +
                                               (distinct ? "load into" : "read"));
    }
  }
  if (!distinct) return {};
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    for (std::size_t j = 0; j < k; ++j) {
      if (may_alias(tensors[j], tensors[k])) {
        return Status(ErrorCode::AliasedBuffer, std::string(what) + " '" + (k < names.size() ? names[k] : std::to_string(k)) +
                                                    "' overlaps '" + (j < names.size() ? names[j] : std::to_string(j)) +
                                                    "' in memory, expected separate tensors to load into");
      }
    }
  }
  return {};
}

void save_parameters(const std::string& path, std::span<const std::string> names, std::span<const Tensor> tensors) {
  if (Status st = try_save_parameters(path, names, tensors); !st.ok()) fail(st);
}

void load_parameters(const std::string& path, std::span<const std::string> names, std::span<Tensor> tensors,
                     std::string_view scope) {
  if (Status st = try_load_parameters(path, names, tensors, scope); !st.ok()) fail(st);
}

Status try_save_parameters(const std::string& path, std::span<const std::string> names, std::span<const Tensor> tensors) {
  if (names.size() != tensors.size()) {
    return Status(ErrorCode::InvalidArgument, "save_parameters: " + std::to_string(names.size()) + " names but " +
                                                  std::to_string(tensors.size()) + " tensors");
  }
  if (Status st = check_tensors("parameter", names, tensors, false); !st.ok()) return st;
  std::vector<char> buf;
  Writer w(buf);
  w.bytes(kMagic, sizeof kMagic);
  w.put<std::uint32_t>(kVersion);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(names.size()));
  for (std::size_t k = 0; k < names.size(); ++k) {
    Tensor c = tensors[k].contiguous();
    w.put<std::uint32_t>(static_cast<std::uint32_t>(names[k].size()));
    w.bytes(names[k].data(), names[k].size());
    w.put<std::uint8_t>(static_cast<std::uint8_t>(c.dtype()));
    w.put<std::uint32_t>(static_cast<std::uint32_t>(c.rank()));
    for (int d = 0; d < c.rank(); ++d) w.put<std::int64_t>(c.dim(d));
    w.put<std::uint64_t>(static_cast<std::uint64_t>(c.nbytes()));
    w.bytes(c.raw_data(), static_cast<std::size_t>(c.nbytes()));
  }
  Fnv f;
  f.add(buf.data(), buf.size());
  w.put<std::uint64_t>(f.h);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (!out) return Status(ErrorCode::BadParameterFile, "cannot write the parameter file " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status(ErrorCode::BadParameterFile, "cannot move the parameter file into place: " + path);
  }
  return {};
}

namespace {

// One parameter of a file as read: where its data lies in the file's bytes.
struct FileParameter {
  std::string name;
  std::uint8_t dtype = 0;
  std::vector<std::int64_t> dims;
  std::uint64_t nbytes = 0;
  std::size_t offset = 0;
};

// Reads the parameters of a file whose header (magic, version) `r` has read;
// the first problem is r.error().
std::vector<FileParameter> read_file_parameters(Reader& r, const std::vector<char>& buf) {
  std::vector<FileParameter> out;
  const std::uint32_t count = r.get<std::uint32_t>();
  for (std::uint32_t k = 0; k < count && r.ok(); ++k) {
    FileParameter p;
    const std::uint32_t len = r.get<std::uint32_t>();
    if (!r.ok()) break;
    if (len > 4096) {
      r.fail("a parameter name is " + std::to_string(len) + " bytes long");
      break;
    }
    p.name.assign(len, '\0');
    if (!r.bytes(p.name.data(), len)) break;
    p.dtype = r.get<std::uint8_t>();
    const std::uint32_t rank = r.get<std::uint32_t>();
    if (r.ok() && rank > static_cast<std::uint32_t>(kMaxRank)) {
      r.fail("parameter '" + internal::printable_name(p.name) + "' has rank " + std::to_string(rank) + " (at most " +
             std::to_string(kMaxRank) + ")");
    }
    for (std::uint32_t d = 0; d < rank && r.ok(); ++d) p.dims.push_back(r.get<std::int64_t>());
    p.nbytes = r.get<std::uint64_t>();
    if (!r.ok()) break;
    if (p.nbytes > buf.size() - r.pos()) {
      r.fail("the file is truncated (parameter '" + internal::printable_name(p.name) + "' needs " + std::to_string(p.nbytes) +
             " bytes at offset " + std::to_string(r.pos()) + ")");
      break;
    }
    p.offset = r.pos();
    r.skip(static_cast<std::size_t>(p.nbytes));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

Status try_load_parameters(const std::string& path, std::span<const std::string> names, std::span<Tensor> tensors,
                           std::string_view scope) {
  if (names.size() != tensors.size()) {
    return Status(ErrorCode::InvalidArgument, "load_parameters: " + std::to_string(names.size()) + " names but " +
                                                  std::to_string(tensors.size()) + " tensors");
  }
  if (Status st = check_tensors("parameter", names, std::span<const Tensor>(tensors.data(), tensors.size()), true); !st.ok()) {
    return st;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status(ErrorCode::BadParameterFile, "cannot read the parameter file " + path + ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::BadParameterFile, "cannot open the parameter file " + path);
  std::vector<char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Reader r(buf, path);
  char magic[8] = {};
  r.bytes(magic, sizeof magic);
  if (!r.ok()) return r.error();
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) r.fail("this is not a wfgen parameter file (wrong magic)");
  std::uint32_t version = r.get<std::uint32_t>();
  if (r.ok() && version != kVersion) {
    r.fail("version " + std::to_string(version) + " is not supported (expected " + std::to_string(kVersion) + ")");
  }
  if (!r.ok()) return r.error();
  if (buf.size() < 8 + 8) r.fail("the file is truncated");
  if (!r.ok()) return r.error();
  // Read everything first: a bad file changes nothing.
  const std::vector<FileParameter> file = read_file_parameters(r, buf);
  if (!r.ok()) return r.error();
  if (r.pos() + 8 > buf.size()) r.fail("the file is truncated (the checksum is missing)");
  else if (r.pos() + 8 != buf.size()) r.fail("unexpected bytes after the last parameter");
  if (!r.ok()) return r.error();

  // Matched by name, never by position (docs/runtime-api.md, "Moving parameters between builds").
  const internal::ParameterSource where{"parameter file " + path + ": ", "the file", "load_parameters", ErrorCode::BadParameterFile};
  std::vector<std::string> file_names;
  for (const auto& p : file) file_names.push_back(p.name);
  std::vector<std::size_t> from;
  if (Status st = internal::match_parameters(file_names, names, scope, where, from); !st.ok()) return st;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const FileParameter& p = file[from[k]];
    std::string why = internal::parameter_mismatch(names[k], p.name, p.dtype, p.dims, tensors[k]);
    if (why.empty() && p.nbytes != static_cast<std::uint64_t>(tensors[k].nbytes())) {
      why = "parameter '" + names[k] + "' has the wrong byte count";
    }
    if (!why.empty()) r.fail(why);
  }
  if (!r.ok()) return r.error();
  Fnv f;
  f.add(buf.data(), buf.size() - 8);
  std::uint64_t stored;
  std::memcpy(&stored, buf.data() + buf.size() - 8, 8);
  if (f.h != stored) r.fail("the checksum does not match: the file is corrupted");
  if (!r.ok()) return r.error();
  std::vector<Tensor> staged(names.size());
  for (std::size_t k = 0; k < names.size(); ++k) {
    if (Status st = Tensor::try_empty(tensors[k].dtype(), tensors[k].shape(), staged[k]); !st.ok()) return st;
    const FileParameter& p = file[from[k]];
    if (p.nbytes) std::memcpy(staged[k].raw_data(), buf.data() + p.offset, static_cast<std::size_t>(p.nbytes));
  }
  for (std::size_t k = 0; k < names.size(); ++k) tensors[k].copy_from(staged[k]);
  return {};
}

}  // namespace wfgen::rt

// What a generated model does when it binds (model_support.hpp): the arena
// plan of its run-time sizes, its integer inputs, the caller's output
// tensors, and the checks of its inputs against the where line. The table's
// TensorRefs are made in view_refs.cpp, parameters kept in parameters.cpp.
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

using internal::checked_bytes;
using internal::dims_str;
using internal::kMaxBytes;

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

}  // namespace wfgen::rt

// The VM's checks of each instruction's operands (include/wfgen/vm.hpp, opt
// levels): ranks, dtypes, shapes, byte extents and aliasing, and the errors
// that name the instruction.
#include "vm_impl.hpp"

namespace wfgen::rt {

// --- checks ------------------------------------------------------------------

Status VM::Impl::check(Section s, bool alias_only, std::int32_t* at) const {
  const auto& iseq = state(s).iseq;
  for (std::size_t i = 0; i < iseq.size(); ++i) {
    Status r = check_instruction(s, static_cast<std::int32_t>(i), alias_only);
    if (!r.ok()) {
      if (at) *at = static_cast<std::int32_t>(i);
      return r;
    }
  }
  return {};
}

Status VM::Impl::check_instruction(Section s, std::int32_t i, bool alias_only) const {
  const Instruction& in = state(s).iseq[static_cast<std::size_t>(i)];
  const TensorRef* ops = gathered.data() + in.first_operand;
  const OperandSpec* specs = prog.operand_specs.empty() ? nullptr : prog.operand_specs.data() + in.first_operand;
  auto name = [&](int k) {
    return "operand " + std::to_string(k) + " (" +
           prog.tensors[static_cast<std::size_t>(prog.operands[static_cast<std::size_t>(in.first_operand + k)])].name +
           ")";
  };
  // Operands whose extent can be computed: a valid rank, a known dtype, sizes >= 0.
  auto measurable = [&](const TensorRef& t) {
    if (!valid_rank(t) || !known_dtype(t.dtype)) return false;
    for (int d = 0; d < t.rank; ++d)
      if (t.shape[d] < 0) return false;
    return true;
  };
  for (int k = 0; k < in.n_operands; ++k) {
    const TensorRef& t = ops[k];
    if (!alias_only) {
      if (!valid_rank(t)) {
        return bad(s, i, ErrorCode::RankMismatch, name(k) + " has rank " + std::to_string(t.rank) + ", expected 0.." +
                                                      std::to_string(kMaxRank));
      }
      if (!known_dtype(t.dtype)) {
        return bad(s, i, ErrorCode::DTypeMismatch,
                   name(k) + " has unknown dtype code " + std::to_string(static_cast<int>(t.dtype)));
      }
      for (int d = 0; d < t.rank; ++d) {
        if (t.shape[d] < 0) {
          return bad(s, i, ErrorCode::InvalidArgument, name(k) + " has shape " + ref_shape(t) + ", expected sizes >= 0");
        }
      }
      if (specs) {
        const OperandSpec& sp = specs[k];
        if (!(sp.flags & OperandSpec::kAnyDType) && t.dtype != sp.dtype) {
          return bad(s, i, ErrorCode::DTypeMismatch,
                     name(k) + " has dtype " + dtype_name(t.dtype) + ", expected " + dtype_name(sp.dtype));
        }
        if (sp.rank >= 0 && t.rank != sp.rank) {
          return bad(s, i, ErrorCode::RankMismatch, name(k) + " has rank " + std::to_string(t.rank) + " (shape " +
                                                        ref_shape(t) + "), expected " + std::to_string(sp.rank));
        }
      }
      if (t.data == nullptr && has_elements(t)) {
        return bad(s, i, ErrorCode::NullBuffer, name(k) + " has no data (shape " + ref_shape(t) + ")");
      }
    }
    // A kernel counts elements in int64: a view (a broadcast has stride 0)
    // may hold more elements than bytes, so its extent alone does not bound that.
    std::int64_t count = 1;
    if (measurable(t)) {
      for (int d = 0; d < t.rank; ++d) {
        if (__builtin_mul_overflow(count, t.shape[d], &count)) {
          return bad(s, i, ErrorCode::SizeOverflow, name(k) + " of shape " + ref_shape(t) + " has more elements than fit in int64");
        }
      }
    }
    std::uintptr_t lo = 0, hi = 0;
    if (measurable(t) && byte_range(t, lo, hi) == Extent::Overflow) {
      return bad(s, i, ErrorCode::SizeOverflow, name(k) + " of shape " + ref_shape(t) + " and strides " + ref_strides(t) +
                                                    " spans more bytes than fit in the address space");
    }
  }
  if (specs && !alias_only) {
    for (int k = 0; k < in.n_operands; ++k) {
      if (specs[k].group < 0) continue;
      for (int j = 0; j < k; ++j) {
        if (specs[j].group != specs[k].group) continue;
        const bool equal = ops[j].rank == ops[k].rank &&
                           std::equal(ops[j].shape, ops[j].shape + ops[j].rank, ops[k].shape);
        if (!equal) {
          return bad(s, i, ErrorCode::ShapeMismatch,
                     name(k) + " has shape " + ref_shape(ops[k]) + ", expected " + ref_shape(ops[j]) + " as " + name(j) +
                         " (element-wise operands have equal shapes)");
        }
        break;  // j is the first of the group; every later one is compared with it
      }
    }
  }
  if (in.fn == nullptr) return {};  // a listing-only view instruction writes no data
  for (int k = 0; k < in.n_operands; ++k) {
    if (!bit(in.written, k)) continue;
    const TensorRef& w = ops[k];
    const std::uint8_t flags = specs ? specs[k].flags : 0;
    if (alias_only && !(flags & OperandSpec::kNoAlias)) continue;
    if (!measurable(w)) continue;
    if (!alias_only) {
      for (int d = 0; d < w.rank; ++d) {
        if (w.strides[d] == 0 && w.shape[d] > 1) {
          return bad(s, i, ErrorCode::InvalidView,
                     "written " + name(k) + " has stride 0 on axis " + std::to_string(d) + " of size " +
                         std::to_string(w.shape[d]) + " (shape " + ref_shape(w) + ", strides " + ref_strides(w) +
                         "), expected a view that does not broadcast");
        }
      }
    }
    if (flags & OperandSpec::kMayAlias) continue;
    std::uintptr_t wlo, whi;
    if (byte_range(w, wlo, whi) != Extent::Ok) continue;
    for (int j = 0; j < in.n_operands; ++j) {
      if (j == k || !measurable(ops[j])) continue;
      std::uintptr_t lo, hi;
      if (byte_range(ops[j], lo, hi) != Extent::Ok || hi <= wlo || whi <= lo) continue;
      if (!(flags & OperandSpec::kNoAlias) && same_view(w, ops[j])) continue;
      return bad(s, i, ErrorCode::AliasedBuffer,
                 "written " + name(k) + " overlaps " + name(j) + " in memory" +
                     ((flags & OperandSpec::kNoAlias)
                          ? std::string(", expected separate buffers (the kernel cannot work in place)")
                          : ", expected the identical view or separate buffers (shape " + ref_shape(w) + " strides " +
                                ref_strides(w) + " vs shape " + ref_shape(ops[j]) + " strides " + ref_strides(ops[j]) + ")"));
    }
  }
  return {};
}

#if WFGEN_EXCEPTIONS
void VM::Impl::rethrow_wrapped(Section s, std::int32_t i) const {
  std::exception_ptr cause = std::current_exception();
  ErrorCode code = ErrorCode::InvalidArgument;
  std::string what;
  try {
    throw;
  } catch (const Error& e) {
    code = e.code();
    what = e.what();
  } catch (const std::bad_alloc& e) {
    code = ErrorCode::OutOfMemory;
    what = std::string("out of memory (") + e.what() + ")";
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "the kernel threw an exception that is not a std::exception";
  }
  throw InstructionError(code, where(s, i) + ": " + what, s, i, cause);
}
#endif

}  // namespace wfgen::rt

// Private to the VM's sources (vm.cpp: building, validating, preparing and
// running; vm_checks.cpp: the operand checks; vm_text.cpp: disassembly,
// logging and profiling): VM::Impl and the helpers they share.
#pragma once

#include "wfgen/vm.hpp"

#include "internal.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace wfgen::rt {

namespace vm_internal {

inline constexpr int kSectionCount = 3;
inline constexpr Section kSections[kSectionCount] = {Section::Forward, Section::Backward, Section::FreshBackward};

inline const char* section_word(Section s) {
  return s == Section::Forward ? "forward" : s == Section::Backward ? "pullback" : "fresh pullback";
}

// The instructions of each section (FreshBackward: the pullback's when the
// program has no variant of its own).
inline std::span<const Instruction> section_iseq(const Program& p, Section s) {
  if (s == Section::Forward) return p.forward;
  return s == Section::FreshBackward && !p.backward_fresh.empty() ? p.backward_fresh : p.backward;
}

inline bool bit(std::uint32_t mask, int k) { return ((mask >> k) & 1u) != 0; }

inline const char* role_prefix(TensorRole role) {
  switch (role) {
    case TensorRole::Input: return "<Input>";
    case TensorRole::Param: return "<Param>";
    default: return "";
  }
}

inline bool valid_rank(const TensorRef& t) { return t.rank >= 0 && t.rank <= kMaxRank; }

inline std::string ref_shape(const TensorRef& t) {
  if (!valid_rank(t)) return "(rank " + std::to_string(t.rank) + ")";
  return shape_to_string(std::span<const std::int64_t>(t.shape, static_cast<std::size_t>(t.rank)));
}

inline std::string ref_strides(const TensorRef& t) {
  if (!valid_rank(t)) return "(rank " + std::to_string(t.rank) + ")";
  return shape_to_string(std::span<const std::int64_t>(t.strides, static_cast<std::size_t>(t.rank)));
}

inline bool known_dtype(DType t) { return static_cast<int>(t) < kDTypeCount; }

inline std::int64_t ref_numel(const TensorRef& t) {
  std::int64_t n = 1;
  for (int d = 0; d < t.rank; ++d) n *= t.shape[d];
  return n;
}

// True if every dim of t is > 0 (t has elements; rank 0 has one).
inline bool has_elements(const TensorRef& t) {
  for (int d = 0; d < t.rank; ++d)
    if (t.shape[d] <= 0) return false;
  return true;
}

enum class Extent { Empty, Ok, Overflow };

// Byte range [lo, hi) reachable from t.data (t has a valid rank, known dtype
// and sizes >= 0). Empty if t has no elements; Overflow if the range does not
// fit in the address space (huge sizes or strides), so it cannot be compared.
inline Extent byte_range(const TensorRef& t, std::uintptr_t& lo, std::uintptr_t& hi) {
  std::int64_t min_off = 0, max_off = 0;
  if (!has_elements(t)) return Extent::Empty;
  for (int d = 0; d < t.rank; ++d) {
    std::int64_t span = 0;
    std::int64_t& side = t.strides[d] < 0 ? min_off : max_off;
    if (__builtin_mul_overflow(t.strides[d], t.shape[d] - 1, &span) || __builtin_add_overflow(side, span, &side)) {
      return Extent::Overflow;
    }
  }
  const auto size = static_cast<std::int64_t>(dtype_size(t.dtype));
  std::int64_t lo_bytes = 0, hi_bytes = 0;
  if (__builtin_mul_overflow(min_off, size, &lo_bytes) || __builtin_add_overflow(max_off, 1, &max_off) ||
      __builtin_mul_overflow(max_off, size, &hi_bytes)) {
    return Extent::Overflow;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(t.data);
  // Wrapping around the address space is as bad as an int64 overflow.
  if ((lo_bytes < 0 && static_cast<std::uintptr_t>(-(lo_bytes + 1)) >= base) ||
      static_cast<std::uintptr_t>(hi_bytes) > UINTPTR_MAX - base) {
    return Extent::Overflow;
  }
  lo = lo_bytes < 0 ? base - static_cast<std::uintptr_t>(-(lo_bytes + 1)) - 1 : base;
  hi = base + static_cast<std::uintptr_t>(hi_bytes);
  return Extent::Ok;
}

// Same elements in the same order: data, dtype and shape equal, strides equal
// on every axis longer than 1.
inline bool same_view(const TensorRef& a, const TensorRef& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
    if (a.shape[d] > 1 && a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

// The first n elements of t in row-major order of its visible shape:
// "(0.0 1.0 2.0 ...)".
inline std::string first_elements(const TensorRef& t, int n) {
  if (!valid_rank(t) || !known_dtype(t.dtype)) return "(?)";
  const std::int64_t numel = ref_numel(t);
  if (numel == 0) return "()";
  if (t.data == nullptr) return "(no data)";
  const std::int64_t shown = std::min<std::int64_t>(numel, n);
  std::string out = "(";
  visit_dtype(t.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* base = static_cast<const E*>(t.data);
    std::int64_t index[kMaxRank] = {};
    for (std::int64_t k = 0; k < shown; ++k) {
      std::int64_t off = 0;
      for (int d = 0; d < t.rank; ++d) off += index[d] * t.strides[d];
      if (k) out += ' ';
      out += internal::format_element(base[off]);
      for (int d = t.rank - 1; d >= 0; --d) {
        if (++index[d] < t.shape[d]) break;
        index[d] = 0;
      }
    }
  });
  if (shown < numel) out += " ...";
  out += ')';
  return out;
}

// cl-waffe2's float printing, 4 significant digits: 0.007934, 4.83e-4, 0.0.
inline std::string format_seconds(double v) {
  char buf[64];
  if (!(v > 0)) return "0.0";
  if (v >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.4g", v);
    std::string s(buf);
    if (s.find('e') != std::string::npos) {
      std::snprintf(buf, sizeof buf, "%.1f", v);
      s = buf;
    }
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  std::snprintf(buf, sizeof buf, "%.3e", v);  // "4.830e-04"
  std::string s(buf);
  const auto e = s.find('e');
  std::string mant = s.substr(0, e);
  while (mant.size() > 3 && mant.back() == '0') mant.pop_back();  // keep "1.0"
  const int exponent = std::atoi(s.c_str() + e + 1);
  return mant + "e" + std::to_string(exponent);
}

inline std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

inline const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace vm_internal

using namespace vm_internal;

struct VM::Impl {
  struct Step {
    KernelFn fn;
    TensorRef* ops;
    const ScalarArg* scalars;
    std::int32_t index;
    bool writes_result;  // an operand is OperandSpec::kResult: streams from streaming_result_bytes()
    void call() const {
      if (writes_result) [[unlikely]] {
        detail::ResultScope scope(true);
        fn(ops, scalars);
      } else {
        fn(ops, scalars);
      }
    }
  };
  // Whether `in` writes an operand marked OperandSpec::kResult.
  bool writes_result(const Instruction& in) const {
    if (prog.operand_specs.empty()) return false;
    for (int k = 0; k < in.n_operands; ++k) {
      const OperandSpec& spec = prog.operand_specs[static_cast<std::size_t>(in.first_operand + k)];
      if (bit(in.written, k) && (spec.flags & OperandSpec::kResult) != 0) return true;
    }
    return false;
  }
  struct SectionState {
    std::span<const Instruction> iseq;
    std::vector<Step> steps;  // instructions with a kernel, in order
    bool checked = false;     // opt level 2: checked since the last prepare()
    // run() may go straight to the loop: prepared, no check due at this opt
    // level, no logging. Kept by refresh() whenever one of those changes, so
    // the steady state of a call tests one flag.
    bool ready = false;
  };

  Program prog;
  OptLevel level = OptLevel::Checked;
  std::ostream* log = nullptr;
  int log_elements = 6;
  bool prepared = false;
  std::vector<TensorRef> table;
  std::vector<TensorRef> gathered;  // parallel to prog.operands
  SectionState sections[kSectionCount];

  explicit Impl(const Program& p);
  void validate() const;

  SectionState& state(Section s) { return sections[static_cast<int>(s)]; }
  const SectionState& state(Section s) const { return sections[static_cast<int>(s)]; }

  // --- text ---
  // Dtypes and shapes from `ops` (the instruction's gathered operands) if
  // given, else from the table of the last prepare().
  std::string operand_text(const Instruction& in, int k, bool with_type, const TensorRef* ops = nullptr) const;
  std::string body(const Instruction& in, const TensorRef* ops = nullptr) const;  // "h <= op(h{float, (2 3)} ...)>"
  std::string head(const Instruction& in) const { return std::string("<WfInst[op=") + in.op + "]"; }
  std::string line(const Instruction& in, std::size_t width) const {
    return pad(head(in), width) + " : " + body(in);
  }
  std::size_t head_width(std::span<const Instruction> iseq) const {
    std::size_t w = 0;
    for (const auto& in : iseq) w = std::max(w, head(in).size());
    return w;
  }
  std::string where(Section s, std::int32_t i) const;  // "instruction 3 <...> (source)"
  std::size_t distinct_tensors(std::span<const Instruction> iseq) const;
  std::size_t distinct_scalars(std::span<const Instruction> iseq) const;

  // --- checks and errors ---
  // A failed check of instruction i: the message starts with where(s, i).
  Status bad(Section s, std::int32_t i, ErrorCode code, const std::string& what) const {
    return Status(code, where(s, i) + ": " + what);
  }
  // InstructionError with exceptions, rt::fail() without.
  [[noreturn]] void raise(Section s, std::int32_t i, const Status& st) const {
#if WFGEN_EXCEPTIONS
    throw InstructionError(st.code(), st.message(), s, i, nullptr);
#else
    (void)s;
    (void)i;
    fail(st);
#endif
  }
#if WFGEN_EXCEPTIONS
  [[noreturn]] void rethrow_wrapped(Section s, std::int32_t i) const;
#endif
  // The first failed check of a section (its index in *at), or ok. With
  // `alias_only`, only what prepare() always checks: the byte extents of
  // operands and written kNoAlias operands against the others.
  Status check(Section s, bool alias_only, std::int32_t* at) const;
  Status check_instruction(Section s, std::int32_t i, bool alias_only) const;
  // The checks of a whole section as the opt level says, raised on failure.
  void check_or_raise(Section s) {
    SectionState& st = state(s);
    if (level == OptLevel::Safe || (level == OptLevel::Checked && !st.checked)) {
      std::int32_t at = -1;
      if (Status r = check(s, false, &at); !r.ok()) raise(s, at, r);
      st.checked = true;
      refresh();
    }
  }
  void refresh() {
    for (auto& st : sections)
      st.ready = prepared && log == nullptr && (level == OptLevel::Fast || (level == OptLevel::Checked && st.checked));
  }

  void run_logged(Section s);
  void log_operands(const Instruction& in, const TensorRef* ops, bool after) const;
};

}  // namespace wfgen::rt

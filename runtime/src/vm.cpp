// The instruction-sequence VM: operand gathering, the run loop, opt-level
// checks, logging, disassembly and profiling. See include/wfgen/vm.hpp.
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

InstructionError::InstructionError(ErrorCode code, const std::string& message, Section section,
                                   std::int32_t index, std::exception_ptr cause)
    : Error(code, message), section_(section), index_(index), cause_(std::move(cause)) {}

namespace {

constexpr int kSectionCount = 2;

const char* section_word(Section s) { return s == Section::Forward ? "forward" : "pullback"; }

bool bit(std::uint32_t mask, int k) { return ((mask >> k) & 1u) != 0; }

const char* role_prefix(TensorRole role) {
  switch (role) {
    case TensorRole::Input: return "<Input>";
    case TensorRole::Param: return "<Param>";
    default: return "";
  }
}

bool valid_rank(const TensorRef& t) { return t.rank >= 0 && t.rank <= kMaxRank; }

std::string ref_shape(const TensorRef& t) {
  if (!valid_rank(t)) return "(rank " + std::to_string(t.rank) + ")";
  return shape_to_string(std::span<const std::int64_t>(t.shape, static_cast<std::size_t>(t.rank)));
}

std::string ref_strides(const TensorRef& t) {
  if (!valid_rank(t)) return "(rank " + std::to_string(t.rank) + ")";
  return shape_to_string(std::span<const std::int64_t>(t.strides, static_cast<std::size_t>(t.rank)));
}

bool known_dtype(DType t) { return static_cast<int>(t) < kDTypeCount; }

std::int64_t ref_numel(const TensorRef& t) {
  std::int64_t n = 1;
  for (int d = 0; d < t.rank; ++d) n *= t.shape[d];
  return n;
}

// True if every dim of t is > 0 (t has elements; rank 0 has one).
bool has_elements(const TensorRef& t) {
  for (int d = 0; d < t.rank; ++d)
    if (t.shape[d] <= 0) return false;
  return true;
}

enum class Extent { Empty, Ok, Overflow };

// Byte range [lo, hi) reachable from t.data (t has a valid rank, known dtype
// and sizes >= 0). Empty if t has no elements; Overflow if the range does not
// fit in the address space (huge sizes or strides), so it cannot be compared.
Extent byte_range(const TensorRef& t, std::uintptr_t& lo, std::uintptr_t& hi) {
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
bool same_view(const TensorRef& a, const TensorRef& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
    if (a.shape[d] > 1 && a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

// The first n elements of t in row-major order of its visible shape:
// "(0.0 1.0 2.0 ...)".
std::string first_elements(const TensorRef& t, int n) {
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
std::string format_seconds(double v) {
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

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

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

VM::Impl::Impl(const Program& p) : prog(p) {
  validate();
  gathered.assign(prog.operands.size(), TensorRef{});
  table.assign(prog.tensors.size(), TensorRef{});
  const std::span<const Instruction> iseqs[kSectionCount] = {prog.forward, prog.backward};
  for (int s = 0; s < kSectionCount; ++s) {
    sections[s].iseq = iseqs[s];
    for (std::size_t i = 0; i < iseqs[s].size(); ++i) {
      const Instruction& in = iseqs[s][i];
      if (in.fn == nullptr) continue;
      sections[s].steps.push_back(Step{in.fn, gathered.data() + in.first_operand,
                                       prog.scalars.data() + in.first_scalar,
                                       static_cast<std::int32_t>(i), writes_result(in)});
    }
  }
  if (const char* v = env("WFGEN_VM_OPT_LEVEL")) {
    if (std::strcmp(v, "1") == 0) level = OptLevel::Safe;
    else if (std::strcmp(v, "3") == 0) level = OptLevel::Fast;
  }
  if (const char* v = env("WFGEN_LOG_VM"); v && std::strcmp(v, "0") != 0) log = &std::cerr;
  refresh();
}

void VM::Impl::validate() const {
  auto bad = [](const std::string& what) { fail(ErrorCode::InvalidArgument, "invalid VM program: " + what); };
  if (!prog.operand_specs.empty() && prog.operand_specs.size() != prog.operands.size()) {
    bad("operand_specs has " + std::to_string(prog.operand_specs.size()) + " entries, expected 0 or " +
        std::to_string(prog.operands.size()) + " (one per operand)");
  }
  for (std::size_t i = 0; i < prog.operands.size(); ++i) {
    const std::int32_t id = prog.operands[i];
    if (id < 0 || static_cast<std::size_t>(id) >= prog.tensors.size()) {
      bad("operand " + std::to_string(i) + " refers to tensor " + std::to_string(id) + ", expected 0.." +
          std::to_string(static_cast<std::int64_t>(prog.tensors.size()) - 1));
    }
  }
  for (const auto& t : prog.tensors) {
    if (t.name == nullptr) bad("a tensor has no name");
  }
  const std::span<const Instruction> iseqs[kSectionCount] = {prog.forward, prog.backward};
  for (int s = 0; s < kSectionCount; ++s) {
    for (std::size_t i = 0; i < iseqs[s].size(); ++i) {
      const Instruction& in = iseqs[s][i];
      const std::string name = std::string(section_word(static_cast<Section>(s))) + " instruction " +
                               std::to_string(i) + " (" + (in.op ? in.op : "null op") + ")";
      if (in.op == nullptr) bad(name + " has no op name");
      if (in.n_operands < 0 || in.n_operands > kMaxOperands) {
        bad(name + " has " + std::to_string(in.n_operands) + " operands, expected 0.." +
            std::to_string(kMaxOperands));
      }
      if (in.first_operand < 0 ||
          static_cast<std::size_t>(in.first_operand) + static_cast<std::size_t>(in.n_operands) >
              prog.operands.size()) {
        bad(name + " has operands " + std::to_string(in.first_operand) + ".." +
            std::to_string(in.first_operand + in.n_operands) + ", beyond the " +
            std::to_string(prog.operands.size()) + " operands of the program");
      }
      if (in.n_scalars < 0 || in.first_scalar < 0 ||
          static_cast<std::size_t>(in.first_scalar) + static_cast<std::size_t>(in.n_scalars) >
              prog.scalars.size()) {
        bad(name + " has scalars " + std::to_string(in.first_scalar) + ".." +
            std::to_string(in.first_scalar + in.n_scalars) + ", beyond the " +
            std::to_string(prog.scalars.size()) + " scalars of the program");
      }
      const std::uint32_t all = in.n_operands >= 32 ? ~0u : ((1u << in.n_operands) - 1u);
      if ((in.written | in.saved) & ~all) bad(name + " marks operands beyond its " +
                                              std::to_string(in.n_operands) + " as written or saved");
    }
  }
}

// --- text --------------------------------------------------------------------

std::string VM::Impl::operand_text(const Instruction& in, int k, bool with_type, const TensorRef* ops) const {
  const std::size_t pos = static_cast<std::size_t>(in.first_operand + k);
  const std::int32_t id = prog.operands[pos];
  const TensorInfo& info = prog.tensors[static_cast<std::size_t>(id)];
  std::string s = role_prefix(info.role);
  if (!with_type) return s + info.name;
  const bool sv = bit(in.saved, k);
  if (sv) s += "SV4BW(";
  s += info.name;
  s += '{';
  if (prepared) {
    const TensorRef& t = ops ? ops[k] : table[static_cast<std::size_t>(id)];
    s += known_dtype(t.dtype) ? dtype_c_name(t.dtype) : "?";
    s += ", " + ref_shape(t);
  } else if (!prog.operand_specs.empty()) {
    const OperandSpec& spec = prog.operand_specs[pos];
    s += (spec.flags & OperandSpec::kAnyDType) ? "?" : dtype_c_name(spec.dtype);
    if (spec.rank < 0) {
      s += ", ?";
    } else {
      s += ", (";
      for (int d = 0; d < spec.rank; ++d) s += d ? " ?" : "?";
      s += ')';
    }
  } else {
    s += "?, ?";
  }
  s += '}';
  if (sv) s += ')';
  return s;
}

std::string VM::Impl::body(const Instruction& in, const TensorRef* ops) const {
  std::string outs, args;
  for (int k = 0; k < in.n_operands; ++k) {
    if (bit(in.written, k)) {
      if (!outs.empty()) outs += ' ';
      outs += operand_text(in, k, false);
    }
    if (k) args += ' ';
    args += operand_text(in, k, true, ops);
  }
  return (outs.empty() ? "" : outs + " <= ") + "op(" + args + ")>";
}

std::string VM::Impl::where(Section s, std::int32_t i) const {
  const Instruction& in = state(s).iseq[static_cast<std::size_t>(i)];
  std::string w = s == Section::Forward ? "instruction " : "pullback instruction ";
  w += std::to_string(i) + " " + head(in) + " : " + body(in, prepared ? gathered.data() + in.first_operand : nullptr);
  if (in.source && *in.source) w += std::string(" (") + in.source + ")";
  return w;
}

std::size_t VM::Impl::distinct_tensors(std::span<const Instruction> iseq) const {
  std::set<std::int32_t> ids;
  for (const auto& in : iseq)
    for (int k = 0; k < in.n_operands; ++k) ids.insert(prog.operands[static_cast<std::size_t>(in.first_operand + k)]);
  return ids.size();
}

std::size_t VM::Impl::distinct_scalars(std::span<const Instruction> iseq) const {
  std::set<std::int32_t> ids;
  for (const auto& in : iseq)
    for (int k = 0; k < in.n_scalars; ++k) ids.insert(in.first_scalar + k);
  return ids.size();
}

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

// --- logging -----------------------------------------------------------------

void VM::Impl::log_operands(const Instruction& in, const TensorRef* ops, bool after) const {
  std::ostream& out = *log;
  for (int k = 0; k < in.n_operands; ++k) {
    if (after && !bit(in.written, k)) continue;
    out << (after ? "    out " : "    arg ") << k << ' ' << operand_text(in, k, true, ops) << " = "
        << first_elements(ops[k], log_elements) << '\n';
  }
}

void VM::Impl::run_logged(Section s) {
  const auto& iseq = state(s).iseq;
  std::ostream& out = *log;
  for (std::size_t i = 0; i < iseq.size(); ++i) {
    const Instruction& in = iseq[i];
    TensorRef* ops = gathered.data() + in.first_operand;
    out << "[wfgen vm] " << section_word(s) << ' ' << i << '/' << iseq.size() << ' ' << head(in) << " : "
        << body(in, ops);
    if (in.source && *in.source) out << "  ; " << in.source;
    out << '\n';
    if (in.fn == nullptr) {
      out << "    (view, nothing to run)\n";
      continue;
    }
    log_operands(in, ops, false);
#if WFGEN_EXCEPTIONS
    try {
      detail::ResultScope scope(writes_result(in));
      in.fn(ops, prog.scalars.data() + in.first_scalar);
    } catch (...) {
      out << "    (threw)\n";
      out.flush();
      rethrow_wrapped(s, static_cast<std::int32_t>(i));
    }
#else
    out.flush();  // a failing kernel aborts: show what ran
    detail::ResultScope scope(writes_result(in));
    in.fn(ops, prog.scalars.data() + in.first_scalar);
#endif
    log_operands(in, ops, true);
  }
  out.flush();
}

// --- VM ----------------------------------------------------------------------

VM::VM(const Program& program) : impl_(std::make_shared<Impl>(program)) {}

void VM::set_opt_level(OptLevel level) {
  const int v = static_cast<int>(level);
  if (v < 1 || v > 3) {
    fail(ErrorCode::InvalidArgument, "opt level " + std::to_string(v) + " is not 1, 2 or 3");
  }
  impl_->level = level;
  impl_->refresh();
}
OptLevel VM::opt_level() const { return impl_->level; }
void VM::set_logging(std::ostream* out) {
  impl_->log = out;
  impl_->refresh();
}
void VM::set_logging_elements(int n) { impl_->log_elements = std::max(0, n); }
bool VM::prepared() const { return impl_->prepared; }

const Program& VM::program() const { return impl_->prog; }

namespace {

// The first failure of `check` over both sections, with where it happened.
template <class F>
Status first_failure(F&& check, Section* section, std::int32_t* at) {
  for (Section s : {Section::Forward, Section::Backward}) {
    if (Status r = check(s, at); !r.ok()) {
      *section = s;
      return r;
    }
  }
  return {};
}

}  // namespace

Status VM::try_prepare(const TensorRef* table, bool check_all) {
  Impl& m = *impl_;
  if (table == nullptr && !m.prog.tensors.empty()) {
    return Status(ErrorCode::NullBuffer,
                  "VM::prepare got a null tensor table, expected " + std::to_string(m.prog.tensors.size()) + " entries");
  }
  std::copy(table, table + m.prog.tensors.size(), m.table.begin());
  for (std::size_t i = 0; i < m.prog.operands.size(); ++i) {
    m.gathered[i] = m.table[static_cast<std::size_t>(m.prog.operands[i])];
  }
  for (auto& st : m.sections) st.checked = false;
  m.prepared = true;
  Section section = Section::Forward;
  std::int32_t at = -1;
  Status r = first_failure([&](Section s, std::int32_t* i) { return m.check(s, !check_all, i); }, &section, &at);
  if (!r.ok()) {
    m.prepared = false;  // run() refuses a table that failed
    m.refresh();
    return r;
  }
  if (check_all) {
    for (auto& st : m.sections) st.checked = true;
  }
  m.refresh();
  return {};
}

void VM::prepare(const TensorRef* table) {
  Impl& m = *impl_;
  if (table == nullptr && !m.prog.tensors.empty()) {
    fail(ErrorCode::NullBuffer, "VM::prepare got a null tensor table, expected " +
                                           std::to_string(m.prog.tensors.size()) + " entries");
  }
  if (Status r = try_prepare(table, false); !r.ok()) {
    // Find the instruction again for InstructionError's section() and instruction().
    Section section = Section::Forward;
    std::int32_t at = -1;
    (void)first_failure([&](Section s, std::int32_t* i) { return m.check(s, true, i); }, &section, &at);
    m.raise(section, at, r);
  }
}

void VM::run(Section section) {
  Impl& m = *impl_;
  Impl::SectionState& st = m.state(section);
  if (!st.ready) {  // the first run after prepare() at opt level 2, level 1, logging, or not prepared
    if (!m.prepared) {
      fail(ErrorCode::InvalidArgument,
           std::string("VM::run(") + section_word(section) + ") before prepare(), expected the tensor table first");
    }
    m.check_or_raise(section);
    if (m.log != nullptr) {
      m.run_logged(section);
      return;
    }
  }
  // The hot loop: one indirect call per instruction.
  const Impl::Step* steps = st.steps.data();
  const std::size_t n = st.steps.size();
  std::size_t i = 0;
#if WFGEN_EXCEPTIONS
  try {
    for (; i < n; ++i) steps[i].call();
  } catch (...) {
    m.rethrow_wrapped(section, steps[i].index);
  }
#else
  for (; i < n; ++i) steps[i].call();
#endif
}

std::string VM::describe(Section section, std::size_t index) const {
  const Impl& m = *impl_;
  const auto& iseq = m.state(section).iseq;
  if (index >= iseq.size()) {
    fail(ErrorCode::OutOfBounds, "VM::describe: instruction " + std::to_string(index) + " of " +
                                            section_word(section) + ", expected 0.." +
                                            std::to_string(static_cast<std::int64_t>(iseq.size()) - 1));
  }
  return m.line(iseq[index], 0);
}

std::string VM::disassemble() const {
  const Impl& m = *impl_;
  std::string out = "disassemble-waffe2-ir:\n";
  auto section = [&](const char* title, std::span<const Instruction> iseq) {
    out += title;
    const std::size_t w = m.head_width(iseq);
    for (const auto& in : iseq) out += m.line(in, w) + "\n";
    out += "\n" + std::to_string(iseq.size()) + " Instructions | " + std::to_string(m.distinct_tensors(iseq)) +
           " Tensors | " + std::to_string(m.distinct_scalars(iseq)) + " Scalars\n\n\n";
  };
  section(" [Forward]: \n", m.prog.forward);
  if (!m.prog.backward.empty()) section(" [Pullback]: \n", m.prog.backward);
  return out;
}

std::string VM::profile(Section section, int n_sample, int top_k) {
  Impl& m = *impl_;
  if (n_sample < 1) {
    fail(ErrorCode::InvalidArgument, "VM::profile: n_sample " + std::to_string(n_sample) + ", expected >= 1");
  }
  if (!m.prepared) {
    fail(ErrorCode::InvalidArgument,
                std::string("VM::profile(") + section_word(section) + ") before prepare(), expected the tensor table first");
  }
  Impl::SectionState& st = m.state(section);
  const auto& iseq = st.iseq;
  using Clock = std::chrono::steady_clock;
  std::vector<double> total(iseq.size(), 0.0);  // seconds over all samples
  for (int sample = 0; sample < n_sample; ++sample) {
    m.check_or_raise(section);
    for (const auto& step : st.steps) {
      const auto t0 = Clock::now();
#if WFGEN_EXCEPTIONS
      try {
        step.call();
      } catch (...) {
        m.rethrow_wrapped(section, step.index);
      }
#else
      step.call();
#endif
      const auto t1 = Clock::now();
      total[static_cast<std::size_t>(step.index)] += std::chrono::duration<double>(t1 - t0).count();
    }
  }
  std::vector<double> mean(iseq.size());
  double sum = 0, sv4bw = 0;
  for (std::size_t i = 0; i < iseq.size(); ++i) {
    mean[i] = total[i] / n_sample;
    sum += mean[i];
    if (iseq[i].written & iseq[i].saved) sv4bw += mean[i];
  }
  const double average = iseq.empty() ? 0.0 : sum / static_cast<double>(iseq.size());

  std::string out = "[Sorted by Instructions]\n Time(s)   |   Instruction ( * - Beyonds the average execution time)\n";
  const std::size_t w = m.head_width(iseq);
  for (std::size_t i = 0; i < iseq.size(); ++i) {
    std::string t = format_seconds(mean[i]);
    if (mean[i] > average) t += '*';
    out += pad(t, 10) + " | " + m.line(iseq[i], w) + "\n";
  }
  out += "\n" + std::to_string(iseq.size()) + " Instructions | " + std::to_string(m.distinct_tensors(iseq)) +
         " Tensors | Overheads due to SV4BW(...) -> " + format_seconds(sv4bw) + "(s) \n";
  out += "\n Total Time: " + format_seconds(sum) + " sec\n\n[Sorted by topK]\n";

  // Group by op, in order of first appearance, then by total time.
  struct Group {
    std::string head;
    double time;
  };
  std::vector<Group> groups;
  for (std::size_t i = 0; i < iseq.size(); ++i) {
    const std::string h = m.head(iseq[i]);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.head == h; });
    if (it == groups.end()) groups.push_back({h, mean[i]});
    else it->time += mean[i];
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.time > b.time; });
  if (top_k >= 0 && groups.size() > static_cast<std::size_t>(top_k)) groups.resize(static_cast<std::size_t>(top_k));
  std::size_t gw = std::string(" Instruction").size();
  for (const auto& g : groups) gw = std::max(gw, g.head.size());
  out += pad(" Instruction", gw) + " | Total time (s) | Time/Total (n-sample=" + std::to_string(n_sample) + ")\n";
  for (const auto& g : groups) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.6g", sum > 0 ? 100.0 * g.time / sum : 0.0);
    out += pad(g.head, gw) + " | " + pad(format_seconds(g.time), 14) + " | " + pct + "%\n";
  }
  return out;
}

}  // namespace wfgen::rt

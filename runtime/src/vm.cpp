// The instruction-sequence VM (include/wfgen/vm.hpp): the program checked
// when it is built, operands gathered by prepare(), the run loop and the opt
// levels. Its checks are in vm_checks.cpp, its text (disassembly, logging,
// profile) in vm_text.cpp.
#include "vm_impl.hpp"

namespace wfgen::rt {

InstructionError::InstructionError(ErrorCode code, const std::string& message, Section section,
                                   std::int32_t index, std::exception_ptr cause)
    : Error(code, message), section_(section), index_(index), cause_(std::move(cause)) {}

VM::Impl::Impl(const Program& p) : prog(p) {
  validate();
  gathered.assign(prog.operands.size(), TensorRef{});
  table.assign(prog.tensors.size(), TensorRef{});
  for (int s = 0; s < kSectionCount; ++s) {
    sections[s].iseq = section_iseq(prog, kSections[s]);
    for (std::size_t i = 0; i < sections[s].iseq.size(); ++i) {
      const Instruction& in = sections[s].iseq[i];
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
  if (!prog.backward_fresh.empty() && prog.backward_fresh.size() != prog.backward.size()) {
    bad("backward_fresh has " + std::to_string(prog.backward_fresh.size()) + " instructions, expected 0 or " +
        std::to_string(prog.backward.size()) + " (one per pullback instruction)");
  }
  for (Section section : kSections) {
    const std::span<const Instruction> iseq = section_iseq(prog, section);
    for (std::size_t i = 0; i < iseq.size(); ++i) {
      const Instruction& in = iseq[i];
      const std::string name = std::string(section_word(section)) + " instruction " +
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


std::vector<Instruction> with_kernels(std::span<const Instruction> iseq, std::span<const KernelSwap> swaps) {
  std::vector<Instruction> out(iseq.begin(), iseq.end());
  for (const KernelSwap& s : swaps) {
    if (s.index < 0 || static_cast<std::size_t>(s.index) >= out.size()) {
      fail(ErrorCode::InvalidArgument, "with_kernels: instruction " + std::to_string(s.index) + " of " +
                                           std::to_string(out.size()) + ", expected 0.." +
                                           std::to_string(static_cast<std::int64_t>(out.size()) - 1));
    }
    Instruction& in = out[static_cast<std::size_t>(s.index)];
    in.op = s.op;
    in.kernel = s.kernel;
    in.fn = s.fn;
  }
  return out;
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

// The first failure of `check` over every section, with where it happened.
template <class F>
Status first_failure(F&& check, Section* section, std::int32_t* at) {
  for (Section s : vm_internal::kSections) {
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

}  // namespace wfgen::rt

// The VM as text (include/wfgen/vm.hpp): instructions as
// disassemble-waffe2-ir prints them, the log of a run (WFGEN_LOG_VM) and the
// per-instruction profile.
#include "vm_impl.hpp"

namespace wfgen::rt {

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
  std::string w = s == Section::Forward ? "instruction " : std::string(section_word(s)) + " instruction ";
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
  if (!m.prog.backward_fresh.empty()) section(" [Pullback after zero_grad()]: \n", m.prog.backward_fresh);
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

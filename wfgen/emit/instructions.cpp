// The instruction tables of a generated model and `wfgen disasm`
// (emit_model.hpp, model_parts.hpp).
#include "wfgen/emit/model_parts.hpp"

#include <algorithm>
#include <bit>
#include <map>
#include <set>

#include "wfgen/support/names.hpp"

namespace wfgen::emit {

using namespace detail;

namespace {

// The calls whose value is a result of the model that nothing reads after
// it is written (no other call reads its storage, through any view of it):
// their kernels may stream it past the caches (OperandSpec::kResult). Not in
// a build with a backward pass, which copies its results out of its memory.
std::set<int> unread_results(const Graph& g) {
  std::set<int> out;
  if (g.has_backward) return out;
  std::set<int> read;  // the storage (Graph::root) of every operand a call reads
  for (const Value& u : g.values) {
    if (u.kind != Kind::Call) continue;
    for (int o : u.operands)
      if (o != u.id) read.insert(g.root(o));
    if (u.init_from >= 0) read.insert(g.root(u.init_from));
  }
  for (int id : g.outputs)
    if (g[id].kind == Kind::Call && !g[id].backward && read.count(g.root(id)) == 0) out.insert(id);
  return out;
}

// A view written by a kernel, as the disassembly shows it: its storage and
// the window, TID302[:, :, 48:64] (a slice's gradient that its product
// writes in place, passes::write_into_windows).
std::string window_text(const Graph& g, const std::vector<std::string>& names, int id) {
  const Value& v = g[id];
  if (v.kind != Kind::View) return names[static_cast<std::size_t>(id)];
  std::string base = window_text(g, names, v.base);
  if (v.view == ViewKind::Permute) {
    std::string perm;
    for (int x : v.perm) perm += (perm.empty() ? "" : ", ") + num(x);
    return base + ".permute(" + perm + ")";
  }
  if (v.view != ViewKind::Slice) return base + "." + graph::view_name(v.view) + "(" + shape::shape_str(v.shape) + ")";
  const Shape& whole = g[v.base].shape;
  std::string axes;
  for (std::size_t k = 0; k < v.starts.size(); ++k) {
    const bool all = v.starts[k].is_known() && v.starts[k].value() == 0 && v.steps[k].is_known() && v.steps[k].value() == 1 &&
                     v.shape[k] == whole[k];
    std::string axis = all ? ":" : v.starts[k].str() + ":" + v.stops[k].str();
    if (!(v.steps[k].is_known() && v.steps[k].value() == 1)) axis += ":" + v.steps[k].str();
    axes += (k == 0 ? "" : ", ") + axis;
  }
  return base + "[" + axes + "]";
}

}  // namespace

std::vector<ModelInstruction> plan_instructions(const Graph& g, std::vector<std::string>* list_consts_out) {
  std::vector<ModelInstruction> insts;
  std::vector<std::string> list_consts;
  const std::set<int> results = unread_results(g);
  const std::set<int> stored = stored_when_fresh(g);
  for (const auto& v : g.values) {
    if (v.kind != Kind::Call) continue;
    std::string where_from = v.source + "  (" + v.loc.str() + ")";
    auto spec_of = [&](int id, int group, std::uint8_t flags) {
      return "{" + dtype_cpp(g[id].dtype) + ", " + num(static_cast<std::int64_t>(g[id].shape.size())) + ", " + num(group) + ", " +
             num(flags) + "}";
    };
    if (v.init_from >= 0) {
      ModelInstruction c;
      c.backward = v.backward;
      c.op = "COPY-CPU";
      c.kernel = lower::kernel_name("copy", "cpu", v.dtype, v.rank);
      c.source = where_from;
      c.operands = {v.init_from, v.id};
      c.written = 2;
      c.specs = {spec_of(v.init_from, 0, 0), spec_of(v.id, 0, 0)};
      insts.push_back(std::move(c));
    }
    ModelInstruction in;
    in.backward = v.backward;
    in.op = upper(v.node->name) + (v.accumulate ? "-ACC-" : "-") + upper(v.impl->device);
    in.kernel = kernel_of(v);
    if (stored.count(v.id) != 0) {
      in.fresh_op = upper(v.node->name) + "-" + upper(v.impl->device);
      in.fresh_kernel = lower::kernel_name(v.node->name, v.impl->device, v.kernel_dtype(), v.rank, false);
    }
    in.source = where_from;
    in.operands = v.operands;
    bool ew = v.impl->kind == spec::BodyKind::Elementwise;
    bool no_alias = v.impl->kind == spec::BodyKind::Gemm || v.impl->kind == spec::BodyKind::Builtin ||
                    v.impl->kind == spec::BodyKind::Reduce || v.impl->kind == spec::BodyKind::Cpp ||
                    v.impl->kind == spec::BodyKind::Fused;
    for (std::size_t k = 0; k < v.operands.size(); ++k) {
      bool w = v.operands[k] == v.id;
      if (w) in.written |= 1u << k;
      std::uint8_t flags = w && no_alias ? 4 : 0;
      if (w && results.count(v.id) != 0) flags |= 8;  // OperandSpec::kResult
      in.specs.push_back(spec_of(v.operands[k], ew ? 0 : -1, flags));
    }
    for (std::size_t k = 0; k < v.args.size(); ++k) {
      const auto& a = v.args[k];
      std::string s;
      if (const auto* i = std::get_if<std::int64_t>(&a)) s = "{.i = " + num(*i) + "}";
      else if (const auto* f = std::get_if<double>(&a)) s = "{.f = " + fp(*f) + "}";
      else if (const auto* b = std::get_if<bool>(&a)) s = std::string("{.b = ") + (*b ? "true" : "false") + "}";
      else if (const auto* l = std::get_if<std::vector<std::int64_t>>(&a)) {
        std::string arr = "kList" + num(static_cast<std::int64_t>(list_consts.size()));
        std::string vals;
        for (auto x : *l) vals += (vals.empty() ? "" : ", ") + num(x);
        list_consts.push_back("const std::int64_t " + arr + "[] = {" + (vals.empty() ? "0" : vals) + "};");
        s = "{.ints = " + arr + ", .count = " + num(static_cast<std::int64_t>(l->size())) + "}";
      } else if (const auto* fl = std::get_if<std::vector<double>>(&a)) {
        std::string arr = "kList" + num(static_cast<std::int64_t>(list_consts.size()));
        std::string vals;
        for (auto x : *fl) vals += (vals.empty() ? "" : ", ") + fp(x);
        list_consts.push_back("const double " + arr + "[] = {" + (vals.empty() ? "0.0" : vals) + "};");
        s = "{.floats = " + arr + ", .count = " + num(static_cast<std::int64_t>(fl->size())) + "}";
      }
      in.scalars.push_back(s);
    }
    insts.push_back(std::move(in));
  }
  if (list_consts_out) *list_consts_out = std::move(list_consts);
  return insts;
}

std::vector<lower::KernelRequest> kernels_needed(const spec::Spec& spec, const spec::Build& build, const Graph& g) {
  std::set<lower::KernelRequest> out;
  if (build.optimizer && g.has_backward) {
    for (const auto& [param, grad] : trainable(g)) {
      int rank = static_cast<int>(g[g.params[param]].shape.size());
      out.insert({optimizer_impl(spec, build, rank), build.dtype, rank, true});
    }
  }
  const std::set<int> stored = stored_when_fresh(g);
  for (const auto& v : g.values) {
    if (v.kind != Kind::Call) continue;
    out.insert({v.impl, v.kernel_dtype(), v.rank, true, v.accumulate});
    if (stored.count(v.id) != 0) out.insert({v.impl, v.kernel_dtype(), v.rank, true, false});
    if (v.init_from >= 0) {
      const spec::Impl* c = copy_impl(spec);
      WFGEN_ASSERT(c, "the standard node copy has no cpu implementation");
      out.insert({c, v.dtype, v.rank, true});
    }
  }
  return {out.begin(), out.end()};
}

std::string disassemble(const Graph& g) {
  const std::vector<ModelInstruction> insts = plan_instructions(g, nullptr);
  const std::vector<std::string> names = tensor_names(g);
  auto head = [](const std::string& op) { return "<WfInst[op=" + op + "]"; };
  std::size_t width = 0;
  for (const auto& in : insts) width = std::max({width, head(in.op).size(), head(in.fresh_op).size()});
  std::set<int> tensors;
  // One instruction as `op` (the pullback after zero_grad() shows its own).
  auto text = [&](const ModelInstruction& in, const std::string& op) {
    std::string line = head(op);
    line += std::string(width - line.size(), ' ') + " : ";
    std::string outs, args;
    for (std::size_t k = 0; k < in.operands.size(); ++k) {
      int id = in.operands[k];
      tensors.insert(id);
      const Value& v = g[id];
      std::string prefix = v.kind == Kind::Input ? "<Input>" : v.kind == Kind::Param ? "<Param>" : "";
      std::string name = prefix + names[static_cast<std::size_t>(id)];
      if (in.written & (1u << k)) outs += (outs.empty() ? "" : " ") + name;
      // An integer input is read as the build's dtype, converted before the pass.
      const std::string dtype = std::string(rt::dtype_c_name(v.dtype)) +
                                (v.caller_dtype ? std::string(" from ") + rt::dtype_c_name(*v.caller_dtype) : "");
      args += (args.empty() ? "" : " ") + name + "{" + dtype + ", " + shape::shape_str(v.shape) + "}";
    }
    const int into = in.written == 0 ? -1 : g[in.operands[static_cast<std::size_t>(std::countr_zero(in.written))]].write_to;
    const std::string window = into >= 0 && g[into].kind == Kind::View ? " into " + window_text(g, names, into) : "";
    return line + outs + " <= op(" + args + ")>" + window + "\n";
  };
  std::string out = "disassemble-waffe2-ir:\n";
  std::size_t scalars = 0;
  for (bool pullback : {false, true}) {
    if (pullback && !g.has_backward) break;
    out += pullback ? "\n [Pullback]: \n" : " [Forward]: \n";
    for (const auto& in : insts) {
      if (in.backward != pullback) continue;
      scalars += in.scalars.size();
      out += text(in, in.op);
    }
  }
  out += "\n" + num(static_cast<std::int64_t>(insts.size())) + " Instructions | " + num(static_cast<std::int64_t>(tensors.size())) +
         " Tensors | " + num(static_cast<std::int64_t>(scalars)) + " Scalars\n";
  if (!g.has_backward) return out;
  // The first backward() after zero_grad() runs the pullback with these
  // instead (Program::backward_fresh), on buffers cleared only where listed.
  out += "\n [Pullback after zero_grad()]: the pullback, where a gradient's GEMM stores it instead of adding:\n";
  for (const auto& in : insts)
    if (!in.fresh_op.empty()) out += text(in, in.fresh_op);
  std::string cleared;
  for (int k : cleared_when_fresh(g)) cleared += " " + names[static_cast<std::size_t>(g.grads[static_cast<std::size_t>(k)])];
  out += " cleared before it:" + (cleared.empty() ? std::string(" none") : cleared) + "\n";
  return out;
}

}  // namespace wfgen::emit

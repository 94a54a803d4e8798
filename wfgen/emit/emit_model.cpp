// A build as a C++ class (emit_model.hpp). The fixed text of the class is
// in templates/: model_class.hpp.in (the header), model_class.cpp.in (the
// source), model_training.cpp.in and model_step.cpp.in (the training API);
// the functions below compute what fills their named holes, one function
// (or a few) per hole. A line of generated code that is not in a template
// comes from the function named like the hole it fills. The instruction
// tables are planned in instructions.cpp.
#include "wfgen/emit/emit_model.hpp"

#include "wfgen/emit/model_parts.hpp"

#include <algorithm>

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/support/names.hpp"

namespace wfgen::emit {

using namespace detail;

namespace {

// What the holes of one build's class are computed from.
struct ModelText {
  ModelText(const spec::Spec& s, const spec::Build& b, const Graph& graph, const passes::MemoryPlan& p)
      : spec(s), build(b), model(*s.find_model(b.model)), g(graph), plan(p) {}
  const spec::Spec& spec;
  const spec::Build& build;
  const spec::Model& model;
  const Graph& g;
  const passes::MemoryPlan& plan;
  std::string cls;
  std::string where;
  std::vector<std::string> names;        // the tensor table's names, by value id
  std::vector<std::string> list_consts;  // static arrays for list arguments
  std::vector<ModelInstruction> insts;
  std::string input_params;  // "const wfgen::rt::Tensor& X, ..."
  std::string input_args;    // "X, ..."
  std::string into_params;   // forward_into's: the outputs, then the inputs
  std::string into_ptrs;     // "&Y, ..."
  std::string n_outputs;
};

std::string count(std::size_t n) { return num(static_cast<std::int64_t>(n)); }

// "a, b, c" of f(item) over `items`.
template <class Items, class F>
std::string joined(const Items& items, F&& f) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + f(item);
  return out;
}

std::string index_in(const std::vector<int>& ids, int id) { return num(std::find(ids.begin(), ids.end(), id) - ids.begin()); }

// --- the header ---------------------------------------------------------------------

std::string header_text(const ModelText& m, const KernelEmitOptions& options) {
  const Graph& g = m.g;
  return fill_template(template_text("model_class.hpp.in"),
                       {{"build", m.build.name},
                        {"model", m.model.name},
                        {"build_loc", comment_text(m.build.loc.str())},
                        {"where_comment", comment_text(m.model.name + ": " + m.where)},
                        {"ns", options.ns},
                        {"cls", m.cls},
                        {"seed", num(static_cast<std::int64_t>(m.build.seed))},
                        {"where", comment_text(m.where)},
                        {"forward_params", m.input_params},
                        {"try_forward_params", m.input_params.empty() ? "" : ", " + m.input_params},
                        {"input_params", m.input_params},
                        {"into_params", m.into_params},
                        {"n_outputs", m.n_outputs},
                        {"into_note", g.has_backward
                                          ? "Outputs are copied out of the model's memory (the pullback reads the values the\n  // forward pass computed, which a caller's tensor would expose)."
                                          : "A contiguous output tensor that shares no memory with an input, a parameter or\n  // another output is written by the kernel that computes it (no copy); any other\n  // is copied into after the whole forward pass, so forward_into(X, X) is X = f(X)."},
                        {"training_api", g.has_backward ? training_declarations(m.build) : ""},
                        {"index_members", index_members(g)},
                        {"training_members", g.has_backward ? training_members(m.build) : ""}});
}

// --- the tables (anonymous namespace of the source) ---------------------------------

std::string tensor_table(const ModelText& m) {
  CodeWriter c(2);
  for (const auto& v : m.g.values) c.line("{" + literal(m.names[static_cast<std::size_t>(v.id)]) + ", TensorRole::" + role_of(v) + "},");
  return c.str();
}

// One array of the instructions of the forward pass or of the pullback.
void instruction_array(CodeWriter& c, const ModelText& m, bool pullback, std::int64_t& first_op, std::int64_t& first_scalar) {
  c.comment(pullback ? "[Pullback]: the backward pass, derived by wfgen from the nodes' backward expressions."
                     : "[Forward]: one kernel call per line, commented with the body line it implements.");
  c.open(std::string("const wfgen::rt::Instruction ") + (pullback ? "kBackward" : "kForward") + "[] =");
  for (const auto& in : m.insts) {
    if (in.backward != pullback) continue;
    c.comment(comment_text(in.source));
    c.line("{" + literal(in.op) + ", " + literal(in.kernel) + ", &" + in.kernel + "_erased, " + num(first_op) + ", " +
           count(in.operands.size()) + ", " + num(in.written) + "u, 0u, " + num(first_scalar) + ", " + count(in.scalars.size()) + ", " +
           literal(in.source) + "},");
    first_op += static_cast<std::int64_t>(in.operands.size());
    first_scalar += static_cast<std::int64_t>(in.scalars.size());
  }
  c.close(";");
  c.line();
}

// The pullback after zero_grad() (Program::backward_fresh): kBackward with
// the kernel of each gradient's GEMM swapped for the one that stores. A
// lambda's statics, not names of the namespace: a unity build of several
// models renames only the tables it knows (tests/CMakeLists.txt).
std::string fresh_pullback(const ModelText& m) {
  CodeWriter c(2);
  c.comment("[Pullback after zero_grad()]: kBackward, except that a gradient's GEMM stores it (beta 0) instead of adding it.");
  c.open("static const wfgen::rt::KernelSwap stored_gradients[] =");
  std::int64_t index = 0;
  for (const auto& in : m.insts) {
    if (!in.backward) continue;
    if (!in.fresh_kernel.empty()) {
      c.line("{" + num(index) + ", " + literal(in.fresh_op) + ", " + literal(in.fresh_kernel) + ", &" + in.fresh_kernel + "_erased},  // " +
             comment_text(in.source));
    }
    ++index;
  }
  c.close(";");
  c.line("static const std::vector<wfgen::rt::Instruction> backward_fresh = wfgen::rt::with_kernels(kBackward, stored_gradients);");
  c.line("return std::span<const wfgen::rt::Instruction>(backward_fresh);");
  return "[] {\n" + c.str() + "  }()";
}

bool has_fresh_variant(const ModelText& m) {
  return std::any_of(m.insts.begin(), m.insts.end(), [](const ModelInstruction& in) { return !in.fresh_kernel.empty(); });
}

// The static arrays of list arguments, the operands, scalars and
// instructions of each section (a model without instructions, whose outputs
// are views of its inputs, has no operand arrays: C++ has no arrays of zero
// elements). `n_scalars`: how many scalars the instructions take.
std::string instruction_tables(const ModelText& m, std::int64_t& n_scalars) {
  CodeWriter c(1);
  for (const auto& l : m.list_consts) c.line(l);
  if (!m.list_consts.empty()) c.line();
  if (!m.insts.empty()) {
    c.comment("Operands of each instruction, in kernel-parameter order.");
    c.open("const std::int32_t kOperands[] =");
    for (const auto& in : m.insts) c.line(joined(in.operands, [](int o) { return num(o); }) + (in.operands.empty() ? "" : ", ") + "// " + in.kernel);
    c.close(";");
    c.open("const wfgen::rt::OperandSpec kOperandSpecs[] =");
    for (const auto& in : m.insts) c.line(joined(in.specs, [](const std::string& s) { return s; }) + (in.specs.empty() ? "" : ", "));
    c.close(";");
  }
  // No table without scalars: program() gives an empty span, `{}` (a span
  // of (kScalars, 0) is ambiguous in libc++ before 15, emscripten 3.1.6's:
  // 0 is also a null pointer, the end of a (first, last) pair).
  if (std::any_of(m.insts.begin(), m.insts.end(), [](const ModelInstruction& in) { return !in.scalars.empty(); })) {
    c.open("const wfgen::rt::ScalarArg kScalars[] =");
    for (const auto& in : m.insts)
      if (!in.scalars.empty()) c.line(joined(in.scalars, [](const std::string& s) { return s; }) + ", // " + in.kernel);
    c.close(";");
    c.line();
  }
  std::int64_t first_op = 0;
  n_scalars = 0;
  for (bool pullback : {false, true})
    if (std::any_of(m.insts.begin(), m.insts.end(), [&](const ModelInstruction& in) { return in.backward == pullback; }))
      instruction_array(c, m, pullback, first_op, n_scalars);
  return c.str();
}

// What kProgram is made of.
std::string program(const ModelText& m, std::int64_t n_scalars) {
  if (m.insts.empty()) return "kTensors, {}, {}, {}, {}, {}";
  const bool any_backward = std::any_of(m.insts.begin(), m.insts.end(), [](const ModelInstruction& in) { return in.backward; });
  const std::string scalars = n_scalars > 0 ? "std::span<const wfgen::rt::ScalarArg>(kScalars, " + num(n_scalars) + ")" : "{}";
  return "kTensors, kOperands, " + scalars + ", kForward, " + (any_backward ? "kBackward" : "{}") + ", kOperandSpecs" +
         (has_fresh_variant(m) ? ", " + fresh_pullback(m) : "");
}

std::string grad_names(const Graph& g) {
  if (!g.has_backward) return "";
  return "  const std::vector<std::string> kGradNames = {" + joined(g.grads, [&](int b) { return literal(g[b].name.substr(5)); }) + "};\n";
}

// --- the constructor ----------------------------------------------------------------

std::string init_parameters(const Graph& g) {
  CodeWriter c(1);
  for (int p : g.params) {
    const Value& v = g[p];
    const spec::Param& sp = *v.param;
    c.comment(v.param_path + " " + shape::shape_str(v.shape) + ", " + init_kind(sp.init.kind) + " (" + sp.loc.str() + ")");
    c.line("params_.push_back(wfgen::rt::Tensor::empty(" + dtype_cpp(v.dtype) + ", " + shape_cpp(v.shape) + "));");
    c.line("wfgen::rt::init_parameter(params_.back(), wfgen::rt::InitKind::" + init_kind(sp.init.kind) + ", " + fp(sp.init.a) + ", " +
           fp(sp.init.b) + ", wf_rng);");
  }
  return c.str();
}

std::string index_values_resize(const Graph& g) {
  const std::vector<int> idx = index_inputs(g);
  return idx.empty() ? "" : "  index_values_.resize(" + count(idx.size()) + ");\n";
}

// Gradient buffers and optimizer state of a training build.
std::string training_state(const ModelText& m) {
  const Graph& g = m.g;
  if (!g.has_backward) return "";
  CodeWriter c(1);
  c.comment("Gradient buffers (zero until backward() adds into them); those of inputs are sized by bind_().");
  c.line("grads_.resize(" + count(g.grads.size()) + ");");
  c.line("seeds_.resize(" + count(g.seeds.size()) + ");");
  for (std::size_t k = 0; k < g.grads.size(); ++k) {
    const Value& owner = g[g[g.grads[k]].grad_of];
    if (owner.kind != Kind::Param) continue;
    c.line("grads_[" + count(k) + "] = wfgen::rt::Tensor::zeros(" + dtype_cpp(owner.dtype) + ", " + shape_cpp(owner.shape) + ");  // " +
           owner.param_path);
  }
  if (m.build.optimizer) {
    c.comment("Optimizer state (" + m.build.optimizer->node + "): zeros, one set per trainable parameter.");
    for (const auto& [param, grad] : trainable(g)) {
      const Value& p = g[g.params[param]];
      for (int j = 0; j < optimizer_state_count(*m.build.optimizer); ++j)
        c.line("state_.push_back(wfgen::rt::Tensor::zeros(" + dtype_cpp(p.dtype) + ", " + shape_cpp(p.shape) + "));  // " + p.param_path);
    }
  }
  return c.str();
}

// --- try_bind_(): symbols, arena, table, VM; every error returned as a Status -------

// Each input against the where line, the run-time dims it binds, and the
// body's asserts on them (checked arithmetic: huge dims never wrap).
std::string bind_inputs(const Graph& g) {
  CodeWriter c(1);
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    const Value& v = g[g.inputs[k]];
    const std::string dims = joined(v.shape, [](const Dim& d) {
      return d.is_known() ? "{nullptr, " + num(d.value()) + "}" : "{" + literal(d.str()) + ", 0}";
    });
    c.line("if (wfgen::rt::Status wf_s = wf_binder.check(" + literal(v.name) + ", inputs_[" + count(k) + "], " +
           dtype_cpp(v.caller_dtype.value_or(v.dtype)) + ", {" + dims + "}); !wf_s.ok()) return wf_s;");
  }
  if (!g.symbols.empty()) c.comment("Run-time dims: checked arithmetic (an overflow is reported by the arena plan, never wrapped).");
  for (std::size_t s = 0; s < g.symbols.size(); ++s)
    c.line("const wfgen::rt::Size " + cpp_identifier(g.symbols[s]) + " = wf_binder.value(" + count(s) + ");");
  return c.str();
}

// An assert of the body on run-time dims: its message with the dims' values.
std::string bind_assertions(const Graph& g) {
  CodeWriter c(1);
  for (const auto& a : g.assertions) {
    c.comment(a.source + "  (" + a.loc.str() + ")");
    std::string cond, values;
    std::vector<std::string> names;
    for (const auto& k : a.all) {
      cond += (cond.empty() ? "" : " && ") + std::string("(") + dim_cpp(k.lhs) + " " + k.op + " " + dim_cpp(k.rhs) + ")";
      for (const auto& d : {k.lhs, k.rhs})
        for (const auto& n : d.symbols())
          if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    for (const auto& n : names) {
      values += std::string(values.empty() ? " + \" (\"" : " + \", \"") + " + " + literal(n + " = ") +
                " + std::to_string(static_cast<std::int64_t>(" + cpp_identifier(n) + "))";
    }
    if (!values.empty()) values += " + \")\"";
    c.open("if (!(" + cond + "))");
    c.line("return wfgen::rt::Status(wfgen::rt::ErrorCode::InvalidArgument, std::string(" + literal(a.loc.str() + ": " + a.message) + ")" +
           values + ");");
    c.close();
  }
  return c.str();
}

std::string arena_slots(const ModelText& m) {
  CodeWriter c(1);
  for (std::size_t s = 0; s < m.plan.slots.size(); ++s) {
    const std::string sizes = joined(m.plan.slots[s], [&](int id) {
      return "wf_plan.bytes(" + dtype_cpp(m.g[id].dtype) + ", " + shape_cpp(m.g[id].shape) + ")";
    });
    c.line("const std::size_t wf_slot" + count(s) + " = wf_plan.slot({" + sizes + "});");
  }
  return c.str();
}

std::string prepare_outputs(const Graph& g) {
  CodeWriter c(2);
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    const Value& o = g[g.outputs[k]];
    const std::string ks = count(k);
    c.line("wf_out_t[" + ks + "] = *wf_outs[" + ks + "];");
    c.line("if (wfgen::rt::Status wf_s = wfgen::rt::prepare_output(" + literal(g.output_names[k]) + ", wf_out_t[" + ks + "], " +
           dtype_cpp(o.dtype) + ", " + shape_cpp(o.shape) + "); !wf_s.ok()) return wf_s;");
  }
  return c.str();
}

// The table entry of an input: the caller's tensor, or for integer inputs
// the build's-dtype copy load_indices_() fills.
void input_entry(CodeWriter& c, const Graph& g, const Value& v, const std::string& lhs) {
  const std::string k = index_in(g.inputs, v.id);
  if (!v.caller_dtype) {
    c.line(lhs + "inputs_[" + k + "].ref();  // " + v.name);
    return;
  }
  const std::string j = index_in(index_inputs(g), v.id);
  c.comment(v.name + " (" + rt::dtype_name(*v.caller_dtype) + " indices) as " + rt::dtype_name(v.dtype) + ", filled by load_indices_()");
  c.line("if (wfgen::rt::Status wf_s = wfgen::rt::Tensor::try_empty(" + dtype_cpp(v.dtype) + ", inputs_[" + k + "].shape(), index_values_[" +
         j + "]); !wf_s.ok()) return wf_s;");
  c.line(lhs + "index_values_[" + j + "].ref();  // " + v.name);
}

// The table entry of a gradient buffer (those of inputs sized here) or of
// an output gradient (a seed).
void gradient_entry(CodeWriter& c, const Graph& g, const Value& v, const std::string& lhs) {
  if (v.kind == Kind::Seed) {
    c.line("if (wfgen::rt::Status wf_s = wfgen::rt::try_zeros(seeds_[" + num(v.seed_of) + "], " + dtype_cpp(v.dtype) + ", " +
           shape_cpp(v.shape) + "); !wf_s.ok()) return wf_s;");
    c.line(lhs + "seeds_[" + num(v.seed_of) + "].ref();  // " + v.name);
    return;
  }
  const std::string k = index_in(g.grads, v.id);
  if (g[v.grad_of].kind == Kind::Input) {
    c.line("if (wfgen::rt::Status wf_s = wfgen::rt::try_zeros(grads_[" + k + "], " + dtype_cpp(v.dtype) + ", " + shape_cpp(v.shape) +
           "); !wf_s.ok()) return wf_s;");
  }
  c.line(lhs + "grads_[" + k + "].ref();  // " + v.name);
}

// The table entry of a kernel's result: the value it writes in place, or
// its arena slot, or (an output) the caller's tensor when it can be.
void call_entry(CodeWriter& c, const ModelText& m, const Value& v, const std::string& lhs) {
  const Graph& g = m.g;
  const std::string& name = m.names[static_cast<std::size_t>(v.id)];
  if (v.write_to >= 0) {
    c.line(lhs + "table_[" + num(v.write_to) + "];  // " + v.node->name + " into " + m.names[static_cast<std::size_t>(v.write_to)]);
    return;
  }
  c.line(lhs + "wf_refs.contiguous(" + literal(name) + ", wf_arena + wf_slot" + num(m.plan.slot_of[static_cast<std::size_t>(v.id)]) + ", " +
         dtype_cpp(v.dtype) + ", " + shape_cpp(v.shape) + ");  // " + name + " = " + v.node->name);
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    if (g.outputs[k] != v.id || !may_write_directly(g, k)) continue;
    const std::string ks = count(k);
    c.comment("The output " + g.output_names[k] + ": the kernel writes the caller's tensor when it can (no copy).");
    c.open("if (wf_outs != nullptr && wfgen::rt::can_write_directly(wf_out_t, " + ks + ", inputs_, params_))");
    c.line("direct_outputs_[" + ks + "] = wf_out_t[" + ks + "];");
    c.line(lhs + "direct_outputs_[" + ks + "].ref();");
    c.close();
  }
}

void view_entry(CodeWriter& c, const ModelText& m, const Value& v, const std::string& lhs) {
  const std::string base = literal(m.names[static_cast<std::size_t>(v.id)]) + ", table_[" + num(v.base) + "]";
  switch (v.view) {
    case ViewKind::Permute: c.line(lhs + "wf_refs.permute(" + base + ", {" + joined(v.perm, [](int x) { return num(x); }) + "});"); break;
    case ViewKind::Reshape: c.line(lhs + "wf_refs.reshape(" + base + ", " + shape_cpp(v.shape) + ");"); break;
    case ViewKind::Broadcast: c.line(lhs + "wf_refs.broadcast(" + base + ", " + shape_cpp(v.shape) + ");"); break;
    case ViewKind::Slice:
      c.line(lhs + "wf_refs.slice(" + base + ", " + shape_cpp(v.starts) + ", " + shape_cpp(v.steps) + ", " + shape_cpp(v.shape) + ");");
      break;
    case ViewKind::Squeeze: c.line(lhs + "wf_refs.squeeze(" + base + ", " + num(v.axis) + ");"); break;
    case ViewKind::Unsqueeze: c.line(lhs + "wf_refs.unsqueeze(" + base + ", " + num(v.axis) + ");"); break;
  }
}

// Every entry of the tensor table, in value order.
std::string table_entries(const ModelText& m) {
  const Graph& g = m.g;
  CodeWriter c(1);
  for (const auto& v : g.values) {
    const std::string lhs = "table_[" + num(v.id) + "] = ";
    switch (v.kind) {
      case Kind::Input: input_entry(c, g, v, lhs); break;
      case Kind::Param: c.line(lhs + "params_[" + index_in(g.params, v.id) + "].ref();  // " + v.param_path); break;
      case Kind::Grad:
      case Kind::Seed: gradient_entry(c, g, v, lhs); break;
      case Kind::Call: call_entry(c, m, v, lhs); break;
      case Kind::View: view_entry(c, m, v, lhs); break;
    }
  }
  return c.str();
}

// Outputs that are copied (forward_into): not onto the memory they are copied from.
std::string check_output_copies(const Graph& g) {
  CodeWriter c(2);
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    const std::string ks = count(k);
    const std::string check = "if (wfgen::rt::Status wf_s = wfgen::rt::check_output_copy(" + literal(g.output_names[k]) + ", wf_out_t[" + ks +
                              "].ref(), table_[" + num(g.outputs[k]) + "]); !wf_s.ok()) return wf_s;";
    if (!may_write_directly(g, k)) {
      c.line(check);
      continue;
    }
    c.open("if (!direct_outputs_[" + ks + "].defined())");
    c.line(check);
    c.close();
  }
  return c.str();
}

// --- forward ------------------------------------------------------------------------

// load_indices_(): the integer inputs' values as the build's dtype, before every forward pass.
std::string load_indices_function(const ModelText& m) {
  const std::vector<int> idx = index_inputs(m.g);
  if (idx.empty()) return "";
  CodeWriter c;
  c.open("wfgen::rt::Status " + m.cls + "::load_indices_()");
  for (std::size_t j = 0; j < idx.size(); ++j) {
    c.line("if (wfgen::rt::Status wf_s = wfgen::rt::load_indices(" + literal(m.g[idx[j]].name) + ", inputs_[" + index_in(m.g.inputs, idx[j]) +
           "], index_values_[" + count(j) + "]); !wf_s.ok()) return wf_s;");
  }
  c.line("return {};");
  c.close();
  c.line();
  return c.str();
}

// take_inputs_(): an input that is the bound one needs no new handle.
std::string take_inputs(const Graph& g) {
  CodeWriter c(1);
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    const std::string ks = count(k), x = cpp_identifier(g[g.inputs[k]].name);
    c.open("if (!" + x + ".matches(bound_inputs_[" + ks + "]))");
    c.line("inputs_[" + ks + "] = " + x + ";");
    c.line("wf_changed = true;");
    c.close();
  }
  return c.str();
}

// After the forward pass: the outputs not written directly, copied to the caller's tensors.
std::string copy_outputs(const Graph& g) {
  CodeWriter c(1);
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    const std::string ks = count(k);
    const std::string copy = "wfgen::rt::copy_elements(bound_outputs_[" + ks + "], table_[" + num(g.outputs[k]) + "]);  // " + g.output_names[k];
    c.line(may_write_directly(g, k) ? "if (!direct_outputs_[" + ks + "].defined()) " + copy : copy);
  }
  return c.str();
}

// "&<array>[0], &<array>[1], ..." for each output.
std::string output_ptrs(const Graph& g, const std::string& array) {
  std::string out;
  for (std::size_t k = 0; k < g.outputs.size(); ++k) out += (k ? ", " : "") + std::string("&") + array + "[" + count(k) + "]";
  return out;
}

// --- summary() ------------------------------------------------------------------------

// "  memory pool: N slots, <bytes as a formula of the run-time dims> bytes ...".
std::string memory_pool_line(const ModelText& m) {
  std::string formula;
  for (const auto& slot : m.plan.slots) {
    std::vector<std::string> sizes;
    for (int id : slot) {
      Dim bytes(static_cast<std::int64_t>(rt::dtype_size(m.g[id].dtype)));
      for (const auto& d : m.g[id].shape) bytes = Dim::binary('*', d, bytes);
      std::string s = bytes.str();
      if (std::find(sizes.begin(), sizes.end(), s) == sizes.end()) sizes.push_back(s);
    }
    const std::string one = sizes.size() == 1 ? sizes[0] : "max(" + joined(sizes, [](const std::string& s) { return s; }) + ")";
    formula += (formula.empty() ? "" : " + ") + one;
  }
  return "  memory pool: " + count(m.plan.slots.size()) + " slots, " + (formula.empty() ? "0" : formula) +
         " bytes (each slot rounded up to 64)\n";
}

// "  gradients: ..." and "  optimizer: ..." of a training build.
std::string training_summary(const ModelText& m) {
  if (!m.g.has_backward) return "";
  std::string text = "  gradients:";
  for (int b : m.g.grads) text += " " + m.g[b].name.substr(5);
  text += "\n";
  if (m.build.optimizer) {
    text += "  optimizer: " + m.build.optimizer->node;
    for (const auto& [k, v] : m.build.optimizer->values) text += " " + k + "=" + spec::arg_value_str(v);
    text += "\n";
  }
  return text;
}

// What summary() returns, as a string literal.
std::string summary(const ModelText& m) {
  const Graph& g = m.g;
  std::string text = "<Compiled: " + m.cls + " (" + m.model.name + ")>\n";
  text += "  where: " + m.where + "\n  inputs:\n";
  for (int i : g.inputs) {
    text += "    " + g[i].name + " " + rt::dtype_c_name(g[i].caller_dtype.value_or(g[i].dtype)) + " " + shape::shape_str(g[i].shape) +
            (g[i].caller_dtype ? std::string(" (indices, held as ") + rt::dtype_c_name(g[i].dtype) + ")" : "") + "\n";
  }
  text += "  outputs:\n";
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    const Value& o = g[g.outputs[k]];
    text += "    " + g.output_names[k] + " " + rt::dtype_c_name(o.dtype) + " " + shape::shape_str(o.shape) + "\n";
  }
  text += "  parameters:\n";
  std::int64_t total_params = 0;
  for (int p : g.params) {
    std::int64_t n = 1;
    for (const auto& d : g[p].shape) n *= d.value();
    total_params += n;
    text += "    " + g[p].param_path + " " + rt::dtype_c_name(g[p].dtype) + " " + shape::shape_str(g[p].shape) + "\n";
  }
  text += "  " + num(total_params) + " parameter values\n";
  text += memory_pool_line(m);
  const auto n_backward = std::count_if(m.insts.begin(), m.insts.end(), [](const ModelInstruction& in) { return in.backward; });
  text += "  instructions: " + num(static_cast<std::int64_t>(m.insts.size()) - n_backward) + " forward";
  if (g.has_backward) text += ", " + num(n_backward) + " pullback";
  text += "\n" + training_summary(m);
  return literal(text);
}

std::string source_text(const ModelText& m, const KernelEmitOptions& options) {
  const Graph& g = m.g;
  std::int64_t n_scalars = 0;
  const std::string tables = instruction_tables(m, n_scalars);
  const bool has_indices = !index_inputs(g).empty();
  return fill_template(
      template_text("model_class.cpp.in"),
      {{"build_comment", CodeWriter().comment("Build '" + m.build.name + "' of model '" + m.model.name + "' (" + m.build.loc.str() + ").").str()},
       {"cls", m.cls},
       {"ns", options.ns},
       {"tensor_table", tensor_table(m)},
       {"instruction_tables", tables},
       {"program", program(m, n_scalars)},
       {"input_names", joined(g.inputs, [&](int i) { return literal(g[i].name); })},
       {"param_names", joined(g.params, [&](int p) { return literal(g[p].param_path); })},
       {"grad_names", grad_names(g)},
       {"symbols", g.symbols.empty() ? "nullptr" : joined(g.symbols, [](const std::string& s) { return literal(s); })},
       {"seed", num(static_cast<std::int64_t>(m.build.seed))},
       {"init_parameters", init_parameters(g)},
       {"n_inputs", count(g.inputs.size())},
       {"index_values_resize", index_values_resize(g)},
       {"n_outputs", m.n_outputs},
       {"n_values", count(g.values.size())},
       {"training_state", training_state(m)},
       {"bind_forget_forward", g.has_backward ? "  forward_done_ = false;  // a new binding: the last forward pass's values are gone\n" : ""},
       {"model_literal", literal(m.model.name)},
       {"where_literal", literal(m.where)},
       {"binder_symbols", g.symbols.empty() ? "{}" : "kSymbols"},
       {"bind_inputs", bind_inputs(g)},
       {"bind_assertions", bind_assertions(g)},
       {"n_slots", count(m.plan.slots.size())},
       {"arena_slots", arena_slots(m)},
       {"prepare_outputs", prepare_outputs(g)},
       {"table_entries", table_entries(m)},
       {"check_output_copies", check_output_copies(g)},
       {"load_indices", load_indices_function(m)},
       {"own_output_ptrs", output_ptrs(g, "wf_set")},
       {"input_params", m.input_params},
       {"input_args", m.input_args},
       {"try_forward_params", m.input_params.empty() ? "" : ", " + m.input_params},
       {"take_inputs", take_inputs(g)},
       {"into_load_indices", has_indices ? "  if (wfgen::rt::Status wf_s = load_indices_(); !wf_s.ok()) return wf_s;\n" : ""},
       {"into_forward_done", g.has_backward ? "  forward_done_ = true;\n" : ""},
       {"copy_outputs", copy_outputs(g)},
       {"run_into_ptrs", output_ptrs(g, "wf_outputs")},
       {"into_params", m.into_params},
       {"into_ptrs", m.into_ptrs},
       {"summary", summary(m)},
       {"training_api", g.has_backward ? training_definitions(m.spec, m.build, g, m.cls) : ""}});
}

}  // namespace

std::vector<OutputFile> emit_model(const spec::Spec& spec, const spec::Build& build, const Graph& g, const passes::MemoryPlan& plan,
                                   const KernelEmitOptions& options) {
  ModelText m(spec, build, g, plan);
  m.cls = build.name;
  m.where = m.model.where ? m.model.where->str() : "";
  m.names = tensor_names(g);
  m.insts = plan_instructions(g, &m.list_consts);
  m.input_params = joined(g.inputs, [&](int i) { return "const wfgen::rt::Tensor& " + cpp_identifier(g[i].name); });
  m.input_args = joined(g.inputs, [&](int i) { return cpp_identifier(g[i].name); });
  const std::vector<std::string> out_params = output_params(g);
  m.into_params = joined(out_params, [](const std::string& p) { return "wfgen::rt::Tensor& " + p; });
  if (!m.input_params.empty()) m.into_params += ", " + m.input_params;
  m.into_ptrs = joined(out_params, [](const std::string& p) { return "&" + p; });
  m.n_outputs = count(g.outputs.size());
  return {{m.cls + ".hpp", header_text(m, options)}, {m.cls + ".cpp", source_text(m, options)}};
}

}  // namespace wfgen::emit

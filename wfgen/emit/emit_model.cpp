// A build as a C++ class (emit_model.hpp): its header from
// templates/model_class.hpp.in, the tensor table, the shape code that binds
// run-time dims, forward() and the Compiled-Composite API. The instruction
// tables come from instructions.cpp, the training API from emit_training.cpp.
#include "wfgen/emit/emit_model.hpp"

#include "wfgen/emit/model_parts.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/support/names.hpp"

namespace wfgen::emit {

using namespace detail;

std::vector<OutputFile> emit_model(const spec::Spec& spec, const spec::Build& build, const Graph& g,
                                   const passes::MemoryPlan& plan, const KernelEmitOptions& options) {
  const spec::Model& model = *spec.find_model(build.model);
  const std::string cls = build.name;
  const std::string where = model.where ? model.where->str() : "";
  const std::vector<std::string> names = tensor_names(g);
  std::vector<std::string> list_consts;  // static arrays for list arguments
  const std::vector<ModelInstruction> insts = plan_instructions(g, &list_consts);

  // --- header: templates/model_class.hpp.in --------------------------------------------
  std::string params_sig;
  for (std::size_t k = 0; k < g.inputs.size(); ++k)
    params_sig += (k ? ", " : "") + std::string("const wfgen::rt::Tensor& ") + cpp_identifier(g[g.inputs[k]].name);
  const std::vector<std::string> out_params = output_params(g);
  std::string into_sig;
  for (const auto& p : out_params) into_sig += (into_sig.empty() ? "" : ", ") + std::string("wfgen::rt::Tensor& ") + p;
  if (!params_sig.empty()) into_sig += ", " + params_sig;
  std::string header = fill_template(template_text("model_class.hpp.in"),
                                     {{"build", build.name},
                                      {"model", model.name},
                                      {"build_loc", comment_text(build.loc.str())},
                                      {"where_comment", comment_text(model.name + ": " + where)},
                                      {"ns", options.ns},
                                      {"cls", cls},
                                      {"seed", num(static_cast<std::int64_t>(build.seed))},
                                      {"where", comment_text(where)},
                                      {"forward_params", params_sig},
                                      {"try_forward_params", params_sig.empty() ? "" : ", " + params_sig},
                                      {"input_params", params_sig},
                                      {"into_params", into_sig},
                                      {"n_outputs", num(static_cast<std::int64_t>(g.outputs.size()))},
                                      {"into_note", g.has_backward
                                                        ? "Outputs are copied out of the model's memory (the pullback reads the values the\n  // forward pass computed, which a caller's tensor would expose)."
                                                        : "A contiguous output tensor that shares no memory with an input, a parameter or\n  // another output is written by the kernel that computes it (no copy); any other\n  // is copied into after the whole forward pass, so forward_into(X, X) is X = f(X)."},
                                      {"training_api", g.has_backward ? training_declarations(build) : ""},
                                      {"index_members", index_members(g)},
                                      {"training_members", g.has_backward ? training_members(build) : ""}});

  // --- source -------------------------------------------------------------------------
  CodeWriter c;
  c.block(kBanner);
  c.comment("Build '" + build.name + "' of model '" + model.name + "' (" + build.loc.str() + ").");
  c.line("#include \"" + cls + ".hpp\"").line();
  c.line("#include <algorithm>").line("#include <cstdint>").line();
  c.line("#include \"kernels.hpp\"").line("#include \"wfgen/model_support.hpp\"").line();
  c.line("namespace " + options.ns + " {").line();
  c.open("namespace");
  c.line("using wfgen::rt::TensorRole;").line();
  c.comment("The tensor table: inputs, parameters, arena temporaries and views.");
  c.open("const wfgen::rt::TensorInfo kTensors[] =");
  for (const auto& v : g.values) c.line("{" + literal(names[static_cast<std::size_t>(v.id)]) + ", TensorRole::" + role_of(v) + "},");
  c.close(";");
  c.line();
  for (const auto& l : list_consts) c.line(l);
  if (!list_consts.empty()) c.line();
  // A model without instructions (its outputs are views of its inputs) has
  // no operand arrays: C++ has no arrays of zero elements.
  const bool no_instructions = insts.empty();
  if (!no_instructions) {
    c.comment("Operands of each instruction, in kernel-parameter order.");
    c.open("const std::int32_t kOperands[] =");
    for (const auto& in : insts) {
      std::string ops;
      for (int o : in.operands) ops += num(o) + ", ";
      c.line(ops + "// " + in.kernel);
    }
    c.close(";");
    c.open("const wfgen::rt::OperandSpec kOperandSpecs[] =");
    for (const auto& in : insts) {
      std::string ops;
      for (const auto& s : in.specs) ops += s + ", ";
      c.line(ops);
    }
    c.close(";");
  }
  bool any_scalar = false;
  for (const auto& in : insts) any_scalar = any_scalar || !in.scalars.empty();
  c.open("const wfgen::rt::ScalarArg kScalars[] =");
  for (const auto& in : insts)
    if (!in.scalars.empty()) {
      std::string ss;
      for (const auto& s : in.scalars) ss += s + ", ";
      c.line(ss + "// " + in.kernel);
    }
  if (!any_scalar) c.line("{},");
  c.close(";");
  c.line();
  std::int64_t first_op = 0, first_scalar = 0;
  bool any_backward = false;
  for (bool pullback : {false, true}) {
    std::int64_t count = 0;
    for (const auto& in : insts) count += in.backward == pullback ? 1 : 0;
    if (pullback) any_backward = count > 0;
    if (pullback && count == 0) break;
    if (count == 0) continue;
    c.comment(pullback ? "[Pullback]: the backward pass, derived by wfgen from the nodes' backward expressions."
                       : "[Forward]: one kernel call per line, commented with the body line it implements.");
    c.open(std::string("const wfgen::rt::Instruction ") + (pullback ? "kBackward" : "kForward") + "[] =");
    for (const auto& in : insts) {
      if (in.backward != pullback) continue;
      c.comment(comment_text(in.source));
      c.line("{" + literal(in.op) + ", " + literal(in.kernel) + ", &" + in.kernel + "_erased, " + num(first_op) + ", " +
             num(static_cast<std::int64_t>(in.operands.size())) + ", " + num(in.written) + "u, 0u, " + num(first_scalar) + ", " +
             num(static_cast<std::int64_t>(in.scalars.size())) + ", " + literal(in.source) + "},");
      first_op += static_cast<std::int64_t>(in.operands.size());
      first_scalar += static_cast<std::int64_t>(in.scalars.size());
    }
    c.close(";");
    c.line();
  }
  if (no_instructions) {
    c.line("const wfgen::rt::Program kProgram{kTensors, {}, {}, {}, {}, {}};");
  } else {
    c.line("const wfgen::rt::Program kProgram{kTensors, kOperands, std::span<const wfgen::rt::ScalarArg>(kScalars, " +
           num(first_scalar) + "), kForward, " + (any_backward ? "kBackward" : "{}") + ", kOperandSpecs};");
  }
  c.line("const std::vector<std::string> kInputNames = {" + [&] {
    std::string s;
    for (int i : g.inputs) s += (s.empty() ? "" : ", ") + literal(g[i].name);
    return s;
  }() + "};");
  c.line("const std::vector<std::string> kParamNames = {" + [&] {
    std::string s;
    for (int p : g.params) s += (s.empty() ? "" : ", ") + literal(g[p].param_path);
    return s;
  }() + "};");
  if (g.has_backward) {
    c.line("const std::vector<std::string> kGradNames = {" + [&] {
      std::string s;
      for (int b : g.grads) s += (s.empty() ? "" : ", ") + literal(g[b].name.substr(5));
      return s;
    }() + "};");
  }
  c.line("const char* const kSymbols[] = {" + [&] {
    std::string s;
    for (const auto& sym : g.symbols) s += (s.empty() ? "" : ", ") + literal(sym);
    return s.empty() ? std::string("nullptr") : s;
  }() + "};");
  c.close("  // namespace");
  c.line();

  // Constructor: parameters.
  c.open(cls + "::" + cls + "() : vm_(kProgram)");
  c.line("wfgen::rt::Rng wf_rng(" + num(static_cast<std::int64_t>(build.seed)) + "u);");
  for (int p : g.params) {
    const Value& v = g[p];
    const spec::Param& sp = *v.param;
    c.comment(v.param_path + " " + shape::shape_str(v.shape) + ", " + init_kind(sp.init.kind) + " (" + sp.loc.str() + ")");
    c.line("params_.push_back(wfgen::rt::Tensor::empty(" + dtype_cpp(v.dtype) + ", " + shape_cpp(v.shape) + "));");
    c.line("wfgen::rt::init_parameter(params_.back(), wfgen::rt::InitKind::" + init_kind(sp.init.kind) + ", " + fp(sp.init.a) + ", " +
           fp(sp.init.b) + ", wf_rng);");
  }
  c.line("inputs_.resize(" + num(static_cast<std::int64_t>(g.inputs.size())) + ");");
  c.line("bound_inputs_.resize(" + num(static_cast<std::int64_t>(g.inputs.size())) + ");");
  if (!index_inputs(g).empty()) c.line("index_values_.resize(" + num(static_cast<std::int64_t>(index_inputs(g).size())) + ");");
  c.line("bound_outputs_.resize(" + num(static_cast<std::int64_t>(g.outputs.size())) + ");");
  c.line("direct_outputs_.resize(" + num(static_cast<std::int64_t>(g.outputs.size())) + ");");
  c.line("table_.resize(" + num(static_cast<std::int64_t>(g.values.size())) + ");");
  if (g.has_backward) {
    c.comment("Gradient buffers (zero until backward() adds into them); those of inputs are sized by bind_().");
    c.line("grads_.resize(" + num(static_cast<std::int64_t>(g.grads.size())) + ");");
    c.line("seeds_.resize(" + num(static_cast<std::int64_t>(g.seeds.size())) + ");");
    for (std::size_t k = 0; k < g.grads.size(); ++k) {
      const Value& owner = g[g[g.grads[k]].grad_of];
      if (owner.kind != Kind::Param) continue;
      c.line("grads_[" + num(static_cast<std::int64_t>(k)) + "] = wfgen::rt::Tensor::zeros(" + dtype_cpp(owner.dtype) + ", " +
             shape_cpp(owner.shape) + ");  // " + owner.param_path);
    }
    if (build.optimizer) {
      c.comment("Optimizer state (" + build.optimizer->node + "): zeros, one set per trainable parameter.");
      for (const auto& [param, grad] : trainable(g)) {
        const Value& p = g[g.params[param]];
        for (int j = 0; j < optimizer_state_count(*build.optimizer); ++j)
          c.line("state_.push_back(wfgen::rt::Tensor::zeros(" + dtype_cpp(p.dtype) + ", " + shape_cpp(p.shape) + "));  // " +
                 p.param_path);
      }
    }
  }
  c.close();
  c.line();

  // try_bind_(): symbols, arena, table, VM; every error is returned as a
  // Status (checked sizes, so huge run-time dims never wrap).
  const std::string n_out = num(static_cast<std::int64_t>(g.outputs.size()));
  c.open("wfgen::rt::Status " + cls + "::try_bind_(bool wf_check_all, wfgen::rt::Tensor* const* wf_outs)");
  c.line("bound_ = false;");
  c.line("own_bound_ = false;");
  c.line("std::fill(bound_inputs_.begin(), bound_inputs_.end(), wfgen::rt::TensorRef{});");
  c.line("std::fill(bound_outputs_.begin(), bound_outputs_.end(), wfgen::rt::TensorRef{});");
  c.line("std::fill(direct_outputs_.begin(), direct_outputs_.end(), wfgen::rt::Tensor());");
  if (g.has_backward) c.line("forward_done_ = false;  // a new binding: the last forward pass's values are gone");
  c.line("wfgen::rt::InputBinder wf_binder(" + literal(model.name) + ", " + literal(where) + ", " +
         (g.symbols.empty() ? std::string("{}") : "kSymbols") + ");");
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    const Value& v = g[g.inputs[k]];
    std::string dims;
    for (const auto& d : v.shape) {
      dims += dims.empty() ? "" : ", ";
      dims += d.is_known() ? "{nullptr, " + num(d.value()) + "}" : "{" + literal(d.str()) + ", 0}";
    }
    c.line("if (wfgen::rt::Status wf_s = wf_binder.check(" + literal(v.name) + ", inputs_[" + num(static_cast<std::int64_t>(k)) + "], " +
           dtype_cpp(v.caller_dtype.value_or(v.dtype)) + ", {" + dims + "}); !wf_s.ok()) return wf_s;");
  }
  if (!g.symbols.empty()) c.comment("Run-time dims: checked arithmetic (an overflow is reported by the arena plan, never wrapped).");
  for (std::size_t s = 0; s < g.symbols.size(); ++s) {
    c.line("const wfgen::rt::Size " + cpp_identifier(g.symbols[s]) + " = wf_binder.value(" + num(static_cast<std::int64_t>(s)) + ");");
  }
  for (const auto& a : g.assertions) {
    // An assert of the body on run-time dims: its message with the dims' values.
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
      values += std::string(values.empty() ? " + \" (\"" : " + \", \"") + " + " + literal(n + " = ") + " + std::to_string(static_cast<std::int64_t>(" +
                cpp_identifier(n) + "))";
    }
    if (!values.empty()) values += " + \")\"";
    c.open("if (!(" + cond + "))");
    c.line("return wfgen::rt::Status(wfgen::rt::ErrorCode::InvalidArgument, std::string(" +
           literal(a.loc.str() + ": " + a.message) + ")" + values + ");");
    c.close();
  }
  c.comment("Arena: " + num(static_cast<std::int64_t>(plan.slots.size())) + " slots, each as large as the largest tensor it holds.");
  c.line("wfgen::rt::ArenaPlan wf_plan;");
  for (std::size_t s = 0; s < plan.slots.size(); ++s) {
    std::string sizes;
    for (int id : plan.slots[s]) sizes += (sizes.empty() ? "" : ", ") + std::string("wf_plan.bytes(") + dtype_cpp(g[id].dtype) + ", " + shape_cpp(g[id].shape) + ")";
    c.line("const std::size_t wf_slot" + num(static_cast<std::int64_t>(s)) + " = wf_plan.slot({" + sizes + "});");
  }
  c.line("if (wfgen::rt::Status wf_s = wf_plan.allocate(arena_); !wf_s.ok()) return wf_s;");
  c.comment("The caller's output tensors (forward_into) as they will be: kept when they have the output's dtype and");
  c.comment("shape, else new ones; handed back only when the whole binding succeeded.");
  c.line("wfgen::rt::Tensor wf_out_t[" + n_out + "];");
  c.open("if (wf_outs != nullptr)");
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    const Value& o = g[g.outputs[k]];
    const std::string ks = num(static_cast<std::int64_t>(k));
    c.line("wf_out_t[" + ks + "] = *wf_outs[" + ks + "];");
    c.line("if (wfgen::rt::Status wf_s = wfgen::rt::prepare_output(" + literal(g.output_names[k]) + ", wf_out_t[" + ks + "], " +
           dtype_cpp(o.dtype) + ", " + shape_cpp(o.shape) + "); !wf_s.ok()) return wf_s;");
  }
  c.close();
  c.comment("Table entries: each size and view checked, the first error kept (wf_refs.status()).");
  c.line("wfgen::rt::RefBuilder wf_refs;");
  c.line("char* wf_arena = static_cast<char*>(arena_.raw_data());");
  for (const auto& v : g.values) {
    std::string lhs = "table_[" + num(v.id) + "] = ";
    switch (v.kind) {
      case Kind::Input: {
        auto it = std::find(g.inputs.begin(), g.inputs.end(), v.id);
        const std::string k = num(it - g.inputs.begin());
        if (v.caller_dtype) {
          const std::vector<int> idx = index_inputs(g);
          const std::string j = num(std::find(idx.begin(), idx.end(), v.id) - idx.begin());
          c.comment(v.name + " (" + rt::dtype_name(*v.caller_dtype) + " indices) as " + rt::dtype_name(v.dtype) + ", filled by load_indices_()");
          c.line("if (wfgen::rt::Status wf_s = wfgen::rt::Tensor::try_empty(" + dtype_cpp(v.dtype) + ", inputs_[" + k +
                 "].shape(), index_values_[" + j + "]); !wf_s.ok()) return wf_s;");
          c.line(lhs + "index_values_[" + j + "].ref();  // " + v.name);
          break;
        }
        c.line(lhs + "inputs_[" + k + "].ref();  // " + v.name);
        break;
      }
      case Kind::Param: {
        auto it = std::find(g.params.begin(), g.params.end(), v.id);
        c.line(lhs + "params_[" + num(it - g.params.begin()) + "].ref();  // " + v.param_path);
        break;
      }
      case Kind::Grad: {
        std::size_t k = static_cast<std::size_t>(std::find(g.grads.begin(), g.grads.end(), v.id) - g.grads.begin());
        const Value& owner = g[v.grad_of];
        if (owner.kind == Kind::Input) {
          c.line("if (wfgen::rt::Status wf_s = wfgen::rt::try_zeros(grads_[" + num(static_cast<std::int64_t>(k)) + "], " +
                 dtype_cpp(v.dtype) + ", " + shape_cpp(v.shape) + "); !wf_s.ok()) return wf_s;");
        }
        c.line(lhs + "grads_[" + num(static_cast<std::int64_t>(k)) + "].ref();  // " + v.name);
        break;
      }
      case Kind::Seed:
        c.line("if (wfgen::rt::Status wf_s = wfgen::rt::try_zeros(seeds_[" + num(v.seed_of) + "], " + dtype_cpp(v.dtype) + ", " +
               shape_cpp(v.shape) + "); !wf_s.ok()) return wf_s;");
        c.line(lhs + "seeds_[" + num(v.seed_of) + "].ref();  // " + v.name);
        break;
      case Kind::Call:
        if (v.write_to >= 0) {
          c.line(lhs + "table_[" + num(v.write_to) + "];  // " + v.node->name + " into " + names[static_cast<std::size_t>(v.write_to)]);
          break;
        }
        c.line(lhs + "wf_refs.contiguous(" + literal(names[static_cast<std::size_t>(v.id)]) + ", wf_arena + wf_slot" +
               num(plan.slot_of[static_cast<std::size_t>(v.id)]) + ", " + dtype_cpp(v.dtype) + ", " + shape_cpp(v.shape) + ");  // " +
               names[static_cast<std::size_t>(v.id)] + " = " + v.node->name);
        for (std::size_t k = 0; k < g.outputs.size(); ++k) {
          if (g.outputs[k] != v.id || !may_write_directly(g, k)) continue;
          const std::string ks = num(static_cast<std::int64_t>(k));
          c.comment("The output " + g.output_names[k] + ": the kernel writes the caller's tensor when it can (no copy).");
          c.open("if (wf_outs != nullptr && wfgen::rt::can_write_directly(wf_out_t, " + ks + ", inputs_, params_))");
          c.line("direct_outputs_[" + ks + "] = wf_out_t[" + ks + "];");
          c.line(lhs + "direct_outputs_[" + ks + "].ref();");
          c.close();
        }
        break;
      case Kind::View: {
        std::string base = literal(names[static_cast<std::size_t>(v.id)]) + ", table_[" + num(v.base) + "]";
        switch (v.view) {
          case ViewKind::Permute: {
            std::string p;
            for (int x : v.perm) p += (p.empty() ? "" : ", ") + num(x);
            c.line(lhs + "wf_refs.permute(" + base + ", {" + p + "});");
            break;
          }
          case ViewKind::Reshape: c.line(lhs + "wf_refs.reshape(" + base + ", " + shape_cpp(v.shape) + ");"); break;
          case ViewKind::Broadcast: c.line(lhs + "wf_refs.broadcast(" + base + ", " + shape_cpp(v.shape) + ");"); break;
          case ViewKind::Slice: c.line(lhs + "wf_refs.slice(" + base + ", " + shape_cpp(v.starts) + ", " + shape_cpp(v.steps) + ", " + shape_cpp(v.shape) + ");"); break;
          case ViewKind::Squeeze: c.line(lhs + "wf_refs.squeeze(" + base + ", " + num(v.axis) + ");"); break;
          case ViewKind::Unsqueeze: c.line(lhs + "wf_refs.unsqueeze(" + base + ", " + num(v.axis) + ");"); break;
        }
        break;
      }
    }
  }
  c.line("if (!wf_refs.status().ok()) return wf_refs.status();");
  c.comment("Outputs that are copied (forward_into): not onto the memory they are copied from.");
  c.open("if (wf_outs != nullptr)");
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    const std::string ks = num(static_cast<std::int64_t>(k));
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
  c.close();
  c.comment("Every check of the VM now (try_ entry points), or only those prepare() always makes.");
  c.line("if (wfgen::rt::Status wf_s = vm_.try_prepare(table_.data(), wf_check_all); !wf_s.ok()) return wf_s;");
  c.line("for (std::size_t wf_k = 0; wf_k < inputs_.size(); ++wf_k) bound_inputs_[wf_k] = inputs_[wf_k].ref();");
  c.open("if (wf_outs != nullptr)");
  c.open("for (std::size_t wf_k = 0; wf_k < bound_outputs_.size(); ++wf_k)");
  c.line("*wf_outs[wf_k] = wf_out_t[wf_k];");
  c.line("bound_outputs_[wf_k] = wf_out_t[wf_k].ref();");
  c.close();
  c.close();
  c.line("bound_ = true;");
  c.line("checked_ = wf_check_all;");
  c.line("return {};");
  c.close();
  c.line();
  c.open("void " + cls + "::bind_()");
  c.line("if (wfgen::rt::Status wf_s = try_bind_(false, nullptr); !wf_s.ok()) wfgen::rt::fail(wf_s);");
  c.close();
  c.line();
  c.open("bool " + cls + "::inputs_changed_() const");
  c.comment("Bind again only when an input changed (shape, strides or buffer).");
  c.line("if (!bound_) return true;");
  c.line("for (std::size_t wf_k = 0; wf_k < inputs_.size(); ++wf_k)");
  c.line("  if (!inputs_[wf_k].matches(bound_inputs_[wf_k])) return true;");
  c.line("return false;");
  c.close();
  c.line();

  const bool has_indices = !index_inputs(g).empty();
  if (has_indices) {
    const std::vector<int> idx = index_inputs(g);
    c.open("wfgen::rt::Status " + cls + "::load_indices_()");
    for (std::size_t j = 0; j < idx.size(); ++j) {
      auto it = std::find(g.inputs.begin(), g.inputs.end(), idx[j]);
      c.line("if (wfgen::rt::Status wf_s = wfgen::rt::load_indices(" + literal(g[idx[j]].name) + ", inputs_[" +
             num(it - g.inputs.begin()) + "], index_values_[" + num(static_cast<std::int64_t>(j)) + "]); !wf_s.ok()) return wf_s;");
    }
    c.line("return {};");
    c.close();
    c.line();
  }
  // run / forward: into_() on the model's own outputs (rt::ResultSets), returned by reference.
  std::string in_args, out_ptrs;
  for (std::size_t k = 0; k < g.inputs.size(); ++k) in_args += (k ? ", " : "") + cpp_identifier(g[g.inputs[k]].name);
  for (const auto& o : out_params) out_ptrs += (out_ptrs.empty() ? "&" : ", &") + o;
  // Both compute into the set rt::ResultSets picks, in own_outputs_() and
  // try_own_outputs_(), declared inline so that forward() costs what
  // forward_into() does (callgrind, a 16-float add and `y =
  // model.forward(a, b)[0]`: 587 instructions a call, 590 with the body
  // written out in each entry point, 598 out of line; forward_into() 558).
  std::string ptrs;
  for (std::size_t k = 0; k < g.outputs.size(); ++k) ptrs += (k ? ", " : "") + std::string("&wf_set[") + num(static_cast<std::int64_t>(k)) + "]";
  const auto own_set = [&] {
    c.comment("The model's own output tensors, written by the kernels (or copied into) like forward_into()'s and");
    c.comment("handed out without a copy: the set of the last call, or the other one when an input lies in its memory.");
    c.line("wfgen::rt::Results<" + n_out + ">& wf_set = results_.pick(inputs_, own_bound_ && !wf_inputs_changed);");
    c.line("wfgen::rt::Tensor* const wf_outs[] = {" + ptrs + "};");
  };
  c.open("const wfgen::rt::Results<" + n_out + ">& " + cls + "::own_outputs_(bool wf_inputs_changed)");
  own_set();
  c.open("if (wfgen::rt::Status wf_s = into_(wf_outs, false, wf_inputs_changed); !wf_s.ok())");
  c.line("own_bound_ = false;");
  c.line("wfgen::rt::fail(wf_s);");
  c.close();
  c.line("own_bound_ = true;");
  c.line("return wf_set;");
  c.close();
  c.line();
  c.open("wfgen::rt::Status " + cls + "::try_own_outputs_(std::vector<wfgen::rt::Tensor>& outputs, bool wf_inputs_changed)");
  c.line("outputs.clear();");
  own_set();
  c.comment("Validates everything before running: the inputs, the run-time sizes, the arena and every check of the VM.");
  c.line("wfgen::rt::Status wf_s = wfgen::rt::capture([&] { return into_(wf_outs, true, wf_inputs_changed); });");
  c.line("own_bound_ = wf_s.ok();");
  c.line("if (wf_s.ok()) outputs.assign(wf_set.begin(), wf_set.end());");
  c.line("return wf_s;");
  c.close();
  c.line();
  const auto one_line = [&](const std::string& signature, const std::string& statement) {
    c.open(signature);
    c.line(statement);
    c.close();
    c.line();
  };
  const std::string results = "const wfgen::rt::Results<" + n_out + ">& " + cls + "::";
  one_line(results + "run()", "return own_outputs_(inputs_changed_());");
  one_line(results + "forward(" + params_sig + ")", "return own_outputs_(take_inputs_(" + in_args + "));");
  one_line("wfgen::rt::Status " + cls + "::try_run(std::vector<wfgen::rt::Tensor>& outputs)", "return try_own_outputs_(outputs, inputs_changed_());");
  one_line("wfgen::rt::Status " + cls + "::try_forward(std::vector<wfgen::rt::Tensor>& outputs" + (params_sig.empty() ? "" : ", ") + params_sig + ")",
           "return try_own_outputs_(outputs, take_inputs_(" + in_args + "));");
  // forward_into / run_into and their try_ forms, around into_().
  c.open("bool " + cls + "::take_inputs_(" + params_sig + ")");
  c.comment("An input that is the bound one needs no new handle (no reference count to change).");
  c.line("bool wf_changed = false;");
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    const std::string ks = num(static_cast<std::int64_t>(k)), x = cpp_identifier(g[g.inputs[k]].name);
    c.open("if (!" + x + ".matches(bound_inputs_[" + ks + "]))");
    c.line("inputs_[" + ks + "] = " + x + ";");
    c.line("wf_changed = true;");
    c.close();
  }
  c.line("return wf_changed;");
  c.close();
  c.line();
  c.open("wfgen::rt::Status " + cls + "::into_(wfgen::rt::Tensor* const* wf_outs, bool wf_check_all, bool wf_inputs_changed)");
  c.comment("The steady state: the inputs and outputs of the binding, so run the kernels (and copy what is not written directly).");
  c.line("bool wf_rebind = wf_inputs_changed || !bound_ || (wf_check_all && !checked_);");
  c.line("for (std::size_t wf_k = 0; wf_k < " + n_out + " && !wf_rebind; ++wf_k) wf_rebind = !wf_outs[wf_k]->matches(bound_outputs_[wf_k]);");
  c.open("if (wf_rebind)");
  c.line("if (wfgen::rt::Status wf_s = try_bind_(wf_check_all, wf_outs); !wf_s.ok()) return wf_s;");
  c.close();
  // Every forward pass comes here: the integer inputs' values, as the build's dtype.
  if (has_indices) c.line("if (wfgen::rt::Status wf_s = load_indices_(); !wf_s.ok()) return wf_s;");
  c.line("vm_.run(wfgen::rt::Section::Forward);");
  if (g.has_backward) c.line("forward_done_ = true;");
  for (std::size_t k = 0; k < g.outputs.size(); ++k) {
    const std::string ks = num(static_cast<std::int64_t>(k));
    const std::string copy = "wfgen::rt::copy_elements(bound_outputs_[" + ks + "], table_[" + num(g.outputs[k]) + "]);  // " + g.output_names[k];
    c.line(may_write_directly(g, k) ? "if (!direct_outputs_[" + ks + "].defined()) " + copy : copy);
  }
  c.line("return {};");
  c.close();
  c.line();
  c.open("wfgen::rt::Status " + cls + "::run_into_(std::span<wfgen::rt::Tensor> wf_outputs, bool wf_check_all)");
  c.open("if (wf_outputs.size() != " + n_out + ")");
  c.line("return wfgen::rt::Status(wfgen::rt::ErrorCode::InvalidArgument, \"" + cls + "::run_into got \" + std::to_string(wf_outputs.size()) + "
         "\" output tensors, expected " + n_out + "\");");
  c.close();
  {
    std::string ptrs;
    for (std::size_t k = 0; k < g.outputs.size(); ++k) ptrs += (k ? ", " : "") + std::string("&wf_outputs[") + num(static_cast<std::int64_t>(k)) + "]";
    c.line("wfgen::rt::Tensor* const wf_outs[] = {" + ptrs + "};");
  }
  c.line("return into_(wf_outs, wf_check_all, inputs_changed_());");
  c.close();
  c.line();
  throwing_and_try(c, cls, "forward_into", into_sig, "wfgen::rt::Tensor* const wf_outs[] = {" + out_ptrs + "};", [&](bool all) {
    return "into_(wf_outs, " + std::string(all ? "true" : "false") + ", take_inputs_(" + in_args + "))";
  });
  throwing_and_try(c, cls, "run_into", "std::span<wfgen::rt::Tensor> outputs", "",
                   [](bool all) { return "run_into_(outputs, " + std::string(all ? "true" : "false") + ")"; });
  c.open("wfgen::rt::Status " + cls + "::try_set_input(std::string_view name, const wfgen::rt::Tensor& value)");
  c.open("for (std::size_t wf_k = 0; wf_k < kInputNames.size(); ++wf_k)");
  c.open("if (kInputNames[wf_k] == name)");
  c.open("if (!value.defined())");
  c.line("return wfgen::rt::Status(wfgen::rt::ErrorCode::NullBuffer, \"" + cls + "::set_input: the input '\" + std::string(name) + "
         "\"' is an undefined tensor (no storage), expected a tensor with data\");");
  c.close();
  c.line("inputs_[wf_k] = value;");
  c.line("if (!value.matches(bound_inputs_[wf_k])) bound_inputs_[wf_k] = wfgen::rt::TensorRef{};  // forward_into() must not take the bound one for it");
  c.line("return {};");
  c.close();
  c.close();
  c.line("return wfgen::rt::Status(wfgen::rt::ErrorCode::InvalidArgument, \"" + cls + " has no input '\" + std::string(name) + \"'\");");
  c.close();
  c.line();
  c.open("void " + cls + "::set_input(std::string_view name, const wfgen::rt::Tensor& value)");
  c.line("if (wfgen::rt::Status wf_s = try_set_input(name, value); !wf_s.ok()) wfgen::rt::fail(wf_s);");
  c.close();
  c.line();
  c.open("wfgen::rt::Tensor " + cls + "::get_input(std::string_view name) const");
  c.line("for (std::size_t wf_k = 0; wf_k < kInputNames.size(); ++wf_k)");
  c.line("  if (kInputNames[wf_k] == name) return inputs_[wf_k];");
  c.line("wfgen::rt::fail(wfgen::rt::ErrorCode::InvalidArgument, \"" + cls + " has no input '\" + std::string(name) + \"'\");");
  c.close();
  c.line();
  c.line("const std::vector<std::string>& " + cls + "::input_names() const { return kInputNames; }");
  c.line();
  c.open("std::vector<std::pair<std::string, wfgen::rt::Tensor>> " + cls + "::parameters() const");
  c.line("std::vector<std::pair<std::string, wfgen::rt::Tensor>> wf_out;");
  c.line("for (std::size_t wf_k = 0; wf_k < params_.size(); ++wf_k) wf_out.emplace_back(kParamNames[wf_k], params_[wf_k]);");
  c.line("return wf_out;");
  c.close();
  c.line();
  c.open("wfgen::rt::Tensor " + cls + "::parameter(std::string_view name) const");
  c.line("for (std::size_t wf_k = 0; wf_k < params_.size(); ++wf_k)");
  c.line("  if (kParamNames[wf_k] == name) return params_[wf_k];");
  c.line("wfgen::rt::fail(wfgen::rt::ErrorCode::InvalidArgument, \"" + cls + " has no parameter '\" + std::string(name) + \"'\");");
  c.close();
  c.line();
  c.open("void " + cls + "::save_parameters(const std::string& path) const");
  c.line("wfgen::rt::save_parameters(path, kParamNames, params_);");
  c.close();
  c.line();
  c.open("void " + cls + "::load_parameters(const std::string& path, std::string_view scope)");
  c.line("wfgen::rt::load_parameters(path, kParamNames, params_, scope);");
  c.close();
  c.line();
  c.open("wfgen::rt::Status " + cls + "::try_save_parameters(const std::string& path) const");
  c.line("return wfgen::rt::capture([&] { return wfgen::rt::try_save_parameters(path, kParamNames, params_); });");
  c.close();
  c.line();
  c.open("wfgen::rt::Status " + cls + "::try_load_parameters(const std::string& path, std::string_view scope)");
  c.line("return wfgen::rt::capture([&] { return wfgen::rt::try_load_parameters(path, kParamNames, params_, scope); });");
  c.close();
  c.line();
  c.open("wfgen::rt::Status " + cls + "::copy_parameters_from_(const std::vector<std::pair<std::string, wfgen::rt::Tensor>>& source, std::string_view scope)");
  c.line("return wfgen::rt::capture([&] { return wfgen::rt::try_copy_parameters(source, kParamNames, params_, scope); });");
  c.close();
  c.line();
  // summary
  {
    std::string text = "<Compiled: " + cls + " (" + model.name + ")>\n";
    text += "  where: " + where + "\n  inputs:\n";
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
    std::string formula;
    for (const auto& slot : plan.slots) {
      std::vector<std::string> sizes;
      for (int id : slot) {
        Dim bytes(static_cast<std::int64_t>(rt::dtype_size(g[id].dtype)));
        for (const auto& d : g[id].shape) bytes = Dim::binary('*', d, bytes);
        std::string s = bytes.str();
        if (std::find(sizes.begin(), sizes.end(), s) == sizes.end()) sizes.push_back(s);
      }
      std::string one = sizes.size() == 1 ? sizes[0] : "max(" + [&] {
        std::string j;
        for (const auto& s : sizes) j += (j.empty() ? "" : ", ") + s;
        return j;
      }() + ")";
      formula += (formula.empty() ? "" : " + ") + one;
    }
    text += "  memory pool: " + num(static_cast<std::int64_t>(plan.slots.size())) + " slots, " + (formula.empty() ? "0" : formula) +
            " bytes (each slot rounded up to 64)\n";
    std::int64_t n_backward = 0;
    for (const auto& in : insts) n_backward += in.backward ? 1 : 0;
    text += "  instructions: " + num(static_cast<std::int64_t>(insts.size()) - n_backward) + " forward";
    if (g.has_backward) text += ", " + num(n_backward) + " pullback";
    text += "\n";
    if (g.has_backward) {
      text += "  gradients:";
      for (int b : g.grads) text += " " + g[b].name.substr(5);
      text += "\n";
      if (build.optimizer) {
        text += "  optimizer: " + build.optimizer->node;
        for (const auto& [k, v] : build.optimizer->values) text += " " + k + "=" + spec::arg_value_str(v);
        text += "\n";
      }
    }
    c.open("std::string " + cls + "::summary() const");
    c.line("return " + literal(text) + ";");
    c.close();
  }
  c.line();
  c.open("std::string " + cls + "::disassemble()");
  c.line("if (inputs_changed_()) bind_();");
  c.line("return vm_.disassemble();");
  c.close();
  c.line();
  c.open("std::string " + cls + "::profile(int n_sample, int top_k)");
  c.comment("On the current binding: after forward_into(), outputs written directly go to the caller's tensors.");
  c.line("if (inputs_changed_()) bind_();");
  c.line("return vm_.profile(wfgen::rt::Section::Forward, n_sample, top_k);");
  c.close();
  if (g.has_backward) emit_training_api(c, spec, build, g, cls);
  c.line().line("}  // namespace " + options.ns);
  return {{cls + ".hpp", header}, {cls + ".cpp", c.str()}};
}

}  // namespace wfgen::emit

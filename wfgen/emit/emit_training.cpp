// The training API of a generated model class (model_parts.hpp): what fills
// the holes of templates/model_training.hpp.in (the declarations and members
// in the header), templates/model_training.cpp.in and templates/model_step.cpp.in.
#include "wfgen/emit/model_parts.hpp"

#include <algorithm>
#include <optional>
#include <variant>

#include "wfgen/emit/builtins.hpp"
#include "wfgen/emit/code_writer.hpp"

namespace wfgen::emit::detail {

// The training API in the class (templates/model_training.hpp.in, section
// api), with the optimizer's step() when the build has one.
std::string training_declarations(const spec::Build& build) {
  const std::string_view file = template_text("model_training.hpp.in");
  if (!build.optimizer) return fill_template(template_section(file, "api"), {{"step_api", ""}, {"try_step_api", ""}});
  return fill_template(template_section(file, "api"),
                       {{"step_api", fill_template(template_section(file, "step_api"), {{"optimizer", build.optimizer->node}})},
                        {"try_step_api", std::string(template_section(file, "try_step_api"))}});
}

// The inputs the caller passes as integers (a build's input_dtypes), in
// input order: the model holds each as the build's dtype.
std::vector<int> index_inputs(const Graph& g) {
  std::vector<int> out;
  for (int id : g.inputs)
    if (g[id].caller_dtype) out.push_back(id);
  return out;
}

std::string index_members(const Graph& g) {
  if (index_inputs(g).empty()) return "";
  return "  // The integer inputs (input_dtypes) as the build's dtype, converted and\n"
         "  // checked value by value before every forward pass (load_indices_()).\n"
         "  std::vector<wfgen::rt::Tensor> index_values_;\n"
         "  wfgen::rt::Status load_indices_();\n";
}

// The private members of training (section members), with the optimizer's
// state, learning rate and step count when the build has one.
std::string training_members(const spec::Build& build) {
  const std::string_view file = template_text("model_training.hpp.in");
  if (!build.optimizer) return fill_template(template_section(file, "members"), {{"step_members", ""}});
  double lr = 0.001;
  for (const auto& [k, v] : build.optimizer->values)
    if (k == "lr" && std::holds_alternative<double>(v)) lr = std::get<double>(v);
  return fill_template(template_section(file, "members"),
                       {{"step_members", fill_template(template_section(file, "step_members"), {{"lr", fp(lr)}})}});
}

namespace {

// The optimizer's hyper-parameters in the node's argument order, as
// ScalarArg initialisers: lr and the step count from the model's members,
// the others as the build gives them or as the node's defaults.
std::string hyper_parameters(const spec::Optimizer& o, const spec::Node& node) {
  std::string scalars;
  for (const auto& a : node.args) {
    std::string v;
    if (a.name == "lr") v = "{.f = lr_}";
    else if (a.name == "step") v = "{.i = step_count_}";
    else {
      std::optional<spec::ArgValue> given;
      for (const auto& [k, x] : o.values)
        if (k == a.name) given = x;
      spec::ArgValue value = given ? *given : *a.default_value;
      if (const auto* f = std::get_if<double>(&value)) v = "{.f = " + fp(*f) + "}";
      else if (const auto* i = std::get_if<std::int64_t>(&value)) v = "{.i = " + num(*i) + "}";
      else if (const auto* b = std::get_if<bool>(&value)) v = std::string("{.b = ") + (*b ? "true" : "false") + "}";
    }
    scalars += (scalars.empty() ? "" : ", ") + v + " /* " + a.name + " */";
  }
  return scalars;
}

// The rows of step()'s table of updates, one per trainable parameter: its
// optimizer kernel, the parameter, its gradient, its first state tensor.
std::string step_updates(const spec::Spec& spec, const spec::Build& build, const Graph& g) {
  const spec::Optimizer& o = *build.optimizer;
  const int n_state = optimizer_state_count(o);
  std::int64_t state = 0;
  CodeWriter c(2);
  for (const auto& [param, grad] : trainable(g)) {
    const Value& p = g[g.params[param]];
    const spec::Impl* impl = optimizer_impl(spec, build, static_cast<int>(p.shape.size()));
    c.line("Update{" + lower::kernel_name(o.node, impl->device, p.dtype, static_cast<int>(p.shape.size())) + "_erased, " +
           num(static_cast<std::int64_t>(param)) + ", " + num(static_cast<std::int64_t>(grad)) + ", " + num(state) + "},  // " +
           p.param_path);
    state += n_state;
  }
  return c.str();
}

// The tensors an update's kernel takes: the parameter, its gradient, its state.
std::string update_refs(const spec::Optimizer& o) {
  std::string refs = "params_[wf_u.param].ref(), grads_[wf_u.grad].ref()";
  for (int j = 0; j < optimizer_state_count(o); ++j) refs += ", state_[wf_u.state" + (j ? " + " + num(j) : std::string()) + "].ref()";
  return refs;
}

// backward()'s clearing of the gradients the pullback after zero_grad()
// adds into (all but those a GEMM stores; Program::backward_fresh).
std::string clear_fresh(const Graph& g) {
  const std::vector<int> cleared = cleared_when_fresh(g);
  if (cleared.empty()) return "";
  const std::string why = "  // The gradients it adds into (no GEMM of their own) start from zero.\n";
  std::string list;
  for (int k : cleared) list += (list.empty() ? "" : ", ") + num(k) + "u";
  if (cleared.size() == 1) return why + "  grads_[" + list + "].fill(0.0);\n";
  return why + "  for (const std::size_t wf_k : {" + list + "}) grads_[wf_k].fill(0.0);\n";
}

}  // namespace

// backward(), grad(), zero_grad() (templates/model_training.cpp.in) and,
// with an optimizer, step() (templates/model_step.cpp.in).
std::string training_definitions(const spec::Spec& spec, const spec::Build& build, const Graph& g, const std::string& cls) {
  std::string out = fill_template(template_text("model_training.cpp.in"), {{"cls", cls},
                                                                           {"clear_fresh", clear_fresh(g)}});
  if (!build.optimizer) return out;
  const spec::Optimizer& o = *build.optimizer;
  return out + fill_template(template_text("model_step.cpp.in"),
                             {{"cls", cls},
                              {"optimizer_comment", CodeWriter(1).comment(o.node + " (" + o.loc.str() + "), hyper-parameters in the node's argument order").str()},
                              {"hyper_parameters", hyper_parameters(o, *spec.find_node(o.node))},
                              {"count", num(static_cast<std::int64_t>(trainable(g).size()))},
                              {"updates", step_updates(spec, build, g)},
                              {"update_refs", update_refs(o)},
                              {"grain", num(kOptimizerTaskGrain)},
                              {"alone_at", num(2 * kOptimizerGrain)}});
}

}  // namespace wfgen::emit::detail

// backward(), grad(), zero_grad() and step() of a generated model class
// (model_parts.hpp).
#include "wfgen/emit/model_parts.hpp"

#include <algorithm>
#include <variant>

namespace wfgen::emit::detail {

std::string training_declarations(const spec::Build& build) {
  std::string out =
      "\n"
      "  // --- Training (backward: true) ---\n"
      "  // The pullback from a scalar loss (the model's one output of one element):\n"
      "  // adds the gradient of every parameter (and grad input) into its buffer.\n"
      "  // Each forward()/run() allows one backward().\n"
      "  void backward();\n"
      "  // The same, starting from the given gradient of each output.\n"
      "  void backward(const std::vector<wfgen::rt::Tensor>& output_grads);\n"
      "  // Gradient buffers by parameter path (\"W1\", \"linear_0.W\") or input name (views of the model's storage).\n"
      "  wfgen::rt::Tensor grad(std::string_view name) const;\n"
      "  std::vector<std::pair<std::string, wfgen::rt::Tensor>> gradients() const;\n"
      "  // Sets every gradient buffer to zero (cl-waffe2's reset-grad!).\n"
      "  void zero_grad();\n";
  if (build.optimizer) {
    out +=
        "  // One " + build.optimizer->node + " step on every trainable parameter with its gradient (call-optimizer!).\n"
        "  void step();\n"
        "  void set_learning_rate(double lr);\n"
        "  double learning_rate() const;\n"
        "  // Steps taken so far (Adam's bias correction uses it).\n"
        "  std::int64_t step_count() const;\n";
  }
  out +=
      "  // The same with error codes (docs/errors.md): backward() without a forward\n"
      "  // pass, output gradients of the wrong count, dtype or shape and unknown\n"
      "  // gradient names are a Status, checked before anything runs.\n"
      "  wfgen::rt::Status try_backward();\n"
      "  wfgen::rt::Status try_backward(const std::vector<wfgen::rt::Tensor>& output_grads);\n"
      "  wfgen::rt::Status try_grad(std::string_view name, wfgen::rt::Tensor& out) const;\n"
      "  wfgen::rt::Status try_zero_grad();\n";
  if (build.optimizer) out += "  wfgen::rt::Status try_step();\n";
  return out;
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

std::string training_members(const spec::Build& build) {
  std::string out =
      "  wfgen::rt::Status backward_(const std::vector<wfgen::rt::Tensor>* output_grads, bool check_all);\n"
      "  wfgen::rt::Status grad_(std::string_view name, wfgen::rt::Tensor& out) const;\n"
      "  std::vector<wfgen::rt::Tensor> grads_;\n"
      "  std::vector<wfgen::rt::Tensor> seeds_;\n"
      "  bool forward_done_ = false;\n";
  if (build.optimizer) {
    double lr = 0.001;
    const spec::Optimizer& o = *build.optimizer;
    for (const auto& [k, v] : o.values)
      if (k == "lr" && std::holds_alternative<double>(v)) lr = std::get<double>(v);
    out += "  std::vector<wfgen::rt::Tensor> state_;\n"
           "  double lr_ = " + fp(lr) + ";\n"
           "  std::int64_t step_count_ = 0;\n";
  }
  return out;
}

// backward(), grad(), zero_grad() and step() of a build with backward: true.
void emit_training_api(CodeWriter& c, const spec::Spec& spec, const spec::Build& build, const Graph& g, const std::string& cls) {
  const std::string bad = "return wfgen::rt::Status(wfgen::rt::ErrorCode::";
  c.line();
  c.comment("backward() and try_backward(): every check before the pullback runs, so a failed call changes nothing.");
  c.open("wfgen::rt::Status " + cls + "::backward_(const std::vector<wfgen::rt::Tensor>* wf_grads, bool wf_check_all)");
  c.open("if (!forward_done_)");
  c.line(bad + "InvalidArgument, \"" + cls + "::backward() needs a forward pass first: the pullback reads values the forward pass keeps, and "
         "each forward pass allows one backward()\");");
  c.close();
  c.open("if (wf_grads == nullptr && (seeds_.size() != 1 || seeds_[0].numel() != 1))");
  c.line(bad + "InvalidArgument, \"" + cls + "::backward(): without output gradients the model must return one tensor of one element (a scalar "
         "loss); pass the gradient of each output to backward(output_grads)\");");
  c.close();
  c.open("if (wf_grads != nullptr)");
  c.open("if (wf_grads->size() != seeds_.size())");
  c.line(bad + "InvalidArgument, \"" + cls + "::backward(): expected \" + std::to_string(seeds_.size()) + \" output gradients, got \" + "
         "std::to_string(wf_grads->size()));");
  c.close();
  c.open("for (std::size_t wf_k = 0; wf_k < seeds_.size(); ++wf_k)");
  c.line("const wfgen::rt::Tensor& wf_g = (*wf_grads)[wf_k];");
  c.line("const wfgen::rt::Tensor& wf_seed = seeds_[wf_k];");
  c.line("auto wf_what = [&] { return \"" + cls + "::backward(): the gradient of output \" + std::to_string(wf_k); };");
  c.line("if (!wf_g.defined()) " + bad + "NullBuffer, wf_what() + \" is an undefined tensor\");");
  c.open("if (wf_g.dtype() != wf_seed.dtype())");
  c.line(bad + "DTypeMismatch, wf_what() + \" has dtype \" + wfgen::rt::dtype_name(wf_g.dtype()) + \", expected \" + "
         "wfgen::rt::dtype_name(wf_seed.dtype()));");
  c.close();
  c.line("bool wf_same = wf_g.rank() == wf_seed.rank();");
  c.line("for (int wf_d = 0; wf_same && wf_d < wf_g.rank(); ++wf_d) wf_same = wf_g.dim(wf_d) == wf_seed.dim(wf_d);");
  c.open("if (!wf_same)");
  c.line(bad + "ShapeMismatch, wf_what() + \" has shape \" + wfgen::rt::shape_to_string(wf_g.shape()) + \", expected \" + "
         "wfgen::rt::shape_to_string(wf_seed.shape()));");
  c.close();
  c.close();
  c.close();
  c.comment("The try_ forms check the pullback's instructions too (a binding by forward() checked only the forward ones).");
  c.open("if (wf_check_all && !checked_)");
  c.line("if (wfgen::rt::Status wf_s = vm_.try_prepare(table_.data(), true); !wf_s.ok()) return wf_s;");
  c.line("checked_ = true;");
  c.close();
  c.line("if (wf_grads == nullptr) seeds_[0].fill(1.0);");
  c.line("else for (std::size_t wf_k = 0; wf_k < seeds_.size(); ++wf_k) seeds_[wf_k].copy_from((*wf_grads)[wf_k]);");
  c.line("forward_done_ = false;");
  c.line("vm_.run(wfgen::rt::Section::Backward);");
  c.line("return {};");
  c.close();
  c.line();
  throwing_and_try(c, cls, "backward", "", "",
                   [](bool all) { return "backward_(nullptr, " + std::string(all ? "true" : "false") + ")"; });
  throwing_and_try(c, cls, "backward", "const std::vector<wfgen::rt::Tensor>& output_grads", "",
                   [](bool all) { return "backward_(&output_grads, " + std::string(all ? "true" : "false") + ")"; });
  c.open("std::vector<std::pair<std::string, wfgen::rt::Tensor>> " + cls + "::gradients() const");
  c.line("std::vector<std::pair<std::string, wfgen::rt::Tensor>> wf_out;");
  c.line("for (std::size_t wf_k = 0; wf_k < grads_.size(); ++wf_k) wf_out.emplace_back(kGradNames[wf_k], grads_[wf_k]);");
  c.line("return wf_out;");
  c.close();
  c.line();
  c.open("wfgen::rt::Status " + cls + "::grad_(std::string_view name, wfgen::rt::Tensor& out) const");
  c.open("for (std::size_t wf_k = 0; wf_k < grads_.size(); ++wf_k)");
  c.open("if (kGradNames[wf_k] == name)");
  c.line("out = grads_[wf_k];");
  c.line("return {};");
  c.close();
  c.close();
  c.line(bad + "InvalidArgument, \"" + cls + " has no gradient of '\" + std::string(name) + \"' (parameters with requires_grad and the "
         "build's grad_inputs have one)\");");
  c.close();
  c.line();
  c.open("wfgen::rt::Tensor " + cls + "::grad(std::string_view name) const");
  c.line("wfgen::rt::Tensor wf_out;");
  c.line("if (wfgen::rt::Status wf_s = grad_(name, wf_out); !wf_s.ok()) wfgen::rt::fail(wf_s);");
  c.line("return wf_out;");
  c.close();
  c.line();
  c.open("wfgen::rt::Status " + cls + "::try_grad(std::string_view name, wfgen::rt::Tensor& out) const");
  c.line("return wfgen::rt::capture([&] { return grad_(name, out); });");
  c.close();
  c.line();
  c.open("void " + cls + "::zero_grad()");
  c.line("for (auto& wf_g : grads_)");
  c.line("  if (wf_g.defined()) wf_g.fill(0.0);");
  c.close();
  c.line();
  c.comment("Cannot fail on anything a caller passes; a Status for symmetry (and for a failing allocation or kernel with exceptions).");
  c.open("wfgen::rt::Status " + cls + "::try_zero_grad()");
  c.line("return wfgen::rt::capture([&] { zero_grad(); });");
  c.close();
  c.line();
  if (!build.optimizer) return;
  const spec::Optimizer& o = *build.optimizer;
  const spec::Node& node = *spec.find_node(o.node);
  c.open("void " + cls + "::step()");
  c.line("++step_count_;");
  c.comment(o.node + " (" + o.loc.str() + "), hyper-parameters in the node's argument order");
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
  c.line("const wfgen::rt::ScalarArg wf_s[] = {" + scalars + "};");
  const int n_state = optimizer_state_count(o);
  std::size_t state = 0;
  for (const auto& [param, grad] : trainable(g)) {
    const Value& p = g[g.params[param]];
    const spec::Impl* impl = optimizer_impl(spec, build, static_cast<int>(p.shape.size()));
    std::string refs = "params_[" + num(static_cast<std::int64_t>(param)) + "].ref(), grads_[" + num(static_cast<std::int64_t>(grad)) + "].ref()";
    for (int j = 0; j < n_state; ++j) refs += ", state_[" + num(static_cast<std::int64_t>(state++)) + "].ref()";
    c.open("");
    c.line("wfgen::rt::TensorRef wf_t[] = {" + refs + "};  // " + p.param_path);
    c.line(lower::kernel_name(o.node, impl->device, p.dtype, static_cast<int>(p.shape.size())) + "_erased(wf_t, wf_s);");
    c.close();
  }
  c.close();
  c.line();
  c.line("void " + cls + "::set_learning_rate(double lr) { lr_ = lr; }");
  c.line("double " + cls + "::learning_rate() const { return lr_; }");
  c.line("std::int64_t " + cls + "::step_count() const { return step_count_; }");
  c.line();
  c.open("wfgen::rt::Status " + cls + "::try_step()");
  c.line("return wfgen::rt::capture([&] { step(); });");
  c.close();
}

}  // namespace wfgen::emit::detail

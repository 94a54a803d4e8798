#include "wfgen/lower/kernel_plan.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "wfgen/support/names.hpp"

#ifdef WFGEN_HAVE_CLANG
#include "wfgen/cppkernel/cppkernel.hpp"
#endif

namespace wfgen::lower {

namespace {

using spec::ArgType;
using spec::BodyKind;

Diagnostic diag(SourceLoc loc, std::string message, int length = 1) {
  Diagnostic d;
  d.loc = std::move(loc);
  d.message = std::move(message);
  d.length = length;
  return d;
}

// A diagnostic inside a spec string (an expression), at its offset.
Diagnostic diag_in(const spec::Text& text, std::size_t offset, std::size_t length, std::string message) {
  return diag(text.at(offset), std::move(message), static_cast<int>(length));
}

expr::Type scalar_type(ArgType t) {
  switch (t) {
    case ArgType::Int: return expr::Type::Int;
    case ArgType::Float: return expr::Type::Float;
    case ArgType::Bool: return expr::Type::Bool;
    default: return expr::Type::Int;
  }
}

int bits(rt::DType d) { return static_cast<int>(rt::dtype_size(d)) * 8; }

// The builtins that write a dtype other than the call's: a node's out_dtype.
bool is_cast_builtin(const std::string& builtin) { return builtin == "cast" || builtin == "cast_bool"; }

class Planner {
 public:
  explicit Planner(const spec::Spec& spec) : spec_(spec) {}

  std::vector<KernelPlan> run(const KernelSelection& sel) {
    std::vector<KernelPlan> out;
    if (sel.exact_only) {
      // The kernels models need, in the order of the spec's impls.
      std::map<KernelRequest, bool> wanted;  // -> chosen by a model
      for (const auto& r : sel.exact) wanted[r] = wanted[r] || r.chosen_by_model;
      for (const auto& impl : spec_.impls) {
        const spec::Node* node = spec_.find_node(impl.node);
        for (rt::DType dt : impl.dtypes) {
          std::vector<int> ranks = default_ranks(impl, *node);
          ranks.insert(ranks.end(), impl.demand_ranks.begin(), impl.demand_ranks.end());
          for (int rank : ranks) {
            for (bool accumulate : {false, true}) {
              auto it = wanted.find({&impl, dt, rank, false, accumulate});
              if (it == wanted.end()) continue;
              judge_reject_ = !it->second;
              std::optional<KernelPlan> p = plan(*node, impl, dt, rank, accumulate);
              if (p) out.push_back(std::move(*p));
            }
          }
        }
      }
      if (!errors_.empty()) throw UserError(std::move(errors_));
      return out;
    }
    for (const auto& impl : spec_.impls) {
      if (!selected(impl, sel)) continue;
      const spec::Node* node = spec_.find_node(impl.node);
      WFGEN_ASSERT(node, "impl of an unknown node survived loading");
      for (rt::DType dt : impl.dtypes) {
        for (int rank : default_ranks(impl, *node)) {
          std::optional<KernelPlan> p = plan(*node, impl, dt, rank);
          if (p) out.push_back(std::move(*p));
        }
      }
    }
    if (!errors_.empty()) throw UserError(std::move(errors_));
    std::set<std::string> seen;
    for (const auto& p : out) {
      WFGEN_ASSERT(seen.insert(p.function).second, "two kernels named " + p.function);
    }
    return out;
  }

 private:
  bool selected(const spec::Impl& impl, const KernelSelection& sel) const {
    if (!sel.all) return std::find(sel.nodes.begin(), sel.nodes.end(), impl.node) != sel.nodes.end();
    return sel.include_stdlib || !impl.from_stdlib;
  }

  void error(Diagnostic d) {
    if (d.source_line.empty()) d.source_line = source_line(d.loc);
    errors_.push_back(std::move(d));
  }

  std::string source_line(const SourceLoc& loc) const { return spec_.line_at(loc); }

  std::optional<KernelPlan> plan(const spec::Node& node, const spec::Impl& impl, rt::DType dt, int rank, bool accumulate = false) {
    KernelPlan p;
    p.node = &node;
    p.impl = &impl;
    p.dtype = dt;
    p.rank = rank;
    p.accumulate = accumulate;
    p.function = kernel_name(node.name, impl.device, dt, rank, accumulate);
    std::string what = "the " + impl.device + " implementation of '" + node.name + "' for " + rt::dtype_name(dt) +
                       ", rank " + std::to_string(rank);
    if (impl.kind != BodyKind::View) {
      auto ranks = argument_ranks(node.where, rank);
      if (!ranks) {
        error(diag(impl.loc, what + ": the node's shapes (" + node.where.str() + ") cannot have rank " +
                                 std::to_string(rank) + " outputs; remove it from 'ranks'"));
        return std::nullopt;
      }
      if (!params(node, *ranks, p, impl)) return std::nullopt;
    }
    // reject depends on constructor arguments: with every kernel of an impl
    // it is judged on their defaults; kernels a model asked for were chosen
    // with the call's own arguments (trace), so they are always made.
    if (judge_reject_ && rejected(node, impl, dt, what)) return std::nullopt;
    if (impl.fuse_epilogue && impl.kind != BodyKind::Builtin && impl.kind != BodyKind::Gemm) {
      error(diag(impl.loc, what + ": fuse_epilogue is for gemm kernels and builtins that take an epilogue, but this kernel is " +
                               spec::body_kind_name(impl.kind) + "; remove it"));
      return std::nullopt;
    }
    if (impl.fuse_attention && !(impl.kind == BodyKind::Builtin && impl.builtin == "scaled_softmax")) {
      error(diag(impl.loc, what + ": fuse_attention is for the builtin scaled_softmax (the softmax between attention's two products), but this kernel is " +
                               (impl.kind == BodyKind::Builtin ? "the builtin '" + impl.builtin + "'" : std::string(spec::body_kind_name(impl.kind))) +
                               "; remove it"));
      return std::nullopt;
    }
    if (node.out_dtype && !(impl.kind == BodyKind::Builtin && is_cast_builtin(impl.builtin))) {
      error(diag(node.out_dtype_loc, "node '" + node.name + "' has an out_dtype (" + rt::dtype_name(*node.out_dtype) +
                                         "), which only kernels of the builtins 'cast' and 'cast_bool' write; " + what + " is " +
                                         spec::body_kind_name(impl.kind)));
      return std::nullopt;
    }
    switch (impl.kind) {
      case BodyKind::Elementwise: {
        auto e = compile(impl.elementwise, dt, env_of(node, p, dt), what);
        if (!e) return std::nullopt;
        p.body = std::move(*e);
        break;
      }
      case BodyKind::Reduce: {
        if (p.tensors.size() != 2 || p.tensors[0].written || !p.tensors[1].written) {
          error(diag(impl.loc, what + ": a reduce kernel needs one input and one output, but the node has " +
                                   node.where.str()));
          return std::nullopt;
        }
        if (impl.prologue) {
          auto e = compile(*impl.prologue, dt, env_of(node, p, dt), what);
          if (!e) return std::nullopt;
          p.prologue = std::move(*e);
        }
        if (impl.epilogue) {
          expr::Env env = scalar_env(p);
          env["acc"] = expr::Binding::element(dt);
          env["n"] = expr::Binding::scalar(expr::Type::Int);
          auto e = compile(*impl.epilogue, dt, env, what);
          if (!e) return std::nullopt;
          p.epilogue = std::move(*e);
        }
        break;
      }
      case BodyKind::Gemm:
        if (p.tensors.size() != 3 || !p.tensors[2].written || rank < 2) {
          error(diag(impl.loc, what + ": a gemm kernel needs A[~ i j] B[~ j k] C[~ i k] -> C[~ i k], but the node has " +
                                   node.where.str()));
          return std::nullopt;
        }
        if (impl.device == "blas" && !rt::dtype_is_float(dt)) {
          error(diag(impl.loc, what + ": BLAS multiplies f32 and f64 only; use the cpu device for " + rt::dtype_name(dt)));
          return std::nullopt;
        }
        break;
      case BodyKind::View:
        p.tensors.push_back({"A", "A", rank, true, node.where.inputs.empty() ? "" : node.where.inputs[0].str(), {}});
        for (const auto& a : node.args) p.scalars.push_back({a.name, cpp_identifier(a.name), a.type});
        break;
      case BodyKind::Builtin:
        if (!check_builtin(node, impl, p, what)) return std::nullopt;
        break;
      case BodyKind::Cpp:
        if (!plan_cpp(impl, p)) return std::nullopt;
        break;
      case BodyKind::Build:
      case BodyKind::Fused:  // planned by the fusion pass, never from a spec
        break;
    }
    return p;
  }

  // Parameters: the inputs in order, then the outputs that are not inputs,
  // then the constructor arguments.
  bool params(const spec::Node& node, const std::vector<int>& ranks, KernelPlan& p, const spec::Impl& impl) {
    const auto& d = node.where;
    std::map<std::string, std::size_t> index;
    auto add = [&](const subscript::Argument& a, int rank, bool written, std::size_t position) -> bool {
      std::string name = a.name.value_or("arg" + std::to_string(position));
      auto it = index.find(name);
      if (it != index.end()) {
        if (written) p.tensors[it->second].written = true;
        return true;
      }
      std::string problem = cpp_name_problem(name);
      if (!problem.empty()) {
        error(diag_in(node.where_text, a.offset, name.size(), "pointer name " + problem));
        return false;
      }
      // Mangling is deterministic but not one-to-one (`a+b` and `a_plus_b`).
      for (const auto& t : p.tensors) {
        if (t.cpp == cpp_identifier(name)) {
          error(diag_in(node.where_text, a.offset, name.size(),
                        "pointer names '" + t.name + "' and '" + name + "' would both be the C++ name " + t.cpp +
                            "; rename one"));
          return false;
        }
      }
      index[name] = p.tensors.size();
      p.tensors.push_back({name, cpp_identifier(name), rank, written, a.str(), {}});
      return true;
    };
    for (std::size_t i = 0; i < d.inputs.size(); ++i)
      if (!add(d.inputs[i], ranks[i], false, i)) return false;
    for (std::size_t i = 0; i < d.outputs.size(); ++i)
      if (!add(d.outputs[i], ranks[d.inputs.size() + i], true, d.inputs.size() + i)) return false;
    for (const auto& a : node.args) {
      for (const auto& t : p.tensors) {
        if (t.cpp == cpp_identifier(a.name)) {
          error(diag(impl.loc, "node '" + node.name + "' uses the name '" + a.name +
                                   "' both for a tensor and for a constructor argument"));
          return false;
        }
      }
      p.scalars.push_back({a.name, cpp_identifier(a.name), a.type});
    }
    return true;
  }

  expr::Env scalar_env(const KernelPlan& p) const {
    expr::Env env;
    for (const auto& s : p.scalars)
      if (s.type != ArgType::Ints && s.type != ArgType::Floats) env[s.name] = expr::Binding::scalar(scalar_type(s.type));
    return env;
  }

  expr::Env env_of(const spec::Node&, const KernelPlan& p, rt::DType dt) const {
    expr::Env env = scalar_env(p);
    for (const auto& t : p.tensors) env[t.name] = expr::Binding::element(dt);
    return env;
  }

  std::optional<expr::Expr> compile(const spec::Text& text, rt::DType dt, const expr::Env& env, const std::string& what) {
    try {
      return expr::compile(text.value, dt, env);
    } catch (const expr::Error& e) {
      error(diag_in(text, e.offset(), e.length(), std::string(e.what()) + " (in " + what + ")"));
      return std::nullopt;
    }
  }

  // reject, judged on the constructor arguments' defaults.
  bool rejected(const spec::Node& node, const spec::Impl& impl, rt::DType dt, const std::string& what) {
    std::vector<std::optional<spec::ArgValue>> defaults;
    for (const auto& a : node.args) defaults.push_back(a.default_value);
    try {
      return rejects(impl, node, dt, defaults);
    } catch (const expr::Error& e) {
      error(diag_in(*impl.reject, e.offset(), e.length(), std::string(e.what()) + " (in " + what + ", reject)"));
      return true;
    }
  }

#ifdef WFGEN_HAVE_CLANG
  // Reads the user's C++ file once per impl and checks the function against
  // every dtype and rank of the impl.
  bool plan_cpp(const spec::Impl& impl, KernelPlan& p) {
    auto it = cpp_kernels_.find(&impl);
    if (it == cpp_kernels_.end()) {
      cppkernel::Expectation ex;
      ex.function = impl.cpp_function.value;
      ex.dtypes = impl.dtypes;
      ex.ranks = default_ranks(impl, *p.node);
      ex.spec_loc = impl.cpp_function.loc;
      for (const auto& t : p.tensors) {
        ex.params.emplace_back(t.name, t.written ? cppkernel::ParamKind::TensorOut : cppkernel::ParamKind::TensorIn,
                               std::nullopt, t.rank == p.rank ? std::nullopt : std::optional<int>(t.rank));
      }
      for (const auto& s : p.scalars) {
        cppkernel::ParamKind k = cppkernel::ParamKind::Int;
        switch (s.type) {
          case ArgType::Int: k = cppkernel::ParamKind::Int; break;
          case ArgType::Float: k = cppkernel::ParamKind::Float; break;
          case ArgType::Bool: k = cppkernel::ParamKind::Bool; break;
          case ArgType::Ints: k = cppkernel::ParamKind::Ints; break;
          case ArgType::Floats: k = cppkernel::ParamKind::Floats; break;
        }
        ex.params.emplace_back(s.name, k);
      }
      try {
        it = cpp_kernels_.emplace(&impl, cppkernel::resolve(impl.cpp_file, ex)).first;
      } catch (const UserError& e) {
        for (Diagnostic d : e.diagnostics()) {
          // Errors at the spec (a missing file) show the spec's line too.
          if (d.source_line.empty()) d.source_line = source_line(d.loc);
          errors_.push_back(std::move(d));
        }
        cpp_kernels_.emplace(&impl, std::nullopt);
        return false;
      }
    }
    if (!it->second) return false;
    p.cpp_call = it->second->callee(p.dtype, p.rank);
    p.cpp_include = impl.cpp_file_as_written;
    return true;
  }
  std::map<const spec::Impl*, std::optional<cppkernel::KernelInfo>> cpp_kernels_;
#else
  bool plan_cpp(const spec::Impl& impl, KernelPlan&) {
    error(diag(impl.loc, "the cpp implementation of '" + impl.node +
                             "' needs Clang libTooling, but this wfgen was built with WFGEN_WITH_CLANG=OFF"));
    return false;
  }
#endif

  // What a builtin needs of its node: the number of tensors (with the node form
  // the message shows) and the constructor arguments it reads, by name and type.
  // epilogue_axes: the builtin can apply an element-wise epilogue to each
  // output element (`fuse_epilogue`), whose other operands are constant
  // over the output's last `epilogue_axes` axes (0: they may vary along
  // any axis; -1: it cannot).
  struct BuiltinForm {
    std::size_t tensors;
    const char* shape;
    std::vector<std::pair<const char*, ArgType>> args;
    int epilogue_axes = -1;
  };

 public:
  static const BuiltinForm* builtin_form(const std::string& builtin) {
    using A = ArgType;
    static const std::vector<std::pair<const char*, A>> window = {
        {"k_h", A::Int},      {"k_w", A::Int},   {"stride_h", A::Int},   {"stride_w", A::Int},
        {"pad_h", A::Int},    {"pad_w", A::Int}, {"dilation_h", A::Int}, {"dilation_w", A::Int}};
    static const std::vector<std::pair<const char*, A>> pool(window.begin(), window.begin() + 6);
    static const std::vector<std::pair<const char*, A>> adam = {
        {"lr", A::Float},    {"weight_decay", A::Float}, {"step", A::Int},
        {"beta1", A::Float}, {"beta2", A::Float},        {"eps", A::Float}};
    static const std::map<std::string, BuiltinForm> forms = {
        {"cast", {2, "X[~] OUT[~] -> OUT[~]", {}}},
        {"cast_bool", {2, "X[~] OUT[~] -> OUT[~]", {}}},
        {"gather", {3, "W[n d] IDX[~] OUT[~ d] -> OUT[~ d]", {}}},
        {"one_hot", {2, "IDX[~] OUT[~ classes] -> OUT[~ classes]", {}}},
        {"scatter_add", {4, "DOUT[m d] IDX[m] LIKE[n d] OUT[n d] -> OUT[n d]", {}}},
        {"concat_last", {3, "A[~ i] B[~ j] OUT[~ k] -> OUT[~ k] where k = i + j", {}}},
        {"extreme_mask", {2, "X[~ i] OUT[~ i] -> OUT[~ i]", {{"largest", A::Bool}}}},
        {"cumsum", {2, "X[~ i] OUT[~ i] -> OUT[~ i]", {{"exclusive", A::Bool}, {"reverse", A::Bool}}}},
        {"causal_mask", {2, "X[~ i j] OUT[~ i j] -> OUT[~ i j]", {{"value", A::Float}}}},
        {"scaled_softmax", {2, "X[~ i j] OUT[~ i j] -> OUT[~ i j]", {{"scale", A::Float}, {"causal", A::Bool}}}},
        {"layer_norm", {4, "X[~ f] G[f] B[f] OUT[~ f] -> OUT[~ f]", {{"eps", A::Float}}}},
        {"layer_norm_grad", {4, "DOUT[~ f] X[~ f] G[f] OUT[~ f] -> OUT[~ f]", {{"eps", A::Float}}}},
        {"layer_norm_param_grad", {3, "DOUT[n f] X[n f] OUT[f] -> OUT[f]", {{"eps", A::Float}, {"beta", A::Bool}}}},
        {"im2col", {2, "X[N C H W] COL[N C k_h k_w h_out w_out] -> COL[...]", window}},
        {"col2im", {3, "COL[N C k_h k_w h_out w_out] LIKE[N C H W] OUT[N C H W] -> OUT[...]", window}},
        {"depthwise_conv2d", {3, "X[N C H W] W[C k_h k_w] OUT[N C h_out w_out] -> OUT[...]", window, 2}},
        {"winograd_conv2d", {3, "X[N C H W] W[M C 3 3] OUT[N M h_out w_out] -> OUT[...]", {{"pad_h", A::Int}, {"pad_w", A::Int}}, 0}},
        {"max_pool", {2, "X[N C H W] OUT[N C h_out w_out] -> OUT[...]", pool}},
        {"max_pool_grad", {3, "DOUT[N C h_out w_out] X[N C H W] OUT[N C H W] -> OUT[...]", pool}},
        {"max_pool_pick", {3, "D[N C H W] X[N C H W] OUT[N C h_out w_out] -> OUT[...]", pool}},
        {"softmax_cross_entropy", {3, "LOGITS[~ c] TARGET[~ c] OUT[~ 1] -> OUT[~ 1]", {}}},
        {"sgd",
         {3, "P[~] G[~] M[~] -> P[~] M[~]",
          {{"lr", A::Float}, {"weight_decay", A::Float}, {"step", A::Int}, {"momentum", A::Float},
           {"dampening", A::Float}, {"nesterov", A::Bool}}}},
        {"adam", {4, "P[~] G[~] M[~] V[~] -> P[~] M[~] V[~]", adam}},
        {"adamw", {4, "P[~] G[~] M[~] V[~] -> P[~] M[~] V[~]", adam}},
    };
    auto it = forms.find(builtin);
    return it == forms.end() ? nullptr : &it->second;
  }

  // The plan of one kernel (nullopt after an error, in errors()).
  std::optional<KernelPlan> plan_one(const spec::Node& node, const spec::Impl& impl, rt::DType dt, int rank) {
    return plan(node, impl, dt, rank);
  }
  const std::vector<Diagnostic>& errors() const { return errors_; }

 private:

  bool check_builtin(const spec::Node& node, const spec::Impl& impl, KernelPlan& p, const std::string& what) {
    const BuiltinForm* form = builtin_form(impl.builtin);
    if (!form) {
      error(diag(impl.loc, what + ": the builtin '" + impl.builtin + "' is written as an elementwise body; use elementwise"));
      return false;
    }
    if (impl.fuse_epilogue && form->epilogue_axes < 0) {
      error(diag(impl.loc, what + ": the builtin '" + impl.builtin + "' takes no epilogue; remove fuse_epilogue"));
      return false;
    }
    if (p.tensors.size() != form->tensors) {
      error(diag(impl.loc, what + ": the builtin '" + impl.builtin + "' needs a node of the form " + form->shape +
                               ", but the node has " + node.where.str()));
      return false;
    }
    for (const auto& [name, type] : form->args) {
      bool found = false;
      for (const auto& s : p.scalars) found = found || (s.name == name && s.type == type);
      if (!found) {
        error(diag(impl.loc, what + ": the builtin '" + impl.builtin + "' needs a " + spec::arg_type_name(type) +
                                 " constructor argument '" + name + "'"));
        return false;
      }
    }
    if (is_cast_builtin(impl.builtin)) {
      if (!node.out_dtype) {
        error(diag(impl.loc, what + ": the builtin '" + impl.builtin + "' needs a node with an out_dtype (the dtype it casts to)"));
        return false;
      }
      p.tensors[1].dtype = node.out_dtype;
    }
    return true;
  }

  const spec::Spec& spec_;
  std::vector<Diagnostic> errors_;
  bool judge_reject_ = true;
};

}  // namespace

void bind_scalar_args(const spec::Node& node, const std::vector<std::optional<spec::ArgValue>>& args, expr::Env& env,
                      std::map<std::string, double>& values) {
  for (std::size_t k = 0; k < node.args.size() && k < args.size(); ++k) {
    if (!args[k]) continue;
    const std::string& name = node.args[k].name;
    if (const auto* i = std::get_if<std::int64_t>(&*args[k])) {
      env[name] = expr::Binding::scalar(expr::Type::Int);
      values[name] = static_cast<double>(*i);
    } else if (const auto* f = std::get_if<double>(&*args[k])) {
      env[name] = expr::Binding::scalar(expr::Type::Float);
      values[name] = *f;
    } else if (const auto* b = std::get_if<bool>(&*args[k])) {
      env[name] = expr::Binding::scalar(expr::Type::Bool);
      values[name] = *b ? 1.0 : 0.0;
    }
  }
}

bool rejects(const spec::Impl& impl, const spec::Node& node, rt::DType dtype,
             const std::vector<std::optional<spec::ArgValue>>& args) {
  if (!impl.reject) return false;
  expr::Env env{{"is_float", expr::Binding::scalar(expr::Type::Bool)},
                {"is_integer", expr::Binding::scalar(expr::Type::Bool)},
                {"bits", expr::Binding::scalar(expr::Type::Int)}};
  std::map<std::string, double> values{{"is_float", rt::dtype_is_float(dtype) ? 1.0 : 0.0},
                                        {"is_integer", rt::dtype_is_float(dtype) ? 0.0 : 1.0},
                                        {"bits", static_cast<double>(bits(dtype))}};
  bind_scalar_args(node, args, env, values);
  expr::Expr e = expr::compile(impl.reject->value, rt::DType::f64, env);
  if (e.type != expr::Type::Bool) {
    throw expr::TypeError("reject must be a condition (bool), but it is " + std::string(expr::type_name(e.type)), 0,
                          impl.reject->value.size());
  }
  return expr::evaluate(e, rt::DType::f64, values) != 0.0;
}

std::vector<std::string> tensor_names(const spec::Node& node) {
  std::vector<std::string> out;
  auto add = [&](const subscript::Argument& a, std::size_t position) {
    std::string name = a.name.value_or("arg" + std::to_string(position));
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  const auto& d = node.where;
  for (std::size_t i = 0; i < d.inputs.size(); ++i) add(d.inputs[i], i);
  for (std::size_t i = 0; i < d.outputs.size(); ++i) add(d.outputs[i], d.inputs.size() + i);
  return out;
}

std::string kernel_name(const std::string& node, const std::string& device, rt::DType dtype, int rank, bool accumulate) {
  std::string out = lower_name(node) + (accumulate ? "_acc" : "");
  if (device != "cpu") out += "_" + device;
  return out + "_" + rt::dtype_name(dtype) + "_r" + std::to_string(rank);
}

std::vector<int> default_ranks(const spec::Impl& impl, const spec::Node& node) {
  if (!impl.ranks.empty()) return impl.ranks;
  std::vector<int> out;
  for (int r = 1; r <= 4; ++r)
    if (argument_ranks(node.where, r)) out.push_back(r);
  return out;
}

bool has_rank(const spec::Impl& impl, const spec::Node& node, int rank) {
  const std::vector<int> ranks = default_ranks(impl, node);
  if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) return true;
  return std::find(impl.demand_ranks.begin(), impl.demand_ranks.end(), rank) != impl.demand_ranks.end() &&
         argument_ranks(node.where, rank).has_value();
}

std::optional<std::vector<int>> argument_ranks(const subscript::Declaration& decl, int rank) {
  if (decl.outputs.empty()) return std::nullopt;
  auto fixed = [](const subscript::Argument& a) {
    int n = 0;
    for (const auto& s : a.dims)
      if (s.kind != subscript::Subscript::Kind::Batch) ++n;
    return n;
  };
  const auto& first = decl.outputs.front();
  int batch = rank - fixed(first);
  if (batch < 0 || (!first.has_batch() && batch != 0)) return std::nullopt;
  std::vector<int> out;
  for (const auto* side : {&decl.inputs, &decl.outputs}) {
    for (const auto& a : *side) {
      int r = fixed(a) + (a.has_batch() ? batch : 0);
      if (r > rt::kMaxRank) return std::nullopt;
      out.push_back(r);
    }
  }
  return out;
}

std::vector<KernelPlan> plan_kernels(const spec::Spec& spec, const KernelSelection& selection) {
  return Planner(spec).run(selection);
}

bool takes_epilogue(const spec::Impl& impl) {
  if (!impl.fuse_epilogue) return false;
  if (impl.kind == BodyKind::Gemm) return true;
  const auto* form = impl.kind == BodyKind::Builtin ? Planner::builtin_form(impl.builtin) : nullptr;
  return form && form->epilogue_axes >= 0;
}

int epilogue_axes(const spec::Impl& impl) {
  if (!impl.fuse_epilogue || impl.kind != BodyKind::Builtin) return 0;
  const auto* form = Planner::builtin_form(impl.builtin);
  return form ? std::max(form->epilogue_axes, 0) : 0;
}

KernelPlan plan_with_epilogue(const spec::Spec& spec, const spec::Node& node, const spec::Impl& impl, rt::DType dtype, int rank,
                              int inputs, expr::Expr epilogue) {
  Planner planner(spec);
  std::optional<KernelPlan> p = planner.plan_one(node, impl, dtype, rank);
  WFGEN_ASSERT(p && planner.errors().empty(), "the kernel of a call fusion gives an epilogue does not plan");
  // The epilogue's inputs between the kernel's inputs and its output.
  const std::size_t at = p->tensors.size() - 1;
  const TensorParam out = p->tensors[at];
  for (int k = inputs - 1; k >= 0; --k) {
    const std::string in = "in" + std::to_string(k);
    p->tensors.insert(p->tensors.begin() + static_cast<std::ptrdiff_t>(at), TensorParam{in, in, out.rank, false, in + out.dsl.substr(out.name.size()), {}});
  }
  p->epilogue = std::move(epilogue);
  return *p;
}

}  // namespace wfgen::lower

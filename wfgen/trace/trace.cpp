#include "wfgen/trace/trace.hpp"

#include "wfgen/trace/builder.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "wfgen/body/body.hpp"
#include "wfgen/expr/expr.hpp"
#include "wfgen/lower/kernel_plan.hpp"
#include "wfgen/support/names.hpp"

namespace wfgen::trace {

namespace {

using graph::Dim;
using graph::Graph;
using graph::Kind;
using graph::Shape;
using graph::Value;
using graph::ViewKind;

// A value while tracing: a tensor (graph value id) or a plain value.
struct TValue {
  enum class Kind { None, Tensor, Int, Float, Bool, List };
  Kind kind = Kind::None;
  int id = -1;
  std::int64_t i = 0;
  double f = 0;
  std::vector<TValue> items;

  static TValue tensor(int id) { return {Kind::Tensor, id, 0, 0, {}}; }
  static TValue of_int(std::int64_t v) { return {Kind::Int, -1, v, 0, {}}; }
  static TValue of_float(double v) { return {Kind::Float, -1, 0, v, {}}; }
  static TValue of_bool(bool v) { return {Kind::Bool, -1, v ? 1 : 0, 0, {}}; }
  static TValue list(std::vector<TValue> v) { return {Kind::List, -1, 0, 0, std::move(v)}; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  double number() const { return kind == Kind::Float ? f : static_cast<double>(i); }
};

const char* kind_word(TValue::Kind k) {
  switch (k) {
    case TValue::Kind::None: return "nothing";
    case TValue::Kind::Tensor: return "a tensor";
    case TValue::Kind::Int: return "an integer";
    case TValue::Kind::Float: return "a float";
    case TValue::Kind::Bool: return "a bool";
    case TValue::Kind::List: return "a list";
  }
  return "?";
}

// One model being traced: its spec, the body text, the variables.
struct Frame {
  const spec::Model* model = nullptr;
  std::string scope;
  std::map<std::string, TValue> env;
  const body::Program* program = nullptr;
};

// Raised to unwind a `return` out of nested blocks.
struct Returned {
  std::vector<TValue> values;
  SourceLoc loc;  // the return statement
  int length = 1;
};

// What a model's where line is checked with: its arguments and the shapes of
// the tensors passed in (taken before the body can rebind their names).
struct Declared {
  shape::Args args;
  std::vector<Shape> inputs;
};

constexpr int kMaxModelDepth = 32;
constexpr std::int64_t kMaxLoopIterations = 100000;

class Tracer {
 public:
  Tracer(const spec::Spec& spec, const spec::Build& build) : spec_(spec), build_(build) {}
  // Continues a traced graph (the autodiff appends its pullback this way).
  Tracer(const spec::Spec& spec, const spec::Build& build, Graph g) : spec_(spec), build_(build), g_(std::move(g)) {}

  Graph& graph() { return g_; }
  Graph take() { return std::move(g_); }

  // --- the autodiff's entry points (detail::Builder) ---------------------------

  // Values made from now on are attributed to `loc` and `source` (the
  // forward line they differentiate, or the line a rewrite replaces), and
  // belong to the pullback unless `pullback` is false.
  void attribute(const SourceLoc& loc, const std::string& source, bool pullback = true, std::string scope = {}) {
    attributing_ = true;
    attr_pullback_ = pullback;
    if (!pullback) scope_ = std::move(scope);
    attr_loc_ = loc;
    attr_source_ = source;
    placeholder_ = spec::Text{"", loc, {loc}, true};
    text_ = &placeholder_;
    stmt_ = nullptr;
  }

  static TValue arg_value(const spec::ArgValue& v) { return from_arg(v); }

  // A node's backward expression with `names` bound; nullopt when it is the
  // number 0 (no gradient flows to that input).
  std::optional<int> eval_backward(const spec::Text& text, const std::vector<std::pair<std::string, TValue>>& names) {
    body::ExprPtr e;
    try {
      e = body::parse_expression(text.value);
    } catch (const body::ParseError& err) {
      fail(text.at(err.offset()), std::string("in a backward expression: ") + err.what(), {}, static_cast<int>(err.length()));
    }
    Frame frame;
    frame.scope = scope_;
    for (const auto& [name, v] : names) frame.env[name] = v;
    const spec::Text* saved = text_;
    text_ = &text;
    TValue v = eval(frame, *e);
    text_ = saved;
    if (v.is_number() && v.number() == 0) return std::nullopt;
    if (v.kind != TValue::Kind::Tensor) {
      fail(text.loc, "a backward expression gives a tensor (or 0 for no gradient), but this one gives " + std::string(kind_word(v.kind)));
    }
    return v.id;
  }

  int node(const std::string& name, const std::vector<int>& tensors, const std::vector<spec::ArgValue>& args = {}) {
    return call_node_simple(here_, name, tensors, args).id;
  }
  int permute_of(int x, const std::vector<int>& perm) { return permute(x, perm, here_); }
  int reshape_of(int x, const Shape& shape) { return reshape(x, shape, here_); }
  int broadcast_of(int x, const Shape& shape) { return broadcast(x, shape, here_); }
  int view_of(int base, ViewKind kind, const Shape& shape) { return view(base, kind, shape, here_); }
  // A fresh tensor of zeros (the node fill with value 0).
  int zeros(const Shape& shape) {
    const spec::Node* n = spec_.find_node("fill");
    if (!n) fail_at(here_, "the standard node 'fill' is not available (was it overridden or removed?)");
    std::vector<spec::ArgValue> args{spec::ArgValue(0.0)};
    int rank = static_cast<int>(shape.size());
    const spec::Impl* impl = choose_impl(*n, rank, args, here_);
    Value v = fresh(Kind::Call, shape, at(0), current_source());
    v.node = n;
    v.impl = impl;
    v.args = args;
    v.rank = rank;
    int id = add(std::move(v));
    g_[id].operands = {id};
    g_[id].result_operand = 0;
    return id;
  }
  // Sums `x` over `axes`, keeping them as size 1.
  int sum_axes(int x, const std::vector<int>& axes) {
    std::vector<TValue> items;
    for (int a : axes) items.push_back(TValue::of_int(a));
    Frame frame;
    return reduce(frame, here_, "sum", {TValue::tensor(x)}, {{"axis", TValue::list(items)}, {"keepdims", TValue::of_bool(true)}}).id;
  }

  Graph run() {
    const spec::Model* model = spec_.find_model(build_.model);
    WFGEN_ASSERT(model && model->where, "build checked at load time");
    g_.model = model->name;
    Frame frame;
    frame.model = model;
    frame.scope = model->name;
    stack_.push_back(model);
    bind_args(frame, *model, build_args(*model), model->loc);
    // Inputs: shapes from the where line; symbols that are not arguments are run-time dims.
    const auto& decl = *model->where;
    for (const auto& a : decl.inputs) {
      Shape shape;
      for (const auto& s : a.dims) {
        if (s.kind == subscript::Subscript::Kind::Batch) {
          fail(model->where_text->at(s.offset), "the inputs of a built model need a known rank; replace '~' in " + a.str() +
                                                    " by named dims such as 'batch'");
        }
        if (s.kind == subscript::Subscript::Kind::Integer) {
          shape.push_back(Dim(s.value));
          continue;
        }
        auto it = frame.env.find(s.name);
        if (it != frame.env.end()) {
          if (it->second.kind != TValue::Kind::Int) {
            fail(model->where_text->at(s.offset), "'" + s.name + "' is " + kind_word(it->second.kind) + ", not a size");
          }
          shape.push_back(Dim(it->second.i));
        } else {
          if (std::find(g_.symbols.begin(), g_.symbols.end(), s.name) == g_.symbols.end()) g_.symbols.push_back(s.name);
          shape.push_back(Dim::symbol(s.name));
        }
      }
      check_size(shape, model->where_text->loc, "input '" + *a.name + "' of model '" + model->name + "'");
      Value v = fresh(Kind::Input, shape, model->loc, "");
      v.name = *a.name;
      if (std::optional<rt::DType> dt = build_.input_dtype(*a.name)) {
        v.caller_dtype = *dt;
        v.holds_indices = true;
      }
      int id = add(std::move(v));
      g_.inputs.push_back(id);
      frame.env[*a.name] = TValue::tensor(id);
    }
    std::vector<TValue> results = trace_model(frame, *model);
    for (std::size_t k = 0; k < results.size(); ++k) {
      if (results[k].kind != TValue::Kind::Tensor) {
        fail(model->call.loc, "model '" + model->name + "' returns " + kind_word(results[k].kind) +
                                  " as its result " + std::to_string(k + 1) + "; a built model returns tensors");
      }
      g_.outputs.push_back(results[k].id);
      std::string name = k < decl.outputs.size() && decl.outputs[k].name ? *decl.outputs[k].name : "out" + std::to_string(k);
      g_.output_names.push_back(name);
    }
    return std::move(g_);
  }

 private:
  // --- building the graph -----------------------------------------------------

  Value fresh(Kind kind, Shape shape, SourceLoc loc, std::string source) {
    Value v;
    v.kind = kind;
    v.dtype = build_.dtype;
    v.shape = std::move(shape);
    v.loc = std::move(loc);
    v.source = std::move(source);
    v.scope = scope_;
    if (attributing_) {
      v.loc = attr_loc_;
      v.source = attr_source_;
      v.backward = attr_pullback_;
    }
    return v;
  }

  int add(Value v) {
    v.id = static_cast<int>(g_.values.size());
    g_.values.push_back(std::move(v));
    return g_.values.back().id;
  }

  const Value& val(int id) const { return g_[id]; }

  // --- errors -------------------------------------------------------------------

  [[noreturn]] void fail(SourceLoc loc, std::string message, std::string detail = {}, int length = 1) {
    Diagnostic d;
    d.loc = std::move(loc);
    d.message = std::move(message);
    d.source_line = spec_.line_at(d.loc);
    d.length = length;
    d.detail = std::move(detail);
    throw UserError(std::move(d));
  }

  // The location of an expression of the body being traced.
  SourceLoc at(std::size_t offset) const { return text_->at(offset); }
  [[noreturn]] void fail_at(const body::Expr& e, std::string message, std::string detail = {}) {
    fail(at(e.offset), std::move(message), std::move(detail), static_cast<int>(std::max<std::size_t>(1, e.length)));
  }

  std::string current_source() const { return stmt_ ? line_text(*stmt_) : std::string(); }

  // The statement as the parser understood it (comments dropped, spacing
  // normalised): this text reaches generated comments, so it is never the
  // raw spec line.
  std::string line_text(const body::Stmt& s) const {
    std::string out;
    auto join_exprs = [](const std::vector<body::ExprPtr>& v) {
      std::string r;
      for (const auto& e : v) r += (r.empty() ? "" : ", ") + e->str();
      return r;
    };
    switch (s.kind) {
      case body::Stmt::Kind::Assign:
        for (const auto& t : s.targets) out += (out.empty() ? "" : ", ") + t;
        out += " = " + s.value->str();
        break;
      case body::Stmt::Kind::Return: out = "return " + join_exprs(s.results); break;
      case body::Stmt::Kind::If: out = "if " + s.value->str() + ":"; break;
      case body::Stmt::Kind::For:
        out = "for " + s.targets[0] + " in range(" + (s.range_start ? s.range_start->str() + ", " : "") + s.value->str() + "):";
        break;
      case body::Stmt::Kind::Pass: out = "pass"; break;
    }
    return out;
  }

  // --- arguments ----------------------------------------------------------------

  std::vector<std::pair<std::string, TValue>> build_args(const spec::Model&) {
    std::vector<std::pair<std::string, TValue>> out;
    for (const auto& [name, v] : build_.args) out.emplace_back(name, from_arg(v));
    return out;
  }

  static TValue from_arg(const spec::ArgValue& v) {
    return std::visit(
        [](const auto& x) -> TValue {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>) return TValue::of_bool(x);
          else if constexpr (std::is_same_v<T, std::int64_t>) return TValue::of_int(x);
          else if constexpr (std::is_same_v<T, double>) return TValue::of_float(x);
          else {
            std::vector<TValue> items;
            for (auto e : x) {
              if constexpr (std::is_same_v<std::decay_t<decltype(e)>, double>) items.push_back(TValue::of_float(e));
              else items.push_back(TValue::of_int(e));
            }
            return TValue::list(std::move(items));
          }
        },
        v);
  }

  // Converts a traced value to a constructor argument of `type`; nullopt if it does not fit.
  static std::optional<spec::ArgValue> to_arg(const TValue& v, spec::ArgType type) {
    switch (type) {
      case spec::ArgType::Int:
        if (v.kind == TValue::Kind::Int) return spec::ArgValue(v.i);
        return std::nullopt;
      case spec::ArgType::Float:
        if (v.kind == TValue::Kind::Int || v.kind == TValue::Kind::Float) return spec::ArgValue(v.number());
        return std::nullopt;
      case spec::ArgType::Bool:
        if (v.kind == TValue::Kind::Bool) return spec::ArgValue(v.i != 0);
        return std::nullopt;
      case spec::ArgType::Ints: {
        if (v.kind != TValue::Kind::List) return std::nullopt;
        std::vector<std::int64_t> out;
        for (const auto& e : v.items) {
          if (e.kind != TValue::Kind::Int) return std::nullopt;
          out.push_back(e.i);
        }
        return spec::ArgValue(out);
      }
      case spec::ArgType::Floats: {
        if (v.kind != TValue::Kind::List) return std::nullopt;
        std::vector<double> out;
        for (const auto& e : v.items) {
          if (!e.is_number()) return std::nullopt;
          out.push_back(e.number());
        }
        return spec::ArgValue(out);
      }
    }
    return std::nullopt;
  }

  // Binds a model's constructor arguments (given values, then defaults).
  void bind_args(Frame& frame, const spec::Model& m, const std::vector<std::pair<std::string, TValue>>& given, SourceLoc loc) {
    for (const auto& a : m.args) {
      const TValue* v = nullptr;
      for (const auto& [name, value] : given)
        if (name == a.name) v = &value;
      if (v) {
        if (!to_arg(*v, a.type)) {
          fail(loc, "argument '" + a.name + "' of model '" + m.name + "' is " + spec::arg_type_name(a.type) + ", but got " +
                        kind_word(v->kind));
        }
        frame.env[a.name] = *v;
      } else if (a.default_value) {
        frame.env[a.name] = from_arg(*a.default_value);
      } else {
        fail(loc, "model '" + m.name + "' needs its argument '" + a.name + "'");
      }
    }
  }

  // --- models -------------------------------------------------------------------

  std::vector<TValue> trace_model(Frame& frame, const spec::Model& m, const std::optional<SourceLoc>& call_site = std::nullopt) {
    if (++depth_ > kMaxModelDepth) fail(m.loc, "models call each other more than " + std::to_string(kMaxModelDepth) + " deep");
    std::string saved_scope = scope_;
    const spec::Text* saved_text = text_;
    const body::Stmt* saved_stmt = stmt_;
    scope_ = frame.scope;
    text_ = &m.call;
    // Parameters of this instance.
    for (const auto& p : m.params) {
      Shape shape;
      for (const auto& d : p.shape) shape.push_back(eval_dim(frame, d, p));
      check_size(shape, p.loc, "parameter '" + p.name + "' of model '" + m.name + "'");
      Value v = fresh(Kind::Param, shape, p.loc, "");
      v.name = p.name;
      v.param = &p;
      v.param_path = frame.scope.find('/') == std::string::npos ? p.name : frame.scope.substr(frame.scope.find('/') + 1) + "." + p.name;
      int id = add(std::move(v));
      g_.params.push_back(id);
      frame.env[p.name] = TValue::tensor(id);
    }
    const std::optional<Declared> decl = declared(frame, m);
    const body::Program& program = parsed(m);
    std::vector<TValue> results;
    std::optional<Returned> ret;
    try {
      run_block(frame, program.statements);
    } catch (Returned& r) {
      results = r.values;
      ret = std::move(r);
    }
    scope_ = saved_scope;
    text_ = saved_text;
    stmt_ = saved_stmt;
    --depth_;
    if (decl) check_outputs(m, *decl, results, ret, call_site);
    return results;
  }

  const body::Program& parsed(const spec::Model& m) {
    auto it = programs_.find(&m);
    if (it != programs_.end()) return it->second;
    try {
      return programs_.emplace(&m, body::parse(m.call.value)).first->second;
    } catch (const body::ParseError& e) {
      fail(m.call.at(e.offset()), std::string("in the body of model '") + m.name + "': " + e.what(), {},
           static_cast<int>(e.length()));
    }
  }

  Dim eval_dim(Frame& frame, const spec::Text& text, const spec::Param& p) {
    body::ExprPtr e;
    try {
      e = body::parse_expression(text.value);
    } catch (const body::ParseError& err) {
      fail(text.at(err.offset()), std::string("in the shape of parameter '") + p.name + "': " + err.what());
    }
    const spec::Text* saved = text_;
    text_ = &text;
    TValue v = eval(frame, *e);
    text_ = saved;
    if (v.kind != TValue::Kind::Int || v.i < 0) {
      fail(text.loc, "the shape of parameter '" + p.name + "' needs sizes >= 0, but " + quote(text.value) + " is " +
                         (v.kind == TValue::Kind::Int ? std::to_string(v.i) : std::string(kind_word(v.kind))));
    }
    return Dim(v.i);
  }

  // A tensor whose known dims multiply past what byte counts can hold
  // (int64, 8-byte elements) cannot be allocated; say so at its spec entry
  // rather than overflow later.
  void check_size(const Shape& shape, const SourceLoc& loc, const std::string& what) {
    constexpr std::int64_t kMaxElements = std::int64_t{1} << 56;
    std::int64_t n = 1;
    for (const auto& d : shape) {
      if (!d.is_known()) continue;
      if (__builtin_mul_overflow(n, d.value(), &n) || n > kMaxElements) {
        fail(loc, "the " + what + " would have shape " + shape::shape_str(shape) + ", more than 2^56 elements; no machine can hold it");
      }
    }
  }

  // --- a model's results against its where line ----------------------------------

  std::optional<Declared> declared(const Frame& frame, const spec::Model& m) const {
    if (!m.where || m.where->outputs.empty()) return std::nullopt;
    Declared d;
    for (const auto& a : m.args) {
      auto it = frame.env.find(a.name);
      if (it == frame.env.end()) continue;
      const TValue& v = it->second;
      if (v.kind == TValue::Kind::Int) d.args[a.name] = shape::Value::scalar(Dim(v.i));
      if (v.kind == TValue::Kind::List && a.type == spec::ArgType::Ints) {
        Shape dims;
        for (const auto& x : v.items) dims.push_back(Dim(x.i));
        d.args[a.name] = shape::Value::list(dims);
      }
    }
    for (const auto& in : m.where->inputs) {
      auto it = in.name ? frame.env.find(*in.name) : frame.env.end();
      if (it == frame.env.end() || it->second.kind != TValue::Kind::Tensor) return std::nullopt;
      d.inputs.push_back(val(it->second.id).shape);
    }
    return d;
  }

  // True when the dims can differ: different sizes, or symbolic expressions
  // that give different sizes for some values of their run-time symbols.
  // `expected` is "?" (any) where the where line leaves an output dim to the
  // body (conv2d's h_out).
  static bool dims_differ(const Dim& expected, const Dim& got) {
    if (!expected.is_known() && (expected.str() == "?" || expected.str() == "~")) return false;
    if (expected == got) return false;
    if (expected.is_known() && got.is_known()) return true;
    std::vector<std::string> names = expected.symbols();
    for (const auto& n : got.symbols())
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    // Three sets of distinct values; an expression that divides by zero or
    // overflows for one set is judged by the others.
    for (std::int64_t base : {2, 17, 101}) {
      auto lookup = [&](const std::string& name) -> std::optional<Dim> {
        auto k = static_cast<std::int64_t>(std::find(names.begin(), names.end(), name) - names.begin());
        return Dim(base + k * (base % 7 + 3));
      };
      try {
        Dim a = expected.substitute(lookup), b = got.substitute(lookup);
        if (a.is_known() && b.is_known() && a.value() != b.value()) return true;
      } catch (const std::exception&) {
        continue;
      }
    }
    return false;
  }

  // The subscript of `arg` that axis `axis` of a predicted shape of `rank`
  // dims comes from: "n", "~" or "" (an integer).
  static std::string subscript_at(const subscript::Argument& arg, std::size_t axis, std::size_t rank) {
    const auto& dims = arg.dims;
    std::size_t batch = dims.size();
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (dims[i].kind == subscript::Subscript::Kind::Batch) batch = i;
    const subscript::Subscript* s = nullptr;
    if (batch == dims.size()) {
      if (rank == dims.size()) s = &dims[axis];
    } else if (axis < batch) {
      s = &dims[axis];
    } else if (rank + 1 >= dims.size() && axis + (dims.size() - batch - 1) >= rank) {
      s = &dims[dims.size() - (rank - axis)];
    } else {
      return "~";
    }
    if (!s || s->kind == subscript::Subscript::Kind::Integer) return "";
    return s->kind == subscript::Subscript::Kind::Batch ? "~" : s->name;
  }

  static std::string ordinal(std::size_t n) {
    const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
    return std::to_string(n) + suffix;
  }

  // The tensors a model's body returned against the outputs of its where
  // line: their count, and the rank and every dim of each, with symbols
  // bound by the inputs (and arguments) as the where line binds them. A
  // Shape-Error report at the return statement, with notes at the where
  // line's output and, for a model called by another, at the call.
  void check_outputs(const spec::Model& m, const Declared& in, const std::vector<TValue>& results,
                     const std::optional<Returned>& ret, const std::optional<SourceLoc>& call_site) {
    const subscript::Declaration& decl = *m.where;
    const shape::CheckResult predicted = shape::check(decl, in.args, in.inputs);
    std::vector<Shape> returned;
    for (const auto& r : results) returned.push_back(r.kind == TValue::Kind::Tensor ? val(r.id).shape : Shape{Dim::symbol("?")});
    std::vector<shape::Report> reports;
    std::string message;
    std::size_t culprit = 0;  // the output the notes point at
    auto declared_str = [&](std::size_t k) {
      return decl.outputs[k].str() + " = " + shape::shape_str(predicted.outputs[k].shape);
    };
    if (results.size() != decl.outputs.size()) {
      std::string outs;
      for (const auto& o : decl.outputs) outs += (outs.empty() ? "" : " ") + o.str();
      message = "model '" + m.name + "' returns " + std::to_string(results.size()) + " result" + (results.size() == 1 ? "" : "s") +
                ", but its where line declares " + std::to_string(decl.outputs.size()) + " output" +
                (decl.outputs.size() == 1 ? "" : "s") + ": " + outs;
      reports.push_back({"", "Couldn't step forward: the model declares " + std::to_string(decl.outputs.size()) + " output" +
                                 (decl.outputs.size() == 1 ? "" : "s") + " (" + outs + "), but its body returns " +
                                 std::to_string(results.size()) + ": " + shape::shapes_str(returned) + ".",
                         std::nullopt, 1});
    } else {
      for (std::size_t k = 0; k < results.size(); ++k) {
        const subscript::Argument& arg = decl.outputs[k];
        const Shape& want = predicted.outputs[k].shape;
        const std::string label = "the " + ordinal(k + 1) + " output " + arg.str();
        const std::string name = arg.name ? *arg.name : arg.str();
        std::string first;
        if (results[k].kind != TValue::Kind::Tensor) {
          first = "model '" + m.name + "' returns " + kind_word(results[k].kind) + " as its output " + name +
                  ", but its where line declares the tensor " + arg.str();
          reports.push_back({name, "Couldn't identify " + label + ": the body returns " + kind_word(results[k].kind) +
                                       ", not a tensor.",
                             arg.offset, arg.length});
        } else if (want.size() != returned[k].size()) {
          first = "model '" + m.name + "' returns " + name + " with shape " + shape::shape_str(returned[k]) +
                  ", but its where line declares " + declared_str(k);
          reports.push_back({name, "Couldn't identify the rank of " + label + ": it needs " + std::to_string(want.size()) +
                                       " dim" + (want.size() == 1 ? "" : "s") + ", but got " +
                                       std::to_string(returned[k].size()) + ".\n Expected " + declared_str(k) +
                                       ", but got: " + shape::shape_str(returned[k]),
                             arg.offset, arg.length});
        } else {
          for (std::size_t axis = 0; axis < want.size(); ++axis) {
            if (!dims_differ(want[axis], returned[k][axis])) continue;
            if (first.empty()) {
              first = "model '" + m.name + "' returns " + name + " with shape " + shape::shape_str(returned[k]) +
                      ", but its where line declares " + declared_str(k);
            }
            std::string sub = subscript_at(arg, axis, want.size());
            std::string what = sub.empty() ? "axis " + std::to_string(axis) : sub;
            reports.push_back({sub, "Couldn't identify " + what + " of " + label + ": " + what + " is determined as " +
                                        (want[axis].is_known() ? "" : "the run-time dim ") + want[axis].str() + "\n but got: " + returned[k][axis].str() + " at axis " +
                                        std::to_string(axis) + ".\n Expected " + declared_str(k) + ", but got: " +
                                        shape::shape_str(returned[k]),
                               arg.offset, arg.length});
          }
        }
        if (message.empty() && !first.empty()) {
          message = first;
          culprit = k;
        }
      }
    }
    if (reports.empty()) return;
    shape::CheckResult r;
    r.outputs = predicted.outputs;
    r.reports = std::move(reports);
    shape::CheckOptions o;
    o.operation = m.name;
    o.kind = "Model";
    o.returned = returned;
    Diagnostic d;
    d.loc = ret ? ret->loc : m.where_text->loc;
    d.length = ret ? ret->length : 1;
    d.message = message;
    d.source_line = spec_.line_at(d.loc);
    d.detail = shape::render_report(decl, in.inputs, r, o);
    std::vector<Diagnostic> all{d};
    Diagnostic where;
    where.severity = Diagnostic::Severity::Note;
    const subscript::Argument& out = decl.outputs[std::min(culprit, decl.outputs.size() - 1)];
    where.loc = m.where_text->at(out.offset);
    where.length = static_cast<int>(std::max<std::size_t>(1, out.length));
    where.message = "the where line of model '" + m.name + "' declares " + out.str() + " here";
    where.source_line = spec_.line_at(where.loc);
    all.push_back(std::move(where));
    if (call_site) {
      Diagnostic call;
      call.severity = Diagnostic::Severity::Note;
      call.loc = *call_site;
      call.message = "in this call of model '" + m.name + "'";
      call.source_line = spec_.line_at(call.loc);
      all.push_back(std::move(call));
    }
    throw UserError(std::move(all));
  }

  // --- statements ---------------------------------------------------------------

  void run_block(Frame& frame, const body::Block& block) {
    for (const auto& s : block) run_stmt(frame, *s);
  }

  void run_stmt(Frame& frame, const body::Stmt& s) {
    stmt_ = &s;
    switch (s.kind) {
      case body::Stmt::Kind::Pass: return;
      case body::Stmt::Kind::Assign: {
        TValue v = eval(frame, *s.value);
        if (s.targets.size() == 1) {
          assign(frame, s.targets[0], v);
          return;
        }
        if (v.kind != TValue::Kind::List || v.items.size() != s.targets.size()) {
          fail(at(s.offset), "cannot unpack " + std::string(kind_word(v.kind)) +
                                 (v.kind == TValue::Kind::List ? " of " + std::to_string(v.items.size()) : "") + " into " +
                                 std::to_string(s.targets.size()) + " names");
        }
        for (std::size_t k = 0; k < s.targets.size(); ++k) assign(frame, s.targets[k], v.items[k]);
        return;
      }
      case body::Stmt::Kind::Return: {
        Returned r;
        r.loc = at(s.offset);
        r.length = static_cast<int>(std::max<std::size_t>(1, s.length));
        for (const auto& e : s.results) {
          TValue v = eval(frame, *e);
          r.values.push_back(v);
        }
        throw r;
      }
      case body::Stmt::Kind::If: {
        TValue c = eval(frame, *s.value);
        if (c.kind == TValue::Kind::Tensor) {
          fail_at(*s.value, "an if condition is evaluated while tracing, so it cannot depend on a tensor; use select() for "
                            "element-wise choices");
        }
        if (!c.is_number()) fail_at(*s.value, "an if condition must be a number or a bool, but this is " + std::string(kind_word(c.kind)));
        run_block(frame, c.number() != 0 ? s.body : s.orelse);
        return;
      }
      case body::Stmt::Kind::For: {
        std::int64_t start = 0;
        if (s.range_start) start = int_of(frame, *s.range_start, "range start");
        std::int64_t end = int_of(frame, *s.value, "range end");
        if (end - start > kMaxLoopIterations) fail_at(*s.value, "this loop would be unrolled " + std::to_string(end - start) + " times, more than " + std::to_string(kMaxLoopIterations));
        for (std::int64_t i = start; i < end; ++i) {
          frame.env[s.targets[0]] = TValue::of_int(i);
          run_block(frame, s.body);
        }
        return;
      }
    }
  }

  void assign(Frame& frame, const std::string& name, const TValue& v) {
    if (v.kind == TValue::Kind::Tensor && g_[v.id].name.empty() && g_[v.id].kind == Kind::Call) g_[v.id].name = name;
    frame.env[name] = v;
  }

  std::int64_t int_of(Frame& frame, const body::Expr& e, const std::string& what) {
    TValue v = eval(frame, e);
    if (v.kind != TValue::Kind::Int) fail_at(e, what + " must be an integer, but this is " + std::string(kind_word(v.kind)));
    return v.i;
  }

  // --- expressions --------------------------------------------------------------

  TValue eval(Frame& frame, const body::Expr& e) {
    using K = body::Expr::Kind;
    switch (e.kind) {
      case K::Int: return TValue::of_int(e.ivalue);
      case K::Float: return TValue::of_float(e.fvalue);
      case K::Bool: return TValue::of_bool(e.ivalue != 0);
      case K::Name: {
        auto it = frame.env.find(e.name);
        if (it != frame.env.end()) return it->second;
        std::vector<std::string> names;
        for (const auto& [k, v] : frame.env) names.push_back(k);
        fail_at(e, "unknown name '" + e.name + "'" + did_you_mean(e.name, names));
      }
      case K::Tuple:
      case K::List: {
        std::vector<TValue> items;
        for (const auto& o : e.operands) items.push_back(eval(frame, *o));
        return TValue::list(std::move(items));
      }
      case K::Unary: {
        TValue v = eval(frame, *e.operands[0]);
        if (e.op == "not") {
          if (!v.is_number()) fail_at(e, "'not' needs a bool, but got " + std::string(kind_word(v.kind)));
          return TValue::of_bool(v.number() == 0);
        }
        if (v.kind == TValue::Kind::Tensor) return call_node_simple(e, "neg", {v.id}, {});
        if (v.kind == TValue::Kind::Int) return TValue::of_int(-v.i);
        if (v.kind == TValue::Kind::Float) return TValue::of_float(-v.f);
        fail_at(e, "cannot negate " + std::string(kind_word(v.kind)));
      }
      case K::Binary: return binary(frame, e);
      case K::Attribute: {
        TValue obj = eval(frame, *e.operands[0]);
        if (obj.kind != TValue::Kind::Tensor) fail_at(e, "'." + e.name + "' needs a tensor, but got " + std::string(kind_word(obj.kind)));
        const Value& v = val(obj.id);
        if (e.name == "T") {
          if (v.shape.size() < 2) fail_at(e, "x.T swaps the last two axes, but this tensor has rank " + std::to_string(v.shape.size()));
          std::vector<int> perm(v.shape.size());
          for (std::size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int>(k);
          std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
          return TValue::tensor(permute(obj.id, perm, e));
        }
        if (e.name == "shape") {
          std::vector<TValue> dims;
          for (const auto& d : v.shape) {
            if (!d.is_known()) fail_at(e, "x.shape has the run-time dim '" + d.str() + "', which is not known while tracing");
            dims.push_back(TValue::of_int(d.value()));
          }
          return TValue::list(std::move(dims));
        }
        if (e.name == "ndim") return TValue::of_int(static_cast<std::int64_t>(v.shape.size()));
        fail_at(e, "unknown attribute '" + e.name + "' of a tensor (known: T, shape, ndim; methods: reshape, permute, transpose, "
                   "unsqueeze, squeeze, broadcast_to)");
      }
      case K::Subscript: return subscript(frame, e);
      case K::Call: return call(frame, e);
    }
    fail_at(e, "unsupported expression");
  }

  TValue binary(Frame& frame, const body::Expr& e) {
    const std::string& op = e.op;
    if (op == "and" || op == "or") {
      TValue l = eval(frame, *e.operands[0]);
      if (!l.is_number()) fail_at(*e.operands[0], "'" + op + "' needs bools, but got " + std::string(kind_word(l.kind)));
      bool lv = l.number() != 0;
      if (op == "and" && !lv) return TValue::of_bool(false);
      if (op == "or" && lv) return TValue::of_bool(true);
      TValue r = eval(frame, *e.operands[1]);
      if (!r.is_number()) fail_at(*e.operands[1], "'" + op + "' needs bools, but got " + std::string(kind_word(r.kind)));
      return TValue::of_bool(r.number() != 0);
    }
    TValue l = eval(frame, *e.operands[0]);
    TValue r = eval(frame, *e.operands[1]);
    bool lt = l.kind == TValue::Kind::Tensor, rt_ = r.kind == TValue::Kind::Tensor;
    if (!lt && !rt_) return constant_binary(e, l, r);
    static const std::map<std::string, std::string> nodes = {{"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"},
                                                             {"**", "pow"}, {"==", "eq"}, {"!=", "ne"}, {"<", "lt"},
                                                             {"<=", "le"}, {">", "gt"}, {">=", "ge"}};
    if (op == "@") {
      if (!lt || !rt_) fail_at(e, "'@' multiplies two tensors");
      return matmul(e, l.id, r.id);
    }
    if (op == "%") fail_at(e, "'%' is not defined on tensors");
    if (lt && rt_) return broadcast_binary(e, nodes.at(op), l.id, r.id);
    // A tensor and a number: the scalar variants.
    int t = lt ? l.id : r.id;
    const TValue& num = lt ? r : l;
    if (!num.is_number()) fail_at(e, "cannot combine a tensor with " + std::string(kind_word(num.kind)));
    double x = num.number();
    if (op == "+") return call_node_simple(e, "add_scalar", {t}, {spec::ArgValue(x)});
    if (op == "*") return call_node_simple(e, "mul_scalar", {t}, {spec::ArgValue(x)});
    if (op == "-") return call_node_simple(e, lt ? "sub_scalar" : "rsub_scalar", {t}, {spec::ArgValue(x)});
    if (op == "/" && lt) return call_node_simple(e, "div_scalar", {t}, {spec::ArgValue(x)});
    if (op == "**" && lt) {
      if (x == 2.0) return call_node_simple(e, "square", {t}, {});
      return call_node_simple(e, "pow_scalar", {t}, {spec::ArgValue(x)});
    }
    // Comparisons and the rest: the number becomes a broadcast constant tensor.
    fail_at(e, "'" + op + "' between " + (lt ? "a tensor and a number" : "a number and a tensor") +
                   " is not supported; write it with tensors");
  }

  TValue constant_binary(const body::Expr& e, const TValue& l, const TValue& r) {
    if (!l.is_number() || !r.is_number()) {
      if (e.op == "+" && l.kind == TValue::Kind::List && r.kind == TValue::Kind::List) {
        std::vector<TValue> items = l.items;
        items.insert(items.end(), r.items.begin(), r.items.end());
        return TValue::list(std::move(items));
      }
      fail_at(e, "'" + e.op + "' between " + kind_word(l.kind) + " and " + kind_word(r.kind) + " is not defined");
    }
    const std::string& op = e.op;
    bool ints = l.kind != TValue::Kind::Float && r.kind != TValue::Kind::Float;
    if (op == "==") return TValue::of_bool(l.number() == r.number());
    if (op == "!=") return TValue::of_bool(l.number() != r.number());
    if (op == "<") return TValue::of_bool(l.number() < r.number());
    if (op == "<=") return TValue::of_bool(l.number() <= r.number());
    if (op == ">") return TValue::of_bool(l.number() > r.number());
    if (op == ">=") return TValue::of_bool(l.number() >= r.number());
    if (ints) {
      std::int64_t a = l.i, b = r.i, out = 0;
      bool overflow = false;
      if (op == "+") overflow = __builtin_add_overflow(a, b, &out);
      else if (op == "-") overflow = __builtin_sub_overflow(a, b, &out);
      else if (op == "*") overflow = __builtin_mul_overflow(a, b, &out);
      else if (op == "/" || op == "%") {
        if (b == 0) fail_at(e, "division by zero");
        if (op == "/") return TValue::of_float(static_cast<double>(a) / static_cast<double>(b));
        out = ((a % b) + b) % b;
      } else if (op == "**") {
        if (b < 0) return TValue::of_float(std::pow(static_cast<double>(a), static_cast<double>(b)));
        out = 1;
        for (std::int64_t k = 0; k < b && !overflow; ++k) overflow = __builtin_mul_overflow(out, a, &out);
      } else {
        fail_at(e, "'" + op + "' is not defined on integers");
      }
      if (overflow) fail_at(e, "integer overflow in " + e.str());
      return TValue::of_int(out);
    }
    double a = l.number(), b = r.number();
    if (op == "+") return TValue::of_float(a + b);
    if (op == "-") return TValue::of_float(a - b);
    if (op == "*") return TValue::of_float(a * b);
    if (op == "/") return TValue::of_float(a / b);
    if (op == "**") return TValue::of_float(std::pow(a, b));
    fail_at(e, "'" + op + "' is not defined on floats");
  }

  // --- views ----------------------------------------------------------------------

  int view(int base, ViewKind kind, Shape shape, const body::Expr& e) {
    Value v = fresh(Kind::View, std::move(shape), at(e.offset), current_source());
    v.view = kind;
    v.base = base;
    v.contiguous = false;
    v.holds_indices = val(base).holds_indices;
    return add(std::move(v));
  }

  int permute(int base, const std::vector<int>& perm, const body::Expr& e) {
    const Shape& s = val(base).shape;
    Shape out;
    for (int p : perm) out.push_back(s[static_cast<std::size_t>(p)]);
    // Still contiguous when the axes of size > 1 keep their order (moving
    // size-1 axes changes no address).
    bool in_order = true;
    int last = -1;
    for (int p : perm) {
      const Dim& d = s[static_cast<std::size_t>(p)];
      if (d.is_known() && d.value() == 1) continue;
      in_order = in_order && p > last;
      last = p;
    }
    const bool contiguous = in_order && val(base).contiguous;
    int id = view(base, ViewKind::Permute, out, e);  // may move g_.values (and `s`)
    g_[id].perm = perm;
    g_[id].contiguous = contiguous;
    return id;
  }

  int reshape(int base, Shape shape, const body::Expr& e) {
    if (!val(base).contiguous) base = copy(base, e);
    int id = view(base, ViewKind::Reshape, std::move(shape), e);
    g_[id].contiguous = true;
    return id;
  }

  int broadcast(int base, const Shape& to, const body::Expr& e) {
    if (val(base).shape == to) return base;
    return view(base, ViewKind::Broadcast, to, e);
  }

  // A contiguous copy (before a reshape); a copy of indices is indices.
  int copy(int base, const body::Expr& e) {
    const bool indices = val(base).holds_indices;
    int id = call_node_simple(e, "copy", {base}, {}, /*copies_indices=*/indices).id;
    g_[id].holds_indices = indices;
    return id;
  }

  static std::int64_t numel_known(const Shape& s, bool& known) {
    std::int64_t n = 1;
    known = true;
    for (const auto& d : s) {
      if (!d.is_known()) known = false;
      else n *= d.value();
    }
    return n;
  }

  // reshape(x, 2, -1) / x.reshape([2, -1]): one -1 is inferred.
  int reshape_to(int base, const std::vector<TValue>& dims, const body::Expr& e) {
    const Shape& s = val(base).shape;
    Shape out;
    int infer = -1;
    for (std::size_t k = 0; k < dims.size(); ++k) {
      if (dims[k].kind != TValue::Kind::Int) fail_at(e, "reshape takes integers, but got " + std::string(kind_word(dims[k].kind)));
      if (dims[k].i == -1) {
        if (infer >= 0) fail_at(e, "reshape takes at most one -1");
        infer = static_cast<int>(k);
        out.push_back(Dim(1));
      } else if (dims[k].i < 0) {
        fail_at(e, "reshape to a negative size " + std::to_string(dims[k].i));
      } else {
        out.push_back(Dim(dims[k].i));
      }
    }
    // Sizes: compare products, keeping run-time dims symbolic.
    Dim total(1), given(1);
    for (const auto& d : s) total = Dim::binary('*', total, d);
    for (const auto& d : out) given = Dim::binary('*', given, d);
    if (infer >= 0) {
      if (given.is_known() && given.value() == 0) fail_at(e, "reshape cannot infer -1 next to a size 0");
      Dim inferred = Dim::binary('/', total, given);
      // Keep run-time dims readable: [batch 3 4] into (-1, 12) is batch, not batch * 12 / 12.
      if (!total.is_known() && given.is_known()) {
        std::int64_t known = 1;
        Dim symbolic(1);
        for (const auto& d : s) {
          if (d.is_known()) known *= d.value();
          else symbolic = Dim::binary('*', symbolic, d);
        }
        if (known % given.value() == 0) inferred = Dim::binary('*', symbolic, Dim(known / given.value()));
      }
      if (total.is_known() && given.is_known() && total.value() % given.value() != 0) {
        fail_at(e, "cannot reshape " + shape::shape_str(s) + " (" + std::to_string(total.value()) + " elements) into " +
                       std::to_string(given.value()) + " x -1");
      }
      out[static_cast<std::size_t>(infer)] = inferred;
      given = total;
    }
    if (given != total) {
      fail_at(e, "cannot reshape " + shape::shape_str(s) + " into " + shape::shape_str(out) + ": " + total.str() + " elements vs " +
                     given.str());
    }
    return reshape(base, out, e);
  }

  // --- node calls ---------------------------------------------------------------

  // Calls a node with tensors (the in-place outputs are allocated) and
  // constructor arguments in order.
  TValue call_node_simple(const body::Expr& e, const std::string& node, const std::vector<int>& tensors,
                          const std::vector<spec::ArgValue>& args, bool copies_indices = false) {
    const spec::Node* n = spec_.find_node(node);
    if (!n) fail_at(e, "the standard node '" + node + "' is not available (was it overridden or removed?)");
    std::vector<std::pair<std::string, TValue>> named;
    for (std::size_t k = 0; k < args.size() && k < n->args.size(); ++k) named.emplace_back(n->args[k].name, from_arg(args[k]));
    return call_node(e, *n, tensors, named, copies_indices);
  }

  // Indices reach only the index inputs of nodes (gather's and one_hot's
  // IDX): anywhere else an id would be used as a number.
  void check_indices(const body::Expr& e, const spec::Node& node, const std::vector<int>& tensors,
                     const std::vector<bool>& allocated, bool passes_all) {
    std::size_t next = 0;
    for (std::size_t k = 0; k < node.where.inputs.size(); ++k) {
      if (allocated[k] && !passes_all) continue;
      const int id = tensors[next++];
      if (!val(id).holds_indices) continue;
      const std::string input = node.where.inputs[k].name.value_or("input " + std::to_string(k + 1));
      int root = id;
      while (val(root).kind == Kind::View || (val(root).kind == Kind::Call && val(root).node && val(root).node->name == "copy"))
        root = val(root).kind == Kind::View ? val(root).base : val(root).operands.front();
      const Value& in = val(root);
      const std::string what = "'" + in.name + "' holds indices (build '" + build_.name + "' passes it as " +
                               rt::dtype_name(in.caller_dtype.value_or(rt::DType::i64)) + ")";
      if (!node.takes_indices(input)) {
        std::string takers;
        for (const auto& n : spec_.nodes)
          for (const auto& i : n.indices) takers += (takers.empty() ? "" : ", ") + n.name + "'s " + i;
        fail_at(e, what + ", but node '" + node.name + "' reads its input '" + input + "' as " +
                       rt::dtype_name(build_.dtype) + " values; indices go only to index inputs (" + takers + ")");
      }
    }
  }

  TValue call_node(const body::Expr& e, const spec::Node& node, std::vector<int> tensors,
                   const std::vector<std::pair<std::string, TValue>>& named, bool copies_indices = false) {
    const auto& decl = node.where;
    if (decl.outputs.size() != 1) {
      fail_at(e, "node '" + node.name + "' has " + std::to_string(decl.outputs.size()) +
                     " outputs; models can call nodes with one output");
    }
    auto inplace = decl.inplace_of();
    // Which DSL inputs the caller does not pass: the one the output is written into.
    std::vector<bool> allocated(decl.inputs.size(), false);
    std::size_t n_alloc = 0;
    if (inplace[0]) {
      allocated[static_cast<std::size_t>(*inplace[0])] = true;
      n_alloc = 1;
    }
    bool passes_all = tensors.size() == decl.inputs.size();
    if (!passes_all && tensors.size() != decl.inputs.size() - n_alloc) {
      std::string names;
      for (std::size_t k = 0; k < decl.inputs.size(); ++k)
        if (!allocated[k]) names += (names.empty() ? "" : " ") + decl.inputs[k].str();
      fail_at(e, "node '" + node.name + "' takes " + std::to_string(decl.inputs.size() - n_alloc) + " tensor" +
                     (decl.inputs.size() - n_alloc == 1 ? "" : "s") + " (" + names + "), but got " + std::to_string(tensors.size()));
    }
    if (!copies_indices) check_indices(e, node, tensors, allocated, passes_all);
    // Constructor arguments.
    std::vector<spec::ArgValue> args;
    shape::Args shape_args;
    std::vector<std::string> arg_names;
    for (const auto& a : node.args) arg_names.push_back(a.name);
    for (const auto& [name, v] : named) {
      if (std::find(arg_names.begin(), arg_names.end(), name) == arg_names.end()) {
        fail_at(e, "node '" + node.name + "' has no argument '" + name + "'" + did_you_mean(name, arg_names) +
                       (arg_names.empty() ? std::string(" (it takes none)") : " (arguments: " + join(arg_names) + ")"));
      }
    }
    for (const auto& a : node.args) {
      const TValue* given = nullptr;
      for (const auto& [name, v] : named)
        if (name == a.name) given = &v;
      std::optional<spec::ArgValue> value;
      if (given) {
        value = to_arg(*given, a.type);
        if (!value) {
          fail_at(e, "argument '" + a.name + "' of node '" + node.name + "' is " + spec::arg_type_name(a.type) + ", but got " +
                         kind_word(given->kind));
        }
      } else if (a.default_value) {
        value = *a.default_value;
      } else {
        fail_at(e, "node '" + node.name + "' needs its argument '" + a.name + "'");
      }
      args.push_back(*value);
      if (const auto* i = std::get_if<std::int64_t>(&*value)) shape_args[a.name] = shape::Value::scalar(Dim(*i));
      if (const auto* l = std::get_if<std::vector<std::int64_t>>(&*value)) {
        Shape dims;
        for (auto x : *l) dims.push_back(Dim(x));
        shape_args[a.name] = shape::Value::list(dims);
      }
    }
    // Shapes: check the DSL without the allocated inputs; the output is predicted.
    subscript::Declaration check_decl = decl;
    std::vector<Shape> shapes;
    {
      std::vector<subscript::Argument> kept;
      std::size_t next = 0;
      for (std::size_t k = 0; k < decl.inputs.size(); ++k) {
        if (allocated[k] && !passes_all) continue;
        kept.push_back(decl.inputs[k]);
        shapes.push_back(val(tensors[next++]).shape);
      }
      check_decl.inputs = std::move(kept);
    }
    shape::CheckResult r = shape::check(check_decl, shape_args, shapes);
    if (!r.ok()) {
      shape::CheckOptions opts;
      opts.operation = node.name;
      fail_at(e, "shape error in a call of node '" + node.name + "'", shape::render_report(check_decl, shapes, r, opts));
    }
    Shape out_shape;
    for (const auto& d : r.outputs[0].shape) out_shape.push_back(d);
    int rank = static_cast<int>(out_shape.size());
    // Device: the first in the build's priority order with an implementation.
    const spec::Impl* impl = choose_impl(node, rank, args, e);
    if (impl->kind == spec::BodyKind::Build && impl->build == build_.name) {
      fail_at(e, "build '" + build_.name + "' calls itself as a node; a build cannot be part of its own model");
    }
    Value v = fresh(Kind::Call, out_shape, at(e.offset), current_source());
    v.node = &node;
    v.impl = impl;
    v.args = args;
    v.rank = rank;
    int id = add(std::move(v));
    // Operands in the kernel's parameter order: inputs (the allocated one is
    // the result itself), then outputs that are not inputs.
    std::vector<int> operands;
    std::size_t next = 0;
    for (std::size_t k = 0; k < decl.inputs.size(); ++k) {
      if (allocated[k]) {
        if (passes_all) {
          // The caller's tensor is written in place: the result starts as a copy of it.
          g_[id].init_from = tensors[next];
          ++next;
        }
        g_[id].result_operand = static_cast<int>(operands.size());
        operands.push_back(id);
      } else {
        operands.push_back(tensors[next++]);
      }
    }
    if (!inplace[0]) {
      g_[id].result_operand = static_cast<int>(operands.size());
      operands.push_back(id);
    }
    g_[id].operands = std::move(operands);
    return TValue::tensor(id);
  }

  // An impl's reject condition with this call's arguments (cl-waffe2's reject-p).
  bool rejects(const spec::Impl& impl, const spec::Node& node, const std::vector<spec::ArgValue>& args, const body::Expr& e) {
    try {
      return lower::rejects(impl, node, build_.dtype, std::vector<std::optional<spec::ArgValue>>(args.begin(), args.end()));
    } catch (const expr::Error& err) {
      fail(impl.reject->at(err.offset()), std::string("in the reject condition of the ") + impl.device +
                                               " implementation of '" + node.name + "': " + err.what() +
                                               " (called at " + at(e.offset).str() + ")");
    }
  }

  const spec::Impl* choose_impl(const spec::Node& node, int rank, const std::vector<spec::ArgValue>& args,
                                const body::Expr& e) {
    std::string tried;
    for (const auto& device : build_.devices) {
      for (const spec::Impl* impl : spec_.impls_of(node.name)) {
        if (impl->device != device) continue;
        if (impl->kind == spec::BodyKind::View) continue;
        bool dtype_ok = std::find(impl->dtypes.begin(), impl->dtypes.end(), build_.dtype) != impl->dtypes.end();
        std::vector<int> ranks = impl->ranks;
        if (ranks.empty()) {
          for (int k = 1; k <= 4; ++k)
            if (lower::argument_ranks(node.where, k)) ranks.push_back(k);
        }
        bool rank_ok = std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
        if (dtype_ok && rank_ok && rejects(*impl, node, args, e)) {
          tried += (tried.empty() ? "" : "; ") + device + " rejects these arguments";
          continue;
        }
        if (dtype_ok && rank_ok) return impl;
        tried += (tried.empty() ? "" : "; ") + device + (dtype_ok ? "" : std::string(" has no ") + rt::dtype_name(build_.dtype)) +
                 (rank_ok ? "" : " has no rank " + std::to_string(rank));
      }
    }
    std::string devices;
    for (const auto& d : build_.devices) devices += (devices.empty() ? "" : ", ") + d;
    fail_at(e, "no implementation of node '" + node.name + "' for " + rt::dtype_name(build_.dtype) + " rank " +
                   std::to_string(rank) + " on the devices [" + devices + "]" + (tried.empty() ? "" : " (" + tried + ")"));
  }

  static std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
  }

  // Numpy broadcasting of two shapes; nullopt when they do not broadcast.
  static std::optional<Shape> broadcast_shape(const Shape& a, const Shape& b) {
    std::size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (std::size_t k = 0; k < n; ++k) {
      const Dim* x = k + a.size() >= n ? &a[k + a.size() - n] : nullptr;
      const Dim* y = k + b.size() >= n ? &b[k + b.size() - n] : nullptr;
      if (!x) out[k] = *y;
      else if (!y) out[k] = *x;
      else if (*x == *y) out[k] = *x;
      else if (x->is_known() && x->value() == 1) out[k] = *y;
      else if (y->is_known() && y->value() == 1) out[k] = *x;
      else return std::nullopt;
    }
    return out;
  }

  TValue broadcast_binary(const body::Expr& e, const std::string& node, int a, int b) {
    auto s = broadcast_shape(val(a).shape, val(b).shape);
    if (!s) {
      fail_at(e, "cannot broadcast " + shape::shape_str(val(a).shape) + " and " + shape::shape_str(val(b).shape) + " in " + e.str() +
                     ": each pair of trailing dims must be equal or 1");
    }
    return call_node_simple(e, node, {broadcast(a, *s, e), broadcast(b, *s, e)}, {});
  }

  TValue matmul(const body::Expr& e, int a, int b) {
    const Shape& sa = val(a).shape;
    const Shape& sb = val(b).shape;
    if (sa.size() < 2 || sb.size() < 2) {
      fail_at(e, "'@' needs operands of rank 2 or more, but got " + shape::shape_str(sa) + " and " + shape::shape_str(sb));
    }
    Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    auto batch = broadcast_shape(ba, bb);
    if (!batch) fail_at(e, "the batch dims of " + shape::shape_str(sa) + " and " + shape::shape_str(sb) + " do not broadcast");
    Shape ta = *batch, tb = *batch;
    ta.insert(ta.end(), sa.end() - 2, sa.end());
    tb.insert(tb.end(), sb.end() - 2, sb.end());
    return call_node_simple(e, "matmul", {broadcast(a, ta, e), broadcast(b, tb, e)}, {});
  }

  // sum/mean/max/min/argmax/argmin(x, axis=None, keepdims=false)
  TValue reduce(Frame& frame, const body::Expr& e, const std::string& op, const std::vector<TValue>& pos,
                const std::map<std::string, TValue>& kw) {
    (void)frame;
    if (pos.size() != 1 || pos[0].kind != TValue::Kind::Tensor) fail_at(e, op + "(x, axis=..., keepdims=...) takes one tensor");
    for (const auto& [k, v] : kw)
      if (k != "axis" && k != "keepdims") fail_at(e, op + " has no argument '" + k + "'" + did_you_mean(k, {"axis", "keepdims"}));
    int x = pos[0].id;
    int rank = static_cast<int>(val(x).shape.size());
    bool keepdims = kw.count("keepdims") && kw.at("keepdims").number() != 0;
    std::vector<int> axes;
    if (!kw.count("axis") || kw.at("axis").kind == TValue::Kind::None) {
      for (int k = 0; k < rank; ++k) axes.push_back(k);
    } else {
      const TValue& a = kw.at("axis");
      std::vector<TValue> items = a.kind == TValue::Kind::List ? a.items : std::vector<TValue>{a};
      for (const auto& it : items) {
        if (it.kind != TValue::Kind::Int) fail_at(e, "axis must be an integer or a list of integers");
        std::int64_t ax = it.i < 0 ? it.i + rank : it.i;
        if (ax < 0 || ax >= rank) fail_at(e, "axis " + std::to_string(it.i) + " is out of range for rank " + std::to_string(rank));
        if (std::find(axes.begin(), axes.end(), static_cast<int>(ax)) != axes.end()) fail_at(e, "axis " + std::to_string(it.i) + " is given twice");
        axes.push_back(static_cast<int>(ax));
      }
    }
    if (rank == 0) fail_at(e, op + " of a rank-0 tensor");
    if ((op == "argmax" || op == "argmin") && axes.size() != 1) fail_at(e, op + " reduces exactly one axis; give axis=k");
    std::sort(axes.rbegin(), axes.rend());
    int cur = x;
    for (int ax : axes) {
      // Move the axis last, reduce it into size 1, and move the 1 back.
      std::vector<int> perm;
      for (int k = 0; k < rank; ++k)
        if (k != ax) perm.push_back(k);
      perm.push_back(ax);
      int moved = ax == rank - 1 ? cur : permute(cur, perm, e);
      int reduced = call_node_simple(e, op, {moved}, {}).id;
      if (ax == rank - 1) {
        cur = reduced;
      } else {
        std::vector<int> back(static_cast<std::size_t>(rank));
        for (int k = 0; k < rank; ++k) back[static_cast<std::size_t>(perm[static_cast<std::size_t>(k)])] = k;
        cur = permute(reduced, back, e);
      }
    }
    if (!keepdims) {
      Shape s;
      const Shape& full = val(cur).shape;
      for (int k = 0; k < rank; ++k)
        if (std::find(axes.begin(), axes.end(), k) == axes.end()) s.push_back(full[static_cast<std::size_t>(k)]);
      cur = reshape(cur, s, e);
    }
    return TValue::tensor(cur);
  }

  TValue call(Frame& frame, const body::Expr& e) {
    const body::Expr& callee = *e.operands[0];
    std::vector<TValue> pos;
    std::map<std::string, TValue> kw;
    std::vector<std::pair<std::string, TValue>> kw_ordered;
    for (const auto& a : e.args) {
      TValue v = eval(frame, *a.value);
      if (a.keyword) {
        kw[*a.keyword] = v;
        kw_ordered.emplace_back(*a.keyword, v);
      } else {
        pos.push_back(v);
      }
    }
    if (callee.kind == body::Expr::Kind::Attribute) return method(frame, e, callee, pos, kw);
    if (callee.kind != body::Expr::Kind::Name) fail_at(callee, "only names and methods can be called");
    const std::string& name = callee.name;
    static const std::set<std::string> reductions = {"sum", "mean", "max", "min", "argmax", "argmin"};
    if (reductions.count(name) && spec_.find_node(name)) return reduce(frame, e, name, pos, kw);
    if (name == "reshape" || name == "permute" || name == "transpose" || name == "unsqueeze" || name == "squeeze" ||
        name == "broadcast_to" || name == "expand_as") {
      if (pos.empty() || pos[0].kind != TValue::Kind::Tensor) fail_at(e, name + " takes a tensor first");
      std::vector<TValue> rest(pos.begin() + 1, pos.end());
      return tensor_method(e, name, pos[0].id, rest, kw);
    }
    if (const spec::Model* m = spec_.find_model(name)) return call_model(frame, e, *m, pos, kw_ordered);
    if (const spec::Node* n = spec_.find_node(name)) {
      std::vector<int> tensors;
      std::vector<std::pair<std::string, TValue>> named;
      std::size_t k = 0;
      for (; k < pos.size() && pos[k].kind == TValue::Kind::Tensor; ++k) tensors.push_back(pos[k].id);
      // Positional non-tensor arguments follow the tensors, in the node's argument order.
      for (std::size_t j = 0; k < pos.size(); ++k, ++j) {
        if (pos[k].kind == TValue::Kind::Tensor) fail_at(e, "tensors come before the other arguments of '" + name + "'");
        if (j >= n->args.size()) fail_at(e, "node '" + name + "' takes " + std::to_string(n->args.size()) + " non-tensor arguments");
        named.emplace_back(n->args[j].name, pos[k]);
      }
      for (const auto& kv : kw_ordered) {
        for (const auto& p : named)
          if (p.first == kv.first) fail_at(e, "argument '" + kv.first + "' of '" + name + "' is given twice");
        named.push_back(kv);
      }
      return call_node(e, *n, tensors, named);
    }
    if (name == "int") {
      // int(x): a number of the arguments truncated towards zero, as in Python (int(d_model / heads)).
      if (pos.size() != 1 || !kw.empty() || !pos[0].is_number()) fail_at(e, "int(x) takes one number");
      double x = pos[0].number();
      if (!std::isfinite(x) || std::fabs(x) >= 9.2e18) fail_at(e, "int(x) of a value out of range");
      return TValue::of_int(static_cast<std::int64_t>(x));
    }
    std::vector<std::string> names;
    for (const auto& n : spec_.nodes) names.push_back(n.name);
    for (const auto& m : spec_.models) names.push_back(m.name);
    fail_at(callee, "unknown node or model '" + name + "'" + did_you_mean(name, names));
  }

  TValue method(Frame& frame, const body::Expr& e, const body::Expr& callee, const std::vector<TValue>& pos,
                const std::map<std::string, TValue>& kw) {
    TValue obj = eval(frame, *callee.operands[0]);
    if (obj.kind != TValue::Kind::Tensor) fail_at(callee, "methods are called on tensors, but this is " + std::string(kind_word(obj.kind)));
    return tensor_method(e, callee.name, obj.id, pos, kw);
  }

  TValue tensor_method(const body::Expr& e, const std::string& name, int x, const std::vector<TValue>& args,
                       const std::map<std::string, TValue>& kw) {
    if (!kw.empty()) fail_at(e, "'" + name + "' takes no keyword arguments");
    const Shape& s = val(x).shape;
    int rank = static_cast<int>(s.size());
    std::vector<TValue> flat = args.size() == 1 && args[0].kind == TValue::Kind::List ? args[0].items : args;
    auto axis_of = [&](const TValue& v, int limit) {
      if (v.kind != TValue::Kind::Int) fail_at(e, "'" + name + "' takes integer axes");
      std::int64_t a = v.i < 0 ? v.i + limit : v.i;
      if (a < 0 || a >= limit) fail_at(e, "axis " + std::to_string(v.i) + " is out of range for rank " + std::to_string(rank));
      return static_cast<int>(a);
    };
    if (name == "reshape" || name == "view") return TValue::tensor(reshape_to(x, flat, e));
    if (name == "size") {
      if (flat.size() != 1) fail_at(e, "size takes one axis: x.size(k)");
      const Dim& d = s[static_cast<std::size_t>(axis_of(flat[0], rank))];
      if (!d.is_known()) fail_at(e, "axis " + std::to_string(flat[0].i) + " has the run-time size '" + d.str() + "', which is not known while tracing");
      return TValue::of_int(d.value());
    }
    if (name == "permute") {
      if (static_cast<int>(flat.size()) != rank) fail_at(e, "permute needs " + std::to_string(rank) + " axes, got " + std::to_string(flat.size()));
      std::vector<int> perm;
      std::vector<bool> seen(static_cast<std::size_t>(rank), false);
      for (const auto& v : flat) {
        int a = axis_of(v, rank);
        if (seen[static_cast<std::size_t>(a)]) fail_at(e, "permute names axis " + std::to_string(a) + " twice");
        seen[static_cast<std::size_t>(a)] = true;
        perm.push_back(a);
      }
      return TValue::tensor(permute(x, perm, e));
    }
    if (name == "transpose") {
      if (flat.size() != 2) fail_at(e, "transpose takes two axes");
      std::vector<int> perm(static_cast<std::size_t>(rank));
      for (int k = 0; k < rank; ++k) perm[static_cast<std::size_t>(k)] = k;
      std::swap(perm[static_cast<std::size_t>(axis_of(flat[0], rank))], perm[static_cast<std::size_t>(axis_of(flat[1], rank))]);
      return TValue::tensor(permute(x, perm, e));
    }
    if (name == "unsqueeze" || name == "squeeze") {
      if (flat.size() != 1) fail_at(e, name + " takes one axis");
      Shape out = s;
      if (name == "unsqueeze") {
        int a = axis_of(flat[0], rank + 1);
        out.insert(out.begin() + a, Dim(1));
      } else {
        int a = axis_of(flat[0], rank);
        if (!(s[static_cast<std::size_t>(a)].is_known() && s[static_cast<std::size_t>(a)].value() == 1)) {
          fail_at(e, "squeeze of axis " + std::to_string(a) + " of size " + s[static_cast<std::size_t>(a)].str() + " (it must be 1)");
        }
        out.erase(out.begin() + a);
      }
      return TValue::tensor(reshape(x, out, e));
    }
    if (name == "expand_as") {
      // x.expand_as(y): x broadcast to y's shape (run-time dims included), as a view.
      if (flat.size() != 1 || flat[0].kind != TValue::Kind::Tensor) fail_at(e, "expand_as takes one tensor: x.expand_as(y)");
      const Shape to = val(flat[0].id).shape;
      auto b = broadcast_shape(s, to);
      if (!b || *b != to) fail_at(e, "cannot broadcast " + shape::shape_str(s) + " to " + shape::shape_str(to));
      return TValue::tensor(broadcast(x, to, e));
    }
    if (name == "broadcast_to") {
      Shape to;
      for (const auto& v : flat) {
        if (v.kind != TValue::Kind::Int) fail_at(e, "broadcast_to takes sizes");
        to.push_back(Dim(v.i));
      }
      auto b = broadcast_shape(s, to);
      if (!b || *b != to) fail_at(e, "cannot broadcast " + shape::shape_str(s) + " to " + shape::shape_str(to));
      return TValue::tensor(broadcast(x, to, e));
    }
    fail_at(e, "unknown method '" + name + "' (known: reshape, view, permute, transpose, unsqueeze, squeeze, broadcast_to, expand_as, size)");
  }

  TValue subscript(Frame& frame, const body::Expr& e) {
    TValue obj = eval(frame, *e.operands[0]);
    if (obj.kind == TValue::Kind::List) {
      if (e.items.size() != 1 || e.items[0].is_slice) fail_at(e, "lists are indexed with one integer");
      TValue i = eval(frame, *e.items[0].index);
      if (i.kind != TValue::Kind::Int) fail_at(e, "a list index must be an integer");
      std::int64_t n = static_cast<std::int64_t>(obj.items.size());
      std::int64_t k = i.i < 0 ? i.i + n : i.i;
      if (k < 0 || k >= n) fail_at(e, "index " + std::to_string(i.i) + " is out of range for a list of " + std::to_string(n));
      return obj.items[static_cast<std::size_t>(k)];
    }
    if (obj.kind != TValue::Kind::Tensor) fail_at(e, "cannot index " + std::string(kind_word(obj.kind)));
    int x = obj.id;
    const Shape s = val(x).shape;
    if (e.items.size() > s.size()) fail_at(e, "too many indices (" + std::to_string(e.items.size()) + ") for rank " + std::to_string(s.size()));
    std::vector<Dim> starts, stops, steps;
    Shape out;
    std::vector<int> drop;
    for (std::size_t k = 0; k < s.size(); ++k) {
      Dim size = s[k];
      if (k >= e.items.size()) {
        starts.push_back(Dim(0));
        stops.push_back(size);
        steps.push_back(Dim(1));
        out.push_back(size);
        continue;
      }
      const body::SliceItem& it = e.items[k];
      auto int_or = [&](const body::ExprPtr& p, std::int64_t fallback) -> std::optional<std::int64_t> {
        if (!p) return fallback;
        TValue v = eval(frame, *p);
        if (v.kind != TValue::Kind::Int) fail_at(*p, "slice bounds must be integers");
        return v.i;
      };
      if (!size.is_known()) {
        // Run-time dims can only be taken whole.
        if (!it.is_slice || it.start || it.stop || it.step) fail_at(e, "axis " + std::to_string(k) + " has the run-time size " + size.str() + " and can only be taken whole (:)");
        starts.push_back(Dim(0));
        stops.push_back(size);
        steps.push_back(Dim(1));
        out.push_back(size);
        continue;
      }
      std::int64_t n = size.value();
      if (!it.is_slice) {
        std::int64_t i = *int_or(it.index, 0);
        std::int64_t j = i < 0 ? i + n : i;
        if (j < 0 || j >= n) fail_at(e, "index " + std::to_string(i) + " is out of range for axis " + std::to_string(k) + " of size " + std::to_string(n));
        starts.push_back(Dim(j));
        stops.push_back(Dim(j + 1));
        steps.push_back(Dim(1));
        out.push_back(Dim(1));
        drop.push_back(static_cast<int>(k));
        continue;
      }
      std::int64_t step = *int_or(it.step, 1);
      if (step <= 0) fail_at(e, "slice steps must be positive");
      std::int64_t a = *int_or(it.start, 0), b = *int_or(it.stop, n);
      a = a < 0 ? std::max<std::int64_t>(0, a + n) : std::min(a, n);
      b = b < 0 ? std::max<std::int64_t>(0, b + n) : std::min(b, n);
      std::int64_t len = b > a ? (b - a + step - 1) / step : 0;
      starts.push_back(Dim(a));
      stops.push_back(Dim(b));
      steps.push_back(Dim(step));
      out.push_back(Dim(len));
    }
    int id = view(x, ViewKind::Slice, out, e);
    g_[id].starts = starts;
    g_[id].stops = stops;
    g_[id].steps = steps;
    if (!drop.empty()) {
      Shape kept;
      for (std::size_t k = 0; k < out.size(); ++k)
        if (std::find(drop.begin(), drop.end(), static_cast<int>(k)) == drop.end()) kept.push_back(out[k]);
      // Dropping size-1 axes of a slice keeps its strides: a Squeeze per axis.
      int cur = id;
      for (auto it = drop.rbegin(); it != drop.rend(); ++it) {
        Shape sq = val(cur).shape;
        sq.erase(sq.begin() + *it);
        int v = view(cur, ViewKind::Squeeze, sq, e);
        g_[v].axis = *it;
        cur = v;
      }
      return TValue::tensor(cur);
    }
    return TValue::tensor(id);
  }

  TValue call_model(Frame& caller, const body::Expr& e, const spec::Model& m, const std::vector<TValue>& pos,
                    const std::vector<std::pair<std::string, TValue>>& kw) {
    for (const auto* active : stack_) {
      if (active == &m) {
        std::string chain;
        for (const auto* s : stack_) chain += s->name + " -> ";
        fail_at(e, "model '" + m.name + "' calls itself (" + chain + m.name + "); models cannot be recursive");
      }
    }
    Frame frame;
    frame.model = &m;
    int count = ++instances_[m.name];
    frame.scope = caller.scope + "/" + m.name + "_" + std::to_string(count - 1);
    std::size_t k = 0;
    std::vector<std::pair<std::string, TValue>> args;
    for (; k < pos.size() && pos[k].kind == TValue::Kind::Tensor; ++k) {
      if (k >= m.inputs.size()) fail_at(e, "model '" + m.name + "' takes " + std::to_string(m.inputs.size()) + " tensors, but got more");
      frame.env[m.inputs[k]] = pos[k];
    }
    if (k < m.inputs.size()) {
      fail_at(e, "model '" + m.name + "' takes " + std::to_string(m.inputs.size()) + " tensor" + (m.inputs.size() == 1 ? "" : "s") +
                     ", but got " + std::to_string(k));
    }
    for (std::size_t j = 0; k < pos.size(); ++k, ++j) {
      if (j >= m.args.size()) fail_at(e, "model '" + m.name + "' takes " + std::to_string(m.args.size()) + " arguments after its tensors");
      args.emplace_back(m.args[j].name, pos[k]);
    }
    std::vector<std::string> names;
    for (const auto& a : m.args) names.push_back(a.name);
    for (const auto& kv : kw) {
      if (std::find(names.begin(), names.end(), kv.first) == names.end()) {
        fail_at(e, "model '" + m.name + "' has no argument '" + kv.first + "'" + did_you_mean(kv.first, names));
      }
      args.push_back(kv);
    }
    bind_args(frame, m, args, at(e.offset));
    // The callee's where line, when it has one, checks the tensors passed.
    if (m.where) {
      shape::Args sa;
      for (const auto& a : m.args) {
        const TValue& v = frame.env[a.name];
        if (v.kind == TValue::Kind::Int) sa[a.name] = shape::Value::scalar(Dim(v.i));
      }
      std::vector<Shape> shapes;
      for (const auto& in : m.inputs) shapes.push_back(val(frame.env[in].id).shape);
      subscript::Declaration d = *m.where;
      d.outputs.clear();
      shape::CheckResult r = shape::check(d, sa, shapes);
      if (!r.ok()) {
        shape::CheckOptions o;
        o.operation = m.name;
        fail_at(e, "shape error in a call of model '" + m.name + "'", shape::render_report(d, shapes, r, o));
      }
    }
    stack_.push_back(&m);
    std::vector<TValue> results = trace_model(frame, m, at(e.offset));
    stack_.pop_back();
    if (results.empty()) fail_at(e, "model '" + m.name + "' returns nothing");
    if (results.size() == 1) return results[0];
    return TValue::list(std::move(results));
  }

  const spec::Spec& spec_;
  const spec::Build& build_;
  Graph g_;
  std::string scope_;
  const spec::Text* text_ = nullptr;
  const body::Stmt* stmt_ = nullptr;
  int depth_ = 0;
  std::map<const spec::Model*, body::Program> programs_;
  std::map<std::string, int> instances_;
  std::vector<const spec::Model*> stack_;
  // Autodiff attribution.
  bool attributing_ = false;
  bool attr_pullback_ = true;
  SourceLoc attr_loc_;
  std::string attr_source_;
  spec::Text placeholder_;
  body::Expr here_;
};

}  // namespace

graph::Graph trace_build(const spec::Spec& spec, const spec::Build& build) { return Tracer(spec, build).run(); }

namespace detail {

struct Builder::Impl {
  Tracer tracer;
};

Builder::Builder(const spec::Spec& spec, const spec::Build& build, graph::Graph g)
    : impl_(std::make_unique<Impl>(Impl{Tracer(spec, build, std::move(g))})) {}
Builder::~Builder() = default;
graph::Graph& Builder::graph() { return impl_->tracer.graph(); }
graph::Graph Builder::take() { return impl_->tracer.take(); }
void Builder::attribute(const SourceLoc& loc, const std::string& source) { impl_->tracer.attribute(loc, source); }
void Builder::attribute_forward(const SourceLoc& loc, const std::string& source, const std::string& scope) {
  impl_->tracer.attribute(loc, source, false, scope);
}

std::optional<int> Builder::eval(const spec::Text& text, const std::vector<std::pair<std::string, int>>& tensors,
                                 const std::vector<std::pair<std::string, spec::ArgValue>>& args) {
  std::vector<std::pair<std::string, TValue>> names;
  for (const auto& [name, id] : tensors) names.emplace_back(name, TValue::tensor(id));
  for (const auto& [name, v] : args) names.emplace_back(name, Tracer::arg_value(v));
  return impl_->tracer.eval_backward(text, names);
}

int Builder::node(const std::string& name, const std::vector<int>& tensors, const std::vector<spec::ArgValue>& args) {
  return impl_->tracer.node(name, tensors, args);
}
int Builder::permute(int x, const std::vector<int>& perm) { return impl_->tracer.permute_of(x, perm); }
int Builder::reshape(int x, const graph::Shape& shape) { return impl_->tracer.reshape_of(x, shape); }
int Builder::broadcast(int x, const graph::Shape& shape) { return impl_->tracer.broadcast_of(x, shape); }
int Builder::view(int base, graph::ViewKind kind, const graph::Shape& shape) { return impl_->tracer.view_of(base, kind, shape); }
int Builder::zeros(const graph::Shape& shape) { return impl_->tracer.zeros(shape); }
int Builder::sum_axes(int x, const std::vector<int>& axes) { return impl_->tracer.sum_axes(x, axes); }

}  // namespace detail

}  // namespace wfgen::trace

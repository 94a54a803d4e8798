#include "wfgen/trace/trace.hpp"

#include "wfgen/trace/builder.hpp"
#include "wfgen/trace/tvalue.hpp"

#include <algorithm>
#include <cctype>
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
using detail::Declared;
using detail::kind_word;
using detail::Returned;
using detail::SizeCompare;
using detail::TValue;
using detail::broadcast_shape;
using detail::from_arg;
using detail::in_stdlib;
using detail::join;
using detail::ModelCall;
using detail::number_str;
using detail::to_arg;
using detail::user_first;

// A check `wfgen check` cannot decide: it needs a value the model's own
// where line and arguments do not give (an argument without a default).
struct Undecided {
  SourceLoc loc;
  int length = 1;
  std::string message;
};

// One model being traced: its spec, the body text, the variables.
struct Frame {
  const spec::Model* model = nullptr;
  std::string scope;
  std::map<std::string, TValue> env;
  const body::Program* program = nullptr;
  // Inside a build called as a node by a differentiated model: the build's
  // one instance, whose parameters every call shares (shared_params_).
  bool shared = false;
};

constexpr int kMaxModelDepth = 32;
constexpr std::int64_t kMaxLoopIterations = 100000;

class Tracer {
 public:
  Tracer(const spec::Spec& spec, const spec::Build& build) : spec_(spec), build_(build) {}
  // `wfgen check` of a model by itself (symbolic): arguments without a value
  // and the where line's symbols stay symbolic, `~` is `tilde_rank` dims.
  Tracer(const spec::Spec& spec, const spec::Build& build, int tilde_rank)
      : spec_(spec), build_(build), symbolic_(true), tilde_rank_(tilde_rank) {}

  const std::vector<Diagnostic>& warnings() const { return warnings_; }
  // symbolic: the asserts that could not be decided (each a note).
  const std::vector<Diagnostic>& notes() const { return notes_; }
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
          if (symbolic_) {
            for (int k = 1; k <= tilde_rank_; ++k) shape.push_back(Dim::symbol("~" + std::to_string(k)));
            continue;
          }
          fail(model->where_text->at(s.offset), "the inputs of a built model need a known rank; replace '~' in " + a.str() +
                                                    " by named dims such as 'batch'");
        }
        if (s.kind == subscript::Subscript::Kind::Integer) {
          shape.push_back(Dim(s.value));
          continue;
        }
        auto it = frame.env.find(s.name);
        if (it != frame.env.end() && it->second.kind == TValue::Kind::Sym) {
          shape.push_back(it->second.dim);
        } else if (it != frame.env.end()) {
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
    std::vector<TValue> results;
    try {
      results = trace_model(frame, *model);
    } catch (const UserError& e) {
      std::vector<Diagnostic> ds = user_first(e.diagnostics());
      if (!ds.empty() && in_stdlib(ds[0].loc) && !in_stdlib(build_.loc) && build_.loc.known()) {
        // A build of a standard model itself: the build's entry is the user's line.
        Diagnostic primary = ds[0];
        primary.loc = build_.loc;
        primary.length = 1;
        primary.detail.clear();
        primary.source_line = spec_.line_at(primary.loc);
        ds[0].severity = Diagnostic::Severity::Note;
        ds[0].message = "it fails here, in model '" + model->name + "' of the standard library";
        ds.insert(ds.begin(), std::move(primary));
      }
      throw UserError(std::move(ds));
    }
    for (std::size_t k = 0; k < results.size(); ++k) {
      if (results[k].kind != TValue::Kind::Tensor) {
        fail(model->call.loc, "model '" + model->name + "' returns " + kind_word(results[k].kind) +
                                  " as its result " + std::to_string(k + 1) + "; a built model returns tensors");
      }
      g_.outputs.push_back(results[k].id);
      std::string name = k < decl.outputs.size() && decl.outputs[k].name ? *decl.outputs[k].name : "out" + std::to_string(k);
      g_.output_names.push_back(name);
    }
    warn_unused_outputs();
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

  // A value needed while tracing that is not known: an error of the build
  // (a run-time size), or what `wfgen check` reports as not decidable.
  [[noreturn]] void not_known(const body::Expr& e, const TValue& v, const std::string& what) {
    std::string why;
    if (v.kind == TValue::Kind::Unknown) why = "the argument '" + v.what + "', which has no value here";
    else if (v.kind == TValue::Kind::Sym && symbolic_) why = "'" + v.dim.str() + "', which has no value when the model is checked by itself";
    else if (v.kind == TValue::Kind::Sym) why = "the size " + v.dim.str() + ", known only at run time";
    else why = "sizes known only at run time";
    if (symbolic_) {
      throw Undecided{at(e.offset), static_cast<int>(std::max<std::size_t>(1, e.length)), what + " depends on " + why};
    }
    fail_at(e, what + " depends on " + why + ", but it is needed while tracing");
  }

  // Arithmetic and comparisons of sizes of which one is known only at run
  // time: a size, or (comparisons) a condition an assert checks at run time.
  TValue size_binary(const body::Expr& e, const TValue& l, const TValue& r) {
    for (const TValue* v : {&l, &r}) {
      if (v->kind == TValue::Kind::Sym || v->kind == TValue::Kind::Int) continue;
      if (v->is_symbolic()) not_known(e, *v, "'" + e.str() + "'");
      fail_at(e, "'" + e.op + "' between " + kind_word(l.kind) + " and " + kind_word(r.kind) + " is not defined");
    }
    const Dim a = l.kind == TValue::Kind::Sym ? l.dim : Dim(l.i), b = r.kind == TValue::Kind::Sym ? r.dim : Dim(r.i);
    const std::string& op = e.op;
    try {
      if (op == "+" || op == "-" || op == "*") return TValue::size(Dim::binary(op[0], a, b));
      if (op == "%") return TValue::size(Dim::binary('-', a, Dim::binary('*', Dim::binary('/', a, b), b)));
    } catch (const std::exception& err) {
      fail_at(e, std::string("in ") + e.str() + ": " + err.what());
    }
    if (op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=") {
      TValue c;
      c.kind = TValue::Kind::Cond;
      c.conds.push_back({a, op, b});
      return c;
    }
    not_known(e, l.kind == TValue::Kind::Sym ? l : r, "'" + e.str() + "'");
  }

  // A warning `-Wname` at an expression of the body being traced (once per place).
  void warn(const body::Expr& e, std::string message, const std::string& name) {
    Diagnostic d;
    d.severity = Diagnostic::Severity::Warning;
    d.loc = at(e.offset);
    d.length = static_cast<int>(std::max<std::size_t>(1, e.length));
    d.message = std::move(message) + " [-W" + name + "]";
    d.source_line = spec_.line_at(d.loc);
    for (const auto& w : warnings_)
      if (w.loc.str() == d.loc.str() && w.message == d.message) return;
    warnings_.push_back(std::move(d));
  }

  std::string condition_values(Frame& frame, const body::Expr& e) {
    return detail::condition_values(e, [&](const body::Expr& x) -> std::optional<TValue> {
      try {
        return eval(frame, x);
      } catch (const UserError&) {
        return std::nullopt;
      }
    });
  }

  // assert COND, "message": checked now when COND is known while tracing; a
  // condition on run-time sizes becomes a check of the generated model
  // (Graph::assertions), made when its inputs are bound.
  void run_assert(Frame& frame, const body::Stmt& s) {
    in_assert_ = true;
    TValue c;
    try {
      c = eval(frame, *s.value);
    } catch (...) {
      in_assert_ = false;
      throw;
    }
    in_assert_ = false;
    // The message as written, printable ASCII only (quote() escapes the rest).
    const std::string base = s.message.empty() ? "assertion '" + quote(s.value->str(), 200) + "' failed" : quote(s.message, 300);
    if (c.kind == TValue::Kind::Tensor) {
      fail_at(*s.value, "an assert is checked while tracing, so its condition cannot depend on a tensor's data");
    }
    if (c.kind == TValue::Kind::Unknown || (symbolic_ && c.kind == TValue::Kind::Cond)) {
      // `wfgen check` of a model by itself: a note (for the model checked, not
      // the models it calls), and the rest of the body is checked.
      if (stack_.size() > 1) return;
      Diagnostic d;
      d.severity = Diagnostic::Severity::Note;
      d.loc = at(s.offset);
      d.length = static_cast<int>(std::max<std::size_t>(1, s.length));
      d.message = "'assert " + quote(s.value->str(), 60) + "' depends on " +
                  (c.kind == TValue::Kind::Unknown ? "the argument '" + c.what + "'" : std::string("arguments or sizes")) +
                  " without a value here; each build checks it";
      d.source_line = spec_.line_at(d.loc);
      notes_.push_back(std::move(d));
      return;
    }
    if (c.kind == TValue::Kind::Cond) {
      graph::Assertion a;
      for (const auto& k : c.conds) a.all.push_back({k.lhs, k.op, k.rhs});
      a.message = base;
      a.loc = at(s.offset);
      a.source = detail::statement_text(s);
      g_.assertions.push_back(std::move(a));
      return;
    }
    if (!c.is_number()) fail_at(*s.value, "an assert's condition must be a bool, but this is " + std::string(kind_word(c.kind)));
    if (c.number() != 0) return;
    const std::string values = condition_values(frame, *s.value);
    Diagnostic d;
    d.loc = at(s.offset);
    d.length = static_cast<int>(std::max<std::size_t>(1, s.length));
    d.message = base + (values.empty() ? "" : " (" + values + ")");
    d.source_line = spec_.line_at(d.loc);
    throw UserError(std::move(d));
  }

  // -Wunused-output, once the build's outputs are known.
  void warn_unused_outputs() {
    if (symbolic_) return;
    for (auto& d : detail::unused_outputs(spec_, g_, model_calls_, build_.name)) warnings_.push_back(std::move(d));
  }


  std::string current_source() const { return stmt_ ? detail::statement_text(*stmt_) : std::string(); }

  // --- arguments ----------------------------------------------------------------

  std::vector<std::pair<std::string, TValue>> build_args(const spec::Model&) {
    std::vector<std::pair<std::string, TValue>> out;
    for (const auto& [name, v] : build_.args) out.emplace_back(name, from_arg(v));
    return out;
  }

  // Binds a model's constructor arguments (given values, then defaults).
  void bind_args(Frame& frame, const spec::Model& m, const std::vector<std::pair<std::string, TValue>>& given, SourceLoc loc) {
    for (const auto& a : m.args) {
      const TValue* v = nullptr;
      for (const auto& [name, value] : given)
        if (name == a.name) v = &value;
      if (v) {
        const bool symbolic = v->kind == TValue::Kind::Unknown || (v->kind == TValue::Kind::Sym && a.type == spec::ArgType::Int);
        if (!symbolic && !to_arg(*v, a.type)) {
          fail(loc, "argument '" + a.name + "' of model '" + m.name + "' is " + spec::arg_type_name(a.type) + ", but got " +
                        kind_word(v->kind));
        }
        frame.env[a.name] = *v;
      } else if (a.default_value) {
        frame.env[a.name] = from_arg(*a.default_value);
      } else if (symbolic_ && &m == spec_.find_model(build_.model)) {
        frame.env[a.name] = a.type == spec::ArgType::Int ? TValue::size(Dim::symbol(a.name)) : TValue::unknown(a.name);
      } else {
        fail(loc, "model '" + m.name + "' needs its argument '" + a.name + "'");
      }
    }
  }

  // --- models -------------------------------------------------------------------

  // Traces a model's body. `check_inputs` (a call from another model) checks
  // the tensors passed against the where line; it runs after the body's
  // leading asserts, so that a model's stated preconditions speak first.
  std::vector<TValue> trace_model(Frame& frame, const spec::Model& m, const std::function<void()>& check_inputs = {}) {
    if (++depth_ > kMaxModelDepth) fail(m.loc, "models call each other more than " + std::to_string(kMaxModelDepth) + " deep");
    std::string saved_scope = scope_;
    const spec::Text* saved_text = text_;
    const body::Stmt* saved_stmt = stmt_;
    scope_ = frame.scope;
    text_ = &m.call;
    // The leading asserts (preconditions) see the arguments, the inputs and
    // the where line's symbols; the parameters are made after them.
    bind_where_symbols(frame, m);
    const body::Program& program = parsed(m);
    std::size_t first = 0;
    for (; first < program.statements.size() && program.statements[first]->kind == body::Stmt::Kind::Assert; ++first)
      run_stmt(frame, *program.statements[first]);
    // Parameters of this instance.
    for (const auto& p : m.params) {
      Shape shape;
      for (const auto& d : p.shape) shape.push_back(eval_dim(frame, d, p));
      check_size(shape, p.loc, "parameter '" + p.name + "' of model '" + m.name + "'");
      std::string path = frame.scope.find('/') == std::string::npos ? p.name : frame.scope.substr(frame.scope.find('/') + 1) + "." + p.name;
      if (frame.shared) {
        // A later call of a build as a node: the parameters of its first call.
        auto it = shared_params_.find(path);
        if (it != shared_params_.end()) {
          frame.env[p.name] = TValue::tensor(it->second);
          continue;
        }
      }
      Value v = fresh(Kind::Param, shape, p.loc, "");
      v.name = p.name;
      v.param = &p;
      v.param_path = path;
      int id = add(std::move(v));
      g_.params.push_back(id);
      if (frame.shared) shared_params_[path] = id;
      frame.env[p.name] = TValue::tensor(id);
    }
    const std::optional<Declared> decl = declared(frame, m);
    std::vector<TValue> results;
    std::optional<Returned> ret;
    if (check_inputs) {
      text_ = saved_text;
      stmt_ = saved_stmt;
      scope_ = saved_scope;
      check_inputs();
      scope_ = frame.scope;
      text_ = &m.call;
    }
    try {
      for (std::size_t k = first; k < program.statements.size(); ++k) run_stmt(frame, *program.statements[k]);
    } catch (Returned& r) {
      results = r.values;
      ret = std::move(r);
    }
    scope_ = saved_scope;
    text_ = saved_text;
    stmt_ = saved_stmt;
    --depth_;
    if (decl) {
      std::vector<Shape> shapes;
      for (const auto& r : results) shapes.push_back(r.kind == TValue::Kind::Tensor ? val(r.id).shape : Shape{});
      detail::check_outputs(spec_, m, *decl, results, shapes, ret);
    }
    return results;
  }

  void bind_where_symbols(Frame& frame, const spec::Model& m) { detail::bind_where_symbols(frame.env, g_, m); }

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
    if (v.kind == TValue::Kind::Sym) return v.dim;
    if (v.kind == TValue::Kind::Unknown) not_known(*e, v, "the shape of parameter '" + p.name + "'");
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

  std::optional<Declared> declared(const Frame& frame, const spec::Model& m) const { return detail::declared(frame.env, g_, m); }

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
      case body::Stmt::Kind::Assert: run_assert(frame, s); return;
      case body::Stmt::Kind::If: {
        TValue c = eval(frame, *s.value);
        if (c.is_symbolic()) not_known(*s.value, c, "the condition of 'if'");
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
    if (v.is_symbolic()) not_known(e, v, "the " + what);
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
        if (v.is_symbolic() && !(e.op == "-" && v.kind == TValue::Kind::Sym)) not_known(e, v, "'" + e.str() + "'");
        if (v.kind == TValue::Kind::Sym) return TValue::size(Dim::binary('-', Dim(0), v.dim));
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
            if (!d.is_known() && (symbolic_ || in_assert_)) {
              dims.push_back(TValue::size(d));
              continue;
            }
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
      if (op == "and" && (l.kind == TValue::Kind::Cond || (l.is_number() && l.number() != 0))) {
        // A conjunction of comparisons of run-time sizes stays a condition (an assert checked at run time).
        TValue r = eval(frame, *e.operands[1]);
        if (r.kind == TValue::Kind::Cond || l.kind == TValue::Kind::Cond) {
          if (r.is_number() && r.number() == 0) return TValue::of_bool(false);
          if (r.is_symbolic() && r.kind != TValue::Kind::Cond) not_known(*e.operands[1], r, "'" + e.str() + "'");
          if (!r.is_number() && r.kind != TValue::Kind::Cond) fail_at(*e.operands[1], "'and' needs bools, but got " + std::string(kind_word(r.kind)));
          TValue c = l.kind == TValue::Kind::Cond ? l : r;
          if (l.kind == TValue::Kind::Cond && r.kind == TValue::Kind::Cond) c.conds.insert(c.conds.end(), r.conds.begin(), r.conds.end());
          return c;
        }
        if (r.is_symbolic()) not_known(*e.operands[1], r, "'" + e.str() + "'");
        if (!r.is_number()) fail_at(*e.operands[1], "'" + op + "' needs bools, but got " + std::string(kind_word(r.kind)));
        return TValue::of_bool(r.number() != 0);
      }
      if ((l.kind == TValue::Kind::Cond || l.kind == TValue::Kind::Sym) && in_assert_ && !symbolic_) {
        fail_at(e, "an assert on sizes known only at run time takes comparisons joined by 'and'; '" + op +
                       "' needs sizes known while tracing");
      }
      if (l.is_symbolic()) not_known(*e.operands[0], l, "'" + e.str() + "'");
      if (!l.is_number()) fail_at(*e.operands[0], "'" + op + "' needs bools, but got " + std::string(kind_word(l.kind)));
      bool lv = l.number() != 0;
      if (op == "and" && !lv) return TValue::of_bool(false);
      if (op == "or" && lv) return TValue::of_bool(true);
      TValue r = eval(frame, *e.operands[1]);
      if (r.is_symbolic()) not_known(*e.operands[1], r, "'" + e.str() + "'");
      if (!r.is_number()) fail_at(*e.operands[1], "'" + op + "' needs bools, but got " + std::string(kind_word(r.kind)));
      return TValue::of_bool(r.number() != 0);
    }
    TValue l = eval(frame, *e.operands[0]);
    TValue r = eval(frame, *e.operands[1]);
    bool lt = l.kind == TValue::Kind::Tensor, rt_ = r.kind == TValue::Kind::Tensor;
    if (!lt && !rt_ && (l.is_symbolic() || r.is_symbolic())) return size_binary(e, l, r);
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
    if (num.is_symbolic()) not_known(e, num, "'" + e.str() + "'");
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

  // reshape(x, 2, -1) / x.reshape([2, -1]): one -1 is inferred.
  int reshape_to(int base, const std::vector<TValue>& dims, const body::Expr& e) {
    const Shape& s = val(base).shape;
    Shape out;
    int infer = -1;
    for (std::size_t k = 0; k < dims.size(); ++k) {
      if (dims[k].kind == TValue::Kind::Sym) {
        out.push_back(dims[k].dim);
        continue;
      }
      if (dims[k].is_symbolic()) not_known(e, dims[k], "this reshape");
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
        if (given->is_symbolic()) not_known(e, *given, "argument '" + a.name + "' of node '" + node.name + "'");
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
    if (impl && impl->kind == spec::BodyKind::Build && impl->build == build_.name) {
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
    if (symbolic_) {
      // `wfgen check` of a model by itself: no build, so no device order; any implementation will do.
      auto impls = spec_.impls_of(node.name);
      return impls.empty() ? nullptr : impls.front();
    }
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
        if (it.is_symbolic()) not_known(e, it, "the axis of " + op);
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
    if (const spec::Build* b = differentiated_build_node(name)) return call_build_node(frame, e, *b, pos, kw_ordered);
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
      if (pos.size() == 1 && pos[0].is_symbolic()) not_known(e, pos[0], "'" + e.str() + "'");
      if (pos.size() != 1 || !kw.empty() || !pos[0].is_number()) fail_at(e, "int(x) takes one number");
      double x = pos[0].number();
      if (!std::isfinite(x) || std::fabs(x) >= 9.2e18) fail_at(e, "int(x) of a value out of range");
      if (x != std::trunc(x)) {
        warn(e, "int(" + e.args[0].value->str() + ") truncates " + number_str(x) + " to " +
                    std::to_string(static_cast<std::int64_t>(x)) + (stack_.empty() ? "" : " in model '" + stack_.back()->name + "'") +
                    "; the division is not exact",
             "truncation");
      }
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
      if (v.is_symbolic()) not_known(e, v, "the axis of '" + name + "'");
      if (v.kind != TValue::Kind::Int) fail_at(e, "'" + name + "' takes integer axes");
      std::int64_t a = v.i < 0 ? v.i + limit : v.i;
      if (a < 0 || a >= limit) fail_at(e, "axis " + std::to_string(v.i) + " is out of range for rank " + std::to_string(rank));
      return static_cast<int>(a);
    };
    if (name == "reshape" || name == "view") return TValue::tensor(reshape_to(x, flat, e));
    if (name == "size") {
      if (flat.size() != 1) fail_at(e, "size takes one axis: x.size(k)");
      const Dim& d = s[static_cast<std::size_t>(axis_of(flat[0], rank))];
      if (!d.is_known() && (symbolic_ || in_assert_)) return TValue::size(d);
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
        if (v.kind == TValue::Kind::Sym) {
          to.push_back(v.dim);
          continue;
        }
        if (v.is_symbolic()) not_known(e, v, "broadcast_to");
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
      if (i.is_symbolic()) not_known(e, i, "a list index");
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
        if (v.is_symbolic()) not_known(*p, v, "a slice bound");
        if (v.kind != TValue::Kind::Int) fail_at(*p, "slice bounds must be integers");
        return v.i;
      };
      if (!size.is_known()) {
        // Run-time dims can only be taken whole.
        if ((!it.is_slice || it.start || it.stop || it.step) && symbolic_) {
          throw Undecided{at(e.offset), static_cast<int>(std::max<std::size_t>(1, e.length)),
                          "'" + quote(e.str(), 60) + "' slices axis " + std::to_string(k) + " of unknown size " + size.str()};
        }
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

  // A differentiable node made from a build (`as: node` with `backward:
  // true`, cl-waffe2's defmodel-as :asif :node :differentiable t). Its
  // kernel would be the build's generated class, whose parameters callers
  // can neither train nor load; so every call is traced as the build's model
  // instead: the same function, its parameters those of one instance that
  // every call shares (an RNN cell applied at each time step), named
  // `<build>.<param>` in the caller and trained, saved and loaded with its own.
  const spec::Build* differentiated_build_node(const std::string& name) const {
    for (const auto& b : spec_.builds) {
      if (b.name == name && b.as_node && b.backward && spec_.find_model(b.model)) return &b;
    }
    return nullptr;
  }

  TValue call_build_node(Frame& caller, const body::Expr& e, const spec::Build& b, const std::vector<TValue>& pos,
                         const std::vector<std::pair<std::string, TValue>>& kw) {
    if (!kw.empty()) fail_at(e, "node '" + b.name + "' (build '" + b.name + "' as a node) takes tensors only, not '" + kw[0].first + "='");
    for (const auto& v : pos) {
      if (v.kind != TValue::Kind::Tensor) fail_at(e, "node '" + b.name + "' (build '" + b.name + "' as a node) takes tensors only");
    }
    if (b.dtype != build_.dtype) {
      fail_at(e, "node '" + b.name + "' is build '" + b.name + "' of dtype " + rt::dtype_name(b.dtype) + ", but build '" + build_.name +
                     "' is " + rt::dtype_name(build_.dtype));
    }
    std::vector<std::pair<std::string, TValue>> args;
    for (const auto& [name, value] : b.args) args.emplace_back(name, from_arg(value));
    // The instance's nested models are numbered from 0 at every call, so
    // that their parameters have the same paths each time.
    std::map<std::string, int> saved = std::move(instances_);
    instances_.clear();
    TValue r = call_model(caller, e, *spec_.find_model(b.model), pos, args, &b.name);
    instances_ = std::move(saved);
    return r;
  }

  TValue call_model(Frame& caller, const body::Expr& e, const spec::Model& m, const std::vector<TValue>& pos,
                    const std::vector<std::pair<std::string, TValue>>& kw, const std::string* shared_as = nullptr) {
    for (const auto* active : stack_) {
      if (active == &m) {
        std::string chain;
        for (const auto* s : stack_) chain += s->name + " -> ";
        fail_at(e, "model '" + m.name + "' calls itself (" + chain + m.name + "); models cannot be recursive");
      }
    }
    Frame frame;
    frame.model = &m;
    if (shared_as) {
      frame.scope = "/" + *shared_as;
      frame.shared = true;
    } else {
      int count = ++instances_[m.name];
      frame.scope = caller.scope + "/" + m.name + "_" + std::to_string(count - 1);
      frame.shared = caller.shared;
    }
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
    // The callee's where line, when it has one, checks the tensors passed
    // (after the callee's leading asserts, its stated preconditions).
    auto check_inputs = [&] {
      if (!m.where) return;
      shape::Args sa;
      for (const auto& a : m.args) {
        const TValue& v = frame.env[a.name];
        if (v.kind == TValue::Kind::Int) sa[a.name] = shape::Value::scalar(Dim(v.i));
        if (v.kind == TValue::Kind::Sym) sa[a.name] = shape::Value::scalar(v.dim);
      }
      std::vector<Shape> shapes;
      for (const auto& in : m.inputs) shapes.push_back(val(frame.env[in].id).shape);
      subscript::Declaration d = *m.where;
      d.outputs.clear();
      shape::CheckResult r = shape::check(d, sa, shapes);
      if (!r.ok()) {
        shape::CheckOptions o;
        o.operation = shared_as ? *shared_as : m.name;
        fail_at(e, "shape error in a call of " + (shared_as ? "node '" + *shared_as + "' (model '" + m.name + "')" : "model '" + m.name + "'"),
                shape::render_report(d, shapes, r, o));
      }
    };
    const SourceLoc site = at(e.offset);
    const int site_length = static_cast<int>(std::max<std::size_t>(1, e.length));
    stack_.push_back(&m);
    std::vector<TValue> results;
    try {
      results = trace_model(frame, m, check_inputs);
    } catch (const UserError& err) {
      // The chain of calls, outermost first: each caller adds its call
      // right after the error, before the notes of the calls inside it.
      std::vector<Diagnostic> ds = err.diagnostics();
      if (ds.empty() || ds[0].loc.str() != site.str()) {
        Diagnostic call;
        call.severity = Diagnostic::Severity::Note;
        call.loc = site;
        call.length = site_length;
        call.message = "in this call of model '" + m.name + "'";
        call.source_line = spec_.line_at(call.loc);
        ds.insert(ds.begin() + (ds.empty() ? 0 : 1), std::move(call));
      }
      throw UserError(std::move(ds));
    }
    stack_.pop_back();
    if (results.empty()) fail_at(e, "model '" + m.name + "' returns nothing");
    if (results.size() > 1 && !in_stdlib(site)) {
      ModelCall c{site, site_length, m.name, {}, {}};
      for (std::size_t k = 0; k < results.size(); ++k) {
        c.results.push_back(results[k].kind == TValue::Kind::Tensor ? results[k].id : -1);
        c.names.push_back(m.where && k < m.where->outputs.size() && m.where->outputs[k].name ? *m.where->outputs[k].name : "");
      }
      model_calls_.push_back(std::move(c));
    }
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
  std::map<std::string, int> shared_params_;  // parameter path -> value, of builds called as nodes
  std::vector<const spec::Model*> stack_;
  bool symbolic_ = false;  // `wfgen check` of a model by itself
  int tilde_rank_ = 1;     // symbolic_: the dims a `~` of an input stands for
  bool in_assert_ = false; // evaluating an assert's condition: run-time sizes are values
  std::vector<Diagnostic> warnings_;
  std::vector<Diagnostic> notes_;
  std::vector<ModelCall> model_calls_;
  // Autodiff attribution.
  bool attributing_ = false;
  bool attr_pullback_ = true;
  SourceLoc attr_loc_;
  std::string attr_source_;
  spec::Text placeholder_;
  body::Expr here_;
};

}  // namespace

graph::Graph trace_build(const spec::Spec& spec, const spec::Build& build, std::vector<Diagnostic>* warnings) {
  Tracer t(spec, build);
  graph::Graph g = t.run();
  if (warnings) warnings->insert(warnings->end(), t.warnings().begin(), t.warnings().end());
  return g;
}

std::vector<Diagnostic> check_model(const spec::Spec& spec, const spec::Model& model) {
  if (!model.where) return {};
  spec::Build b;
  b.name = model.name;
  b.model = model.name;
  b.devices = {};
  bool tilde = false;
  for (const auto& in : model.where->inputs)
    for (const auto& d : in.dims) tilde = tilde || d.kind == subscript::Subscript::Kind::Batch;
  std::optional<UserError> first;
  for (int rank : tilde ? std::vector<int>{1, 0, 2} : std::vector<int>{1}) {
    Tracer t(spec, b, rank);
    try {
      t.run();
      return t.notes();
    } catch (const Undecided& u) {
      Diagnostic d;
      d.severity = Diagnostic::Severity::Note;
      d.loc = u.loc;
      d.length = u.length;
      d.message = "model '" + model.name + "' is checked up to here: " + u.message;
      d.source_line = spec.line_at(d.loc);
      std::vector<Diagnostic> notes = t.notes();
      notes.push_back(std::move(d));
      return notes;
    } catch (const UserError& e) {
      // A value without a value reaching a check that does not expect one, or
      // an error that names an argument without a value (`(2 3 4)` and `(d)`
      // do not broadcast unless d is 4 or 1): not decidable either.
      const std::string what = e.what();
      bool names_argument = false;
      std::string argument;
      for (const auto& a : model.args) {
        if (a.default_value || names_argument) continue;
        for (std::size_t at = what.find(a.name); at != std::string::npos && !names_argument; at = what.find(a.name, at + 1)) {
          auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
          names_argument = (at == 0 || !ident(what[at - 1])) && (at + a.name.size() >= what.size() || !ident(what[at + a.name.size()]));
        }
        if (names_argument) argument = a.name;
      }
      if (names_argument || what.find("known only at run time") != std::string::npos ||
          what.find("an argument without a value") != std::string::npos) {
        Diagnostic d = e.diagnostics().front();
        d.severity = Diagnostic::Severity::Note;
        d.message = names_argument ? "model '" + model.name + "' is checked up to here; without a value of '" + argument +
                                         "' this cannot be decided: " + d.message
                                   : "model '" + model.name + "' is checked up to here: " + d.message;
        d.detail.clear();
        std::vector<Diagnostic> notes = t.notes();
        notes.push_back(std::move(d));
        return notes;
      }
      if (!first) {
        std::vector<Diagnostic> ds = e.diagnostics();
        ds.insert(ds.end(), t.notes().begin(), t.notes().end());
        first = UserError(std::move(ds));
      }
    }
  }
  throw *first;
}

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

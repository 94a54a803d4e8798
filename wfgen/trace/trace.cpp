// The tracer's driver (tracer.hpp): a build traced from its model's where
// line and arguments, models called with their frames and parameters,
// statements and asserts; and the entry points trace_build, check_model and
// the Builder the autodiff and the rewrites use.
#include "wfgen/trace/trace.hpp"

#include "wfgen/trace/builder.hpp"
#include "wfgen/trace/tracer.hpp"

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

namespace wfgen::trace::detail {

void Tracer::attribute(const SourceLoc& loc, const std::string& source, bool pullback, std::string scope) {
  attributing_ = true;
  attr_pullback_ = pullback;
  if (!pullback) scope_ = std::move(scope);
  attr_loc_ = loc;
  attr_source_ = source;
  placeholder_ = spec::Text{"", loc, {loc}, true};
  text_ = &placeholder_;
  stmt_ = nullptr;
}

std::optional<int> Tracer::eval_backward(const spec::Text& text, const std::vector<std::pair<std::string, TValue>>& names) {
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

int Tracer::node(const std::string& name, const std::vector<int>& tensors, const std::vector<spec::ArgValue>& args) {
  return call_node_simple(here_, name, tensors, args).id;
}

int Tracer::zeros(const Shape& shape) {
  const spec::Node* n = spec_.find_node("fill");
  if (!n) fail_at(here_, "the standard node 'fill' is not available (was it overridden or removed?)");
  std::vector<spec::ArgValue> args{spec::ArgValue(0.0)};
  int rank = static_cast<int>(shape.size());
  const spec::Impl* impl = choose_impl(*n, rank, build_.dtype, args, here_);
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

int Tracer::sum_axes(int x, const std::vector<int>& axes) {
  std::vector<TValue> items;
  for (int a : axes) items.push_back(TValue::of_int(a));
  Frame frame;
  return reduce(frame, here_, "sum", {TValue::tensor(x)}, {{"axis", TValue::list(items)}, {"keepdims", TValue::of_bool(true)}}).id;
}

Graph Tracer::run() {
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
    if (std::optional<rt::DType> dt = build_.typed_input(*a.name)) v.dtype = *dt;
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

Value Tracer::fresh(Kind kind, Shape shape, SourceLoc loc, std::string source) {
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

int Tracer::add(Value v) {
  v.id = static_cast<int>(g_.values.size());
  g_.values.push_back(std::move(v));
  return g_.values.back().id;
}

void Tracer::fail(SourceLoc loc, std::string message, std::string detail, int length) {
  Diagnostic d;
  d.loc = std::move(loc);
  d.message = std::move(message);
  d.source_line = spec_.line_at(d.loc);
  d.length = length;
  d.detail = std::move(detail);
  throw UserError(std::move(d));
}

void Tracer::fail_at(const body::Expr& e, std::string message, std::string detail) {
  fail(at(e.offset), std::move(message), std::move(detail), static_cast<int>(std::max<std::size_t>(1, e.length)));
}

void Tracer::not_known(const body::Expr& e, const TValue& v, const std::string& what) {
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

void Tracer::warn(const body::Expr& e, std::string message, const std::string& name) {
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

std::string Tracer::condition_values(Frame& frame, const body::Expr& e) {
  return detail::condition_values(e, [&](const body::Expr& x) -> std::optional<TValue> {
    try {
      return eval(frame, x);
    } catch (const UserError&) {
      return std::nullopt;
    }
  });
}

void Tracer::run_assert(Frame& frame, const body::Stmt& s) {
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

void Tracer::warn_unused_outputs() {
  if (symbolic_) return;
  for (auto& d : detail::unused_outputs(spec_, g_, model_calls_, build_.name)) warnings_.push_back(std::move(d));
}

std::vector<std::pair<std::string, TValue>> Tracer::build_args(const spec::Model&) {
  std::vector<std::pair<std::string, TValue>> out;
  for (const auto& [name, v] : build_.args) out.emplace_back(name, from_arg(v));
  return out;
}

void Tracer::bind_args(Frame& frame, const spec::Model& m, const std::vector<std::pair<std::string, TValue>>& given, SourceLoc loc) {
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

std::vector<TValue> Tracer::trace_model(Frame& frame, const spec::Model& m, const std::function<void()>& check_inputs) {
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

const body::Program& Tracer::parsed(const spec::Model& m) {
  auto it = programs_.find(&m);
  if (it != programs_.end()) return it->second;
  try {
    return programs_.emplace(&m, body::parse(m.call.value)).first->second;
  } catch (const body::ParseError& e) {
    fail(m.call.at(e.offset()), std::string("in the body of model '") + m.name + "': " + e.what(), {},
         static_cast<int>(e.length()));
  }
}

Dim Tracer::eval_dim(Frame& frame, const spec::Text& text, const spec::Param& p) {
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

void Tracer::check_size(const Shape& shape, const SourceLoc& loc, const std::string& what) {
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 56;
  std::int64_t n = 1;
  for (const auto& d : shape) {
    if (!d.is_known()) continue;
    if (__builtin_mul_overflow(n, d.value(), &n) || n > kMaxElements) {
      fail(loc, "the " + what + " would have shape " + shape::shape_str(shape) + ", more than 2^56 elements; no machine can hold it");
    }
  }
}

void Tracer::run_block(Frame& frame, const body::Block& block) {
  for (const auto& s : block) run_stmt(frame, *s);
}

void Tracer::run_stmt(Frame& frame, const body::Stmt& s) {
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

void Tracer::assign(Frame& frame, const std::string& name, const TValue& v) {
  if (v.kind == TValue::Kind::Tensor && g_[v.id].name.empty() && g_[v.id].kind == Kind::Call) g_[v.id].name = name;
  frame.env[name] = v;
}

const spec::Build* Tracer::differentiated_build_node(const std::string& name) const {
  for (const auto& b : spec_.builds) {
    if (b.name == name && b.as_node && b.backward && spec_.find_model(b.model)) return &b;
  }
  return nullptr;
}

TValue Tracer::call_build_node(Frame& caller, const body::Expr& e, const spec::Build& b, const std::vector<TValue>& pos,
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

TValue Tracer::call_model(Frame& caller, const body::Expr& e, const spec::Model& m, const std::vector<TValue>& pos,
                  const std::vector<std::pair<std::string, TValue>>& kw, const std::string* shared_as) {
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

}  // namespace wfgen::trace::detail

namespace wfgen::trace {

using detail::Tracer;
using detail::Undecided;
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

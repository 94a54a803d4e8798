// Checks of what the tracer (trace.cpp) found: the tensors a model's body
// returns against the outputs of its where line (count, rank and every dim,
// with the symbols the inputs and arguments bind), the place an error inside
// the standard library is reported at, and the results of models nothing reads.
#include <algorithm>
#include <functional>
#include <map>

#include "wfgen/shape/shape.hpp"
#include "wfgen/trace/tvalue.hpp"

namespace wfgen::trace::detail {

using shape::Dim;
using shape::Shape;

const char* kind_word(TValue::Kind k) {
  switch (k) {
    case TValue::Kind::None: return "nothing";
    case TValue::Kind::Tensor: return "a tensor";
    case TValue::Kind::Int: return "an integer";
    case TValue::Kind::Float: return "a float";
    case TValue::Kind::Bool: return "a bool";
    case TValue::Kind::List: return "a list";
    case TValue::Kind::Sym: return "a size known only at run time";
    case TValue::Kind::Cond: return "a condition on sizes known only at run time";
    case TValue::Kind::Unknown: return "an argument without a value";
  }
  return "?";
}

namespace {

// True when the dims can differ: different sizes, or symbolic expressions
// that give different sizes for some values of their run-time symbols.
// `expected` is "?" (any) where the where line leaves an output dim to the
// body (conv2d's h_out).
bool dims_differ(const Dim& expected, const Dim& got) {
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
std::string subscript_at(const subscript::Argument& arg, std::size_t axis, std::size_t rank) {
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

std::string ordinal(std::size_t n) {
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

// The tensors a model's body returned against the outputs of its where
// line: their count, and the rank and every dim of each, with symbols
// bound by the inputs (and arguments) as the where line binds them. A
// Shape-Error report at the return statement, with notes at the where
// line's output and, for a model called by another, at the call.
}  // namespace

void check_outputs(const spec::Spec& spec, const spec::Model& m, const Declared& in, const std::vector<TValue>& results,
                   const std::vector<Shape>& shapes, const std::optional<Returned>& ret) {
  const subscript::Declaration& decl = *m.where;
  const shape::CheckResult predicted = shape::check(decl, in.args, in.inputs);
  std::vector<Shape> returned;
  for (std::size_t k = 0; k < results.size(); ++k)
    returned.push_back(results[k].kind == TValue::Kind::Tensor && k < shapes.size() ? shapes[k] : Shape{Dim::symbol("?")});
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
  d.source_line = spec.line_at(d.loc);
  d.detail = shape::render_report(decl, in.inputs, r, o);
  std::vector<Diagnostic> all{d};
  Diagnostic where;
  where.severity = Diagnostic::Severity::Note;
  const subscript::Argument& out = decl.outputs[std::min(culprit, decl.outputs.size() - 1)];
  where.loc = m.where_text->at(out.offset);
  where.length = static_cast<int>(std::max<std::size_t>(1, out.length));
  where.message = "the where line of model '" + m.name + "' declares " + out.str() + " here";
  where.source_line = spec.line_at(where.loc);
  all.push_back(std::move(where));
  throw UserError(std::move(all));
}


bool in_stdlib(const SourceLoc& loc) { return loc.file.rfind("<stdlib>/", 0) == 0; }

// An error inside a model of the standard library, reached through calls
// (notes "in this call of model ..."), is reported at the innermost call
// in a file of the user's: the error there, the calls from it inwards as
// notes, and last the line of the standard library it failed at.
std::vector<Diagnostic> user_first(std::vector<Diagnostic> ds) {
  if (ds.empty() || !in_stdlib(ds[0].loc)) return ds;
  std::size_t chain_end = 1;
  while (chain_end < ds.size() && ds[chain_end].message.rfind("in this call of model", 0) == 0) ++chain_end;
  std::size_t user = 0;
  for (std::size_t k = 1; k < chain_end; ++k)
    if (!in_stdlib(ds[k].loc)) user = k;
  if (user == 0) return ds;
  Diagnostic failed = ds[0];
  Diagnostic primary = ds[user];
  primary.severity = Diagnostic::Severity::Error;
  primary.message = failed.message;
  primary.detail.clear();
  failed.severity = Diagnostic::Severity::Note;
  const std::string& inner = ds[chain_end - 1].message;  // "in this call of model 'NAME'"
  failed.message = "it fails here, in model " + inner.substr(inner.find('\'')) + " of the standard library";
  std::vector<Diagnostic> out{primary};
  for (std::size_t k = 1; k < chain_end; ++k)
    if (k != user) out.push_back(ds[k]);
  out.push_back(failed);
  for (std::size_t k = chain_end; k < ds.size(); ++k) out.push_back(ds[k]);
  return out;
}

std::vector<Diagnostic> unused_outputs(const spec::Spec& spec, const graph::Graph& g, const std::vector<ModelCall>& calls,
                                       const std::string& build) {
  std::vector<Diagnostic> out;
  if (calls.empty()) return out;
  std::vector<bool> live(g.values.size(), false);
  std::vector<int> work(g.outputs.begin(), g.outputs.end());
  while (!work.empty()) {
    int id = work.back();
    work.pop_back();
    if (id < 0 || live[static_cast<std::size_t>(id)]) continue;
    live[static_cast<std::size_t>(id)] = true;
    const graph::Value& v = g[id];
    for (int o : v.operands) work.push_back(o);
    if (v.base >= 0) work.push_back(v.base);
    if (v.init_from >= 0) work.push_back(v.init_from);
  }
  for (const auto& c : calls) {
    for (std::size_t k = 0; k < c.results.size(); ++k) {
      if (c.results[k] < 0 || live[static_cast<std::size_t>(c.results[k])]) continue;
      Diagnostic d;
      d.severity = Diagnostic::Severity::Warning;
      d.loc = c.loc;
      d.length = c.length;
      d.message = "output " + std::to_string(k + 1) + (c.names[k].empty() ? "" : " (" + c.names[k] + ")") + " of model '" +
                  c.model + "' is never used by build '" + build + "' [-Wunused-output]";
      d.source_line = spec.line_at(d.loc);
      bool dup = false;
      for (const auto& w : out) dup = dup || (w.loc.str() == d.loc.str() && w.message == d.message);
      if (!dup) out.push_back(std::move(d));
    }
  }
  return out;
}

void bind_where_symbols(std::map<std::string, TValue>& env, const graph::Graph& g, const spec::Model& m) {
  if (!m.where) return;
  for (const auto& in : m.where->inputs) {
    auto it = in.name ? env.find(*in.name) : env.end();
    if (it == env.end() || it->second.kind != TValue::Kind::Tensor) continue;
    const Shape s = g[it->second.id].shape;
    const auto& dims = in.dims;
    std::size_t batch = dims.size();
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (dims[i].kind == subscript::Subscript::Kind::Batch) batch = i;
    if (batch == dims.size() ? s.size() != dims.size() : s.size() + 1 < dims.size()) continue;  // the where check reports it
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i].kind != subscript::Subscript::Kind::Symbol || env.count(dims[i].name)) continue;
      const std::size_t axis = i < batch ? i : s.size() - (dims.size() - i);
      env[dims[i].name] = TValue::size(s[axis]);
    }
  }
}

std::optional<Declared> declared(const std::map<std::string, TValue>& env, const graph::Graph& g, const spec::Model& m) {
  if (!m.where || m.where->outputs.empty()) return std::nullopt;
  Declared d;
  for (const auto& a : m.args) {
    auto it = env.find(a.name);
    if (it == env.end()) continue;
    const TValue& v = it->second;
    if (v.kind == TValue::Kind::Int) d.args[a.name] = shape::Value::scalar(Dim(v.i));
    if (v.kind == TValue::Kind::Sym) d.args[a.name] = shape::Value::scalar(v.dim);
    if (v.kind == TValue::Kind::List && a.type == spec::ArgType::Ints) {
      Shape dims;
      for (const auto& x : v.items) dims.push_back(Dim(x.i));
      d.args[a.name] = shape::Value::list(dims);
    }
  }
  for (const auto& in : m.where->inputs) {
    auto it = in.name ? env.find(*in.name) : env.end();
    if (it == env.end() || it->second.kind != TValue::Kind::Tensor) return std::nullopt;
    d.inputs.push_back(g[it->second.id].shape);
  }
  return d;
}

std::string condition_values(const body::Expr& e, const std::function<std::optional<TValue>(const body::Expr&)>& value_of) {
  std::vector<std::string> seen;
  std::string out;
  std::function<void(const body::Expr&)> walk = [&](const body::Expr& x) {
    using K = body::Expr::Kind;
    bool show = x.kind == K::Name || (x.kind == K::Attribute && x.name == "ndim") ||
                (x.kind == K::Call && x.operands[0]->kind == K::Attribute && x.operands[0]->name == "size");
    if (show) {
      const std::string text = x.str();
      if (std::find(seen.begin(), seen.end(), text) != seen.end()) return;
      seen.push_back(text);
      const std::optional<TValue> v = value_of(x);
      if (!v) return;
      std::string shown;
      if (v->kind == TValue::Kind::Int) shown = std::to_string(v->i);
      else if (v->kind == TValue::Kind::Float) shown = number_str(v->f);
      else if (v->kind == TValue::Kind::Bool) shown = v->i ? "true" : "false";
      else if (v->kind == TValue::Kind::Sym) shown = v->dim.str();
      if (!shown.empty() && shown != text) out += (out.empty() ? "" : ", ") + text + " = " + shown;
      return;
    }
    for (const auto& o : x.operands) walk(*o);
    for (const auto& a : x.args) walk(*a.value);
  };
  walk(e);
  return out;
}

}  // namespace wfgen::trace::detail

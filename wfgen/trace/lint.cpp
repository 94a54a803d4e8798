// What can be said of a model from its text alone, without tracing it: the
// names its body calls and reads must exist (errors, for `wfgen check` of
// models no build uses), and what it declares should be used (warnings).
// The tracer (trace.cpp) finds the rest, with values.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "wfgen/body/body.hpp"
#include "wfgen/trace/trace.hpp"

namespace wfgen::trace {

namespace {

// The functions and methods the tracer knows besides nodes and models, with
// the keyword arguments they take.
const std::map<std::string, std::vector<std::string>>& builtins() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"sum", {"axis", "keepdims"}},    {"mean", {"axis", "keepdims"}},   {"max", {"axis", "keepdims"}},
      {"min", {"axis", "keepdims"}},    {"argmax", {"axis", "keepdims"}}, {"argmin", {"axis", "keepdims"}},
      {"reshape", {}},  {"permute", {}}, {"transpose", {}}, {"unsqueeze", {}}, {"squeeze", {}},
      {"broadcast_to", {}}, {"expand_as", {}}, {"int", {}}};
  return table;
}

const std::set<std::string>& methods() {
  static const std::set<std::string> m = {"reshape", "view", "permute", "transpose", "unsqueeze", "squeeze",
                                          "broadcast_to", "expand_as", "size", "narrow"};
  return m;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A model's body read once: the names it reads, the names it binds, and its calls.
struct Body {
  body::Program program;
  std::vector<const body::Expr*> reads;  // Name expressions that are values (not callees)
  std::map<std::string, std::size_t> assigned;  // name -> offset of its first assignment
  std::set<std::string> loop_vars;
  std::vector<const body::Expr*> calls;  // Call expressions
  std::vector<const body::Expr*> attributes;  // Attribute expressions that are not callees

  std::set<std::string> read_names() const {
    std::set<std::string> out;
    for (const auto* e : reads) out.insert(e->name);
    return out;
  }
};

void walk_expr(Body& b, const body::Expr& e) {
  using K = body::Expr::Kind;
  if (e.kind == K::Name) b.reads.push_back(&e);
  if (e.kind == K::Attribute) b.attributes.push_back(&e);
  if (e.kind == K::Call) {
    b.calls.push_back(&e);
    const body::Expr& callee = *e.operands[0];
    if (callee.kind == K::Attribute) walk_expr(b, *callee.operands[0]);  // the object of a method call
    for (const auto& a : e.args) walk_expr(b, *a.value);
    return;
  }
  for (const auto& o : e.operands) walk_expr(b, *o);
  for (const auto& a : e.args) walk_expr(b, *a.value);
  for (const auto& it : e.items) {
    for (const auto* p : {&it.index, &it.start, &it.stop, &it.step})
      if (*p) walk_expr(b, **p);
  }
}

void walk_block(Body& b, const body::Block& block) {
  for (const auto& s : block) {
    if (s->value) walk_expr(b, *s->value);
    if (s->range_start) walk_expr(b, *s->range_start);
    for (const auto& r : s->results) walk_expr(b, *r);
    if (s->kind == body::Stmt::Kind::Assign) {
      for (std::size_t k = 0; k < s->targets.size(); ++k) b.assigned.emplace(s->targets[k], s->target_offsets[k]);
    }
    if (s->kind == body::Stmt::Kind::For) b.loop_vars.insert(s->targets[0]);
    walk_block(b, s->body);
    walk_block(b, s->orelse);
  }
}

// Parses the body; a syntax error is a UserError at its place.
Body read_body(const spec::Spec& spec, const spec::Model& m) {
  Body b;
  try {
    b.program = body::parse(m.call.value);
  } catch (const body::ParseError& e) {
    Diagnostic d;
    d.loc = m.call.at(e.offset());
    d.length = static_cast<int>(e.length());
    d.message = "in the body of model '" + m.name + "': " + e.what();
    d.source_line = spec.line_at(d.loc);
    throw UserError(std::move(d));
  }
  walk_block(b, b.program.statements);
  return b;
}

// The symbols of the where line's inputs, with the subscript that binds each first.
struct Bound {
  const subscript::Subscript* sub;
  const subscript::Argument* arg;
};
std::map<std::string, Bound> input_symbols(const spec::Model& m) {
  std::map<std::string, Bound> out;
  if (!m.where) return out;
  for (const auto& in : m.where->inputs)
    for (const auto& d : in.dims)
      if (d.kind == subscript::Subscript::Kind::Symbol) out.emplace(d.name, Bound{&d, &in});
  return out;
}

// The bindings of a where line (`where k = c * h`) whose symbol no subscript
// and no other binding uses.
std::vector<const subscript::Binding*> unused_bindings(const subscript::Declaration& decl) {
  std::map<std::string, int> uses;
  for (const auto* args : {&decl.inputs, &decl.outputs})
    for (const auto& a : *args)
      for (const auto& d : a.dims)
        if (d.kind == subscript::Subscript::Kind::Symbol) ++uses[d.name];
  std::function<void(const subscript::Expr&)> walk = [&](const subscript::Expr& e) {
    if (e.kind == subscript::Expr::Kind::Symbol) ++uses[e.name];
    for (const auto& i : e.items) walk(i);
  };
  for (const auto& w : decl.where) walk(w.value);
  std::vector<const subscript::Binding*> out;
  for (const auto& w : decl.where)
    if (!uses.count(w.symbol)) out.push_back(&w);
  return out;
}

// How often each symbol occurs in the where line (subscripts and bindings).
std::map<std::string, int> symbol_uses(const subscript::Declaration& decl) {
  std::map<std::string, int> out;
  for (const auto* args : {&decl.inputs, &decl.outputs})
    for (const auto& a : *args)
      for (const auto& d : a.dims)
        if (d.kind == subscript::Subscript::Kind::Symbol) ++out[d.name];
  std::function<void(const subscript::Expr&)> walk = [&](const subscript::Expr& e) {
    if (e.kind == subscript::Expr::Kind::Symbol) ++out[e.name];
    for (const auto& i : e.items) walk(i);
  };
  for (const auto& w : decl.where) {
    ++out[w.symbol];
    walk(w.value);
  }
  return out;
}

// The names of an expression of a parameter's shape.
void names_in(const std::string& text, std::set<std::string>& out) {
  try {
    body::ExprPtr e = body::parse_expression(text);
    Body b;
    walk_expr(b, *e);
    for (const auto* n : b.reads) out.insert(n->name);
  } catch (const body::ParseError&) {
    // reported when a build traces the model
  }
}

Diagnostic at(const spec::Spec& spec, Diagnostic::Severity severity, SourceLoc loc, std::size_t length, std::string message) {
  Diagnostic d;
  d.severity = severity;
  d.loc = std::move(loc);
  d.length = static_cast<int>(std::max<std::size_t>(1, length));
  d.message = std::move(message);
  d.source_line = spec.line_at(d.loc);
  return d;
}

}  // namespace

void resolve_model(const spec::Spec& spec, const spec::Model& m) {
  const Body b = read_body(spec, m);
  std::vector<Diagnostic> errors;
  auto error = [&](const body::Expr& e, std::string message) {
    errors.push_back(at(spec, Diagnostic::Severity::Error, m.call.at(e.offset), e.length, std::move(message)));
  };
  // Names: arguments, parameters, inputs, the where line's input symbols, and what the body binds.
  std::set<std::string> known;
  for (const auto& a : m.args) known.insert(a.name);
  for (const auto& p : m.params) known.insert(p.name);
  for (const auto& i : m.inputs) known.insert(i);
  for (const auto& [name, bound] : input_symbols(m)) known.insert(name);
  for (const auto& [name, offset] : b.assigned) known.insert(name);
  known.insert(b.loop_vars.begin(), b.loop_vars.end());
  std::set<std::string> reported;
  for (const auto* e : b.reads) {
    if (known.count(e->name) || !reported.insert(e->name).second) continue;
    error(*e, "unknown name '" + e->name + "'" + did_you_mean(e->name, std::vector<std::string>(known.begin(), known.end())));
  }
  for (const auto* e : b.attributes) {
    if (e->name != "T" && e->name != "shape" && e->name != "ndim") {
      error(*e, "unknown attribute '" + e->name + "' of a tensor (known: T, shape, ndim; methods: reshape, permute, transpose, "
                "unsqueeze, squeeze, broadcast_to)");
    }
  }
  // Calls: every callee exists, every keyword argument is one it takes.
  std::vector<std::string> callables;
  for (const auto& n : spec.nodes) callables.push_back(n.name);
  for (const auto& mm : spec.models) callables.push_back(mm.name);
  for (const auto* call : b.calls) {
    const body::Expr& callee = *call->operands[0];
    std::string what;
    std::vector<std::string> keywords;
    bool any_keyword = false;
    if (callee.kind == body::Expr::Kind::Attribute) {
      if (!methods().count(callee.name)) {
        error(callee, "unknown method '" + callee.name + "'" +
                          did_you_mean(callee.name, std::vector<std::string>(methods().begin(), methods().end())) +
                          " (known: " + join(std::vector<std::string>(methods().begin(), methods().end())) + ")");
        continue;
      }
      what = "method '" + callee.name + "'";
    } else if (callee.kind == body::Expr::Kind::Name) {
      const std::string& name = callee.name;
      auto bi = builtins().find(name);
      const bool reduction = bi != builtins().end() && !bi->second.empty();
      if (bi != builtins().end() && (!reduction || spec.find_node(name))) {
        what = "'" + name + "'";
        keywords = bi->second;
      } else if (const spec::Model* mm = spec.find_model(name)) {
        what = "model '" + name + "'";
        for (const auto& a : mm->args) keywords.push_back(a.name);
      } else if (const spec::Node* n = spec.find_node(name)) {
        what = "node '" + name + "'";
        for (const auto& a : n->args) keywords.push_back(a.name);
      } else {
        error(callee, "unknown node or model '" + name + "'" + did_you_mean(name, callables));
        continue;
      }
    } else {
      continue;  // the tracer says: only names and methods can be called
    }
    for (const auto& a : call->args) {
      if (!a.keyword || std::find(keywords.begin(), keywords.end(), *a.keyword) != keywords.end()) continue;
      any_keyword = true;
      errors.push_back(at(spec, Diagnostic::Severity::Error, m.call.at(a.offset), a.length,
                          what + " has no argument '" + *a.keyword + "'" + did_you_mean(*a.keyword, keywords) +
                              (keywords.empty() ? std::string(" (it takes none)") : " (arguments: " + join(keywords) + ")")));
    }
    (void)any_keyword;
  }
  if (!errors.empty()) {
    std::stable_sort(errors.begin(), errors.end(), [](const Diagnostic& x, const Diagnostic& y) {
      return std::make_pair(x.loc.line, x.loc.col) < std::make_pair(y.loc.line, y.loc.col);
    });
    throw UserError(std::move(errors));
  }
}

std::vector<Diagnostic> lint_node(const spec::Spec& spec, const spec::Node& n) {
  std::vector<Diagnostic> out;
  for (const auto* w : unused_bindings(n.where)) {
    bool is_arg = false;
    for (const auto& a : n.args) is_arg = is_arg || a.name == w->symbol;
    if (is_arg) continue;
    out.push_back(at(spec, Diagnostic::Severity::Warning, n.where_text.at(w->offset), w->symbol.size(),
                     "the where line of node '" + n.name + "' binds '" + w->symbol + "', but no dim uses it [-Wunused-symbol]"));
  }
  return out;
}

std::vector<Diagnostic> lint_model(const spec::Spec& spec, const spec::Model& m) {
  std::vector<Diagnostic> out;
  Body b;
  try {
    b = read_body(spec, m);
  } catch (const UserError&) {
    return out;  // reported as an error elsewhere
  }
  const std::set<std::string> reads = b.read_names();
  auto warn = [&](SourceLoc loc, std::size_t length, std::string message, const std::string& name) {
    out.push_back(at(spec, Diagnostic::Severity::Warning, std::move(loc), length, std::move(message) + " [-W" + name + "]"));
  };
  for (const auto& p : m.params) {
    if (!reads.count(p.name)) warn(p.loc, p.name.size(), "parameter '" + p.name + "' of model '" + m.name + "' is never used", "unused-parameter");
  }
  std::set<std::string> elsewhere;  // names the parameters' shapes and the where line use
  for (const auto& p : m.params)
    for (const auto& d : p.shape) names_in(d.value, elsewhere);
  std::map<std::string, int> uses;
  if (m.where) uses = symbol_uses(*m.where);
  for (const auto& a : m.args) {
    if (!reads.count(a.name) && !elsewhere.count(a.name) && !uses.count(a.name)) {
      warn(a.loc, a.name.size(), "argument '" + a.name + "' of model '" + m.name + "' is never used", "unused-argument");
    }
  }
  if (m.where && m.where_text) {
    for (const auto& in : m.where->inputs) {
      if (in.name && !reads.count(*in.name)) {
        warn(m.where_text->at(in.offset), in.name->size(), "input '" + *in.name + "' of model '" + m.name + "' is never used",
             "unused-input");
      }
    }
  }
  if (m.where && m.where_text) {
    for (const auto& w : unused_bindings(*m.where)) {
      if (reads.count(w->symbol)) continue;
      warn(m.where_text->at(w->offset), w->symbol.size(),
           "the where line of model '" + m.name + "' binds '" + w->symbol + "', but no dim uses it",
           "unused-symbol");
    }
  }
  for (const auto& [name, offset] : b.assigned) {
    if (reads.count(name) || name.starts_with("_")) continue;
    warn(m.call.at(offset), name.size(), "the value assigned to '" + name + "' in model '" + m.name + "' is never used",
         "unused-value");
  }
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& x, const Diagnostic& y) {
    return std::make_tuple(x.loc.file, x.loc.line, x.loc.col) < std::make_tuple(y.loc.file, y.loc.line, y.loc.col);
  });
  return out;
}

}  // namespace wfgen::trace

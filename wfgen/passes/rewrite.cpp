// The spec's paths (see passes.hpp): symbolic paths, bypasses and fusion
// paths, applied to the traced forward graph before autodiff.
//
// A symbolic path's pattern is traced like a body (its variables are inputs
// of a square symbolic shape), and that small graph is matched against the
// build's graph call by call: same node, same constructor arguments, same
// operand structure, a variable bound to one value wherever it appears. So
// `log(x + 1)` matches exactly what a body line `log(x + 1)` traces to
// (log of add_scalar with value 1). Replacements are traced by the same
// tracer, so their shapes are checked and their implementations chosen per
// device as for any body line.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "wfgen/body/body.hpp"
#include "wfgen/passes/passes.hpp"
#include "wfgen/trace/builder.hpp"

namespace wfgen::passes {

namespace {

using graph::Dim;
using graph::Graph;
using graph::Kind;
using graph::Shape;
using graph::Value;

// More rewrites than this means the paths undo each other.
constexpr int kMaxRewrites = 10000;

Diagnostic error_at(const spec::Spec& spec, SourceLoc loc, std::string message) {
  Diagnostic d;
  d.loc = std::move(loc);
  d.message = std::move(message);
  d.source_line = spec.line_at(d.loc);
  return d;
}

// The pattern's variables: names that are not called, in order of first use.
void variables(const body::Expr& e, std::vector<std::string>& out) {
  using K = body::Expr::Kind;
  if (e.kind == K::Name) {
    if (std::find(out.begin(), out.end(), e.name) == out.end()) out.push_back(e.name);
    return;
  }
  if (e.kind == K::Call) {
    const body::Expr& callee = *e.operands[0];
    if (callee.kind == K::Attribute) variables(*callee.operands[0], out);
    for (const auto& a : e.args) variables(*a.value, out);
    return;
  }
  for (const auto& o : e.operands) variables(*o, out);
}

// A build to trace patterns with: the spec's build (dtype, devices) without
// its model's arguments.
spec::Build scratch_build(const spec::Build& like) {
  spec::Build b;
  b.name = like.name;
  b.dtype = like.dtype;
  b.devices = like.devices;
  return b;
}

// The pattern of a symbolic path traced with each variable an input of shape
// (n n); returns the graph and sets `root` and `inputs` (per variable).
Graph trace_pattern(const spec::Spec& spec, const spec::Build& build, const spec::Path& path, int& root,
                    std::vector<std::pair<std::string, int>>& inputs) {
  std::vector<std::string> vars;
  try {
    variables(*body::parse_expression(path.pattern.value), vars);
  } catch (const body::ParseError& e) {
    throw UserError(error_at(spec, path.pattern.at(e.offset()), "in the pattern of path '" + path.name + "': " + e.what()));
  }
  Graph g;
  g.model = "path " + path.name;
  inputs.clear();
  for (const auto& v : vars) {
    // Names of nodes and models used without a call are not variables: the tracer says so.
    Value in;
    in.kind = Kind::Input;
    in.dtype = build.dtype;
    in.shape = {Dim::symbol("n"), Dim::symbol("n")};
    in.name = v;
    in.loc = path.pattern.loc;
    in.id = static_cast<int>(g.values.size());
    g.inputs.push_back(in.id);
    inputs.emplace_back(v, in.id);
    g.values.push_back(std::move(in));
  }
  trace::detail::Builder b(spec, build, std::move(g));
  b.attribute_forward(path.pattern.loc, path.pattern.value, "");
  std::optional<int> r = b.eval(path.pattern, inputs, {});
  if (!r || b.graph()[*r].kind != Kind::Call) {
    throw UserError(error_at(spec, path.pattern.loc, "the pattern of path '" + path.name +
                                                         "' must be a call of a node (it matches calls), not a variable or 0"));
  }
  root = *r;
  return b.take();
}

// The tensors a node reads: its where line's inputs that are not also outputs.
std::size_t input_count(const spec::Node& n) {
  std::size_t count = 0;
  for (const auto& in : n.where.inputs) {
    bool output = false;
    for (const auto& out : n.where.outputs) output = output || (in.name && out.name && *in.name == *out.name);
    count += output ? 0 : 1;
  }
  return count;
}

// Whether node `n` is `name` or extends it (through any number of parents).
bool is_a(const spec::Spec& spec, const spec::Node* n, const std::string& name, int depth = 0) {
  if (!n || depth > 32) return false;
  if (n->name == name) return true;
  for (const auto& parent : n->extends)
    if (is_a(spec, spec.find_node(parent), name, depth + 1)) return true;
  return false;
}

class Rewriter {
 public:
  Rewriter(const spec::Spec& spec, const spec::Build& build, Graph& g, std::string* log)
      : spec_(spec), build_(build), g_(g), log_(log) {}

  void run() {
    // Patterns are traced once per build.
    for (const auto& p : spec_.paths) {
      if (p.kind != spec::Path::Kind::Symbolic) continue;
      Pattern pat;
      pat.graph = trace_pattern(spec_, scratch_build(build_), p, pat.root, pat.inputs);
      patterns_[&p] = std::move(pat);
    }
    for (int fired = 0;;) {
      bool any = false;
      // The first path (in spec order) that matches anywhere fires, then the search starts again.
      for (const auto& p : spec_.paths) {
        if (try_path(p)) {
          any = true;
          break;
        }
      }
      if (!any) return;
      if (++fired > kMaxRewrites) {
        throw UserError(error_at(spec_, spec_.paths.front().loc,
                                 "the paths rewrote build '" + build_.name + "' " + std::to_string(kMaxRewrites) +
                                     " times and still match: two of them undo each other (see `wfgen explain`)"));
      }
    }
  }

 private:
  struct Pattern {
    Graph graph;
    int root = -1;
    std::vector<std::pair<std::string, int>> inputs;
  };

  bool try_path(const spec::Path& p) {
    switch (p.kind) {
      case spec::Path::Kind::Symbolic: return try_symbolic(p);
      case spec::Path::Kind::Bypass: return try_bypass(p);
      case spec::Path::Kind::Fusion: return try_fusion(p);
    }
    return false;
  }

  // --- symbolic paths ---------------------------------------------------------------

  bool match(const Graph& pg, int pv, int gv, std::map<int, int>& bound) const {
    const Value& a = pg[pv];
    if (a.kind == Kind::Input) {
      auto it = bound.find(pv);
      if (it != bound.end()) return it->second == gv;
      bound[pv] = gv;
      return true;
    }
    const Value& b = g_[gv];
    if (a.kind == Kind::View) {
      if (b.kind != Kind::View || b.view != a.view || b.perm != a.perm) return false;
      return match(pg, a.base, b.base, bound);
    }
    if (a.kind != Kind::Call || b.kind != Kind::Call || b.node != a.node || b.args != a.args || b.init_from >= 0 ||
        b.write_to >= 0 || b.operands.size() != a.operands.size())
      return false;
    for (std::size_t k = 0; k < a.operands.size(); ++k) {
      if (a.operands[k] == pv) {
        if (b.operands[k] != gv) return false;
      } else if (!match(pg, a.operands[k], b.operands[k], bound)) {
        return false;
      }
    }
    return true;
  }

  bool try_symbolic(const spec::Path& p) {
    const Pattern& pat = patterns_.at(&p);
    for (const auto& v : g_.values) {
      if (v.kind != Kind::Call || v.backward) continue;
      if (p.device && v.impl->device != *p.device) continue;
      std::map<int, int> bound;
      if (!match(pat.graph, pat.root, v.id, bound)) continue;
      std::vector<std::pair<std::string, int>> tensors;
      for (const auto& [name, in] : pat.inputs) tensors.emplace_back(name, bound.at(in));
      replace(p, v.id, [&](trace::detail::Builder& b) {
        std::optional<int> r = b.eval(p.replace, tensors, {});
        if (!r) throw UserError(error_at(spec_, p.replace.loc, "the replacement of path '" + p.name + "' gives 0, not a tensor"));
        return *r;
      });
      return true;
    }
    return false;
  }

  // --- bypasses ------------------------------------------------------------------------

  bool try_bypass(const spec::Path& p) {
    for (const auto& v : g_.values) {
      if (v.kind != Kind::Call || v.backward || v.node->name != p.node || v.init_from >= 0 || v.write_to >= 0) continue;
      if (p.device && v.impl->device != *p.device) continue;
      std::vector<int> tensors;
      for (int o : v.operands)
        if (o != v.id) tensors.push_back(o);
      const std::vector<spec::ArgValue> args = v.args;
      replace(p, v.id, [&](trace::detail::Builder& b) { return b.node(p.with, tensors, args); });
      return true;
    }
    return false;
  }

  // --- fusion paths ----------------------------------------------------------------------

  bool query_matches(const spec::PathQuery& q, const Value& v) const {
    if (v.kind != Kind::Call || v.backward || v.init_from >= 0 || v.write_to >= 0) return false;
    if (!is_a(spec_, v.node, q.node)) return false;
    if (q.device && v.impl->device != *q.device) return false;
    if (!q.dtypes.empty()) {
      std::vector<rt::DType> in;
      for (int o : v.operands)
        if (o != v.id) in.push_back(g_[o].dtype);
      if (in != q.dtypes) return false;
    }
    if (q.when) {
      expr::Env env{{"rank", expr::Binding::scalar(expr::Type::Int)}};
      std::map<std::string, double> values{{"rank", static_cast<double>(v.shape.size())}};
      lower::bind_scalar_args(*v.node, {v.args.begin(), v.args.end()}, env, values);
      try {
        expr::Expr e = expr::compile(q.when->value, rt::DType::f64, env);
        if (e.type != expr::Type::Bool) throw expr::TypeError("'when' must be a condition (bool)", 0, q.when->value.size());
        if (expr::evaluate(e, rt::DType::f64, values) == 0.0) return false;
      } catch (const expr::Error& e) {
        // A subtype's call may lack an argument the query's node has.
        throw UserError(error_at(spec_, q.when->at(e.offset()),
                                 std::string("in 'when' of a path's query: ") + e.what() + " (for a call of '" + v.node->name + "')"));
      }
    }
    return true;
  }

  // The calls a value's result is read by (directly), and whether anything else reads it.
  std::vector<int> readers(int id, bool& elsewhere) const {
    std::vector<int> out;
    elsewhere = std::find(g_.outputs.begin(), g_.outputs.end(), id) != g_.outputs.end();
    for (const auto& v : g_.values) {
      if (v.kind == Kind::View && v.base == id) elsewhere = true;
      if (v.kind != Kind::Call || v.id == id) continue;
      if (std::find(v.operands.begin(), v.operands.end(), id) != v.operands.end() && std::find(out.begin(), out.end(), v.id) == out.end())
        out.push_back(v.id);
      if (v.init_from == id || v.write_to == id) elsewhere = true;
    }
    return out;
  }

  bool try_fusion(const spec::Path& p) {
    for (const auto& first : g_.values) {
      if (!query_matches(p.fuse[0], first)) continue;
      if (p.device && first.impl->device != *p.device) continue;
      // Each next query matches the one reader of the previous call's result.
      std::vector<int> chain{first.id};
      for (std::size_t k = 1; k < p.fuse.size(); ++k) {
        bool elsewhere = false;
        std::vector<int> r = readers(chain.back(), elsewhere);
        if (elsewhere || r.size() != 1 || !query_matches(p.fuse[k], g_[r[0]])) break;
        if (p.device && g_[r[0]].impl->device != *p.device) break;
        chain.push_back(r[0]);
      }
      if (chain.size() != p.fuse.size()) continue;  // only a whole match replaces
      // The chain's other operands, in order of first use; arguments by name from the first call that has them.
      std::vector<int> tensors;
      for (int c : chain)
        for (int o : g_[c].operands)
          if (o != c && std::find(chain.begin(), chain.end(), o) == chain.end() &&
              std::find(tensors.begin(), tensors.end(), o) == tensors.end())
            tensors.push_back(o);
      const spec::Node* into = spec_.find_node(p.into);
      std::vector<spec::ArgValue> args;
      for (const auto& a : into->args) {
        std::optional<spec::ArgValue> v;
        for (int c : chain)
          for (std::size_t k = 0; k < g_[c].node->args.size() && !v; ++k)
            if (g_[c].node->args[k].name == a.name && k < g_[c].args.size()) v = g_[c].args[k];
        if (!v) v = a.default_value;
        if (!v) {
          throw UserError(error_at(spec_, p.into_loc, "path '" + p.name + "': the argument '" + a.name + "' of '" + p.into +
                                                          "' has no default and no call of the chain has it"));
        }
        args.push_back(*v);
      }
      replace(p, chain.back(), [&](trace::detail::Builder& b) { return b.node(p.into, tensors, args); });
      return true;
    }
    return false;
  }

  // --- replacing a value ------------------------------------------------------------------

  // Builds the replacement of `old` with `make`, places its new values just
  // before `old`, and makes `old`'s readers read it (dead code is removed later).
  void replace(const spec::Path& p, int old, const std::function<int(trace::detail::Builder&)>& make) {
    const Value before = g_[old];
    const std::size_t first_new = g_.values.size();
    trace::detail::Builder b(spec_, build_, std::move(g_));
    b.attribute_forward(before.loc, before.source, before.scope);
    int r = -1;
    try {
      r = make(b);
    } catch (const UserError& e) {
      g_ = b.take();
      std::vector<Diagnostic> d = e.diagnostics();
      Diagnostic note = error_at(spec_, p.loc, "while applying path '" + p.name + "' at " + before.loc.str());
      note.severity = Diagnostic::Severity::Note;
      d.push_back(std::move(note));
      throw UserError(std::move(d));
    }
    g_ = b.take();
    const Value& got = g_[r];
    if (got.shape != before.shape || got.dtype != before.dtype) {
      throw UserError(error_at(spec_, p.kind == spec::Path::Kind::Symbolic ? p.replace.loc : p.loc,
                               "path '" + p.name + "' replaces a value of " + rt::dtype_name(before.dtype) + " " +
                                   shape::shape_str(before.shape) + " (" + before.loc.str() + ") by one of " +
                                   rt::dtype_name(got.dtype) + " " + shape::shape_str(got.shape) +
                                   ": a replacement must give the same shape and dtype"));
    }
    if (log_) {
      *log_ += "path '" + p.name + "' (" + p.loc.str() + ") at " + before.loc.str() + ": " + before.node->name + " -> " +
               (r < static_cast<int>(first_new) ? std::string("a value it matched") : g_[r].kind == Kind::Call ? g_[r].node->name : std::string("a view")) +
               "\n    " + before.source + "\n";
    }
    std::vector<int> order;
    for (int id = 0; id < old; ++id) order.push_back(id);
    for (std::size_t id = first_new; id < g_.values.size(); ++id) order.push_back(static_cast<int>(id));
    for (int id = old; id < static_cast<int>(first_new); ++id) order.push_back(id);
    std::vector<int> position(g_.values.size());
    for (std::size_t k = 0; k < order.size(); ++k) position[static_cast<std::size_t>(order[k])] = static_cast<int>(k);
    graph::renumber(g_, order);
    graph::replace_uses(g_, position[static_cast<std::size_t>(old)], position[static_cast<std::size_t>(r)]);
    eliminate_dead_code(g_);  // what the path replaced must not match again
  }

  const spec::Spec& spec_;
  const spec::Build& build_;
  Graph& g_;
  std::string* log_;
  std::map<const spec::Path*, Pattern> patterns_;
};

}  // namespace

void apply_paths(const spec::Spec& spec, const spec::Build& build, graph::Graph& g, std::string* log) {
  if (!spec.paths.empty()) Rewriter(spec, build, g, log).run();
}

void validate_paths(const spec::Spec& spec) {
  std::vector<Diagnostic> errors;
  std::set<std::string> names;
  spec::Build build;
  build.name = "paths";
  for (const auto& p : spec.paths) {
    if (!names.insert(p.name).second) errors.push_back(error_at(spec, p.loc, "a path named '" + p.name + "' is defined twice"));
    auto known = [&](const std::string& n, const SourceLoc& loc, const char* what) {
      if (spec.find_node(n)) return true;
      errors.push_back(error_at(spec, loc, std::string("path '") + p.name + "': " + what + " '" + n + "' is not a node"));
      return false;
    };
    switch (p.kind) {
      case spec::Path::Kind::Symbolic: {
        // Traced with square inputs: the pattern and the replacement must give the same shape.
        try {
          int root = -1;
          std::vector<std::pair<std::string, int>> inputs;
          Graph pg = trace_pattern(spec, build, p, root, inputs);
          trace::detail::Builder b(spec, build, std::move(pg));
          b.attribute_forward(p.replace.loc, p.replace.value, "");
          std::vector<std::string> allowed;
          for (const auto& [name, id] : inputs) allowed.push_back(name);
          std::vector<std::string> used;
          variables(*body::parse_expression(p.replace.value), used);
          for (const auto& u : used) {
            if (std::find(allowed.begin(), allowed.end(), u) == allowed.end() && !spec.find_node(u) && !spec.find_model(u)) {
              throw UserError(error_at(spec, p.replace.loc, "the replacement of path '" + p.name + "' uses '" + u +
                                                                "', which is not a variable of its pattern"));
            }
          }
          std::optional<int> r = b.eval(p.replace, inputs, {});
          const Graph& g = b.graph();
          if (!r) throw UserError(error_at(spec, p.replace.loc, "the replacement of path '" + p.name + "' gives 0, not a tensor"));
          if (g[*r].shape != g[root].shape) {
            throw UserError(error_at(spec, p.replace.loc, "the replacement of path '" + p.name + "' gives shape " +
                                                              shape::shape_str(g[*r].shape) + " where its pattern gives " +
                                                              shape::shape_str(g[root].shape) + " (both traced with inputs of shape (n n))"));
          }
        } catch (const body::ParseError& e) {
          errors.push_back(error_at(spec, p.replace.at(e.offset()), "in the replacement of path '" + p.name + "': " + e.what()));
        } catch (const UserError& e) {
          for (const auto& d : e.diagnostics()) errors.push_back(d);
        }
        break;
      }
      case spec::Path::Kind::Bypass: {
        if (!known(p.node, p.loc, "the bypassed node") | !known(p.with, p.with_loc, "the node it bypasses to")) break;
        const spec::Node& a = *spec.find_node(p.node);
        const spec::Node& b = *spec.find_node(p.with);
        bool same = a.args.size() == b.args.size() && input_count(a) == input_count(b) &&
                    a.where.outputs.size() == b.where.outputs.size();
        for (std::size_t k = 0; same && k < a.args.size(); ++k) same = a.args[k].name == b.args[k].name && a.args[k].type == b.args[k].type;
        if (!same) {
          errors.push_back(error_at(spec, p.with_loc, "path '" + p.name + "': '" + p.with + "' (" + b.where.str() +
                                                          ") does not take the same tensors and arguments as '" + p.node + "' (" +
                                                          a.where.str() + "); a bypass keeps the call as it is"));
        }
        break;
      }
      case spec::Path::Kind::Fusion: {
        bool ok = known(p.into, p.into_loc, "the fused node");
        std::size_t inputs = 0;
        for (std::size_t k = 0; k < p.fuse.size(); ++k) {
          const auto& q = p.fuse[k];
          if (!known(q.node, q.loc, "the queried node")) {
            ok = false;
            continue;
          }
          const spec::Node& n = *spec.find_node(q.node);
          if (q.when) {
            // Bound as for a call: a value of each scalar argument's type.
            std::vector<std::optional<spec::ArgValue>> typed;
            for (const auto& a : n.args) {
              if (a.type == spec::ArgType::Int) typed.emplace_back(std::int64_t{0});
              else if (a.type == spec::ArgType::Float) typed.emplace_back(0.0);
              else if (a.type == spec::ArgType::Bool) typed.emplace_back(false);
              else typed.emplace_back(std::nullopt);
            }
            expr::Env env{{"rank", expr::Binding::scalar(expr::Type::Int)}};
            std::map<std::string, double> unused;
            lower::bind_scalar_args(n, typed, env, unused);
            try {
              if (expr::compile(q.when->value, rt::DType::f64, env).type != expr::Type::Bool)
                throw expr::TypeError("'when' must be a condition (bool)", 0, q.when->value.size());
            } catch (const expr::Error& e) {
              Diagnostic d = error_at(spec, q.when->at(e.offset()), "in 'when' of path '" + p.name + "': " + e.what() +
                                                                      " (it may use 'rank' and the arguments of '" + q.node + "')");
              d.length = static_cast<int>(e.length());
              errors.push_back(std::move(d));
            }
          }
          const std::size_t in = input_count(n);
          if (!q.dtypes.empty() && q.dtypes.size() != in) {
            errors.push_back(error_at(spec, q.loc, "path '" + p.name + "': the query of '" + q.node + "' lists " +
                                                       std::to_string(q.dtypes.size()) + " dtypes, but the node has " +
                                                       std::to_string(in) + " inputs"));
          }
          inputs += k == 0 ? in : in - 1;
        }
        if (ok) {
          const spec::Node& into = *spec.find_node(p.into);
          const std::size_t want = input_count(into);
          if (want != inputs) {
            errors.push_back(error_at(spec, p.into_loc, "path '" + p.name + "': the chain reads " + std::to_string(inputs) +
                                                            " tensors besides its own results, but '" + p.into + "' (" +
                                                            into.where.str() + ") takes " + std::to_string(want)));
          }
        }
        break;
      }
    }
  }
  if (!errors.empty()) throw UserError(std::move(errors));
}

}  // namespace wfgen::passes

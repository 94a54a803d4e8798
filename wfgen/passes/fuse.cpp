// Automatic fusion: element-wise chains and row kernels (see passes.hpp).
//
// Groups are grown backwards from their last call (the root): a call joins
// the group of its readers when every reader of its result is already in
// the group, so no value the group computes is needed anywhere else and the
// whole group can run where its root ran. The group's body is then composed
// from the element-wise expressions of its calls (each call's spec body with
// its operands replaced by the expressions that make them), type-checked
// again, and becomes one kernel of the FusionRegistry.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "wfgen/passes/passes.hpp"
#include "wfgen/support/names.hpp"

namespace wfgen::passes {

namespace {

using expr::Expr;
using expr::Op;
using graph::Dim;
using graph::Graph;
using graph::Kind;
using graph::Shape;
using graph::Value;
using graph::ViewKind;

// A composed expression larger than this is not fused: values read more
// than once are recomputed where they are read, which could grow the body
// exponentially.
constexpr std::size_t kMaxBodyNodes = 400;

// At most this many inputs per fused kernel (the VM's instructions have at
// most 32 operands).
constexpr std::size_t kMaxInputs = 24;

Shape row_shape(Shape s) {
  s.back() = Dim(1);
  return s;
}

bool known_one(const Dim& d) { return d.is_known() && d.value() == 1; }

enum class Role { None, Elementwise, Reduce };

Role role_of(const Value& v) {
  if (v.kind != Kind::Call || !v.impl || v.node->fused || v.impl->device != "cpu" || !rt::dtype_is_float(v.dtype)) return Role::None;
  if (v.write_to >= 0 || v.init_from >= 0 || v.shape.empty()) return Role::None;
  // (A body that reads its own output keeps that name unbound: check() refuses the group.)
  if (v.impl->kind == spec::BodyKind::Elementwise) return Role::Elementwise;
  if (v.impl->kind == spec::BodyKind::Reduce) {
    switch (v.impl->reduce_op) {
      case spec::ReduceOp::Sum:
      case spec::ReduceOp::Mean:
      case spec::ReduceOp::Max:
      case spec::ReduceOp::Min: break;
      default: return Role::None;  // argmax/argmin give indices
    }
    return Role::Reduce;
  }
  return Role::None;
}

struct Group {
  int root = -1;
  bool rows = false;  // a row kernel (has a reduction or a row value), else one flat loop nest
  Shape space;        // rows: the row-vector shape; flat: the shape of every member
  std::set<int> members;
  std::set<int> views;  // broadcasts of row values along the row, read only inside
};

class Fuser {
 public:
  Fuser(Graph& g, FusionRegistry& registry, int build_index, std::string* log, bool fast_math)
      : g_(g), registry_(registry), build_index_(build_index), log_(log), fast_math_(fast_math) {}

  int run() {
    const std::size_t n = g_.values.size();
    readers_.assign(n, {});
    views_.assign(n, {});
    pinned_.assign(n, false);
    writes_.assign(n, {});
    role_.assign(n, Role::None);
    for (const auto& v : g_.values) {
      role_[id(v.id)] = role_of(v);
      if (v.kind == Kind::View) views_[id(v.base)].push_back(v.id);
      if (v.kind != Kind::Call) continue;
      for (int o : v.operands)
        if (o != v.id && std::find(readers_[id(o)].begin(), readers_[id(o)].end(), v.id) == readers_[id(o)].end())
          readers_[id(o)].push_back(v.id);
      if (v.init_from >= 0) pinned_[id(v.init_from)] = true;
      if (v.write_to >= 0) {
        pinned_[id(v.write_to)] = true;
        writes_[id(g_.root(v.write_to))].push_back(v.id);
      }
    }
    for (int o : g_.outputs) pinned_[id(o)] = true;
    group_of_.assign(n, -1);
    int removed = 0;
    for (int i = static_cast<int>(n) - 1; i >= 0; --i) {
      if (group_of_[id(i)] >= 0 || role_[id(i)] == Role::None) continue;
      Group grp = grow(i);
      // One call alone is fused only into a producer's epilogue (fuse()).
      if (grp.members.size() < 2 && grp.rows) continue;
      if (fuse(grp)) removed += static_cast<int>(grp.members.size()) - 1;
    }
    return removed + producers_;
  }

 private:
  static std::size_t id(int v) { return static_cast<std::size_t>(v); }

  Group grow(int root) {
    Group grp;
    grp.root = root;
    const Value& r = g_[root];
    if (role_[id(root)] == Role::Reduce) {
      grp.rows = true;
      grp.space = g_[r.operands[0]].shape;
    } else {
      grp.space = r.shape;
    }
    if (grp.rows && !reducible(r)) return grp;
    const int gid = static_cast<int>(groups_++);
    grp.members.insert(root);
    group_of_[id(root)] = gid;
    for (bool changed = true; changed;) {
      changed = false;
      for (int m : std::vector<int>(grp.members.begin(), grp.members.end())) {
        for (int o : g_[m].operands) {
          if (o == m) continue;
          int p = o;
          if (g_[o].kind == Kind::View && g_[o].view == ViewKind::Broadcast) p = g_[o].base;
          if (group_of_[id(p)] < 0 && absorb(grp, gid, p)) changed = true;
        }
      }
    }
    return grp;
  }

  // A reduction over the last axis whose result keeps that axis as size 1.
  bool reducible(const Value& v) const {
    const Shape& in = g_[v.operands[0]].shape;
    return v.operands.size() == 2 && in.size() == v.shape.size() && !known_one(in.back()) && v.shape == row_shape(in);
  }

  bool absorb(Group& grp, int gid, int p) {
    const Value& v = g_[p];
    if (role_[id(p)] == Role::None || pinned_[id(p)] || v.backward != g_[grp.root].backward) return false;
    for (int r : readers_[id(p)])
      if (group_of_[id(r)] != gid) return false;
    // The shape the group has with p in it.
    bool rows = grp.rows;
    Shape space = grp.space;
    const bool via_view = !views_[id(p)].empty();
    if (role_[id(p)] == Role::Reduce) {
      if (!reducible(v)) return false;
      const Shape& in = g_[v.operands[0]].shape;
      if (rows) {
        if (in != space) return false;
      } else if (via_view ? in != space : row_shape(in) != space) {
        return false;
      }
      rows = true;
      space = in;
    } else if (v.shape != space) {
      // A row value: read by other row values, or along the row through broadcasts.
      if (known_one(space.back()) || v.shape != row_shape(space) || (!rows && !via_view)) return false;
      rows = true;
    }
    if (rows && known_one(space.back())) return false;
    for (int w : views_[id(p)]) {
      const Value& view = g_[w];
      if (view.view != ViewKind::Broadcast || pinned_[id(w)] || !views_[id(w)].empty() || view.shape != space ||
          v.shape != row_shape(space))
        return false;
      for (int r : readers_[id(w)])
        if (group_of_[id(r)] != gid) return false;
    }
    if (inputs_with(grp, p) > kMaxInputs) return false;
    // p now runs where the root runs: nothing may write into what it reads in between.
    for (int o : v.operands) {
      if (o == p) continue;
      for (int w : writes_[id(g_.root(o))])
        if (w > p && w < grp.root) return false;
    }
    grp.rows = rows;
    grp.space = space;
    grp.members.insert(p);
    for (int w : views_[id(p)]) grp.views.insert(w);
    group_of_[id(p)] = gid;
    return true;
  }

  // The group's distinct inputs if p joined it.
  std::size_t inputs_with(const Group& grp, int p) const {
    std::set<int> in;
    auto inside = [&](int o) {
      if (o == p || grp.members.count(o) || grp.views.count(o)) return true;
      const Value& v = g_[o];
      return v.kind == Kind::View && (v.base == p || grp.members.count(v.base)) && v.view == ViewKind::Broadcast &&
             role_[id(v.base)] != Role::None;
    };
    for (int m : grp.members)
      for (int o : g_[m].operands)
        if (o != m && !inside(o)) in.insert(o);
    for (int o : g_[p].operands)
      if (o != p && !inside(o)) in.insert(o);
    return in.size();
  }

  // --- epilogues of GEMMs and builtins ---------------------------------------------

  // The call whose output a flat group reads as its input `input`, when that
  // call's kernel can run the group as its epilogue (lower::takes_epilogue,
  // an impl's `fuse_epilogue`: a GEMM, depthwise_conv2d): its output (of
  // the group's shape) read by the group alone, directly or through
  // reshapes, which keep its elements where they are (a fresh call's output
  // is contiguous); every other input of the group constant over the
  // output's last axes the kernel names (lower::epilogue_axes: a bias
  // broadcast per channel for a depthwise convolution; a GEMM's and a
  // Winograd convolution's read them anywhere); nothing writing into what the call reads before the group's
  // root, where it will run.
  struct Producer {
    int call = -1;
    std::size_t input = 0;
  };

  std::optional<Producer> epilogue_producer(const Group& grp, const std::vector<int>& inputs) const {
    if (grp.rows) return std::nullopt;
    const Value& root = g_[grp.root];
    const int gid = group_of_[id(grp.root)];
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      // Down the reshapes to the call: each read by the next one alone (the first by the group).
      int call = inputs[k], next = -1;
      bool ok = true;
      for (; ok && g_[call].kind == Kind::View && g_[call].view == ViewKind::Reshape; next = call, call = g_[call].base)
        ok = !pinned_[id(call)] && read_only_by(call, next, gid);
      const Value& p = g_[call];
      if (!ok || p.kind != Kind::Call || !p.impl || !lower::takes_epilogue(*p.impl) || p.node->fused ||
          (p.impl->device != "cpu" && p.impl->device != "blas") || p.dtype != root.dtype || p.shape != grp.space || !p.contiguous ||
          pinned_[id(call)] || p.write_to >= 0 || p.init_from >= 0 || p.accumulate || p.backward != root.backward ||
          !read_only_by(call, next, gid))
        continue;
      // A GEMM's (a Winograd convolution's) epilogue reads its other operands anywhere (epilogue_axes 0).
      const int axes = lower::epilogue_axes(*p.impl);
      for (std::size_t j = 0; j < inputs.size(); ++j)
        if (j != k && axes > 0 && !constant_over(inputs[j], axes)) ok = false;
      for (int o : p.operands) {
        if (o == call) continue;
        for (int w : writes_[id(g_.root(o))])
          if (w > call && w < grp.root) ok = false;
      }
      if (ok) return Producer{call, k};
    }
    return std::nullopt;
  }

  // Whether `v` is read by the view `next` alone, or (next = -1) by calls of group `gid` alone.
  bool read_only_by(int v, int next, int gid) const {
    if (next >= 0) return readers_[id(v)].empty() && views_[id(v)] == std::vector<int>{next};
    if (!views_[id(v)].empty() || readers_[id(v)].empty()) return false;
    for (int r : readers_[id(v)])
      if (group_of_[id(r)] != gid) return false;
    return true;
  }

  // Whether input `o` of a flat group has one value along each of the
  // space's last `axes` axes: a broadcast of a tensor whose dims there are 1
  // (or that has no such axes).
  bool constant_over(int o, int axes) const {
    const Value& v = g_[o];
    if (v.kind != Kind::View || v.view != ViewKind::Broadcast) return false;
    const Shape& base = g_[v.base].shape;
    const std::size_t rank = v.shape.size();
    for (std::size_t a = rank - static_cast<std::size_t>(axes); a < rank; ++a) {
      if (a + base.size() < rank) continue;  // a new leading axis
      if (!known_one(base[a + base.size() - rank])) return false;
    }
    return true;
  }

  // --- composing the body ---------------------------------------------------------

  struct Composer {
    const Graph& g;
    const Group& grp;
    std::vector<int> inputs;
    std::vector<bool> row_input;
    std::map<int, int> row_of;
    std::vector<lower::RowValue> rows;
    std::size_t nodes = 0;

    static Expr name(const std::string& n) {
      Expr e;
      e.op = Op::Name;
      e.text = n;
      return e;
    }

    static Expr negated(Expr e) {
      Expr n;
      n.op = Op::Neg;
      n.args.push_back(std::move(e));
      return n;
    }

    static Expr literal(const spec::ArgValue& a, rt::DType dtype) {
      Expr e;
      if (const auto* i = std::get_if<std::int64_t>(&a)) {
        e.op = Op::IntLit;
        // INT64_MIN has no positive spelling; the checker refuses what does not fit.
        std::uint64_t mag = *i < 0 ? 0 - static_cast<std::uint64_t>(*i) : static_cast<std::uint64_t>(*i);
        if (mag > static_cast<std::uint64_t>(INT64_MAX)) throw expr::TypeError("argument out of range", 0, 1);
        e.ivalue = static_cast<std::int64_t>(mag);
        e.text = std::to_string(mag);
        return *i < 0 ? negated(std::move(e)) : e;
      }
      if (const auto* b = std::get_if<bool>(&a)) {
        e.op = Op::BoolLit;
        e.ivalue = *b ? 1 : 0;
        e.text = *b ? "true" : "false";
        return e;
      }
      const double* d = std::get_if<double>(&a);
      if (!d || !std::isfinite(*d)) throw expr::TypeError("argument is not a finite number", 0, 1);
      char buf[40];
      // The literal rounds to the same float the unfused kernel's scalar argument has.
      if (dtype == rt::DType::f32) std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(static_cast<float>(std::fabs(*d))));
      else std::snprintf(buf, sizeof buf, "%.17g", std::fabs(*d));
      e.op = Op::FloatLit;
      e.text = buf;
      if (e.text.find_first_of(".eE") == std::string::npos) e.text += ".0";
      e.fvalue = std::fabs(*d);
      return std::signbit(*d) ? negated(std::move(e)) : e;
    }

    static std::size_t size(const Expr& e) {
      std::size_t n = 1;
      for (const auto& a : e.args) n += size(a);
      return n;
    }

    Expr input(int v) {
      auto it = std::find(inputs.begin(), inputs.end(), v);
      if (it != inputs.end()) return name("in" + std::to_string(it - inputs.begin()));
      inputs.push_back(v);
      row_input.push_back(grp.rows && g[v].shape != grp.space);
      return name("in" + std::to_string(inputs.size() - 1));
    }

    // The expression a member reads for operand `o`.
    Expr read(int o) {
      if (grp.members.count(o)) return value(o);
      if (grp.views.count(o)) return value(g[o].base);
      return input(o);
    }

    // The names of `v`'s spec body: its tensors (but the output) and its arguments.
    std::map<std::string, Expr> bindings(const Value& v) {
      std::map<std::string, Expr> names;
      const std::vector<std::string> tensors = lower::tensor_names(*v.node);
      for (std::size_t k = 0; k < v.operands.size() && k < tensors.size(); ++k)
        if (v.operands[k] != v.id) names[tensors[k]] = read(v.operands[k]);
      for (std::size_t k = 0; k < v.args.size() && k < v.node->args.size(); ++k) {
        spec::ArgType t = v.node->args[k].type;
        if (t != spec::ArgType::Ints && t != spec::ArgType::Floats) names[v.node->args[k].name] = literal(v.args[k], v.dtype);
      }
      return names;
    }

    Expr value(int m) {
      auto it = row_of.find(m);
      if (it != row_of.end()) return name("row" + std::to_string(it->second));
      const Value& v = g[m];
      Expr e = expr::substitute(expr::parse(v.impl->elementwise.value), bindings(v));
      nodes = std::max(nodes, size(e));
      if (nodes > kMaxBodyNodes) throw expr::TypeError("too large to fuse", 0, 1);
      return e;
    }

    // Row values (reductions, and element-wise calls on one element per
    // row) in definition order, then the output.
    void compose(lower::FusedBody& body) {
      for (int m : grp.members) {
        const Value& v = g[m];
        const bool reduce = v.impl->kind == spec::BodyKind::Reduce;
        if (!grp.rows || (!reduce && v.shape == grp.space)) continue;
        lower::RowValue r;
        r.reduce = reduce;
        if (reduce) {
          r.op = v.impl->reduce_op;
          std::map<std::string, Expr> names = bindings(v);
          const std::string x = lower::tensor_names(*v.node).front();
          r.element = v.impl->prologue ? expr::substitute(expr::parse(v.impl->prologue->value), names) : names.at(x);
          names.erase(x);
          if (v.impl->epilogue) r.epilogue = expr::substitute(expr::parse(v.impl->epilogue->value), names);
        } else {
          r.element = value(m);
        }
        row_of[m] = static_cast<int>(rows.size());
        rows.push_back(std::move(r));
      }
      body.out = value(grp.root);
      body.out_per_row = grp.rows && g[grp.root].shape != grp.space;
    }
  };

  bool fuse(const Group& grp) {
    Value& root = g_[grp.root];
    const rt::DType dtype = root.dtype;
    Composer c{g_, grp, {}, {}, {}, {}, 0};
    auto body = std::make_shared<lower::FusedBody>();
    std::string key;
    Expr composed;  // body->out before type-checking (an epilogue substitutes into it)
    try {
      c.compose(*body);
      expr::Env env;
      for (std::size_t k = 0; k < c.inputs.size(); ++k) env["in" + std::to_string(k)] = expr::Binding::element(dtype);
      for (std::size_t k = 0; k < c.rows.size(); ++k) env["row" + std::to_string(k)] = expr::Binding::element(dtype);
      key = std::string(rt::dtype_name(dtype)) + " r" + std::to_string(grp.space.size()) + (grp.rows ? " rows" : " flat");
      for (std::size_t k = 0; k < c.inputs.size(); ++k) key += c.row_input[k] ? " in:row" : " in:elem";
      for (auto& r : c.rows) {
        key += std::string("; ") + (r.reduce ? spec::reduce_op_name(r.op) : "row") + "(" + r.element.str() + ")";
        r.element = expr::check(r.element, dtype, env);
        if (r.epilogue) {
          key += " then " + r.epilogue->str();
          expr::Env e2 = env;
          e2["acc"] = expr::Binding::element(dtype);
          e2["n"] = expr::Binding::scalar(expr::Type::Int);
          r.epilogue = expr::check(*r.epilogue, dtype, e2);
        }
      }
      key += std::string("; out") + (body->out_per_row ? "(row)" : "") + " = " + body->out.str();
      composed = body->out;
      body->out = expr::check(body->out, dtype, env);
      if (body->out.type != expr::Type::Float) return false;
    } catch (const expr::Error&) {
      return false;  // not expressible as one body (too large, or an argument no literal can spell)
    }
    const std::optional<Producer> producer = epilogue_producer(grp, c.inputs);
    if (!producer && grp.members.size() < 2) return false;
    body->rows = std::move(c.rows);
    body->row_input = std::move(c.row_input);
    std::vector<std::string> parts;
    std::string sources, doc = "fused from the calls of ";
    std::string scope = g_[*grp.members.begin()].scope;
    for (int m : grp.members) {
      const Value& v = g_[m];
      doc += (parts.empty() ? "" : ", ") + v.node->name;
      parts.push_back(v.node->name);
      if (v.scope != scope) scope.clear();
      if (!v.source.empty() && sources.find(v.source) == std::string::npos) sources += (sources.empty() ? "" : "; ") + v.source;
    }
    // A group that is one called model ("MLP/softmax_0") is named after it.
    if (auto slash = scope.rfind('/'); slash != std::string::npos) {
      std::string model = scope.substr(slash + 1);
      model.erase(model.find_last_not_of("0123456789") + 1);
      if (!model.empty() && model.back() == '_') model.pop_back();
      if (!model.empty()) parts = {model};
      doc += " (model " + model + ")";
    }
    // `math: fast` changes only kernels that call exp (sigmoid calls it
    // too); others stay shared with the builds of accurate math.
    const bool fast = fast_math_ && (key.find("exp(") != std::string::npos || key.find("sigmoid(") != std::string::npos);
    if (fast) key += "; math: fast";
    if (producer) return into_producer(grp, *producer, c.inputs, composed, parts, doc, sources, fast);
    std::optional<Expr> flat;
    if (!grp.rows) flat = body->out;
    const lower::KernelPlan& kernel = registry_.intern(key, parts, dtype, static_cast<int>(grp.space.size()),
                                                       static_cast<int>(c.inputs.size()), flat,
                                                       grp.rows ? std::shared_ptr<const lower::FusedBody>(body) : nullptr, doc,
                                                       {build_index_, fused_++}, fast);
    root.node = kernel.node;
    root.impl = kernel.impl;
    root.operands = c.inputs;
    root.operands.push_back(root.id);
    root.result_operand = static_cast<int>(c.inputs.size());
    root.args.clear();
    root.rank = static_cast<int>(grp.space.size());
    if (log_) {
      *log_ += "fused " + std::to_string(grp.members.size()) + " calls (" + doc.substr(std::string("fused from the calls of ").size()) +
               ") into " + (grp.rows ? "one row kernel" : "one loop nest") + "\n    " + sources + "\n";
    }
    root.source = sources;
    return true;
  }

  // The flat group with body `out` (over `inputs`, in0, in1...) becomes
  // the epilogue of `pr`: one call of pr's kernel in the root's place, its
  // result named `acc` in the body and the group's other inputs passed
  // after pr's own. pr and its views are left to dead-code elimination.
  bool into_producer(const Group& grp, const Producer& pr, const std::vector<int>& inputs, const Expr& out,
                     std::vector<std::string> parts, const std::string& doc, const std::string& sources, bool fast) {
    Value& root = g_[grp.root];
    const Value& p = g_[pr.call];
    std::map<std::string, Expr> names;
    std::vector<int> extra;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (k == pr.input) {
        names["in" + std::to_string(k)] = Composer::name("acc");
        continue;
      }
      names["in" + std::to_string(k)] = Composer::name("in" + std::to_string(extra.size()));
      extra.push_back(inputs[k]);
    }
    expr::Env env{{"acc", expr::Binding::element(root.dtype)}};
    for (std::size_t k = 0; k < extra.size(); ++k) env["in" + std::to_string(k)] = expr::Binding::element(root.dtype);
    const Expr epilogue = expr::check(expr::substitute(out, names), root.dtype, env);
    const std::string body = p.impl->kind == spec::BodyKind::Gemm ? "gemm, " + p.impl->device : p.impl->builtin;
    const std::string key = "epilogue of " + p.node->name + " (" + body + ") " + rt::dtype_name(root.dtype) + " r" +
                            std::to_string(p.rank) + ", " + std::to_string(extra.size()) + " inputs: " + epilogue.str() +
                            (fast ? "; math: fast" : "");
    parts.insert(parts.begin(), p.node->name);
    const std::string what = p.node->name + " with the calls of " + doc.substr(std::string("fused from the calls of ").size()) +
                             " as its epilogue";
    const lower::KernelPlan& kernel = registry_.intern_epilogue(key, parts, *p.node, *p.impl, root.dtype, p.rank,
                                                                static_cast<int>(extra.size()), epilogue, "fused: " + what,
                                                                {build_index_, fused_++}, fast);
    std::vector<int> operands;
    for (int o : p.operands)
      if (o != p.id) operands.push_back(o);
    operands.insert(operands.end(), extra.begin(), extra.end());
    root.result_operand = static_cast<int>(operands.size());
    operands.push_back(root.id);
    root.node = kernel.node;
    root.impl = kernel.impl;
    root.operands = std::move(operands);
    root.args = p.args;
    root.rank = p.rank;
    const std::string all = p.source.empty() || sources.find(p.source) != std::string::npos ? sources : p.source + "; " + sources;
    if (log_) *log_ += "fused " + what + " (one kernel, no second pass over its output)\n    " + all + "\n";
    root.source = all;
    ++producers_;
    return true;
  }

  Graph& g_;
  FusionRegistry& registry_;
  int build_index_;
  int fused_ = 0;  // groups fused so far in this build
  int producers_ = 0;  // calls that took their readers as an epilogue (removed too)
  std::string* log_;
  bool fast_math_;
  std::vector<std::vector<int>> readers_, views_, writes_;
  std::vector<bool> pinned_;
  std::vector<Role> role_;
  std::vector<int> group_of_;
  std::size_t groups_ = 0;
};

// The shape of the broadcast's base `base` (of a value broadcast to `from`)
// once `from` is reshaped to `to`, or nullopt when that view has none: each
// axis of `to` must cover whole axes of `from` (the reshape splits or merges
// contiguous axes there), along which the base is either 1 (a bias per
// channel over H and W: 1 over H*W) or whole. Leading axes both shapes
// share (a batch known at run time only) stay as they are; past them,
// every dim known.
std::optional<Shape> merged_broadcast(const Shape& base, const Shape& from, const Shape& to) {
  if (base.size() > from.size()) return std::nullopt;
  const std::size_t lead = from.size() - base.size();
  std::size_t same = 0;  // leading axes of `from` that are `to`'s
  while (same < from.size() && same < to.size() && from[same] == to[same]) ++same;
  if (same > 0 && same < from.size()) {
    const Shape tail_base(base.begin() + static_cast<std::ptrdiff_t>(std::max(same, lead) - lead), base.end());
    std::optional<Shape> tail = merged_broadcast(tail_base, Shape(from.begin() + static_cast<std::ptrdiff_t>(same), from.end()),
                                                 Shape(to.begin() + static_cast<std::ptrdiff_t>(same), to.end()));
    if (!tail) return std::nullopt;
    Shape out;
    for (std::size_t a = 0; a < same; ++a) out.push_back(a < lead ? Dim(1) : base[a - lead]);
    out.insert(out.end(), tail->begin(), tail->end());
    return out;
  }
  for (const Shape* s : {&base, &from, &to})
    for (const Dim& d : *s)
      if (!d.is_known()) return std::nullopt;
  // suffix[a]: the elements of one step along from's axis a - 1 (the product of from[a:]).
  std::vector<std::int64_t> suffix(from.size() + 1, 1);
  for (std::size_t a = from.size(); a-- > 0;) suffix[a] = suffix[a + 1] * from[a].value();
  auto boundary = [&](std::int64_t e) { return std::find(suffix.begin(), suffix.end(), e) != suffix.end(); };
  Shape out(to.size(), Dim(1));
  std::int64_t lo = 1;  // the elements of one step along to's axis k
  for (std::size_t k = to.size(); k-- > 0;) {
    const std::int64_t hi = lo * to[k].value();
    if (hi == lo) continue;
    if (!boundary(lo) || !boundary(hi)) return std::nullopt;
    bool ones = true, whole = true;
    for (std::size_t a = 0; a < from.size(); ++a) {
      if (from[a].value() == 1 || suffix[a + 1] < lo || suffix[a] > hi) continue;
      const std::int64_t b = a < lead ? 1 : base[a - lead].value();
      ones = ones && b == 1;
      whole = whole && b == from[a].value();
    }
    if (!ones && !whole) return std::nullopt;
    if (!ones) out[k] = to[k];
    lo = hi;
  }
  return out;
}

// A call whose kernel runs any element-wise chain over its output as its
// epilogue, whatever the chain's operands vary along (a GEMM's, a Winograd
// convolution's; a depthwise convolution's epilogue needs them constant
// over its output's last axes, which a reshape would change).
bool gemm_with_epilogue(const Value& v) {
  return v.kind == Kind::Call && v.impl && lower::takes_epilogue(*v.impl) && lower::epilogue_axes(*v.impl) == 0 && !v.node->fused &&
         v.contiguous && v.write_to < 0 && v.init_from < 0 && !v.accumulate;
}

// A new view of `base` (at the end of g.values: renumber() puts it in
// place) with `like`'s source and scope.
int new_view(Graph& g, int base, ViewKind kind, const Shape& shape, const Value& like) {
  Value v = like;
  v.kind = Kind::View;
  v.view = kind;
  v.base = base;
  v.shape = shape;
  v.dtype = g[base].dtype;
  v.contiguous = kind == ViewKind::Reshape;
  v.node = nullptr;
  v.impl = nullptr;
  v.operands.clear();
  v.args.clear();
  v.name.clear();  // a "TID" of the tensor table, as the tracer's views
  v.id = static_cast<int>(g.values.size());
  g.values.push_back(std::move(v));
  return g.values.back().id;
}

// Element-wise calls that a reshape separates, P then R = f(P.reshape(...))
// (a convolution's bias add on the GEMM's [N C h*w] result, then relu on the
// image shape [N C h w]; an imported Conv's GEMM [N C h*w], then its bias
// and Clip on [N C h w]): R runs in P's shape, so that fusion can join them
// (P element-wise) or make R the GEMM's epilogue (P a GEMM). R reads P
// directly, any other operand of R through a view in P's shape (a
// contiguous one of R's shape through a reshape, a broadcast through a
// broadcast of its base reshaped, merged_broadcast), and R's readers read R
// through the reshape R's result had. Both are contiguous, so no address
// changes. R's readers in turn join R the same way: a whole chain moves
// (a Clip's two readers of the bias add too). Only where fusion would then
// take P: P is read by that one reshape; R is no output.
void join_through_reshapes(Graph& g) {
  std::vector<std::vector<int>> readers(g.values.size());
  std::vector<bool> written(g.values.size(), false);
  for (const Value& v : g.values) {
    if (v.kind == Kind::View) readers[static_cast<std::size_t>(v.base)].push_back(v.id);
    if (v.write_to >= 0) written[static_cast<std::size_t>(g.root(v.write_to))] = true;
    if (v.kind != Kind::Call) continue;
    for (int o : v.operands)
      if (o != v.id) readers[static_cast<std::size_t>(o)].push_back(v.id);
  }
  auto only_reader = [&](int id, int reader) {
    const auto& r = readers[static_cast<std::size_t>(id)];
    return !r.empty() && std::all_of(r.begin(), r.end(), [&](int x) { return x == reader; });
  };
  auto plain = [&](const Value& v) {
    return role_of(v) == Role::Elementwise && v.contiguous && !written[static_cast<std::size_t>(v.id)];
  };
  std::set<int> behind_gemm;  // the calls moved into a GEMM's shape to become its epilogue
  auto gemm_chain = [&](int p) {
    return behind_gemm.count(p) || (gemm_with_epilogue(g[p]) && !written[static_cast<std::size_t>(p)] &&
                                    !std::count(g.outputs.begin(), g.outputs.end(), p));
  };
  auto add_view = [&](int base, ViewKind kind, const Shape& shape, const Value& like) {
    const int v = new_view(g, base, kind, shape, like);
    readers.emplace_back();
    written.push_back(false);
    readers[static_cast<std::size_t>(base)].push_back(v);  // a later R may read it
    return v;
  };
  std::map<int, std::vector<int>> before;  // R -> the views it reads (added below)
  std::map<int, int> after;                // R -> the view its readers read
  std::set<int> joined;                    // the reshapes some R no longer reads
  const std::size_t n = g.values.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (!plain(g.values[i]) || std::count(g.outputs.begin(), g.outputs.end(), static_cast<int>(i))) continue;
    const int r = static_cast<int>(i);
    int view = -1;
    for (int o : g[r].operands) {
      const Value& ov = g[o];
      if (o == r || ov.kind != Kind::View || ov.view != ViewKind::Reshape || !only_reader(ov.base, o) ||
          g[ov.base].backward != g[r].backward || g[ov.base].dtype != g[r].dtype)
        continue;
      if (gemm_chain(ov.base) || (plain(g[ov.base]) && !after.count(ov.base) && only_reader(o, r))) view = o;
    }
    if (view < 0) continue;
    const int p = g[view].base;
    // Behind a GEMM, the chain's operands may also be broadcasts that merge into
    // P's axes and reshapes of values already in P's shape (the Clip's, the residual's).
    const bool epilogue = gemm_chain(p);
    const Shape shape_p = g[p].shape, shape_r = g[r].shape;
    // R's other operands in P's shape: contiguous tensors of R's shape, or broadcasts that merge.
    std::map<int, std::optional<Shape>> merged;  // broadcast operand -> its base's shape in P's shape
    bool ok = true;
    // A reshape of a value already in P's shape (another R before this one) is read as that value.
    auto in_shape_p = [&](int o) {
      return epilogue && g[o].kind == Kind::View && g[o].view == ViewKind::Reshape && g[g[o].base].contiguous && g[g[o].base].shape == shape_p;
    };
    for (int o : g[r].operands) {
      if (o == r || o == view || in_shape_p(o) || (g[o].contiguous && g[o].shape == shape_r)) continue;
      const Value& b = g[o];
      if (epilogue && b.kind == Kind::View && b.view == ViewKind::Broadcast && g[b.base].contiguous && b.shape == shape_r)
        merged[o] = merged_broadcast(g[b.base].shape, shape_r, shape_p);
      if (!merged.count(o) || !merged[o]) ok = false;
    }
    if (!ok) continue;
    std::vector<int> inputs, operands = g[r].operands;  // (add_view() adds values: no references into g across it)
    std::map<int, int> reshaped;
    std::set<int> before_reshape;  // the values R now reads instead of their reshapes
    for (int& o : operands) {
      if (o == r) continue;
      if (o == view || in_shape_p(o)) {
        auto& read = readers[static_cast<std::size_t>(o)];
        read.erase(std::remove(read.begin(), read.end(), r), read.end());
        joined.insert(o);
        o = g[o].base;
        before_reshape.insert(o);
        continue;
      }
      if (!reshaped.count(o)) {
        if (auto m = merged.find(o); m != merged.end()) {
          const Value like = g[r];
          inputs.push_back(add_view(g[o].base, ViewKind::Reshape, *m->second, like));
          inputs.push_back(reshaped[o] = add_view(inputs.back(), ViewKind::Broadcast, shape_p, like));
        } else {
          inputs.push_back(reshaped[o] = add_view(o, ViewKind::Reshape, shape_p, g[r]));
        }
      }
      o = reshaped[o];
    }
    g[r].operands = operands;
    // (The bases of the reshapes R read keep them as their readers: another reader of those may join too.)
    for (int o : operands)
      if (o != r && !before_reshape.count(o)) readers[static_cast<std::size_t>(o)].push_back(r);
    const std::vector<int> readers_r = readers[static_cast<std::size_t>(r)];
    const int out = add_view(r, ViewKind::Reshape, shape_r, g[r]);
    g[r].shape = shape_p;
    g[r].rank = static_cast<int>(shape_p.size());
    graph::replace_uses(g, r, out);
    readers[static_cast<std::size_t>(out)] = readers_r;
    readers[static_cast<std::size_t>(r)] = {out};
    before[r] = inputs;
    after[r] = out;
    if (epilogue) behind_gemm.insert(r);
  }
  std::set<int> dropped;  // the reshapes every reader of which now reads its base
  for (int v : joined)
    if (readers[static_cast<std::size_t>(v)].empty() && !std::count(g.outputs.begin(), g.outputs.end(), v)) dropped.insert(v);
  if (after.empty()) return;
  // Definition order again: the new views of R's operands just before R, the view of R just after it.
  std::vector<int> order;
  for (std::size_t i = 0; i < n; ++i) {
    const int id = static_cast<int>(i);
    if (dropped.count(id)) continue;
    if (auto it = before.find(id); it != before.end()) order.insert(order.end(), it->second.begin(), it->second.end());
    order.push_back(id);
    if (auto it = after.find(id); it != after.end() && !dropped.count(it->second)) order.push_back(it->second);
  }
  graph::renumber(g, order);
}

}  // namespace

int fuse_kernels(graph::Graph& g, FusionRegistry& registry, int build_index, std::string* log, bool fast_math) {
  const int attention = fuse_attention(g, registry, build_index, log);  // fuse_attention.cpp
  join_through_reshapes(g);
  return attention + Fuser(g, registry, build_index, log, fast_math).run();
}

const lower::KernelPlan& FusionRegistry::intern(const std::string& key, const std::vector<std::string>& parts, rt::DType dtype,
                                                int rank, int inputs, std::optional<expr::Expr> elementwise,
                                                std::shared_ptr<const lower::FusedBody> rows, const std::string& doc,
                                                std::pair<int, int> order, bool fast_math) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(key, parts, doc, order)) return e->plan;
  Entry& e = add(key, parts, doc, order, spec::Node{});
  std::string dsl;
  for (int k = 0; k < inputs; ++k) dsl += "in" + std::to_string(k) + "[~] ";
  e.node.where_text.value = dsl + "out[~] -> out[~]";
  e.node.where = subscript::parse(e.node.where_text.value);
  e.impl.device = "cpu";
  e.impl.dtypes = {dtype};
  e.impl.ranks = {rank};
  e.impl.kind = rows ? spec::BodyKind::Fused : spec::BodyKind::Elementwise;
  // The element-wise nodes split from 65536 elements (a binary node's three
  // operands: 768 KB of floats a chunk). A fused kernel of more inputs
  // moves as much in half as many elements: 32768, so that a residual sum
  // of 65536 elements (the tiny LM's x + 4 heads + bias, 14 us on one
  // thread) is shared by two threads.
  e.impl.parallel_grain = !rows && inputs > 2 ? 32768 : 65536;
  if (elementwise) e.impl.elementwise.value = elementwise->str();
  lower::KernelPlan& plan = e.plan;
  plan.node = &e.node;
  plan.impl = &e.impl;
  plan.dtype = dtype;
  plan.rank = rank;
  for (int k = 0; k < inputs; ++k) {
    const std::string in = "in" + std::to_string(k);
    plan.tensors.push_back({in, in, rank, false, in + "[~]", {}});
  }
  plan.tensors.push_back({"out", "out", rank, true, "out[~]", {}});
  plan.body = std::move(elementwise);
  plan.fused = std::move(rows);
  plan.fast_math = fast_math;
  return plan;
}

const lower::KernelPlan& FusionRegistry::intern_epilogue(const std::string& key, const std::vector<std::string>& parts,
                                                         const spec::Node& node, const spec::Impl& impl, rt::DType dtype, int rank,
                                                         int inputs, const expr::Expr& epilogue, const std::string& doc,
                                                         std::pair<int, int> order, bool fast_math) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(key, parts, doc, order)) return e->plan;
  Entry& e = add(key, parts, doc, order, node);
  e.impl = impl;
  e.impl.dtypes = {dtype};
  e.impl.ranks = {rank};
  e.impl.demand_ranks.clear();
  e.plan = lower::plan_with_epilogue(spec_, e.node, e.impl, dtype, rank, inputs, epilogue);
  e.plan.fast_math = fast_math;
  // The kernel's own declaration (its comment in fused.cpp): the epilogue's inputs before the output.
  auto& args = e.node.where.inputs;
  auto at = std::find_if(args.begin(), args.end(), [&](const subscript::Argument& a) { return a.name == e.node.where.outputs.front().name; });
  for (int k = 0; k < inputs; ++k) {
    subscript::Argument in = e.node.where.outputs.front();
    in.name = "in" + std::to_string(k);
    at = args.insert(at, std::move(in)) + 1;
  }
  return e.plan;
}

FusionRegistry::Entry& FusionRegistry::add(const std::string& key, const std::vector<std::string>& parts, const std::string& doc,
                                           std::pair<int, int> order, spec::Node node) {
  Entry& e = entries_.emplace_back();
  e.parts = parts;
  e.order = order;
  e.node = std::move(node);
  e.node.fused = true;
  e.node.from_stdlib = false;
  e.node.doc = doc;
  by_key_[key] = &e;
  return e;
}

FusionRegistry::Entry* FusionRegistry::find(const std::string& key, const std::vector<std::string>& parts, const std::string& doc,
                                            std::pair<int, int> order) {
  auto found = by_key_.find(key);
  if (found == by_key_.end()) return nullptr;
  // The first build in spec order names the kernel, whichever thread came first.
  Entry& e = *found->second;
  if (order < e.order) {
    e.order = order;
    e.parts = parts;
    e.node.doc = doc;
  }
  return &e;
}

void FusionRegistry::finalize() {
  named_.clear();
  for (auto& e : entries_) named_.push_back(&e);
  std::sort(named_.begin(), named_.end(), [](const Entry* a, const Entry* b) { return a->order < b->order; });
  std::set<std::string> functions;
  for (Entry* e : named_) {
    // "fused_sub_exp_div", numbered when another body has the same calls.
    std::string base = "fused";
    for (std::size_t k = 0; k < e->parts.size() && k < 4; ++k) base += "_" + lower_name(e->parts[k]);
    if (e->parts.size() > 4) base += "_and_" + std::to_string(e->parts.size() - 4);
    if (e->plan.fast_math) base += "_fastmath";
    std::string name = base;
    // The device names the function as the model's call names it (a blas
    // GEMM with an epilogue: fused_matmul_..._blas_f32_r3).
    const std::string& device = e->impl.device;
    for (int k = 2; spec_.find_node(name) || functions.count(lower::kernel_name(name, device, e->plan.dtype, e->plan.rank)); ++k)
      name = base + "_" + std::to_string(k);
    e->node.name = name;
    e->impl.node = name;
    e->plan.function = lower::kernel_name(name, device, e->plan.dtype, e->plan.rank);
    functions.insert(e->plan.function);
  }
}

std::vector<lower::KernelPlan> FusionRegistry::plans() const {
  WFGEN_ASSERT(named_.size() == entries_.size(), "FusionRegistry::plans() before finalize()");
  std::vector<lower::KernelPlan> out;
  for (const Entry* e : named_) out.push_back(e->plan);
  return out;
}

}  // namespace wfgen::passes

// Reverse-mode autodiff over a traced graph: the pullback is traced from the
// nodes' `backward:` expressions into the same graph, after the forward
// values, so the passes, the memory planner and the emitter treat it like
// any other code.
#include <algorithm>
#include <map>
#include <optional>

#include "wfgen/trace/builder.hpp"
#include "wfgen/trace/trace.hpp"

namespace wfgen::trace {

namespace {

using graph::Dim;
using graph::Graph;
using graph::Kind;
using graph::Shape;
using graph::Value;
using graph::ViewKind;

[[noreturn]] void fail(const spec::Spec& spec, SourceLoc loc, std::string message, std::vector<Diagnostic> notes = {}) {
  Diagnostic d;
  d.loc = std::move(loc);
  d.message = std::move(message);
  d.source_line = spec.line_at(d.loc);
  std::vector<Diagnostic> all{d};
  for (auto& n : notes) {
    n.severity = Diagnostic::Severity::Note;
    n.source_line = spec.line_at(n.loc);
    all.push_back(std::move(n));
  }
  throw UserError(std::move(all));
}

class Differentiator {
 public:
  Differentiator(const spec::Spec& spec, const spec::Build& build, Graph g)
      : spec_(spec), build_(build), b_(spec, build, std::move(g)) {}

  Graph run() {
    Graph& g = b_.graph();
    if (build_.dtype != rt::DType::f32 && build_.dtype != rt::DType::f64) {
      fail(spec_, build_.loc, "build '" + build_.name + "' has backward: true, but gradients need a float dtype (f32 or f64), not " +
                                  rt::dtype_name(build_.dtype));
    }
    const std::size_t forward_count = g.values.size();
    mark_requires_grad();
    // Gradient buffers: trainable parameters, then the inputs asked for.
    std::vector<int> owners;
    for (int p : g.params)
      if (g[p].param->requires_grad) owners.push_back(p);
    for (const auto& name : build_.grad_inputs)
      for (int i : g.inputs)
        if (g[i].name == name) owners.push_back(i);
    for (int owner : owners) {
      Value v;
      v.kind = Kind::Grad;
      v.dtype = g[owner].dtype;
      v.shape = g[owner].shape;
      v.grad_of = owner;
      v.backward = true;
      v.loc = g[owner].loc;
      v.name = "grad:" + (g[owner].kind == Kind::Param ? g[owner].param_path : g[owner].name);
      int id = append(std::move(v));
      g.grads.push_back(id);
      buffer_[owner] = id;
    }
    // Seeds: the pullback starts from the gradient of every output.
    for (std::size_t k = 0; k < g.outputs.size(); ++k) {
      int out = g.outputs[k];
      Value v;
      v.kind = Kind::Seed;
      v.dtype = g[out].dtype;
      v.shape = g[out].shape;
      v.seed_of = static_cast<int>(k);
      v.backward = true;
      v.loc = g[out].loc;
      v.name = "d" + g.output_names[k];
      int id = append(std::move(v));
      g.seeds.push_back(id);
      if (requires_[static_cast<std::size_t>(out)]) contributions_[out].push_back(id);
    }
    g.has_backward = true;
    // Reverse definition order is a reverse topological order.
    for (std::size_t k = forward_count; k-- > 0;) {
      int id = static_cast<int>(k);
      auto it = contributions_.find(id);
      if (it == contributions_.end() || !requires_[k]) continue;
      const Value v = b_.graph()[id];  // a copy: appending values moves them
      b_.attribute(v.loc, "grad of: " + (v.source.empty() ? describe(v) : v.source));
      int grad = sum(it->second);
      switch (v.kind) {
        case Kind::Param:
        case Kind::Input: accumulate(v.id, grad); break;
        case Kind::Call: through_call(v, grad); break;
        case Kind::View: through_view(v, grad); break;
        case Kind::Grad:
        case Kind::Seed: break;
      }
    }
    return b_.take();
  }

 private:
  int append(Value v) {
    Graph& g = b_.graph();
    v.id = static_cast<int>(g.values.size());
    g.values.push_back(std::move(v));
    return g.values.back().id;
  }

  static std::string describe(const Value& v) {
    if (v.kind == Kind::Param) return v.param_path;
    if (v.kind == Kind::Input) return v.name;
    return "%" + std::to_string(v.id);
  }

  // Which values depend on a trainable parameter or a grad input.
  void mark_requires_grad() {
    const Graph& g = b_.graph();
    requires_.assign(g.values.size(), false);
    for (const auto& v : g.values) {
      bool r = false;
      switch (v.kind) {
        case Kind::Param: r = v.param->requires_grad; break;
        case Kind::Input:
          r = std::find(build_.grad_inputs.begin(), build_.grad_inputs.end(), v.name) != build_.grad_inputs.end();
          break;
        case Kind::Call:
          for (std::size_t k = 0; k < v.operands.size(); ++k)
            if (static_cast<int>(k) != v.result_operand && requires_[static_cast<std::size_t>(v.operands[k])]) r = true;
          break;
        case Kind::View: r = requires_[static_cast<std::size_t>(v.base)]; break;
        case Kind::Grad:
        case Kind::Seed: break;
      }
      // Integer and bool tensors carry no gradient: a path through them
      // (argmax's indices, a comparison's mask) is constant to autodiff.
      if (v.dtype != rt::DType::f32 && v.dtype != rt::DType::f64) r = false;
      requires_[static_cast<std::size_t>(v.id)] = r;
    }
  }

  int sum(const std::vector<int>& parts) {
    int total = parts[0];
    for (std::size_t k = 1; k < parts.size(); ++k) total = b_.node("add", {total, parts[k]});
    return total;
  }

  void contribute(int to, int grad) {
    if (!requires_[static_cast<std::size_t>(to)]) return;
    contributions_[to].push_back(grad);
  }

  // backward() adds into the buffer, so gradients accumulate until zero_grad().
  void accumulate(int owner, int grad) {
    auto it = buffer_.find(owner);
    if (it == buffer_.end()) return;
    int r = b_.node("add", {it->second, grad});
    b_.graph()[r].write_to = it->second;
  }

  void through_call(const Value& v, int dout) {
    const spec::Node& node = *v.node;
    const auto& decl = node.where;
    const auto& entries = v.impl->backward.empty() ? node.backward : v.impl->backward;
    // Names the backward expressions can use: the inputs and outputs of the
    // node's where line (bound to the forward tensors), its arguments and dout.
    // With save_for_backward, only the inputs it keeps are visible: the
    // pullback then never reads the others, and the memory planner can free
    // them during the forward pass.
    std::vector<std::pair<std::string, int>> tensors;
    std::string kept;
    for (std::size_t k = 0; k < decl.inputs.size() && k < v.operands.size(); ++k) {
      bool saved = node.save_for_backward.empty() || static_cast<int>(k) == v.result_operand ||
                   (k < node.save_for_backward.size() && node.save_for_backward[k]);
      if (!decl.inputs[k].name || !saved) continue;
      tensors.emplace_back(*decl.inputs[k].name, v.operands[k]);
      if (static_cast<int>(k) != v.result_operand) kept += (kept.empty() ? "" : ", ") + *decl.inputs[k].name;
    }
    for (const auto& o : decl.outputs)
      if (o.name && std::none_of(tensors.begin(), tensors.end(), [&](const auto& t) { return t.first == *o.name; }))
        tensors.emplace_back(*o.name, v.id);
    tensors.emplace_back("dout", dout);
    std::vector<std::pair<std::string, spec::ArgValue>> args;
    for (std::size_t k = 0; k < node.args.size() && k < v.args.size(); ++k) args.emplace_back(node.args[k].name, v.args[k]);

    for (std::size_t k = 0; k < v.operands.size() && k < decl.inputs.size(); ++k) {
      int operand = v.operands[k];
      if (static_cast<int>(k) == v.result_operand || !requires_[static_cast<std::size_t>(operand)]) continue;
      std::string input = decl.inputs[k].name.value_or("arg" + std::to_string(k));
      const spec::Text* text = nullptr;
      for (const auto& [name, t] : entries)
        if (name == input) text = &t;
      if (!text) {
        Diagnostic note;
        note.loc = node.loc;
        note.message = "node '" + node.name + "' is declared here" +
                       (node.backward.empty() ? " without a backward" : " with a backward for other inputs only") +
                       "; add `backward: {" + input + ": \"...\"}` (an expression over dout and the inputs)";
        fail(spec_, v.loc,
             "no backward for input '" + input + "' of node '" + node.name + "', but a gradient flows through it here (" +
                 v.source + ")",
             {note});
      }
      std::optional<int> grad;
      try {
        grad = b_.eval(*text, tensors, args);
      } catch (const UserError& e) {
        std::vector<Diagnostic> ds = e.diagnostics();
        Diagnostic note;
        note.severity = Diagnostic::Severity::Note;
        note.loc = v.loc;
        note.message = "while differentiating a call of '" + node.name + "' for its input '" + input + "': " + v.source +
                       (node.save_for_backward.empty() ? std::string()
                                                       : " (save_for_backward keeps " + (kept.empty() ? std::string("no input") : kept) + ")");
        note.source_line = spec_.line_at(note.loc);
        ds.push_back(note);
        throw UserError(std::move(ds));
      }
      if (!grad) continue;
      const Shape& want = b_.graph()[operand].shape;
      const Shape& got = b_.graph()[*grad].shape;
      if (want != got) {
        Diagnostic note;
        note.loc = v.loc;
        note.message = "while differentiating: " + v.source;
        fail(spec_, text->loc,
             "the backward of '" + node.name + "' for '" + input + "' gives a tensor of shape " + shape::shape_str(got) +
                 ", but '" + input + "' has shape " + shape::shape_str(want),
             {note});
      }
      contribute(operand, *grad);
    }
  }

  void through_view(const Value& v, int grad) {
    const Graph& g = b_.graph();
    const Shape base_shape = g[v.base].shape;
    switch (v.view) {
      case ViewKind::Permute: {
        std::vector<int> inverse(v.perm.size());
        for (std::size_t k = 0; k < v.perm.size(); ++k) inverse[static_cast<std::size_t>(v.perm[k])] = static_cast<int>(k);
        contribute(v.base, b_.permute(grad, inverse));
        return;
      }
      case ViewKind::Reshape:
      case ViewKind::Squeeze:
      case ViewKind::Unsqueeze: contribute(v.base, b_.reshape(grad, base_shape)); return;
      case ViewKind::Broadcast: {
        // Undo numpy broadcasting: sum over the new leading axes and over the
        // axes that were 1, then drop the leading ones.
        const std::size_t lead = v.shape.size() - base_shape.size();
        std::vector<int> axes;
        for (std::size_t k = 0; k < v.shape.size(); ++k) {
          bool was_one = k >= lead && base_shape[k - lead].is_known() && base_shape[k - lead].value() == 1;
          bool grew = k < lead || (was_one && !(v.shape[k].is_known() && v.shape[k].value() == 1));
          if (grew) axes.push_back(static_cast<int>(k));
        }
        if (std::optional<int> folded = product_over_batch(grad, lead, axes, base_shape)) {
          contribute(v.base, *folded);
          return;
        }
        int summed = axes.empty() ? grad : b_.sum_axes(grad, axes);
        contribute(v.base, b_.reshape(summed, base_shape));
        return;
      }
      case ViewKind::Slice: {
        // The gradient of the base is zero outside its slices: each slice's
        // gradient goes into its window of one tensor of zeros per base. One
        // tensor, not one per slice then a sum: the tiny LM's heads (4 slices
        // of q, k and v) filled and summed four 16 x 64 x 64 tensors per
        // base. A window that overlaps none written before is copied into;
        // one that may overlap (or has run-time bounds) is added into.
        auto& windows = slice_grads_[v.base];
        const bool first = windows.empty();
        const int zeros = first ? b_.zeros(base_shape) : b_.graph()[windows.front()].base;
        int window = b_.view(zeros, ViewKind::Slice, v.shape);
        b_.graph()[window].starts = v.starts;
        b_.graph()[window].stops = v.stops;
        b_.graph()[window].steps = v.steps;
        const bool alone = std::none_of(windows.begin(), windows.end(), [&](int w) { return !disjoint(b_.graph()[w], v); });
        int write = alone ? b_.node("copy", {grad}) : b_.node("add", {window, grad});
        b_.graph()[write].write_to = window;
        windows.push_back(window);
        if (first) contribute(v.base, zeros);
        return;
      }
    }
  }

  // Whether two slices of one base share no element, from bounds known when
  // tracing: on some axis their index sets (start, start + step, ..., below
  // stop) are apart, or interleave with one step (x[::2], x[1::2]).
  static bool disjoint(const Value& a, const Value& b) {
    for (std::size_t k = 0; k < a.starts.size() && k < b.starts.size(); ++k) {
      const Dim sa = a.starts[k], sb = b.starts[k], na = a.shape[k], nb = b.shape[k], ta = a.steps[k], tb = b.steps[k];
      if (!sa.is_known() || !sb.is_known() || !na.is_known() || !nb.is_known() || !ta.is_known() || !tb.is_known()) continue;
      if (na.value() == 0 || nb.value() == 0) return true;
      const std::int64_t last_a = sa.value() + ta.value() * (na.value() - 1), last_b = sb.value() + tb.value() * (nb.value() - 1);
      if (last_a < sb.value() || last_b < sa.value()) return true;
      if (ta.value() == tb.value() && (sa.value() - sb.value()) % ta.value() != 0) return true;
    }
    return false;
  }

  // The gradient of a matrix broadcast over a product's batch (a weight
  // applied to [~b, m, k] activations: `A.T @ dout`, then summed over ~b) is
  // one product with the batch folded into the inner dim,
  // [k, B*m] @ [B*m, n], instead of B small products and a sum over a
  // [~b, k, n] temporary. Applies when `grad` is such a product of a
  // transposed contiguous A; nullopt otherwise (the caller sums).
  std::optional<int> product_over_batch(int grad, std::size_t lead, const std::vector<int>& axes, const Shape& base_shape) {
    const Graph& g = b_.graph();
    const Value& product = g[grad];
    if (lead == 0 || base_shape.size() != 2 || product.kind != Kind::Call || !product.node || product.node->name != "matmul" ||
        product.shape.size() != lead + 2 || axes.size() != lead)
      return std::nullopt;
    for (std::size_t k = 0; k < lead; ++k)
      if (axes[k] != static_cast<int>(k)) return std::nullopt;
    const int a_t = product.operands[0], dout = product.operands[1];
    const Value& at = g[a_t];
    std::vector<int> swap_last(lead + 2);
    for (std::size_t k = 0; k < swap_last.size(); ++k) swap_last[k] = static_cast<int>(k);
    std::swap(swap_last[lead], swap_last[lead + 1]);
    if (at.kind != Kind::View || at.view != ViewKind::Permute || at.perm != swap_last || !g[at.base].contiguous ||
        g[dout].shape.size() != lead + 2)
      return std::nullopt;
    Dim rows = 1;  // B*m: the batch dims and A's rows, in memory order
    for (std::size_t k = 0; k <= lead; ++k) rows = Dim::binary('*', rows, g[dout].shape[k]);
    const Shape a_shape = g[at.base].shape;  // [~b, m, k]
    const int a_rows = b_.reshape(at.base, {rows, a_shape[lead + 1]});
    const int dout_rows = b_.reshape(dout, {rows, g[dout].shape[lead + 1]});
    return b_.node("matmul", {b_.permute(a_rows, {1, 0}), dout_rows});
  }

  const spec::Spec& spec_;
  const spec::Build& build_;
  detail::Builder b_;
  std::vector<bool> requires_;
  std::map<int, std::vector<int>> contributions_;
  std::map<int, int> buffer_;  // parameter or input -> its gradient buffer
  // A sliced value -> the windows its slices' gradients were written into
  // (views of one tensor of zeros).
  std::map<int, std::vector<int>> slice_grads_;
};

}  // namespace

void derive_backward(const spec::Spec& spec, const spec::Build& build, graph::Graph& g) {
  g = Differentiator(spec, build, std::move(g)).run();
}

}  // namespace wfgen::trace

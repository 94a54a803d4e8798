// The tracer's records (tracer.hpp): a call of a node checked against its
// Subscript DSL line and given an implementation for the build's devices,
// broadcasting and matmul's batching as views, and the views themselves.
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

int Tracer::view(int base, ViewKind kind, Shape shape, const body::Expr& e) {
  Value v = fresh(Kind::View, std::move(shape), at(e.offset), current_source());
  v.view = kind;
  v.base = base;
  v.contiguous = false;
  v.holds_indices = val(base).holds_indices;
  v.dtype = val(base).dtype;
  return add(std::move(v));
}

int Tracer::slice(int base, Shape shape, std::vector<Dim> starts, std::vector<Dim> stops, std::vector<Dim> steps,
                  const body::Expr& e) {
  const int id = view(base, ViewKind::Slice, std::move(shape), e);
  g_[id].starts = std::move(starts);
  g_[id].stops = std::move(stops);
  g_[id].steps = std::move(steps);
  return id;
}

int Tracer::permute(int base, const std::vector<int>& perm, const body::Expr& e) {
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

int Tracer::reshape(int base, Shape shape, const body::Expr& e) {
  if (!val(base).contiguous) base = copy(base, e);
  int id = view(base, ViewKind::Reshape, std::move(shape), e);
  g_[id].contiguous = true;
  return id;
}

int Tracer::broadcast(int base, const Shape& to, const body::Expr& e) {
  if (val(base).shape == to) return base;
  return view(base, ViewKind::Broadcast, to, e);
}

int Tracer::copy(int base, const body::Expr& e) {
  const bool indices = val(base).holds_indices;
  int id = call_node_simple(e, "copy", {base}, {}, /*copies_indices=*/indices).id;
  g_[id].holds_indices = indices;
  return id;
}

int Tracer::reshape_to(int base, const std::vector<TValue>& dims, const body::Expr& e) {
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

TValue Tracer::call_node_simple(const body::Expr& e, const std::string& node, const std::vector<int>& tensors,
                        const std::vector<spec::ArgValue>& args, bool copies_indices) {
  const spec::Node* n = spec_.find_node(node);
  if (!n) fail_at(e, "the standard node '" + node + "' is not available (was it overridden or removed?)");
  std::vector<std::pair<std::string, TValue>> named;
  for (std::size_t k = 0; k < args.size() && k < n->args.size(); ++k) named.emplace_back(n->args[k].name, from_arg(args[k]));
  return call_node(e, *n, tensors, named, copies_indices);
}

void Tracer::check_indices(const body::Expr& e, const spec::Node& node, const std::vector<int>& tensors,
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

TValue Tracer::call_node(const body::Expr& e, const spec::Node& node, std::vector<int> tensors,
                 const std::vector<std::pair<std::string, TValue>>& named, bool copies_indices) {
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
  const rt::DType dtype = call_dtype(e, node, tensors, allocated, passes_all);
  const spec::Impl* impl = choose_impl(node, rank, dtype, args, e);
  if (impl && impl->kind == spec::BodyKind::Build && impl->build == build_.name) {
    fail_at(e, "build '" + build_.name + "' calls itself as a node; a build cannot be part of its own model");
  }
  Value v = fresh(Kind::Call, out_shape, at(e.offset), current_source());
  v.dtype = node.out_dtype.value_or(dtype);
  if (node.out_dtype) v.compute_dtype = dtype;
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

bool Tracer::rejects(const spec::Impl& impl, const spec::Node& node, rt::DType dtype, const std::vector<spec::ArgValue>& args,
                     const body::Expr& e) {
  try {
    return lower::rejects(impl, node, dtype, std::vector<std::optional<spec::ArgValue>>(args.begin(), args.end()));
  } catch (const expr::Error& err) {
    fail(impl.reject->at(err.offset()), std::string("in the reject condition of the ") + impl.device +
                                             " implementation of '" + node.name + "': " + err.what() +
                                             " (called at " + at(e.offset).str() + ")");
  }
}

rt::DType Tracer::call_dtype(const body::Expr& e, const spec::Node& node, const std::vector<int>& tensors,
                             const std::vector<bool>& allocated, bool passes_all) {
  // Index inputs of a build's input_dtypes hold the build's dtype (converted
  // at the call), so they take part like any other input.
  std::optional<rt::DType> dtype;
  std::string first;
  std::size_t next = 0;
  for (std::size_t k = 0; k < node.where.inputs.size(); ++k) {
    if (allocated[k] && !passes_all) continue;
    const Value& in = val(tensors[next++]);
    const std::string input = node.where.inputs[k].name.value_or("input " + std::to_string(k + 1));
    if (!dtype) {
      dtype = in.dtype;
      first = input;
    } else if (*dtype != in.dtype) {
      fail_at(e, "dtype mismatch in a call of node '" + node.name + "': its input '" + first + "' is " + rt::dtype_name(*dtype) +
                     " but '" + input + "' is " + rt::dtype_name(in.dtype) +
                     "; a node computes in one dtype: cast one of them (to_f32, to_i64, to_i32, to_bool)");
    }
  }
  return dtype.value_or(build_.dtype);
}

const spec::Impl* Tracer::choose_impl(const spec::Node& node, int rank, rt::DType dtype, const std::vector<spec::ArgValue>& args,
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
      bool dtype_ok = std::find(impl->dtypes.begin(), impl->dtypes.end(), dtype) != impl->dtypes.end();
      bool rank_ok = lower::has_rank(*impl, node, rank);
      if (dtype_ok && rank_ok && rejects(*impl, node, dtype, args, e)) {
        tried += (tried.empty() ? "" : "; ") + device + " rejects these arguments";
        continue;
      }
      if (dtype_ok && rank_ok) return impl;
      tried += (tried.empty() ? "" : "; ") + device + (dtype_ok ? "" : std::string(" has no ") + rt::dtype_name(dtype)) +
               (rank_ok ? "" : " has no rank " + std::to_string(rank));
    }
  }
  std::string devices;
  for (const auto& d : build_.devices) devices += (devices.empty() ? "" : ", ") + d;
  fail_at(e, "no implementation of node '" + node.name + "' for " + rt::dtype_name(dtype) + " rank " +
                 std::to_string(rank) + " on the devices [" + devices + "]" + (tried.empty() ? "" : " (" + tried + ")"));
}

TValue Tracer::broadcast_binary(const body::Expr& e, const std::string& node, int a, int b) {
  auto s = broadcast_shape(val(a).shape, val(b).shape);
  if (!s) {
    fail_at(e, "cannot broadcast " + shape::shape_str(val(a).shape) + " and " + shape::shape_str(val(b).shape) + " in " + e.str() +
                   ": each pair of trailing dims must be equal or 1");
  }
  return call_node_simple(e, node, {broadcast(a, *s, e), broadcast(b, *s, e)}, {});
}

TValue Tracer::matmul(const body::Expr& e, int a, int b) {
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

}  // namespace wfgen::trace::detail

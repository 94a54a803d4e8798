// ONNX import, the indexing operators with indices known when importing
// (an initializer, a Constant, or a graph input frozen by --freeze-inputs):
// GatherElements, GatherND, Compress, ScatterElements, Scatter, ScatterND
// and TopK, written with the stdlib's gather (whose backward is scatter_add,
// and the other way round), and Einsum as permute, reshape, matmul and sum.
// The importer computes, from the constant indices, which element of the
// flattened input each output element is: one gather of the input viewed as
// [n 1] with those positions. import_node() in operators.cpp dispatches here.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "wfgen/onnx/importer.hpp"
#include "wfgen/onnx/tensors.hpp"

namespace wfgen::onnx_import::detail {

namespace {

// Row-major strides of `dims`.
std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> s(dims.size(), 1);
  for (std::size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

std::int64_t count(const std::vector<std::int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}

// The multi-index of flat position `flat` in `dims`.
std::vector<std::int64_t> unflatten(std::int64_t flat, const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> at(dims.size());
  for (std::size_t k = dims.size(); k-- > 0;) {
    at[k] = dims[k] ? flat % dims[k] : 0;
    flat = dims[k] ? flat / dims[k] : 0;
  }
  return at;
}

}  // namespace

std::vector<std::int64_t> Importer::known_dims(const onnx::NodeProto& node, const Value& x, const char* what) {
  if (x.literal) unsupported(node, std::string(what) + " is a constant scalar");
  const std::int64_t rank = rank_of(node, x);
  std::vector<std::int64_t> d;
  for (std::int64_t k = 0; k < rank; ++k) {
    const auto& e = (*x.dims)[static_cast<std::size_t>(k)];
    if (!e) unsupported(node, std::string(what) + " with a dim known only at run time; pass --dim to fix it");
    d.push_back(*e);
  }
  return d;
}

std::vector<std::int64_t> Importer::index_constant(const onnx::NodeProto& node, int k, const char* what,
                                                   std::vector<std::int64_t>* dims) {
  if (node.input_size() <= k || node.input(k).empty()) unsupported(node, std::string("no ") + what);
  const onnx::TensorProto* t = values_.count(node.input(k)) ? nullptr : constant(node.input(k));
  if (!t) unsupported(node, std::string(what) + " computed at run time (wfgen needs them known when importing: an initializer, a Constant or --freeze-inputs)");
  std::vector<double> v;
  const int type = t->data_type();
  if (type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::DOUBLE || !numbers_of(*t, v)) {
    unsupported(node, std::string(what) + " of type " + onnx::TensorProto::DataType_Name(type));
  }
  if (dims) dims->assign(t->dims().begin(), t->dims().end());
  return {v.begin(), v.end()};
}

// Each output element is element `from[k]` of `source` flattened (n elements).
// The stdlib's gather reads the positions in the data's dtype: cast to i64
// or i32; BOOL and UINT8 data (u8, whose positions would stop at 255) are
// gathered as i32 and cast back.
std::string Importer::pick(const onnx::NodeProto& node, const std::string& source, std::int64_t n, const std::vector<std::int64_t>& from,
                           const std::vector<std::int64_t>& out, const std::string& tag, const std::string& dtype) {
  if (n >= (std::int64_t{1} << 24)) unsupported(node, "an input of " + std::to_string(n) + " elements (the gather's f32 positions hold 2^24)");
  if (from.empty()) unsupported(node, "an empty output");
  const Value ids = float_parameter(node, node.output(0) + "_" + tag, {static_cast<std::int64_t>(from.size())}, {from.begin(), from.end()});
  Dims od(out.begin(), out.end());
  const std::string as = storage_dtype(dtype) == "u8" ? "i32" : dtype;
  const std::string data = as == dtype ? source : "to_i32(" + source + ")";
  const std::string g = "gather(" + data + ".reshape(" + std::to_string(n) + ", 1), " + as_dtype(ids, as) + ").reshape(" + reshape_args(node, od) + ")";
  return as == dtype ? g : "to_" + dtype + "(" + g + ")";
}

// GatherElements: out[i] = x[i with axis replaced by indices[i]].
// GatherND: out[b, i] = x[b, indices[b, i, :], ...] (the trailing slice).
// Compress: the positions along the axis (or of x flattened) whose condition is true.
void Importer::import_gather_indexed(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  const Value x = operand(node, 0);
  const std::vector<std::int64_t> d = known_dims(node, x, "data");
  const auto rank = static_cast<std::int64_t>(d.size());
  const std::vector<std::int64_t> st = strides_of(d);
  auto wrap = [&](std::int64_t i, std::int64_t n) {
    if (i < -n || i >= n) unsupported(node, "an index " + std::to_string(i) + " outside [" + std::to_string(-n) + ", " + std::to_string(n) + ")");
    return i < 0 ? i + n : i;
  };
  std::vector<std::int64_t> idims, from, out;
  const std::string& op = node.op_type();
  if (op == "GatherElements") {
    const std::vector<std::int64_t> idx = index_constant(node, 1, "indices", &idims);
    const std::int64_t axis = axis_in(node, attr_int(node, "axis", 0), rank);
    if (static_cast<std::int64_t>(idims.size()) != rank) unsupported(node, "indices of another rank than the data");
    for (std::int64_t f = 0; f < count(idims); ++f) {
      std::vector<std::int64_t> at = unflatten(f, idims);
      at[static_cast<std::size_t>(axis)] = wrap(idx[static_cast<std::size_t>(f)], d[static_cast<std::size_t>(axis)]);
      std::int64_t p = 0;
      for (std::int64_t k = 0; k < rank; ++k) {
        if (k != axis && at[static_cast<std::size_t>(k)] >= d[static_cast<std::size_t>(k)]) unsupported(node, "indices larger than the data on axis " + std::to_string(k));
        p += at[static_cast<std::size_t>(k)] * st[static_cast<std::size_t>(k)];
      }
      from.push_back(p);
    }
    out = idims;
  } else if (op == "GatherND") {
    const std::vector<std::int64_t> idx = index_constant(node, 1, "indices", &idims);
    const std::int64_t b = attr_int(node, "batch_dims", 0);
    if (idims.empty()) unsupported(node, "scalar indices");
    const std::int64_t q = idims.back();
    if (b < 0 || b + q > rank || static_cast<std::int64_t>(idims.size()) <= b) unsupported(node, "batch_dims = " + std::to_string(b) + " with index tuples of " + std::to_string(q));
    for (std::int64_t k = 0; k < b; ++k)
      if (idims[static_cast<std::size_t>(k)] != d[static_cast<std::size_t>(k)]) unsupported(node, "batch dims of the indices that differ from the data's");
    const std::int64_t slice = st[static_cast<std::size_t>(b + q - 1)];  // the elements of one x[b, i, :]
    const std::int64_t tuples = count(idims) / std::max<std::int64_t>(q, 1);
    const std::int64_t per_batch = tuples / std::max<std::int64_t>(1, count({idims.begin(), idims.begin() + b}));
    for (std::int64_t t = 0; t < tuples; ++t) {
      const std::vector<std::int64_t> batch = unflatten(t / per_batch, {d.begin(), d.begin() + b});
      std::int64_t p = 0;
      for (std::int64_t k = 0; k < b; ++k) p += batch[static_cast<std::size_t>(k)] * st[static_cast<std::size_t>(k)];
      for (std::int64_t j = 0; j < q; ++j) p += wrap(idx[static_cast<std::size_t>(t * q + j)], d[static_cast<std::size_t>(b + j)]) * st[static_cast<std::size_t>(b + j)];
      for (std::int64_t e = 0; e < slice; ++e) from.push_back(p + e);
    }
    out.assign(idims.begin(), idims.end() - 1);
    out.insert(out.end(), d.begin() + b + q, d.end());
  } else {  // Compress
    const std::vector<std::int64_t> cond = index_constant(node, 1, "condition");
    const onnx::AttributeProto* a = attr(node, "axis");
    const std::int64_t axis = a ? axis_in(node, a->i(), rank) : -1;
    const std::int64_t n = a ? d[static_cast<std::size_t>(axis)] : count(d);
    if (static_cast<std::int64_t>(cond.size()) > n) unsupported(node, "a condition longer than the axis");
    std::vector<std::int64_t> kept;
    for (std::size_t k = 0; k < cond.size(); ++k)
      if (cond[k] != 0) kept.push_back(static_cast<std::int64_t>(k));
    if (!a) {
      from = kept;
      out = {static_cast<std::int64_t>(kept.size())};
    } else {
      out = d;
      out[static_cast<std::size_t>(axis)] = static_cast<std::int64_t>(kept.size());
      for (std::int64_t f = 0; f < count(out); ++f) {
        std::vector<std::int64_t> at = unflatten(f, out);
        at[static_cast<std::size_t>(axis)] = kept[static_cast<std::size_t>(at[static_cast<std::size_t>(axis)])];
        from.push_back(std::inner_product(at.begin(), at.end(), st.begin(), std::int64_t{0}));
      }
    }
  }
  Dims od(out.begin(), out.end());
  define(node, 0, pick(node, x.body, count(d), from, out, "from", x.dtype), od, x.dtype);
}

// ScatterElements, Scatter and ScatterND: which update lands on each
// element of the data. reduction none: one gather of data and updates
// concatenated (the last update of an element wins); add: data plus
// scatter_add of the updates; mul, max, min: data combined with one gather
// per update an element receives (ones, or the data itself, where it
// receives fewer).
void Importer::import_scatter(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  const Value x = operand(node, 0), u = operand(node, 2);
  const std::vector<std::int64_t> d = known_dims(node, x, "data"), ud = known_dims(node, u, "updates");
  const auto rank = static_cast<std::int64_t>(d.size());
  const std::vector<std::int64_t> st = strides_of(d);
  const std::int64_t n = count(d), m = count(ud);
  std::vector<std::int64_t> idims;
  const std::vector<std::int64_t> idx = index_constant(node, 1, "indices", &idims);
  auto wrap = [&](std::int64_t i, std::int64_t size) {
    if (i < -size || i >= size) unsupported(node, "an index " + std::to_string(i) + " outside [" + std::to_string(-size) + ", " + std::to_string(size) + ")");
    return i < 0 ? i + size : i;
  };
  std::vector<std::int64_t> target(static_cast<std::size_t>(m));  // where update p lands
  if (node.op_type() == "ScatterND") {
    if (idims.empty()) unsupported(node, "scalar indices");
    const std::int64_t q = idims.back();
    if (q > rank) unsupported(node, "index tuples longer than the data's rank");
    const std::int64_t slice = q == 0 ? n : st[static_cast<std::size_t>(q - 1)];
    if (count(idims) / std::max<std::int64_t>(q, 1) * slice != m) unsupported(node, "updates whose shape is not indices.shape[:-1] + data.shape[q:]");
    for (std::int64_t t = 0; t * slice < m; ++t) {
      std::int64_t p = 0;
      for (std::int64_t j = 0; j < q; ++j) p += wrap(idx[static_cast<std::size_t>(t * q + j)], d[static_cast<std::size_t>(j)]) * st[static_cast<std::size_t>(j)];
      for (std::int64_t e = 0; e < slice; ++e) target[static_cast<std::size_t>(t * slice + e)] = p + e;
    }
  } else {
    const std::int64_t axis = axis_in(node, attr_int(node, "axis", 0), rank);
    if (idims != ud) unsupported(node, "indices and updates of different shapes");
    if (static_cast<std::int64_t>(idims.size()) != rank) unsupported(node, "indices of another rank than the data");
    for (std::int64_t f = 0; f < m; ++f) {
      std::vector<std::int64_t> at = unflatten(f, idims);
      at[static_cast<std::size_t>(axis)] = wrap(idx[static_cast<std::size_t>(f)], d[static_cast<std::size_t>(axis)]);
      for (std::int64_t k = 0; k < rank; ++k)
        if (at[static_cast<std::size_t>(k)] >= d[static_cast<std::size_t>(k)]) unsupported(node, "indices larger than the data on axis " + std::to_string(k));
      target[static_cast<std::size_t>(f)] = std::inner_product(at.begin(), at.end(), st.begin(), std::int64_t{0});
    }
  }
  const std::string reduction = attr(node, "reduction") ? attr(node, "reduction")->s() : "none";
  const Dims od(d.begin(), d.end());
  auto s = [](std::int64_t v) { return std::to_string(v); };
  if (reduction == "add") {
    const Value to = float_parameter(node, node.output(0) + "_to", {m}, {target.begin(), target.end()});
    define(node, 0, x.body + " + scatter_add(" + u.body + ".reshape(" + s(m) + ", 1), " + to.body + ", " + x.body + ".reshape(" + s(n) + ", 1)).reshape(" + reshape_args(node, od) + ")", od);
    return;
  }
  if (reduction != "none" && reduction != "mul" && reduction != "max" && reduction != "min") unsupported(node, "reduction = " + reduction);
  // The updates each element receives, in order.
  std::vector<std::vector<std::int64_t>> into(static_cast<std::size_t>(n));
  for (std::int64_t p = 0; p < m; ++p) into[static_cast<std::size_t>(target[static_cast<std::size_t>(p)])].push_back(p);
  const std::string both = identifier(node.output(0) + "_sources", "sources");
  used_.insert(both);
  std::string sources = "concat(" + x.body + ".reshape(" + s(n) + ", 1), " + u.body + ".reshape(" + s(m) + ", 1), axis=0)";
  if (reduction == "mul") sources = "concat(" + sources + ", " + float_parameter(node, node.output(0) + "_one", {1, 1}, {1.0f}).body + ", axis=0)";
  line(both + " = " + sources, node.op_type() + ": the data, then the updates");
  const std::string op = reduction == "mul" ? "*" : reduction == "max" ? "maximum" : "minimum";
  std::size_t rounds = reduction == "none" ? 1 : 0;
  for (const auto& v : into) rounds = std::max(rounds, v.size());
  std::string expr = reduction == "none" ? "" : x.body;
  for (std::size_t r = 0; r < rounds; ++r) {
    std::vector<std::int64_t> from(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) {
      const auto& v = into[static_cast<std::size_t>(k)];
      if (reduction == "none") from[static_cast<std::size_t>(k)] = v.empty() ? k : n + v.back();
      else if (r < v.size()) from[static_cast<std::size_t>(k)] = n + v[r];
      else from[static_cast<std::size_t>(k)] = reduction == "mul" ? n + m : k;
    }
    const std::string g = pick(node, both, n + m + (reduction == "mul"), from, d, "from" + std::to_string(r));
    if (reduction == "none") expr = g;
    else if (op == "*") expr = expr + " * " + g;
    else expr = op + "(" + expr + ", " + g + ")";
  }
  define(node, 0, expr, od);
}

// TopK with a constant k: k rounds of max (min for largest 0) over the axis,
// each taking its first extreme out of the next round; the values and their
// indices (f32, as ArgMax's) concatenated along the axis in order.
void Importer::import_topk(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  const Value x = operand(node, 0);
  const std::vector<std::int64_t> d = known_dims(node, x, "its input");
  const auto rank = static_cast<std::int64_t>(d.size());
  const std::int64_t axis = axis_in(node, attr_int(node, "axis", -1), rank);
  std::int64_t k = 0;
  if (opset_ < 10) {
    k = attr_int(node, "k", 0);
  } else {
    const std::vector<std::int64_t> kk = index_constant(node, 1, "its k");
    if (kk.size() != 1) unsupported(node, "a k of " + std::to_string(kk.size()) + " values");
    k = kk[0];
  }
  const std::int64_t n = d[static_cast<std::size_t>(axis)];
  if (k < 1 || k > n) unsupported(node, "k = " + std::to_string(k) + " on an axis of " + std::to_string(n));
  if (k > 64) unsupported(node, "k = " + std::to_string(k) + " (wfgen writes one pass per value, up to 64)");
  const bool largest = attr_int(node, "largest", 1) != 0;
  std::vector<std::int64_t> iota_dims(static_cast<std::size_t>(rank), 1);
  iota_dims[static_cast<std::size_t>(axis)] = n;
  std::vector<float> iota(static_cast<std::size_t>(n));
  std::iota(iota.begin(), iota.end(), 0.0f);
  const Value positions = float_parameter(node, node.output(0) + "_positions", iota_dims, iota);
  const std::string base = identifier(node.output(0) + "_topk", "topk"), ax = std::to_string(axis);
  const std::string extreme = largest ? "max" : "min", arg = largest ? "argmax" : "argmin";
  std::string rest = x.body, values, indices;
  for (std::int64_t r = 0; r < k; ++r) {
    const std::string v = base + "_v" + std::to_string(r), i = base + "_i" + std::to_string(r);
    used_.insert(v);
    used_.insert(i);
    line(v + " = " + extreme + "(" + rest + ", axis=" + ax + ", keepdims=true)", r == 0 ? "TopK: the extreme, then the next ones" : "");
    line(i + " = " + arg + "(" + rest + ", axis=" + ax + ", keepdims=true)", "");
    if (r + 1 < k) {
      const std::string next = base + "_rest" + std::to_string(r);
      used_.insert(next);
      line(next + " = " + rest + (largest ? " - " : " + ") + "(" + positions.body + " == " + i + ") * 1e30", "out of the next round");
      rest = next;
    }
    values = r == 0 ? v : "concat(" + values + ", " + v + ", axis=" + ax + ")";
    indices = r == 0 ? i : "concat(" + indices + ", " + i + ", axis=" + ax + ")";
  }
  std::vector<std::int64_t> out = d;
  out[static_cast<std::size_t>(axis)] = k;
  const Dims od(out.begin(), out.end());
  define(node, 0, values, od);
  if (node.output_size() > 1 && !node.output(1).empty()) define(node, 1, indices + " * 1.0", od);
}

// The diagonal of `x` (`dims`) where `term` repeats a letter ("ii" -> "i"):
// a gather of the constant positions; `term` becomes its letters once each.
std::string Importer::diagonal(const onnx::NodeProto& node, const std::string& x, std::string& term, const std::vector<std::int64_t>& dims,
                               const std::string& tag) {
  std::string u;
  std::vector<std::int64_t> ud;
  for (std::size_t a = 0; a < term.size(); ++a)
    if (u.find(term[a]) == std::string::npos) {
      u += term[a];
      ud.push_back(dims[a]);
    }
  if (u == term) return x;
  const std::vector<std::int64_t> st = strides_of(dims);
  std::vector<std::int64_t> from;
  for (std::int64_t f = 0; f < count(ud); ++f) {
    const std::vector<std::int64_t> at = unflatten(f, ud);
    std::int64_t p = 0;
    for (std::size_t a = 0; a < term.size(); ++a) p += at[u.find(term[a])] * st[a];
    from.push_back(p);
  }
  term = u;
  return pick(node, x, count(dims), from, ud, tag);
}

// Einsum of one or two operands (the equations exports write: batched
// matmuls, transposes, sums, inner and outer products): the letters only one
// operand has and the output lacks summed out, then the batch letters (both
// operands and the output), the free ones and the contracted ones arranged
// by permute and reshape for one batched matmul, and the result permuted to
// the output's order. A repeated letter in a term (a diagonal) is refused.
// An Einsum equation without its spaces, split: the terms before "->" (one
// an operand) and where "->" is (npos: numpy's implicit output).
struct EinsumEquation {
  std::string text;
  std::size_t arrow = std::string::npos;
  std::vector<std::string> terms;
};

static EinsumEquation split_einsum(const std::string& equation) {
  EinsumEquation q;
  for (char c : equation)
    if (c != ' ') q.text += c;
  q.arrow = q.text.find("->");
  const std::size_t stop = std::min(q.arrow, q.text.size());
  for (std::size_t at = 0, end; at <= stop; at = end + 1) {
    end = std::min(q.text.find(',', at), stop);
    q.terms.push_back(q.text.substr(at, end - at));
    if (end >= stop) break;
  }
  return q;
}

// x, whose axes are the letters `from`, permuted to the order of `to`.
static std::string permuted(const std::string& x, const std::string& from, const std::string& to) {
  if (from == to) return x;
  std::string p;
  for (char c : to) p += (p.empty() ? "" : ", ") + std::to_string(from.find(c));
  return x + ".permute(" + p + ")";
}

void Importer::import_einsum(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  const auto* eq = attr(node, "equation");
  if (!eq) unsupported(node, "it has no equation");
  EinsumEquation split = split_einsum(eq->s());
  const std::string& e = split.text;
  const std::size_t arrow = split.arrow;
  std::vector<std::string>& terms = split.terms;
  const int ops = node.input_size();
  if (ops < 1 || ops > 2 || static_cast<int>(terms.size()) != ops) unsupported(node, "equation '" + eq->s() + "' with " + std::to_string(ops) + " operands (wfgen maps one or two)");
  std::vector<Value> v;
  std::vector<std::vector<std::int64_t>> dims;
  for (int k = 0; k < ops; ++k) {
    v.push_back(operand(node, k));
    dims.push_back(known_dims(node, v.back(), "an operand"));
  }
  std::size_t ellipsis = 0;  // the axes "..." stands for
  // "..." becomes letters of its own (upper case: equations use lower case), from the right.
  auto expand = [&](std::string t, std::size_t rank) {
    const std::size_t dots = t.find("...");
    if (dots == std::string::npos) return t;
    const std::size_t named = t.size() - 3;
    if (rank < named) unsupported(node, "equation '" + eq->s() + "': a term longer than its operand's rank");
    ellipsis = std::max(ellipsis, rank - named);
    std::string fill;
    for (std::size_t k = 0; k < rank - named; ++k) fill += static_cast<char>('Z' - (rank - named - 1 - k));
    return t.substr(0, dots) + fill + t.substr(dots + 3);
  };
  for (int k = 0; k < ops; ++k) {
    terms[static_cast<std::size_t>(k)] = expand(terms[static_cast<std::size_t>(k)], dims[static_cast<std::size_t>(k)].size());
    if (terms[static_cast<std::size_t>(k)].size() != dims[static_cast<std::size_t>(k)].size()) unsupported(node, "equation '" + eq->s() + "': a term of another rank than its operand");
  }
  auto has = [](const std::string& t, char c) { return t.find(c) != std::string::npos; };
  std::map<char, std::int64_t> size;
  std::map<char, int> seen;
  for (int k = 0; k < ops; ++k) {
    const std::string& t = terms[static_cast<std::size_t>(k)];
    for (std::size_t a = 0; a < t.size(); ++a) {
      if (!std::isalpha(static_cast<unsigned char>(t[a]))) unsupported(node, "equation '" + eq->s() + "'");
      if (t.find(t[a]) != a) {
        ++seen[t[a]];  // numpy's implicit output leaves out a diagonal's letter (a trace)
        if (dims[static_cast<std::size_t>(k)][t.find(t[a])] != dims[static_cast<std::size_t>(k)][a]) unsupported(node, "equation '" + eq->s() + "': a diagonal of two sizes");
        continue;
      }
      if (size.count(t[a]) && size[t[a]] != dims[static_cast<std::size_t>(k)][a]) unsupported(node, "equation '" + eq->s() + "': letter " + std::string(1, t[a]) + " of two sizes (broadcasting)");
      size[t[a]] = dims[static_cast<std::size_t>(k)][a];
      ++seen[t[a]];
    }
  }
  // A letter twice in a term: its diagonal.
  for (int k = 0; k < ops; ++k) {
    const auto uk = static_cast<std::size_t>(k);
    v[uk].body = diagonal(node, v[uk].body, terms[uk], dims[uk], "diagonal" + std::to_string(k));
  }
  std::string out;
  if (arrow == std::string::npos) {
    for (const auto& [c, n] : seen)  // implicit: the letters seen once, upper case ("...") first
      if (n == 1) out += c;
  } else {
    out = e.substr(arrow + 2);
    if (has(out, '.')) out = expand(out, out.size() - 3 + ellipsis);
    for (char c : out)
      if (!seen.count(c) || out.find(c) != out.rfind(c)) unsupported(node, "equation '" + eq->s() + "': output letter " + std::string(1, c));
  }
  auto s = [](std::int64_t n) { return std::to_string(n); };
  // Sum out what only one term has and the output does not.
  std::vector<std::string> expr;
  for (int k = 0; k < ops; ++k) {
    std::string& t = terms[static_cast<std::size_t>(k)];
    std::string x = v[static_cast<std::size_t>(k)].body;
    const std::string other = ops == 2 ? terms[static_cast<std::size_t>(1 - k)] : "";
    for (std::size_t a = t.size(); a-- > 0;) {
      if (has(out, t[a]) || has(other, t[a])) continue;
      x = "sum(" + x + ", axis=" + s(static_cast<std::int64_t>(a)) + ", keepdims=" + (t.size() == 1 ? "true" : "false") + ")";
      t.erase(a, 1);
    }
    expr.push_back(x);
  }
  auto extent = [&](const std::string& letters) {
    std::int64_t n = 1;
    for (char c : letters) n *= size[c];
    return n;
  };
  std::string result, letters;
  if (ops == 1) {
    result = expr[0];
    letters = terms[0];
    if (letters.empty()) {  // everything summed: a [1] kept as ONNX's scalar
      define(node, 0, result + ".reshape(" + (out.empty() ? std::string("") : "1") + ")", Dims{});
      return;
    }
  } else {
    const std::string& a = terms[0];
    const std::string& b = terms[1];
    std::string batch, free_a, free_b, contract;
    for (char c : a) (has(b, c) ? (has(out, c) ? batch : contract) : free_a) += c;
    for (char c : b)
      if (!has(a, c)) free_b += c;
    const std::int64_t nb = extent(batch), ma = extent(free_a), k = extent(contract), nn = extent(free_b);
    const std::string lead = batch.empty() ? "" : s(nb) + ", ";
    const std::string lhs = permuted(expr[0], a, batch + free_a + contract) + ".reshape(" + lead + s(ma) + ", " + s(k) + ")";
    const std::string rhs = permuted(expr[1], b, batch + contract + free_b) + ".reshape(" + lead + s(k) + ", " + s(nn) + ")";
    letters = batch + free_a + free_b;
    std::string shape;
    for (char c : letters) shape += (shape.empty() ? "" : ", ") + s(size[c]);
    result = "(" + lhs + " @ " + rhs + ")";
    if (letters.empty()) {
      define(node, 0, result + ".reshape(" + (out.empty() ? std::string("") : "1") + ")", Dims{});
      return;
    }
    result += ".reshape(" + shape + ")";
  }
  std::vector<std::int64_t> od;
  for (char c : out) od.push_back(size[c]);
  define(node, 0, permuted(result, letters, out), Dims(od.begin(), od.end()));
}

}  // namespace wfgen::onnx_import::detail

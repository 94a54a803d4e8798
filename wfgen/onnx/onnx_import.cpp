// ONNX import, first half: the graph's inputs, outputs and initializers,
// the body's values and names, and the spec written at the end. The
// operators are mapped in operators.cpp.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "wfgen/body/body.hpp"
#include "wfgen/onnx/importer.hpp"
#include "wfgen/onnx/onnx_import.hpp"
#include "wfgen/onnx/precision.hpp"
#include "wfgen/onnx/tensors.hpp"
#include "wfgen/onnx/untrusted.hpp"
#include "wfgen/onnx/upgrade.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::onnx_import {

namespace detail {

namespace {

namespace fs = std::filesystem;

// Names a value must not take: the body language's keywords, the body
// functions the operator table's handlers call by name (its params: `exp`,
// `softmax`, ...), and the other builtins, methods and stdlib functions the
// importer's statements write: a value named `exp` must not shadow the
// `exp(...)` of a later statement.
bool reserved_name(const std::string& s) {
  static const std::set<std::string> names = [] {
    std::set<std::string> out = {
        "range", "None", "int", "float", "sum", "min", "reshape", "view", "permute", "transpose", "unsqueeze", "squeeze",
        "broadcast_to", "layernorm", "linear", "concat", "gather", "gelu", "leaky_relu", "max_pool", "select", "im2col",
        "eq", "ne", "lt", "le", "gt", "ge", "narrow", "matmul", "len", "shape", "self"};
    for (const auto& f : body_functions()) out.insert(f);
    return out;
  }();
  return body::is_keyword(s) || names.count(s) > 0;
}

// The most elements a value may have: the spec checker's own limit, so that
// products of dims never overflow while importing.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 56;

// "" when every known dim of `d` is >= 0 and their product is at most
// kMaxElements, else what is wrong.
std::string dims_problem(const Dims& d) {
  std::int64_t n = 1;
  for (std::size_t k = 0; k < d.size(); ++k) {
    if (!d[k]) continue;
    if (*d[k] < 0) return "dim " + std::to_string(k) + " is " + std::to_string(*d[k]);
    if (*d[k] > 0 && n > kMaxElements / *d[k]) return "more than 2^56 elements";
    n *= *d[k];
  }
  return "";
}

// The longest body name the importer makes from an ONNX name (the full name
// is kept, escaped, in the statement's comment).
constexpr std::size_t kMaxIdentifier = 96;

}  // namespace

std::string dims_text(const Dims& d) {
  std::string s = "[";
  for (std::size_t k = 0; k < d.size(); ++k) s += (k ? ", " : "") + (d[k] ? std::to_string(*d[k]) : std::string("?"));
  return s + "]";
}


Imported Importer::run(const std::string* bytes) {
  if (bytes) parse_model(*bytes, path_, options_.max_data_bytes, model_);
  else read_model_file(path_, options_.max_data_bytes, model_);
  escape_names(model_, path_);  // from here on, every name is printable ASCII
  checker_.check_model(model_);  // and every tensor's data is there, as large as its dims say
  for (const auto& op : model_.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = static_cast<int>(op.version());
  }
  if (opset_ == 0) fail(path_ + " imports no opset of the default domain (ai.onnx)");
  if (opset_ < kFirstOpset) {
    // Checked and escaped above; the converter's new nodes and values get
    // plain ASCII names. The converted model's tensors are checked again.
    upgraded_from_ = opset_;
    upgrade_opset(model_, path_, opset_);
    opset_ = kUpgradeOpset;
    TensorChecker(path_, options_.max_data_bytes).check_model(model_);
  }
  f64_ = double_as_float(model_, doubles_);
  const auto& g = model_.graph();
  for (const auto& init : g.initializer()) initializers_[init.name()] = &init;
  std::string name = options_.name;
  if (name.empty()) name = fs::path(path_).stem().string();
  name = identifier(name, "model");
  std::set<std::string> constant_uses = inputs_needed_as_constants();
  int position = 0;
  for (const auto& vi : g.input()) {
    if (initializers_.count(vi.name())) continue;  // an initializer listed as an input (IR < 4)
    const int k = position++;
    const int type = vi.type().has_tensor_type() ? vi.type().tensor_type().elem_type() : 0;
    bool not_float = vi.type().has_tensor_type() && type != onnx::TensorProto::FLOAT;
    // --keep-integer-inputs: an integer or bool input no node needs as a constant stays an input.
    if (options_.keep_integer_inputs && dtype_of_type(type)) not_float = false;
    if (!options_.freeze_dir.empty() && (not_float || constant_uses.count(vi.name()))) {
      freeze(vi, k);
      continue;
    }
    read_input(vi);
  }
  std::vector<const onnx::TensorProto*> frozen;
  for (const auto& t : frozen_) frozen.push_back(t.get());
  // A node of another domain is refused when reached (import_node), with
  // the reason: ONNX's inference would fail on it first, less clearly.
  bool one_domain = true;
  for (const auto& node : g.node()) one_domain = one_domain && (node.domain().empty() || node.domain() == "ai.onnx");
  // A DOUBLE model read as FLOAT (precision.hpp) keeps attributes that name
  // DOUBLE (EyeLike's dtype), which ONNX's type checks would refuse: its
  // shapes are the trace's alone.
  if (one_domain && !f64_) inferred_ = infer_shapes(model_, options_.dims, frozen, path_);
  for (const auto& node : g.node()) import_node(node);
  for (const auto& vi : g.output()) read_output(vi);
  if (!inferred_.refused.empty()) fail(inferred_.refused);
  return finish(name);
}

void Importer::fail(const std::string& message) const {
  Diagnostic d;
  d.loc.file = path_;
  d.message = message;
  throw UserError(d);
}

void Importer::unsupported(const onnx::NodeProto& node, const std::string& what) const {
  fail("cannot import " + describe(node) + ": " + what);
}

std::string Importer::describe(const onnx::NodeProto& node) const {
  std::string s = "operator " + node.op_type();
  if (!node.name().empty()) s += " (node '" + node.name() + "')";
  s += " of opset " + std::to_string(opset_);
  if (upgraded_from_) s += " (upgraded from opset " + std::to_string(upgraded_from_) + ")";
  return s;
}

std::string Importer::label(const onnx::NodeProto& node) {
  return node.op_type() + (node.name().empty() ? "" : " '" + node.name() + "'");
}

// A body name for an ONNX name: letters, digits and '_', unique.
std::string Importer::identifier(const std::string& onnx_name, const std::string& fallback) {
  std::string s;
  for (char c : onnx_name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  while (s.find("__") != std::string::npos) s.replace(s.find("__"), 2, "_");
  while (!s.empty() && s.front() == '_') s.erase(s.begin());  // `/fc/Gemm` -> fc_Gemm
  while (!s.empty() && s.back() == '_') s.pop_back();
  if (s.size() > kMaxIdentifier) s.resize(kMaxIdentifier);
  while (!s.empty() && s.back() == '_') s.pop_back();
  if (s.empty()) s = fallback;
  if (std::isdigit(static_cast<unsigned char>(s[0]))) s = "v_" + s;
  if (s.rfind("wf_", 0) == 0 || reserved_name(s)) s = "v_" + s;
  std::string base = s;
  for (int k = 1; used_.count(s); ++k) s = base + "_" + std::to_string(k);
  used_.insert(s);
  return s;
}

// Inputs of the graph that nodes read where a constant is needed.
std::set<std::string> Importer::inputs_needed_as_constants() const {
  std::set<std::string> out;
  for (const auto& n : model_.graph().node()) {
    const OperatorRow* row = find_operator(n.op_type());  // (a node of another domain fails in import_node)
    if (!row || opset_ < row->constants_since) continue;
    for (int k = 0; k < n.input_size() && k < 32; ++k)
      if ((row->constant_inputs >> k & 1u) && !n.input(k).empty()) out.insert(n.input(k));
  }
  return out;
}

void Importer::freeze(const onnx::ValueInfoProto& vi, int position) {
  fs::path file = fs::path(options_.freeze_dir) / ("input_" + std::to_string(position) + ".pb");
  auto t = std::make_unique<onnx::TensorProto>();
  std::error_code ec;
  if (!fs::is_regular_file(file, ec) || !read_tensor_file(file.string(), options_.max_data_bytes, *t)) {
    fail("cannot freeze input '" + vi.name() + "' (input " + std::to_string(position) + "): " + escape_name(file.string()) +
         " is not a readable ONNX TensorProto");
  }
  // The values must be of the type the graph declares: ONNX's own test data
  // holds BFLOAT16 inputs as UINT16, whose numbers are the bit patterns.
  const int declared = vi.type().has_tensor_type() ? vi.type().tensor_type().elem_type() : 0;
  // A DOUBLE model is read as FLOAT (precision.hpp): its inputs' values are DOUBLE.
  const bool narrowed = f64_ && declared == onnx::TensorProto::FLOAT && t->data_type() == onnx::TensorProto::DOUBLE;
  if (!narrowed && declared != 0 && t->data_type() != declared) {
    fail("cannot freeze input '" + vi.name() + "' (input " + std::to_string(position) + "): " + escape_name(file.string()) + " holds " +
         onnx::TensorProto::DataType_Name(t->data_type()) + " values, the graph declares " + onnx::TensorProto::DataType_Name(declared));
  }
  t->set_name(vi.name());
  checker_.check(*t, "frozen input '" + vi.name() + "'", false);
  if (narrowed) to_float(*t, vi.name(), doubles_);
  initializers_[vi.name()] = t.get();
  frozen_.push_back(std::move(t));
  frozen_positions_.push_back(position);
  renamed_.push_back("input '" + vi.name() + "' (input " + std::to_string(position) + ") frozen from " + escape_name(file.string()));
}

// --- values ------------------------------------------------------------------
Dims Importer::dims_of(const onnx::ValueInfoProto& vi, std::vector<std::string>* symbols) {
  Dims out;
  const auto& shape = vi.type().tensor_type().shape();
  for (int k = 0; k < shape.dim_size(); ++k) {
    const auto& d = shape.dim(k);
    if (d.has_dim_value()) {
      out.push_back(d.dim_value());
      if (symbols) symbols->push_back(std::to_string(d.dim_value()));
      continue;
    }
    std::string param = d.has_dim_param() ? d.dim_param() : "";
    auto fixed = options_.dims.find(param);
    if (!param.empty() && fixed != options_.dims.end()) {
      out.push_back(fixed->second);
      if (symbols) symbols->push_back(std::to_string(fixed->second));
      continue;
    }
    out.push_back(std::nullopt);
    if (symbols) symbols->push_back(dim_symbol(param.empty() ? vi.name() + "_d" + std::to_string(k) : param));
  }
  if (std::string why = dims_problem(out); !why.empty()) fail("value '" + vi.name() + "' has dims " + dims_text(out) + ": " + why);
  return out;
}

// A run-time dim's name in the where line (a DSL symbol).
std::string Importer::dim_symbol(const std::string& param) {
  auto it = dim_symbols_.find(param);
  if (it != dim_symbols_.end()) return it->second;
  std::string s;
  for (char c : param.substr(0, kMaxIdentifier)) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0])) || s.rfind("wf_", 0) == 0) s = "d_" + s;
  // Two dim params that mangle alike stay two symbols (the same symbol
  // would make their sizes equal).
  std::string base = s;
  for (int k = 1; used_dim_symbols_.count(s); ++k) s = base + "_" + std::to_string(k);
  used_dim_symbols_.insert(s);
  dim_symbols_[param] = s;
  return s;
}

void Importer::check_float(const onnx::ValueInfoProto& vi, const char* what) const {
  if (!vi.type().has_tensor_type()) fail(std::string(what) + " '" + vi.name() + "' is not a tensor; wfgen imports tensors only");
  int t = vi.type().tensor_type().elem_type();
  if (t != onnx::TensorProto::FLOAT) {
    fail(std::string(what) + " '" + vi.name() + "' has element type " + onnx::TensorProto::DataType_Name(t) +
         "; wfgen's ONNX import supports FLOAT (f32) inputs and outputs, or DOUBLE (f64) ones when every floating tensor of the model is DOUBLE, "
         "and INT64, INT32, UINT8 and BOOL ones (i64, i32, u8, u8)");
  }
}

void Importer::read_input(const onnx::ValueInfoProto& vi) {
  // INT64, INT32, UINT8 and BOOL inputs are tensors of their own dtype (typed_inputs; BOOL as u8).
  const int type = vi.type().has_tensor_type() ? vi.type().tensor_type().elem_type() : 0;
  const std::optional<std::string> dtype = dtype_of_type(type);
  if (!dtype || dtype->empty()) check_float(vi, "input");
  std::vector<std::string> symbols;
  Dims d = dims_of(vi, &symbols);
  std::string body = identifier(vi.name(), "input");
  values_[vi.name()] = {body, false, d, dtype.value_or("")};
  if (dtype && !dtype->empty()) typed_inputs_.emplace_back(body, storage_dtype(*dtype));
  std::string sub;
  for (const auto& s : symbols) sub += (sub.empty() ? "" : " ") + s;
  inputs_.push_back(body + "[" + sub + "]");
  if (body != vi.name()) renamed_.push_back("input " + body + " is ONNX '" + vi.name() + "'");
}

void Importer::read_output(const onnx::ValueInfoProto& vi) {
  // BOOL results (comparisons) and integer ones (ArgMax's indices) are whole
  // numbers the FLOAT the body computes in holds exactly (up to 2^24): the
  // model returns them as f32, and the spec says so.
  const int type = vi.type().has_tensor_type() ? vi.type().tensor_type().elem_type() : 0;
  static const std::set<int> kWhole = {onnx::TensorProto::BOOL,   onnx::TensorProto::INT64,  onnx::TensorProto::INT32,
                                       onnx::TensorProto::INT16,  onnx::TensorProto::INT8,   onnx::TensorProto::UINT64,
                                       onnx::TensorProto::UINT32, onnx::TensorProto::UINT16, onnx::TensorProto::UINT8};
  const bool whole = kWhole.count(type) != 0;
  if (!whole) check_float(vi, "output");
  auto it = values_.find(vi.name());
  if (it == values_.end() && constant(vi.name())) {
    // An output known when importing (a folded Gather of a frozen input, an
    // initializer): a parameter, FLOAT like every value of the body.
    onnx::NodeProto output;
    output.set_op_type("output");
    output.add_input(vi.name());
    if (constant(vi.name())->data_type() != onnx::TensorProto::FLOAT) {
      std::string why;
      std::unique_ptr<onnx::TensorProto> t = cast_constant(*constant(vi.name()), onnx::TensorProto::FLOAT, why);
      if (!t) fail("output '" + vi.name() + "' is a constant that cannot be FLOAT: " + why);
      // The model returns integers as f32: one it cannot hold exactly would
      // be a wrong answer, so it is refused.
      std::vector<double> exact;
      const int ctype = constant(vi.name())->data_type();
      if (ctype != onnx::TensorProto::DOUBLE && ctype != onnx::TensorProto::FLOAT16 && ctype != onnx::TensorProto::BFLOAT16)
        numbers_of(*constant(vi.name()), exact);
      for (double v : exact) {
        if (std::isfinite(v) && static_cast<double>(static_cast<float>(v)) != v) {
          fail("output '" + vi.name() + "' is a " + onnx::TensorProto::DataType_Name(constant(vi.name())->data_type()) +
               " constant holding " + std::to_string(v) + ", which the f32 the model returns does not hold exactly");
        }
      }
      keep_constant(vi.name() + "_as_float", std::move(t));
      output.set_input(0, vi.name() + "_as_float");
    }
    // The body has no tensor of rank 0 to return (a literal is a number,
    // and the kernels start at rank 1).
    if (constant(output.input(0))->dims_size() == 0)
      fail("output '" + vi.name() + "' is a constant of rank 0 (known when importing); wfgen's models return tensors of rank 1 or more");
    values_[vi.name()] = operand(output, 0);
    it = values_.find(vi.name());
  }
  if (it == values_.end()) fail("output '" + vi.name() + "' is computed by no node of the graph");
  // INT64, INT32, UINT8 and BOOL outputs are returned in their own dtype: a value
  // the body holds in another (a constant's whole numbers as floats) is cast.
  const std::optional<std::string> want = dtype_of_type(type);
  if (want && *want != it->second.dtype && !it->second.literal) {
    std::string cast = identifier(vi.name() + "_as_" + (want->empty() ? std::string(body_dtype()) : *want), "output");
    line(cast + " = " + as_dtype(it->second, *want), "output " + vi.name() + " as " + onnx::TensorProto::DataType_Name(type));
    values_[vi.name()] = {cast, false, it->second.dims, *want};
    it = values_.find(vi.name());
  }
  if (want) {
    // in its own dtype: nothing to say
  } else if (type == onnx::TensorProto::BOOL) {
    renamed_.push_back("output '" + vi.name() + "' is BOOL in ONNX: the model returns it as " + body_dtype() +
                       ", 1.0 for true and 0.0 for false");
  } else if (whole) {
    renamed_.push_back("output '" + vi.name() + "' is " + onnx::TensorProto::DataType_Name(type) + " in ONNX: the model returns it as " +
                       body_dtype() + " holding the whole numbers (exact up to " + (f64_ ? "2^53" : "2^24") + ")");
  }
  std::vector<std::string> symbols;
  dims_of(vi, &symbols);
  std::string body = it->second.body;
  const bool param = std::any_of(params_.begin(), params_.end(), [&](const auto& p) { return p.first == body; });
  if (it->second.literal || is_input(body) || param) {
    // A graph output must be a fresh value of the body.
    std::string copy = identifier(vi.name() + "_out", "output");
    line(copy + " = " + body + (it->second.literal ? "" : " * 1.0"), "output " + vi.name());
    body = copy;
  }
  std::string sub;
  for (const auto& s : symbols) sub += (sub.empty() ? "" : " ") + s;
  if (vi.type().tensor_type().has_shape()) {
    outputs_.push_back(body + "[" + sub + "]");
  } else {
    // No shape in the graph: the result's rank, with symbols the body binds.
    std::string subs;
    std::size_t rank = it->second.dims ? it->second.dims->size() : 0;
    for (std::size_t k = 0; k < rank; ++k) subs += (k ? " " : "") + body + "_d" + std::to_string(k);
    outputs_.push_back(body + "[" + subs + "]");
  }
  returned_.push_back(body);
}

bool Importer::is_input(const std::string& body) const {
  for (const auto& in : inputs_)
    if (in.rfind(body + "[", 0) == 0) return true;
  return false;
}

const onnx::TensorProto* Importer::constant(const std::string& name) const {
  auto it = initializers_.find(name);
  return it == initializers_.end() ? nullptr : it->second;
}

// The body value of an input of `node`: a value computed before, a graph
// input, or a float initializer (a number when it holds one element and has
// rank 0, else a parameter).
Value Importer::operand(const onnx::NodeProto& node, int k) {
  if (k >= node.input_size() || node.input(k).empty()) unsupported(node, "input " + std::to_string(k) + " is missing");
  const std::string& name = node.input(k);
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  const onnx::TensorProto* t = constant(name);
  refuse_deferred(node, name);
  if (!t) unsupported(node, "its input '" + name + "' is computed by no earlier node");
  const std::optional<std::string> dtype = dtype_of_type(t->data_type());
  if (!dtype) {
    unsupported(node, "its input '" + name + "' is a " + onnx::TensorProto::DataType_Name(t->data_type()) +
                          " initializer used as a tensor; wfgen's ONNX import supports FLOAT, INT64, INT32, UINT8 and BOOL tensors");
  }
  if (!dtype->empty()) {
    // An integer or bool constant: a FLOAT parameter (parameters are of the
    // build's dtype) cast back in the body, so it must hold every value exactly.
    std::vector<double> exact;
    numbers_of(*t, exact);
    for (double x : exact) {
      if (static_cast<double>(static_cast<float>(x)) != x) {
        unsupported(node, "its input '" + name + "' is a " + onnx::TensorProto::DataType_Name(t->data_type()) + " constant holding " +
                              std::to_string(x) + ", which a FLOAT parameter does not hold exactly");
      }
    }
    std::string why;
    std::unique_ptr<onnx::TensorProto> f = cast_constant(*t, onnx::TensorProto::FLOAT, why);
    if (!f) unsupported(node, why);
    const std::string float_name = name + "_as_float";
    keep_constant(float_name, std::move(f));
    Value v = operand_named(node, float_name);
    if (!v.literal) v.body = as_dtype(v, *dtype);
    v.dtype = v.literal ? "" : *dtype;
    return v;  // not a value of its own: nodes that fold constants still see `name` as one
  }
  std::vector<float> data = floats_of(*t);
  if (static_cast<std::int64_t>(data.size()) != element_count(*t)) {
    unsupported(node, "its initializer '" + name + "' holds " + std::to_string(data.size()) + " values for its shape");
  }
  // A finite scalar is a number in the body; an infinite or NaN one
  // (masked_fill's -inf) has no literal and stays a parameter of rank 0.
  if (t->dims_size() == 0 && data.size() == 1 && std::isfinite(data[0])) {
    auto exact = doubles_.find(name);
    Value v{exact != doubles_.end() ? format_double(exact->second[0]) : format_float(data[0]), true, Dims{}, ""};
    values_[name] = v;
    return v;
  }
  return parameter(name, t);
}

Value Importer::parameter(const std::string& name, const onnx::TensorProto* t) {
  std::string body = identifier(name, "param");
  Dims d;
  for (auto x : t->dims()) d.push_back(x);
  params_.push_back({body, t});
  values_[name] = {body, false, d, ""};
  return values_[name];
}

// An int64 constant input (Reshape's shape, axes): folded into the body.
std::vector<std::int64_t> Importer::int_constant(const onnx::NodeProto& node, int k, const char* what) {
  if (k >= node.input_size() || node.input(k).empty()) return {};
  const onnx::TensorProto* t = constant(node.input(k));
  if (!t) refuse_deferred(node, node.input(k));
  if (!t || (t->data_type() != onnx::TensorProto::INT64 && t->data_type() != onnx::TensorProto::INT32)) {
    unsupported(node, std::string(what) + " '" + node.input(k) +
                          "' is not a constant integer initializer; wfgen needs it known when importing");
  }
  return ints_of(*t);
}

// --- attributes ----------------------------------------------------------------
const onnx::AttributeProto* Importer::attr(const onnx::NodeProto& node, const std::string& name) const {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::int64_t Importer::attr_int(const onnx::NodeProto& node, const std::string& name, std::int64_t dflt) const {
  const auto* a = attr(node, name);
  return a ? a->i() : dflt;
}

float Importer::attr_float(const onnx::NodeProto& node, const std::string& name, float dflt) const {
  const auto* a = attr(node, name);
  return a ? a->f() : dflt;
}

std::optional<std::vector<std::int64_t>> Importer::attr_ints(const onnx::NodeProto& node, const std::string& name) const {
  const auto* a = attr(node, name);
  if (!a) return std::nullopt;
  return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
}

void Importer::only_attributes(const onnx::NodeProto& node, std::string_view known) const {
  for (const auto& a : node.attribute()) {
    bool ok = false;
    for (std::size_t at = 0; !ok && at < known.size();) {
      std::size_t end = known.find(' ', at);
      if (end == std::string_view::npos) end = known.size();
      ok = known.substr(at, end - at) == a.name();
      at = end + 1;
    }
    if (!ok) unsupported(node, "its attribute '" + a.name() + "' is not supported");
  }
}

// --- emission --------------------------------------------------------------------
void Importer::line(const std::string& statement, const std::string& comment) {
  ++statements_;
  body_ += statement;
  if (!comment.empty()) body_ += "  # " + comment;
  body_ += "\n";
}

// Defines the node's k-th output as `expr` with `dims`.
void Importer::define(const onnx::NodeProto& node, int k, const std::string& expr, std::optional<Dims> dims,
                      std::optional<std::string> dtype) {
  if (!dtype) {
    // The first computed input's (Concat of a constant and a computed INT64 is INT64).
    for (int i = 0; i < node.input_size() && !dtype; ++i) {
      auto in = values_.find(node.input(i));
      if (in != values_.end() && !in->second.literal) dtype = in->second.dtype;
    }
    if (!dtype) dtype = "";
  }
  // Kernels and the runtime go up to rank 8 (ranks 5 to 8 generated on
  // demand): a larger result would import, then fail in `wfgen gen` far from its cause.
  if (dims && dims->size() > static_cast<std::size_t>(rt::kMaxRank))
    unsupported(node, "a result of rank " + std::to_string(dims->size()) + " (wfgen's kernels go up to rank " + std::to_string(rt::kMaxRank) + ")");
  if (std::string why = dims ? dims_problem(*dims) : ""; !why.empty()) unsupported(node, "a result of dims " + dims_text(*dims) + ": " + why);
  const std::string& onnx_name = node.output(k);
  std::string body = identifier(onnx_name, "value");
  std::string comment = node.op_type();
  if (!node.name().empty()) comment += " '" + node.name() + "'";
  if (body != onnx_name) comment += ", ONNX value '" + onnx_name + "'";
  line(body + " = " + expr, comment);
  values_[onnx_name] = {body, false, checked_dims(node, onnx_name, std::move(dims)), *dtype};
}

std::int64_t Importer::rank_of(const onnx::NodeProto& node, const Value& v) const {
  if (!v.dims) unsupported(node, "the rank of its input '" + v.body + "' is unknown");
  return static_cast<std::int64_t>(v.dims->size());
}

std::int64_t Importer::axis_in(const onnx::NodeProto& node, std::int64_t axis, std::int64_t rank, bool plus_one) const {
  std::int64_t n = rank + (plus_one ? 1 : 0);
  if (axis < -n || axis >= n) unsupported(node, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + n : axis;
}

// numpy broadcasting of two shapes (unknown dims stay unknown).
std::optional<Dims> Importer::broadcast(const std::optional<Dims>& a, const std::optional<Dims>& b) {
  if (!a || !b) return std::nullopt;
  Dims out(std::max(a->size(), b->size()));
  for (std::size_t k = 0; k < out.size(); ++k) {
    auto pick = [&](const Dims& d) -> std::optional<std::int64_t> {
      std::size_t off = out.size() - d.size();
      return k < off ? std::optional<std::int64_t>(1) : d[k - off];
    };
    auto x = pick(*a), y = pick(*b);
    out[k] = (x && *x == 1) ? y : x;
  }
  return out;
}

// The arguments of `.reshape(...)` for `dims`: the known sizes, and -1 for
// the one the tracer infers (a run-time dim); two unknown dims cannot be said.
std::string Importer::reshape_args(const onnx::NodeProto& node, const Dims& dims) const {
  std::string out;
  int unknown = 0;
  for (const auto& d : dims) {
    out += (out.empty() ? "" : ", ") + (d ? std::to_string(*d) : "-1");
    unknown += !d;
  }
  if (unknown > 1) unsupported(node, "a result with more than one run-time dim");
  return out;
}

std::optional<std::int64_t> Importer::product(const Dims& d, std::size_t from, std::size_t to) {
  std::optional<std::int64_t> p = 1;
  for (std::size_t k = from; k < to; ++k) p = (p && d[k]) ? std::optional<std::int64_t>(*p * *d[k]) : std::nullopt;
  return p;
}

// --- the spec ---------------------------------------------------------------------
Imported Importer::finish(const std::string& name) {
  Imported out;
  out.opset = opset_;
  out.statements = statements_ + 1;
  out.frozen_inputs = frozen_positions_;
  std::ostringstream y;
  const auto& g = model_.graph();
  y << "# Imported by `wfgen import` from " << escape_name(fs::path(path_).filename().string()) << " (ONNX IR " << model_.ir_version()
    << ", opset " << opset_;
  if (!model_.producer_name().empty()) {
    std::string by = model_.producer_name() + " " + model_.producer_version();
    while (!by.empty() && by.back() == ' ') by.pop_back();
    y << ", produced by " << by;
  }
  y << ").\n";
  if (upgraded_from_) {
    y << "# The file is opset " << upgraded_from_ << ": ONNX's version converter (libonnx) upgraded it to opset " << opset_
      << " before the import.\n";
  }
  if (f64_) y << "# The model's tensors are DOUBLE: the build computes in f64.\n";
  for (const auto& r : renamed_) y << "# " << r << "\n";
  y << "models:\n  - name: " << name << "\n";
  if (!params_.empty()) {
    y << "    params:\n";
    for (const auto& [body, t] : params_) {
      y << "      " << body << ": {shape: [";
      for (int k = 0; k < t->dims_size(); ++k) y << (k ? ", " : "") << t->dims(k);
      y << "], init: zeros}";
      if (body != t->name()) y << "  # ONNX initializer '" << t->name() << "'";
      y << "\n";
      out.param_names.push_back(body);
      rt::Shape shape(t->dims().begin(), t->dims().end());
      std::vector<float> data = floats_of(*t);
      rt::Tensor tensor = rt::Tensor::empty(f64_ ? rt::DType::f64 : rt::DType::f32, shape);
      if (!f64_) {
        if (!data.empty()) std::memcpy(tensor.data<float>(), data.data(), data.size() * sizeof(float));
      } else if (auto exact = doubles_.find(t->name()); exact != doubles_.end()) {
        std::copy(exact->second.begin(), exact->second.end(), tensor.data<double>());
      } else {
        std::copy(data.begin(), data.end(), tensor.data<double>());  // made while importing, from FLOAT values
      }
      out.params.push_back(std::move(tensor));
    }
  }
  std::string where;
  for (const auto& in : inputs_) where += (where.empty() ? "" : " ") + in;
  where += " ->";
  for (const auto& o : outputs_) where += " " + o;
  y << "    where: \"" << where << "\"\n";
  if (!g.doc_string().empty()) y << "    doc: " << yaml_quoted(g.doc_string()) << "\n";
  y << "    call: |\n";
  std::istringstream lines(body_);
  for (std::string l; std::getline(lines, l);) y << "      " << l << "\n";
  y << "      return ";
  for (std::size_t k = 0; k < returned_.size(); ++k) y << (k ? ", " : "") << returned_[k];
  y << "\nbuilds:\n  - {name: " << name << ", model: " << name << ", dtype: " << body_dtype() << ", devices: [";
  for (std::size_t k = 0; k < options_.devices.size(); ++k) y << (k ? ", " : "") << options_.devices[k];
  y << "]";
  if (!typed_inputs_.empty()) {
    y << ",\n     typed_inputs: {";
    for (std::size_t k = 0; k < typed_inputs_.size(); ++k) y << (k ? ", " : "") << typed_inputs_[k].first << ": " << typed_inputs_[k].second;
    y << "}";
  }
  y << "}\n";
  if (!params_.empty() && !options_.params_file.empty()) {
    y << "# The initializers are in " << escape_name(options_.params_file) << ": load them with load_parameters() of the\n"
      << "# generated class (docs/onnx.md).\n";
  }
  out.spec = y.str();
  return out;
}

}  // namespace detail

using detail::Importer;


Imported import_file(const std::string& path, const Options& options) { return Importer(path, options).run(); }

Imported import_bytes(const std::string& bytes, const std::string& path, const Options& options) {
  return Importer(path, options).run(&bytes);
}

std::vector<std::string> operators_of(const std::string& path) {
  onnx::ModelProto model;
  read_model_file(path, Options{}.max_data_bytes, model);
  std::vector<std::string> out;
  for (const auto& n : model.graph().node()) {
    // Printed one a line: escaped like every name of the file.
    std::string op = escape_name((n.domain().empty() || n.domain() == "ai.onnx" ? "" : n.domain() + ".") + n.op_type());
    if (std::find(out.begin(), out.end(), op) == out.end()) out.push_back(op);
  }
  return out;
}

std::vector<std::string> supported_operators() {
  std::vector<std::string> out;
  for (const auto& row : detail::operator_table()) out.emplace_back(row.name);
  return out;
}

std::string supported_operators_tsv() {
  auto or_dash = [](std::string_view s) { return s.empty() ? std::string("-") : std::string(s); };
  std::string out = "# operator\topsets\tattributes\tdtypes\tconstant inputs\tdoc\n";
  for (const auto& row : detail::operator_table()) {
    std::string constants;
    for (int k = 0; k < 32; ++k)
      if (row.constant_inputs >> k & 1u) constants += (constants.empty() ? "" : " ") + std::to_string(k);
    if (!constants.empty() && row.constants_since > detail::kFirstOpset) constants += " from opset " + std::to_string(row.constants_since);
    out += std::string(row.name) + "\t" + detail::opset_range(row) + "\t" + or_dash(row.attributes) + "\t" + or_dash(row.dtypes) +
           "\t" + or_dash(constants) + "\t" + std::string(row.doc) + "\n";
  }
  return out;
}

}  // namespace wfgen::onnx_import

namespace wfgen::onnx_import::detail {

// --- ONNX's shape inference (shape_infer.hpp) -------------------------------------
std::optional<Dims> Importer::checked_dims(const onnx::NodeProto& node, const std::string& name, std::optional<Dims> dims) const {
  auto it = inferred_.values.find(name);
  if (it == inferred_.values.end() || !it->second.dims) return dims;
  const Dims& known = *it->second.dims;
  if (!dims) return known;
  bool differ = dims->size() != known.size();
  for (std::size_t k = 0; !differ && k < known.size(); ++k) {
    auto& mine = (*dims)[k];
    if (mine && known[k] && *mine != *known[k]) differ = true;
    if (!mine) mine = known[k];
  }
  if (differ) {
    unsupported(node, "ONNX's shape inference gives its output '" + name + "' dims " + dims_text(known) + ", wfgen's import " +
                          dims_text(*dims) + " (a malformed model, or a wfgen bug)");
  }
  if (std::string why = dims_problem(*dims); !why.empty()) unsupported(node, "a result of dims " + dims_text(*dims) + ": " + why);
  return dims;
}

std::unique_ptr<onnx::TensorProto> Importer::propagated(const onnx::NodeProto& node) const {
  if (node.output_size() != 1) return nullptr;
  const std::string& name = node.output(0);
  auto data = inferred_.data.find(name);
  auto value = inferred_.values.find(name);
  if (data == inferred_.data.end() || value == inferred_.values.end() || value->second.type != onnx::TensorProto::INT64 ||
      !value->second.dims || value->second.dims->size() > 1)
    return nullptr;
  const Dims& dims = *value->second.dims;
  if (dims.size() == 1 && (!dims[0] || *dims[0] != static_cast<std::int64_t>(data->second.size()))) return nullptr;
  if (dims.empty() && data->second.size() != 1) return nullptr;
  auto t = std::make_unique<onnx::TensorProto>();
  t->set_data_type(onnx::TensorProto::INT64);
  for (const auto& d : dims) t->add_dims(*d);
  for (const auto& v : data->second) {
    if (!v) return nullptr;
    t->add_int64_data(*v);
  }
  return t;
}

void Importer::check_folded(const onnx::NodeProto& node, const onnx::TensorProto& t) const {
  const std::string& name = node.output(0);
  Dims dims(t.dims().begin(), t.dims().end());
  checked_dims(node, name, dims);
  auto data = inferred_.data.find(name);
  if (data == inferred_.data.end() || t.data_type() != onnx::TensorProto::INT64) return;
  const std::vector<std::int64_t> mine = ints_of(t);
  bool differ = mine.size() != data->second.size();
  for (std::size_t k = 0; !differ && k < mine.size(); ++k) differ = data->second[k] && *data->second[k] != mine[k];
  if (differ) {
    unsupported(node, "ONNX's data propagation gives its output '" + name + "' the values " + dims_text(data->second) +
                          ", wfgen's folding " + dims_text(Dims(mine.begin(), mine.end())) + " (a malformed model, or a wfgen bug)");
  }
}

void Importer::fold_dims_of(const onnx::NodeProto& node) {
  const bool size = node.op_type() == "Size";
  only_attributes(node, find_operator(node.op_type())->attributes);
  const Value& v = values_.at(node.input(0));
  if (!v.dims) unsupported(node, "the rank of its input is unknown");
  const auto [start, end] = shape_range(node, static_cast<std::int64_t>(v.dims->size()));
  auto t = std::make_unique<onnx::TensorProto>();
  t->set_data_type(onnx::TensorProto::INT64);
  std::int64_t count = 1;
  for (std::int64_t k = size ? 0 : start; k < (size ? static_cast<std::int64_t>(v.dims->size()) : end); ++k) {
    const auto& d = (*v.dims)[static_cast<std::size_t>(k)];
    if (!d) {
      // Its known elements may be all that is read (x.shape[1] of an x
      // with a run-time batch): data propagation has them.
      deferred_[node.output(0)] = "its input has a dim known only at run time (axis " + std::to_string(k) + "); pass --dim to fix it";
      return;
    }
    if (!size) t->add_int64_data(*d);
    count *= *d;  // dims_problem() keeps every value's element count in range
  }
  if (size) t->add_int64_data(count);
  else t->add_dims(t->int64_data_size());
  check_folded(node, *t);
  keep_constant(node.output(0), std::move(t));
}

std::vector<std::int64_t> Importer::reshape_shape(const onnx::NodeProto& node) {
  const std::string& name = node.input_size() > 1 ? node.input(1) : "";
  auto data = inferred_.data.find(name);
  if (!deferred_.count(name) || data == inferred_.data.end()) return int_constant(node, 1, "shape");
  std::vector<std::int64_t> shape;
  int unknown = 0;
  for (const auto& v : data->second) {
    unknown += v ? 0 : 1;
    if (v && *v == -1) ++unknown;  // a -1 of its own: two dims to infer
    shape.push_back(v ? *v : -1);
  }
  if (unknown != 1) refuse_deferred(node, name);
  return shape;
}

void Importer::refuse_deferred(const onnx::NodeProto& node, const std::string& name) const {
  auto it = deferred_.find(name);
  if (it != deferred_.end()) unsupported(node, "its input '" + name + "' is a Shape that cannot be a constant: " + it->second);
}

}  // namespace wfgen::onnx_import::detail

// DOUBLE models read as FLOAT ones (precision.hpp), keeping the exact values.
#include "wfgen/onnx/precision.hpp"

#include <charconv>

#include "wfgen/onnx/importer.hpp"  // format_float
#include "wfgen/onnx/tensors.hpp"

namespace wfgen::onnx_import {

namespace {

using onnx::TensorProto;

// The floating types a model names, counted as DOUBLE or FLOAT.
struct Seen {
  bool dbl = false, flt = false;
  void type(int t) {
    dbl = dbl || t == TensorProto::DOUBLE;
    flt = flt || t == TensorProto::FLOAT || t == TensorProto::FLOAT16 || t == TensorProto::BFLOAT16;
  }
};

// The Constant's value tensor (its `value` attribute), or null.
TensorProto* constant_value(onnx::NodeProto& node) {
  if (node.op_type() != "Constant") return nullptr;
  for (auto& a : *node.mutable_attribute())
    if (a.name() == "value" && a.has_t()) return a.mutable_t();
  return nullptr;
}

// The node's Cast target attribute, or null.
onnx::AttributeProto* cast_to(onnx::NodeProto& node) {
  if (node.op_type() != "Cast") return nullptr;
  for (auto& a : *node.mutable_attribute())
    if (a.name() == "to") return &a;
  return nullptr;
}

// Every value type of the graph's inputs, outputs and value_info.
template <class F>
void each_value_type(onnx::GraphProto& g, F f) {
  for (auto* list : {g.mutable_input(), g.mutable_output(), g.mutable_value_info()})
    for (auto& vi : *list)
      if (vi.type().has_tensor_type()) f(*vi.mutable_type()->mutable_tensor_type());
}

}  // namespace

bool double_as_float(onnx::ModelProto& model, std::map<std::string, std::vector<double>>& doubles) {
  onnx::GraphProto& g = *model.mutable_graph();
  Seen seen;
  each_value_type(g, [&](const onnx::TypeProto::Tensor& t) { seen.type(t.elem_type()); });
  for (const auto& t : g.initializer()) seen.type(t.data_type());
  for (auto& node : *g.mutable_node()) {
    if (TensorProto* t = constant_value(node)) seen.type(t->data_type());
    if (onnx::AttributeProto* to = cast_to(node)) seen.type(static_cast<int>(to->i()));
    for (const auto& a : node.attribute())
      if (a.name() == "value_float" || a.name() == "value_floats") seen.flt = true;
  }
  if (!seen.dbl || seen.flt) return false;
  each_value_type(g, [](onnx::TypeProto::Tensor& t) {
    if (t.elem_type() == TensorProto::DOUBLE) t.set_elem_type(TensorProto::FLOAT);
  });
  for (auto& t : *g.mutable_initializer())
    if (t.data_type() == TensorProto::DOUBLE) to_float(t, t.name(), doubles);
  for (auto& node : *g.mutable_node()) {
    TensorProto* t = constant_value(node);
    if (t && t->data_type() == TensorProto::DOUBLE && node.output_size() == 1) to_float(*t, node.output(0), doubles);
    onnx::AttributeProto* to = cast_to(node);
    if (to && to->i() == TensorProto::DOUBLE) to->set_i(TensorProto::FLOAT);
  }
  return true;
}

void to_float(TensorProto& t, const std::string& name, std::map<std::string, std::vector<double>>& doubles) {
  std::vector<double> v;
  numbers_of(t, v);
  t.clear_double_data();
  t.clear_raw_data();
  t.set_data_type(TensorProto::FLOAT);
  for (double x : v) t.add_float_data(static_cast<float>(x));
  doubles[name] = std::move(v);
}

namespace {

// The shortest text that reads back as the same value of its type, with a
// ".0" where it would read as an integer.
template <typename Real>
std::string shortest_text(Real v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string format_double(double v) { return shortest_text(v); }

// ONNX's attributes and tensors are f32: 0.35f prints as 0.35, not 0.3499999940395355.
std::string detail::format_float(float v) { return shortest_text(v); }

}  // namespace wfgen::onnx_import

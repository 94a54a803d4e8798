// Old opsets through libonnx's version converter (upgrade.hpp).
#include "wfgen/onnx/upgrade.hpp"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <exception>
#include <map>
#include <string>
#include <vector>

#include "wfgen/support/diagnostics.hpp"

namespace wfgen::onnx_import {

// The first line of an ONNX exception's message. It quotes the file's
// operator types and names, which escape_names has made printable ASCII
// (their line breaks are `\n` text): the line breaks left are ONNX's own.
// Anything else that is not printable becomes '?', so the message is one
// printable line whatever the converter says.
std::string onnx_error_line(const char* what) {
  std::string s = what;
  while (!s.empty() && (s.front() == '\n' || s.front() == ' ')) s.erase(s.begin());
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

namespace {

// Attributes written before IR 3 (PyTorch's opset-6 exports among them)
// have no `type`: it is the one value field they set. ONNX's checker and
// converter read the type, so it is filled in from that field; an
// attribute with no field or several keeps UNDEFINED and the checker
// refuses it.
void type_attributes(onnx::GraphProto& g) {
  using A = onnx::AttributeProto;
  for (auto& node : *g.mutable_node()) {
    for (auto& a : *node.mutable_attribute()) {
      if (a.type() != A::UNDEFINED) continue;
      std::vector<A::AttributeType> set;
      if (a.has_f()) set.push_back(A::FLOAT);
      if (a.has_i()) set.push_back(A::INT);
      if (a.has_s()) set.push_back(A::STRING);
      if (a.has_t()) set.push_back(A::TENSOR);
      if (a.has_g()) set.push_back(A::GRAPH);
      if (a.floats_size()) set.push_back(A::FLOATS);
      if (a.ints_size()) set.push_back(A::INTS);
      if (a.strings_size()) set.push_back(A::STRINGS);
      if (a.tensors_size()) set.push_back(A::TENSORS);
      if (a.graphs_size()) set.push_back(A::GRAPHS);
      if (set.size() == 1) a.set_type(set[0]);
      if (a.has_g()) type_attributes(*a.mutable_g());
      for (auto& sub : *a.mutable_graphs()) type_attributes(sub);
    }
  }
}

// The rank of value `name` as the graph's inputs or ONNX's shape inference
// give it; -1 when unknown.
int rank_of(const onnx::GraphProto& g, const std::string& name) {
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()}) {
    for (const auto& vi : *list) {
      if (vi.name() == name && vi.type().tensor_type().has_shape()) return vi.type().tensor_type().shape().dim_size();
    }
  }
  return -1;
}

// PRelu before opset 7 applies a slope of shape [C] per channel (axis 1);
// from opset 7 on the slope broadcasts from the last axis, and the
// converter has no adapter between the two. A [C] slope initializer read by
// this node alone, of an input of rank > 2, becomes [C 1 ...].
void prelu_slopes_per_channel(onnx::GraphProto& g) {
  std::map<std::string, int> uses;
  for (const auto& n : g.node())
    for (const auto& in : n.input()) ++uses[in];
  for (const auto& n : g.node()) {
    if (n.op_type() != "PRelu" || n.input_size() < 2 || uses[n.input(1)] != 1) continue;
    const int rank = rank_of(g, n.input(0));
    for (auto& t : *g.mutable_initializer()) {
      if (t.name() != n.input(1) || t.dims_size() != 1 || rank <= 2) continue;
      for (int k = 2; k < rank; ++k) t.add_dims(1);
    }
  }
}

}  // namespace

void upgrade_opset(onnx::ModelProto& model, const std::string& path, int from) {
  std::string step = "checking";
  type_attributes(*model.mutable_graph());
  try {
    onnx::checker::check_model(model);
    // The converter's adapters read the shapes of the values they touch
    // (Softmax 12 -> 13, the broadcasting of opset 6 -> 7), which only
    // ONNX's shape inference gives an exported graph.
    step = "inferring the shapes of";
    onnx::shape_inference::InferShapes(model);
    prelu_slopes_per_channel(*model.mutable_graph());
    step = "converting";
    onnx::ModelProto upgraded = onnx::version_conversion::ConvertVersion(model, kUpgradeOpset);
    model = std::move(upgraded);
    return;
  } catch (const std::exception& e) {
    Diagnostic d;
    d.loc.file = path;
    d.message = path + " uses opset " + std::to_string(from) + ", which wfgen imports by upgrading it to opset " +
                std::to_string(kUpgradeOpset) + " with ONNX's version converter, but " + step + " it failed: " +
                onnx_error_line(e.what());
    throw UserError(d);
  }
}

}  // namespace wfgen::onnx_import

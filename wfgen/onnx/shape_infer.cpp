// libonnx's shape inference with data propagation (shape_infer.hpp).
#include "wfgen/onnx/shape_infer.hpp"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <exception>
#include <map>
#include <unordered_map>

#include "wfgen/onnx/upgrade.hpp"

namespace wfgen::onnx_import {

namespace {

InferredDims dims_of(const onnx::TensorShapeProto& shape) {
  InferredDims out;
  for (const auto& d : shape.dim()) out.push_back(d.has_dim_value() ? std::optional<std::int64_t>(d.dim_value()) : std::nullopt);
  return out;
}

void record(const onnx::ValueInfoProto& vi, Inference& out) {
  if (!vi.type().has_tensor_type()) return;
  const auto& tt = vi.type().tensor_type();
  InferredValue v;
  v.type = tt.elem_type();
  if (tt.has_shape()) v.dims = dims_of(tt.shape());
  out.values[vi.name()] = std::move(v);
}

// What inference reads of an initializer: its type and dims, and the
// values of small ones (shapes, axes, indices, Resize's scales). A large
// one's data is left out of the copy (weights can be gigabytes).
bool data_needed(const onnx::TensorProto& t) {
  std::int64_t n = 1;
  for (auto d : t.dims()) n = n <= 4096 && d >= 0 && d <= 4096 ? n * d : 4097;  // no overflow: both <= 4096
  return n <= 4096 || t.data_type() == onnx::TensorProto::INT64 || t.data_type() == onnx::TensorProto::INT32;
}

}  // namespace

Inference infer_shapes(const onnx::ModelProto& model, const std::map<std::string, std::int64_t>& fixed,
                       const std::vector<const onnx::TensorProto*>& frozen, const std::string& path) {
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  int opset = 0;
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = static_cast<int>(op.version());
  if (!known.count("") || opset > known.at("").second) return {};
  for (const auto& node : model.graph().node())
    if (!onnx::OpSchemaRegistry::Schema(node.op_type(), opset, "")) return {};
  std::string step = "ONNX's checker refuses a node of it";
  try {
    // Shape inference assumes valid nodes (as many inputs as the schema
    // takes, attributes of the right types): ONNX's checker of nodes first.
    // Not check_model: it also refuses a graph output without a shape,
    // which inference fills in.
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(model.ir_version()));
    std::unordered_map<std::string, int> imports;
    for (const auto& op : model.opset_import()) imports[op.domain()] = static_cast<int>(op.version());
    ctx.set_opset_imports(imports);
    onnx::checker::LexicalScopeContext scope;
    for (const auto& input : model.graph().input()) scope.add(input.name());
    for (const auto& init : model.graph().initializer()) scope.add(init.name());
    for (const auto& node : model.graph().node()) {
      onnx::checker::check_node(node, ctx, scope);
      for (const auto& out : node.output()) scope.add(out);
    }
    step = "ONNX's shape inference fails on it";
    onnx::ModelProto copy;
    copy.set_ir_version(model.ir_version());
    copy.mutable_opset_import()->CopyFrom(model.opset_import());
    copy.mutable_functions()->CopyFrom(model.functions());
    onnx::GraphProto& g = *copy.mutable_graph();
    const onnx::GraphProto& from = model.graph();
    g.mutable_node()->CopyFrom(from.node());
    g.mutable_input()->CopyFrom(from.input());
    g.mutable_output()->CopyFrom(from.output());
    g.mutable_value_info()->CopyFrom(from.value_info());
    for (const auto& t : from.initializer()) {
      onnx::TensorProto* c = g.add_initializer();
      if (data_needed(t)) {
        *c = t;
        continue;
      }
      c->set_name(t.name());
      c->set_data_type(t.data_type());
      c->mutable_dims()->CopyFrom(t.dims());
    }
    for (const auto* t : frozen) *g.add_initializer() = *t;
    std::map<std::string, const onnx::TensorProto*> initializers;
    for (const auto& t : from.initializer()) initializers[t.name()] = &t;
    for (auto& vi : *g.mutable_input()) {
      if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
      // An initializer listed as an input (IR < 4) has its own dims, which
      // the upgrade may have changed (PRelu's slope, upgrade.cpp).
      if (auto init = initializers.find(vi.name()); init != initializers.end()) {
        auto* shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
        shape->clear_dim();
        for (auto d : init->second->dims()) shape->add_dim()->set_dim_value(d);
        continue;
      }
      for (auto& d : *vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
        auto f = d.has_dim_param() ? fixed.find(d.dim_param()) : fixed.end();
        if (f != fixed.end()) d.set_dim_value(f->second);
      }
    }
    std::unordered_map<std::string, onnx::TensorShapeProto> data;
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*error_mode=*/1, /*enable_data_propagation=*/true);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), options, &data);
    Inference out;
    for (const auto& vi : copy.graph().value_info()) record(vi, out);
    for (const auto& vi : copy.graph().output()) record(vi, out);
    for (const auto& [name, shape] : data) out.data[name] = dims_of(shape);
    return out;
  } catch (const std::exception& e) {
    Inference out;
    out.refused = "cannot import " + path + ": " + step + ": " + onnx_error_line(e.what());
    return out;
  }
}

}  // namespace wfgen::onnx_import

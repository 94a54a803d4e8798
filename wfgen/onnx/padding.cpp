// ONNX import: Pad and Tile as views and concats of the stdlib (narrow,
// broadcast_to, concat), so they train like any other statement and need no
// kernel of their own. Each padded or tiled axis is one statement.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>

#include "wfgen/onnx/importer.hpp"
#include "wfgen/onnx/operator_table.hpp"
#include "wfgen/onnx/tensors.hpp"

namespace wfgen::onnx_import::detail {

namespace {

std::string narrow(const std::string& x, std::int64_t axis, std::int64_t start, std::int64_t length) {
  return x + ".narrow(" + std::to_string(axis) + ", " + std::to_string(start) + ", " + std::to_string(length) + ")";
}

std::string concat(const std::string& a, const std::string& b, std::int64_t axis) {
  return "concat(" + a + ", " + b + ", axis=" + std::to_string(axis) + ")";
}

}  // namespace

// The pads of every axis, [begin..., end...] (an attribute before opset
// 11, a constant input after; opset 18's `axes` says which axes they are).
std::vector<std::int64_t> Importer::pad_amounts(const onnx::NodeProto& node, std::int64_t rank) {
  std::vector<std::int64_t> pads;
  if (opset_ < 11) pads = attr_ints(node, "pads").value_or(std::vector<std::int64_t>{});
  else pads = int_constant(node, 1, "its pads");
  std::vector<std::int64_t> axes;
  if (opset_ >= 18 && node.input_size() > 3 && !node.input(3).empty()) {
    for (auto a : int_constant(node, 3, "its axes")) axes.push_back(axis_in(node, a, rank));
  } else {
    for (std::int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  const auto n = static_cast<std::int64_t>(axes.size());
  if (static_cast<std::int64_t>(pads.size()) != 2 * n) {
    unsupported(node, std::to_string(pads.size()) + " pads for " + std::to_string(n) + " axes (2 a axis are needed)");
  }
  std::vector<std::int64_t> out(2 * static_cast<std::size_t>(rank), 0);
  for (std::int64_t k = 0; k < n; ++k) {
    out[static_cast<std::size_t>(axes[k])] = pads[static_cast<std::size_t>(k)];
    out[static_cast<std::size_t>(rank + axes[k])] = pads[static_cast<std::size_t>(n + k)];
  }
  return out;
}

// The constant of Pad's constant mode: the `value` attribute before opset
// 11, the optional scalar input `constant_value` after (0 when absent).
float Importer::pad_value(const onnx::NodeProto& node) {
  if (opset_ < 11) return attr_float(node, "value", 0.0f);
  if (node.input_size() < 3 || node.input(2).empty()) return 0.0f;
  const onnx::TensorProto* t = constant(node.input(2));
  std::vector<double> v;
  if (!t || !numbers_of(*t, v) || v.size() != 1) unsupported(node, "a constant_value that is not a constant scalar");
  if (!std::isfinite(v[0])) unsupported(node, "a constant_value that is not finite");
  return static_cast<float>(v[0]);
}

// Pad (constant, reflect, edge) axis by axis: negative pads crop with a
// narrow view; the padding is a constant [1 ... 1] parameter broadcast to the
// block (constant), the first or last slice broadcast (edge), or the mirrored
// slices one at a time (reflect), joined to the input with concat.
void Importer::import_pad(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  const std::string mode = attr(node, "mode") ? attr(node, "mode")->s() : "constant";
  if (mode != "constant" && mode != "reflect" && mode != "edge") unsupported(node, "mode '" + mode + "'");
  const std::vector<std::int64_t> pads = pad_amounts(node, rank);
  const float value = mode == "constant" ? pad_value(node) : 0.0f;
  Dims dims = *x.dims;
  std::string cur = x.body;
  const std::string base = identifier(node.output(0) + "_pad", "pad");
  std::string fill;  // the [1 ... 1] parameter holding the constant, made once
  for (std::int64_t a = 0; a < rank; ++a) {
    std::int64_t begin = pads[static_cast<std::size_t>(a)], end = pads[static_cast<std::size_t>(rank + a)];
    if (!begin && !end) continue;
    auto& size = dims[static_cast<std::size_t>(a)];
    if (!size) unsupported(node, "padding axis " + std::to_string(a) + ", whose size is known only at run time");
    if (begin < 0 || end < 0) {  // cropping
      const std::int64_t b = std::max<std::int64_t>(0, -begin), e = std::max<std::int64_t>(0, -end);
      if (b + e > *size) unsupported(node, "pads that crop more than the " + std::to_string(*size) + " elements of axis " + std::to_string(a));
      cur = narrow(cur, a, b, *size - b - e);
      *size -= b + e;
      begin = std::max<std::int64_t>(0, begin);
      end = std::max<std::int64_t>(0, end);
    }
    if (mode == "reflect" && (begin >= *size || end >= *size)) {
      unsupported(node, "reflect pads of " + std::to_string(begin) + " and " + std::to_string(end) + " on an axis of " +
                            std::to_string(*size) + " (each must be below the size)");
    }
    if (mode != "constant" && *size == 0) unsupported(node, mode + " padding of an empty axis");
    auto block = [&](std::int64_t n, bool before) -> std::string {
      Dims d = dims;
      d[static_cast<std::size_t>(a)] = n;
      if (mode == "constant") {
        std::vector<std::int64_t> ones(static_cast<std::size_t>(rank), 1);
        for (const auto& k : d)
          if (!k) unsupported(node, "constant padding of an input whose dims are known only at run time");
        if (fill.empty()) fill = as_dtype(float_parameter(node, node.output(0) + "_value", ones, {value}), x.dtype);
        return fill + ".broadcast_to(" + reshape_args(node, d) + ")";
      }
      if (mode == "edge") return narrow(cur, a, before ? 0 : *size - 1, 1) + ".broadcast_to(" + reshape_args(node, d) + ")";
      // reflect: x[n], ..., x[1] before; x[size-2], ..., x[size-1-n] after
      std::string r;
      for (std::int64_t k = 0; k < n; ++k) {
        std::string s = narrow(cur, a, before ? n - k : *size - 2 - k, 1);
        r = r.empty() ? s : concat(r, s, a);
      }
      return r;
    };
    std::string expr = cur;
    if (begin) expr = concat(block(begin, true), expr, a);
    if (end) expr = concat(expr, block(end, false), a);
    *size += begin + end;
    const std::string step = identifier(base + "_" + std::to_string(a), "pad");
    line(step + " = " + expr, "Pad '" + node.name() + "': axis " + std::to_string(a));
    cur = step;
  }
  define(node, 0, cur + " * 1.0", dims, x.dtype);
}

// Tile: each repeated axis is the input joined to itself `repeats` times
// with concat (two at a time, as Concat).
void Importer::import_tile(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  const std::vector<std::int64_t> repeats = int_constant(node, 1, "its repeats");
  if (static_cast<std::int64_t>(repeats.size()) != rank) {
    unsupported(node, std::to_string(repeats.size()) + " repeats for an input of rank " + std::to_string(rank));
  }
  constexpr std::int64_t kMaxRepeats = 256;  // one concat each
  Dims dims = *x.dims;
  std::string cur = x.body;
  for (std::int64_t a = 0; a < rank; ++a) {
    const std::int64_t r = repeats[static_cast<std::size_t>(a)];
    if (r < 0 || r > kMaxRepeats) unsupported(node, "repeats " + std::to_string(r) + " (wfgen tiles 0 to " + std::to_string(kMaxRepeats) + " times)");
    if (r == 0) unsupported(node, "repeats 0 (an empty result)");
    if (r == 1) continue;
    std::string expr = cur;
    for (std::int64_t k = 1; k < r; ++k) expr = concat(expr, cur, a);
    const std::string step = identifier(node.output(0) + "_tile_" + std::to_string(a), "tile");
    line(step + " = " + expr, "Tile '" + node.name() + "': axis " + std::to_string(a));
    cur = step;
    auto& size = dims[static_cast<std::size_t>(a)];
    if (size) *size *= r;
  }
  define(node, 0, cur + " * 1.0", dims);
}

}  // namespace wfgen::onnx_import::detail

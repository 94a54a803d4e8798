// ONNX import: operators that rearrange or multiply slices of a tensor
// with the stdlib's views (reshape, permute, narrow) and element-wise nodes:
// DepthToSpace and SpaceToDepth, ReduceProd's products of slices, and
// CumSum (the stdlib's cumsum along the last axis, the axis swapped there).
#include <onnx/onnx_pb.h>

#include <array>
#include <set>

#include "wfgen/onnx/importer.hpp"

namespace wfgen::onnx_import::detail {

Dims Importer::reduced_dims(Dims d, const std::set<std::int64_t, std::greater<>>& axes, bool keep) {
  for (auto a : axes) {
    if (keep) d[static_cast<std::size_t>(a)] = 1;
    else d.erase(d.begin() + a);
  }
  return d;
}

// ReduceProd without a product reduction in the stdlib: the product of the
// axis's one-wide slices, x.narrow(a, 0, 1) * x.narrow(a, 1, 1) * ...,
// multiplied in index order as a loop would. Each reduced axis multiplies
// the text by its size, so the reduced elements per output are capped.
std::string Importer::product_over(const onnx::NodeProto& node, const Value& x, const std::set<std::int64_t, std::greater<>>& axes,
                                   bool keep) {
  constexpr std::int64_t kMaxFactors = 64;
  std::int64_t factors = 1;
  std::string expr = x.body;
  for (auto a : axes) {
    const auto n = (*x.dims)[static_cast<std::size_t>(a)];
    if (!n || *n < 1) unsupported(node, "a reduced axis of size unknown when importing, or empty");
    factors *= *n;
    if (factors > kMaxFactors)
      unsupported(node, "a product of more than " + std::to_string(kMaxFactors) + " elements per output (wfgen writes ReduceProd as products of slices)");
    std::string p;
    for (std::int64_t k = 0; k < *n; ++k)
      p += (k ? " * " : "") + std::string("(") + expr + ").narrow(" + std::to_string(a) + ", " + std::to_string(k) + ", 1)";
    expr = *n == 1 ? "(" + expr + ") * 1.0" : p;
  }
  if (keep) return expr;
  return "(" + expr + ").reshape(" + reshape_args(node, reduced_dims(*x.dims, axes, false)) + ")";
}

// DepthToSpace (modes DCR and CRD) and SpaceToDepth on [N C H W] as a view:
// the reshape to rank 6 that splits the blocks off, a permute, and the
// reshape back (ONNX defines both operators this way).
void Importer::import_depth_space(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  if (rank_of(node, x) != 4) unsupported(node, "an input of rank " + std::to_string(rank_of(node, x)) + " (N C H W)");
  const std::int64_t b = attr_int(node, "blocksize", 0);
  if (b < 1) unsupported(node, "blocksize = " + std::to_string(b));
  std::array<std::int64_t, 4> d{};
  for (std::size_t k = 0; k < 4; ++k) {
    if (!(*x.dims)[k]) unsupported(node, "a dim known only at run time (axis " + std::to_string(k) + ")");
    d[k] = *(*x.dims)[k];
  }
  const auto [n, c, h, w] = d;
  Dims split, out;
  std::string perm;
  if (node.op_type() == "SpaceToDepth") {
    if (h % b || w % b) unsupported(node, "H and W not multiples of blocksize " + std::to_string(b));
    split = {n, c, h / b, b, w / b, b};
    perm = "0, 3, 5, 1, 2, 4";
    out = {n, c * b * b, h / b, w / b};
  } else {
    if (c % (b * b)) unsupported(node, "C not a multiple of blocksize^2 = " + std::to_string(b * b));
    const std::string mode = attr(node, "mode") ? attr(node, "mode")->s() : "DCR";
    if (mode != "DCR" && mode != "CRD") unsupported(node, "mode = '" + mode + "'");
    split = mode == "DCR" ? Dims{n, b, b, c / (b * b), h, w} : Dims{n, c / (b * b), b, b, h, w};
    perm = mode == "DCR" ? "0, 3, 4, 1, 5, 2" : "0, 1, 4, 2, 5, 3";
    out = {n, c / (b * b), h * b, w * b};
  }
  define(node, 0, "(" + x.body + ".reshape(" + reshape_args(node, split) + ").permute(" + perm + ") * 1.0).reshape(" + reshape_args(node, out) + ")",
         out);
}

// CumSum along a constant axis (a FLOAT, DOUBLE, INT64 or INT32 tensor):
// the stdlib's cumsum runs along the last axis, so another axis is swapped
// with the last one as a view, and back (the swap is its own inverse).
void Importer::import_cumsum(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  const Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its operand is a constant scalar (CumSum needs rank 1 or more)");
  const std::vector<std::int64_t> axis_value = int_constant(node, 1, "axis");
  if (axis_value.size() != 1) {
    unsupported(node, "axis '" + node.input(1) + "' holds " + std::to_string(axis_value.size()) + " values (one is needed)");
  }
  const std::int64_t rank = rank_of(node, x);
  if (rank == 0) unsupported(node, "an input of rank 0 (CumSum needs rank 1 or more)");
  const std::int64_t axis = axis_in(node, axis_value[0], rank);
  std::string args;
  if (attr_int(node, "exclusive", 0) != 0) args += ", exclusive=true";
  if (attr_int(node, "reverse", 0) != 0) args += ", reverse=true";
  if (axis == rank - 1) {
    define(node, 0, "cumsum(" + x.body + args + ")", x.dims, x.dtype);
    return;
  }
  std::string perm;
  for (std::int64_t k = 0; k < rank; ++k) {
    const std::int64_t from = k == axis ? rank - 1 : k == rank - 1 ? axis : k;
    perm += (k == 0 ? "" : ", ") + std::to_string(from);
  }
  define(node, 0, "cumsum(" + x.body + ".permute(" + perm + ")" + args + ").permute(" + perm + ")", x.dims, x.dtype);
}

}  // namespace wfgen::onnx_import::detail

// ONNX import, the layers: Conv and the pools over im2col's windows,
// BatchNormalization and LayerNormalization as element-wise statements, and
// the losses with targets known when importing. import_node() in
// operators.cpp dispatches to them.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "wfgen/onnx/importer.hpp"
#include "wfgen/onnx/tensors.hpp"
#include "wfgen/onnx/windows.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::onnx_import::detail {

// The spatial sizes (axes 2, 3) of a Conv's or pool's input, which im2col
// needs known. A 1-D input [N C L] (Conv1d, MaxPool1d) is an image of
// height 1: {1, L}, and `image` is then the statement's view of it as
// [N C 1 L] (else x itself).
std::vector<std::int64_t> Importer::image_size(const onnx::NodeProto& node, const Value& x, std::string& image) {
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  if (rank < 3 || rank > 5) {
    unsupported(node, "an input of rank " + std::to_string(rank) + " (" + std::to_string(std::max<std::int64_t>(0, rank - 2)) +
                          " spatial axes); wfgen maps 1-D, 2-D and 3-D windows over N C L, N C H W and N C D H W");
  }
  const Dims& d = *x.dims;
  for (std::int64_t k = 1; k < rank; ++k)
    if (!d[k]) unsupported(node, "an input whose channels or spatial sizes are not known when importing");
  if (rank == 5) {
    image = x.body;
    return {*d[2], *d[3], *d[4]};
  }
  if (rank == 3) {
    image = x.body + ".reshape(" + reshape_args(node, {d[0], d[1], 1, d[2]}) + ")";
    return {1, *d[2]};
  }
  image = x.body;
  return {*d[2], *d[3]};
}

// The output dims [N C out...] of a window node, 1-D when its input is.
static Dims window_out(const Value& x, std::int64_t c, const std::vector<WindowAxis>& p) {
  if (x.dims->size() == 3) return {(*x.dims)[0], c, p[1].out};
  if (p.size() == 3) return {(*x.dims)[0], c, p[0].out, p[1].out, p[2].out};
  return {(*x.dims)[0], c, p[0].out, p[1].out};
}

// The elements of one window (kd*kh*kw) and the windows of one channel (od*oh*ow).
static std::int64_t window_size(const std::vector<WindowAxis>& p) {
  std::int64_t n = 1;
  for (const auto& a : p) n *= a.kernel;
  return n;
}
static std::int64_t window_count(const std::vector<WindowAxis>& p) {
  std::int64_t n = 1;
  for (const auto& a : p) n *= a.out;
  return n;
}

WindowAttrs Importer::window_attrs(const onnx::NodeProto& node, std::vector<std::int64_t> kernel, bool one_d) {
  WindowAttrs a;
  if (auto k = attr_ints(node, "kernel_shape")) {
    if (!kernel.empty() && *k != kernel) unsupported(node, "kernel_shape differs from the weights' shape");
    kernel = *k;
  }
  if (kernel.empty()) unsupported(node, "it has no kernel_shape");
  a.kernel = kernel;
  a.strides = attr_ints(node, "strides").value_or(std::vector<std::int64_t>{});
  a.dilations = attr_ints(node, "dilations").value_or(std::vector<std::int64_t>{});
  a.pads = attr_ints(node, "pads").value_or(std::vector<std::int64_t>{});
  if (const auto* p = attr(node, "auto_pad")) a.auto_pad = p->s();
  a.ceil_mode = attr_int(node, "ceil_mode", 0) != 0;
  return one_d ? lift_to_2d(a) : a;
}

std::vector<WindowAxis> Importer::plan(const onnx::NodeProto& node, const std::vector<std::int64_t>& in, const WindowAttrs& a) {
  std::string why;
  std::optional<std::vector<WindowAxis>> p = plan_windows(in, a, why);
  if (!p) unsupported(node, why);
  return *p;
}

// im2col of `x` (of c channels) for plan `p`, viewed as [N c*kh*kw grid_h
// grid_w] and sliced to ONNX's windows [N c*kh*kw out_h out_w].
std::string Importer::windows(const onnx::NodeProto& node, const std::string& x, std::int64_t c, const std::vector<WindowAxis>& p,
                    const std::string& tag) {
  if (p.size() == 3) return volume_windows(node, x, c, p, tag);
  std::string col = identifier(node.output(0) + "_" + tag, tag);
  line(col + " = im2col(" + x + ", k_h=" + std::to_string(p[0].kernel) + ", k_w=" + std::to_string(p[1].kernel) +
           ", stride_h=" + std::to_string(p[0].stride) + ", stride_w=" + std::to_string(p[1].stride) + ", pad_h=" +
           std::to_string(p[0].pad) + ", pad_w=" + std::to_string(p[1].pad) + ", dilation_h=" + std::to_string(p[0].dilation) +
           ", dilation_w=" + std::to_string(p[1].dilation) + ").reshape(-1, " + std::to_string(c * p[0].kernel * p[1].kernel) +
           ", " + std::to_string(p[0].grid) + ", " + std::to_string(p[1].grid) + ")",
       "the windows of " + label(node));
  if (const std::string slice = window_slice(p); !slice.empty()) line(col + " = " + col + slice, "ONNX's pads differ at the two ends");
  return col;
}

// The slice `[:, :, a:b, c:d]` that keeps ONNX's windows of the grid a
// window builtin computes with symmetric padding, or "" when they are the grid.
std::string Importer::window_slice(const std::vector<WindowAxis>& p) {
  if (!p[0].offset && !p[1].offset && p[0].grid == p[0].out && p[1].grid == p[1].out) return "";
  auto range = [](const WindowAxis& w) { return std::to_string(w.offset) + ":" + std::to_string(w.offset + w.out); };
  return "[:, :, " + range(p[0]) + ", " + range(p[1]) + "]";
}

// The node depthwise_conv2d over the grid of plan `p` (symmetric padding),
// sliced to ONNX's windows when its pads differ at the two ends.
std::string Importer::depthwise(const onnx::NodeProto& node, const std::string& x, const std::string& w, std::int64_t c,
                                const std::vector<WindowAxis>& p) {
  const std::string y = identifier(node.output(0) + "_dw", "dw");
  auto s = [](std::int64_t v) { return std::to_string(v); };
  line(y + " = depthwise_conv2d(" + x + ", " + w + ".reshape(" + s(c) + ", " + s(p[0].kernel) + ", " + s(p[1].kernel) + "), k_h=" +
           s(p[0].kernel) + ", k_w=" + s(p[1].kernel) + ", stride_h=" + s(p[0].stride) + ", stride_w=" + s(p[1].stride) +
           ", pad_h=" + s(p[0].pad) + ", pad_w=" + s(p[1].pad) + ", dilation_h=" + s(p[0].dilation) + ", dilation_w=" +
           s(p[1].dilation) + ")" + window_slice(p),
       label(node) + ": one filter per channel (group = channels)");
  return y + ".reshape(-1, " + s(c) + ", " + s(window_count(p)) + ")";
}

// Whether a Conv of c input and m output channels, group 1, a 3 x 3 kernel
// at stride 1 without dilation and an output plane of out_h x out_w runs as
// winograd_conv2d rather than im2col + a GEMM. Winograd saves 4x of the
// multiply-adds (F(4 x 4)) but transforms the filters at every call (W may
// change between calls), the input and the output once each, and its
// alpha^2 products over the channels are small GEMMs (output channels x
// channels by channels x tiles) that run far below the peak of the one
// im2col GEMM. Measured at one thread (rt::gemm, ResNet-18's shapes, ms,
// Winograd against the GEMM alone): 64 channels at 56 x 56 0.7-0.9 against
// 1.1-1.2; 128 at 28 x 28 1.5-1.7 against 1.0-1.7; 256 at 14 x 14 2.6-3.8
// against 1.7; 512 at 7 x 7 5.9-15 against 2.1. So: large planes only.
static bool winograd_wins(std::int64_t c, std::int64_t m, std::int64_t out_h, std::int64_t out_w) {
  return c >= 16 && m >= 16 && out_h * out_w >= 1024;
}

// The node winograd_conv2d over the grid of plan `p` (symmetric padding),
// sliced to ONNX's windows when its pads differ at the two ends.
std::string Importer::winograd(const onnx::NodeProto& node, const std::string& x, const std::string& w, std::int64_t m,
                               const std::vector<WindowAxis>& p) {
  const std::string y = identifier(node.output(0) + "_wino", "wino");
  auto s = [](std::int64_t v) { return std::to_string(v); };
  line(y + " = winograd_conv2d(" + x + ", " + w + ", pad_h=" + s(p[0].pad) + ", pad_w=" + s(p[1].pad) + ")" + window_slice(p),
       label(node) +
           ": 3 x 3 at stride 1, by Winograd's minimal filtering (fewer multiply-adds than im2col + matmul)");
  return y + ".reshape(-1, " + s(m) + ", " + s(window_count(p)) + ")";
}

// Conv as im2col + one batched matmul, as the stdlib's conv2d; a pointwise
// one (1 x 1, stride 1, no padding) as the matmul alone; a depthwise one
// (group = input channels = output channels, 2-D) as the node
// depthwise_conv2d, which sums each output's taps in registers; a 3 x 3
// one at stride 1 (group 1, 2-D) where winograd_wins as winograd_conv2d.
void Importer::import_conv(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0), w = operand(node, 1);
  std::string image;
  const std::vector<std::int64_t> in = image_size(node, x, image);
  const bool one_d = x.dims->size() == 3;
  const std::size_t w_rank = x.dims->size();
  bool known = !w.literal && w.dims && w.dims->size() == w_rank;
  for (std::size_t k = 0; known && k < w_rank; ++k) known = k == 1 || (*w.dims)[k].has_value();
  if (!known) {
    static const char* const shapes[] = {"[M C/group k]", "[M C/group kh kw]", "[M C/group kd kh kw]"};
    unsupported(node, std::string("weights that are not a known ") + shapes[w_rank - 3] + " tensor");
  }
  const std::int64_t m = *(*w.dims)[0], c = *(*x.dims)[1];
  std::vector<std::int64_t> kernel;  // the weights' spatial sizes
  for (std::size_t k = 2; k < w_rank; ++k) kernel.push_back(*(*w.dims)[k]);
  const std::int64_t groups = attr_int(node, "group", 1);
  if (groups < 1 || c % groups != 0 || m % groups != 0) {
    unsupported(node, "group = " + std::to_string(groups) + " with " + std::to_string(c) + " input and " + std::to_string(m) +
                          " output channels (group must divide both)");
  }
  if ((*w.dims)[1] != c / groups) {
    unsupported(node, "weights for " + std::to_string((*w.dims)[1].value_or(-1)) + " channels per group, the input has " +
                          std::to_string(c) + " channels in " + std::to_string(groups) + " group(s)");
  }
  const std::vector<WindowAxis> p = plan(node, in, window_attrs(node, kernel, one_d));
  const bool depthwise_conv = groups > 1 && groups == c && m == c && p.size() == 2;
  const bool winograd_conv = groups == 1 && p.size() == 2 && std::all_of(p.begin(), p.end(), [](const WindowAxis& a) {
    return a.kernel == 3 && a.stride == 1 && a.dilation == 1;
  }) && options_.winograd && winograd_wins(c, m, p[0].out, p[1].out);
  // A 1 x 1 window at stride 1 without padding sees each pixel alone: the
  // input viewed as [N C pixels] is already the product's right operand,
  // which im2col would only copy (MobileNet's pointwise convolutions).
  const bool pointwise = std::all_of(p.begin(), p.end(), [](const WindowAxis& a) {
    return a.kernel == 1 && a.stride == 1 && a.begin == 0 && a.out == a.in;
  });
  const std::string col = depthwise_conv || winograd_conv ? "" : pointwise ? "(" + image + ")" : windows(node, image, c, p, "col");
  const std::int64_t patch = c / groups * window_size(p), pixels = window_count(p);
  std::string expr;
  if (depthwise_conv) {
    expr = depthwise(node, image, w.body, c, p);
  } else if (winograd_conv) {
    expr = winograd(node, image, w.body, m, p);
  } else if (groups == 1) {
    expr = w.body + ".reshape(" + std::to_string(m) + ", " + std::to_string(patch) + ") @ " + col + ".reshape(-1, " +
           std::to_string(patch) + ", " + std::to_string(pixels) + ")";
  } else {
    // A grouped convolution is one matmul batched over the groups: group g's
    // m/group filters see only its c/group channels, which are the rows
    // g*patch .. (g+1)*patch of the windows (im2col is channel-major).
    const std::string g = std::to_string(groups);
    expr = "(" + w.body + ".reshape(" + g + ", " + std::to_string(m / groups) + ", " + std::to_string(patch) + ") @ " + col +
           ".reshape(-1, " + g + ", " + std::to_string(patch) + ", " + std::to_string(pixels) + ")).reshape(-1, " + std::to_string(m) +
           ", " + std::to_string(pixels) + ")";
  }
  Dims out = window_out(x, m, p);
  expr = "(" + expr + ").reshape(" + reshape_args(node, out) + ")";
  if (node.input_size() > 2 && !node.input(2).empty()) {
    // The bias added to the output's shape, where the activation after the
    // Conv (Relu, Clip) reads it: fusion makes the two one element-wise pass.
    std::string ones;
    for (std::size_t k = 2; k < out.size(); ++k) ones += ", 1";
    expr += " + " + operand(node, 2).body + ".reshape(" + std::to_string(m) + ones + ")";
  }
  define(node, 0, expr, out);
}

// MaxPool (2-D, no dilation) as the node max_pool; a dilated MaxPool and
// AveragePool over im2col's windows. Padding enters a max as -1e30 and is
// left out of an average's count (count_include_pad 0) by a second im2col of
// a tensor of ones, which is 0 in the padding.
void Importer::import_pool(const onnx::NodeProto& node, const OperatorRow& row) {
  const bool is_max = node.op_type() == "MaxPool";
  only_attributes(node, row.attributes);
  if (is_max && attr_int(node, "storage_order", 0) != 0) unsupported(node, "storage_order = 1");
  need_one_output(node);
  Value x = operand(node, 0);
  std::string image;
  const std::vector<std::int64_t> in = image_size(node, x, image);
  const std::vector<WindowAxis> p = plan(node, in, window_attrs(node, {}, x.dims->size() == 3));
  const bool padded = std::any_of(p.begin(), p.end(), [](const WindowAxis& a) { return a.pad != 0; });
  const bool overhang = std::any_of(p.begin(), p.end(), [](const WindowAxis& a) { return a.overhang != 0; });
  const std::int64_t c = *(*x.dims)[1], k = window_size(p), pixels = window_count(p);
  auto as_windows = [&](const std::string& col) {
    return col + ".reshape(-1, " + std::to_string(c) + ", " + std::to_string(k) + ", " + std::to_string(pixels) + ")";
  };
  if (is_max && p.size() == 2 && p[0].dilation == 1 && p[1].dilation == 1) {
    // The node max_pool: one pass over the input, the padding never the max,
    // and a backward that routes each window's gradient to one element.
    std::string v = "max_pool(" + image + ", k_h=" + std::to_string(p[0].kernel) + ", k_w=" + std::to_string(p[1].kernel) +
                    ", stride_h=" + std::to_string(p[0].stride) + ", stride_w=" + std::to_string(p[1].stride) + ", pad_h=" +
                    std::to_string(p[0].pad) + ", pad_w=" + std::to_string(p[1].pad) + ")";
    if (const std::string slice = window_slice(p); !slice.empty()) v += slice;
    Dims out = window_out(x, c, p);
    define(node, 0, out.size() == 3 ? "(" + v + ").reshape(" + reshape_args(node, out) + ")" : v, out);
    return;
  }
  std::string col = windows(node, image, c, p, "windows");
  std::string inside;  // 1 where a window reads the input, 0 in the padding
  const bool count_pad = !is_max && attr_int(node, "count_include_pad", 0) != 0;
  if (padded && (is_max || !count_pad || overhang)) {
    if (count_pad) unsupported(node, "count_include_pad = 1 with ceil_mode windows past the padding");
    inside = windows(node, image + " * 0.0 + 1.0", c, p, "inside");
  }
  std::string expr;
  if (is_max) {
    std::string v = as_windows(col);
    if (!inside.empty()) v = "(" + v + " + (" + as_windows(inside) + " - 1.0) * 1e30)";
    expr = "max(" + v + ", axis=2)";
  } else if (!inside.empty()) {
    expr = "sum(" + as_windows(col) + ", axis=2) / sum(" + as_windows(inside) + ", axis=2)";
  } else {
    expr = "mean(" + as_windows(col) + ", axis=2)";
  }
  Dims out = window_out(x, c, p);
  define(node, 0, "(" + expr + ").reshape(" + reshape_args(node, out) + ")", out);
}

// Y = (X - mean) / sqrt(var + epsilon) * scale + B, each of the four per
// channel (axis 1) and broadcast over the other axes.
void Importer::import_batchnorm(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  if (opset_ < 9 && attr_int(node, "spatial", 1) != 1) unsupported(node, "spatial = 0");
  if (attr_int(node, "training_mode", 0) != 0) {
    import_batchnorm_training(node);
    return;
  }
  int outputs = 0;
  for (const auto& o : node.output()) outputs += !o.empty();
  if (outputs > 1) unsupported(node, "the running mean and variance outputs (training)");
  Value x = operand(node, 0);
  std::int64_t rank = rank_of(node, x);
  if (rank < 2) unsupported(node, "an input of rank " + std::to_string(rank));
  auto channel = [&](int k) { return per_channel(node, k, rank); };
  float eps = attr_float(node, "epsilon", 1e-5f);
  std::string expr = "(" + x.body + " - " + channel(3) + ") * (" + channel(4) + " + " + format_float(eps) + ") ** -0.5 * " +
                     channel(1) + " + " + channel(2);
  define(node, 0, expr, x.dims);
}

// BatchNormalization with training_mode = 1 (opset 14+), as ONNX's
// reference: Y normalised with the batch's mean and (population) variance
// over every axis but the channels; running_mean and running_var the inputs'
// mean and var * momentum + the batch's * (1 - momentum).
void Importer::import_batchnorm_training(const onnx::NodeProto& node) {
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  if (rank < 2) unsupported(node, "an input of rank " + std::to_string(rank));
  const auto c = (*x.dims)[1];
  auto mean_over = [&](std::string e) {
    for (std::int64_t a = rank - 1; a >= 0; --a)
      if (a != 1) e = "mean(" + e + ", axis=" + std::to_string(a) + ", keepdims=true)";
    return e;
  };
  const std::string base = identifier(node.output(0) + "_bn", "bn");
  for (const char* part : {"_d", "_var"}) used_.insert(base + part);
  line(base + "_d = " + x.body + " - " + mean_over(x.body), "BatchNormalization (training): x - the batch's mean");
  line(base + "_var = " + mean_over(base + "_d * " + base + "_d"), "the batch's variance per channel");
  const float eps = attr_float(node, "epsilon", 1e-5f), momentum = attr_float(node, "momentum", 0.9f);
  define(node, 0, base + "_d * (" + base + "_var + " + format_float(eps) + ") ** -0.5 * " + per_channel(node, 1, rank) + " + " +
                      per_channel(node, 2, rank),
         x.dims);
  const std::string vec = ".reshape(" + reshape_args(node, Dims{c}) + ")";
  for (int k : {1, 2}) {
    if (k >= node.output_size() || node.output(k).empty()) continue;
    Value running = operand(node, k + 2);
    if (running.literal || rank_of(node, running) != 1) unsupported(node, "input " + std::to_string(k + 2) + " is not a vector of channels");
    const std::string batch = k == 1 ? mean_over(x.body) : base + "_var";
    define(node, k, running.body + " * " + format_float(momentum) + " + " + batch + vec + " * " + format_float(1.0f - momentum), Dims{c});
  }
}

// Input k of a normalization, a vector of channels, as [C 1 ...] for an
// input of `rank` (broadcast over the axes after the channels).
std::string Importer::per_channel(const onnx::NodeProto& node, int k, std::int64_t rank) {
  Value v = operand(node, k);
  if (v.literal || rank_of(node, v) != 1) unsupported(node, "input " + std::to_string(k) + " is not a vector of channels");
  std::string shape = reshape_args(node, Dims{(*v.dims)[0]});
  for (std::int64_t a = 2; a < rank; ++a) shape += ", 1";
  return v.body + ".reshape(" + shape + ")";
}

// InstanceNormalization: Y = (X - mean) / sqrt(var + epsilon) * scale + B,
// the mean and variance of each sample and channel over the spatial axes
// (2 on), scale and B per channel.
void Importer::import_instancenorm(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  if (rank < 3) unsupported(node, "an input of rank " + std::to_string(rank) + " (N C and at least one spatial axis)");
  auto mean_over = [&](std::string e) {
    for (std::int64_t a = rank - 1; a >= 2; --a) e = "mean(" + e + ", axis=" + std::to_string(a) + ", keepdims=true)";
    return e;
  };
  const std::string base = identifier(node.output(0) + "_in", "in");
  for (const char* part : {"_d", "_inv"}) used_.insert(base + part);
  line(base + "_d = " + x.body + " - " + mean_over(x.body), "InstanceNormalization: x - mean");
  line(base + "_inv = (" + mean_over(base + "_d * " + base + "_d") + " + " + format_float(attr_float(node, "epsilon", 1e-5f)) +
           ") ** -0.5",
       "1 / sqrt(var + epsilon)");
  define(node, 0, base + "_d * " + base + "_inv * " + per_channel(node, 1, rank) + " + " + per_channel(node, 2, rank), x.dims);
}

// Y = (X - mean) / sqrt(var + epsilon) * Scale + B over the axes from
// `axis` on; Mean and InvStdDev as ONNX defines them (reduced axes kept as 1).
void Importer::import_layernorm(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  if (attr_int(node, "stash_type", 1) != 1) unsupported(node, "stash_type other than FLOAT");
  Value x = operand(node, 0);
  std::int64_t rank = rank_of(node, x);
  std::int64_t axis = axis_in(node, attr_int(node, "axis", -1), rank);
  auto mean_over = [&](std::string e) {
    for (std::int64_t a = rank - 1; a >= axis; --a) e = "mean(" + e + ", axis=" + std::to_string(a) + ", keepdims=true)";
    return e;
  };
  Dims reduced = *x.dims;
  for (std::int64_t a = axis; a < rank; ++a) reduced[static_cast<std::size_t>(a)] = 1;
  float eps = attr_float(node, "epsilon", 1e-5f);
  std::string base = identifier(node.output(0) + "_ln", "ln");
  for (const char* part : {"_mean", "_d", "_inv"}) used_.insert(base + part);
  line(base + "_mean = " + mean_over(x.body), "LayerNormalization: the mean");
  line(base + "_d = " + x.body + " - " + base + "_mean", "");
  line(base + "_inv = (" + mean_over(base + "_d * " + base + "_d") + " + " + format_float(eps) + ") ** -0.5", "1 / sqrt(var + epsilon)");
  std::string y = base + "_d * " + base + "_inv * " + operand(node, 1).body;
  if (node.input_size() > 2 && !node.input(2).empty()) y += " + " + operand(node, 2).body;
  define(node, 0, y, x.dims);
  if (node.output_size() > 1 && !node.output(1).empty()) define(node, 1, base + "_mean * 1.0", reduced);
  if (node.output_size() > 2 && !node.output(2).empty()) define(node, 2, base + "_inv * 1.0", reduced);
}

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (the same on
// log_softmax(x, axis=1)) with targets known when importing (an initializer,
// or a graph input frozen from sample data): the targets become a one-hot
// FLOAT constant O [N C d...], 0 at an ignore_index, and the loss of each
// element is -sum(logp * O * weight, axis=1); reduction sums it, or divides
// the sum by the summed weights of the targets (mean).
void Importer::import_loss(const onnx::NodeProto& node, const OperatorRow& row) {
  const bool sce = node.op_type() == "SoftmaxCrossEntropyLoss";
  only_attributes(node, row.attributes);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  if (rank < 2) unsupported(node, "an input of rank " + std::to_string(rank) + " (expected N C d...)");
  if (rank > rt::kMaxRank) unsupported(node, "an input of rank " + std::to_string(rank) + " (wfgen's kernels go up to rank " + std::to_string(rt::kMaxRank) + ")");
  for (const auto& d : *x.dims)
    if (!d) unsupported(node, "an input with a dim known only at run time; pass --dim to fix it");
  if (node.input_size() < 2 || values_.count(node.input(1)) || !constant(node.input(1))) {
    unsupported(node, "targets computed at run time (wfgen needs them known when importing: an initializer or --freeze-inputs)");
  }
  const std::vector<std::int64_t> target = ints_of(*constant(node.input(1)));
  const std::string reduction = attr(node, "reduction") ? attr(node, "reduction")->s() : "mean";
  if (reduction != "none" && reduction != "sum" && reduction != "mean") unsupported(node, "reduction '" + reduction + "'");
  const Dims& d = *x.dims;
  const std::int64_t n = *d[0], c = *d[1];
  std::int64_t inner = 1;
  for (std::int64_t k = 2; k < rank; ++k) inner *= *d[static_cast<std::size_t>(k)];
  if (static_cast<std::int64_t>(target.size()) != n * inner) {
    unsupported(node, "targets of " + std::to_string(target.size()) + " values for an input of " + std::to_string(n * inner) + " positions");
  }
  const auto* ii = attr(node, "ignore_index");
  std::vector<float> o(static_cast<std::size_t>(n * c * inner), 0.0f);
  std::int64_t counted = 0;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < inner; ++i) {
      const std::int64_t t = target[static_cast<std::size_t>(b * inner + i)];
      if (ii && t == ii->i()) continue;
      if (t < 0 || t >= c) unsupported(node, "a target " + std::to_string(t) + " outside [0, " + std::to_string(c) + ")");
      o[static_cast<std::size_t>((b * c + t) * inner + i)] = 1.0f;
      ++counted;
    }
  std::vector<std::int64_t> onehot_dims;
  for (const auto& e : d) onehot_dims.push_back(*e);
  const Value targets = float_parameter(node, node.output(0) + "_targets", onehot_dims, o);

  std::string logp = x.body;
  if (sce) {
    logp = identifier(node.output(0) + "_log_prob", "log_prob");
    line(logp + " = log_softmax(" + x.body + ", axis=1)", "SoftmaxCrossEntropyLoss: log-probabilities");
    if (node.output_size() > 1 && !node.output(1).empty()) values_[node.output(1)] = {logp, false, x.dims, ""};
  } else if (node.output_size() > 1) {
    need_one_output(node);
  }
  // The weight of each element's target: O, or O * weight over the classes.
  std::string picked = targets.body;
  if (node.input_size() > 2 && !node.input(2).empty()) {
    Value w = operand(node, 2);
    std::string shape = std::to_string(c);
    for (std::int64_t k = 2; k < rank; ++k) shape += ", 1";
    picked = "(" + targets.body + " * " + w.body + ".reshape(" + shape + "))";
  }
  Dims per = d;
  per.erase(per.begin() + 1);
  const std::string loss = "neg(sum(" + logp + " * " + picked + ", axis=1, keepdims=false))";
  if (reduction == "none") {
    define(node, 0, loss, per);
    return;
  }
  // Sums over every axis of a rank-r expression: keeping them (arithmetic on
  // the result stays at rank r, where the kernels are), or to rank 0 (ONNX's
  // scalar loss).
  auto total = [](std::string e, std::int64_t r, bool keep) {
    for (std::int64_t k = r - 1; k >= 0; --k) e = "sum(" + e + ", axis=" + std::to_string(k) + ", keepdims=" + (keep ? "true" : "false") + ")";
    return e;
  };
  std::string expr = total(loss, rank - 1, false);
  if (reduction == "mean" && picked == targets.body) {
    if (counted == 0) unsupported(node, "a mean over targets that are all ignored");
    expr = total(total(loss, rank - 1, true) + " * " + format_float(1.0f / static_cast<float>(counted)), rank - 1, false);
  } else if (reduction == "mean") {
    // [1 ...] (rank - 1) / [1 ...] (rank): the quotient has rank `rank`.
    expr = total(total(loss, rank - 1, true) + " / " + total(picked, rank, true), rank, false);
  }
  define(node, 0, expr, Dims{});
}

// MeanVarianceNormalization as ONNX's function defines it: (x - E[x]) /
// (sqrt(E[x^2] - E[x]^2) + 1e-9), the means over `axes` (default 0, 2, 3).
void Importer::import_mvn(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  std::set<std::int64_t, std::greater<>> axes;
  for (auto a : attr_ints(node, "axes").value_or(std::vector<std::int64_t>{0, 2, 3})) axes.insert(axis_in(node, a, rank));
  auto mean_over = [&](std::string e) {
    for (auto a : axes) e = "mean(" + e + ", axis=" + std::to_string(a) + ", keepdims=true)";
    return e;
  };
  const std::string base = identifier(node.output(0) + "_mvn", "mvn");
  used_.insert(base + "_mean");
  line(base + "_mean = " + mean_over(x.body), "MeanVarianceNormalization: E[x]");
  define(node, 0,
         "(" + x.body + " - " + base + "_mean) * (sqrt(" + mean_over(x.body + " * " + x.body) + " - " + base + "_mean * " + base +
             "_mean) + " + format_float(1e-9f) + ") ** -1.0",
         x.dims);
}

// LRN: x / (bias + alpha / size * s) ** beta, s the sum of x^2 over the
// channels c - (size - 1) / 2 .. c + size / 2 (clipped): with the channels
// moved last, one matmul with a constant 0/1 band matrix [C C].
void Importer::import_lrn(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  if (rank < 3) unsupported(node, "an input of rank " + std::to_string(rank) + " (N C and at least one spatial axis)");
  const auto c = (*x.dims)[1];
  if (!c) unsupported(node, "a channel count known only at run time");
  const std::int64_t size = attr_int(node, "size", 0);
  if (size < 1) unsupported(node, "size = " + std::to_string(size));
  const float alpha = attr_float(node, "alpha", 1e-4f), beta = attr_float(node, "beta", 0.75f), bias = attr_float(node, "bias", 1.0f);
  std::vector<float> band(static_cast<std::size_t>(*c * *c), 0.0f);
  for (std::int64_t out = 0; out < *c; ++out)
    for (std::int64_t in = std::max<std::int64_t>(0, out - (size - 1) / 2); in <= std::min(*c - 1, out + size / 2); ++in)
      band[static_cast<std::size_t>(in * *c + out)] = 1.0f;
  const Value w = float_parameter(node, node.output(0) + "_band", {*c, *c}, band);
  std::string last = "0", back = "0, " + std::to_string(rank - 1);
  for (std::int64_t a = 2; a < rank; ++a) {
    last += ", " + std::to_string(a);
    back += ", " + std::to_string(a - 1);
  }
  const std::string sum = "(((" + x.body + " * " + x.body + ").permute(" + last + ", 1) * 1.0) @ " + w.body + ").permute(" + back + ")";
  define(node, 0,
         x.body + " * (" + sum + " * " + format_float(alpha / static_cast<float>(size)) + " + " + format_float(bias) + ") ** " +
             format_float(-beta),
         x.dims);
}

}  // namespace wfgen::onnx_import::detail

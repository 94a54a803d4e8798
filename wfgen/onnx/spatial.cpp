// ONNX import, spatial operators written with stdlib nodes that already have
// their backward: ConvTranspose as one batched matmul and col2im (the adjoint
// of Conv's im2col, so its gradient is a convolution), Resize and Upsample as
// one constant interpolation matrix per resized axis (every mode is linear in
// the input once the scales are known, so its gradient is that matrix's
// transpose). import_node() in operators.cpp dispatches to them.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>

#include "wfgen/onnx/importer.hpp"
#include "wfgen/onnx/tensors.hpp"

namespace wfgen::onnx_import::detail {

namespace {


// How Resize maps one axis (ONNX's reference, onnx/backend/test/case/node/resize.py,
// which wrote the expected outputs: coordinates in double).
struct ResizeMode {
  std::string mode = "nearest", transform = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
};

// The interpolation weights of one axis as a matrix [out in] (row-major),
// and the rows that fall outside tf_crop_and_resize's box (which take the
// extrapolation value instead).
struct ResizeMatrix {
  std::vector<double> weights;
  std::vector<bool> outside;
};

ResizeMatrix resize_matrix(const ResizeMode& r, std::int64_t in, std::int64_t out, double scale, double roi_start, double roi_end) {
  ResizeMatrix mat{std::vector<double>(static_cast<std::size_t>(out * in), 0.0), std::vector<bool>(static_cast<std::size_t>(out), false)};
  const double width = scale * static_cast<double>(in);  // the reference's output width: a real number
  for (std::int64_t y = 0; y < out; ++y) {
    const double yd = static_cast<double>(y);
    double x = 0;
    if (r.transform == "align_corners") {
      x = width == 1 ? 0.0 : yd * static_cast<double>(in - 1) / (width - 1);
    } else if (r.transform == "asymmetric") {
      x = yd / scale;
    } else if (r.transform == "tf_crop_and_resize") {
      x = width == 1 ? (roi_end - roi_start) * static_cast<double>(in - 1) / 2 : yd * (roi_end - roi_start) * static_cast<double>(in - 1) / (width - 1);
      x += roi_start * static_cast<double>(in - 1);
      if (x < 0 || x > static_cast<double>(in - 1)) {
        mat.outside[static_cast<std::size_t>(y)] = true;
        continue;
      }
    } else if (r.transform == "pytorch_half_pixel") {
      x = width == 1 ? -0.5 : (yd + 0.5) / scale - 0.5;
    } else if (r.transform == "tf_half_pixel_for_nn") {
      x = (yd + 0.5) / scale;
    } else {  // half_pixel
      x = (yd + 0.5) / scale - 0.5;
    }
    const bool whole = x == std::floor(x);
    const double ratio = whole ? 1.0 : x - std::floor(x);
    std::vector<double> c;
    if (r.mode == "nearest") {
      bool right = true;  // a whole coordinate: the second of its two neighbours, itself
      if (!whole) {
        if (r.nearest == "round_prefer_floor") right = ratio > 0.5;
        else if (r.nearest == "round_prefer_ceil") right = ratio >= 0.5;
        else right = r.nearest == "ceil";
      }
      c = {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
    } else if (r.mode == "linear") {
      c = {1 - ratio, ratio};
    } else {
      const double a = r.cubic_a, q = 1 - ratio;
      c = {((a * (ratio + 1) - 5 * a) * (ratio + 1) + 8 * a) * (ratio + 1) - 4 * a, ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
           ((a + 2) * q - (a + 3)) * q * q + 1, ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a};
    }
    // The n neighbours nearest x (the lower one on a tie) in the input
    // padded by ceil(n / 2) at each end with its edge values.
    const auto n = static_cast<std::int64_t>(c.size()), pad = (n + 1) / 2;
    std::vector<std::int64_t> near;
    for (std::int64_t k = 0; k < in + 2 * pad; ++k) near.push_back(k);
    const double xp = x + static_cast<double>(pad);
    std::stable_sort(near.begin(), near.end(), [&](std::int64_t a, std::int64_t b) {
      return std::abs(xp - static_cast<double>(a)) < std::abs(xp - static_cast<double>(b));
    });
    near.resize(static_cast<std::size_t>(std::min<std::int64_t>(n, static_cast<std::int64_t>(near.size()))));
    std::sort(near.begin(), near.end());
    if (r.exclude_outside) {
      double total = 0;
      for (std::size_t i = 0; i < near.size(); ++i) {
        if (near[i] - pad < 0 || near[i] - pad >= in) c[i] = 0;
        total += c[i];
      }
      for (auto& v : c) v /= total;
    }
    for (std::size_t i = 0; i < near.size(); ++i) {
      const std::int64_t src = std::clamp<std::int64_t>(near[i] - pad, 0, in - 1);
      mat.weights[static_cast<std::size_t>(y * in + src)] += c[i];
    }
  }
  return mat;
}

}  // namespace

// The spatial axes of a ConvTranspose from its attributes: where each
// output lies on the canvas col2im writes. As ONNX defines output_shape and
// SAME_*: the total padding that gives the output size, the odd one at the
// tail for SAME_UPPER, else at the head.
std::vector<TransposedAxis> Importer::transposed_axes(const onnx::NodeProto& node, const std::vector<std::int64_t>& in,
                                                      const std::vector<std::int64_t>& kernel) {
  const std::size_t spatial = in.size();
  auto per_axis = [&](const char* name, std::int64_t dflt) {
    std::vector<std::int64_t> v = attr_ints(node, name).value_or(std::vector<std::int64_t>(spatial, dflt));
    if (v.size() != spatial) unsupported(node, std::string(name) + " of " + std::to_string(v.size()) + " values for " + std::to_string(spatial) + " spatial axes");
    return v;
  };
  if (auto ks = attr_ints(node, "kernel_shape"); ks && *ks != kernel) unsupported(node, "kernel_shape differs from the weights' shape");
  const std::vector<std::int64_t> strides = per_axis("strides", 1), dilations = per_axis("dilations", 1);
  const std::vector<std::int64_t> output_padding = per_axis("output_padding", 0);
  std::vector<std::int64_t> pads = attr_ints(node, "pads").value_or(std::vector<std::int64_t>(2 * spatial, 0));
  if (pads.size() != 2 * spatial) unsupported(node, "pads of " + std::to_string(pads.size()) + " values for " + std::to_string(spatial) + " spatial axes");
  const std::string auto_pad = attr(node, "auto_pad") ? attr(node, "auto_pad")->s() : "NOTSET";
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") unsupported(node, "auto_pad = " + auto_pad);
  const std::optional<std::vector<std::int64_t>> output_shape = attr_ints(node, "output_shape");
  if (output_shape && output_shape->size() != spatial) unsupported(node, "output_shape of " + std::to_string(output_shape->size()) + " values");
  std::vector<TransposedAxis> axes;
  for (std::size_t a = 0; a < spatial; ++a) {
    TransposedAxis t{.kernel = kernel[a], .stride = strides[a], .dilation = dilations[a], .in = in[a]};
    if (t.stride < 1 || t.dilation < 1 || output_padding[a] < 0 || output_padding[a] >= std::max(t.stride, t.dilation)) {
      unsupported(node, "strides, dilations or output_padding out of range on spatial axis " + std::to_string(a));
    }
    const std::int64_t full = (t.in - 1) * t.stride + t.dilation * (t.kernel - 1) + 1;
    if (output_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      t.out = output_shape ? (*output_shape)[a] : t.in * t.stride;
      const std::int64_t total = std::max<std::int64_t>(0, full + output_padding[a] - t.out);
      t.head = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else {
      const std::int64_t head = auto_pad == "VALID" ? 0 : pads[a], tail = auto_pad == "VALID" ? 0 : pads[spatial + a];
      if (head < 0 || tail < 0) unsupported(node, "negative pads");
      t.head = head;
      t.out = full + output_padding[a] - head - tail;
    }
    t.canvas = std::max(full, t.head + t.out);
    // col2im reads `in` windows from its canvas: at most stride - 1 more than `full`.
    if (t.out < 1 || t.canvas - full >= t.stride) {
      unsupported(node, "an output of " + std::to_string(t.out) + " on spatial axis " + std::to_string(a) + " (" +
                            std::to_string(t.canvas - full) + " beyond the last window, stride " + std::to_string(t.stride) + ")");
    }
    axes.push_back(t);
  }
  return axes;
}

// ConvTranspose, 1-D ([N C L] as [N C 1 L]), 2-D and 3-D, any group: the
// columns W^T @ X ([N Cout*k... D*H*W], one matmul batched over the groups)
// summed into the image by col2im (3-D: over h and w for each depth offset
// and input depth, then over the depth), then sliced to the pads and
// output_shape.
void Importer::import_conv_transpose(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0), w = operand(node, 1);
  const std::int64_t rank = rank_of(node, x);
  if (rank < 3 || rank > 5) {
    unsupported(node, "an input of rank " + std::to_string(rank) + "; wfgen maps 1-D, 2-D and 3-D ConvTranspose (N C L, N C H W, N C D H W)");
  }
  const Dims& xd = *x.dims;
  for (std::int64_t k = 1; k < rank; ++k)
    if (!xd[static_cast<std::size_t>(k)]) unsupported(node, "an input whose channels or spatial sizes are not known when importing");
  if (!xd[0]) unsupported(node, "a batch size known only at run time (col2im needs the image's shape); pass --dim to fix it");
  bool known = !w.literal && w.dims && static_cast<std::int64_t>(w.dims->size()) == rank;
  for (std::size_t k = 0; known && k < w.dims->size(); ++k) known = (*w.dims)[k].has_value();
  if (!known) unsupported(node, "weights that are not a known [C M/group k...] tensor of the input's rank");
  const std::int64_t n = *xd[0], c = *xd[1], groups = attr_int(node, "group", 1);
  const std::int64_t m_group = *(*w.dims)[1];
  if (groups < 1 || c % groups != 0 || *(*w.dims)[0] != c) {
    unsupported(node, "group = " + std::to_string(groups) + " with " + std::to_string(c) + " input channels and weights for " +
                          std::to_string(*(*w.dims)[0]));
  }
  const std::int64_t m = m_group * groups;
  std::vector<std::int64_t> in, kernel;
  for (std::int64_t k = 2; k < rank; ++k) {
    in.push_back(*xd[static_cast<std::size_t>(k)]);
    kernel.push_back(*(*w.dims)[static_cast<std::size_t>(k)]);
  }
  std::vector<TransposedAxis> axes = transposed_axes(node, in, kernel);
  const bool one_d = rank == 3, three_d = rank == 5;
  if (one_d) axes.insert(axes.begin(), TransposedAxis{.out = 1, .canvas = 1});  // the height of 1
  std::int64_t patch = m_group, pixels = 1;
  for (const auto& a : axes) {
    patch *= a.kernel;
    pixels *= a.in;
  }
  auto s = [](std::int64_t v) { return std::to_string(v); };
  auto list = [&](auto field) {
    std::string out;
    for (const auto& a : axes) out += ", " + s(a.*field);
    return out;
  };
  // Group g's columns come from its c/group channels and its Cout/group
  // filters: rows g*patch .. (g+1)*patch, which is the channel-major order
  // col2im reads (output channel g*Cout/group + j).
  const std::string cols = identifier(node.output(0) + "_cols", "cols");
  line(cols + " = (" + w.body + ".reshape(" + s(groups) + ", " + s(c / groups) + ", " + s(patch) + ").T @ " + x.body + ".reshape(" + s(n) +
           ", " + s(groups) + ", " + s(c / groups) + ", " + s(pixels) + ")).reshape(" + s(n) + ", " + s(m) + list(&TransposedAxis::kernel) +
           list(&TransposedAxis::in) + ")",
       label(node) + ": each input pixel times the filters");
  const Value like = float_parameter(node, node.output(0) + "_canvas", {1, 1, 1, 1}, {0.0f});
  auto col2im = [&](const std::string& col, std::int64_t channels, const TransposedAxis& h, const TransposedAxis& wa, std::int64_t width) {
    return "col2im(" + col + ", " + like.body + ".broadcast_to(" + s(n) + ", " + s(channels) + ", " + s(h.canvas) + ", " + s(width) +
           "), k_h=" + s(h.kernel) + ", k_w=" + s(wa.kernel) + ", stride_h=" + s(h.stride) + ", stride_w=" + s(wa.stride) +
           ", dilation_h=" + s(h.dilation) + ", dilation_w=" + s(wa.dilation) + ")";
  };
  const TransposedAxis& h = axes[axes.size() - 2];
  const TransposedAxis& wa = axes.back();
  std::string expr;
  if (!three_d) {
    expr = col2im(cols, m, h, wa, wa.canvas);
  } else {
    // [N M kd kh kw D H W] -> [N M*kd*D kh kw H W]: the planes, then the depth as
    // an image [N M Dc Hc*Wc] of windows kd x 1.
    const TransposedAxis& d = axes[0];
    const std::string planes = identifier(node.output(0) + "_planes", "planes");
    line(planes + " = " +
             col2im(cols + ".permute(0, 1, 2, 5, 3, 4, 6, 7).reshape(" + s(n) + ", " + s(m * d.kernel * d.in) + ", " + s(h.kernel) + ", " +
                        s(wa.kernel) + ", " + s(h.in) + ", " + s(wa.in) + ")",
                    m * d.kernel * d.in, h, wa, wa.canvas),
         "each depth offset and input depth summed over h and w");
    const std::int64_t area = h.canvas * wa.canvas;
    expr = "(" + col2im(planes + ".reshape(" + s(n) + ", " + s(m) + ", " + s(d.kernel) + ", 1, " + s(d.in) + ", " + s(area) + ")", m, d,
                        TransposedAxis{}, area) +
           ").reshape(" + s(n) + ", " + s(m) + ", " + s(d.canvas) + ", " + s(h.canvas) + ", " + s(wa.canvas) + ")";
  }
  bool whole = true;
  std::string slice = "[:, :";
  for (std::size_t a = one_d ? 1 : 0; a < axes.size(); ++a) {
    whole = whole && axes[a].head == 0 && axes[a].out == axes[a].canvas;
    slice += ", " + s(axes[a].head) + ":" + s(axes[a].head + axes[a].out);
  }
  if (one_d) slice = "[:, :, :" + slice.substr(5);
  if (!whole) expr += slice + "]";
  std::string ones;
  for (std::size_t a = 0; a < axes.size(); ++a) ones += ", 1";
  if (node.input_size() > 2 && !node.input(2).empty()) expr = expr + " + " + operand(node, 2).body + ".reshape(" + s(m) + ones + ")";
  Dims out{n, m};
  for (std::size_t a = one_d ? 1 : 0; a < axes.size(); ++a) out.push_back(axes[a].out);
  if (one_d) expr = "(" + expr + ").reshape(" + reshape_args(node, out) + ")";
  define(node, 0, expr, out);
}

// Resize (nearest with its rounding modes, linear, cubic; every coordinate
// transformation) and Upsample with constant scales or sizes. With the sizes
// known, each resized axis is a constant matrix M [out in]: the output is
// M applied along that axis, one matmul, axis by axis from the last, as the
// reference interpolates; tf_crop_and_resize adds the extrapolation value on
// the rows outside its box.
void Importer::import_resize(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  const Dims& d = *x.dims;
  const bool upsample = node.op_type() == "Upsample", old = upsample || opset_ < 11;
  ResizeMode r;
  if (const auto* a = attr(node, "mode")) r.mode = a->s();
  if (r.mode == "bilinear") r.mode = "linear";  // Upsample-7's name for it
  if (r.mode != "nearest" && r.mode != "linear" && (old || r.mode != "cubic")) unsupported(node, "mode = " + r.mode);
  if (old) {
    // Before opset 11: x / scale, rounded down (Upsample's definition).
    r.transform = "asymmetric";
    r.nearest = "floor";
  } else {
    if (const auto* a = attr(node, "coordinate_transformation_mode")) r.transform = a->s();
    if (const auto* a = attr(node, "nearest_mode")) r.nearest = a->s();
    r.cubic_a = attr_float(node, "cubic_coeff_a", -0.75f);
    r.exclude_outside = attr_int(node, "exclude_outside", 0) != 0;
  }
  static const char* const transforms[] = {"half_pixel",         "pytorch_half_pixel", "align_corners",
                                           "asymmetric",         "tf_crop_and_resize", "tf_half_pixel_for_nn"};
  if (std::find(std::begin(transforms), std::end(transforms), r.transform) == std::end(transforms)) {
    unsupported(node, "coordinate_transformation_mode = " + r.transform);
  }
  static const char* const roundings[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (std::find(std::begin(roundings), std::end(roundings), r.nearest) == std::end(roundings)) unsupported(node, "nearest_mode = " + r.nearest);

  // The scales and sizes, known when importing (else the output's shape depends on values).
  auto present = [&](int k) { return node.input_size() > k && !node.input(k).empty(); };
  auto known = [&](int k, const char* what) -> const onnx::TensorProto& {
    if (values_.count(node.input(k)) || !constant(node.input(k))) {
      unsupported(node, std::string(what) + " computed at run time (the output's shape would depend on values; wfgen needs them known when importing)");
    }
    return *constant(node.input(k));
  };
  std::vector<double> scales;
  std::vector<std::int64_t> sizes;
  std::vector<float> roi;
  if (upsample && opset_ < 9) {
    const auto* a = attr(node, "scales");
    if (!a) unsupported(node, "it has no scales attribute");
    for (float v : a->floats()) scales.push_back(v);
  } else {
    const int scales_at = old ? 1 : 2;
    if (present(scales_at)) {
      const onnx::TensorProto& t = known(scales_at, "scales");
      if (t.data_type() != onnx::TensorProto::FLOAT) unsupported(node, "scales of type " + onnx::TensorProto::DataType_Name(t.data_type()));
      for (float v : floats_of(t)) scales.push_back(v);
    }
    if (!old && scales.empty() && present(3)) sizes = ints_of(known(3, "sizes"));
    if (!old && r.transform == "tf_crop_and_resize" && present(1)) roi = floats_of(known(1, "roi"));
  }
  if (scales.empty() && sizes.empty()) unsupported(node, "neither scales nor sizes");
  if (!scales.empty() && static_cast<std::int64_t>(scales.size()) != rank) unsupported(node, std::to_string(scales.size()) + " scales for an input of rank " + std::to_string(rank));
  if (!sizes.empty() && static_cast<std::int64_t>(sizes.size()) != rank) unsupported(node, std::to_string(sizes.size()) + " sizes for an input of rank " + std::to_string(rank));
  if (r.transform == "tf_crop_and_resize" && static_cast<std::int64_t>(roi.size()) != 2 * rank) unsupported(node, "tf_crop_and_resize without a roi of 2 * rank values");
  const float extrapolation = attr_float(node, "extrapolation_value", 0.0f);

  Dims out = d;
  std::string expr = x.body;
  for (std::int64_t a = rank - 1; a >= 0; --a) {
    const auto ua = static_cast<std::size_t>(a);
    const double scale = sizes.empty() ? scales[ua] : 0.0;
    if (sizes.empty() ? scale == 1.0 && r.transform != "tf_crop_and_resize" : d[ua] && sizes[ua] == *d[ua] && r.transform != "tf_crop_and_resize") continue;
    if (!d[ua]) unsupported(node, "resizing axis " + std::to_string(a) + ", whose size is known only at run time");
    const std::int64_t in = *d[ua];
    if (sizes.empty() && !(scale > 0)) unsupported(node, "a scale of " + std::to_string(scale) + " on axis " + std::to_string(a));
    const auto n = sizes.empty() ? static_cast<std::int64_t>(std::floor(scale * static_cast<double>(in))) : sizes[ua];
    if (n < 1) unsupported(node, "an output of " + std::to_string(n) + " on axis " + std::to_string(a));
    const ResizeMatrix mat = resize_matrix(r, in, n, sizes.empty() ? scale : static_cast<double>(n) / static_cast<double>(in),
                                           roi.empty() ? 0.0 : roi[ua], roi.empty() ? 1.0 : roi[ua + static_cast<std::size_t>(rank)]);
    std::int64_t after = 1;  // the elements after axis a, all known
    for (std::int64_t k = a + 1; k < rank; ++k) {
      if (!out[static_cast<std::size_t>(k)]) unsupported(node, "a dim after a resized axis known only at run time");
      after *= *out[static_cast<std::size_t>(k)];
    }
    const std::string tag = node.output(0) + "_axis" + std::to_string(a);
    Dims before(out.begin(), out.begin() + a);
    Dims next = out;
    next[ua] = n;
    if (after == 1) {
      // The last axis: x [..., in] @ M.T [in out].
      std::vector<float> mt(static_cast<std::size_t>(in * n));
      for (std::int64_t i = 0; i < in; ++i)
        for (std::int64_t o = 0; o < n; ++o) mt[static_cast<std::size_t>(i * n + o)] = static_cast<float>(mat.weights[static_cast<std::size_t>(o * in + i)]);
      expr = "(" + expr + ").reshape(" + reshape_args(node, {product(before, 0, before.size()), in}) + ") @ " +
             float_parameter(node, tag + "_weights", {in, n}, mt).body;
    } else {
      // M [out in] @ x [before in after], batched over `before`.
      std::vector<float> m(mat.weights.begin(), mat.weights.end());
      Dims shape{product(before, 0, before.size()), in, after};
      expr = float_parameter(node, tag + "_weights", {n, in}, m).body + " @ (" + expr + ").reshape(" + reshape_args(node, shape) + ")";
    }
    if (std::find(mat.outside.begin(), mat.outside.end(), true) != mat.outside.end()) {
      std::vector<float> fill(static_cast<std::size_t>(n));
      for (std::int64_t o = 0; o < n; ++o) fill[static_cast<std::size_t>(o)] = mat.outside[static_cast<std::size_t>(o)] ? extrapolation : 0.0f;
      expr = "(" + expr + " + " + float_parameter(node, tag + "_outside", after == 1 ? std::vector<std::int64_t>{n} : std::vector<std::int64_t>{n, 1}, fill).body + ")";
    }
    out = next;
    const std::string v = identifier(tag, "resized");
    line(v + " = (" + expr + ").reshape(" + reshape_args(node, out) + ")", node.op_type() + ": axis " + std::to_string(a) + " from " + std::to_string(in) + " to " + std::to_string(n));
    expr = v;
  }
  define(node, 0, expr == x.body ? x.body + " * 1.0" : expr, out);
}

}  // namespace wfgen::onnx_import::detail

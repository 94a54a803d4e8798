// 3-D windows (Conv3d, MaxPool3d, AvgPool3d over N C D H W) from the
// stdlib's 2-D im2col, so that they need no kernel of their own and train
// through im2col's backward (col2im) like the 2-D ones.
#include "wfgen/onnx/importer.hpp"

namespace wfgen::onnx_import::detail {

// Two im2cols: the first over H and W of x viewed as [N c*D H W] (depth as
// channels) gives [N c*D*kh*kw oh ow]; the second over D of that viewed as
// [N c D kh*kw*oh*ow], with windows of width 1, gives [N c kd 1 od kh*kw*oh*ow].
// A permute then puts each column in (c, kd, kh, kw) order, ONNX's order of
// a Conv's weights, and the windows (od, oh, ow) last.
std::string Importer::volume_windows(const onnx::NodeProto& node, const std::string& x, std::int64_t c,
                                     const std::vector<WindowAxis>& p, const std::string& tag) {
  auto n = [](std::int64_t v) { return std::to_string(v); };
  const WindowAxis &d = p[0], &h = p[1], &w = p[2];
  const std::string plane = windows(node, "(" + x + ").reshape(-1, " + n(c * d.in) + ", " + n(h.in) + ", " + n(w.in) + ")", c * d.in,
                                    {h, w}, tag + "_hw");
  const std::int64_t rest = h.kernel * w.kernel * h.out * w.out;
  std::string col = identifier(node.output(0) + "_" + tag, tag);
  line(col + " = im2col(" + plane + ".reshape(-1, " + n(c) + ", " + n(d.in) + ", " + n(rest) + "), k_h=" + n(d.kernel) +
           ", k_w=1, stride_h=" + n(d.stride) + ", pad_h=" + n(d.pad) + ", dilation_h=" + n(d.dilation) + ").reshape(-1, " + n(c) +
           ", " + n(d.kernel) + ", " + n(d.grid) + ", " + n(h.kernel * w.kernel) + ", " + n(h.out * w.out) + ")",
       "the depth windows of " + label(node));
  std::string depth;  // ONNX's depth windows out of the grid, as in window_slice
  if (d.offset || d.grid != d.out) depth = "[:, :, :, " + n(d.offset) + ":" + n(d.offset + d.out) + "]";
  line(col + " = " + col + depth + ".permute(0, 1, 2, 4, 3, 5).reshape(-1, " + n(c * d.kernel * h.kernel * w.kernel) + ", " +
           n(d.out * h.out * w.out) + ")",
       "windows in (channel, kd, kh, kw) order");
  return col;
}

}  // namespace wfgen::onnx_import::detail

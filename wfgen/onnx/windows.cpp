#include "wfgen/onnx/windows.hpp"

#include <algorithm>

namespace wfgen::onnx_import {

WindowAttrs lift_to_2d(WindowAttrs a) {
  auto prepend = [](std::vector<std::int64_t>& v, std::int64_t x) {
    if (!v.empty()) v.insert(v.begin(), x);
  };
  prepend(a.kernel, 1);
  prepend(a.strides, 1);
  prepend(a.dilations, 1);
  if (a.pads.size() == 2) a.pads = {0, a.pads[0], 0, a.pads[1]};
  return a;
}

std::optional<std::vector<WindowAxis>> plan_windows(const std::vector<std::int64_t>& in, const WindowAttrs& a, std::string& why) {
  const std::size_t n = in.size();
  auto pick = [&](const std::vector<std::int64_t>& v, std::size_t k, std::int64_t dflt) { return v.empty() ? dflt : v[k]; };
  if (a.kernel.size() != n || (!a.strides.empty() && a.strides.size() != n) || (!a.dilations.empty() && a.dilations.size() != n) ||
      (!a.pads.empty() && a.pads.size() != 2 * n)) {
    why = "kernel_shape, strides, dilations and pads do not match the " + std::to_string(n) + " spatial axes";
    return std::nullopt;
  }
  std::vector<WindowAxis> plan(n);
  for (std::size_t k = 0; k < n; ++k) {
    WindowAxis& w = plan[k];
    w.in = in[k];
    w.kernel = a.kernel[k];
    w.stride = pick(a.strides, k, 1);
    w.dilation = pick(a.dilations, k, 1);
    if (w.kernel < 1 || w.stride < 1 || w.dilation < 1) {
      why = "a kernel, stride or dilation below 1";
      return std::nullopt;
    }
    const std::int64_t span = w.dilation * (w.kernel - 1) + 1;  // input elements one window covers
    std::int64_t begin = pick(a.pads, k, 0), end = a.pads.empty() ? 0 : a.pads[n + k];
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      const std::int64_t out = (in[k] + w.stride - 1) / w.stride;
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * w.stride + span - in[k]);
      begin = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else if (a.auto_pad == "VALID") {
      begin = end = 0;
    } else if (a.auto_pad != "NOTSET" && !a.auto_pad.empty()) {
      why = "auto_pad " + a.auto_pad;
      return std::nullopt;
    }
    if (begin < 0 || end < 0) {
      why = "negative pads";
      return std::nullopt;
    }
    const std::int64_t room = in[k] + begin + end - span;
    if (room < 0) {
      why = "a window larger than the padded input";
      return std::nullopt;
    }
    w.out = room / w.stride + 1;
    if (a.ceil_mode && room % w.stride != 0) {
      // The last window starts inside the input (ONNX drops one that would
      // start in the end padding) and overhangs the end.
      if ((w.out) * w.stride < in[k] + begin) {
        w.overhang = w.out * w.stride + span - (in[k] + begin + end);
        ++w.out;
        end += w.overhang;
      }
    }
    w.begin = begin;
    w.pad = std::max(begin, end);
    if ((w.pad - begin) % w.stride != 0) {
      why = "pads of " + std::to_string(begin) + " before and " + std::to_string(end) + " after an axis with stride " +
            std::to_string(w.stride) + " (im2col pads both ends alike; the difference must be a multiple of the stride)";
      return std::nullopt;
    }
    w.offset = (w.pad - begin) / w.stride;
    w.grid = (in[k] + 2 * w.pad - span) / w.stride + 1;
  }
  return plan;
}

}  // namespace wfgen::onnx_import

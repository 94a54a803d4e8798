// The sliding windows of ONNX's Conv, MaxPool and AveragePool, resolved for
// the stdlib's im2col: ONNX allows different padding at the two ends of an
// axis (pads, auto_pad SAME_UPPER/SAME_LOWER, ceil_mode), im2col pads both
// ends alike. A window plan pads both ends by the larger amount and keeps the
// outputs from `offset` on, which gives ONNX's windows exactly when the extra
// padding is a whole number of strides; other cases are refused with a reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wfgen::onnx_import {

// ONNX's window attributes of one node (spatial axes only).
struct WindowAttrs {
  std::vector<std::int64_t> kernel, strides, dilations;  // empty: 1s
  std::vector<std::int64_t> pads;                         // [begin..., end...]; empty: 0s
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};

// One spatial axis of a plan.
struct WindowAxis {
  std::int64_t in = 0;        // the input's size
  std::int64_t kernel = 1, stride = 1, dilation = 1;
  std::int64_t pad = 0;       // im2col's padding, at both ends
  std::int64_t begin = 0;     // ONNX's padding before the first element
  std::int64_t offset = 0;    // the first of im2col's outputs that ONNX has
  std::int64_t out = 0;       // ONNX's output size
  std::int64_t grid = 0;      // im2col's output size (>= offset + out)
  std::int64_t overhang = 0;  // window positions past the input and its end padding (ceil_mode)
};

// A 1-D node's attributes as a 2-D node's of height 1 (kernel, stride and
// dilation 1, no padding on the added axis): Conv1d and the 1-D pools run as
// 2-D windows over [N C 1 L].
WindowAttrs lift_to_2d(WindowAttrs a);

// The plan for inputs of spatial sizes `in`; nullopt with the reason in `why`.
std::optional<std::vector<WindowAxis>> plan_windows(const std::vector<std::int64_t>& in, const WindowAttrs& a, std::string& why);

}  // namespace wfgen::onnx_import

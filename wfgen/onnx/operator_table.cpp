// The table of ONNX operators wfgen imports (operator_table.hpp says who
// reads it). A row: the operator, its handler (a member of Importer, in
// operators.cpp, layers.cpp or recurrent.cpp) and the handler's parameter, the opsets it
// imports, the attributes it reads, its inputs needed as constants, the
// element types of its computed inputs, and one line on what it becomes.
#include "wfgen/onnx/operator_table.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "wfgen/onnx/importer.hpp"

namespace wfgen::onnx_import::detail {

// A friend of Importer: the handlers are its private members.
struct OperatorTable {
  using I = Importer;
  static constexpr std::string_view kReduce = "axes keepdims noop_with_empty_axes";  // every Reduce*
  static constexpr auto rows = std::to_array<OperatorRow>({
      {.name = "Abs", .handler = &I::import_unary, .param = "abs", .dtypes = "FLOAT INT64 INT32", .doc = "abs(x)"},
      {.name = "Acos", .handler = &I::import_unary, .param = "acos", .doc = "acos(x)"},
      {.name = "Acosh", .handler = &I::import_unary, .param = "acosh", .doc = "acosh(x)"},
      {.name = "Add", .handler = &I::import_arithmetic, .param = "+", .dtypes = "FLOAT INT64 INT32", .doc = "a + b (numpy broadcasting)"},
      {.name = "And", .handler = &I::import_logic, .dtypes = "BOOL", .doc = "a * b on computed BOOLs (u8)"},
      {.name = "ArgMax", .handler = &I::import_arg_extreme, .param = "argmax", .attributes = "axis keepdims select_last_index",
       .dtypes = "FLOAT INT64 INT32", .doc = "to_i64(argmax(x, axis=k, keepdims=...)): the first largest index, INT64; select_last_index: max((x == max(x)) * 0..n-1)"},
      {.name = "ArgMin", .handler = &I::import_arg_extreme, .param = "argmin", .attributes = "axis keepdims select_last_index",
       .dtypes = "FLOAT INT64 INT32", .doc = "to_i64(argmin(x, axis=k, keepdims=...)): the first smallest index, INT64; select_last_index: max((x == min(x)) * 0..n-1)"},
      {.name = "Asin", .handler = &I::import_unary, .param = "asin", .doc = "asin(x)"},
      {.name = "Asinh", .handler = &I::import_unary, .param = "asinh", .doc = "asinh(x)"},
      {.name = "Atan", .handler = &I::import_unary, .param = "atan", .doc = "atan(x)"},
      {.name = "Atanh", .handler = &I::import_unary, .param = "atanh", .doc = "atanh(x)"},
      {.name = "AveragePool", .handler = &I::import_pool,
       .attributes = "auto_pad ceil_mode count_include_pad dilations kernel_shape pads strides",
       .doc = "1-D, 2-D and 3-D: mean over im2col's windows, the padding left out of the count unless count_include_pad"},
      {.name = "BatchNormalization", .handler = &I::import_batchnorm, .attributes = "epsilon momentum training_mode spatial",
       .doc = "inference: (x - mean) * (var + eps) ** -0.5 * scale + B, per channel; training_mode: the batch's mean and var, and the running ones"},
      {.name = "BitShift", .handler = &I::import_bitshift, .since = 11, .attributes = "direction", .dtypes = "UINT8",
       .doc = "shl(a, b) (LEFT, wrapping at 256) or shr(a, b) (RIGHT) on UINT8; UINT16, UINT32 and UINT64 (no run-time dtype) as constants only, folded"},
      {.name = "Cast", .handler = &I::import_cast, .attributes = "to saturate", .dtypes = "FLOAT INT64 INT32 BOOL UINT8",
       .doc = "folded on constants; on a computed tensor a cast node (to_f32, to_i64, to_i32, to_u8, to_bool; to UINT8 floats toward zero, saturated)"},
      {.name = "CastLike", .handler = &I::import_cast, .attributes = "saturate", .dtypes = "FLOAT INT64 INT32 BOOL UINT8",
       .doc = "folded on constants; on a computed tensor a cast node (to_f32, to_i64, to_i32, to_u8, to_bool; to UINT8 floats toward zero, saturated)"},
      {.name = "Ceil", .handler = &I::import_unary, .param = "ceil", .doc = "ceil(x)"},
      {.name = "Celu", .handler = &I::import_activation, .attributes = "alpha",
       .doc = "relu(x) + (exp((x - relu(x)) / alpha) - 1.0) * alpha"},
      {.name = "Clip", .handler = &I::import_clip, .attributes = "min max", .constant_inputs = inputs({1, 2}), .constants_since = 11,
       .doc = "relu(x - lo) + lo, x - relu(x - hi) (constant bounds); minimum(maximum(x, lo), hi) where a bound is a computed scalar"},
      {.name = "Compress", .handler = &I::import_gather_indexed, .since = 9, .attributes = "axis", .constant_inputs = inputs({1}),
       .dtypes = "FLOAT INT64 INT32 BOOL UINT8",
       .doc = "constant condition: gather of x flattened at the kept positions (along the axis, or of x flattened)"},
      {.name = "Concat", .handler = &I::import_concat, .attributes = "axis",
       .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "concat(a, b, axis=k) of computed tensors, two at a time; constants folded"},
      {.name = "Constant", .handler = &I::import_constant, .attributes = "value value_float value_floats value_int value_ints",
       .dtypes = "", .doc = "a constant while importing (a parameter where a tensor is used, a number if a scalar)"},
      {.name = "ConstantOfShape", .handler = &I::import_folded, .attributes = "value", .dtypes = "",
       .doc = "folded into a constant (its shape known when importing)"},
      {.name = "Conv", .handler = &I::import_conv, .attributes = "auto_pad dilations group kernel_shape pads strides",
       .doc = "1-D ([N C L] as [N C 1 L]), 2-D and 3-D (two im2cols), any group: im2col(x, ...) and one batched matmul with W, + B on the output (fused with a following activation); 1 x 1 at stride 1 without padding: the matmul on x itself; depthwise (group = input = output channels, 1-D and 2-D): depthwise_conv2d(x, W), + B; 3 x 3 at stride 1, group 1, 2-D, at least 16 channels in and out and 32 x 32 outputs per channel: winograd_conv2d(x, W) (Winograd's minimal filtering), + B (fused, with a residual add and the activation, into its output transform)"},
      {.name = "ConvTranspose", .handler = &I::import_conv_transpose,
       .attributes = "auto_pad dilations group kernel_shape output_padding output_shape pads strides",
       .doc = "1-D, 2-D and 3-D, any group: W.T @ x (one batched matmul) summed into the image by col2im (3-D: two), sliced to pads / output_shape, + B"},
      {.name = "Cos", .handler = &I::import_unary, .param = "cos", .doc = "cos(x)"},
      {.name = "Cosh", .handler = &I::import_unary, .param = "cosh", .doc = "cosh(x)"},
      {.name = "CumSum", .handler = &I::import_cumsum, .since = 11, .attributes = "exclusive reverse", .constant_inputs = inputs({1}),
       .dtypes = "FLOAT INT64 INT32",
       .doc = "cumsum(x, exclusive=..., reverse=...) along a constant axis, swapped with the last one as a view and back; on a constant folded with the stdlib's add in its dtype"},
      {.name = "DepthToSpace", .handler = &I::import_depth_space, .attributes = "blocksize mode",
       .doc = "(x.reshape(N, b, b, C', H, W).permute(0, 3, 4, 1, 5, 2) * 1.0).reshape(N, C', H b, W b) (DCR; CRD splits C' first)"},
      {.name = "Div", .handler = &I::import_arithmetic, .param = "/", .dtypes = "FLOAT INT64 INT32", .doc = "a / b (numpy broadcasting); integers divide toward zero"},
      {.name = "Dropout", .handler = &I::import_identity, .attributes = "ratio seed", .constant_inputs = inputs({1, 2}),
       .doc = "inference (training_mode a constant false), or training with a constant ratio 0: x, and its mask all 1.0"},
      {.name = "DynamicQuantizeLinear", .handler = &I::import_dynamic_quantize_linear, .since = 11, .dtypes = "FLOAT",
       .doc = "its ONNX function: scale = (max(x, 0) - min(x, 0)) / 255, the zero point to_u8(round_even(clip(-min / scale, 0, 255))), y as QuantizeLinear's"},
      {.name = "Einsum", .handler = &I::import_einsum, .since = 12, .attributes = "equation",
       .doc = "one or two operands, no diagonal: sums of the letters one term has, permute/reshape and one batched matmul, permute"},
      {.name = "Elu", .handler = &I::import_activation, .attributes = "alpha", .doc = "relu(x) + (exp(x - relu(x)) - 1.0) * alpha"},
      {.name = "Equal", .handler = &I::import_compare, .param = "==",
       .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "to_bool(a == b) (the stdlib's eq in the operands' dtype); a scalar constant becomes a one-element parameter"},
      {.name = "Erf", .handler = &I::import_unary, .param = "erf", .doc = "erf(x)"},
      {.name = "Exp", .handler = &I::import_unary, .param = "exp", .doc = "exp(x)"},
      {.name = "Expand", .handler = &I::import_expand, .constant_inputs = inputs({1}),
       .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "x.broadcast_to(...) to a constant shape"},
      {.name = "EyeLike", .handler = &I::import_folded, .attributes = "dtype k", .constant_inputs = inputs({0}), .dtypes = "",
       .doc = "folded into a constant: ones where column - row == k (its input's shape known when importing)"},
      {.name = "Flatten", .handler = &I::import_reshape, .attributes = "axis", .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "x.reshape(...): a view"},
      {.name = "Floor", .handler = &I::import_unary, .param = "floor", .doc = "floor(x)"},
      {.name = "GRU", .handler = &I::import_recurrent, .attributes = "activation_alpha activation_beta activations clip direction hidden_size layout linear_before_reset",
       .constant_inputs = inputs({4}), .doc = "a loop over the steps (unrolled): sigmoid, tanh and matmuls of the stdlib, any direction, linear_before_reset 0 or 1"},
      {.name = "Gather", .handler = &I::import_gather, .attributes = "axis", .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "constant indices: x[:, i] for a scalar index, else the stdlib's gather over the axis moved first; computed INT64/INT32 indices likewise, cast to the data's dtype"},
      {.name = "GatherElements", .handler = &I::import_gather_indexed, .since = 11, .attributes = "axis", .constant_inputs = inputs({1}),
       .dtypes = "FLOAT INT64 INT32 BOOL UINT8",
       .doc = "constant indices: gather of x flattened at the positions they name (in x's dtype; BOOL gathered as i32)"},
      {.name = "GatherND", .handler = &I::import_gather_indexed, .since = 11, .attributes = "batch_dims", .constant_inputs = inputs({1}),
       .dtypes = "FLOAT INT64 INT32 BOOL UINT8",
       .doc = "constant indices: gather of x flattened at the slices they name (in x's dtype; BOOL gathered as i32)"},
      {.name = "Gelu", .handler = &I::import_gelu, .attributes = "approximate",
       .doc = "gelu(x) (approximate none), or its tanh form"},
      {.name = "Gemm", .handler = &I::import_gemm, .attributes = "alpha beta transA transB",
       .doc = "(a.T @ b) * alpha + c * beta, matrices"},
      {.name = "GlobalAveragePool", .handler = &I::import_global_pool, .param = "mean",
       .doc = "mean over every axis after the channels, kept as 1"},
      {.name = "GlobalMaxPool", .handler = &I::import_global_pool, .param = "max",
       .doc = "max over every axis after the channels, kept as 1"},
      {.name = "Greater", .handler = &I::import_compare, .param = ">", .dtypes = "FLOAT INT64 INT32", .doc = "to_bool(a > b) (the stdlib's gt in the operands' dtype)"},
      {.name = "GreaterOrEqual", .handler = &I::import_compare, .param = ">=", .dtypes = "FLOAT INT64 INT32", .doc = "to_bool(a >= b) (the stdlib's ge in the operands' dtype)"},
      {.name = "HardSigmoid", .handler = &I::import_activation, .attributes = "alpha beta",
       .doc = "relu(t - relu(t - 1.0)), t = x * alpha + beta"},
      {.name = "HardSwish", .handler = &I::import_activation, .doc = "x * relu(t - relu(t - 1.0)), t = x / 6 + 0.5"},
      {.name = "Hardmax", .handler = &I::import_hardmax, .since = 13, .attributes = "axis",
       .doc = "argmax(x, axis=k, keepdims=true) == a constant 0..n-1 along the axis (1.0 at the first largest)"},
      {.name = "Identity", .handler = &I::import_identity, .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "x"},
      {.name = "InstanceNormalization", .handler = &I::import_instancenorm, .attributes = "epsilon",
       .doc = "(x - mean) * (var + eps) ** -0.5 * scale + B, mean and var per sample and channel over the spatial axes"},
      {.name = "IsInf", .handler = &I::import_activation, .attributes = "detect_negative detect_positive",
       .doc = "isinf(x), times relu(sign(x)) (or of neg(x)) for one sign only"},
      {.name = "IsNaN", .handler = &I::import_unary, .param = "isnan", .doc = "isnan(x)"},
      {.name = "LRN", .handler = &I::import_lrn, .attributes = "alpha beta bias size",
       .doc = "x * (s * alpha / size + bias) ** -beta, s = x * x with the channels moved last @ a constant 0/1 band [C C]"},
      {.name = "LSTM", .handler = &I::import_recurrent, .attributes = "activation_alpha activation_beta activations clip direction hidden_size layout input_forget",
       .constant_inputs = inputs({4}), .doc = "a loop over the steps (unrolled): sigmoid, tanh and matmuls of the stdlib, any direction, peepholes"},
      {.name = "LayerNormalization", .handler = &I::import_layernorm, .attributes = "axis epsilon stash_type",
       .doc = "means over the axes from axis on; Y, Mean and InvStdDev"},
      {.name = "LeakyRelu", .handler = &I::import_leaky_relu, .attributes = "alpha", .doc = "leaky_relu(x, negative_slope=alpha)"},
      {.name = "Less", .handler = &I::import_compare, .param = "<", .dtypes = "FLOAT INT64 INT32", .doc = "to_bool(a < b) (the stdlib's lt in the operands' dtype)"},
      {.name = "LessOrEqual", .handler = &I::import_compare, .param = "<=", .dtypes = "FLOAT INT64 INT32", .doc = "to_bool(a <= b) (the stdlib's le in the operands' dtype)"},
      {.name = "Log", .handler = &I::import_unary, .param = "log", .doc = "log(x)"},
      {.name = "LogSoftmax", .handler = &I::import_softmax, .param = "log_softmax", .attributes = "axis",
       .doc = "log_softmax(x, axis=k); before opset 13 over the flattened trailing dims"},
      {.name = "MatMul", .handler = &I::import_matmul, .doc = "a @ b (rank >= 2, batch dims broadcast)"},
      {.name = "Max", .handler = &I::import_variadic, .param = "maximum", .dtypes = "FLOAT INT64 INT32",
       .doc = "maximum(a, b), variadic; each operand broadcast to the result, a scalar constant a parameter of its dtype"},
      {.name = "MaxPool", .handler = &I::import_pool,
       .attributes = "auto_pad ceil_mode dilations kernel_shape pads storage_order strides",
       .doc = "1-D and 2-D: the node max_pool (no dilation), else (and 3-D) max over im2col's windows"},
      {.name = "Mean", .handler = &I::import_variadic, .param = "+", .doc = "(a + b + ...) * (1 / n), variadic"},
      {.name = "MeanVarianceNormalization", .handler = &I::import_mvn, .attributes = "axes",
       .doc = "(x - m) * (sqrt(mean(x * x) - m * m) + 1e-9) ** -1.0, m = mean(x) over the axes"},
      {.name = "Min", .handler = &I::import_variadic, .param = "minimum", .dtypes = "FLOAT INT64 INT32",
       .doc = "minimum(a, b), variadic; each operand broadcast to the result, a scalar constant a parameter of its dtype"},
      {.name = "Mish", .handler = &I::import_unary, .param = "mish", .since = 18, .doc = "mish(x)"},
      {.name = "Mod", .handler = &I::import_mod, .attributes = "fmod", .dtypes = "FLOAT INT64 INT32",
       .doc = "t = fmod(a, b) on floats, a - a / b * b on integers (fmod 1: the sign of a); fmod 0: t plus b where t != 0 and sign(t) != sign(b)"},
      {.name = "Mul", .handler = &I::import_arithmetic, .param = "*", .dtypes = "FLOAT INT64 INT32", .doc = "a * b (numpy broadcasting)"},
      {.name = "Neg", .handler = &I::import_unary, .param = "neg", .dtypes = "FLOAT INT64 INT32", .doc = "neg(x)"},
      {.name = "NegativeLogLikelihoodLoss", .handler = &I::import_loss, .attributes = "reduction ignore_index",
       .constant_inputs = inputs({1}), .doc = "-sum(logp * onehot(targets) * weight, axis=1), reduced; constant targets"},
      {.name = "Not", .handler = &I::import_logic, .dtypes = "BOOL", .doc = "1 - a on computed BOOLs (u8)"},
      {.name = "Or", .handler = &I::import_logic, .dtypes = "BOOL", .doc = "a + b - a * b on computed BOOLs (u8)"},
      {.name = "PRelu", .handler = &I::import_prelu, .doc = "relu(x) - slope * relu(neg(x))"},
      {.name = "Pad", .handler = &I::import_pad, .attributes = "mode pads value", .constant_inputs = inputs({1, 2, 3}),
       .constants_since = 11,
       .dtypes = "FLOAT INT64 INT32 BOOL UINT8",
       .doc = "constant, reflect, edge: concat of the input with broadcast or mirrored narrow slices, axis by axis, in its dtype"},
      {.name = "Pow", .handler = &I::import_pow, .param = "**", .dtypes = "FLOAT INT64 INT32",
       .doc = "a ** b (numpy broadcasting); an integer exponent cast to a float base's dtype; an integer base: to_i64(to_f64(a) ** b) (exact below 2^53)"},
      {.name = "QuantizeLinear", .handler = &I::import_quantize_linear, .since = 10, .attributes = "axis", .dtypes = "FLOAT UINT8",
       .doc = "to UINT8 with one scale and zero point: to_u8(round_even(x / scale) + zero_point), saturated at [0, 255]"},
      {.name = "RNN", .handler = &I::import_recurrent, .attributes = "activation_alpha activation_beta activations clip direction hidden_size layout", .constant_inputs = inputs({4}),
       .doc = "a loop over the steps (unrolled): tanh(x @ W.T + h @ R.T + b), any direction"},
      {.name = "Reciprocal", .handler = &I::import_reciprocal, .doc = "x ** -1.0"},
      // Before opset 18 (ReduceSum: 13) the axes are an attribute; after it an
      // input this handler does not read: refused rather than reduced wrongly.
      {.name = "ReduceL1", .handler = &I::import_reduce, .until = 17, .attributes = kReduce,
       .doc = "sum(abs(x), axis=k, ...), one per axis"},
      {.name = "ReduceL2", .handler = &I::import_reduce, .until = 17, .attributes = kReduce,
       .doc = "sqrt(sum(x * x, axis=k, ...))"},
      {.name = "ReduceLogSum", .handler = &I::import_reduce, .until = 17, .attributes = kReduce,
       .doc = "log(sum(x, axis=k, ...))"},
      {.name = "ReduceLogSumExp", .handler = &I::import_reduce, .until = 17, .attributes = kReduce,
       .doc = "log(sum(exp(x), axis=k, ...))"},
      {.name = "ReduceMax", .handler = &I::import_reduce, .until = 17, .attributes = kReduce,
       .dtypes = "FLOAT INT64 INT32", .doc = "max(x, axis=k, keepdims=...), one per axis"},
      {.name = "ReduceMean", .handler = &I::import_reduce, .until = 17, .attributes = kReduce,
       .doc = "mean(x, axis=k, keepdims=...), one per axis"},
      {.name = "ReduceMin", .handler = &I::import_reduce, .until = 17, .attributes = kReduce,
       .dtypes = "FLOAT INT64 INT32", .doc = "min(x, axis=k, keepdims=...), one per axis"},
      {.name = "ReduceProd", .handler = &I::import_reduce, .until = 17, .attributes = kReduce,
       .dtypes = "FLOAT INT64 INT32", .doc = "x.narrow(k, 0, 1) * x.narrow(k, 1, 1) * ...: the product of the one-wide slices (at most 64 per output)"},
      {.name = "ReduceSum", .handler = &I::import_reduce, .attributes = kReduce,
       .constant_inputs = inputs({1}), .constants_since = 13, .dtypes = "FLOAT INT64 INT32", .doc = "sum(x, axis=k, keepdims=...), one per axis"},
      {.name = "ReduceSumSquare", .handler = &I::import_reduce, .until = 17, .attributes = kReduce,
       .doc = "sum(x * x, axis=k, ...)"},
      {.name = "Relu", .handler = &I::import_unary, .param = "relu", .dtypes = "FLOAT INT64 INT32", .doc = "relu(x)"},
      {.name = "Reshape", .handler = &I::import_reshape, .attributes = "allowzero", .constant_inputs = inputs({1}),
       .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "x.reshape(...) to a constant shape, or one computed from Shape whose one run-time dim is the -1: a view"},
      {.name = "Resize", .handler = &I::import_resize, .since = 10,
       .attributes = "coordinate_transformation_mode cubic_coeff_a exclude_outside extrapolation_value mode nearest_mode",
       .constant_inputs = inputs({1, 2, 3}),
       .doc = "constant scales or sizes: one constant interpolation matrix per resized axis (nearest, linear, cubic; every coordinate mode), a matmul each"},
      {.name = "Round", .handler = &I::import_unary, .param = "round_even", .doc = "round_even(x): halves to the even neighbour"},
      {.name = "Scatter", .handler = &I::import_scatter, .since = 9, .until = 10, .attributes = "axis", .constant_inputs = inputs({1}),
       .doc = "ScatterElements (constant indices)"},
      {.name = "ScatterElements", .handler = &I::import_scatter, .since = 11, .attributes = "axis reduction", .constant_inputs = inputs({1}),
       .doc = "constant indices: gather of [x; updates] flattened (the last update wins); add: x + scatter_add; mul, max, min: a gather per update"},
      {.name = "ScatterND", .handler = &I::import_scatter, .since = 11, .attributes = "reduction", .constant_inputs = inputs({1}),
       .doc = "constant indices: gather of [x; updates] flattened (the last update wins); add: x + scatter_add; mul, max, min: a gather per update"},
      {.name = "Selu", .handler = &I::import_activation, .attributes = "alpha gamma",
       .doc = "(relu(x) + (exp(x - relu(x)) - 1.0) * alpha) * gamma"},
      {.name = "Shape", .handler = &I::import_folded, .attributes = "start end",
       .doc = "folded into a constant: the input's dims, known when importing (--dim fixes run-time ones); with a run-time dim, "
               "the elements read of it are (ONNX's data propagation)"},
      {.name = "Shrink", .handler = &I::import_activation, .attributes = "bias lambd",
       .doc = "relu(x - l) - relu(neg(x) - l) + (sign(relu(x - l)) - sign(relu(neg(x) - l))) * (l - bias)"},
      {.name = "Sigmoid", .handler = &I::import_unary, .param = "sigmoid", .doc = "sigmoid(x)"},
      {.name = "Sign", .handler = &I::import_unary, .param = "sign", .dtypes = "FLOAT INT64 INT32", .doc = "sign(x)"},
      {.name = "Sin", .handler = &I::import_unary, .param = "sin", .doc = "sin(x)"},
      {.name = "Sinh", .handler = &I::import_unary, .param = "sinh", .doc = "sinh(x)"},
      {.name = "Size", .handler = &I::import_folded, .dtypes = "", .doc = "folded into a constant, of an input of known dims"},
      {.name = "Slice", .handler = &I::import_slice, .attributes = "starts ends axes", .constant_inputs = inputs({1, 2, 3, 4}),
       .constants_since = 10, .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "x[a:b:c, ...]: constant starts, ends, axes and positive steps, on axes of known size"},
      {.name = "Softmax", .handler = &I::import_softmax, .param = "softmax", .attributes = "axis",
       .doc = "softmax(x, axis=k); before opset 13 over the flattened trailing dims"},
      {.name = "SoftmaxCrossEntropyLoss", .handler = &I::import_loss, .attributes = "reduction ignore_index",
       .constant_inputs = inputs({1}), .doc = "NegativeLogLikelihoodLoss of log_softmax(x, axis=1); constant targets"},
      {.name = "Softplus", .handler = &I::import_unary, .param = "softplus", .doc = "softplus(x)"},
      {.name = "Softsign", .handler = &I::import_activation, .doc = "x * (abs(x) + 1.0) ** -1.0"},
      {.name = "SpaceToDepth", .handler = &I::import_depth_space, .attributes = "blocksize",
       .doc = "(x.reshape(N, C, H/b, b, W/b, b).permute(0, 3, 5, 1, 2, 4) * 1.0).reshape(N, C b b, H/b, W/b)"},
      {.name = "Split", .handler = &I::import_split, .attributes = "axis split num_outputs", .constant_inputs = inputs({1}),
       .constants_since = 13, .doc = "one x.narrow(axis, start, length) view per output, on an axis of known size"},
      {.name = "Sqrt", .handler = &I::import_unary, .param = "sqrt", .doc = "sqrt(x)"},
      {.name = "Squeeze", .handler = &I::import_reshape, .attributes = "axes", .constant_inputs = inputs({1}),
       .constants_since = 13, .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "x.reshape(...): a view"},
      {.name = "Sub", .handler = &I::import_arithmetic, .param = "-", .dtypes = "FLOAT INT64 INT32", .doc = "a - b (numpy broadcasting)"},
      {.name = "Sum", .handler = &I::import_variadic, .param = "+", .dtypes = "FLOAT INT64 INT32", .doc = "a + b + ..., variadic"},
      {.name = "Tan", .handler = &I::import_unary, .param = "tan", .doc = "tan(x)"},
      {.name = "Tanh", .handler = &I::import_unary, .param = "tanh", .doc = "tanh(x)"},
      {.name = "ThresholdedRelu", .handler = &I::import_activation, .attributes = "alpha",
       .doc = "x * relu(sign(x - alpha))"},
      {.name = "Tile", .handler = &I::import_tile, .constant_inputs = inputs({1}),
       .doc = "concat of the input with itself along each repeated axis (constant repeats)"},
      {.name = "TopK", .handler = &I::import_topk, .attributes = "axis k largest sorted", .constant_inputs = inputs({1}), .constants_since = 10,
       .doc = "constant k (up to 64): k rounds of max (min) and argmax over the axis, each extreme taken out of the next; indices as f32"},
      {.name = "Transpose", .handler = &I::import_transpose, .attributes = "perm", .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "x.permute(...)"},
      {.name = "Trilu", .handler = &I::import_trilu, .attributes = "upper", .constant_inputs = inputs({1}),
       .doc = "x * mask, a constant 0/1 parameter of the last two axes (constant k)"},
      {.name = "Unsqueeze", .handler = &I::import_reshape, .attributes = "axes", .constant_inputs = inputs({1}),
       .constants_since = 13, .dtypes = "FLOAT INT64 INT32 BOOL UINT8", .doc = "x.reshape(...): a view"},
      {.name = "Upsample", .handler = &I::import_resize, .until = 9, .attributes = "mode scales", .constant_inputs = inputs({1}),
       .constants_since = 9, .doc = "Resize with constant scales, asymmetric coordinates, nearest rounded down or linear"},
      {.name = "Where", .handler = &I::import_where, .dtypes = "FLOAT INT64 INT32 BOOL UINT8",
       .doc = "select(c, a, b) in the branches' dtype, the condition (constant or computed) cast to it"},
      {.name = "Xor", .handler = &I::import_logic, .dtypes = "BOOL", .doc = "a != b on computed BOOLs (u8)"},
  });
};

namespace {

// The checks ggml makes with static_asserts on its op tables: a row added out
// of order, twice, without a handler or a doc, or with an empty opset range
// does not compile.
constexpr bool sorted_and_unique() {
  const auto& t = OperatorTable::rows;
  for (std::size_t k = 1; k < t.size(); ++k)
    if (!(t[k - 1].name < t[k].name)) return false;
  return true;
}
constexpr bool complete() {
  for (const auto& r : OperatorTable::rows) {
    if (r.name.empty() || r.handler == nullptr || r.doc.empty()) return false;
    if (r.since < kFirstOpset || r.until < r.since || r.constants_since < kFirstOpset) return false;
  }
  return true;
}
static_assert(sorted_and_unique(), "operator_table.cpp: rows must be sorted by name, each operator once");
static_assert(complete(), "operator_table.cpp: every row needs a name, a handler, a doc and opsets from kFirstOpset on");

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

std::span<const OperatorRow> operator_table() { return OperatorTable::rows; }

const OperatorRow* find_operator(std::string_view op_type) {
  const auto& t = OperatorTable::rows;
  auto it = std::lower_bound(t.begin(), t.end(), op_type, [](const OperatorRow& r, std::string_view n) { return r.name < n; });
  return it != t.end() && it->name == op_type ? &*it : nullptr;
}

std::string opset_range(const OperatorRow& row) {
  return std::to_string(row.since) + (row.until == kLatestOpset ? "+" : "-" + std::to_string(row.until));
}

std::vector<std::string> body_functions() {
  std::vector<std::string> out;
  for (const auto& r : OperatorTable::rows)
    if (is_identifier(r.param)) out.emplace_back(r.param);
  return out;
}

}  // namespace wfgen::onnx_import::detail

// The state of an ONNX import, shared by its two halves:
//   onnx_import.cpp  reading the graph (inputs, initializers, frozen inputs),
//                    the body's values and names, and writing the spec;
//   operators.cpp    mapping each ONNX operator to body statements, folding
//                    the ones whose inputs are constants: the dispatch on
//                    operator_table.cpp's rows and their handlers (layers.cpp
//                    has those of the layers, rearrange.cpp DepthToSpace,
//                    SpaceToDepth and ReduceProd).
// Internal to wfgen/onnx: the public interface is onnx_import.hpp.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "wfgen/onnx/onnx_import.hpp"
#include "wfgen/onnx/operator_table.hpp"
#include "wfgen/onnx/shape_infer.hpp"
#include "wfgen/onnx/untrusted.hpp"
#include "wfgen/onnx/windows.hpp"

namespace wfgen::onnx_import::detail {

// A dim of a value while importing: known, or unknown (symbolic at run time).
using Dims = std::vector<std::optional<std::int64_t>>;

// What the body knows of an ONNX value.
struct Value {
  std::string body;  // the body expression naming it (a variable, or a literal for scalar constants)
  bool literal = false;
  std::optional<Dims> dims;  // nullopt: rank unknown
  // The body dtype of a computed value: "" for the build's float dtype (FLOAT,
  // or DOUBLE in an f64 model), else "i64", "i32", "u8" (UINT8) or "bool"
  // (BOOL, stored as u8): an integer or bool tensor the model computes on as
  // such (a build's typed_inputs, in its storage dtype: storage_dtype()).
  std::string dtype;
};

// The shortest text that reads back as the same float (0.35f prints as 0.35).
std::string format_float(float v);
// "[2, ?, 8]": dims as errors print them, ? for a run-time dim.
std::string dims_text(const Dims& d);
// x (of known rank) with `axis` moved first: its body, permuted where axis
// is not 0, and the dims of the other axes in order (Gather's layout).
struct AxisFirst {
  std::string body;
  Dims rest;
};
AxisFirst axis_first(const Value& x, std::int64_t axis);

// One spatial axis of a ConvTranspose (spatial.cpp): the canvas col2im
// writes, of size `canvas`, from which the output is [head, head + out).
struct TransposedAxis {
  std::int64_t kernel = 1, stride = 1, dilation = 1, in = 1;
  std::int64_t head = 0, out = 0, canvas = 0;
};

class Importer {
 public:
  Importer(std::string path, Options options)
      : path_(std::move(path)), options_(std::move(options)), checker_(path_, options_.max_data_bytes) {}
  // Imports the file at path_, or `bytes` as if read from it.
  Imported run(const std::string* bytes = nullptr);
 private:
  friend struct OperatorTable;  // operator_table.cpp: the rows name the handlers below
  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void unsupported(const onnx::NodeProto& node, const std::string& what) const;
  std::string describe(const onnx::NodeProto& node) const;
  // The node as the spec's comments name it: its operator, then its name
  // if it has one ("Conv 'conv1'").
  static std::string label(const onnx::NodeProto& node);
  // A body name for an ONNX name: letters, digits and '_', unique.
  std::string identifier(const std::string& onnx_name, const std::string& fallback);
  // Inputs of the graph that nodes read where a constant is needed.
  std::set<std::string> inputs_needed_as_constants() const;
  void freeze(const onnx::ValueInfoProto& vi, int position);
  // --- values ------------------------------------------------------------------

  Dims dims_of(const onnx::ValueInfoProto& vi, std::vector<std::string>* symbols);
  // A run-time dim's name in the where line (a DSL symbol).
  std::string dim_symbol(const std::string& param);
  void check_float(const onnx::ValueInfoProto& vi, const char* what) const;
  void read_input(const onnx::ValueInfoProto& vi);
  void read_output(const onnx::ValueInfoProto& vi);
  bool is_input(const std::string& body) const;
  const onnx::TensorProto* constant(const std::string& name) const;
  // The body value of an input of `node`: a value computed before, a graph
  // input, or a float initializer (a number when it holds one element and has
  // rank 0, else a parameter).
  Value operand(const onnx::NodeProto& node, int k);
  // An int64 constant input (Reshape's shape, axes): folded into the body.
  std::vector<std::int64_t> int_constant(const onnx::NodeProto& node, int k, const char* what);
  // --- attributes ----------------------------------------------------------------

  const onnx::AttributeProto* attr(const onnx::NodeProto& node, const std::string& name) const;
  std::int64_t attr_int(const onnx::NodeProto& node, const std::string& name, std::int64_t dflt) const;
  float attr_float(const onnx::NodeProto& node, const std::string& name, float dflt) const;
  std::optional<std::vector<std::int64_t>> attr_ints(const onnx::NodeProto& node, const std::string& name) const;
  // Refuses an attribute not in `known` (a row's attributes, space-separated).
  void only_attributes(const onnx::NodeProto& node, std::string_view known) const;
  // --- emission --------------------------------------------------------------------

  void line(const std::string& statement, const std::string& comment);
  // Defines the node's k-th output as `expr` with `dims`, of `dtype` (by
  // default the first computed input's, else the float dtype).
  void define(const onnx::NodeProto& node, int k, const std::string& expr, std::optional<Dims> dims,
              std::optional<std::string> dtype = std::nullopt);
  // --- integer and bool values (typed.cpp) --------------------------------------------
  // The importer's dtype of an ONNX element type ("" for FLOAT, "bool" for
  // BOOL), or nullopt when the body has none (UINT16, INT16, FLOAT16...).
  static std::optional<std::string> dtype_of_type(int elem_type);
  // The body's dtype of an importer dtype: "u8" for "bool", else itself.
  static std::string storage_dtype(const std::string& dtype);
  // The ONNX name of a body dtype ("" -> FLOAT or DOUBLE).
  std::string type_name(const std::string& dtype) const;
  // `v` as `dtype`: itself when it has it (or is a literal), else a cast node.
  std::string as_dtype(const Value& v, const std::string& dtype) const;
  // Refuses a computed input whose dtype the node's row does not take.
  void check_dtypes(const onnx::NodeProto& node, const OperatorRow& row) const;
  // Gather with indices computed at run time (integer values).
  void gather_computed(const onnx::NodeProto& node, const Value& x, std::int64_t axis);
  // Mod of INT64 and INT32 tensors, from the stdlib's integer division.
  void import_mod(const onnx::NodeProto& node, const OperatorRow& row);
  // BitShift of UINT8 tensors: the stdlib's shl and shr on u8.
  void import_bitshift(const onnx::NodeProto& node, const OperatorRow& row);
  // QuantizeLinear to UINT8 with one scale and zero point: to_u8(round_even(x / scale) + zero_point).
  void import_quantize_linear(const onnx::NodeProto& node, const OperatorRow& row);
  // DynamicQuantizeLinear: its ONNX function's statements (y, y_scale, y_zero_point).
  void import_dynamic_quantize_linear(const onnx::NodeProto& node, const OperatorRow& row);
  // Pow with x's type as the result's: integer exponents, integer bases (in f64).
  void import_pow(const onnx::NodeProto& node, const OperatorRow& row);
  std::int64_t rank_of(const onnx::NodeProto& node, const Value& v) const;
  std::int64_t axis_in(const onnx::NodeProto& node, std::int64_t axis, std::int64_t rank, bool plus_one = false) const;
  // numpy broadcasting of two shapes (unknown dims stay unknown).
  static std::optional<Dims> broadcast(const std::optional<Dims>& a, const std::optional<Dims>& b);
  // The arguments of `.reshape(...)` for `dims`: the known sizes, and -1 for
  // the one the tracer infers (a run-time dim); two unknown dims cannot be said.
  std::string reshape_args(const onnx::NodeProto& node, const Dims& dims) const;
  static std::optional<std::int64_t> product(const Dims& d, std::size_t from, std::size_t to);
  std::string binary(const onnx::NodeProto& node, const Value& a, const Value& b, const std::string& op);
  // `dims` of the node's output `name` as wfgen traced them, checked against
  // ONNX's shape inference: a dim one of them does not know is the other's,
  // and a dim both know differently is an error naming the node.
  std::optional<Dims> checked_dims(const onnx::NodeProto& node, const std::string& name, std::optional<Dims> dims) const;
  // The node's output as ONNX's data propagation knows it (an INT64 shape,
  // dim or index computed from Shape), when every element is known: a
  // constant, which folding did not give. Null otherwise.
  std::unique_ptr<onnx::TensorProto> propagated(const onnx::NodeProto& node) const;
  // A folded constant checked against ONNX's shape inference (dims) and data
  // propagation (values): a difference is an error naming the node.
  void check_folded(const onnx::NodeProto& node, const onnx::TensorProto& t) const;
  // Refuses reading `name` when it is a Shape whose dims are not all known
  // (kept aside in case only its known elements are read), with the reason.
  void refuse_deferred(const onnx::NodeProto& node, const std::string& name) const;
  // A node of the graph: folded when its inputs are constants, else its
  // row's handler (operator_table.cpp), or a refusal naming what is supported.
  void import_node(const onnx::NodeProto& node);
  // --- handlers: the rows of operator_table.cpp ------------------------------------
  // `row.param` is the body function, operator or reduction they write.
  void import_unary(const onnx::NodeProto& node, const OperatorRow& row);
  void import_arithmetic(const onnx::NodeProto& node, const OperatorRow& row);
  void import_compare(const onnx::NodeProto& node, const OperatorRow& row);
  void import_logic(const onnx::NodeProto& node, const OperatorRow& row);
  void import_arg_extreme(const onnx::NodeProto& node, const OperatorRow& row);
  void import_hardmax(const onnx::NodeProto& node, const OperatorRow& row);
  void import_cumsum(const onnx::NodeProto& node, const OperatorRow& row);
  void import_depth_space(const onnx::NodeProto& node, const OperatorRow& row);
  void import_mvn(const onnx::NodeProto& node, const OperatorRow& row);
  void import_lrn(const onnx::NodeProto& node, const OperatorRow& row);
  void import_batchnorm_training(const onnx::NodeProto& node);
  // A FLOAT parameter 0, 1, ..., n-1 along `axis` (size 1 elsewhere), n that axis's size in x.
  Value positions(const onnx::NodeProto& node, const Value& x, std::int64_t axis, const std::string& suffix);
  static Dims reduced_dims(Dims d, const std::set<std::int64_t, std::greater<>>& axes, bool keep);
  std::string product_over(const onnx::NodeProto& node, const Value& x, const std::set<std::int64_t, std::greater<>>& axes, bool keep);
  void import_identity(const onnx::NodeProto& node, const OperatorRow& row);
  void import_reciprocal(const onnx::NodeProto& node, const OperatorRow& row);
  void import_activation(const onnx::NodeProto& node, const OperatorRow& row);
  void import_prelu(const onnx::NodeProto& node, const OperatorRow& row);
  void import_constant(const onnx::NodeProto& node, const OperatorRow& row);
  // Shape, Size, ConstantOfShape: reached only when fold() could not fold them.
  void import_folded(const onnx::NodeProto& node, const OperatorRow& row);
  void import_where(const onnx::NodeProto& node, const OperatorRow& row);
  void import_expand(const onnx::NodeProto& node, const OperatorRow& row);
  void import_global_pool(const onnx::NodeProto& node, const OperatorRow& row);
  void import_gelu(const onnx::NodeProto& node, const OperatorRow& row);
  void import_leaky_relu(const onnx::NodeProto& node, const OperatorRow& row);
  void import_variadic(const onnx::NodeProto& node, const OperatorRow& row);
  void import_matmul(const onnx::NodeProto& node, const OperatorRow& row);
  void import_gemm(const onnx::NodeProto& node, const OperatorRow& row);
  void import_softmax(const onnx::NodeProto& node, const OperatorRow& row);
  void import_transpose(const onnx::NodeProto& node, const OperatorRow& row);
  // Activations written with the stdlib's element-wise nodes (Elu, Celu, Selu,
  // HardSigmoid, HardSwish, Softsign, Sinh, Cosh).
  std::string activation(const onnx::NodeProto& node);
  // Y = (X - mean) / sqrt(var + epsilon) * scale + B, each of the four per
  // channel (axis 1) and broadcast over the other axes.
  // A node whose inputs are all known when importing (ONNX's expanded
  // functions compute shapes and indices this way, from Shape): its output
  // becomes a constant. False when the node computes at run time.
  bool fold(const onnx::NodeProto& node);
  // Shape or Size of a computed value: a constant of its dims, or deferred
  // (deferred_) when one it reads is known only at run time.
  void fold_dims_of(const onnx::NodeProto& node);
  // Where's condition: a computed tensor (non-zero is true), or a BOOL or
  // numeric constant, made a FLOAT parameter of 0s and 1s.
  Value condition(const onnx::NodeProto& node);
  // Slice with constant starts, ends, axes and steps (attributes before
  // opset 10, inputs after) as the body's x[a:b:c, ...], on axes of known size.
  void import_slice(const onnx::NodeProto& node, const OperatorRow& row);
  // Concat of computed tensors (all-constant ones are folded): the stdlib's
  // concat, two operands at a time, along the axis (1 before opset 4).
  void import_concat(const onnx::NodeProto& node, const OperatorRow& row);
  // Split into narrow views along an axis of known size.
  void import_split(const onnx::NodeProto& node, const OperatorRow& row);
  // Trilu as X times a constant 0/1 mask of its last two axes.
  void import_trilu(const onnx::NodeProto& node, const OperatorRow& row);
  // A constant known when importing (a Constant node, a folded Cast): an
  // initializer from here on.
  void keep_constant(const std::string& name, std::unique_ptr<onnx::TensorProto> t);
  // Constant `t` (kept as `name`) as a parameter of the build: a tensor in
  // the body, never a literal, whatever its rank (operand()'s last case).
  Value parameter(const std::string& name, const onnx::TensorProto* t);
  // A FLOAT constant made while importing (indices, masks, one-hot targets,
  // a scalar widened to a tensor): kept as a parameter, and its body value.
  Value float_parameter(const onnx::NodeProto& node, const std::string& name, const std::vector<std::int64_t>& dims,
                        const std::vector<float>& values);
  // Operand k of `node` as a tensor of `dtype` and dims `out` (the
  // result's), for the calls of element-wise nodes, which take operands of
  // one shape: a smaller one broadcast to `out`, a scalar constant (a
  // literal, which a node call does not take) a FLOAT parameter of dims
  // [1 ... 1] first, cast to dtype.
  std::string full_operand(const onnx::NodeProto& node, int k, const Value& v, const std::string& dtype, const std::optional<Dims>& out);
  // Cast and CastLike: folded when the input is a constant; on a computed
  // tensor only to FLOAT, the type every computed value has here.
  void import_cast(const onnx::NodeProto& node, const OperatorRow& row);
  // The spatial sizes (axes 2, 3) of a Conv's or pool's input, which im2col
  // needs known; a 1-D input [N C L] is {1, L}, `image` its [N C 1 L] view.
  std::vector<std::int64_t> image_size(const onnx::NodeProto& node, const Value& x, std::string& image);
  // The node's window attributes; `one_d`: a 1-D node's, lifted to height 1.
  WindowAttrs window_attrs(const onnx::NodeProto& node, std::vector<std::int64_t> kernel, bool one_d = false);
  std::vector<WindowAxis> plan(const onnx::NodeProto& node, const std::vector<std::int64_t>& in, const WindowAttrs& a);
  // im2col of `x` (of c channels) for plan `p`, viewed as [N c*kh*kw grid_h
  // grid_w] and sliced to ONNX's windows [N c*kh*kw out_h out_w].
  std::string windows(const onnx::NodeProto& node, const std::string& x, std::int64_t c, const std::vector<WindowAxis>& p,
                      const std::string& tag);
  // The 3-D windows of `x` [N c D H W] for plan `p` (d, h, w), as
  // [N c*kd*kh*kw od*oh*ow]: two im2cols (windows3d.cpp).
  std::string volume_windows(const onnx::NodeProto& node, const std::string& x, std::int64_t c, const std::vector<WindowAxis>& p,
                             const std::string& tag);
  // A 2-D depthwise convolution (group = C = M) of `x` with weights `w`
  // [C 1 kh kw] as the node depthwise_conv2d, viewed as [N C out_h*out_w].
  std::string depthwise(const onnx::NodeProto& node, const std::string& x, const std::string& w, std::int64_t c,
                        const std::vector<WindowAxis>& p);
  // A 2-D 3 x 3 stride-1 convolution (group 1) of `x` with weights `w`
  // [M C 3 3] as the node winograd_conv2d, viewed as [N M out_h*out_w].
  std::string winograd(const onnx::NodeProto& node, const std::string& x, const std::string& w, std::int64_t m,
                       const std::vector<WindowAxis>& p);
  // `[:, :, a:b, c:d]`: ONNX's windows out of a window builtin's grid, "" when they are the grid.
  static std::string window_slice(const std::vector<WindowAxis>& p);
  // Conv (2-D, any group) as im2col + one batched matmul, as the stdlib's conv2d.
  void import_conv(const onnx::NodeProto& node, const OperatorRow& row);
  void import_loss(const onnx::NodeProto& node, const OperatorRow& row);
  void import_gather(const onnx::NodeProto& node, const OperatorRow& row);
  Value operand_named(const onnx::NodeProto& node, const std::string& name);
  // MaxPool and AveragePool (2-D) over im2col's windows. Padding enters a max
  // as -1e30 and is left out of an average's count (count_include_pad 0) by a
  // second im2col of a tensor of ones, which is 0 in the padding.
  void import_pool(const onnx::NodeProto& node, const OperatorRow& row);
  void need_one_output(const onnx::NodeProto& node) const;
  void import_batchnorm(const onnx::NodeProto& node, const OperatorRow& row);
  // Input k of a normalization, a vector of channels, as [C 1 ...].
  std::string per_channel(const onnx::NodeProto& node, int k, std::int64_t rank);
  // Y = (X - mean) / sqrt(var + epsilon) * Scale + B over the axes from
  // `axis` on; Mean and InvStdDev as ONNX defines them (reduced axes kept as 1).
  void import_layernorm(const onnx::NodeProto& node, const OperatorRow& row);
  // Reshape's shape: a constant, or a shape computed from Shape (ONNX's data
  // propagation's) whose one run-time element is the -1 (x.view(x.size(0), -1, 16)).
  std::vector<std::int64_t> reshape_shape(const onnx::NodeProto& node);
  void import_reshape(const onnx::NodeProto& node, const OperatorRow& row);
  void import_reduce(const onnx::NodeProto& node, const OperatorRow& row);
  void import_clip(const onnx::NodeProto& node, const OperatorRow& row);
  // Pad (constant, reflect, edge) and Tile as narrow, broadcast_to and
  // concat, axis by axis (padding.cpp).
  std::vector<std::int64_t> pad_amounts(const onnx::NodeProto& node, std::int64_t rank);
  float pad_value(const onnx::NodeProto& node);
  void import_pad(const onnx::NodeProto& node, const OperatorRow& row);
  void import_tile(const onnx::NodeProto& node, const OperatorRow& row);
  // ConvTranspose as a batched matmul and col2im; Resize and Upsample as a
  // constant interpolation matrix per resized axis (spatial.cpp).
  void import_conv_transpose(const onnx::NodeProto& node, const OperatorRow& row);
  std::vector<TransposedAxis> transposed_axes(const onnx::NodeProto& node, const std::vector<std::int64_t>& in,
                                              const std::vector<std::int64_t>& kernel);
  void import_resize(const onnx::NodeProto& node, const OperatorRow& row);
  // The indexing operators with constant indices, and Einsum (indexing.cpp).
  // A value's dims, all known when importing (else refused: `what` names it).
  std::vector<std::int64_t> known_dims(const onnx::NodeProto& node, const Value& x, const char* what);
  // Integer (or BOOL) constant input k: indices, a condition, a k; `dims` gets its shape.
  std::vector<std::int64_t> index_constant(const onnx::NodeProto& node, int k, const char* what,
                                           std::vector<std::int64_t>* dims = nullptr);
  // gather of `source` flattened (n elements) at the constant positions `from`, as `out`;
  // `dtype` is source's ("" float, i64, i32, u8).
  std::string pick(const onnx::NodeProto& node, const std::string& source, std::int64_t n, const std::vector<std::int64_t>& from,
                   const std::vector<std::int64_t>& out, const std::string& tag, const std::string& dtype = "");
  void import_gather_indexed(const onnx::NodeProto& node, const OperatorRow& row);
  void import_scatter(const onnx::NodeProto& node, const OperatorRow& row);
  void import_topk(const onnx::NodeProto& node, const OperatorRow& row);
  void import_einsum(const onnx::NodeProto& node, const OperatorRow& row);
  std::string diagonal(const onnx::NodeProto& node, const std::string& x, std::string& term, const std::vector<std::int64_t>& dims,
                       const std::string& tag);
  // InstanceNormalization: per sample and channel, over the spatial axes.
  void import_instancenorm(const onnx::NodeProto& node, const OperatorRow& row);
  // RNN, GRU and LSTM from the stdlib's nodes over an unrolled loop (recurrent.cpp).
  struct RecurrentPlan {
    std::string name, x, w, r, b, h0, c0, p, mask;  // body names ("" when absent); name: the prefix of the loop's names
    std::int64_t directions = 1, steps = 0, hidden = 0, layout = 0;
    bool first_reverse = false, linear_before_reset = false, want_y = false;
    std::string one_step;  // reshape_args of [1 B H]
    bool reverse(std::int64_t d) const { return d == 1 || first_reverse; }
  };
  struct RecurrentRun {
    std::string y, h, c;  // one direction's Y [T B H] ("" when no node reads Y), last h and c
  };
  void import_recurrent(const onnx::NodeProto& node, const OperatorRow& row);
  void recurrent_attributes(const onnx::NodeProto& node, std::int64_t directions) const;
  bool consumed(const std::string& name) const;
  RecurrentRun recurrent_direction(const onnx::NodeProto& node, const RecurrentPlan& p, std::int64_t d);
  std::string recurrent_mask(const onnx::NodeProto& node, std::int64_t steps, const std::optional<std::int64_t>& batch);
  void recurrent_outputs(const onnx::NodeProto& node, const RecurrentPlan& p, const std::vector<RecurrentRun>& runs,
                         const std::optional<std::int64_t>& batch);
  // --- the spec ---------------------------------------------------------------------

  Imported finish(const std::string& name);
  std::string path_;
  Options options_;
  TensorChecker checker_;  // the sizes and external data of every tensor read
  onnx::ModelProto model_;
  int opset_ = 0;
  int upgraded_from_ = 0;  // the file's opset when it was older than kFirstOpset and converted (upgrade.hpp)
  std::map<std::string, const onnx::TensorProto*> initializers_;
  // A DOUBLE model (precision.hpp): read as FLOAT, built as f64, its
  // initializers' and Constants' exact values by name.
  bool f64_ = false;
  std::map<std::string, std::vector<double>> doubles_;
  const char* body_dtype() const { return f64_ ? "f64" : "f32"; }
  std::vector<std::unique_ptr<onnx::TensorProto>> frozen_;
  std::vector<int> frozen_positions_;
  std::map<std::string, Value> values_;
  Inference inferred_;  // ONNX's shape inference and data propagation (shape_infer.hpp)
  std::map<std::string, std::string> deferred_;  // a Shape with a run-time dim: why it cannot be a constant
  std::map<std::string, std::string> dim_symbols_;
  std::set<std::string> used_dim_symbols_;
  std::set<std::string> used_;
  std::vector<std::pair<std::string, const onnx::TensorProto*>> params_;
  std::vector<std::string> inputs_, outputs_, returned_, renamed_;
  std::vector<std::pair<std::string, std::string>> typed_inputs_;  // body name, dtype: the build's typed_inputs
  std::string body_;
  int statements_ = 0;  // line()s written
};

}  // namespace wfgen::onnx_import::detail

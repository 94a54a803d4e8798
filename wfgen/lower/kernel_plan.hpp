// Lowering of node implementations to kernel plans: one plan per
// (node, device, dtype, rank). A plan says everything the emitter needs and
// nothing it has to decide: the C++ name, the parameters in order with their
// ranks and constness, and the typed kernel body. Every spec problem found
// here (an expression that does not type-check, a rank the DSL cannot have,
// a C++ kernel whose signature does not match) is a UserError pointing at
// the spec.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "wfgen/expr/expr.hpp"
#include "wfgen/spec/spec.hpp"

namespace wfgen::lower {

// A kernel's own locals are named wf_<word> (wf_i, wf_n, wf_off, wf_step...);
// a local derived from a spec name is wf_p_<name> (a row pointer, a copy of
// a list argument) or wf_t_<name> (a block copy), prefixes no other local
// has, so that a tensor named `n` or `step` cannot collide with them.
struct TensorParam {
  std::string name;  // the pointer name in the DSL ("A"), or "arg0" when unnamed
  std::string cpp;   // the C++ parameter name
  int rank = 0;
  bool written = false;  // an output (a non-const View)
  std::string dsl;       // "A[~ i j]"
  // Its dtype when not the kernel's: the output of a cast node (Node::out_dtype).
  std::optional<rt::DType> dtype;
  std::string local() const { return "wf_p_" + cpp; }  // its row pointer in a kernel
  std::string block() const { return "wf_t_" + cpp; }  // its block copy (rt::TileOperand)
};

struct ScalarParam {
  std::string name;  // the constructor argument
  std::string cpp;
  spec::ArgType type = spec::ArgType::Int;
  std::string local() const { return "wf_p_" + cpp; }  // a kernel's copy of it (an int list as a std::vector)
};

// A value computed once per row by a fused row kernel (passes/fuse.cpp):
// a reduction over the row, or an expression of earlier row values.
struct RowValue {
  bool reduce = false;
  spec::ReduceOp op = spec::ReduceOp::Sum;  // reduce: sum, mean, max or min
  expr::Expr element;                       // reduce: each element's value; else the row value
  std::optional<expr::Expr> epilogue;       // reduce: the result from `acc` and `n` (mean is divided first)
};

// The body of a kernel made by fusion that has reductions. Its iteration
// space is the shape of its row-vector inputs; a row is the last axis.
// Expressions name the inputs "in0", "in1"... (the element at the current
// column, or the row's one element for inputs whose last dim is 1) and the
// row values computed before them "row0", "row1"... All expressions are
// type-checked for the kernel's dtype.
struct FusedBody {
  std::vector<bool> row_input;  // per input: one element per row
  std::vector<RowValue> rows;   // in order, once per row
  expr::Expr out;               // the output element (or the row's one element)
  bool out_per_row = false;     // the output's last dim is 1
};

struct KernelPlan {
  const spec::Node* node = nullptr;
  const spec::Impl* impl = nullptr;
  rt::DType dtype = rt::DType::f32;
  int rank = 0;
  std::string function;  // "add_f32_r3", "matmul_blas_f32_r3"
  std::vector<TensorParam> tensors;
  std::vector<ScalarParam> scalars;
  // Elementwise: the value of the output; Reduce: prologue (over the input
  // element) and epilogue (over acc and n), when given; Builtin: an
  // epilogue made by fusion (plan_with_epilogue).
  std::optional<expr::Expr> body, prologue, epilogue;
  std::string cpp_call;  // Cpp: the function to call, spelled for C++ ("ns::f<float, 2>")
  std::string cpp_include;  // Cpp: the kernel file, relative to the output directory
  std::shared_ptr<const FusedBody> fused;  // Fused: the row kernel
  bool fast_math = false;  // made by fusion for a build with `math: fast`: calls rt::math::fast
  bool accumulate = false;  // Gemm: C += A B into the output (the function is named <node>_acc_...)
};

// One kernel a model needs.
struct KernelRequest {
  const spec::Impl* impl = nullptr;
  rt::DType dtype = rt::DType::f32;
  int rank = 0;
  // A model chose this kernel with its call's arguments: the impl's reject
  // condition was judged then, so it is not judged again on the defaults.
  bool chosen_by_model = false;
  // A GEMM that adds its product into the output (graph::Value::accumulate):
  // a kernel of its own, made only when a model asks for it.
  bool accumulate = false;
  friend bool operator<(const KernelRequest& a, const KernelRequest& b) {
    return std::tie(a.impl, a.dtype, a.rank, a.accumulate) < std::tie(b.impl, b.dtype, b.rank, b.accumulate);
  }
};

struct KernelSelection {
  bool exact_only = false;              // exactly the kernels in `exact`
  std::vector<KernelRequest> exact;
  bool all = true;                      // every impl of the spec
  std::vector<std::string> nodes;       // else only these nodes
  bool include_stdlib = false;          // with all: also the standard library's impls
};

// Plans every kernel of the selected impls, for each dtype and rank they
// declare. Deterministic order: by file, then node, device, dtype, rank.
// Throws UserError with every problem found.
std::vector<KernelPlan> plan_kernels(const spec::Spec& spec, const KernelSelection& selection);

// Binds a node's scalar constructor arguments (int, float, bool) for a
// condition over them (an impl's reject, a path query's when): each argument
// that has a value gets a Scalar binding of its value's type in `env` and
// its value in `values`; unset ones are left unbound.
void bind_scalar_args(const spec::Node& node, const std::vector<std::optional<spec::ArgValue>>& args, expr::Env& env,
                      std::map<std::string, double>& values);

// Whether `impl`'s reject condition (cl-waffe2's reject-p) holds for kernels
// of `dtype` called with constructor arguments `args` (in the node's order;
// unset entries are not bound). False without a condition. Throws
// expr::Error when the condition does not parse or type-check.
bool rejects(const spec::Impl& impl, const spec::Node& node, rt::DType dtype,
             const std::vector<std::optional<spec::ArgValue>>& args);

// Whether the kernels of `impl` can apply an element-wise epilogue to each
// output element (`fuse_epilogue: true` on a gemm kernel, or on a builtin
// that takes one: depthwise_conv2d, winograd_conv2d).
bool takes_epilogue(const spec::Impl& impl);

// The number of trailing axes of the output over which the other operands
// of an epilogue of `impl` must be constant: a builtin with
// `fuse_epilogue: true` that takes one (depthwise_conv2d: 2, its epilogue's
// operands are per (n, c) plane); 0 when it takes none, or (a gemm kernel,
// winograd_conv2d) when they may vary along every axis.
int epilogue_axes(const spec::Impl& impl);

// The kernel of `impl` (takes_epilogue) of `node` that applies `epilogue`
// to each output element before storing it (passes/fuse.cpp): the kernel's
// inputs, then `inputs` tensors in0, in1... shaped as the output, then the
// output; the epilogue names the kernel's result `acc` and those inputs
// (typed for `dtype`). Its function is named from `node`.
KernelPlan plan_with_epilogue(const spec::Spec& spec, const spec::Node& node, const spec::Impl& impl, rt::DType dtype, int rank,
                              int inputs, expr::Expr epilogue);

// The names of a node's tensor parameters in kernel order: the inputs, then
// the outputs that are not inputs ("arg<k>" for unnamed ones). A call's
// operands follow this order.
std::vector<std::string> tensor_names(const spec::Node& node);

// The generated name of a kernel: "add_f32_r3"; the device appears unless it is cpu.
std::string kernel_name(const std::string& node, const std::string& device, rt::DType dtype, int rank, bool accumulate = false);

// The ranks `impl` is generated for without a build asking for them: its
// `ranks`, or every rank 1 to 4 the node's `where` allows.
std::vector<int> default_ranks(const spec::Impl& impl, const spec::Node& node);

// Whether a build may call `impl` at `rank`: one of its default ranks, or one
// of its `demand_ranks` the node's `where` allows (generated for that build only).
bool has_rank(const spec::Impl& impl, const spec::Node& node, int rank);

// The rank of each argument of `decl` when its first output has rank `rank`,
// or nullopt when the DSL does not allow that rank.
std::optional<std::vector<int>> argument_ranks(const subscript::Declaration& decl, int rank);

}  // namespace wfgen::lower

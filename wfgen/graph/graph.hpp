// The graph IR a traced model becomes (as torch.fx's Graph): a list of
// values in definition order. Every value is one of the kinds listed once
// in WFGEN_VALUE_KINDS; each keeps the spec location it came from.
//
//   input  (placeholder)    a tensor the caller passes
//   param  (get_attr)       a trainable tensor of the model
//   call   (call_function)  a node's kernel writing a fresh tensor
//   view   (call_method)    a view of another value: no data moves
//   grad                    the gradient buffer of a parameter or input, owned by the model
//   seed                    the gradient of an output that the pullback starts from
//   output                  the list of results (Graph::outputs)
// The pullback (autodiff) appends calls and views marked `backward`; they
// run after the forward ones, in value order.
// Calls of other models (call_module) are inlined while tracing; their
// values keep the model path in `scope`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wfgen/shape/shape.hpp"
#include "wfgen/spec/spec.hpp"

namespace wfgen::graph {

#define WFGEN_VALUE_KINDS(X) \
  X(Input, "input")          \
  X(Param, "param")          \
  X(Call, "call")            \
  X(View, "view")            \
  X(Grad, "grad")            \
  X(Seed, "seed")

enum class Kind {
#define WFGEN_KIND_ENUM(name, text) name,
  WFGEN_VALUE_KINDS(WFGEN_KIND_ENUM)
#undef WFGEN_KIND_ENUM
};
const char* kind_name(Kind k);

// How a view is made from its base. Each is a pure function of the base's
// shape and strides, computed again whenever run-time dims change.
enum class ViewKind {
  Permute,    // axes reordered by `perm` (x.T swaps the last two)
  Reshape,    // a new shape of the same size (the base must be contiguous)
  Broadcast,  // to `shape`, numpy rules: new leading axes and size-1 axes get stride 0
  Slice,      // `starts`, `stops`, `steps` per axis (normalised, steps > 0)
  Squeeze,    // drop axis `axis` of size 1
  Unsqueeze,  // insert a size-1 axis at `axis`
};
const char* view_name(ViewKind v);

using shape::Dim;
using shape::Shape;

// A value of the graph. Values are referred to by index.
struct Value {
  int id = 0;
  Kind kind = Kind::Call;
  rt::DType dtype = rt::DType::f32;
  Shape shape;
  std::string name;   // inputs and params: their names; others: the body's variable if any
  std::string scope;  // model path, "MLP/Linear_1"
  SourceLoc loc;      // the body statement (or spec entry) it came from
  std::string source; // the text of that body line

  // Call
  const spec::Node* node = nullptr;
  const spec::Impl* impl = nullptr;  // the chosen implementation (device)
  std::vector<int> operands;         // the kernel's tensors in parameter order; the result is one of them
  int result_operand = 0;            // which operand is written (the value itself)
  int init_from = -1;                // the result starts as a copy of this value (in place on a caller's tensor)
  std::vector<spec::ArgValue> args;  // constructor arguments in the node's order
  int rank = 0;                      // kernel rank
  // The dtype the kernel computes in when not the result's: a cast node's
  // input dtype (Node::out_dtype), which names and chooses its kernel.
  std::optional<rt::DType> compute_dtype;
  rt::DType kernel_dtype() const { return compute_dtype.value_or(dtype); }
  // The result is written into the storage of this value (a gradient buffer,
  // or a view of a buffer being filled) instead of a fresh arena slot.
  int write_to = -1;
  // With write_to: the result is added into that storage (C += A B), not
  // stored. Only GEMM calls accumulate (passes/accumulate.cpp).
  bool accumulate = false;

  bool backward = false;  // part of the pullback
  int grad_of = -1;       // Grad: the parameter or input it belongs to
  int seed_of = -1;       // Seed: the index of the output in Graph::outputs

  // View
  ViewKind view = ViewKind::Permute;
  int base = -1;
  std::vector<int> perm;
  std::vector<Dim> starts, stops, steps;
  int axis = 0;

  // Param
  const spec::Param* param = nullptr;
  std::string param_path;  // "Linear_1.W"

  bool contiguous = true;  // the value's layout is row-major contiguous

  // Indices: an input the caller passes with an integer dtype (a build's
  // input_dtypes; `caller_dtype` on the input itself), or a view or copy of
  // one. The model holds them as `dtype` (converted value by value at each
  // forward, checked); only index inputs of nodes (Node::indices) read them.
  bool holds_indices = false;
  std::optional<rt::DType> caller_dtype;  // Input: the dtype forward() takes
};

// An assert of a body whose condition depends on run-time dims
// (`assert X.size(0) % 2 == 0, "..."`): every comparison must hold, checked
// by the generated model when its inputs are bound.
struct SizeCheck {
  Dim lhs;
  std::string op;  // == != < <= > >=
  Dim rhs;
};
struct Assertion {
  std::vector<SizeCheck> all;
  std::string message;
  SourceLoc loc;       // the assert statement
  std::string source;  // its text, as the parser understood it
};

struct Graph {
  std::string model;
  std::vector<Value> values;
  std::vector<int> inputs, params, outputs;
  std::vector<std::string> output_names;
  std::vector<std::string> symbols;  // run-time dims, in order of first appearance in the inputs
  // Autodiff: one gradient buffer per trainable parameter and per input
  // asked for (Kind::Grad, in that order), one seed per output.
  std::vector<int> grads, seeds;
  bool has_backward = false;
  std::vector<Assertion> assertions;  // checked at run time, in body order

  const Value& operator[](int id) const { return values[static_cast<std::size_t>(id)]; }
  Value& operator[](int id) { return values[static_cast<std::size_t>(id)]; }
  // The value whose storage `id` uses (itself unless it is a view).
  int root(int id) const;
  // A readable listing, one value per line (for --dump-after and tests).
  std::string dump() const;
};

// Keeps the values listed in `order` (ids of `g`, each once), in that order,
// and renumbers every reference; references to dropped values must not
// remain.
void renumber(Graph& g, const std::vector<int>& order);

// Makes every reader of `from` (operands, view bases, outputs) read `to`.
void replace_uses(Graph& g, int from, int to);

// How many times each value is read: as an operand of another value, as a
// view's base, as a call's init_from or write_to, as an output.
std::vector<int> count_readers(const Graph& g);

}  // namespace wfgen::graph

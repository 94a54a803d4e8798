// Tracing: a build's model body -> a graph (as torch.fx's symbolic tracer).
//
// The body is evaluated with proxies: tensors are graph values, constructor
// arguments are plain numbers, so `if` and `for` over arguments run while
// tracing and vanish from the graph. Every node call is shape-checked with
// its Subscript DSL; a mismatch is a Shape-Error report pointing at the
// body line (file:line:col). Calls of other models are inlined, with their
// parameters named by the model path ("Linear_1.W").
#pragma once

#include <string_view>

#include "wfgen/graph/graph.hpp"
#include "wfgen/spec/spec.hpp"

namespace wfgen::trace {

// Traces `build` (its model with the build's arguments, dtype and devices).
// Throws UserError. Warnings found while tracing (-Wtruncation,
// -Wunused-output) are appended to `warnings` when it is given.
//
// An `assert` of a body is checked here when its condition is known while
// tracing (a failure is an error at the assert, or, inside a model of the
// standard library, at the user's call, with the chain of calls as notes);
// one on run-time dims becomes a Graph::assertions entry.
graph::Graph trace_build(const spec::Spec& spec, const spec::Build& build, std::vector<Diagnostic>* warnings = nullptr);

// `wfgen check` of one model by itself, as no build would: its arguments
// without a default and the symbols of its where line stay symbolic, `~` is
// tried as one, none and two dims. Throws UserError for what is wrong
// whatever the values; returns notes for what cannot be decided without them
// (the first statement that needs a value the model does not give).
std::vector<Diagnostic> check_model(const spec::Spec& spec, const spec::Model& model);

// lint.cpp: a model's text alone, without tracing it.
// resolve_model: its body parses, every name it reads is bound somewhere
// (an argument, parameter, input, where symbol, assignment or loop), every
// callee is a node, model, built-in or method, and every keyword argument
// is one the callee takes. Throws UserError with every problem found.
void resolve_model(const spec::Spec& spec, const spec::Model& model);
// lint_model: the warnings of a model, each message ending in its name:
// -Wunused-parameter, -Wunused-argument, -Wunused-input, -Wunused-symbol
// (a binding `where k = ...` of the where line that no dim uses), -Wunused-value
// (a name assigned and never read; names starting with '_' are exempt).
std::vector<Diagnostic> lint_model(const spec::Spec& spec, const spec::Model& model);
// lint_node: -Wunused-symbol of a node's where line.
std::vector<Diagnostic> lint_node(const spec::Spec& spec, const spec::Node& node);

// Autodiff (cl-waffe2's compile-forward-and-backward, at build time): appends
// the pullback of a traced graph. Each call is differentiated with its node's
// `backward:` expressions (or its implementation's), traced like a body;
// views are undone (a broadcast by a sum over the broadcast axes, a slice by
// writing into zeros). Gradients of a value used several times are summed;
// values no trainable parameter or `grad_inputs` input depends on get no
// gradient work. Adds one Kind::Grad buffer per trainable parameter and per
// grad input (backward() adds into them; zero_grad() clears them) and one
// Kind::Seed per output (the gradient the pullback starts from).
// Throws UserError when a gradient must flow through a node input that has
// no backward.
void derive_backward(const spec::Spec& spec, const spec::Build& build, graph::Graph& g);

// The stdlib node a binary operator of the body language calls on two
// tensors ("+": "add", "**": "pow", "==": "eq", ...), or "" for an operator
// that has none. The ONNX importer folds constants with the node its
// handlers' statements become (wfgen/onnx/stdlib_fold.cpp).
std::string_view tensor_operator_node(std::string_view op);

}  // namespace wfgen::trace

// Tracing: a build's model body -> a graph (as torch.fx's symbolic tracer).
//
// The body is evaluated with proxies: tensors are graph values, constructor
// arguments are plain numbers, so `if` and `for` over arguments run while
// tracing and vanish from the graph. Every node call is shape-checked with
// its Subscript DSL; a mismatch is a Shape-Error report pointing at the
// body line (file:line:col). Calls of other models are inlined, with their
// parameters named by the model path ("Linear_1.W").
#pragma once

#include "wfgen/graph/graph.hpp"
#include "wfgen/spec/spec.hpp"

namespace wfgen::trace {

// Traces `build` (its model with the build's arguments, dtype and devices).
// Throws UserError.
graph::Graph trace_build(const spec::Spec& spec, const spec::Build& build);

}  // namespace wfgen::trace

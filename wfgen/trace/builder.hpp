// Internal to wfgen/trace and wfgen/passes: the tracer's operations the
// autodiff (autodiff.cpp) builds the pullback with, and the rewrites
// (passes/rewrite.cpp) build replacements with. Values made through a Builder
// are checked exactly as traced ones (shapes, implementations per device)
// and are marked as part of the pullback.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wfgen/graph/graph.hpp"
#include "wfgen/spec/spec.hpp"

namespace wfgen::trace::detail {

class Builder {
 public:
  Builder(const spec::Spec& spec, const spec::Build& build, graph::Graph g);
  ~Builder();
  graph::Graph& graph();
  graph::Graph take();

  // Values made from now on are attributed to this forward line (and are
  // part of the pullback).
  void attribute(const SourceLoc& loc, const std::string& source);
  // The same for a rewrite of the forward graph (passes/rewrite.cpp): the
  // values are forward values of model path `scope`.
  void attribute_forward(const SourceLoc& loc, const std::string& source, const std::string& scope);

  // Evaluates a `backward:` expression with tensors and constructor
  // arguments bound by name; nullopt when it is 0 (no gradient).
  std::optional<int> eval(const spec::Text& text, const std::vector<std::pair<std::string, int>>& tensors,
                          const std::vector<std::pair<std::string, spec::ArgValue>>& args);

  // A call of a node on tensors of equal shapes (its output allocated).
  int node(const std::string& name, const std::vector<int>& tensors, const std::vector<spec::ArgValue>& args = {});
  int permute(int x, const std::vector<int>& perm);
  int reshape(int x, const graph::Shape& shape);  // copies first when x is not contiguous
  int broadcast(int x, const graph::Shape& shape);
  int view(int base, graph::ViewKind kind, const graph::Shape& shape);
  int sum_axes(int x, const std::vector<int>& axes);  // keeps the axes, as size 1
  int zeros(const graph::Shape& shape);               // a fresh tensor of zeros

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace wfgen::trace::detail

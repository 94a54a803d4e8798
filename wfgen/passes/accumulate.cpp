// Products added into gradient buffers: `grad <- grad + A B` as one GEMM
// that accumulates (beta = 1), not a GEMM into a temporary and an add.
#include "wfgen/passes/passes.hpp"

namespace wfgen::passes {

int accumulate_products(graph::Graph& g) {
  using graph::Kind;
  // Readers of each value (operands, view bases, init_from, write_to, outputs).
  std::vector<int> readers(g.values.size(), 0);
  auto read = [&](int id) { ++readers[static_cast<std::size_t>(id)]; };
  for (const auto& v : g.values) {
    for (int o : v.operands)
      if (o != v.id) read(o);
    if (v.base >= 0) read(v.base);
    if (v.init_from >= 0) read(v.init_from);
    if (v.write_to >= 0) read(v.write_to);
  }
  for (int o : g.outputs) read(o);
  int merged = 0;
  for (auto& add : g.values) {
    // The accumulation autodiff makes: add(buffer, G) written into buffer.
    if (add.kind != Kind::Call || add.write_to < 0 || add.node->name != "add" || add.operands.size() != 3) continue;
    const int buffer = add.write_to;
    if (add.operands[0] != buffer || g[buffer].kind != Kind::Grad) continue;
    graph::Value& product = g[add.operands[1]];
    if (product.kind != Kind::Call || product.impl->kind != spec::BodyKind::Gemm || product.write_to >= 0 ||
        product.init_from >= 0 || product.accumulate)
      continue;
    // G's result only feeds this add, with the buffer's shape and dtype (no
    // broadcast), and nothing else reads the buffer: writing it at G's place
    // instead of the add's changes no value anyone sees.
    if (readers[static_cast<std::size_t>(product.id)] != 1 || readers[static_cast<std::size_t>(add.id)] != 0 ||
        readers[static_cast<std::size_t>(buffer)] != 2 || product.shape != g[buffer].shape || product.dtype != g[buffer].dtype)
      continue;
    product.write_to = buffer;
    product.accumulate = true;
    add.write_to = -1;  // now read by nothing: dead-code elimination drops it
    ++merged;
  }
  return merged;
}

}  // namespace wfgen::passes

// Results written where they are going, not into a temporary then moved:
// products added into gradient buffers (`grad <- grad + A B` as one GEMM
// that accumulates, beta = 1), and results copied into a window of a
// tensor (a slice's gradient) written into that window by their kernel.
#include <algorithm>
#include <optional>

#include "wfgen/passes/passes.hpp"

namespace wfgen::passes {

namespace {

using graph::Kind;

// Whether call `u` reads or writes the storage `root`.
bool touches(const graph::Graph& g, const graph::Value& u, int root) {
  for (int o : u.operands)
    if (o != u.id && g.root(o) == root) return true;
  return (u.init_from >= 0 && g.root(u.init_from) == root) || (u.write_to >= 0 && g.root(u.write_to) == root);
}

// The copy `copy` of P's result (or of a permuted view of it) into a view
// of other storage, where P may write that view itself: P's kernel takes a
// strided output (a GEMM's row and column strides, an element-wise loop
// nest), its result goes nowhere else, and nothing reads or writes the
// storage between P and the copy. Returns P, or -1.
int producer_of_copy(const graph::Graph& g, const std::vector<int>& readers, const graph::Value& copy) {
  if (copy.kind != Kind::Call || copy.write_to < 0 || copy.node->name != "copy" || copy.operands.size() != 2 ||
      readers[static_cast<std::size_t>(copy.id)] != 0)
    return -1;
  int p = copy.operands[0];
  if (g[p].kind == Kind::View && g[p].view == graph::ViewKind::Permute && readers[static_cast<std::size_t>(p)] == 1) p = g[p].base;
  const graph::Value& P = g[p];
  if (P.kind != Kind::Call || (P.impl->kind != spec::BodyKind::Gemm && P.impl->kind != spec::BodyKind::Elementwise) ||
      P.write_to >= 0 || P.init_from >= 0 || P.accumulate || P.dtype != copy.dtype || readers[static_cast<std::size_t>(p)] != 1)
    return -1;
  const int root = g.root(copy.write_to);
  if (touches(g, P, root)) return -1;
  for (int id = p + 1; id < copy.id; ++id)
    if (g[id].kind == Kind::Call && touches(g, g[id], root)) return -1;
  return p;
}

// The values P's output view needs (the copy's target and its bases, up
// to the root) that are defined after P, when they can move before it:
// views, and a root that is a call of no operands (a fill). Sorted; nullopt
// when one cannot move.
std::optional<std::vector<int>> defined_late(const graph::Graph& g, int target, int p) {
  std::vector<int> late;
  for (int id = target; id > p;) {
    const graph::Value& v = g[id];
    late.push_back(id);
    if (v.kind == Kind::View) {
      id = v.base;
      continue;
    }
    const bool fill = v.kind == Kind::Call && v.write_to < 0 && v.init_from < 0 &&
                      std::all_of(v.operands.begin(), v.operands.end(), [&](int o) { return o == v.id; });
    if (!fill) return std::nullopt;
    break;
  }
  std::sort(late.begin(), late.end());
  return late;
}

// A permuted view of `base` like `like` (a permute view of the pullback),
// appended to the graph; returns its id.
int permuted(graph::Graph& g, const graph::Value& like, int base, std::vector<int> perm) {
  graph::Value v = like;
  v.id = static_cast<int>(g.values.size());
  v.base = base;
  v.shape.clear();
  for (int a : perm) v.shape.push_back(g[base].shape[static_cast<std::size_t>(a)]);
  v.perm = std::move(perm);
  v.contiguous = false;
  g.values.push_back(std::move(v));
  return g.values.back().id;
}

// The permutation that swaps the last two of `rank` axes.
std::vector<int> swap_last(std::size_t rank) {
  std::vector<int> perm(rank);
  for (std::size_t k = 0; k < rank; ++k) perm[k] = static_cast<int>(k);
  std::swap(perm[rank - 2], perm[rank - 1]);
  return perm;
}

// A product copied through its transpose, (A B)^T, is made B^T A^T
// instead: writing through the transpose would store one element at a time
// (a column stride), this writes the window's rows (dK of an attention
// head: q_h^T dS becomes dS^T q_h). Transposed operands are views the GEMM
// packs. Appends the operands' views to `late`; false when P is not such a
// product.
bool transpose_product(graph::Graph& g, int p, const graph::Value& source, std::vector<int>& late) {
  const std::size_t rank = g[p].shape.size();
  if (g[p].node->name != "matmul" || g[p].operands.size() != 3 || g[p].result_operand != 2 || rank < 2 || source.perm != swap_last(rank))
    return false;
  const std::vector<int> operands = g[p].operands;
  for (int k = 0; k < 2; ++k)
    if (g[operands[static_cast<std::size_t>(k)]].shape.size() != rank) return false;
  int swapped[2];
  for (int k = 0; k < 2; ++k) {
    const int x = operands[static_cast<std::size_t>(k)];
    const bool transposed = g[x].kind == Kind::View && g[x].view == graph::ViewKind::Permute && g[x].perm == swap_last(rank);
    swapped[k] = transposed ? g[x].base : permuted(g, source, x, swap_last(rank));
    if (!transposed) late.push_back(swapped[k]);
  }
  g[p].operands = {swapped[1], swapped[0], p};
  g[p].shape = source.shape;
  return true;
}

// Makes P write into the copy's target (through the inverse of the copy's
// permutation, or as the transposed product), moving what that target
// needs before P.
void write_into(graph::Graph& g, int p, int copy, std::vector<int> late) {
  int target = g[copy].write_to;
  const int source = g[copy].operands[0];
  if (source != p && !transpose_product(g, p, graph::Value(g[source]), late)) {
    std::vector<int> inverse(g[source].perm.size());
    for (std::size_t k = 0; k < inverse.size(); ++k) inverse[static_cast<std::size_t>(g[source].perm[k])] = static_cast<int>(k);
    target = permuted(g, g[source], target, inverse);
    late.push_back(target);
  }
  g[p].write_to = target;
  g[copy].write_to = -1;  // now read by nothing: dead-code elimination drops it
  std::vector<int> order;
  for (const auto& v : g.values) {
    if (v.id == p) order.insert(order.end(), late.begin(), late.end());
    if (std::find(late.begin(), late.end(), v.id) == late.end()) order.push_back(v.id);
  }
  graph::renumber(g, order);
}

}  // namespace

int write_into_windows(graph::Graph& g) {
  int merged = 0;
  for (bool found = true; found;) {
    found = false;
    const std::vector<int> readers = graph::count_readers(g);
    for (auto& copy : g.values) {
      const int p = producer_of_copy(g, readers, copy);
      if (p < 0) continue;
      std::optional<std::vector<int>> late = defined_late(g, copy.write_to, p);
      if (!late) continue;
      write_into(g, p, copy.id, std::move(*late));
      ++merged;
      found = true;
      break;  // ids changed
    }
  }
  return merged;
}

int accumulate_products(graph::Graph& g) {
  const std::vector<int> readers = graph::count_readers(g);
  int merged = 0;
  for (auto& add : g.values) {
    // The accumulation autodiff makes: add(buffer, G) written into buffer.
    if (add.kind != Kind::Call || add.write_to < 0 || add.node->name != "add" || add.operands.size() != 3) continue;
    const int buffer = add.write_to;
    if (add.operands[0] != buffer || g[buffer].kind != Kind::Grad) continue;
    graph::Value& product = g[add.operands[1]];
    // (Not a GEMM fusion gave an epilogue: that applies to the sum.)
    if (product.kind != Kind::Call || product.impl->kind != spec::BodyKind::Gemm || product.node->fused || product.write_to >= 0 ||
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

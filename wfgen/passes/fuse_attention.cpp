// Fused attention (see passes.hpp, fuse_attention): a head's
//   S = Q @ KT            (matmul)
//   P = scaled_softmax(S, scale, causal)
//   O = P @ V             (matmul)
// becomes one call of a kernel (builtin "attention", rt::attention_rows in
// wfgen/attention.hpp) that computes each block of O's rows from Q, KT and V
// with the scores in L1: only the columns j <= i of a causal row, the
// softmax on them, then their product with V. Only where S and P have no
// other reader: a training step's backward reads P (the softmax's backward
// reads its output), so there the three calls stay.
#include <algorithm>
#include <string>
#include <vector>

#include "wfgen/passes/passes.hpp"

namespace wfgen::passes {

namespace {

using graph::Graph;
using graph::Kind;
using graph::Value;


class AttentionFuser {
 public:
  AttentionFuser(Graph& g, FusionRegistry& registry, int build_index, std::string* log)
      : g_(g), registry_(registry), build_index_(build_index), log_(log) {}

  int run() {
    const std::size_t n = g_.values.size();
    readers_ = graph::count_readers(g_);
    int removed = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (fuse(static_cast<int>(i))) removed += 2;
    return removed;
  }

 private:
  static std::size_t id(int v) { return static_cast<std::size_t>(v); }

  // A cpu GEMM call that stores a fresh product (no epilogue, nothing accumulated or written elsewhere).
  bool plain_product(const Value& v) const {
    return v.kind == Kind::Call && v.impl && v.impl->kind == spec::BodyKind::Gemm && v.impl->device == "cpu" && !v.node->fused &&
           !v.accumulate && v.write_to < 0 && v.init_from < 0 && rt::dtype_is_float(v.dtype) && v.operands.size() == 3;
  }

  // A call read once, by the call that reads it, and nothing else (no view, output, buffer written into).
  bool read_once(const Value& v) const { return readers_[id(v.id)] == 1; }

  // Whether a call between values `from` and `to` writes into the storage of `v`.
  bool written_between(int v, int from, int to) const {
    for (int w = from + 1; w < to; ++w)
      if (g_[w].write_to >= 0 && g_.root(g_[w].write_to) == g_.root(v)) return true;
    return false;
  }

  // O = P @ V with P = scaled_softmax(Q @ KT): the three calls as one.
  bool fuse(int o) {
    const Value& out = g_[o];
    if (!plain_product(out) || out.operands[0] == o) return false;
    const Value& p = g_[out.operands[0]];
    if (p.kind != Kind::Call || !p.impl || !p.impl->fuse_attention || p.node->fused || p.write_to >= 0 || p.init_from >= 0 ||
        !read_once(p) || p.operands.size() != 2 || p.args.size() != 2 || p.operands[0] == p.id)
      return false;
    const Value& s = g_[p.operands[0]];
    if (!plain_product(s) || !read_once(s) || s.dtype != out.dtype || p.dtype != out.dtype || s.backward != out.backward ||
        p.backward != out.backward)
      return false;
    const int q = s.operands[0], kt = s.operands[1], v = out.operands[1];
    if (!same_batch(q, o) || !same_batch(kt, o) || !same_batch(v, o)) return false;
    // Q and KT are read where O is computed: nothing may write into them in between.
    if (written_between(q, s.id, o) || written_between(kt, s.id, o)) return false;
    const int rank = static_cast<int>(out.shape.size());
    const lower::KernelPlan& kernel = registry_.intern_attention(*p.node, out.dtype, rank, {build_index_, fused_++ - (1 << 20)});
    const std::string what = "matmul, " + p.node->name + " and matmul as one attention kernel (the scores never stored)";
    const std::string sources = s.source + "; " + p.source + "; " + out.source;
    const std::vector<spec::ArgValue> args = p.args;  // scale, causal
    Value& root = g_[o];
    root.node = kernel.node;
    root.impl = kernel.impl;
    root.args = args;
    root.operands = {q, kt, v, o};
    root.result_operand = 3;
    root.rank = rank;
    root.source = sources;
    if (log_) *log_ += "fused " + what + "\n    " + sources + "\n";
    return true;
  }

  // Whether operand `x` has the output's rank and batch axes (no broadcast
  // of a matrix over the batch: the kernel walks one batch index for all).
  bool same_batch(int x, int o) const {
    const graph::Shape& a = g_[x].shape;
    const graph::Shape& b = g_[o].shape;
    if (a.size() != b.size() || a.size() < 2) return false;
    for (std::size_t k = 0; k + 2 < a.size(); ++k)
      if (!(a[k] == b[k])) return false;
    return true;
  }

  Graph& g_;
  FusionRegistry& registry_;
  int build_index_;
  std::string* log_;
  int fused_ = 0;
  std::vector<int> readers_;  // graph::count_readers
};

}  // namespace

int fuse_attention(graph::Graph& g, FusionRegistry& registry, int build_index, std::string* log) {
  return AttentionFuser(g, registry, build_index, log).run();
}

const lower::KernelPlan& FusionRegistry::intern_attention(const spec::Node& softmax, rt::DType dtype, int rank,
                                                          std::pair<int, int> order) {
  const std::string key = std::string("attention ") + rt::dtype_name(dtype) + " r" + std::to_string(rank);
  const std::vector<std::string> parts = {"attention"};
  const std::string doc = "fused: matmul, " + softmax.name + " and matmul as one attention kernel";
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(key, parts, doc, order)) return e->plan;
  Entry& e = add(key, parts, doc, order, spec::Node{});
  e.node.where_text.value = "Q[~ i c] KT[~ c j] V[~ j e] OUT[~ i e] -> OUT[~ i e]";
  e.node.where = subscript::parse(e.node.where_text.value);
  e.node.args = softmax.args;  // scale, causal
  e.impl.device = "cpu";
  e.impl.kind = spec::BodyKind::Builtin;
  e.impl.builtin = "attention";  // not a builtin a spec can name: made here only
  e.impl.dtypes = {dtype};
  e.impl.ranks = {rank};
  lower::KernelPlan& plan = e.plan;
  plan.node = &e.node;
  plan.impl = &e.impl;
  plan.dtype = dtype;
  plan.rank = rank;
  for (const char* t : {"Q", "KT", "V"}) plan.tensors.push_back({t, t, rank, false, "", {}});
  plan.tensors.push_back({"OUT", "OUT", rank, true, "", {}});
  for (std::size_t k = 0; k < plan.tensors.size(); ++k) plan.tensors[k].dsl = e.node.where.inputs[k].str();
  for (const auto& a : softmax.args) plan.scalars.push_back({a.name, a.name, a.type});
  return plan;
}

}  // namespace wfgen::passes

// The passes over a traced graph, and the pipeline that runs them in order.
// pipeline.cpp lists the passes one line each; read it first.
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "wfgen/graph/graph.hpp"
#include "wfgen/lower/kernel_plan.hpp"
#include "wfgen/spec/spec.hpp"

namespace wfgen::passes {

// Removes values no output depends on (inputs and parameters stay).
void eliminate_dead_code(graph::Graph& g);

// Where every arena tensor lives. Each call's result gets a slot; a slot is
// reused once every value in it (and every view of it) is dead. Slot sizes
// are the largest of their members' sizes, known at run time from the
// symbolic dims; offsets follow in slot order, 64-byte aligned.
struct MemoryPlan {
  std::vector<int> slot_of;               // per value: its slot, -1 for inputs, params and views
  std::vector<std::vector<int>> slots;    // per slot: the values stored in it
  std::vector<int> last_use;              // per value: the last instruction that reads it
};

// Liveness over the instruction order (calls in value order). Element-wise
// calls write into the slot of an operand that dies there when the layouts
// match, as in-place operations.
MemoryPlan plan_memory(const graph::Graph& g);

// The kernels fusion makes, shared by every build of one `wfgen gen` run so
// that equal fused kernels are generated once. Each has a node and an
// implementation of its own (Node::fused), which the graph's calls point
// to; the registry owns them, so it must outlive the graphs.
class FusionRegistry {
 public:
  explicit FusionRegistry(const spec::Spec& spec) : spec_(spec) {}
  // The kernel for a fused body (its node and implementation are the
  // registry's); equal bodies (same `key`) share one. `parts` names the
  // fused calls' nodes, for the kernel's name; the body is `elementwise`
  // (one loop nest) or `rows` (a row kernel); `fast_math` kernels call
  // rt::math::fast (a build's `math: fast`; part of the key). `order` is (build index in
  // spec order, group number in that build): builds may be fused in
  // parallel, and names follow that order, not the threads'. Thread-safe.
  const lower::KernelPlan& intern(const std::string& key, const std::vector<std::string>& parts, rt::DType dtype, int rank,
                                  int inputs, std::optional<expr::Expr> elementwise, std::shared_ptr<const lower::FusedBody> rows,
                                  const std::string& doc, std::pair<int, int> order, bool fast_math = false);
  // The kernel of builtin `impl` of `node` (lower::takes_epilogue) with
  // `epilogue` applied to each element it stores (lower::plan_with_epilogue,
  // `inputs` tensors besides the builtin's); named from `parts`, the
  // builtin's node first. Equal keys share one kernel, as intern's.
  const lower::KernelPlan& intern_epilogue(const std::string& key, const std::vector<std::string>& parts, const spec::Node& node,
                                           const spec::Impl& impl, rt::DType dtype, int rank, int inputs,
                                           const expr::Expr& epilogue, const std::string& doc, std::pair<int, int> order,
                                           bool fast_math);
  // The attention kernel (builtin "attention", passes/fuse_attention.cpp)
  // for Q KT V -> OUT of `dtype` and `rank`, with the constructor arguments
  // of `softmax` (the scaled_softmax node it replaces: scale, causal). One
  // per dtype and rank, named "fused_attention".
  const lower::KernelPlan& intern_attention(const spec::Node& softmax, rt::DType dtype, int rank, std::pair<int, int> order);
  // Names every kernel ("fused_softmax", numbered when two bodies would get
  // one name), in `order`. Call once every build is fused, before emitting.
  void finalize();
  // One plan per fused kernel, in `order` (after finalize).
  std::vector<lower::KernelPlan> plans() const;

 private:
  struct Entry {
    spec::Node node;
    spec::Impl impl;
    lower::KernelPlan plan;
    std::vector<std::string> parts;
    std::pair<int, int> order;
  };
  // The entry of `key` (renamed after `parts` when `order` comes first), or null. Under mutex_.
  Entry* find(const std::string& key, const std::vector<std::string>& parts, const std::string& doc, std::pair<int, int> order);
  // A new entry for `key`: `node` (a fused kernel's declaration, or a builtin's to take an epilogue) made the kernel's. Under mutex_.
  Entry& add(const std::string& key, const std::vector<std::string>& parts, const std::string& doc, std::pair<int, int> order,
             spec::Node node);
  const spec::Spec& spec_;
  std::mutex mutex_;
  std::deque<Entry> entries_;
  std::map<std::string, Entry*> by_key_;
  std::vector<Entry*> named_;  // entries_ in `order`, as finalize() named them
};

// Automatic fusion (after autodiff, in forward and pullback alike):
//  - chains of element-wise calls become one loop nest with no intermediate
//    buffers (an intermediate read by anything else stays a call);
//  - reductions over the last axis join their element-wise prologue (the
//    calls that make their input) and epilogue (the calls that read their
//    result, broadcast back along the row or not) into one row kernel: per
//    row, each reduction is one loop over the row (in cache), then one loop
//    writes the output. softmax and layernorm become one kernel each;
//  - a flat chain (or one element-wise call) that alone reads the output of
//    a call whose impl has `fuse_epilogue` becomes its epilogue: one kernel
//    that applies it to each element before storing it. A GEMM (matmul's
//    cpu and blas kernels) takes any other operands (a bias per column, a
//    residual), and so does winograd_conv2d's; depthwise_conv2d operands
//    constant over each output plane (a per-channel bias, scalars: conv +
//    bias + clip).
//    Where the pullback reads an intermediate (the pre-activation), the
//    chain stops before it and the rest stays a call of its own.
// First, attention (fuse_attention below). Only cpu calls of float dtypes are fused (and blas GEMMs' epilogues). Returns the number of calls
// removed; each fused group is described in `log` when given.
// fast_math: the build's `math: fast` (its fused kernels call rt::math::fast).
int fuse_kernels(graph::Graph& g, FusionRegistry& registry, int build_index = 0, std::string* log = nullptr,
                 bool fast_math = false);

// Attention's three calls as one (called first by fuse_kernels): O = P @ V
// where P = scaled_softmax(S, scale, causal) with `fuse_attention` on its
// impl, S = Q @ KT, both cpu GEMMs storing a fresh product, S read by the
// softmax alone and P by O's product alone (inference: a training step's
// backward reads P, and those stay three calls), Q, KT and V of O's rank
// and batch axes. O's call becomes one of the kernel
// FusionRegistry::intern_attention makes: per block of O's rows the scores
// of the columns a row keeps (j <= i when causal), their softmax and the
// product with V, in L1 (rt::attention_rows). Returns the calls removed.
int fuse_attention(graph::Graph& g, FusionRegistry& registry, int build_index, std::string* log = nullptr);

// After autodiff: a gradient added into its buffer (`grad <- grad + A B`)
// that a GEMM makes, read by nothing else, is accumulated by that GEMM
// (C += A B: beta = 1 with BLAS) into the buffer directly, with no
// temporary and no add. Returns how many were merged.
int accumulate_products(graph::Graph& g);

// After autodiff: a result copied into a view of other storage (a slice's
// gradient into its window of the base's gradient, autodiff's `copy` with
// write_to) is written into that view by its own kernel instead, when the
// kernel takes a strided output (GEMMs: row and column strides; element-wise
// loop nests), nothing else reads the result, and nothing reads or writes
// the storage in between; the view (and a fill that makes its storage) move
// before the kernel. A product copied through its transpose, (A B)^T,
// becomes B^T A^T writing the window's rows (not one element at a time
// through a column stride). The copy then has no reader; dead-code
// elimination drops it. Returns how many copies were replaced.
int write_into_windows(graph::Graph& g);

// Products of the blas device whose shape is known at build time and small
// enough that wfgen's own GEMM is faster (rt::own_gemm_is_faster, K <= 256
// and <= 2^24 multiply-adds) run the cpu implementation of their node
// instead, when the build lists the cpu device: the disassembly then names
// the GEMM that runs. Products whose rows depend on run-time dims keep the
// blas implementation, whose kernel applies the same rule at run time.
// Each choice is described in `log` (for `wfgen explain`) when given.
// Returns how many calls changed implementation.
int choose_gemms(const spec::Spec& spec, const spec::Build& build, graph::Graph& g, std::string* log);

// Checks the spec's paths once, after loading: every node they name exists,
// a bypass's two nodes take the same tensors and arguments, a fusion path's
// node takes as many tensors as its chain reads, and a symbolic path's
// pattern and replacement trace (with inputs of shape (n n)) to the same
// shape. Throws UserError with every problem.
void validate_paths(const spec::Spec& spec);

// Applies the spec's paths to a traced forward graph, in spec order: the
// first path that matches anywhere fires, then the search starts again from
// the first path, until none matches (cl-waffe2's defpath rules: paths
// registered first have priority, the search repeats, a fusion path replaces
// only when its whole query list matches a chain in order). Each rewrite is
// described in `log` (for `wfgen explain`) when given. Throws UserError.
void apply_paths(const spec::Spec& spec, const spec::Build& build, graph::Graph& g, std::string* log);

// The names run_pipeline gives its passes, in order (`--dump-after`,
// `--time-passes`; docs/cli.md). "trace" is the graph as traced, before any pass.
inline const std::vector<std::string> kPassNames = {"trace", "dead-code", "paths", "autodiff", "choose-gemms", "fuse", "accumulate", "windows", "plan-memory"};

struct PipelineOptions {
  std::vector<std::string> dump_after;  // names of kPassNames: print the graph after them
  bool time_passes = false;
  // Where fused kernels go; null: no paths and no automatic fusion (`fuse: false`, --no-fuse).
  FusionRegistry* fusion = nullptr;
  std::string* rewrites = nullptr;  // what the paths and fusion did, for `wfgen explain`
  int build_index = 0;              // the build's place in spec order (names of fused kernels follow it)
};

// Runs every pass in order on the traced graph `g` of `build`; dumps and
// timings go to `log`.
MemoryPlan run_pipeline(const spec::Spec& spec, const spec::Build& build, graph::Graph& g, const PipelineOptions& options,
                        std::string* log);

}  // namespace wfgen::passes

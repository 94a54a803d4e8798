// The GEMM each product of the blas device runs, chosen at build time where
// the shape is known: wfgen's own (the cpu implementation) for the small
// products where it beats OpenBLAS (rt::own_gemm_is_faster, the rule
// rt::blas_gemm applies at run time), so that the disassembly, `wfgen
// explain` and the profile name the GEMM that runs.
#include <algorithm>

#include "wfgen/gemm_choice.hpp"
#include "wfgen/passes/passes.hpp"

namespace wfgen::passes {
namespace {

// Whether the product's B may be shared by its batch at run time (a stride
// of 0 along a batch dim): it is, or is a view of, a broadcast. Then the
// generated kernel folds the batch into the rows of one product
// (rt::gemm_folded_rows), whose M is the batch's size times the matrix's.
bool may_share_b(const graph::Graph& g, int b) {
  for (int id = b; g[id].kind == graph::Kind::View; id = g[id].base) {
    if (g[id].view == graph::ViewKind::Broadcast) return true;
  }
  return false;
}

// The cpu GEMM implementation of the call's node for its dtype and rank, if
// the build may use it.
const spec::Impl* cpu_gemm(const spec::Spec& spec, const spec::Build& build, const graph::Value& v) {
  if (std::find(build.devices.begin(), build.devices.end(), "cpu") == build.devices.end()) return nullptr;
  for (const spec::Impl* impl : spec.impls_of(v.node->name)) {
    if (impl->device != "cpu" || impl->kind != spec::BodyKind::Gemm) continue;
    if (std::find(impl->dtypes.begin(), impl->dtypes.end(), v.kernel_dtype()) == impl->dtypes.end()) continue;
    if (!lower::has_rank(*impl, *v.node, v.rank)) continue;
    if (lower::rejects(*impl, *v.node, v.kernel_dtype(), std::vector<std::optional<spec::ArgValue>>(v.args.begin(), v.args.end())))
      continue;
    return impl;
  }
  return nullptr;
}

// The product's M x K by K x N, known at build time for every row count the
// kernel may multiply (with or without the batch folded into the rows), and
// of a shape where rt::gemm is faster (`why`); otherwise the choice is left
// to run time.
bool small_at_build_time(const graph::Graph& g, const graph::Value& v, std::string* shape, std::string* why) {
  const graph::Shape& c = v.shape;
  const graph::Shape& a = g[v.operands[0]].shape;
  const std::size_t r = c.size();
  if (r < 2 || a.size() != r) return false;
  const shape::Dim &m = c[r - 2], &n = c[r - 1], &k = a[r - 1];
  if (!m.is_known() || !n.is_known() || !k.is_known()) return false;
  std::int64_t rows = m.value();
  if (may_share_b(g, v.operands[1])) {
    for (std::size_t d = 0; d + 2 < r; ++d) {
      if (!c[d].is_known()) return false;
      rows *= c[d].value();
    }
  }
  // The most rows the kernel may multiply at once decide: if they are few
  // enough for rt::gemm, so is one matrix of the batch; if they fit its
  // three-vector tile, one matrix of fewer rows runs on its usual tile.
  if (!rt::own_gemm_is_faster(rows, n.value(), k.value())) return false;
  *shape = m.str() + "x" + k.str() + " by " + k.str() + "x" + n.str() + (rows != m.value() ? " (" + std::to_string(rows) + " rows with the batch)" : "");
  *why = rt::own_gemm_wide_tile_fits(rows, n.value())
             ? "N is whole panels of 48 columns and at most 4 more (its three-vector tile)"
             : "K <= 256 and <= 2^24 multiply-adds";
  return true;
}

}  // namespace

int choose_gemms(const spec::Spec& spec, const spec::Build& build, graph::Graph& g, std::string* log) {
  int chosen = 0;
  for (auto& v : g.values) {
    if (v.kind != graph::Kind::Call || !v.impl || v.impl->kind != spec::BodyKind::Gemm || v.impl->device != "blas") continue;
    const spec::Impl* cpu = cpu_gemm(spec, build, v);
    std::string shape, why;
    if (!cpu || !small_at_build_time(g, v, &shape, &why)) continue;
    v.impl = cpu;
    ++chosen;
    if (log) {
      *log += v.node->name + " (" + shape + ") runs wfgen's GEMM (cpu), not OpenBLAS: " + why + "\n    " +
              v.source + "\n";
    }
  }
  return chosen;
}

}  // namespace wfgen::passes

// Every kernel of the standard library, in the spirit of ggml's
// test-backend-ops: for each entry of wfgen_kernels::kernel_table() (node x
// device x dtype x rank) build random operands on several random shapes, in
// every memory layout a kernel must accept (row-major with an offset, padded,
// step 2, negative steps, permuted, broadcast with stride 0, size-1 and empty
// dims, in place), call the kernel through its type-erased entry, and compare
// with the naive reference of its node (references.hpp): exactly for integer
// dtypes, within a tight tolerance for floats. Bytes of the output buffer
// outside the output view, and every input buffer, must be left untouched.
//
// A kernel whose node has no reference fails "kernel_table: every kernel has a
// reference", so a new node cannot be added untested.
//
// Set WFGEN_KERNEL_TEST_LIST=1 to print the coverage table.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "harness.hpp"
#include "wfgen/blas_support.hpp"
#include "kernels.hpp"
#include "references.hpp"
#include "ref_layer_norm.hpp"

namespace {

using namespace kt;
using wfgen::rt::KernelEntry;
using wfgen::rt::ScalarArg;
using wfgen::rt::TensorRef;

// Cases 0-9 each stress one thing (see case_shape, input_layout and the
// builders: 8 and 9 transpose one input of an element-wise kernel); the rest
// draw shapes and layouts at random.
constexpr int kCasesPerKernel = 24;

std::uint64_t seed_of(std::string_view name) {  // FNV-1a: one fixed seed per kernel
  std::uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// One call of a kernel: its tensors in DSL order, constructor arguments, and
// what the failure message needs.
struct Case {
  std::vector<Tensor> t;
  std::vector<Layout> lay;
  std::vector<const char*> names;
  std::vector<ScalarArg> s;
  std::vector<std::vector<std::int64_t>> ints;  // storage behind ScalarArg::ints
  std::string args;                             // "value=2.5"
  std::string label;                            // what the case is about
  int out = -1;                                 // the written tensor
  bool in_place = false;
  // Instead of `out`: tensors the kernel reads and updates in place (the
  // optimizers' P, M, V), each in its own buffer.
  std::vector<int> updated;

  void add(const char* name, Tensor tensor, Layout l) {
    names.push_back(name);
    t.push_back(std::move(tensor));
    lay.push_back(l);
  }
  std::string describe() const {
    std::ostringstream os;
    os << "case '" << label << "'";
    if (in_place) os << " (in place: " << names[static_cast<std::size_t>(out)] << " is " << names[0] << ")";
    for (std::size_t k = 0; k < updated.size(); ++k)
      os << (k ? ", " : " (updated in place: ") << names[static_cast<std::size_t>(updated[k])] << (k + 1 == updated.size() ? ")" : "");
    for (std::size_t k = 0; k < t.size(); ++k) os << "\n  " << kt::describe(names[k], t[k], lay[k]);
    if (!args.empty()) os << "\n  args: " << args;
    return os.str();
  }
};

struct Totals {
  std::int64_t kernels = 0, cases = 0, elements = 0;
  std::map<std::string, std::set<std::string>> covered;  // node/device -> "f32 r1", ...
  std::map<std::string, std::int64_t> node_cases;
};

// ---------------------------------------------------------------------------
// Shapes

Shape random_shape(int rank, Rng& rng, std::int64_t max_dim) {
  Shape s(static_cast<std::size_t>(rank));
  for (auto& d : s) d = rng.uniform01() < 0.2 ? 1 : rand_int(rng, 1, max_dim);
  return s;
}

std::int64_t max_dim_for(int rank) { return rank == 1 ? 40 : rank == 2 ? 9 : rank == 3 ? 6 : 4; }

// Shape of case c of an element-wise-like kernel: 4 forces a size-1 dim,
// 5 an empty dim, 7 a larger shape (8-17 thousand elements).
Shape case_shape(int c, int rank, Rng& rng) {
  if (rank == 0) return {};
  Shape s = random_shape(rank, rng, max_dim_for(rank));
  const auto a = static_cast<std::size_t>(rng.next_u64() % static_cast<std::uint64_t>(rank));
  if (c == 4) s[a] = 1;
  if (c == 5) s[a] = 0;
  if (c == 7) {
    // More than one 64 x 64 block in the two inner dims (rt::kTileSide), with remainders.
    // (The fewest elements that do: these three cases dominate the test's
    // time, 600 s of the CI's sanitizer run at -O0.)
    static const Shape big[] = {{}, {3001}, {65, 130}, {2, 65, 66}, {2, 2, 65, 66}};
    s = big[rank];
  }
  return s;
}

// Layout of operand k of case c. 0: row-major; 1: permuted; 2: strided;
// 3: broadcast inputs; 6: in place; others: random.
Layout input_layout(int c, Rng& rng, bool allow_broadcast) {
  switch (c) {
    case 0: return Layout::Contig;
    case 1: return Layout::Permuted;
    case 2: return (rng.next_u64() & 1) ? Layout::Step2 : Layout::Reversed;
    case 3: return allow_broadcast ? Layout::Broadcast : Layout::PermStep;
    default: {
      Layout l = pick(kInputLayouts, rng);
      if (!allow_broadcast && l == Layout::Broadcast) l = Layout::Padded;
      return l;
    }
  }
}

Layout output_layout(int c, Rng& rng) {
  switch (c) {
    case 0: return Layout::Offset;
    case 1: return Layout::Permuted;
    case 2: return Layout::Step2;
    case 3: return Layout::Padded;
    default: return pick(kOutputLayouts, rng);
  }
}

std::function<void(const Tensor&)> filler(Dom d, Rng& rng) {
  return [d, &rng](const Tensor& t) { fill_random(t, d, rng); };
}
const std::function<void(const Tensor&)> kNoFill = [](const Tensor&) {};

ScalarArg float_arg(double v) {
  ScalarArg a;
  a.f = v;
  return a;
}
ScalarArg int_arg(std::int64_t v) {
  ScalarArg a;
  a.i = v;
  a.f = static_cast<double>(v);
  return a;
}
ScalarArg bool_arg(bool v) {
  ScalarArg a;
  a.b = v;
  a.i = v;
  a.f = v ? 1.0 : 0.0;
  return a;
}

// ---------------------------------------------------------------------------
// Case builders, one per kind of node. Each returns the case and the
// reference result, computed from the inputs before the call.

struct Built {
  Case cs;
  std::function<Expected(const std::vector<Dense>& inputs)> reference;
  // For a case with cs.updated: the expected value of each updated tensor, in
  // that order, from all the tensors before the call.
  std::function<std::vector<Expected>(const std::vector<Dense>& inputs)> updates;
};

Built build_elementwise(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const std::size_t n_in = r.kind == Kind::Fill ? 0 : r.dom.size();
  // Cases 8 and 9: one input transposed (the first; the last) and the others
  // and the output row-major, the tiles whose rows read one input across
  // its rows and the others along theirs; in the large shapes of case 7
  // (blocks of 64 x 64, rt::kTileSide, and their remainders).
  const bool one_transposed = (c == 8 || c == 9) && n_in >= 2;
  const std::size_t transposed = c == 8 ? 0 : n_in - 1;
  const Shape shape = case_shape(one_transposed ? 7 : c, e.rank, rng);
  static const char* const kUnary[] = {"X", "OUT"};
  static const char* const kBinary[] = {"A", "B", "OUT"};
  static const char* const kSelect[] = {"C", "A", "B", "OUT"};
  const char* const* names = !r.names.empty()         ? r.names.data()
                             : r.kind == Kind::Unary  ? kUnary
                             : r.kind == Kind::Binary ? kBinary
                                                      : kSelect;
  cs.label = std::to_string(c);
  cs.in_place = c == 6 && n_in > 0;
  for (std::size_t k = 0; k < n_in; ++k) {
    Layout l = one_transposed ? (k == transposed ? Layout::Permuted : Layout::Contig)
                              : input_layout(c, rng, /*allow_broadcast=*/!(cs.in_place && k == 0));
    cs.add(names[k], make_operand(dt, shape, l, rng, filler(r.dom[k], rng)), l);
  }
  if (cs.in_place) {
    cs.add(names[n_in], cs.t[0], cs.lay[0]);
  } else {
    const Layout l = one_transposed ? Layout::Offset : output_layout(c, rng);
    cs.add(r.kind == Kind::Fill ? "OUT" : names[n_in], make_view(dt, shape, l, rng), l);
  }
  cs.out = static_cast<int>(cs.t.size()) - 1;
  double s = 0;
  if (e.n_scalars == 1 && !r.scalars.empty()) {
    s = r.scalars[static_cast<std::size_t>(c) % r.scalars.size()];
    cs.s.push_back(float_arg(s));
    cs.args = "value=" + fmt_double(s);
  }
  b.reference = [&r, shape, s, dt](const std::vector<Dense>& in) { return ref_elementwise(r, in, shape, s, dt); };
  return b;
}

Built build_reduce(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape shape = case_shape(c == 7 ? 0 : c, e.rank, rng);
  if (c == 5) shape.back() = 0;                             // empty reductions
  if (c == 6 && e.rank > 1) shape[0] = 0;                   // no rows at all
  if (c == 7) shape.back() = e.rank == 1 ? 1000 : 257;      // long rows
  if (c == 8) shape.back() = 1;
  // 9: the rows side by side in memory and the reduced axis strided (a
  // permuted X of a few dozen rows and a short axis, as a pool's window),
  // the path that reduces 16 rows at a time, one per lane, and its leftovers.
  if (c == 9 && e.rank > 1) {
    for (auto& d : shape) d = 1;
    shape[0] = 37 + static_cast<std::int64_t>(rng.next_u64() % 16);
    shape.back() = 4;
  }
  cs.label = std::to_string(c);
  const Layout lx = c == 9 && e.rank > 1 ? Layout::Permuted : input_layout(c, rng, true);
  cs.add("X", make_operand(dt, shape, lx, rng, filler(r.dom[0], rng)), lx);
  Shape out_shape = shape;
  out_shape.back() = 1;
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, out_shape, lo, rng), lo);
  cs.out = 1;
  b.reference = [red = r.red, dt](const std::vector<Dense>& in) { return ref_reduce(red, in[0], dt); };
  return b;
}

Built build_matmul(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape batch = random_shape(e.rank - 2, rng, 3);
  std::int64_t M = rand_int(rng, 1, 8), K = rand_int(rng, 1, 8), N = rand_int(rng, 1, 8);
  switch (c) {
    case 4: (rng.next_u64() & 1 ? M : N) = 1; K = rng.next_u64() & 1 ? 1 : K; break;
    case 5: K = 0; break;                                   // C must become zeros
    case 6: (rng.next_u64() & 1 ? M : N) = 0; break;
    case 7: M = 13, K = 300, N = 19; for (auto& d : batch) d = 1; break;   // K above the GEMM's KC block
    case 8: M = 100, K = 7, N = 21; for (auto& d : batch) d = 1; break;    // M above MC, N over NR tiles
    default: break;
  }
  if (c == 9 && !batch.empty()) batch[0] = 0;
  Shape sa = batch, sb = batch, sc = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  sc.insert(sc.end(), {M, N});
  cs.label = std::to_string(c);
  const Layout la = input_layout(c, rng, true), lb = input_layout(c, rng, true);
  cs.add("A", make_operand(dt, sa, la, rng, filler(r.dom[0], rng)), la);
  cs.add("B", make_operand(dt, sb, lb, rng, filler(r.dom[1], rng)), lb);
  const Layout lc = output_layout(c, rng);
  cs.add("C", make_view(dt, sc, lc, rng), lc);
  cs.out = 2;
  b.reference = [sc, dt](const std::vector<Dense>& in) { return ref_matmul(in[0], in[1], sc, dt); };
  return b;
}

// Indices: mostly in range, some out of range on both sides (u8: up to 255).
void fill_indices(const Tensor& t, std::int64_t n, Rng& rng) {
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) {
    std::int64_t v = rand_int(rng, -2, n + 1);
    if (t.dtype() == DType::u8) v = rng.uniform01() < 0.1 ? 255 : rand_int(rng, 0, n + 1);
    put(t, idx, static_cast<double>(v), v);
  });
}

Built build_gather(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape idx_shape = case_shape(c, e.rank - 1, rng);
  const std::int64_t rows = rand_int(rng, 1, 6);
  const std::int64_t d = c == 8 ? 0 : rand_int(rng, 1, 5);
  cs.label = std::to_string(c);
  const Layout lw = input_layout(c, rng, true), li = input_layout(c, rng, true);
  cs.add("W", make_operand(dt, {rows, d}, lw, rng, filler(r.dom[0], rng)), lw);
  cs.add("IDX", make_operand(dt, idx_shape, li, rng, [&](const Tensor& t) { fill_indices(t, rows, rng); }), li);
  Shape out_shape = idx_shape;
  out_shape.push_back(d);
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, out_shape, lo, rng), lo);
  cs.out = 2;
  b.reference = [dt](const std::vector<Dense>& in) { return ref_gather(in[0], in[1], dt); };
  return b;
}

Built build_one_hot(const KernelEntry& e, const NodeRef&, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape idx_shape = case_shape(c, e.rank - 1, rng);
  const std::int64_t classes = c == 8 ? 0 : rand_int(rng, 1, 7);
  cs.label = std::to_string(c);
  const Layout li = input_layout(c, rng, true);
  cs.add("IDX", make_operand(dt, idx_shape, li, rng, [&](const Tensor& t) { fill_indices(t, classes, rng); }), li);
  Shape out_shape = idx_shape;
  out_shape.push_back(classes);
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, out_shape, lo, rng), lo);
  cs.out = 1;
  cs.s.push_back(int_arg(classes));
  cs.args = "classes=" + std::to_string(classes);
  b.reference = [classes, dt](const std::vector<Dense>& in) { return ref_one_hot(in[0], classes, dt); };
  return b;
}

// X's shape [N C H W], the eight arguments (k_h k_w stride_h stride_w pad_h
// pad_w dilation_h dilation_w) and the output size of case c of a window
// node (im2col, col2im, depthwise_conv2d): strides, padding and dilation
// where patches overlap and skip pixels, drawn until the output is defined.
struct ConvCase {
  Shape xs;
  Conv p{};
  std::int64_t ho = -1, wo = -1;

  void set_args(Case& cs) const {
    for (std::int64_t v : {p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw}) cs.s.push_back(int_arg(v));
    std::ostringstream os;
    os << "k_h=" << p.kh << " k_w=" << p.kw << " stride_h=" << p.sh << " stride_w=" << p.sw << " pad_h=" << p.ph
       << " pad_w=" << p.pw << " dilation_h=" << p.dh << " dilation_w=" << p.dw;
    cs.args = os.str();
  }
};
ConvCase draw_conv(int c, Rng& rng, bool depthwise = false) {
  ConvCase k;
  while (k.ho < 0 || k.wo < 0) {
    Shape& xs = k.xs;
    Conv& p = k.p;
    xs = {rand_int(rng, 1, 2), rand_int(rng, 1, 3), rand_int(rng, 1, 7), rand_int(rng, 1, 7)};
    p = {rand_int(rng, 1, 3), rand_int(rng, 1, 3), rand_int(rng, 1, 2), rand_int(rng, 1, 2),
         rand_int(rng, 0, 1),  rand_int(rng, 0, 2), rand_int(rng, 1, 2), rand_int(rng, 1, 2)};
    if (c == 0) p = {3, 3, 1, 1, 1, 1, 1, 1};
    // Rows of stride 1 from 2 to 40 columns: every length class of rt::copy_run (one 8-, 16- or 32-byte
    // pair of moves, 64-byte moves with an overlapping last one) in every dtype.
    if (c >= 9 && c <= 11) xs[3] = rand_int(rng, 8, 40), p.sw = 1, p.dw = 1;
    // Rows of stride 2, long enough for im2col's shuffled vectors (rt::copy_every_other: 8 or 4 lanes, the
    // last vector overlapping the one before, the last element alone), with and without padding.
    if (!depthwise && c >= 20 && c <= 22) xs[3] = rand_int(rng, 17, 60), p.sw = 2, p.dw = 1, p.pw = c - 20;
    // depthwise_conv2d's vectorised interiors (3 x 3 and 5 x 5, stride 1 and 2, no dilation along W),
    // on planes large enough to have one, next to the borders' scalar path.
    if (depthwise && c >= 12 && c <= 19) {
      const std::int64_t kk = c < 16 ? 3 : 5;
      xs[2] = rand_int(rng, 6, 20), xs[3] = rand_int(rng, 6, 40);
      p = {kk, kk, rand_int(rng, 1, 2), 1 + c % 2, rand_int(rng, 0, kk / 2), rand_int(rng, 0, kk / 2), rand_int(rng, 1, 2), 1};
    }
    const std::int64_t eh = xs[2] + 2 * p.ph - p.dh * (p.kh - 1) - 1, ew = xs[3] + 2 * p.pw - p.dw * (p.kw - 1) - 1;
    k.ho = eh < 0 ? -1 : eh / p.sh + 1;
    k.wo = ew < 0 ? -1 : ew / p.sw + 1;
  }
  if (c == 5) k.xs[0] = 0;
  return k;
}

Built build_im2col(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const ConvCase k = draw_conv(c, rng);
  const Conv p = k.p;
  const Shape col = {k.xs[0], k.xs[1], p.kh, p.kw, k.ho, k.wo};
  cs.label = std::to_string(c);
  const Layout lx = input_layout(c, rng, true);
  cs.add("X", make_operand(dt, k.xs, lx, rng, filler(r.dom[0], rng)), lx);
  const Layout lo = output_layout(c, rng);
  cs.add("COL", make_view(dt, col, lo, rng), lo);
  cs.out = 1;
  k.set_args(cs);
  b.reference = [col, p, dt](const std::vector<Dense>& in) { return ref_im2col(in[0], col, p, dt); };
  return b;
}

// X[N C H W] W[C k_h k_w] -> OUT[N C h_out w_out], drawn like im2col's cases
// and on larger planes with the filters the kernel vectorises.
Built build_depthwise(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const ConvCase k = draw_conv(c, rng, true);
  const Conv p = k.p;
  const Shape os = {k.xs[0], k.xs[1], k.ho, k.wo};
  cs.label = std::to_string(c);
  const Layout lx = input_layout(c, rng, true), lw = input_layout(c, rng, true);
  cs.add("X", make_operand(dt, k.xs, lx, rng, filler(r.dom[0], rng)), lx);
  cs.add("W", make_operand(dt, {k.xs[1], p.kh, p.kw}, lw, rng, filler(r.dom[1], rng)), lw);
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, os, lo, rng), lo);
  cs.out = 2;
  k.set_args(cs);
  b.reference = [os, p, dt](const std::vector<Dense>& in) { return ref_depthwise(in[0], in[1], os, p, dt); };
  return b;
}

// X[N C H W] W[M C 3 3] -> OUT[N M h_out w_out]: planes from 1 x 1 (padding
// 1) to 11 x 13 (partial tiles of F(2 x 2) and F(4 x 4) at the edges),
// padding 0 or 1 along each axis, up to 5 channels in and out.
Built build_winograd(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape xs;
  std::int64_t ph = 0, pw = 0;
  do {
    xs = {rand_int(rng, 1, 2), rand_int(rng, 1, 5), rand_int(rng, 1, 11), rand_int(rng, 1, 13)};
    ph = rand_int(rng, 0, 1), pw = rand_int(rng, 0, 1);
    if (c == 0) xs[2] = 1, xs[3] = 1, ph = 1, pw = 1;
  } while (xs[2] + 2 * ph < 3 || xs[3] + 2 * pw < 3);
  if (c == 5) xs[0] = 0;
  const Shape os = {xs[0], rand_int(rng, 1, 5), xs[2] + 2 * ph - 2, xs[3] + 2 * pw - 2};
  cs.label = std::to_string(c);
  const Layout lx = input_layout(c, rng, true), lw = input_layout(c, rng, true);
  cs.add("X", make_operand(dt, xs, lx, rng, filler(r.dom[0], rng)), lx);
  cs.add("W", make_operand(dt, {os[1], xs[1], 3, 3}, lw, rng, filler(r.dom[1], rng)), lw);
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, os, lo, rng), lo);
  cs.out = 2;
  cs.s.push_back(int_arg(ph));
  cs.s.push_back(int_arg(pw));
  cs.args = "pad_h=" + std::to_string(ph) + " pad_w=" + std::to_string(pw);
  b.reference = [os, ph, pw, dt](const std::vector<Dense>& in) { return ref_conv3x3(in[0], in[1], os, ph, pw, dt); };
  return b;
}

// DOUT[m d] IDX[m] LIKE[n d] -> OUT[n d]: indices in and out of range, rows
// named several times (m up to 3 n) and none (5: m = 0; 8: d = 0).
Built build_scatter_add(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const std::int64_t rows = rand_int(rng, 1, 6);
  const std::int64_t m = c == 5 ? 0 : c == 7 ? 300 : rand_int(rng, 1, 3 * rows);
  const std::int64_t d = c == 8 ? 0 : rand_int(rng, 1, 5);
  cs.label = std::to_string(c);
  const Layout ld = input_layout(c, rng, true), li = input_layout(c, rng, true), ll = input_layout(c, rng, true);
  cs.add("DOUT", make_operand(dt, {m, d}, ld, rng, filler(r.dom[0], rng)), ld);
  cs.add("IDX", make_operand(dt, {m}, li, rng, [&](const Tensor& t) { fill_indices(t, rows, rng); }), li);
  cs.add("LIKE", make_operand(dt, {rows, d}, ll, rng, filler(Dom::Any, rng)), ll);
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, {rows, d}, lo, rng), lo);
  cs.out = 3;
  b.reference = [rows, dt](const std::vector<Dense>& in) { return ref_scatter_add(in[0], in[1], rows, dt); };
  return b;
}

// COL[N C kh kw ho wo] LIKE[N C H W] -> OUT[N C H W], drawn like im2col's
// cases (strides, padding and dilation where patches overlap and skip pixels).
Built build_col2im(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const ConvCase k = draw_conv(c, rng);
  const Conv p = k.p;
  const Shape xs = k.xs;
  const Shape col = {xs[0], xs[1], p.kh, p.kw, k.ho, k.wo};
  cs.label = std::to_string(c);
  const Layout lc = input_layout(c, rng, true), ll = input_layout(c, rng, true);
  cs.add("COL", make_operand(dt, col, lc, rng, filler(r.dom[0], rng)), lc);
  cs.add("LIKE", make_operand(dt, xs, ll, rng, filler(Dom::Any, rng)), ll);
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, xs, lo, rng), lo);
  cs.out = 2;
  k.set_args(cs);
  b.reference = [xs, p, dt](const std::vector<Dense>& in) { return ref_col2im(in[0], xs, p, dt); };
  return b;
}

// X and OUT of one shape (square, wide and tall matrices), each in a layout
// case c draws: the set-up of the row builtins whose output has the input's
// shape (causal_mask, scaled_softmax); the caller adds arguments and the
// reference.
Built same_shape_case(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape shape = case_shape(c, e.rank, rng);
  cs.label = std::to_string(c);
  const Layout lx = input_layout(c, rng, true);
  cs.add("X", make_operand(dt, shape, lx, rng, filler(r.dom[0], rng)), lx);
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, shape, lo, rng), lo);
  cs.out = 1;
  return b;
}

// X[~ i j] -> OUT[~ i j]: square, wide and tall matrices, with each value of
// the node's argument the NodeRef lists.
Built build_causal_mask(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b = same_shape_case(e, r, c, rng);
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const double value = r.scalars[static_cast<std::size_t>(c) % r.scalars.size()];
  cs.s.push_back(float_arg(value));
  cs.args = "value=" + std::to_string(value);
  b.reference = [value, dt](const std::vector<Dense>& in) { return ref_causal_mask(in[0], value, dt); };
  return b;
}

// X[~ i j] -> OUT[~ i j]: the scales the NodeRef lists, causal in odd
// cases, in every layout (strided rows take the scalar loop).
Built build_scaled_softmax(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b = same_shape_case(e, r, c, rng);
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const double scale = r.scalars[static_cast<std::size_t>(c) % r.scalars.size()];
  const bool causal = c % 2 == 1;
  cs.s.push_back(float_arg(scale));
  cs.s.push_back(bool_arg(causal));
  cs.args = "scale=" + std::to_string(scale) + (causal ? " causal=true" : " causal=false");
  b.reference = [scale, causal, dt](const std::vector<Dense>& in) { return ref_scaled_softmax(in[0], scale, causal, dt); };
  return b;
}

// The layer normalisation builtins, each operand in a layout case c draws,
// with the eps values the NodeRef lists: layer_norm X[~ f] G[f] B[f] ->
// OUT[~ f] and layer_norm_grad DOUT[~ f] X[~ f] G[f] -> OUT[~ f] on case
// c's shapes (strided rows take the scalar loops in double);
// layer_norm_param_grad DOUT[n f] X[n f] -> OUT[f] on matrices of up to
// 300 rows, G's gradient in even cases and B's (beta) in odd ones.
Built build_layer_norm(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const bool params = r.kind == Kind::LayerNormParamGrad;
  Shape shape = params ? Shape{c == 8 ? 0 : c == 7 ? 300 : rand_int(rng, 1, 9), c == 5 ? 0 : c == 7 ? 70 : rand_int(rng, 1, 40)}
                       : case_shape(c, e.rank, rng);
  const std::int64_t f = shape.back();
  cs.label = std::to_string(c);
  auto input = [&](const char* name, const Shape& s) {
    const Layout l = input_layout(c, rng, true);
    cs.add(name, make_operand(dt, s, l, rng, filler(Dom::Any, rng)), l);
  };
  if (r.kind != Kind::LayerNorm) input("DOUT", shape);
  input("X", shape);
  if (!params) input("G", {f});
  if (r.kind == Kind::LayerNorm) input("B", {f});
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, params ? Shape{f} : shape, lo, rng), lo);
  cs.out = static_cast<int>(cs.t.size()) - 1;
  const double eps = r.scalars[static_cast<std::size_t>(c) % r.scalars.size()];
  const bool beta = c % 2 == 1;
  cs.s.push_back(float_arg(eps));
  cs.args = "eps=" + std::to_string(eps);
  if (params) {
    cs.s.push_back(bool_arg(beta));
    cs.args += beta ? " beta=true" : " beta=false";
  }
  const Kind kind = r.kind;
  b.reference = [kind, eps, beta, dt](const std::vector<Dense>& in) {
    if (kind == Kind::LayerNorm) return ref_layer_norm(in[0], in[1], in[2], eps, dt);
    if (kind == Kind::LayerNormGrad) return ref_layer_norm_grad(in[0], in[1], in[2], eps, dt);
    return ref_layer_norm_param_grad(in[0], in[1], eps, beta, dt);
  };
  return b;
}

// X[~ i] -> OUT[~ i], largest and smallest, on discrete values (ties).
Built build_extreme_mask(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape shape = case_shape(c, e.rank, rng);
  // 8 and 9: rows side by side in X and OUT (both permuted), a few dozen
  // rows of 4, as a pool's windows: the path that takes 16 rows per lane.
  const bool side_by_side = (c == 8 || c == 9) && e.rank > 1;
  if (side_by_side) {
    for (auto& d : shape) d = 1;
    shape[0] = 37 + static_cast<std::int64_t>(rng.next_u64() % 16);
    shape.back() = 4;
  }
  cs.label = std::to_string(c);
  const Layout lx = side_by_side ? Layout::Permuted : input_layout(c, rng, true);
  cs.add("X", make_operand(dt, shape, lx, rng, filler(r.dom[0], rng)), lx);
  const Layout lo = side_by_side ? Layout::Permuted : output_layout(c, rng);
  cs.add("OUT", make_view(dt, shape, lo, rng), lo);
  cs.out = 1;
  const bool largest = c % 2 == 0;
  cs.s.push_back(bool_arg(largest));
  cs.args = largest ? "largest=true" : "largest=false";
  b.reference = [largest, dt](const std::vector<Dense>& in) { return ref_extreme_mask(in[0], largest, dt); };
  return b;
}

// X[~ i] -> OUT[~ i]: the four combinations of exclusive and reverse in
// turn, in every layout (5: rows of length 0, 6: of length 1, 7: long rows);
// 8: OUT in X's buffer (a running sum written over its own input).
Built build_cumsum(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape shape = case_shape(c == 7 ? 0 : c, e.rank, rng);
  if (c == 5) shape.back() = 0;
  if (c == 6) shape.back() = 1;
  if (c == 7) shape.back() = e.rank == 1 ? 1000 : 131;
  cs.label = std::to_string(c);
  cs.in_place = c == 8;
  const Layout lx = input_layout(c, rng, /*allow_broadcast=*/!cs.in_place);
  cs.add("X", make_operand(dt, shape, lx, rng, filler(r.dom[0], rng)), lx);
  if (cs.in_place) {
    cs.add("OUT", cs.t[0], cs.lay[0]);
  } else {
    const Layout lo = output_layout(c, rng);
    cs.add("OUT", make_view(dt, shape, lo, rng), lo);
  }
  cs.out = 1;
  const bool exclusive = c % 2 == 1, reverse = (c / 2) % 2 == 1;
  cs.s.push_back(bool_arg(exclusive));
  cs.s.push_back(bool_arg(reverse));
  cs.args = std::string("exclusive=") + (exclusive ? "true" : "false") + " reverse=" + (reverse ? "true" : "false");
  b.reference = [exclusive, reverse, dt](const std::vector<Dense>& in) { return ref_cumsum(in[0], exclusive, reverse, dt); };
  return b;
}

// X[~] -> OUT[~] of another dtype, in every layout. Float inputs get NaN
// and +-1e30 in their first elements: the saturated and NaN cases of a cast
// to an integer.
Built build_cast(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType from = e.dtype, to = cast_target(e.node);
  const Shape shape = case_shape(c, e.rank, rng);
  cs.label = std::to_string(c);
  const Layout lx = input_layout(c, rng, true);
  Tensor x = make_operand(from, shape, lx, rng, filler(r.dom[0], rng));
  if (!is_int(from) && x.numel() > 0) {
    const double special[] = {std::numeric_limits<double>::quiet_NaN(), 1e30, -1e30, 2.75, -2.75};
    std::size_t k = 0;
    for_each_index(shape, [&](std::span<const std::int64_t> idx) {
      if (k < std::size(special)) put(x, idx, special[k], 0);
      ++k;
    });
  }
  cs.add("X", std::move(x), lx);
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(to, shape, lo, rng), lo);
  cs.out = 1;
  const bool boolean = std::string_view(e.node) == "to_bool";
  b.reference = [to, boolean](const std::vector<Dense>& in) { return ref_cast(in[0], to, boolean); };
  return b;
}

// A[~ i] B[~ j] -> OUT[~ i+j]: each side empty in turn (8: j = 0, 9: i = 0),
// in every layout; the leading axes are the same shape for all three.
Built build_concat(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape sa = case_shape(c, e.rank, rng);
  Shape sb = sa;
  sb.back() = c == 8 ? 0 : rand_int(rng, 1, 6);
  if (c == 9) sa.back() = 0;
  Shape so = sa;
  so.back() = sa.back() + sb.back();
  cs.label = std::to_string(c);
  const Layout la = input_layout(c, rng, true), lb = input_layout(c, rng, true);
  cs.add("A", make_operand(dt, sa, la, rng, filler(r.dom[0], rng)), la);
  cs.add("B", make_operand(dt, sb, lb, rng, filler(r.dom[1], rng)), lb);
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, so, lo, rng), lo);
  cs.out = 2;
  b.reference = [dt](const std::vector<Dense>& in) { return ref_concat(in[0], in[1], dt); };
  return b;
}

// LOGITS[~ c] TARGET[~ c] -> OUT[~ 1], cased like the reductions (5: no
// classes, 6: no rows, 7: long rows, 8: one class), plus 9: logits in
// [-1000, 1000], whose exp overflows unless the row's max is subtracted, and
// 10: masked classes, -inf logits where the target is 0 (never class 0, so
// every row keeps a finite logit). Masks need one index space for both
// operands, so case 10 broadcasts neither.
Built build_cross_entropy(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  Shape shape = case_shape(c == 7 ? 0 : c, e.rank, rng);
  if (c == 5) shape.back() = 0;
  if (c == 6 && e.rank > 1) shape[0] = 0;
  if (c == 7) shape.back() = e.rank == 1 ? 1000 : 257;
  if (c == 8) shape.back() = 1;
  cs.label = std::to_string(c);
  const bool masked = c == 10;
  const Dense index_space = Dense::make(shape, false);
  std::vector<bool> mask(static_cast<std::size_t>(numel_of(shape)), false);
  if (masked)
    for_each_index(shape, [&](std::span<const std::int64_t> idx) {
      mask[static_cast<std::size_t>(index_space.flat(idx))] = idx.back() != 0 && rng.uniform01() < 0.4;
    });
  const auto masked_fill = [&](double masked_value, Dom d) {
    return [&, masked_value, d](const Tensor& t) {
      for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) {
        put(t, idx, mask[static_cast<std::size_t>(index_space.flat(idx))] ? masked_value : gen_float(d, rng), 0);
      });
    };
  };
  const Dom dz = c == 9 ? Dom::Huge : r.dom[0];
  const Layout lz = input_layout(c, rng, !masked), lt = input_layout(c, rng, !masked);
  cs.add("LOGITS", make_operand(dt, shape, lz, rng, masked ? masked_fill(-std::numeric_limits<double>::infinity(), dz) : filler(dz, rng)), lz);
  cs.add("TARGET", make_operand(dt, shape, lt, rng, masked ? masked_fill(0.0, r.dom[1]) : filler(r.dom[1], rng)), lt);
  Shape out_shape = shape;
  out_shape.back() = 1;
  const Layout lo = output_layout(c, rng);
  cs.add("OUT", make_view(dt, out_shape, lo, rng), lo);
  cs.out = 2;
  b.reference = [dt](const std::vector<Dense>& in) { return ref_softmax_cross_entropy(in[0], in[1], dt); };
  return b;
}

// Max pooling, drawn like im2col's cases: X's shape [N C H W] and the six
// arguments of case c of max_pool, max_pool_grad and max_pool_pick, with
// h_out, w_out >= 1. Random cases: kernels 1..3 (often non-square), strides
// 1..3 (overlapping windows, and gaps between them), pads 0..k (pad = k: a
// window wholly in the padding). 0: 3x3, stride 1, pad 1; 5: N = 0; 6: pads
// of k and more; 7: H and W smaller than the kernel, with padding; 8: stride
// 1 and w_out above 64, not a multiple of it (the kernel's blocks of 64
// windows and their remainder); 9: the same with stride 2 or 3 and padding;
// 10-12: overlapping windows for the NaN and -inf values of pool_filler;
// 13-16: windows that tile X (stride = kernel, no padding: the kernels'
// block path), all tensors row-major: 13 small, 14 2x2 on planes wide and
// tall enough for several blocks of rows (and a partial one), 15 with the
// NaN and -inf values of 12, 16 3x3 on large planes; H and W need not be
// multiples of the kernel (rows and columns in no window); 17-18: windows
// that tile X (1..3 wide and tall, planes up to 30 x 40) on planes whose
// rows have gaps (rt::MaxPoolTiles reads rows at any stride), 18 with the
// NaN and -inf values of 12.
// X is never broadcast in 8-18, so that neighbouring windows differ.
struct PoolDraw {
  Shape xs;
  Pool p;
  std::int64_t ho, wo;
};

PoolDraw draw_pool(int c, Rng& rng) {
  for (;;) {
    Shape xs = {rand_int(rng, 1, 2), rand_int(rng, 1, 3), rand_int(rng, 1, 7), rand_int(rng, 1, 7)};
    Pool p{rand_int(rng, 1, 3), rand_int(rng, 1, 3), rand_int(rng, 1, 3), rand_int(rng, 1, 3), 0, 0};
    p.ph = rand_int(rng, 0, p.kh);
    p.pw = rand_int(rng, 0, p.kw);
    switch (c) {
      case 0: p = {3, 3, 1, 1, 1, 1}; break;
      case 6:
        p.ph = p.kh + rand_int(rng, 0, 1);
        p.pw = p.kw + rand_int(rng, 0, 1);
        break;
      case 7:
        p.kh = 3, p.kw = rand_int(rng, 2, 3);
        xs[2] = rand_int(rng, 1, 2), xs[3] = rand_int(rng, 1, p.kw - 1);
        p.ph = rand_int(rng, 1, 2), p.pw = rand_int(rng, 1, 2);
        break;
      case 8:
        xs = {1, rand_int(rng, 1, 2), rand_int(rng, 1, 3), rand_int(rng, 130, 160)};
        p = {rand_int(rng, 1, 3), rand_int(rng, 2, 3), 1, 1, 0, rand_int(rng, 0, 1)};
        p.ph = rand_int(rng, 0, p.kh - 1);
        break;
      case 9:
        xs = {1, rand_int(rng, 1, 2), rand_int(rng, 1, 4), rand_int(rng, 200, 260)};
        p.sw = rand_int(rng, 2, 3), p.kw = rand_int(rng, 2, 3), p.pw = rand_int(rng, 1, p.kw);
        p.ph = rand_int(rng, 0, p.kh - 1);  // no row of windows wholly in the padding
        break;
      case 10:
      case 11:
      case 12:
        xs[2] = rand_int(rng, 3, 6), xs[3] = rand_int(rng, 3, 6);
        p.kh = rand_int(rng, 2, 3), p.kw = rand_int(rng, 2, 3), p.sh = rand_int(rng, 1, 2), p.sw = 1;
        p.ph = rand_int(rng, 0, 1), p.pw = rand_int(rng, 0, 1);
        if (c == 11) p.kh = p.kw = 2;  // small windows: many of -inf only
        break;
      case 13:
      case 15:
        xs[2] = rand_int(rng, 2, 9), xs[3] = rand_int(rng, 2, 9);
        p.kh = rand_int(rng, 2, 3), p.kw = rand_int(rng, 2, 3);
        p = {p.kh, p.kw, p.kh, p.kw, 0, 0};
        break;
      case 14:
        xs = {1, rand_int(rng, 1, 2), rand_int(rng, 30, 45), rand_int(rng, 130, 160)};
        p = {2, 2, 2, 2, 0, 0};
        break;
      case 16:
        xs = {1, 1, rand_int(rng, 20, 40), rand_int(rng, 100, 130)};
        p = {3, 3, 3, 3, 0, 0};
        break;
      case 17:
      case 18:
        xs[2] = rand_int(rng, 1, 30), xs[3] = rand_int(rng, 1, 40);
        p.kh = rand_int(rng, 1, 3), p.kw = rand_int(rng, 1, 3);
        p = {p.kh, p.kw, p.kh, p.kw, 0, 0};
        break;
      default: break;
    }
    const std::int64_t eh = xs[2] + 2 * p.ph - p.kh, ew = xs[3] + 2 * p.pw - p.kw;
    if (eh < 0 || ew < 0) continue;  // no window: draw again
    const std::int64_t ho = eh / p.sh + 1, wo = ew / p.sw + 1;
    if ((c == 8 || c == 9) && (wo <= 64 || wo % 64 == 0)) continue;
    if (c == 5) xs[0] = 0;
    return {xs, p, ho, wo};
  }
}

void add_pool_args(Case& cs, const Pool& p) {
  for (std::int64_t v : {p.kh, p.kw, p.sh, p.sw, p.ph, p.pw}) cs.s.push_back(int_arg(v));
  std::ostringstream os;
  os << "k_h=" << p.kh << " k_w=" << p.kw << " stride_h=" << p.sh << " stride_w=" << p.sw << " pad_h=" << p.ph
     << " pad_w=" << p.pw;
  cs.args = os.str();
}

// X of a max pool: values of `d` (Ties: most windows tie), and for float
// dtypes in case 10 about 15% NaN (windows with one and with several, the
// first of which wins), in 11 about 65% -inf (windows of -inf only: their
// first element wins), in 12 15% NaN and 45% -inf. Integer dtypes get their
// lowest value where floats get -inf.
std::function<void(const Tensor&)> pool_filler(Dom d, int c, Rng& rng) {
  return [d, c, &rng](const Tensor& t) {
    const DType dt = t.dtype();
    const bool nans = c == 10 || c == 12 || c == 15 || c == 18, lows = c == 11 || c == 12 || c == 15 || c == 18;
    for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) {
      const double r = rng.uniform01();
      if (nans && r < 0.15 && !is_int(dt)) put(t, idx, std::numeric_limits<double>::quiet_NaN(), 0);
      else if (lows && r >= (c == 11 ? 0.35 : 0.55)) put(t, idx, -std::numeric_limits<double>::infinity(), int_min(dt));
      else if (is_int(dt)) put(t, idx, 0, gen_int(d, dt, rng));
      else put(t, idx, gen_float(d, rng), 0);
    });
  };
}

// X[N C H W] -> OUT[N C ho wo].
Built build_max_pool(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const PoolDraw d = draw_pool(c, rng);
  const Shape xs = d.xs;
  const Pool p = d.p;
  const Shape os = {xs[0], xs[1], d.ho, d.wo};
  cs.label = std::to_string(c);
  const bool tiles = c >= 13 && c <= 16, gaps = c == 17 || c == 18;  // tiled windows on row-major planes, on rows with gaps
  const Layout lx = tiles ? Layout::Contig : gaps ? Layout::Padded : input_layout(c, rng, c < 8 || c > 18);
  cs.add("X", make_operand(dt, xs, lx, rng, pool_filler(r.dom[0], c, rng)), lx);
  const Layout lo = tiles ? Layout::Contig : gaps ? Layout::Padded : output_layout(c, rng);
  cs.add("OUT", make_view(dt, os, lo, rng), lo);
  cs.out = 1;
  add_pool_args(cs, p);
  b.reference = [os, p, dt](const std::vector<Dense>& in) { return ref_max_pool(in[0], os, p, dt); };
  return b;
}

// The adjoints, which read X's winners: max_pool_grad, DOUT[N C ho wo] X[N C
// H W] -> OUT[N C H W] (stride < kernel sums several windows into one
// pixel; stride > kernel leaves pixels in no window: 0), and max_pool_pick,
// D[N C H W] X[N C H W] -> OUT[N C ho wo].
Built build_max_pool_adjoint(const KernelEntry& e, const NodeRef& r, int c, Rng& rng, bool grad) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const PoolDraw d = draw_pool(c, rng);
  const Shape xs = d.xs;
  const Pool p = d.p;
  const Shape windows = {xs[0], xs[1], d.ho, d.wo};
  cs.label = std::to_string(c);
  const bool tiles = c >= 13 && c <= 16, gaps = c == 17 || c == 18;  // tiled windows on row-major planes, on rows with gaps
  const Layout ld = tiles ? Layout::Contig : gaps ? Layout::Padded : input_layout(c, rng, true);
  const Layout lx = tiles ? Layout::Contig : gaps ? Layout::Padded : input_layout(c, rng, c < 8 || c > 18);
  cs.add(grad ? "DOUT" : "D", make_operand(dt, grad ? windows : xs, ld, rng, filler(r.dom[0], rng)), ld);
  cs.add("X", make_operand(dt, xs, lx, rng, pool_filler(r.dom[1], c, rng)), lx);
  const Layout lo = tiles ? Layout::Contig : gaps ? Layout::Padded : output_layout(c, rng);
  cs.add("OUT", make_view(dt, grad ? xs : windows, lo, rng), lo);
  cs.out = 2;
  add_pool_args(cs, p);
  if (grad) b.reference = [p, dt](const std::vector<Dense>& in) { return ref_max_pool_grad(in[0], in[1], p, dt); };
  else b.reference = [windows, p, dt](const std::vector<Dense>& in) { return ref_max_pool_pick(in[0], in[1], windows, p, dt); };
  return b;
}

// P G M (V): every tensor but G is read and updated in place. The updated
// ones are never broadcast and lie inside bigger buffers (output layouts), so
// a write outside them is caught; G takes any input layout. Hyperparameters
// cycle through kSgdParams / kAdamParams; case 8 starts from the state of a
// first step, M = V = 0.
Built build_optimizer(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  Built b;
  Case& cs = b.cs;
  const DType dt = e.dtype;
  const Shape shape = case_shape(c, e.rank, rng);
  const OptParams p = r.opt == Opt::Sgd ? kSgdParams[static_cast<std::size_t>(c) % std::size(kSgdParams)]
                                        : kAdamParams[static_cast<std::size_t>(c) % std::size(kAdamParams)];
  cs.label = std::to_string(c);
  const auto zeros = [](const Tensor& t) {
    for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) { put(t, idx, 0.0, 0); });
  };
  for (std::size_t k = 0; k < r.dom.size(); ++k) {
    const bool grad = k == 1;
    const Layout l = grad ? input_layout(c, rng, true) : output_layout(c, rng);
    const bool state = k >= 2;  // M, V
    cs.add(r.names[k], make_operand(dt, shape, l, rng, c == 8 && state ? zeros : filler(r.dom[k], rng)), l);
    if (!grad) cs.updated.push_back(static_cast<int>(k));
  }
  for (const auto& [name, v] : opt_args(r.opt, p)) {
    cs.s.push_back(name == "nesterov" ? bool_arg(v != 0) : name == "step" ? int_arg(static_cast<std::int64_t>(v)) : float_arg(v));
    cs.args += (cs.args.empty() ? "" : " ") + std::string(name) + "=" + fmt_double(v);
  }
  b.updates = [o = r.opt, p, dt](const std::vector<Dense>& in) { return ref_optimizer(o, in, p, dt); };
  return b;
}

// ---------------------------------------------------------------------------
// Running a compute kernel on one case

TensorRef ref_of(const Tensor& t) { return t.ref(); }

std::string run_case(const KernelEntry& e, Built& b, Totals& totals) {
  Case& cs = b.cs;
  // The written tensors: cs.out, or the updated ones (which are inputs too).
  const std::vector<int> written = cs.updated.empty() ? std::vector<int>{cs.out} : cs.updated;
  std::vector<Dense> inputs;
  std::vector<Snapshot> snaps;
  for (std::size_t k = 0; k < cs.t.size(); ++k) {
    if (static_cast<int>(k) != cs.out) inputs.push_back(read(cs.t[k]));
    snaps.push_back(snapshot(cs.t[k]));
  }
  const std::vector<Expected> expected =
      cs.updated.empty() ? std::vector<Expected>{b.reference(inputs)} : b.updates(inputs);
  std::vector<TensorRef> refs;
  for (const Tensor& t : cs.t) refs.push_back(ref_of(t));
  refs.resize(std::max<std::size_t>(refs.size(), 2));
  ScalarArg none;
  try {
    e.fn(refs.data(), cs.s.empty() ? &none : cs.s.data());
  } catch (const std::exception& ex) {
    return std::string("threw: ") + ex.what();
  }
  std::string err;
  for (std::size_t w = 0; w < written.size(); ++w) {
    const auto o = static_cast<std::size_t>(written[w]);
    err = compare(cs.names[o], read(cs.t[o]), expected[w], &totals.elements);
    if (!err.empty()) return err;
  }
  // In each buffer, only the bytes of the written views in it may change.
  for (std::size_t k = 0; k < cs.t.size(); ++k) {
    std::vector<std::uint8_t> keep;
    for (int o : written) {
      const Tensor& out = cs.t[static_cast<std::size_t>(o)];
      if (out.storage() != cs.t[k].storage()) continue;
      const std::vector<std::uint8_t> bytes = covered_bytes(out);
      keep.resize(bytes.size(), 0);
      for (std::size_t i = 0; i < bytes.size(); ++i) keep[i] |= bytes[i];
    }
    const bool shares_out = !keep.empty();
    const std::string what = std::string(cs.names[k]) + (shares_out ? " (output buffer)" : " (input buffer)");
    err = unchanged_outside(what.c_str(), snaps[k], shares_out ? &keep : nullptr,
                            wfgen::rt::dtype_size(cs.t[k].dtype()));
    if (!err.empty()) return err;
  }
  return "";
}

Built build(const KernelEntry& e, const NodeRef& r, int c, Rng& rng) {
  switch (r.kind) {
    case Kind::Unary:
    case Kind::Binary:
    case Kind::Select:
    case Kind::Fill: return build_elementwise(e, r, c, rng);
    case Kind::Reduce: return build_reduce(e, r, c, rng);
    case Kind::Matmul: return build_matmul(e, r, c, rng);
    case Kind::Gather: return build_gather(e, r, c, rng);
    case Kind::OneHot: return build_one_hot(e, r, c, rng);
    case Kind::Im2col: return build_im2col(e, r, c, rng);
    case Kind::ScatterAdd: return build_scatter_add(e, r, c, rng);
    case Kind::Col2im: return build_col2im(e, r, c, rng);
    case Kind::Depthwise: return build_depthwise(e, r, c, rng);
    case Kind::Winograd: return build_winograd(e, r, c, rng);
    case Kind::CausalMask: return build_causal_mask(e, r, c, rng);
    case Kind::ScaledSoftmax: return build_scaled_softmax(e, r, c, rng);
    case Kind::LayerNorm:
    case Kind::LayerNormGrad:
    case Kind::LayerNormParamGrad: return build_layer_norm(e, r, c, rng);
    case Kind::ExtremeMask: return build_extreme_mask(e, r, c, rng);
    case Kind::Concat: return build_concat(e, r, c, rng);
    case Kind::Cast: return build_cast(e, r, c, rng);
    case Kind::CumSum: return build_cumsum(e, r, c, rng);
    case Kind::CrossEntropy: return build_cross_entropy(e, r, c, rng);
    case Kind::Optimizer: return build_optimizer(e, r, c, rng);
    case Kind::MaxPool: return build_max_pool(e, r, c, rng);
    case Kind::MaxPoolGrad: return build_max_pool_adjoint(e, r, c, rng, true);
    case Kind::MaxPoolPick: return build_max_pool_adjoint(e, r, c, rng, false);
    default: return {};
  }
}

// ---------------------------------------------------------------------------
// View kernels: the result view (t[1]) must be the input's with its shape and
// strides reordered, on the same data, and read the same elements.

std::string check_view_result(const KernelEntry& e, const Tensor& in, const TensorRef& got,
                              const std::vector<std::int64_t>& perm) {
  const int r = in.rank();
  std::ostringstream os;
  if (got.data != in.ref().data || got.dtype != in.dtype() || got.rank != r) {
    os << e.name << " returned a view with another data pointer, dtype or rank (rank " << got.rank << ")";
    return os.str();
  }
  Shape shape(static_cast<std::size_t>(r)), strides(static_cast<std::size_t>(r));
  for (int d = 0; d < r; ++d) {
    shape[static_cast<std::size_t>(d)] = got.shape[d];
    strides[static_cast<std::size_t>(d)] = got.strides[d];
  }
  Shape want_shape(static_cast<std::size_t>(r)), want_strides(static_cast<std::size_t>(r));
  for (int d = 0; d < r; ++d) {
    const auto from = static_cast<std::size_t>(perm[static_cast<std::size_t>(d)]);
    want_shape[static_cast<std::size_t>(d)] = in.shape()[from];
    want_strides[static_cast<std::size_t>(d)] = in.strides()[from];
  }
  if (shape != want_shape || strides != want_strides) {
    os << e.name << " returned shape " << str(shape) << " strides " << str(strides) << ", expected shape "
       << str(want_shape) << " strides " << str(want_strides);
    return os.str();
  }
  // Read the result's elements and compare with the input's at the permuted index.
  std::string err;
  wfgen::rt::visit_dtype(in.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    Tensor view = Tensor::borrow(static_cast<E*>(got.data), shape, strides);
    for_each_index(shape, [&](std::span<const std::int64_t> idx) {
      Shape src(static_cast<std::size_t>(r));
      for (int d = 0; d < r; ++d) src[static_cast<std::size_t>(perm[static_cast<std::size_t>(d)])] = idx[static_cast<std::size_t>(d)];
      if (err.empty() && std::memcmp(&view.at<E>(idx), &in.at<E>(src), sizeof(E)) != 0)
        err = std::string(e.name) + ": result element " + str(Shape(idx.begin(), idx.end())) + " is not input element " + str(src);
    });
  });
  return err;
}

std::string run_view_case(const KernelEntry& e, const NodeRef& r, int c, Rng& rng, std::string& desc) {
  const Shape shape = case_shape(c == 7 ? 0 : c, e.rank, rng);
  const Layout l = input_layout(c, rng, true);
  Tensor in = make_operand(e.dtype, shape, l, rng, filler(Dom::Any, rng));
  std::vector<std::int64_t> perm(static_cast<std::size_t>(e.rank));
  std::iota(perm.begin(), perm.end(), 0);
  ScalarArg arg;
  if (r.kind == Kind::Transpose) {
    std::swap(perm[static_cast<std::size_t>(e.rank - 2)], perm[static_cast<std::size_t>(e.rank - 1)]);
  } else {
    const std::vector<int> p = random_perm(e.rank, rng);
    for (int d = 0; d < e.rank; ++d) perm[static_cast<std::size_t>(d)] = p[static_cast<std::size_t>(d)];
    arg.ints = perm.data();
    arg.count = e.rank;
  }
  desc = kt::describe("A", in, l) + "\n  perm " + str(perm);
  const Snapshot snap = snapshot(in);
  TensorRef refs[2] = {in.ref(), {}};
  const TensorRef before = refs[0];
  try {
    e.fn(refs, &arg);
  } catch (const std::exception& ex) {
    return std::string("threw: ") + ex.what();
  }
  if (std::memcmp(&refs[0], &before, sizeof before) != 0) return std::string(e.name) + " changed its input TensorRef";
  std::string err = check_view_result(e, in, refs[1], perm);
  if (err.empty()) err = unchanged_outside("A (input buffer)", snap, nullptr, wfgen::rt::dtype_size(e.dtype));
  return err;
}

std::string entry_key(const KernelEntry& e) { return std::string(e.node) + "/" + e.device; }

bool list_requested() {
  const char* v = std::getenv("WFGEN_KERNEL_TEST_LIST");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

}  // namespace

// ===========================================================================

TEST_CASE("kernel_table: every kernel has a reference in this test", "[kernels][coverage]") {
  const auto table = wfgen_kernels::kernel_table();
  REQUIRE(table.size() > 0);
  std::vector<std::string> missing, mismatched;
  std::set<std::string> names;
  std::map<std::string, std::set<std::string>> covered;
  for (const KernelEntry& e : table) {
    CHECK(names.insert(e.name).second);  // names are unique
    const NodeRef* r = find_ref(e.node);
    if (r == nullptr) {
      missing.push_back(std::string(e.name) + " (node '" + e.node + "')");
      continue;
    }
    const int want_tensors =
        r->kind == Kind::Optimizer ? static_cast<int>(r->dom.size()) : kind_tensors(r->kind);
    const int want_scalars = r->kind == Kind::Im2col || r->kind == Kind::Col2im || r->kind == Kind::Depthwise ? 8
                             : r->kind == Kind::MaxPool || r->kind == Kind::MaxPoolGrad || r->kind == Kind::MaxPoolPick ? 6
                             : r->kind == Kind::CumSum || r->kind == Kind::ScaledSoftmax || r->kind == Kind::LayerNormParamGrad ||
                                       r->kind == Kind::Winograd
                                   ? 2
                             : r->kind == Kind::Optimizer ? static_cast<int>(opt_args(r->opt, {}).size())
                             : (r->kind == Kind::Fill || r->kind == Kind::OneHot || r->kind == Kind::Permute || r->kind == Kind::ExtremeMask ||
                                !r->scalars.empty())
                                 ? 1
                                 : 0;
    if (e.n_tensors != want_tensors || e.n_scalars != want_scalars) {
      mismatched.push_back(std::string(e.name) + ": n_tensors " + std::to_string(e.n_tensors) + " n_scalars " +
                           std::to_string(e.n_scalars) + ", the " + kind_name(r->kind) + " reference expects " +
                           std::to_string(want_tensors) + " and " + std::to_string(want_scalars));
    }
    const bool elementwise =
        r->kind == Kind::Unary || r->kind == Kind::Binary || r->kind == Kind::Select || r->kind == Kind::Fill;
    if (elementwise) {
      const bool has_fn = is_int(e.dtype) ? r->i != nullptr : r->f != nullptr;
      if (!has_fn) mismatched.push_back(std::string(e.name) + ": no reference for dtype " + wfgen::rt::dtype_name(e.dtype));
    }
    covered[entry_key(e)].insert(std::string(wfgen::rt::dtype_name(e.dtype)) + " r" + std::to_string(e.rank));
  }
  std::ostringstream os;
  for (const auto& m : missing) os << "\n  " << m;
  INFO("kernels without a reference in tests/kernels/references.hpp (add the node to node_refs()):" << os.str());
  CHECK(missing.empty());
  std::ostringstream ms;
  for (const auto& m : mismatched) ms << "\n  " << m;
  INFO("kernels whose signature does not match their reference:" << ms.str());
  CHECK(mismatched.empty());
  if (list_requested()) {
    std::cout << "test_kernels covers " << table.size() << " kernels of " << covered.size() << " node/device pairs:\n";
    for (const auto& [key, set] : covered) {
      std::cout << "  " << key << ":";
      for (const auto& s : set) std::cout << " " << s << ",";
      std::cout << "\n";
    }
  }
}

// The impls of stdlib/nodes.yaml, read with a regular expression (they are
// one-line flow mappings), against the table: nothing declared may be missing.
TEST_CASE("kernel_table: lists every (node, device, dtype, rank) that stdlib/nodes.yaml declares", "[kernels][coverage]") {
  std::ifstream in(std::string(WFGEN_SOURCE_DIR) + "/stdlib/nodes.yaml");
  REQUIRE(in.good());
  const std::regex impl(R"re(\{node:\s*([\w-]+),\s*device:\s*(\w+),\s*dtypes:\s*\[([^\]]*)\],\s*ranks:\s*(?:"(\d+)\.\.(\d+)"|\[([\d,\s]*)\]))re");
  std::set<std::string> declared, listed;
  std::string line;
  int impls = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, impl)) continue;
    ++impls;
    std::vector<int> ranks;
    if (m[4].matched) {
      for (int k = std::stoi(m[4]); k <= std::stoi(m[5]); ++k) ranks.push_back(k);
    } else {
      std::istringstream rs(std::regex_replace(m[6].str(), std::regex(","), " "));
      for (int k; rs >> k;) ranks.push_back(k);
    }
    std::istringstream ds(std::regex_replace(m[3].str(), std::regex(","), " "));
    for (std::string dt; ds >> dt;)
      for (int rk : ranks) declared.insert(m[1].str() + "/" + m[2].str() + " " + dt + " r" + std::to_string(rk));
  }
  INFO("no impl line of stdlib/nodes.yaml matched; was the file reformatted? update the regular expression");
  REQUIRE(impls > 0);
  for (const KernelEntry& e : wfgen_kernels::kernel_table())
    listed.insert(entry_key(e) + " " + wfgen::rt::dtype_name(e.dtype) + " r" + std::to_string(e.rank));
  std::vector<std::string> not_generated, not_declared;
  std::set_difference(declared.begin(), declared.end(), listed.begin(), listed.end(), std::back_inserter(not_generated));
  std::set_difference(listed.begin(), listed.end(), declared.begin(), declared.end(), std::back_inserter(not_declared));
  std::ostringstream os;
  for (const auto& s : not_generated) os << "\n  " << s;
  INFO("declared but not in kernel_table():" << os.str());
  CHECK(not_generated.empty());
  std::ostringstream os2;
  for (const auto& s : not_declared) os2 << "\n  " << s;
  INFO("in kernel_table() but not declared:" << os2.str());
  CHECK(not_declared.empty());
}

namespace {

// Every kernel of the table whose index is `shard` modulo kShards, against
// its reference, with the given streaming-store threshold (-1: plain stores;
// 0: every contiguous output streamed, rt::stream_store's unaligned heads,
// blocks and tails). Six test cases share the table: ctest runs them side
// by side, and under the sanitizers (-O0, instrumented) the whole table in
// one case took ten minutes on one core of CI's two. 3 shards, not 2 or 4:
// the table lists each node's ranks 1-4 in turn, and rank 4's cases cost
// the most (with 2 shards one took 3.7 times the other's time).
constexpr std::size_t kShards = 3;

void check_every_kernel(std::int64_t streaming, std::size_t shard) {
  INFO("streaming-store threshold " << streaming << ", kernels " << shard << " mod " << kShards);
  const StreamingStores stores(streaming);
  const auto start = std::chrono::steady_clock::now();
  Totals totals;
  std::int64_t in_shard = 0;
  const auto& table = wfgen_kernels::kernel_table();
  for (std::size_t i = shard; i < table.size(); i += kShards) {
    const KernelEntry& e = table[i];
    ++in_shard;
    const NodeRef* r = find_ref(e.node);
    if (r == nullptr) continue;  // reported by the coverage test
    ++totals.kernels;
    Rng rng(seed_of(e.name));
    for (int c = 0; c < kCasesPerKernel; ++c) {
      std::string err, desc;
      if (r->kind == Kind::Transpose || r->kind == Kind::Permute) {
        err = run_view_case(e, *r, c, rng, desc);
      } else {
        Built b = build(e, *r, c, rng);
        err = run_case(e, b, totals);
        desc = b.cs.describe();
      }
      ++totals.cases;
      ++totals.node_cases[entry_key(e)];
      if (err.empty()) SUCCEED();
      else FAIL_CHECK(e.name << " " << desc << "\n  " << err);
    }
    totals.covered[entry_key(e)].insert(wfgen::rt::dtype_name(e.dtype));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(in_shard > 0);
  CHECK(totals.kernels == in_shard);
  if (list_requested()) {
    std::cout << "test_kernels: " << totals.kernels << " kernels, " << totals.cases << " cases, " << totals.elements
              << " output elements compared in " << secs << " s\n";
    for (const auto& [key, n] : totals.node_cases) std::cout << "  " << key << ": " << n << " cases\n";
  }
}

}  // namespace

TEST_CASE("every stdlib kernel matches its naive reference on random shapes and layouts, plain stores, part 1 of 3", "[kernels]") {
  check_every_kernel(-1, 0);
}
TEST_CASE("every stdlib kernel matches its naive reference on random shapes and layouts, plain stores, part 2 of 3", "[kernels]") {
  check_every_kernel(-1, 1);
}
TEST_CASE("every stdlib kernel matches its naive reference on random shapes and layouts, plain stores, part 3 of 3", "[kernels]") {
  check_every_kernel(-1, 2);
}
TEST_CASE("every stdlib kernel matches its naive reference on random shapes and layouts, outputs streamed, part 1 of 3", "[kernels]") {
  check_every_kernel(0, 0);
}
TEST_CASE("every stdlib kernel matches its naive reference on random shapes and layouts, outputs streamed, part 2 of 3", "[kernels]") {
  check_every_kernel(0, 1);
}
TEST_CASE("every stdlib kernel matches its naive reference on random shapes and layouts, outputs streamed, part 3 of 3", "[kernels]") {
  check_every_kernel(0, 2);
}

// ---------------------------------------------------------------------------
// The harness itself: deliberately broken versions of add_f32_r2 must fail.

namespace {

float& at2(const TensorRef& t, std::int64_t i, std::int64_t j) {
  return static_cast<float*>(t.data)[i * t.strides[0] + j * t.strides[1]];
}

void add_strided(TensorRef* t) {
  for (std::int64_t i = 0; i < t[2].shape[0]; ++i)
    for (std::int64_t j = 0; j < t[2].shape[1]; ++j) at2(t[2], i, j) = at2(t[0], i, j) + at2(t[1], i, j);
}

// Reads B's rows in reverse order (an indexing bug that stays in bounds).
void add_reads_wrong_row(TensorRef* t, const ScalarArg*) {
  const std::int64_t rows = t[2].shape[0];
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < t[2].shape[1]; ++j) at2(t[2], i, j) = at2(t[0], i, j) + at2(t[1], rows - 1 - i, j);
}

// Right values, but also zeroes the gaps between the output's rows.
void add_writes_gaps(TensorRef* t, const ScalarArg*) {
  const std::int64_t rows = t[2].shape[0], cols = t[2].shape[1];
  if (rows > 1 && cols > 0 && t[2].strides[1] == 1 && t[2].strides[0] > cols)
    for (std::int64_t i = 0; i + 1 < rows; ++i)
      for (std::int64_t k = cols; k < t[2].strides[0]; ++k) (&at2(t[2], i, 0))[k] = 0.0f;
  add_strided(t);
}

// Right values, but writes into input A.
void add_writes_input(TensorRef* t, const ScalarArg*) {
  add_strided(t);
  if (t[0].shape[0] > 0 && t[0].shape[1] > 0) at2(t[0], 0, 0) += 1.0f;
}

// Off by 1e-4 relative: more than the f32 tolerance.
void add_inexact(TensorRef* t, const ScalarArg*) {
  add_strided(t);
  for (std::int64_t i = 0; i < t[2].shape[0]; ++i)
    for (std::int64_t j = 0; j < t[2].shape[1]; ++j) at2(t[2], i, j) *= 1.0001f;
}

float& at1(const TensorRef& t, std::int64_t i) { return static_cast<float*>(t.data)[i * t.strides[0]]; }

// sgd on rank 1, written out here: right for Bug 0; Bug 1 steps with the new
// momentum buffer but never stores it; Bug 2 also writes into G.
template <int Bug>
void sgd_r1(TensorRef* t, const ScalarArg* s) {
  const auto lr = static_cast<float>(s[0].f), mom = static_cast<float>(s[1].f), damp = static_cast<float>(s[2].f),
             wd = static_cast<float>(s[3].f);
  for (std::int64_t i = 0; i < t[0].shape[0]; ++i) {
    float& p = at1(t[0], i);
    float& m = at1(t[2], i);
    float g = at1(t[1], i) + wd * p;
    if (mom != 0) {
      const float m_new = s[5].i <= 1 ? g : mom * m + (1 - damp) * g;
      if (Bug != 1) m = m_new;
      g = s[4].b ? g + mom * m_new : m_new;
    }
    p -= lr * g;
  }
  if (Bug == 2 && t[1].shape[0] > 0) at1(t[1], 0) += 1.0f;
}

}  // namespace

// Kernels that update several tensors in place: every one is compared, and
// the read-only input must stay untouched.
TEST_CASE("harness self-test: broken versions of sgd_f32_r1 are caught", "[kernels][harness]") {
  const NodeRef* sgd = find_ref("sgd");
  REQUIRE(sgd != nullptr);
  const std::tuple<const char*, wfgen::rt::KernelFn, bool> variants[] = {
      {"is right", &sgd_r1<0>, false}, {"never stores M", &sgd_r1<1>, true}, {"writes G", &sgd_r1<2>, true}};
  for (const auto& [what, fn, broken] : variants) {
    const KernelEntry e{"sgd_f32_r1", "sgd", "cpu", DType::f32, 1, 3, 6, fn};
    Rng rng(seed_of(what));
    Totals totals;
    int caught = 0;
    std::string first;
    for (int c = 0; c < kCasesPerKernel; ++c) {
      Built b = build(e, *sgd, c, rng);
      const std::string err = run_case(e, b, totals);
      if (!err.empty() && first.empty()) first = b.cs.describe() + "\n  " + err;
      caught += err.empty() ? 0 : 1;
    }
    INFO("a kernel that " << what << "; first failure: " << first);
    if (broken) CHECK(caught > 0);
    else CHECK(caught == 0);
  }
}

TEST_CASE("harness self-test: broken versions of add_f32_r2 are caught", "[kernels][harness]") {
  const NodeRef* add = find_ref("add");
  REQUIRE(add != nullptr);
  const std::pair<const char*, wfgen::rt::KernelFn> broken[] = {{"reads rows of B in reverse", &add_reads_wrong_row},
                                                              {"writes between output rows", &add_writes_gaps},
                                                              {"writes an input", &add_writes_input},
                                                              {"off by 1e-4", &add_inexact}};
  for (const auto& [what, fn] : broken) {
    const KernelEntry e{"add_f32_r2", "add", "cpu", DType::f32, 2, 3, 0, fn};
    Rng rng(seed_of(what));
    Totals totals;
    int caught = 0;
    for (int c = 0; c < kCasesPerKernel; ++c) {
      Built b = build(e, *add, c, rng);
      caught += run_case(e, b, totals).empty() ? 0 : 1;
    }
    INFO("a kernel that " << what);
    CHECK(caught > 0);
  }
}

// ---------------------------------------------------------------------------
// Typed calls straight from kernels.hpp

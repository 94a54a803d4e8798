// Test harness for the generated standard-library kernels (test_kernels.cpp):
// operands in every memory layout a kernel must accept, row-major "dense"
// copies for the naive references, comparison with tolerances, and checks that
// a kernel writes nothing outside its output view. Included once, from
// test_kernels.cpp only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "wfgen/kernel_support.hpp"
#include "wfgen/runtime.hpp"

namespace kt {

using wfgen::rt::DType;
using wfgen::rt::Rng;
using wfgen::rt::Shape;
using wfgen::rt::Tensor;

inline bool is_int(DType t) { return t == DType::i32 || t == DType::i64 || t == DType::u8; }

// Calls f(index) for every multi-index of `shape` in row-major order; nothing
// for a shape with a zero dim, once (empty index) for rank 0.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  for (std::int64_t d : shape)
    if (d == 0) return;
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (;;) {
    f(std::span<const std::int64_t>(idx));
    int d = static_cast<int>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[static_cast<std::size_t>(d)] < shape[static_cast<std::size_t>(d)]) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
    if (d < 0) return;
  }
}

inline std::int64_t numel_of(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  return n;
}

inline std::string str(const Shape& s) { return wfgen::rt::shape_to_string(s); }

inline std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// ---------------------------------------------------------------------------
// Dense row-major copies: what the references read and produce. Integer
// dtypes are held as int64 (exact for u8, i32 and i64), floats as double.

struct Dense {
  Shape shape;
  bool is_int = false;
  std::vector<double> f;
  std::vector<std::int64_t> i;

  static Dense make(const Shape& shape, bool is_int) {
    Dense d;
    d.shape = shape;
    d.is_int = is_int;
    if (is_int) d.i.assign(static_cast<std::size_t>(numel_of(shape)), 0);
    else d.f.assign(static_cast<std::size_t>(numel_of(shape)), 0.0);
    return d;
  }
  std::int64_t numel() const { return numel_of(shape); }
  // Row-major flat position of a multi-index.
  std::int64_t flat(std::span<const std::int64_t> idx) const {
    std::int64_t k = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) k = k * shape[d] + idx[d];
    return k;
  }
  double as_double(std::int64_t k) const {
    return is_int ? static_cast<double>(i[static_cast<std::size_t>(k)]) : f[static_cast<std::size_t>(k)];
  }
};

// Reads the visible elements of any view (strides, offset, broadcast) through
// the runtime's bounds-checked Tensor::at.
inline Dense read(const Tensor& t) {
  Dense d = Dense::make(t.shape(), is_int(t.dtype()));
  std::size_t k = 0;
  wfgen::rt::visit_dtype(t.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    for_each_index(d.shape, [&](std::span<const std::int64_t> idx) {
      const E v = t.at<E>(idx);
      if constexpr (std::is_floating_point_v<E>) d.f[k++] = static_cast<double>(v);
      else d.i[k++] = static_cast<std::int64_t>(v);
    });
  });
  return d;
}

// Writes one element: `fv` for float dtypes, `iv` (which must fit) for integers.
inline void put(const Tensor& t, std::span<const std::int64_t> idx, double fv, std::int64_t iv) {
  wfgen::rt::visit_dtype(t.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<E>) t.at<E>(idx) = static_cast<E>(fv);
    else t.at<E>(idx) = static_cast<E>(iv);
  });
}

// ---------------------------------------------------------------------------
// Memory layouts. Every operand is a view of a buffer whose bytes start out
// random, so a kernel that reads a wrong element sees garbage.

enum class Layout {
  Contig,     // a fresh row-major tensor
  Offset,     // row-major inside a bigger buffer, at a nonzero offset
  Padded,     // every dim padded: rows with gaps, inner stride 1
  Step2,      // every dim sliced with step 2 out of a buffer twice as large
  Reversed,   // every dim walked backwards (step -1 or -2)
  Permuted,   // a row-major buffer of permuted shape, permuted back
  PermStep,   // Permuted over a Step2/Reversed buffer
  Broadcast,  // some dims (or leading dims) stride 0; inputs only
};

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contig: return "contiguous";
    case Layout::Offset: return "offset";
    case Layout::Padded: return "padded";
    case Layout::Step2: return "step-2";
    case Layout::Reversed: return "reversed";
    case Layout::Permuted: return "permuted";
    case Layout::PermStep: return "permuted+strided";
    case Layout::Broadcast: return "broadcast";
  }
  return "?";
}

inline constexpr Layout kInputLayouts[] = {Layout::Contig,   Layout::Offset,   Layout::Padded,
                                           Layout::Step2,    Layout::Reversed, Layout::Permuted,
                                           Layout::PermStep, Layout::Broadcast};
// Outputs are never broadcast, and always lie inside a bigger buffer, so
// writes outside the view can be detected.
inline constexpr Layout kOutputLayouts[] = {Layout::Offset,   Layout::Padded,   Layout::Step2,
                                            Layout::Reversed, Layout::Permuted, Layout::PermStep};

inline std::int64_t rand_int(Rng& rng, std::int64_t lo, std::int64_t hi) {  // [lo, hi]
  return lo + static_cast<std::int64_t>(rng.next_u64() % static_cast<std::uint64_t>(hi - lo + 1));
}

template <class T, std::size_t N>
T pick(const T (&a)[N], Rng& rng) {
  return a[rng.next_u64() % N];
}

// (SplitMix64 from one draw of rng, 8 bytes a store: the harness's
// busiest loop, which under the sanitizers at -O0 took a sixth of the
// every-kernel check as a call of Rng::next_u64 and 8 byte stores a word.)
inline void scramble(const Tensor& t, Rng& rng) {
  const auto& st = t.storage();
  if (!st) return;
  std::byte* p = st->data();
  const std::size_t n = st->bytes();
  std::uint64_t state = rng.next_u64();
  for (std::size_t k = 0; k < n; k += 8) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(p + k, &z, std::min<std::size_t>(8, n - k));
  }
}

inline Tensor fresh(DType dt, const Shape& shape, Rng& rng) {
  Tensor t = Tensor::empty(dt, shape);
  scramble(t, rng);
  return t;
}

inline std::vector<int> random_perm(int rank, Rng& rng) {
  std::vector<int> p(static_cast<std::size_t>(rank));
  std::iota(p.begin(), p.end(), 0);
  for (int tries = 0; tries < 8; ++tries) {
    for (int k = rank - 1; k > 0; --k) std::swap(p[static_cast<std::size_t>(k)], p[rng.next_u64() % (k + 1)]);
    bool identity = true;
    for (int k = 0; k < rank; ++k) identity = identity && p[static_cast<std::size_t>(k)] == k;
    if (!identity) break;
  }
  return p;
}

// Permuting needs two dims: rank 0 and 1 get the strided layout instead.
inline Layout effective(Layout lay, std::size_t rank) {
  if (rank >= 2) return lay;
  if (lay == Layout::Permuted) return Layout::Reversed;
  if (lay == Layout::PermStep) return Layout::Step2;
  return lay;
}

// A view of shape `shape` in layout `lay` (not Broadcast), values not yet set.
inline Tensor make_view(DType dt, const Shape& shape, Layout lay, Rng& rng) {
  const int r = static_cast<int>(shape.size());
  switch (effective(lay, shape.size())) {
    case Layout::Contig:
    case Layout::Broadcast: return fresh(dt, shape, rng);
    case Layout::Offset: {
      const std::int64_t n = numel_of(shape);
      return fresh(dt, {n + 7}, rng).slice(0, 3, 3 + n).reshape(shape);
    }
    case Layout::Padded: {
      Shape big = shape;
      for (auto& d : big) d += 2;
      Tensor t = fresh(dt, big, rng);
      for (int a = 0; a < r; ++a) t = t.slice(a, 1, 1 + shape[static_cast<std::size_t>(a)]);
      return t;
    }
    case Layout::Step2: {
      Shape big = shape;
      for (auto& d : big) d = 2 * d + 1;
      Tensor t = fresh(dt, big, rng);
      for (int a = 0; a < r; ++a) t = t.slice(a, 1, std::nullopt, 2);
      return t;
    }
    case Layout::Reversed: {
      std::vector<int> step(static_cast<std::size_t>(r));
      Shape big = shape;
      for (int a = 0; a < r; ++a) {
        step[static_cast<std::size_t>(a)] = (rng.next_u64() & 1) ? -1 : -2;
        big[static_cast<std::size_t>(a)] *= -step[static_cast<std::size_t>(a)];
      }
      Tensor t = fresh(dt, big, rng);
      for (int a = 0; a < r; ++a) t = t.slice(a, std::nullopt, std::nullopt, step[static_cast<std::size_t>(a)]);
      return t;
    }
    case Layout::Permuted:
    case Layout::PermStep: {
      const std::vector<int> p = random_perm(r, rng);
      Shape q(static_cast<std::size_t>(r));
      std::vector<int> inv(static_cast<std::size_t>(r));
      for (int k = 0; k < r; ++k) {
        q[static_cast<std::size_t>(k)] = shape[static_cast<std::size_t>(p[static_cast<std::size_t>(k)])];
        inv[static_cast<std::size_t>(p[static_cast<std::size_t>(k)])] = k;
      }
      const Layout inner = lay == Layout::Permuted ? Layout::Contig
                                                   : ((rng.next_u64() & 1) ? Layout::Step2 : Layout::Reversed);
      return make_view(dt, q, inner, rng).permute(inv);
    }
  }
  return {};
}

// An operand: a view in layout `lay` whose visible elements are set by
// fill(view). A Broadcast operand is filled before it is broadcast, so its
// repeated elements are equal by construction.
inline Tensor make_operand(DType dt, const Shape& shape, Layout lay, Rng& rng,
                           const std::function<void(const Tensor&)>& fill) {
  if (lay != Layout::Broadcast) {
    Tensor t = make_view(dt, shape, lay, rng);
    fill(t);
    return t;
  }
  Shape small = shape;
  bool any = false;
  for (auto& d : small) {
    if (d != 0 && (rng.next_u64() % 2 == 0)) {
      d = 1;
      any = true;
    }
  }
  if (!any && !small.empty()) {
    for (auto& d : small)
      if (d != 0) {
        d = 1;
        break;
      }
  }
  // Sometimes drop leading size-1 dims: NumPy-style rank broadcasting.
  if (rng.next_u64() % 2 == 0) {
    std::size_t lead = 0;
    while (lead < small.size() && small[lead] == 1) ++lead;
    small.erase(small.begin(), small.begin() + static_cast<std::ptrdiff_t>(lead));
  }
  Tensor src = make_view(dt, small, (rng.next_u64() & 1) ? Layout::Contig : Layout::Step2, rng);
  fill(src);
  return src.broadcast_to(shape);
}

inline std::string describe(const char* name, const Tensor& t, Layout lay) {
  std::ostringstream os;
  os << name << " " << wfgen::rt::dtype_name(t.dtype()) << " shape " << str(t.shape()) << " strides "
     << str(t.strides()) << " offset " << t.offset() << " [" << layout_name(effective(lay, t.shape().size()))
     << "]";
  return os.str();
}

// ---------------------------------------------------------------------------
// Expected results and comparison.

struct Expected {
  Dense val;
  // Per element: the largest accepted |got - expected| (floats only; integers
  // are compared exactly). Empty means exact.
  std::vector<double> tol;
};

inline std::string index_str(const Shape& shape, std::int64_t flat) {
  Shape idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[static_cast<std::size_t>(d)] = flat % shape[static_cast<std::size_t>(d)];
    flat /= shape[static_cast<std::size_t>(d)];
  }
  return str(idx);
}

// "" when `got` matches; otherwise the first differing index, both values and
// the number of differing elements.
inline std::string compare(const char* out_name, const Dense& got, const Expected& exp, std::int64_t* compared) {
  if (got.shape != exp.val.shape) {
    return std::string(out_name) + " has shape " + str(got.shape) + ", the reference " + str(exp.val.shape);
  }
  std::int64_t bad = 0, first = -1;
  double first_tol = 0;
  const std::int64_t n = got.numel();
  for (std::int64_t k = 0; k < n; ++k) {
    bool ok;
    double tol = 0;
    if (got.is_int) {
      ok = got.i[static_cast<std::size_t>(k)] == exp.val.i[static_cast<std::size_t>(k)];
    } else {
      const double g = got.f[static_cast<std::size_t>(k)], e = exp.val.f[static_cast<std::size_t>(k)];
      tol = exp.tol.empty() ? 0.0 : exp.tol[static_cast<std::size_t>(k)];
      if (std::isnan(e) || std::isnan(g)) ok = std::isnan(e) && std::isnan(g);
      else if (std::isinf(e) || std::isinf(g)) ok = g == e;
      else ok = std::fabs(g - e) <= tol;
    }
    if (!ok) {
      if (bad == 0) {
        first = k;
        first_tol = tol;
      }
      ++bad;
    }
  }
  if (compared) *compared += n;
  if (bad == 0) return "";
  std::ostringstream os;
  os << bad << " of " << n << " elements differ; first at " << out_name << index_str(got.shape, first)
     << ": expected ";
  if (got.is_int) {
    os << exp.val.i[static_cast<std::size_t>(first)] << ", got " << got.i[static_cast<std::size_t>(first)]
       << " (exact)";
  } else {
    os << fmt_double(exp.val.f[static_cast<std::size_t>(first)]) << ", got "
       << fmt_double(got.f[static_cast<std::size_t>(first)]) << " (tolerance " << fmt_double(first_tol) << ")";
  }
  return os.str();
}

// The bytes of a tensor's whole storage, to check later what a kernel wrote.
struct Snapshot {
  std::shared_ptr<wfgen::rt::Storage> storage;
  std::vector<std::byte> bytes;
};

inline Snapshot snapshot(const Tensor& t) {
  Snapshot s;
  s.storage = t.storage();
  if (s.storage) s.bytes.assign(s.storage->data(), s.storage->data() + s.storage->bytes());
  return s;
}

// Byte positions of the storage that the visible elements of `t` occupy (1
// at each; bytes, not std::vector<bool>, whose bit access is a chain of calls
// at -O0).
inline std::vector<std::uint8_t> covered_bytes(const Tensor& t) {
  std::vector<std::uint8_t> mask(t.storage() ? t.storage()->bytes() : 0, 0);
  const std::size_t es = wfgen::rt::dtype_size(t.dtype());
  const Shape strides = t.strides();
  std::uint8_t* m = mask.data();
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) {
    std::int64_t off = t.offset();
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides[d];
    std::memset(m + static_cast<std::size_t>(off) * es, 1, es);
  });
  return mask;
}

// "" when every byte of the snapshot's storage outside `keep` (a
// covered_bytes mask, or null: every byte) is unchanged.
inline std::string unchanged_outside(const char* what, const Snapshot& s, const std::vector<std::uint8_t>* keep,
                                     std::size_t elem_size) {
  if (!s.storage || s.bytes.empty()) return "";
  const std::byte* now = s.storage->data();
  if (std::memcmp(now, s.bytes.data(), s.bytes.size()) == 0) return "";
  const std::uint8_t* kept = keep ? keep->data() : nullptr;
  for (std::size_t b = 0; b < s.bytes.size(); ++b) {
    if (kept && kept[b]) continue;
    if (now[b] != s.bytes[b]) {
      return std::string(what) + ": element at storage offset " + std::to_string(b / elem_size) +
             " changed although it lies outside the output view";
    }
  }
  return "";
}

// Sets the streaming-store threshold for a scope (rt::set_streaming_store_bytes).
struct StreamingStores {
  explicit StreamingStores(std::int64_t bytes) : saved(wfgen::rt::streaming_store_bytes()) {
    wfgen::rt::set_streaming_store_bytes(bytes);
  }
  ~StreamingStores() { wfgen::rt::set_streaming_store_bytes(saved); }
  StreamingStores(const StreamingStores&) = delete;
  StreamingStores& operator=(const StreamingStores&) = delete;
  std::int64_t saved;
};

}  // namespace kt

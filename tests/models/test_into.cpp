// forward_into / run_into (and their try_ forms) of the generated example
// models: results equal to forward() (itself checked against naive loops in
// test_models.cpp) and to a naive softmax here, output tensors allocated on
// the first call and reused after (no allocation at all in the steady
// state: this file counts every operator new of the program), a new tensor
// when the shape changes, outputs written by their kernel when they may be
// and copied when they may not (strided outputs, an output that is an
// input), forward() and forward_into() alternating on one model; and a
// broadcast view with more elements than int64 holds, over buffers that
// fit, reported as SizeOverflow by both forms.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <vector>

#include "heads.hpp"
#include "mlp.hpp"
#include "outer_sum.hpp"
#include "regressor_train.hpp"
#include "softmax_model.hpp"
#include "wfgen/model_support.hpp"
#include "wfgen/runtime.hpp"

// Every allocation of the program goes through these, so a test can count
// those of a stretch of code (the replaceable global operator new).
namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// The whole unaligned family, so that every pointer one of them returns is
// freed by one of them (ASan checks that new and delete match). Not
// inlined: GCC would see free() meet a pointer from operator new and warn.
namespace {
void* counted_malloc(std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
}  // namespace

[[gnu::noinline]] void* operator new(std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new[](std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
[[gnu::noinline]] void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using wfgen::rt::DType;
using wfgen::rt::ErrorCode;
using wfgen::rt::Shape;
using wfgen::rt::Tensor;

namespace {

Tensor random_tensor(const Shape& shape, std::uint64_t seed) {
  Tensor t = Tensor::empty(DType::f32, shape);
  wfgen::rt::Rng rng(seed);
  wfgen::rt::fill_uniform(t, -2, 2, rng);
  return t;
}

// Same dtype, shape and elements (bit for bit: the same kernels ran).
bool same(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

// The reference's Softmax-Model in double: exp(x - mean) / sum per row.
std::vector<double> softmax_rows(const Tensor& X) {
  const Tensor c = X.contiguous();
  const std::int64_t rows = X.dim(0), n = X.dim(1);
  std::vector<double> y(static_cast<std::size_t>(rows * n));
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* x = c.data<float>() + i * n;
    double mean = 0, z = 0;
    for (std::int64_t k = 0; k < n; ++k) mean += x[k] / static_cast<double>(n);
    for (std::int64_t k = 0; k < n; ++k) z += std::exp(x[k] - mean);
    for (std::int64_t k = 0; k < n; ++k) y[static_cast<std::size_t>(i * n + k)] = std::exp(x[k] - mean) / z;
  }
  return y;
}

void require_softmax(const Tensor& got, const Tensor& X) {
  REQUIRE(got.shape() == X.shape());
  const std::vector<double> ref = softmax_rows(X);
  const Tensor c = got.contiguous();
  for (std::size_t i = 0; i < ref.size(); ++i) REQUIRE(std::abs(c.data<float>()[i] - ref[i]) <= 1e-5 + 1e-4 * std::abs(ref[i]));
}

}  // namespace

TEST_CASE("forward_into: the results of forward(), the output allocated once and reused") {
  wfgen_models::softmax_model m;
  const Tensor X = random_tensor({3, 10}, 1);
  Tensor Y;  // undefined: the first call allocates it
  m.forward_into(Y, X);
  require_softmax(Y, X);
  CHECK(same(Y, m.forward(X)[0]));
  const void* buffer = Y.raw_data();

  // The steady state: the same inputs and output, nothing allocated. (The
  // forward() above bound the model for itself, and the first try_ call
  // binds again with every check: one call of each first.)
  m.forward_into(Y, X);
  REQUIRE(m.try_forward_into(Y, X).ok());
  const long before = g_allocations.load();
  for (int k = 0; k < 100; ++k) m.forward_into(Y, X);
  for (int k = 0; k < 100; ++k) REQUIRE(m.try_forward_into(Y, X).ok());
  CHECK(g_allocations.load() - before == 0);
  CHECK(Y.raw_data() == buffer);
  require_softmax(Y, X);
  // forward() binds again (its results are the model's own tensors), then
  // allocates nothing: rt::Results holds the handles inline.
  (void)m.forward(X);
  const long before_alloc = g_allocations.load();
  for (int k = 0; k < 10; ++k) (void)m.forward(X);
  CHECK(g_allocations.load() - before_alloc == 0);

  // New elements in the same input buffer: no binding needed, new results.
  Tensor X2 = random_tensor({3, 10}, 2);
  X.copy_from(X2);
  m.forward_into(Y, X);
  require_softmax(Y, X2);

  // Another shape: bound again and Y replaced by a tensor of the new shape.
  const Tensor X3 = random_tensor({5, 4}, 3);
  m.forward_into(Y, X3);
  CHECK(Y.shape() == Shape({5, 4}));
  require_softmax(Y, X3);
  const void* buffer3 = Y.raw_data();
  m.forward_into(Y, X3);
  CHECK(Y.raw_data() == buffer3);

  // An output of the wrong dtype is replaced too; the caller's tensor is untouched.
  Tensor wrong = Tensor::zeros(DType::f64, {5, 4});
  Tensor Yd = wrong;
  m.forward_into(Yd, X3);
  CHECK(Yd.dtype() == DType::f32);
  CHECK(wrong.dtype() == DType::f64);
  CHECK(wrong.at<double>({0, 0}) == 0.0);
  require_softmax(Yd, X3);
}

TEST_CASE("forward_into: a contiguous output is written by its kernel, a strided one is copied into") {
  wfgen_models::softmax_model m;
  const Tensor X = random_tensor({4, 6}, 4);
  const Tensor expected = m.forward(X)[0].clone();  // the model's own result is written again below

  // The caller's memory, row-major: the last kernel writes it (the VM's
  // table points into it, so running the VM alone writes it again).
  std::vector<float> mine(24, -1.0f);
  Tensor Y = Tensor::borrow(mine.data(), {4, 6});
  m.forward_into(Y, X);
  CHECK(Y.raw_data() == mine.data());
  CHECK(same(Y, expected));
  std::fill(mine.begin(), mine.end(), 0.0f);
  m.vm().run(wfgen::rt::Section::Forward);
  CHECK(same(Y, expected));

  // A transposed view of the caller's memory: computed in the model's arena, copied in.
  std::vector<float> cols(24, -1.0f);
  Tensor Yt = Tensor::borrow(cols.data(), {6, 4}).T();
  REQUIRE(Yt.shape() == Shape({4, 6}));
  m.forward_into(Yt, X);
  CHECK(Yt.raw_data() == cols.data());
  CHECK(same(Yt, expected));
  std::fill(cols.begin(), cols.end(), 0.0f);
  m.vm().run(wfgen::rt::Section::Forward);
  CHECK(cols[0] == 0.0f);  // the VM writes the arena; only forward_into copies

  // forward() after a binding into the caller's memory: its own copy, the caller's memory left alone.
  m.forward_into(Y, X);
  std::fill(mine.begin(), mine.end(), 0.0f);
  const Tensor fresh = m.forward(X)[0];
  CHECK(same(fresh, expected));
  CHECK(fresh.raw_data() != mine.data());
  CHECK(mine[0] == 0.0f);
  // ... and forward_into() again after forward().
  m.forward_into(Y, X);
  CHECK(same(Y, expected));
}

TEST_CASE("forward_into(X, X): the output may be an input, X = f(X)") {
  wfgen_models::softmax_model m;
  Tensor X = random_tensor({3, 5}, 5);
  const Tensor original = X.clone();
  const Tensor expected = m.forward(original)[0];
  m.forward_into(X, X);
  CHECK(same(X, expected));
  // Again: the input changed (it holds the last result), so it binds again.
  const Tensor expected2 = m.forward(X.clone())[0];
  m.forward_into(X, X);
  CHECK(same(X, expected2));
}

TEST_CASE("forward_into with two outputs: one written by its kernel, one copied") {
  wfgen_models::mlp m;
  const Tensor X = random_tensor({7, 20}, 6);
  Tensor T = Tensor::zeros(DType::f32, {7, 5});
  for (std::int64_t i = 0; i < 7; ++i) T.at<float>({i, i % 5}) = 1.0f;
  const std::vector<Tensor> expected = m.forward(X, T);
  Tensor logits, loss;
  m.forward_into(logits, loss, X, T);
  CHECK(same(logits, expected[0]));
  CHECK(same(loss, expected[1]));
  const long before = g_allocations.load();
  for (int k = 0; k < 50; ++k) m.forward_into(logits, loss, X, T);
  CHECK(g_allocations.load() - before == 0);
  CHECK(same(logits, expected[0]));
  CHECK(same(loss, expected[1]));

  // run_into on the inputs set with set_input.
  std::vector<Tensor> outs(2);
  m.set_input("X", X);
  m.set_input("T", T);
  m.run_into(outs);
  CHECK(same(outs[0], expected[0]));
  CHECK(same(outs[1], expected[1]));
  const long before_run = g_allocations.load();
  for (int k = 0; k < 50; ++k) m.run_into(outs);
  CHECK(g_allocations.load() - before_run == 0);
  std::vector<Tensor> one(1);
  try {
    m.run_into(one);
    FAIL("run_into with one tensor for two outputs did not throw");
  } catch (const wfgen::rt::Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()) == "mlp::run_into got 1 output tensors, expected 2");
  }
  CHECK(m.try_run_into(one).code() == ErrorCode::InvalidArgument);

  // One tensor (two handles) for both outputs: the loss has shape (1), so
  // its handle is replaced by a new tensor and the logits keep the memory.
  Tensor both = Tensor::zeros(DType::f32, {7, 5});
  Tensor both_alias = both;
  m.forward_into(both, both_alias, X, T);
  CHECK(same(both, expected[0]));
  CHECK(same(both_alias, expected[1]));
  CHECK(both_alias.raw_data() != both.raw_data());
}

TEST_CASE("forward_into: errors leave the outputs alone, an output copied from memory it overlaps is refused") {
  wfgen_models::softmax_model m;
  const Tensor X = random_tensor({3, 4}, 7);
  Tensor Y;
  m.forward_into(Y, X);
  const Tensor kept = Y.clone();
  const Tensor bad = random_tensor({3, 4, 1}, 8);
  try {
    m.forward_into(Y, bad);
    FAIL("a rank-3 input did not throw");
  } catch (const wfgen::rt::Error& e) {
    CHECK(e.code() == ErrorCode::RankMismatch);
  }
  CHECK(same(Y, kept));
  const wfgen::rt::Status st = m.try_forward_into(Y, bad);
  CHECK(st.code() == ErrorCode::RankMismatch);
  CHECK(same(Y, kept));
  m.forward_into(Y, X);
  CHECK(same(Y, kept));

  // The runtime check for outputs that are copied: overlapping the source
  // other than as the identical view would read what it already wrote.
  float buf[8] = {};
  const wfgen::rt::TensorRef src = Tensor::borrow(buf, {2, 3}).ref();
  const wfgen::rt::TensorRef shifted = Tensor::borrow(buf + 1, {2, 3}).ref();
  const wfgen::rt::TensorRef apart = Tensor::borrow(buf + 6, {2}).ref();
  CHECK(wfgen::rt::check_output_copy("Y", src, src).ok());
  CHECK(wfgen::rt::check_output_copy("Y", apart, Tensor::borrow(buf, {2}).ref()).ok());
  const wfgen::rt::Status overlap = wfgen::rt::check_output_copy("Y", shifted, src);
  CHECK(overlap.code() == ErrorCode::AliasedBuffer);
  CHECK(overlap.message() ==
        "the output Y of shape (2 3) and strides (3 1) overlaps the tensor it is copied from (strides (3 1)), expected separate "
        "memory or the identical view");
}

TEST_CASE("a view with more elements than int64 holds, over buffers that fit: SizeOverflow, thrown or as a Status") {
  wfgen_models::outer_sum m;
  float one = 1.0f, two = 2.0f;
  Tensor Z;
  m.forward_into(Z, Tensor::borrow(&one, {3, 1}, {0, 0}), Tensor::borrow(&two, {1, 4}, {0, 0}));
  CHECK(Z.at<float>({2, 0}) == 12.0f);
  // X + Y read as (2^20 2^44) broadcast views: 2^64 elements; the inputs
  // are one float each and the result 4 MiB.
  const Tensor a = Tensor::borrow(&one, {std::int64_t{1} << 20, 1}, {0, 0});
  const Tensor b = Tensor::borrow(&two, {1, std::int64_t{1} << 44}, {0, 0});
  const std::string expected =
      "the tensor TID2 of the model: broadcast_ref: a view of shape (1048576 17592186044416) has more elements than fit in int64";
  try {
    (void)m.forward(a, b);
    FAIL("a view of 2^64 elements did not throw");
  } catch (const wfgen::rt::Error& e) {
    CHECK(e.code() == ErrorCode::SizeOverflow);
    CHECK(std::string(e.what()) == expected);
  }
  const wfgen::rt::Status st = m.try_forward_into(Z, a, b);
  CHECK(st.code() == ErrorCode::SizeOverflow);
  CHECK(st.message() == expected);
  CHECK(Z.shape() == Shape({3, 1}));
}

TEST_CASE("forward(): the model's own results, handed out without a copy and written again by the next call") {
  wfgen_models::softmax_model m;
  const Tensor X = random_tensor({3, 10}, 11), X2 = random_tensor({3, 10}, 12);
  Tensor a = m.forward(X)[0];
  require_softmax(a, X);
  const Tensor kept = a.clone();  // how a caller keeps a result
  Tensor b = m.forward(X2)[0];
  CHECK(b.raw_data() == a.raw_data());  // the same memory, written again
  CHECK(b.storage() == a.storage());
  require_softmax(a, X2);               // a handle taken earlier sees the new values
  require_softmax(b, X2);
  require_softmax(kept, X);             // the clone does not
  // forward() and run() return the model's set by reference.
  const wfgen::rt::Results<1>* const set = &m.forward(X);
  CHECK(&m.forward(X2) == set);
  CHECK(&m.run() == set);
  require_softmax((*set)[0], X2);

  // The loop a user writes first: no allocation, no reference count changed
  // (y already shares the set's storage), one buffer, every result right
  // while the input's elements change.
  const Tensor in = X.clone();
  Tensor y = m.forward(in)[0];
  const long handles = y.storage().use_count();
  std::set<const void*> buffers;
  long allocations = 0;
  for (int k = 0; k < 40; ++k) {
    in.copy_from(k % 2 ? X2 : X);
    const long before = g_allocations.load();
    y = m.forward(in)[0];
    allocations += g_allocations.load() - before;
    buffers.insert(y.raw_data());
    require_softmax(y, k % 2 ? X2 : X);
  }
  CHECK(allocations == 0);
  CHECK(buffers.size() == 1);
  CHECK(y.storage().use_count() == handles);

  // A result passed back as the input, whole or as a view of another
  // storage over its bytes: never written while it is read; the model
  // writes its other set, and back again (the recurrent loop
  // `h = model.forward(h)[0]`; each call binds again, as its input moved).
  Tensor h = y;
  const void* first_set = y.raw_data();
  std::set<const void*> h_buffers;
  for (int k = 0; k < 6; ++k) {
    const Tensor before_call = h.clone();
    Tensor next = m.forward(h)[0];
    CHECK(same(h, before_call));  // the input was not written
    CHECK(next.raw_data() != h.raw_data());
    require_softmax(next, before_call);
    h_buffers.insert(next.raw_data());
    h = next;
  }
  CHECK(h_buffers.size() == 2);
  CHECK(h_buffers.count(first_set) == 1);
  {
    // An input that is a borrowed view of a result's bytes (another Storage).
    const Tensor r = m.forward(X)[0];
    const Tensor borrowed = Tensor::borrow(r.data<float>(), {3, 10});
    const Tensor before_call = r.clone();
    const Tensor z = m.forward(borrowed)[0];
    CHECK(same(r, before_call));
    CHECK(z.raw_data() != r.raw_data());
    require_softmax(z, before_call);
  }
  {
    // Both sets among the inputs: a third set, the two left as they were.
    wfgen_models::outer_sum o;
    const Tensor p = random_tensor({3, 1}, 31), q = random_tensor({1, 4}, 32);
    // Z[i] = 4 X[i] + sum(Y) for q of 4 elements, 3 X[i] + sum(Y) for 3.
    const auto outer_sum = [](const Tensor& x, const Tensor& y) {
      std::vector<float> z(3);
      for (std::int64_t i = 0; i < 3; ++i)
        for (std::int64_t j = 0; j < y.dim(1); ++j) z[static_cast<std::size_t>(i)] += x.at<float>({i, 0}) + y.at<float>({0, j});
      return z;
    };
    const auto require_values = [](const Tensor& t, const std::vector<float>& want) {
      REQUIRE(t.shape() == Shape({3, 1}));
      for (std::int64_t i = 0; i < 3; ++i) REQUIRE(std::abs(t.at<float>({i, 0}) - want[static_cast<std::size_t>(i)]) <= 1e-5f);
    };
    const Tensor first = o.forward(p, q)[0];
    require_values(first, outer_sum(p, q));
    const Tensor first_kept = first.clone();
    const Tensor second = o.forward(first, q)[0];  // first is an input: the other set
    CHECK(second.raw_data() != first.raw_data());
    require_values(second, outer_sum(first_kept, q));
    const Tensor second_kept = second.clone();
    const Tensor y_in = Tensor::borrow(second.data<float>(), {1, 3});  // a view of the other set's bytes
    const Tensor third = o.forward(first, y_in)[0];  // inputs in both sets: a new one
    CHECK(third.raw_data() != first.raw_data());
    CHECK(third.raw_data() != second.raw_data());
    CHECK(same(first, first_kept));
    CHECK(same(second, second_kept));
    require_values(third, outer_sum(first_kept, second_kept.reshape({1, 3})));
  }

  // Writing into a result does not change the next ones.
  h.fill(7.0);
  y.fill(7.0);
  require_softmax(m.forward(X)[0], X);

  // forward_into() and forward() in turn on one model.
  Tensor Y;
  m.forward_into(Y, X);
  Tensor r = m.forward(X2)[0];
  m.forward_into(Y, X2);
  CHECK(same(Y, r));
  CHECK(Y.raw_data() != r.raw_data());
  require_softmax(m.forward(X)[0], X);
  require_softmax(r, X);  // r is the model's result, written again
  require_softmax(Y, X2);

  // try_forward: the results, or nothing on error.
  std::vector<Tensor> outs;
  REQUIRE(m.try_forward(outs, X).ok());
  REQUIRE(outs.size() == 1);
  require_softmax(outs[0], X);
  CHECK(!m.try_forward(outs, Tensor::zeros(DType::f64, {3, 10})).ok());
  CHECK(outs.empty());
  require_softmax(m.forward(X)[0], X);

  // A new shape: new results of that shape.
  const Tensor X3 = random_tensor({6, 2}, 13);
  Tensor s = m.forward(X3)[0];
  CHECK(s.shape() == Shape({6, 2}));
  require_softmax(s, X3);
}

TEST_CASE("forward(): two outputs, and a training build's results (copied out of its memory)") {
  wfgen_models::mlp m;
  const Tensor X = random_tensor({4, 20}, 21);
  Tensor T = Tensor::zeros(DType::f32, {4, 5});
  for (int i = 0; i < 4; ++i) T.at<float>({i, i % 5}) = 1;
  std::vector<Tensor> first = m.forward(X, T);
  const std::vector<Tensor> expected = {first[0].clone(), first[1].clone()};
  std::vector<Tensor> second = m.forward(X, T);  // the same results, in the same memory
  for (int k = 0; k < 2; ++k) {
    CHECK(same(second[k], expected[static_cast<std::size_t>(k)]));
    CHECK(first[k].raw_data() == second[k].raw_data());
    CHECK(first[k].raw_data() != second[1 - k].raw_data());
  }
  for (int k = 0; k < 6; ++k) first = m.forward(X, T);
  CHECK(same(first[0], expected[0]));
  CHECK(same(first[1], expected[1]));

  // rt::Results: structured bindings, moves out of a temporary, at().
  static_assert(std::tuple_size_v<std::remove_cvref_t<decltype(m.forward(X, T))>> == 2);
  auto [logits, loss_out] = m.forward(X, T);
  CHECK(same(logits, expected[0]));
  CHECK(same(loss_out, expected[1]));
  auto results = m.forward(X, T);
  const long handles = results[1].storage().use_count();
  Tensor moved = std::move(results)[1];  // out of a copy of the results: no handle copied
  CHECK(moved.storage().use_count() == handles);
  CHECK(!results[1].defined());
  CHECK(same(moved, expected[1]));
  const auto held = m.forward(X, T);
  CHECK(held.size() == 2);
  CHECK(same(held.at(0), expected[0]));
  CHECK_THROWS_AS(held.at(2), wfgen::rt::Error);
  int n = 0;
  for (const Tensor& t : held) CHECK(same(t, expected[static_cast<std::size_t>(n++)]));
  CHECK(n == 2);
  const std::vector<Tensor> copied = held;  // handles copied: the same memory
  CHECK(copied[0].raw_data() == held[0].raw_data());
  // Code written for the std::vector forward() returned before compiles unchanged.
  std::vector<Tensor> assigned;
  assigned = m.forward(X, T);
  CHECK(assigned.size() == 2);
  const auto count = [](const std::vector<Tensor>& v) { return v.size(); };
  CHECK(count(m.forward(X, T)) == 2);
  CHECK(same(assigned[0], expected[0]));

  // A training build copies its outputs out of its memory: a caller's
  // change to a result does not reach the pullback.
  wfgen_models::regressor_train t, u;  // the same seed: the same parameters
  const Tensor R = random_tensor({8, 4}, 22), RT = random_tensor({8, 1}, 23);
  Tensor loss = t.forward(R, RT)[0];
  CHECK(same(loss, u.forward(R, RT)[0]));
  loss.fill(100.0);
  t.zero_grad();
  t.backward();
  u.zero_grad();
  u.backward();
  for (const auto& [name, w] : t.parameters()) CHECK(same(t.grad(name), u.grad(name)));
  CHECK(loss.at<float>({0}) == 100.0f);
}

namespace {

// Per forward instruction with a kernel: whether it writes an operand marked
// OperandSpec::kResult (a result nothing reads after it: streamed from
// rt::streaming_result_bytes()).
std::vector<bool> writes_result(const wfgen::rt::VM& vm) {
  const wfgen::rt::Program& p = vm.program();
  std::vector<bool> out;
  for (const auto& in : p.forward) {
    if (in.fn == nullptr) continue;
    bool result = false;
    for (int k = 0; k < in.n_operands; ++k) {
      const auto flags = p.operand_specs[static_cast<std::size_t>(in.first_operand + k)].flags;
      if ((in.written >> k) & 1u) result = result || (flags & wfgen::rt::OperandSpec::kResult) != 0;
      else CHECK((flags & wfgen::rt::OperandSpec::kResult) == 0);  // only written operands
    }
    out.push_back(result);
  }
  return out;
}

// Sets both streaming thresholds for a scope.
struct Streaming {
  Streaming(std::int64_t store, std::int64_t result)
      : store_(wfgen::rt::streaming_store_bytes()), result_(wfgen::rt::streaming_result_bytes()) {
    wfgen::rt::set_streaming_store_bytes(store);
    wfgen::rt::set_streaming_result_bytes(result);
  }
  ~Streaming() {
    wfgen::rt::set_streaming_store_bytes(store_);
    wfgen::rt::set_streaming_result_bytes(result_);
  }
  std::int64_t store_, result_;
};

}  // namespace

TEST_CASE("results nothing reads again are marked for streaming, streamed they are the same bits") {
  // softmax_model: its last instruction writes the result.
  wfgen_models::softmax_model s;
  const Tensor X = random_tensor({64, 40}, 31);
  (void)s.forward(X);
  std::vector<bool> marks = writes_result(s.vm());
  REQUIRE(!marks.empty());
  CHECK(marks.back());
  CHECK(std::count(marks.begin(), marks.end(), true) == 1);
  // mlp: logits is read again by the loss, and the loss is a view (a
  // reshape) of the mean, copied out: nothing marked.
  wfgen_models::mlp m;
  Tensor T = Tensor::zeros(DType::f32, {64, 5});
  for (int i = 0; i < 64; ++i) T.at<float>({i, i % 5}) = 1;
  (void)m.forward(random_tensor({64, 20}, 32), T);
  marks = writes_result(m.vm());
  CHECK(std::count(marks.begin(), marks.end(), true) == 0);
  // heads: softmax, log_softmax and layernorm write results; mse's is a view.
  wfgen_models::heads h;
  (void)h.forward(random_tensor({64, 7}, 35), random_tensor({64, 7}, 36));
  marks = writes_result(h.vm());
  CHECK(std::count(marks.begin(), marks.end(), true) == 3);
  // A training build copies its results out of its memory: nothing marked.
  wfgen_models::regressor_train r;
  (void)r.forward(random_tensor({8, 4}, 33), random_tensor({8, 1}, 34));
  marks = writes_result(r.vm());
  CHECK(std::count(marks.begin(), marks.end(), true) == 0);

  // Streamed (threshold 0: every result, rows and element-wise) or cached
  // (-1), softmax's rows give the same bits; the intermediates never stream.
  Tensor cached, streamed;
  {
    Streaming never(-1, -1);
    cached = s.forward(X)[0].clone();
  }
  {
    Streaming results_only(-1, 0);
    streamed = s.forward(X)[0];
  }
  CHECK(same(cached, streamed));
  require_softmax(streamed, X);
}

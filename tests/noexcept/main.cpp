// Generated models and the runtime compiled with -fno-exceptions: the try_
// entry points (try_forward, try_forward_into, try_run_into, the training
// ones) return a wfgen::rt::Status for every bad input (wrong shape, rank or
// dtype, unset or undefined inputs, run-time dims whose sizes overflow, a
// view with more elements than int64 holds, bad parameter files, misuse of
// backward) and run normally on good input; the throwing API aborts through
// wfgen::rt::fail() (checked in forked children).
// A plain main, as Catch2 needs exceptions: prints every failed check and
// exits 1 if there was one.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "net.hpp"
#include "net_train.hpp"
#include "outer_sum.hpp"
#include "scale.hpp"
#include "wide.hpp"
#include "wfgen/runtime.hpp"

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#error "tests/noexcept must be compiled with -fno-exceptions"
#endif
static_assert(WFGEN_EXCEPTIONS == 0, "the runtime header must see a build without exceptions");

namespace rt = wfgen::rt;
using rt::DType;
using rt::ErrorCode;
using rt::Status;
using rt::Tensor;

namespace {

int g_failures = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                          \
    }                                                                        \
  } while (0)

// A failed Status with `code` whose message contains `text`.
void check_status(const Status& st, ErrorCode code, const std::string& text, int line) {
  if (st.ok() || st.code() != code || st.message().find(text) == std::string::npos) {
    std::fprintf(stderr, "%s:%d: expected %s containing \"%s\", got %s\n", __FILE__, line, rt::error_code_name(code),
                 text.c_str(), st.to_string().c_str());
    ++g_failures;
  }
}
#define CHECK_STATUS(st, code, text) check_status((st), (code), (text), __LINE__)

Tensor iota(DType dtype, const rt::Shape& shape) {
  Tensor t = Tensor::zeros(dtype, shape);
  std::int64_t k = 0;
  rt::Shape idx(shape.size(), 0);
  const std::int64_t n = t.numel();
  for (; k < n; ++k) {
    std::int64_t rest = k;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d)] = rest % shape[static_cast<std::size_t>(d)];
      rest /= shape[static_cast<std::size_t>(d)];
    }
    if (dtype == DType::f32) t.at<float>(idx) = static_cast<float>(k % 7) * 0.25f - 0.5f;
    else t.at<double>(idx) = static_cast<double>(k);
  }
  return t;
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

// Runs `f` in a child process; returns its wait status and what it wrote to stderr.
template <class F>
int in_child(F&& f, std::string& err) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    f();
    _exit(0);
  }
  close(fds[1]);
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

void fatal_handler_exits_3(const Status& st) {
  std::fprintf(stderr, "handler: %s\n", st.to_string().c_str());
  _exit(3);
}

}  // namespace

int main() {
  using wfgen_noexcept::net;
  using wfgen_noexcept::net_train;
  using wfgen_noexcept::outer_sum;
  using wfgen_noexcept::scale;
  using wfgen_noexcept::wide;

  // --- good input: try_forward gives what forward gives -------------------------------
  net model;
  std::vector<Tensor> out;
  const Tensor x = iota(DType::f32, {5, 4});
  CHECK(model.try_forward(out, x).ok());
  CHECK(out.size() == 1);
  CHECK(out.size() == 1 && out[0].shape() == rt::Shape({5, 3}));
  const std::vector<Tensor> thrown_api = model.forward(x);
  CHECK(out.size() == 1 && same(out[0], thrown_api[0]));
  // Another batch size: bound again, checked again.
  CHECK(model.try_forward(out, iota(DType::f32, {2, 4})).ok());
  CHECK(out.size() == 1 && out[0].shape() == rt::Shape({2, 3}));
  CHECK(model.try_set_input("X", x).ok());
  CHECK(model.try_run(out).ok());
  CHECK(out.size() == 1 && same(out[0], thrown_api[0]));

  // --- bad input: a Status, outputs left empty, the model still usable ----------------
  CHECK_STATUS(model.try_forward(out, iota(DType::f32, {5, 5})), ErrorCode::ShapeMismatch,
               "Couldn't identify axis 1 of X: it is 4");
  CHECK(out.empty());
  CHECK_STATUS(model.try_forward(out, iota(DType::f64, {5, 4})), ErrorCode::DTypeMismatch,
               "the input X has dtype f64, but the model takes f32");
  CHECK_STATUS(model.try_forward(out, iota(DType::f32, {5, 4, 1})), ErrorCode::RankMismatch,
               "Couldn't identify the rank of X: expected 2 dims (batch 4)");
  CHECK_STATUS(model.try_forward(out, Tensor()), ErrorCode::NullBuffer, "the input X was not set");
  CHECK_STATUS(model.try_set_input("X", Tensor()), ErrorCode::NullBuffer,
               "net::set_input: the input 'X' is an undefined tensor (no storage)");
  CHECK_STATUS(model.try_set_input("Y", x), ErrorCode::InvalidArgument, "net has no input 'Y'");
  CHECK(model.try_forward(out, x).ok());
  CHECK(out.size() == 1 && same(out[0], thrown_api[0]));

  // --- run-time dims whose sizes do not fit: SizeOverflow, nothing allocated ----------
  {
    float one = 1.0f;
    float ones[3] = {1.0f, 1.0f, 1.0f};
    wide w;
    CHECK(w.try_forward(out, Tensor::borrow(ones, {3, 1})).ok());
    CHECK(out.size() == 1 && out[0].shape() == rt::Shape({3 * 1024}));
    // 2^54 rows of one element (stride 0, so the input itself is 4 bytes):
    // the matmul result (batch 1024) f32 needs 2^66 bytes.
    const Tensor huge = Tensor::borrow(&one, {std::int64_t{1} << 54, 1}, {0, 0});
    CHECK_STATUS(w.try_forward(out, huge), ErrorCode::SizeOverflow, "the model's arena");
    CHECK(out.empty());
    // An input whose own bytes do not fit in the address space.
    const Tensor huger = Tensor::borrow(&one, {std::int64_t{1} << 62, 1}, {0, 0});
    CHECK_STATUS(w.try_forward(out, huger), ErrorCode::SizeOverflow, "has more bytes than fit in the address space");
    CHECK(w.try_forward(out, Tensor::borrow(ones, {2, 1})).ok());
    CHECK(out.size() == 1 && out[0].shape() == rt::Shape({2048}));
    scale s;
    double d = 3.0;
    CHECK_STATUS(s.try_forward(out, Tensor::borrow(&d, {std::int64_t{1} << 31, std::int64_t{1} << 31}, {0, 0})),
                 ErrorCode::SizeOverflow, "has more bytes than fit in the address space");
    CHECK(s.try_forward(out, Tensor::borrow(&d, {1, 1})).ok());
    CHECK(out.size() == 1 && out[0].item<double>() == 6.0);
  }

  // --- parameter files ----------------------------------------------------------------
  {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("wfgen_noexcept_" + std::to_string(::getpid()) + ".wfparams")).string();
    CHECK(model.try_save_parameters(path).ok());
    net other;
    CHECK(other.try_load_parameters(path).ok());
    std::vector<Tensor> out2;
    CHECK(other.try_forward(out2, x).ok());
    CHECK(out2.size() == 1 && same(out2[0], thrown_api[0]));
    CHECK_STATUS(other.try_load_parameters(path + ".missing"), ErrorCode::BadParameterFile, "cannot open the parameter file");
    scale s;
    CHECK_STATUS(s.try_load_parameters(path), ErrorCode::BadParameterFile, "the file's parameters 'linear_0.W', 'linear_0.b', 'linear_1.W', 'linear_1.b' are not any of the model's (the model has 0 parameters)");
    std::filesystem::remove(path);
  }

  // --- training builds: try_forward, then backward and step -----------------------------
  {
    net_train t;
    const Tensor target = iota(DType::f32, {5, 3});
    CHECK(t.try_forward(out, x, target).ok());
    CHECK(out.size() == 1 && out[0].numel() == 1);
    const float loss0 = out.empty() ? 0.0f : out[0].item<float>();
    for (int k = 0; k < 20; ++k) {
      CHECK(t.try_forward(out, x, target).ok());
      t.zero_grad();
      t.backward();
      t.step();
    }
    CHECK(t.try_forward(out, x, target).ok());
    CHECK(out.size() == 1 && out[0].item<float>() < loss0);
    CHECK_STATUS(t.try_forward(out, x, iota(DType::f32, {4, 3})), ErrorCode::ShapeMismatch, "batch is determined as 5");
  }

  // --- try_forward_into / try_run_into: caller-owned outputs ---------------------------
  {
    net m;
    Tensor y;  // undefined: the first call allocates it
    CHECK(m.try_forward_into(y, x).ok());
    CHECK(same(y, thrown_api[0]));
    const void* first = y.defined() ? y.raw_data() : nullptr;
    CHECK(m.try_forward_into(y, x).ok());  // the steady state: the same tensor, reused
    CHECK(y.defined() && y.raw_data() == first && same(y, thrown_api[0]));
    // Bad input: a Status, y keeps what it held.
    CHECK_STATUS(m.try_forward_into(y, iota(DType::f32, {5, 5})), ErrorCode::ShapeMismatch, "Couldn't identify axis 1 of X");
    CHECK(y.defined() && y.raw_data() == first && same(y, thrown_api[0]));
    CHECK_STATUS(m.try_forward_into(y, Tensor()), ErrorCode::NullBuffer, "the input X was not set");
    // The caller's memory, written by the last kernel.
    std::vector<float> mine(15, -1.0f);
    Tensor borrowed = Tensor::borrow(mine.data(), {5, 3});
    CHECK(m.try_forward_into(borrowed, x).ok());
    CHECK(borrowed.raw_data() == mine.data() && same(borrowed, thrown_api[0]));
    std::vector<Tensor> outs(1);
    CHECK(m.try_set_input("X", x).ok());
    CHECK(m.try_run_into(outs).ok());
    CHECK(same(outs[0], thrown_api[0]));
    std::vector<Tensor> two(2);
    CHECK_STATUS(m.try_run_into(two), ErrorCode::InvalidArgument, "net::run_into got 2 output tensors, expected 1");
    // forward() after a binding that wrote into the caller's tensor: its own copy again.
    CHECK(m.try_forward(out, x).ok());
    CHECK(out.size() == 1 && same(out[0], thrown_api[0]) && out[0].raw_data() != mine.data());
  }

  // --- a view with more elements than int64 holds, over buffers that fit ----------------
  {
    outer_sum m;
    float one = 1.0f, two = 2.0f;
    Tensor z;
    CHECK(m.try_forward_into(z, Tensor::borrow(&one, {3, 1}, {0, 0}), Tensor::borrow(&two, {1, 4}, {0, 0})).ok());
    CHECK(z.defined() && z.shape() == rt::Shape({3, 1}) && z.at<float>({2, 0}) == 12.0f);
    // X + Y is read as (2^20 2^44) broadcast views: 2^64 elements. Every
    // buffer fits (the inputs are one float each, the result 4 MiB).
    const Tensor a = Tensor::borrow(&one, {std::int64_t{1} << 20, 1}, {0, 0});
    const Tensor b = Tensor::borrow(&two, {1, std::int64_t{1} << 44}, {0, 0});
    CHECK_STATUS(m.try_forward_into(z, a, b), ErrorCode::SizeOverflow,
                 "the tensor TID2 of the model: broadcast_ref: a view of shape (1048576 17592186044416) has more elements than fit in int64");
    CHECK(z.shape() == rt::Shape({3, 1}));  // not replaced: the binding failed
    CHECK_STATUS(m.try_forward(out, a, b), ErrorCode::SizeOverflow, "has more elements than fit in int64");
  }

  // --- the training API's try_ forms ------------------------------------------------------
  {
    net_train t;
    const Tensor target = iota(DType::f32, {5, 3});
    CHECK_STATUS(t.try_backward(), ErrorCode::InvalidArgument, "net_train::backward() needs a forward pass first");
    Tensor loss;
    CHECK(t.try_forward_into(loss, x, target).ok());
    CHECK(loss.numel() == 1);
    const float loss0 = loss.item<float>();
    CHECK_STATUS(t.try_backward({}), ErrorCode::InvalidArgument, "expected 1 output gradients, got 0");
    CHECK_STATUS(t.try_backward({Tensor()}), ErrorCode::NullBuffer, "the gradient of output 0 is an undefined tensor");
    CHECK_STATUS(t.try_backward({Tensor::zeros(DType::f64, {1})}), ErrorCode::DTypeMismatch, "has dtype f64, expected f32");
    CHECK_STATUS(t.try_backward({Tensor::zeros(DType::f32, {2})}), ErrorCode::ShapeMismatch, "has shape (2), expected (1)");
    Tensor g;
    CHECK_STATUS(t.try_grad("nope", g), ErrorCode::InvalidArgument, "net_train has no gradient of 'nope'");
    CHECK(!g.defined());
    // The failed calls changed nothing: the forward pass still allows one backward.
    CHECK(t.try_zero_grad().ok());
    CHECK(t.try_backward().ok());
    CHECK_STATUS(t.try_backward(), ErrorCode::InvalidArgument, "needs a forward pass first");
    CHECK(t.try_step().ok());
    for (int k = 0; k < 20; ++k) {
      CHECK(t.try_forward_into(loss, x, target).ok());
      CHECK(t.try_zero_grad().ok());
      CHECK(t.try_backward({Tensor::full(DType::f32, {1}, 1.0)}).ok());
      CHECK(t.try_step().ok());
    }
    CHECK(t.try_forward_into(loss, x, target).ok());
    CHECK(loss.item<float>() < loss0);
    const auto grads = t.gradients();
    CHECK(!grads.empty());
    CHECK(!grads.empty() && t.try_grad(grads[0].first, g).ok() && g.raw_data() == grads[0].second.raw_data());
  }

  // --- the throwing API aborts through fail() ------------------------------------------
  {
    std::string err;
    const int st = in_child([&] {
      net m;
      (void)m.forward(iota(DType::f32, {5, 5}));
    }, err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(err.find("wfgen: shape mismatch: [wfgen] Shape-Error") != std::string::npos);
    CHECK(err.find("Couldn't identify axis 1 of X") != std::string::npos);
  }
  {
    std::string err;
    const int st = in_child([&] {
      net m;
      Tensor y;
      m.forward_into(y, iota(DType::f32, {5, 4, 1}));
    }, err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(err.find("wfgen: rank mismatch: [wfgen] Shape-Error") != std::string::npos);
  }
  {
    std::string err;
    const int st = in_child([&] {
      outer_sum m;
      float one = 1.0f;
      (void)m.forward(Tensor::borrow(&one, {std::int64_t{1} << 20, 1}, {0, 0}),
                      Tensor::borrow(&one, {1, std::int64_t{1} << 44}, {0, 0}));
    }, err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(err.find("wfgen: size overflow: the tensor TID2 of the model: broadcast_ref") != std::string::npos);
  }
  {
    std::string err;
    const int st = in_child([&] {
      rt::set_fatal_handler(&fatal_handler_exits_3);
      net m;
      m.set_input("X", Tensor());
    }, err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    CHECK(err.find("handler: null buffer: net::set_input: the input 'X' is an undefined tensor") != std::string::npos);
  }

  if (g_failures) {
    std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}

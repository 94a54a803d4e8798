// Workload 7 (issue 18): the Fashion-MNIST CNN of examples/cnn-training at
// batch 64, f32, one Adam training step, through the class wfgen generates
// from examples/cnn-training/cnn.yaml itself (so the bench times the
// example's net, blas device), against a hand-written im2col + cblas_sgemm
// loop of the same net, in the same run:
//
//   conv2d(1->16, 3x3, pad 1) -> relu -> max_pool2d 2x2 ->
//   conv2d(16->32, 3x3) -> relu -> max_pool2d 2x2 -> linear(1152->10)
//   -> mean cross-entropy against one-hot T; backward; Adam (lr 0.001)
//
//  cnn_train_b64        one training step: cnn_train::forward(X, T),
//                       zero_grad(), backward(), step() against Hand::train_step:
//                       per image im2col + cblas_sgemm for each convolution
//                       (W [out, in*9] x col [in*9, h*w]), fused bias/relu
//                       loops, 2x2 pools that keep the argmax, one sgemm for
//                       the linear layer; backward: sgemm for dW3 and dP2,
//                       argmax scatter, relu mask, per image sgemm for dW
//                       (accumulated, beta 1) and for dcol (W^T dY), col2im
//                       for conv2's input gradient (conv1's input needs none);
//                       one Adam loop over all parameters.
//  cnn_train_b64_parts  forward, backward and step of both, timed alone.
//
// The seconds per epoch (938 steps of 64 = 60000 images, without the data
// copy) are the median step times times 938; they are in the notes.
//
// Work: the GEMM flops per step: forward 2 B (16*9*784 + 32*144*144 + 1152*10),
// backward twice that less conv1's input gradient (2 B 9*16*784).
//
// Before timing, at every thread count: one training step of both from the
// same weights and batch; the losses must agree within 1e-5, the gradients
// within 1e-3 relative + 1e-5 of the largest, and the Adam updates must agree
// (to 1e-6) on all but a few elements whose gradient is ~0, where Adam's first
// step, lr * g / |g|, turns rounding into a sign.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "bench_main.hpp"
#include "cnn/cnn_train.hpp"
#include "wfgen/runtime.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace bench {

namespace {

constexpr int B = 64, S = 28, C1 = 16, C2 = 32, CLS = 10;
constexpr int S1 = 14, S2 = 12, S3 = 6;              // after pool 1, conv 2, pool 2
constexpr int K1 = 9, K2 = C1 * 9, F = C2 * S3 * S3;  // im2col rows of conv 1 and 2, features
constexpr int STEPS_PER_EPOCH = (60000 + B - 1) / B;
constexpr float LR = 0.001f, BETA1 = 0.9f, BETA2 = 0.999f, EPS = 1e-8f;
using wfgen::rt::Tensor;

// The wfgen parameters in the order of Hand::param().
const char* const kParam[6] = {"classifier_0/conv2d_0.W", "classifier_0/conv2d_0.b", "classifier_0/conv2d_1.W",
                               "classifier_0/conv2d_1.b", "classifier_0/linear_0.W", "classifier_0/linear_0.b"};
const std::int64_t kParamSize[6] = {C1 * K1, C1, C2 * K2, C2, F * CLS, CLS};

// col[(c*3 + i)*3 + j][y*wo + x] = in[c][y - pad + i][x - pad + j] (0 outside), stride 1.
void im2col3(const float* in, int c_in, int s, int pad, float* col) {
  const int so = s + 2 * pad - 2;
  for (int c = 0; c < c_in; ++c)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        float* row = col + ((c * 3 + i) * 3 + j) * so * so;
        for (int y = 0; y < so; ++y) {
          const int yy = y - pad + i;
          for (int x = 0; x < so; ++x) {
            const int xx = x - pad + j;
            row[y * so + x] = (yy >= 0 && yy < s && xx >= 0 && xx < s) ? in[(c * s + yy) * s + xx] : 0.0f;
          }
        }
      }
}

// The adjoint of im2col3: out[c][y - pad + i][x - pad + j] += col[...][...].
void col2im3(const float* col, int c_in, int s, int pad, float* out) {
  const int so = s + 2 * pad - 2;
  std::fill(out, out + c_in * s * s, 0.0f);
  for (int c = 0; c < c_in; ++c)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        const float* row = col + ((c * 3 + i) * 3 + j) * so * so;
        for (int y = 0; y < so; ++y) {
          const int yy = y - pad + i;
          if (yy < 0 || yy >= s) continue;
          for (int x = 0; x < so; ++x) {
            const int xx = x - pad + j;
            if (xx >= 0 && xx < s) out[(c * s + yy) * s + xx] += row[y * so + x];
          }
        }
      }
}

// 2x2 max pool, stride 2, of c planes s x s; idx keeps the argmax (first of ties).
void pool2(const float* in, int c, int s, float* out, std::int32_t* idx) {
  const int so = s / 2;
  for (int p = 0; p < c; ++p)
    for (int y = 0; y < so; ++y)
      for (int x = 0; x < so; ++x) {
        int best = (p * s + 2 * y) * s + 2 * x;
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) {
            const int at = (p * s + 2 * y + i) * s + 2 * x + j;
            if (in[at] > in[best]) best = at;
          }
        out[(p * so + y) * so + x] = in[best];
        idx[(p * so + y) * so + x] = best;
      }
}

// The hand-written implementation: its own weights, buffers and Adam state.
struct Hand {
  std::vector<float> p[6], g[6], m[6], v[6];
  Buffer col1{B * K1 * S * S}, A1{B * C1 * S * S}, P1{B * C1 * S1 * S1}, col2{B * K2 * S2 * S2}, A2{B * C2 * S2 * S2};
  Buffer P2{B * F}, Z{B * CLS}, dZ{B * CLS}, dP2{B * F}, dA2{B * C2 * S2 * S2}, dcol2{B * K2 * S2 * S2};
  Buffer dP1{B * C1 * S1 * S1}, dA1{B * C1 * S * S};
  std::vector<std::int32_t> idx1 = std::vector<std::int32_t>(B * C1 * S1 * S1), idx2 = std::vector<std::int32_t>(B * F);
  float loss = 0;
  int t = 0;

  Hand() {
    for (int k = 0; k < 6; ++k) {
      p[k].assign(kParamSize[k], 0.0f), g[k].assign(kParamSize[k], 0.0f);
      m[k].assign(kParamSize[k], 0.0f), v[k].assign(kParamSize[k], 0.0f);
    }
  }

  // Y = relu(W col + b) for one image: W [co, k] col [k, n].
  static void conv_relu(const float* W, const float* bias, const float* col, int co, int k, int n, float* Y) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, co, n, k, 1.0f, W, k, col, n, 0.0f, Y, n);
    for (int o = 0; o < co; ++o)
      for (int i = 0; i < n; ++i) Y[o * n + i] = std::max(Y[o * n + i] + bias[o], 0.0f);
  }

  void forward_loss(const float* X, const float* T) {
    for (int b = 0; b < B; ++b) {
      im2col3(X + b * S * S, 1, S, 1, col1.data + b * K1 * S * S);
      conv_relu(p[0].data(), p[1].data(), col1.data + b * K1 * S * S, C1, K1, S * S, A1.data + b * C1 * S * S);
      pool2(A1.data + b * C1 * S * S, C1, S, P1.data + b * C1 * S1 * S1, idx1.data() + b * C1 * S1 * S1);
      im2col3(P1.data + b * C1 * S1 * S1, C1, S1, 0, col2.data + b * K2 * S2 * S2);
      conv_relu(p[2].data(), p[3].data(), col2.data + b * K2 * S2 * S2, C2, K2, S2 * S2, A2.data + b * C2 * S2 * S2);
      pool2(A2.data + b * C2 * S2 * S2, C2, S2, P2.data + b * F, idx2.data() + b * F);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, CLS, F, 1.0f, P2.data, F, p[4].data(), CLS, 0.0f, Z.data, CLS);
    // Mean cross-entropy; dZ = (softmax(Z) sum(T) - T) / B.
    double total = 0;
    for (int b = 0; b < B; ++b) {
      float* z = Z.data + b * CLS;
      const float* tr = T + b * CLS;
      float* d = dZ.data + b * CLS;
      for (int k = 0; k < CLS; ++k) z[k] += p[5][k];
      float mx = z[0];
      for (int k = 1; k < CLS; ++k) mx = std::max(mx, z[k]);
      float s = 0, tsum = 0;
      for (int k = 0; k < CLS; ++k) s += (d[k] = std::exp(z[k] - mx)), tsum += tr[k];
      const float lse = mx + std::log(s), inv = 1.0f / s;
      for (int k = 0; k < CLS; ++k) {
        total -= tr[k] * (z[k] - lse);
        d[k] = (d[k] * inv * tsum - tr[k]) * (1.0f / B);
      }
    }
    loss = static_cast<float>(total / B);
  }

  // dY = dA routed from the pool's output gradient dP through idx, where A > 0.
  static void unpool_relu(const float* dP, const std::int32_t* idx, int n_out, const float* A, int n_in, float* dA) {
    std::fill(dA, dA + n_in, 0.0f);
    for (int i = 0; i < n_out; ++i) dA[idx[i]] += dP[i];
    for (int i = 0; i < n_in; ++i) dA[i] = A[i] > 0 ? dA[i] : 0.0f;
  }

  // The gradients (written, not accumulated).
  void backward() {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, F, CLS, B, 1.0f, P2.data, F, dZ.data, CLS, 0.0f, g[4].data(), CLS);
    std::fill(g[5].begin(), g[5].end(), 0.0f);
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < CLS; ++k) g[5][k] += dZ.data[b * CLS + k];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, F, CLS, 1.0f, dZ.data, CLS, p[4].data(), CLS, 0.0f, dP2.data, F);
    std::fill(g[1].begin(), g[1].end(), 0.0f);
    std::fill(g[3].begin(), g[3].end(), 0.0f);
    const int n2 = S2 * S2, n1 = S * S;
    for (int b = 0; b < B; ++b) {
      float* dy2 = dA2.data + b * C2 * n2;
      unpool_relu(dP2.data + b * F, idx2.data() + b * F, F, A2.data + b * C2 * n2, C2 * n2, dy2);
      for (int o = 0; o < C2; ++o)
        for (int i = 0; i < n2; ++i) g[3][o] += dy2[o * n2 + i];
      // dW2 += dY2 col2^T; dcol2 = W2^T dY2; dP1 = col2im(dcol2)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, C2, K2, n2, 1.0f, dy2, n2, col2.data + b * K2 * n2, n2,
                  b == 0 ? 0.0f : 1.0f, g[2].data(), K2);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K2, n2, C2, 1.0f, p[2].data(), K2, dy2, n2, 0.0f,
                  dcol2.data + b * K2 * n2, n2);
      col2im3(dcol2.data + b * K2 * n2, C1, S1, 0, dP1.data + b * C1 * S1 * S1);
      float* dy1 = dA1.data + b * C1 * n1;
      unpool_relu(dP1.data + b * C1 * S1 * S1, idx1.data() + b * C1 * S1 * S1, C1 * S1 * S1, A1.data + b * C1 * n1, C1 * n1, dy1);
      for (int o = 0; o < C1; ++o)
        for (int i = 0; i < n1; ++i) g[1][o] += dy1[o * n1 + i];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, C1, K1, n1, 1.0f, dy1, n1, col1.data + b * K1 * n1, n1,
                  b == 0 ? 0.0f : 1.0f, g[0].data(), K1);
    }
  }

  void adam() {
    ++t;
    const float c1 = 1.0f - std::pow(BETA1, static_cast<float>(t)), c2 = 1.0f - std::pow(BETA2, static_cast<float>(t));
    for (int k = 0; k < 6; ++k) {
      float *pp = p[k].data(), *mm = m[k].data(), *vv = v[k].data();
      const float* gg = g[k].data();
      for (std::size_t i = 0; i < p[k].size(); ++i) {
        mm[i] = BETA1 * mm[i] + (1 - BETA1) * gg[i];
        vv[i] = BETA2 * vv[i] + (1 - BETA2) * gg[i] * gg[i];
        pp[i] -= LR * (mm[i] / c1) / (std::sqrt(vv[i] / c2) + EPS);
      }
    }
  }

  void train_step(const float* X, const float* T) {
    forward_loss(X, T);
    backward();
    adam();
  }
};

// |out - ref| <= rtol |ref| + atol_frac * max |ref| for every element.
void check_grad(const std::string& what, const float* out, const std::vector<float>& ref, double rtol, double atol_frac) {
  double scale = 0;
  for (float v : ref) scale = std::max(scale, std::fabs(double(v)));
  const double atol = atol_frac * scale;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(double(out[i]) - ref[i]);
    if (!(d <= atol + rtol * std::fabs(double(ref[i])))) {
      std::ostringstream os;
      os.precision(9);
      os << what << ": element " << i << " is " << out[i] << ", the hand-written loop's is " << ref[i];
      fail(os.str());
    }
  }
}

std::string code_block(const std::string& title, const std::string& body) {
  return "#### " + title + "\n\n```\n" + body + (body.empty() || body.back() == '\n' ? "" : "\n") + "```\n";
}

}  // namespace

void run_cnn(Report& report, const std::vector<int>& threads) {
  const std::string wl = "cnn_train_b64", wl_parts = "cnn_train_b64_parts";
  const double fwd = 2.0 * B * (double(C1) * K1 * S * S + double(C2) * K2 * S2 * S2 + double(F) * CLS);
  const double train_flops = 3.0 * fwd - 2.0 * B * double(K1) * C1 * S * S;

  // A batch: pixels in [0, 1) (no ties in the pools' windows), one-hot targets.
  Buffer x(B * S * S), t(B * CLS);
  fill_random(x.data, B * S * S, 71, 0, 1);
  std::fill(t.data, t.data + B * CLS, 0.0f);
  for (int b = 0; b < B; ++b) t.data[b * CLS + (b * 7 + 3) % CLS] = 1.0f;
  const Tensor X = Tensor::borrow(x.data, {B, 1, S, S}), T = Tensor::borrow(t.data, {B, CLS});

  for (int th : threads) {
    wfgen::rt::set_num_threads(th);
    openblas_set_num_threads(th);
    const std::string tag = " at " + std::to_string(th) + " thread(s)";
    // Fresh instances per thread count: both start from the spec's initial weights.
    bench_cnn::cnn_train train;
    Hand hand;
    for (int k = 0; k < 6; ++k) {
      const Tensor w = train.parameter(kParam[k]);
      if (w.numel() != kParamSize[k]) fail(std::string("cnn: ") + kParam[k] + " has an unexpected size");
      std::copy(w.data<float>(), w.data<float>() + w.numel(), hand.p[k].begin());
    }

    // --- one training step from the same weights: check -----------------------
    const float wf_loss = train.forward(X, T)[0].data<float>()[0];
    train.zero_grad();
    train.backward();
    hand.forward_loss(x.data, t.data);
    hand.backward();
    if (!(std::fabs(wf_loss - hand.loss) <= 1e-5 * std::fabs(hand.loss) + 1e-6))
      fail(wl + tag + ": loss wfgen " + std::to_string(wf_loss) + ", hand " + std::to_string(hand.loss));
    for (int k = 0; k < 6; ++k)
      check_grad(std::string("wfgen gradient of ") + kParam[k] + tag, train.grad(kParam[k]).data<float>(), hand.g[k], 1e-3, 1e-5);
    train.step();
    hand.adam();
    std::int64_t differ = 0, total = 0;
    for (int k = 0; k < 6; ++k) {
      const float* w = train.parameter(kParam[k]).data<float>();
      for (std::size_t i = 0; i < hand.p[k].size(); ++i, ++total) differ += std::fabs(w[i] - hand.p[k][i]) > 1e-6f;
    }
    if (differ * 1000 > total)
      fail(wl + tag + ": the Adam step differs on " + std::to_string(differ) + " of " + std::to_string(total) + " weights");

    // --- training step: time ----------------------------------------------------
    std::vector<Impl> step = {
        {"wfgen", [&] {
           train.forward(X, T);
           train.zero_grad();
           train.backward();
           train.step();
         }},
        {"hand", [&] { hand.train_step(x.data, t.data); }},
    };
    std::vector<Stats> st = time_round_robin(step, passes());
    for (std::size_t k = 0; k < step.size(); ++k) report.add({wl, step[k].name, th, st[k], train_flops, "GFLOP/s", 1e9, ""});
    report.ratio({wl, "wfgen", th, wl, "hand", th});
    std::ostringstream note;
    note.precision(2);
    note << std::fixed << wl << tag << ": " << st[0].median * STEPS_PER_EPOCH << " s per epoch (wfgen), "
         << st[1].median * STEPS_PER_EPOCH << " s (hand), " << STEPS_PER_EPOCH << " steps of " << B
         << " images, from the median step; ratio " << st[0].median / st[1].median;
    report.note(note.str());

    // --- the parts, each alone (the backward reruns on the last forward's values) ---
    train.forward(X, T);
    hand.forward_loss(x.data, t.data);
    std::vector<Impl> parts = {
        {"wfgen forward (X, T -> loss)", [&] { train.forward(X, T); }},
        {"wfgen backward (VM Section::FreshBackward)", [&] { train.vm().run(wfgen::rt::Section::FreshBackward); }},
        {"wfgen step (adam)", [&] { train.step(); }},
        {"hand forward + loss + dZ", [&] { hand.forward_loss(x.data, t.data); }},
        {"hand backward", [&] { hand.backward(); }},
        {"hand adam", [&] { hand.adam(); }},
    };
    st = time_round_robin(parts, passes());
    for (std::size_t k = 0; k < parts.size(); ++k) report.add({wl_parts, parts[k].name, th, st[k], 0, "", 1e9, ""});
    for (int k = 0; k < 3; ++k) report.ratio({wl_parts, parts[k].name, th, wl_parts, parts[k + 3].name, th});

    if (th == threads.front()) {
      const int n = 50;
      train.forward(X, T);
      report.appendix(code_block("cnn_train::profile(" + std::to_string(n) + ") at " + std::to_string(th) +
                                     " thread(s) (the forward with the loss)",
                                 train.profile(n, 12)));
      report.appendix(code_block("cnn_train.vm().profile(Section::FreshBackward, " + std::to_string(n) + ") at " +
                                     std::to_string(th) + " thread(s) (the pullback after zero_grad(), rerun without a forward)",
                                 train.vm().profile(wfgen::rt::Section::FreshBackward, n, 12)));
    }
  }
  wfgen::rt::set_num_threads(1);
  openblas_set_num_threads(1);
}

}  // namespace bench

// Workload 5 (issue 9): the 784-256-10 relu MLP of the Fashion-MNIST example
// at batch 64, f32, through the classes wfgen generates from
// bench/specs/mlp.yaml (blas device), against a hand-written OpenBLAS + loops
// implementation of the same math, in the same run.
//
//  mlp_forward_b64   P = softmax(relu(X W1 + b1) W2 + b2), the class
//                    probabilities: mlp_predict::forward(X) against
//                    cblas_sgemm x 2 + a fused bias/relu loop + a bias loop +
//                    a row softmax loop.
//  mlp_train_b64     one training step: forward, mean cross-entropy against
//                    one-hot T, backward, SGD (lr 0.01, no momentum):
//                    mlp_train::forward(X, T), zero_grad(), backward(), step()
//                    against the forward above + a fused softmax/cross-entropy
//                    gradient loop, cblas_sgemm for the three GEMMs of the
//                    backward (dW2 = H^T dZ2, dH = dZ2 W2^T, dW1 = X^T dZ1),
//                    loops for the bias gradients and the relu gradient, and
//                    an SGD loop (split over the threads for W1).
//  mlp_train_b64_parts  the parts of both training steps, timed alone.
//
// Work: the GEMM flops (2 M N K per GEMM): forward 2 B (784*256 + 256*10),
// training step 2 B (2*784*256 + 3*256*10) (no gradient for X).
//
// Before timing, at every thread count: the forward of both against a
// double-precision reference; one training step of both from the same weights
// and batch: loss and gradients against a double reference, and the updated
// weights of wfgen against those of the hand-written step (1e-4 relative).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "bench_main.hpp"
#include "mlp/mlp_predict.hpp"
#include "mlp/mlp_train.hpp"
#include "wfgen/runtime.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace bench {

namespace {

constexpr int B = 64, IN = 784, HID = 256, CLS = 10;
constexpr float LR = 0.01f;
using wfgen::rt::Tensor;

const char* const kParam[4] = {"mlp_classifier_0.W1", "mlp_classifier_0.b1", "mlp_classifier_0.W2", "mlp_classifier_0.b2"};

// The hand-written implementation: its own weights and buffers.
struct Hand {
  Buffer W1{IN * HID}, b1{HID}, W2{HID * CLS}, b2{CLS};
  Buffer H{B * HID}, Z{B * CLS}, P{B * CLS}, dZ2{B * CLS}, dH{B * HID};
  Buffer gW1{IN * HID}, gb1{HID}, gW2{HID * CLS}, gb2{CLS};
  float loss = 0;

  float* param(int i) { return i == 0 ? W1.data : i == 1 ? b1.data : i == 2 ? W2.data : b2.data; }
  float* grad(int i) { return i == 0 ? gW1.data : i == 1 ? gb1.data : i == 2 ? gW2.data : gb2.data; }

  // H = relu(X W1 + b1); Z = H W2 + b2.
  void logits(const float* X) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, HID, IN, 1.0f, X, IN, W1.data, HID, 0.0f, H.data, HID);
    for (int b = 0; b < B; ++b) {
      float* h = H.data + b * HID;
      for (int j = 0; j < HID; ++j) h[j] = std::max(h[j] + b1.data[j], 0.0f);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, CLS, HID, 1.0f, H.data, HID, W2.data, CLS, 0.0f, Z.data, CLS);
    for (int b = 0; b < B; ++b) {
      float* z = Z.data + b * CLS;
      for (int k = 0; k < CLS; ++k) z[k] += b2.data[k];
    }
  }

  // P = softmax(Z) by rows.
  void predict(const float* X) {
    logits(X);
    for (int b = 0; b < B; ++b) {
      const float* z = Z.data + b * CLS;
      float* p = P.data + b * CLS;
      float mx = z[0];
      for (int k = 1; k < CLS; ++k) mx = std::max(mx, z[k]);
      float s = 0;
      for (int k = 0; k < CLS; ++k) s += (p[k] = std::exp(z[k] - mx));
      for (int k = 0; k < CLS; ++k) p[k] /= s;
    }
  }

  // Forward and the mean cross-entropy; dZ2 = (softmax(Z) sum(T) - T) / B,
  // the gradient of the loss at the logits (one pass per row).
  void forward_loss(const float* X, const float* T) {
    logits(X);
    double total = 0;
    for (int b = 0; b < B; ++b) {
      const float* z = Z.data + b * CLS;
      const float* t = T + b * CLS;
      float* d = dZ2.data + b * CLS;
      float mx = z[0];
      for (int k = 1; k < CLS; ++k) mx = std::max(mx, z[k]);
      float s = 0, tsum = 0;
      for (int k = 0; k < CLS; ++k) s += (d[k] = std::exp(z[k] - mx)), tsum += t[k];
      const float lse = mx + std::log(s), inv = 1.0f / s;
      float row = 0;
      for (int k = 0; k < CLS; ++k) {
        row -= t[k] * (z[k] - lse);
        d[k] = (d[k] * inv * tsum - t[k]) * (1.0f / B);
      }
      total += row;
    }
    loss = static_cast<float>(total / B);
  }

  // The gradients (written, not accumulated: no zeroing pass).
  void backward(const float* X) {
    // dW2 = H^T dZ2, db2 = column sums of dZ2
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, HID, CLS, B, 1.0f, H.data, HID, dZ2.data, CLS, 0.0f, gW2.data, CLS);
    std::fill(gb2.data, gb2.data + CLS, 0.0f);
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < CLS; ++k) gb2.data[k] += dZ2.data[b * CLS + k];
    // dH = dZ2 W2^T; dZ1 = dH where H > 0 (in place); db1 = column sums of dZ1
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, HID, CLS, 1.0f, dZ2.data, CLS, W2.data, CLS, 0.0f, dH.data, HID);
    std::fill(gb1.data, gb1.data + HID, 0.0f);
    for (int b = 0; b < B; ++b) {
      const float* h = H.data + b * HID;
      float* d = dH.data + b * HID;
      for (int j = 0; j < HID; ++j) {
        d[j] = h[j] > 0 ? d[j] : 0.0f;
        gb1.data[j] += d[j];
      }
    }
    // dW1 = X^T dZ1
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, IN, HID, B, 1.0f, X, IN, dH.data, HID, 0.0f, gW1.data, HID);
  }

  // W -= lr dW; W1 (200 k values) split over the threads.
  void sgd(Split& split) {
    split.run(IN * HID, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = lo; i < hi; ++i) W1.data[i] -= LR * gW1.data[i];
    });
    for (int i = 0; i < HID; ++i) b1.data[i] -= LR * gb1.data[i];
    for (int i = 0; i < HID * CLS; ++i) W2.data[i] -= LR * gW2.data[i];
    for (int i = 0; i < CLS; ++i) b2.data[i] -= LR * gb2.data[i];
  }

  void train_step(const float* X, const float* T, Split& split) {
    forward_loss(X, T);
    backward(X);
    sgd(split);
  }
};

// Naive double-precision reference of the forward, the loss and the gradients.
struct Reference {
  std::vector<double> P, gW1, gb1, gW2, gb2;
  double loss = 0;

  Reference(const std::vector<std::vector<float>>& w, const float* X, const float* T) {
    const std::vector<float>&W1 = w[0], &b1 = w[1], &W2 = w[2], &b2 = w[3];
    std::vector<double> h(B * HID), z(B * CLS), dz(B * CLS), dh(B * HID, 0.0);
    P.resize(B * CLS);
    for (int b = 0; b < B; ++b) {
      std::vector<double> row(b1.begin(), b1.end());
      for (int i = 0; i < IN; ++i) {
        const double x = X[b * IN + i];
        for (int j = 0; j < HID; ++j) row[j] += x * W1[i * HID + j];
      }
      for (int j = 0; j < HID; ++j) h[b * HID + j] = row[j] > 0 ? row[j] : 0;
    }
    for (int b = 0; b < B; ++b) {
      double mx = -1e300, s = 0, tsum = 0;
      for (int k = 0; k < CLS; ++k) {
        double v = b2[k];
        for (int j = 0; j < HID; ++j) v += h[b * HID + j] * W2[j * CLS + k];
        z[b * CLS + k] = v;
        mx = std::max(mx, v);
      }
      for (int k = 0; k < CLS; ++k) s += std::exp(z[b * CLS + k] - mx), tsum += T[b * CLS + k];
      for (int k = 0; k < CLS; ++k) {
        const int at = b * CLS + k;
        const double logp = z[at] - mx - std::log(s);
        P[at] = std::exp(logp);
        loss -= T[at] * logp / B;
        dz[at] = (P[at] * tsum - T[at]) / B;
      }
    }
    gW1.assign(IN * HID, 0.0), gb1.assign(HID, 0.0), gW2.assign(HID * CLS, 0.0), gb2.assign(CLS, 0.0);
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < CLS; ++k) {
        const double d = dz[b * CLS + k];
        gb2[k] += d;
        for (int j = 0; j < HID; ++j) {
          gW2[j * CLS + k] += h[b * HID + j] * d;
          dh[b * HID + j] += W2[j * CLS + k] * d;
        }
      }
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < HID; ++j) {
        const double d = h[b * HID + j] > 0 ? dh[b * HID + j] : 0.0;
        if (d == 0) continue;
        gb1[j] += d;
        for (int i = 0; i < IN; ++i) gW1[i * HID + j] += X[b * IN + i] * d;
      }
  }

  const std::vector<double>& grad(int i) const { return i == 0 ? gW1 : i == 1 ? gb1 : i == 2 ? gW2 : gb2; }
};

// |out - ref| <= rtol |ref| + atol_frac * max |ref| for every element.
void check_against(const std::string& what, const float* out, const std::vector<double>& ref, double rtol, double atol_frac) {
  double scale = 0;
  for (double v : ref) scale = std::max(scale, std::fabs(v));
  const double atol = atol_frac * scale;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(out[i] - ref[i]);
    if (!(d <= atol + rtol * std::fabs(ref[i]))) {
      std::ostringstream os;
      os.precision(9);
      os << what << ": element " << i << " is " << out[i] << ", the reference is " << ref[i] << " (|diff| " << d << " > "
         << atol << " + " << rtol << " * |ref|)";
      fail(os.str());
    }
  }
}

std::vector<std::vector<float>> snapshot(const bench_mlp::mlp_train& m) {
  std::vector<std::vector<float>> w;
  for (const char* name : kParam) {
    const Tensor t = m.parameter(name);
    w.emplace_back(t.data<float>(), t.data<float>() + t.numel());
  }
  return w;
}

template <class Model>
void load_weights(Model& m, const std::vector<std::vector<float>>& w) {
  for (int i = 0; i < 4; ++i) std::copy(w[i].begin(), w[i].end(), m.parameter(kParam[i]).template data<float>());
}

void load_weights(Hand& h, const std::vector<std::vector<float>>& w) {
  for (int i = 0; i < 4; ++i) std::copy(w[i].begin(), w[i].end(), h.param(i));
}

std::string code_block(const std::string& title, const std::string& body) {
  return "#### " + title + "\n\n```\n" + body + (body.empty() || body.back() == '\n' ? "" : "\n") + "```\n";
}

}  // namespace

void run_mlp(Report& report, const std::vector<int>& threads) {
  const std::string wl_fwd = "mlp_forward_b64", wl_train = "mlp_train_b64", wl_parts = "mlp_train_b64_parts";
  const double fwd_flops = 2.0 * B * (double(IN) * HID + double(HID) * CLS);
  const double train_flops = 2.0 * B * (2.0 * IN * HID + 3.0 * HID * CLS);

  // A batch: pixels in [0, 1), one-hot targets.
  Buffer x(B * IN), t(B * CLS);
  fill_random(x.data, B * IN, 51, 0, 1);
  std::fill(t.data, t.data + B * CLS, 0.0f);
  for (int b = 0; b < B; ++b) t.data[b * CLS + (b * 7 + 3) % CLS] = 1.0f;
  const Tensor X = Tensor::borrow(x.data, {B, IN}), T = Tensor::borrow(t.data, {B, CLS});

  bench_mlp::mlp_predict predict;
  bench_mlp::mlp_train train;
  Hand hand;
  const std::vector<std::vector<float>> w0 = snapshot(train);  // He / Xavier / uniform init of the spec
  const Reference ref(w0, x.data, t.data);

  for (int th : threads) {
    wfgen::rt::set_num_threads(th);
    openblas_set_num_threads(th);
    Split split(th);
    const std::string tag = " at " + std::to_string(th) + " thread(s)";

    // --- forward -------------------------------------------------------------
    load_weights(predict, w0);
    load_weights(hand, w0);
    Tensor probs;
    std::vector<Impl> fwd = {
        {"wfgen", [&] { probs = predict.forward(X)[0]; }},
        {"hand", [&] { hand.predict(x.data); }},
    };
    for (Impl& impl : fwd) impl.call();
    check_against("wfgen " + wl_fwd + tag, probs.data<float>(), ref.P, 1e-4, 1e-6);
    check_against("hand " + wl_fwd + tag, hand.P.data, ref.P, 1e-4, 1e-6);
    std::vector<Stats> st = time_round_robin(fwd, passes());
    for (std::size_t k = 0; k < fwd.size(); ++k) report.add({wl_fwd, fwd[k].name, th, st[k], fwd_flops, "GFLOP/s", 1e9, ""});
    report.ratio({wl_fwd, "wfgen", th, wl_fwd, "hand", th});

    // --- one training step from the same weights: check -----------------------
    load_weights(train, w0);
    load_weights(hand, w0);
    const float wf_loss = train.forward(X, T)[0].data<float>()[0];
    train.zero_grad();
    train.backward();
    hand.forward_loss(x.data, t.data);
    hand.backward(x.data);
    if (!(std::fabs(wf_loss - ref.loss) <= 1e-5 * std::fabs(ref.loss) + 1e-6) ||
        !(std::fabs(hand.loss - ref.loss) <= 1e-5 * std::fabs(ref.loss) + 1e-6)) {
      fail(wl_train + tag + ": loss wfgen " + std::to_string(wf_loss) + ", hand " + std::to_string(hand.loss) +
           ", reference " + std::to_string(ref.loss));
    }
    for (int i = 0; i < 4; ++i) {
      // Sums of 64 products (dW) of values O(1): float error ~1e-6 of the largest.
      check_against(std::string("wfgen gradient of ") + kParam[i] + tag, train.grad(kParam[i]).data<float>(), ref.grad(i), 1e-3, 1e-5);
      check_against(std::string("hand gradient of ") + kParam[i] + tag, hand.grad(i), ref.grad(i), 1e-3, 1e-5);
    }
    train.step();
    hand.sgd(split);
    for (int i = 0; i < 4; ++i) {
      const Tensor p = train.parameter(kParam[i]);
      std::vector<double> want(hand.param(i), hand.param(i) + p.numel());
      check_against(std::string("wfgen updated ") + kParam[i] + " against the hand-written step" + tag, p.data<float>(), want, 1e-4, 1e-7);
      for (std::int64_t j = 0; j < p.numel(); ++j) {  // and the step moved the weights by lr * gradient
        const double moved = double(w0[i][j]) - LR * ref.grad(i)[j];
        if (std::fabs(p.data<float>()[j] - moved) > 1e-4 * std::fabs(moved) + 1e-7)
          fail(std::string("wfgen step of ") + kParam[i] + tag + ": element " + std::to_string(j) + " is not W - lr dW");
      }
    }

    // --- training step: time ----------------------------------------------------
    std::vector<Impl> step = {
        {"wfgen", [&] {
           train.forward(X, T);
           train.zero_grad();
           train.backward();
           train.step();
         }},
        {"hand", [&] { hand.train_step(x.data, t.data, split); }},
    };
    st = time_round_robin(step, passes());
    for (std::size_t k = 0; k < step.size(); ++k) report.add({wl_train, step[k].name, th, st[k], train_flops, "GFLOP/s", 1e9, ""});
    report.ratio({wl_train, "wfgen", th, wl_train, "hand", th});

    // --- the parts, each alone (the backward reruns on the last forward's values) ---
    train.forward(X, T);
    hand.forward_loss(x.data, t.data);
    std::vector<Impl> parts = {
        {"wfgen forward (X, T -> loss)", [&] { train.forward(X, T); }},
        {"wfgen zero_grad", [&] { train.zero_grad(); }},
        {"wfgen backward (VM Section::FreshBackward)", [&] { train.vm().run(wfgen::rt::Section::FreshBackward); }},
        {"wfgen step (sgd)", [&] { train.step(); }},
        {"hand forward + loss + dZ2", [&] { hand.forward_loss(x.data, t.data); }},
        {"hand backward", [&] { hand.backward(x.data); }},
        {"hand sgd", [&] { hand.sgd(split); }},
    };
    st = time_round_robin(parts, passes());
    for (std::size_t k = 0; k < parts.size(); ++k) report.add({wl_parts, parts[k].name, th, st[k], 0, "", 1e9, ""});
    report.ratio({wl_parts, parts[0].name, th, wl_parts, parts[4].name, th});
    report.ratio({wl_parts, parts[2].name, th, wl_parts, parts[5].name, th});
    report.ratio({wl_parts, parts[3].name, th, wl_parts, parts[6].name, th});
    if (th != 1) {
      for (const std::string& w : {wl_fwd, wl_train}) {
        report.ratio({w, "wfgen", th, w, "wfgen", 1});
        report.ratio({w, "hand", th, w, "hand", 1});
      }
    }

    // Per-instruction profiles, for the analysis: every section at one
    // thread, the pullback at the other thread counts.
    if (th != 1) {
      train.forward(X, T);
      report.appendix(code_block("mlp_train.vm().profile(Section::FreshBackward, 200) at " + std::to_string(th) +
                                     " threads (the pullback after zero_grad(), rerun without a forward)",
                                 train.vm().profile(wfgen::rt::Section::FreshBackward, 200, 12)));
    } else {
      const int n = 200;
      load_weights(predict, w0);
      predict.forward(X);
      report.appendix(code_block("mlp_predict::profile(" + std::to_string(n) + ") at 1 thread (the forward of " + wl_fwd + ")",
                                 predict.profile(n, 12)));
      train.forward(X, T);
      report.appendix(code_block("mlp_train::profile(" + std::to_string(n) + ") at 1 thread (the forward with the loss)",
                                 train.profile(n, 12)));
      report.appendix(code_block("mlp_train.vm().profile(Section::FreshBackward, " + std::to_string(n) +
                                     ") at 1 thread (the pullback after zero_grad(), rerun without a forward)",
                                 train.vm().profile(wfgen::rt::Section::FreshBackward, n, 12)));
    }
  }
  wfgen::rt::set_num_threads(1);
  openblas_set_num_threads(1);
}

}  // namespace bench

// Fashion-MNIST with a wfgen-generated MLP (784-1024-10, relu).
//
// The hidden layer keeps its seeded random weights; the output layer is
// fitted in closed form (ridge regression on the hidden features, the
// "extreme learning machine" recipe), then the generated model classifies
// the test set. Everything the model computes runs in code wfgen generated
// from mlp.yaml; this file only reads the data, solves the small linear
// system and reports.
//
// Data: Debian's dataset-fashion-mnist (IDX files, gzip) under
// /usr/share/datasets/fashion-mnist, or the folder given as argv[1].
#include <cblas.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fashion_mlp.hpp"
#include "wfgen/runtime.hpp"

namespace {

using wfgen::rt::DType;
using wfgen::rt::Tensor;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Reads a gzip-compressed IDX file: a big-endian header, then the bytes.
std::vector<std::uint8_t> read_idx(const std::string& path, std::vector<std::int64_t>& dims) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path + " (install the Debian package dataset-fashion-mnist)");
  auto read = [&](void* p, unsigned n) {
    if (gzread(f, p, n) != static_cast<int>(n)) {
      gzclose(f);
      throw std::runtime_error(path + " is truncated");
    }
  };
  unsigned char magic[4];
  read(magic, 4);
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08) {
    gzclose(f);
    throw std::runtime_error(path + " is not an IDX file of unsigned bytes");
  }
  dims.clear();
  std::int64_t total = 1;
  for (int d = 0; d < magic[3]; ++d) {
    unsigned char b[4];
    read(b, 4);
    dims.push_back((std::int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3]);
    total *= dims.back();
  }
  std::vector<std::uint8_t> data(static_cast<std::size_t>(total));
  for (std::size_t done = 0; done < data.size();) {
    unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(data.size() - done, 1u << 30));
    read(data.data() + done, chunk);
    done += chunk;
  }
  gzclose(f);
  return data;
}

struct Dataset {
  Tensor images;  // (n 784) f32 in [0, 1]
  std::vector<int> labels;
};

Dataset load(const std::string& dir, const std::string& prefix) {
  std::vector<std::int64_t> di, dl;
  auto pixels = read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", di);
  auto labels = read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", dl);
  if (di.size() != 3 || dl.size() != 1 || di[0] != dl[0]) throw std::runtime_error("unexpected IDX shapes in " + dir);
  Dataset d;
  std::int64_t n = di[0], size = di[1] * di[2];
  d.images = Tensor::empty(DType::f32, {n, size});
  float* x = d.images.data<float>();
  for (std::size_t i = 0; i < pixels.size(); ++i) x[i] = static_cast<float>(pixels[i]) / 255.0f;
  d.labels.assign(labels.begin(), labels.end());
  return d;
}

// A progress bar on a terminal; only the finished line otherwise.
void progress(const char* what, std::int64_t done, std::int64_t total, double secs) {
  static const bool tty = isatty(STDOUT_FILENO) != 0;
  if (!tty && done != total) return;
  int width = 30, filled = static_cast<int>(width * done / std::max<std::int64_t>(total, 1));
  if (tty) std::printf("\r");
  std::printf("%-10s [%s%s] %6lld/%lld  %.1fs", what, std::string(static_cast<std::size_t>(filled), '#').c_str(),
              std::string(static_cast<std::size_t>(width - filled), '.').c_str(), static_cast<long long>(done),
              static_cast<long long>(total), secs);
  std::fflush(stdout);
  if (done == total) std::printf("\n");
}

// Solves (A + lambda I) X = B in place for symmetric positive-definite A
// (n x n) and B (n x m), by Cholesky factorisation. Row-major doubles.
void ridge_solve(std::vector<double>& A, std::vector<double>& B, int n, int m, double lambda) {
  for (int i = 0; i < n; ++i) A[static_cast<std::size_t>(i * n + i)] += lambda;
  for (int j = 0; j < n; ++j) {
    double d = A[static_cast<std::size_t>(j * n + j)];
    for (int k = 0; k < j; ++k) d -= A[static_cast<std::size_t>(j * n + k)] * A[static_cast<std::size_t>(j * n + k)];
    if (d <= 0) throw std::runtime_error("the ridge system is not positive definite");
    double l = std::sqrt(d);
    A[static_cast<std::size_t>(j * n + j)] = l;
    for (int i = j + 1; i < n; ++i) {
      double s = A[static_cast<std::size_t>(i * n + j)];
      for (int k = 0; k < j; ++k) s -= A[static_cast<std::size_t>(i * n + k)] * A[static_cast<std::size_t>(j * n + k)];
      A[static_cast<std::size_t>(i * n + j)] = s / l;
    }
  }
  for (int c = 0; c < m; ++c) {
    for (int i = 0; i < n; ++i) {  // L y = b
      double s = B[static_cast<std::size_t>(i * m + c)];
      for (int k = 0; k < i; ++k) s -= A[static_cast<std::size_t>(i * n + k)] * B[static_cast<std::size_t>(k * m + c)];
      B[static_cast<std::size_t>(i * m + c)] = s / A[static_cast<std::size_t>(i * n + i)];
    }
    for (int i = n - 1; i >= 0; --i) {  // L^T x = y
      double s = B[static_cast<std::size_t>(i * m + c)];
      for (int k = i + 1; k < n; ++k) s -= A[static_cast<std::size_t>(k * n + i)] * B[static_cast<std::size_t>(k * m + c)];
      B[static_cast<std::size_t>(i * m + c)] = s / A[static_cast<std::size_t>(i * n + i)];
    }
  }
}

double accuracy(fashion::fashion_mlp& model, const Dataset& test, std::int64_t batch) {
  std::int64_t n = test.images.dim(0), correct = 0;
  auto start = Clock::now();
  for (std::int64_t i = 0; i < n; i += batch) {
    std::int64_t b = std::min(batch, n - i);
    auto outputs = model.forward(test.images.slice(0, i, i + b));
    const Tensor& scores = outputs[1];
    for (std::int64_t r = 0; r < b; ++r) {
      int best = 0;
      for (int c = 1; c < 10; ++c)
        if (scores.at<float>({r, c}) > scores.at<float>({r, best})) best = c;
      correct += best == test.labels[static_cast<std::size_t>(i + r)];
    }
    progress("test", i + b, n, seconds_since(start));
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    auto t0 = Clock::now();
    Dataset train = load(dir, "train"), test = load(dir, "t10k");
    std::printf("Fashion-MNIST: %lld training and %lld test images from %s (%.2fs)\n\n",
                static_cast<long long>(train.images.dim(0)), static_cast<long long>(test.images.dim(0)), dir.c_str(),
                seconds_since(t0));

    fashion::fashion_mlp model;
    std::cout << model.summary() << "\n";

    // Fit the output layer: ridge regression of one-hot labels on [h, 1].
    const int hidden = 1024, n = hidden + 1, classes = 10;
    const std::int64_t batch = 1000, total = train.images.dim(0);
    std::vector<double> gram(static_cast<std::size_t>(n) * n, 0.0), rhs(static_cast<std::size_t>(n) * classes, 0.0);
    std::vector<float> hb(static_cast<std::size_t>(batch * n)), g(static_cast<std::size_t>(n) * n);
    auto start = Clock::now();
    for (std::int64_t i = 0; i < total; i += batch) {
      std::int64_t b = std::min(batch, total - i);
      Tensor h = model.forward(train.images.slice(0, i, i + b))[0];
      const float* hp = h.data<float>();
      for (std::int64_t r = 0; r < b; ++r) {
        std::memcpy(&hb[static_cast<std::size_t>(r * n)], hp + r * hidden, sizeof(float) * hidden);
        hb[static_cast<std::size_t>(r * n + hidden)] = 1.0f;
        int label = train.labels[static_cast<std::size_t>(i + r)];
        for (int k = 0; k < n; ++k) rhs[static_cast<std::size_t>(k * classes + label)] += hb[static_cast<std::size_t>(r * n + k)];
      }
      cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, n, static_cast<blasint>(b), 1.0f, hb.data(), n, 0.0f, g.data(), n);
      for (std::size_t k = 0; k < g.size(); ++k) gram[k] += g[k];
      progress("features", i + b, total, seconds_since(start));
    }
    for (int r = 0; r < n; ++r)  // syrk filled the lower triangle
      for (int c = r + 1; c < n; ++c) gram[static_cast<std::size_t>(r * n + c)] = gram[static_cast<std::size_t>(c * n + r)];
    auto solve_start = Clock::now();
    ridge_solve(gram, rhs, n, classes, 10.0);
    std::printf("readout    solved %dx%d ridge system in %.2fs\n", n, n, seconds_since(solve_start));
    Tensor W2 = model.parameter("W2"), b2 = model.parameter("b2");
    for (int k = 0; k < hidden; ++k)
      for (int c = 0; c < classes; ++c) W2.at<float>({k, c}) = static_cast<float>(rhs[static_cast<std::size_t>(k * classes + c)]);
    for (int c = 0; c < classes; ++c) b2.at<float>({c}) = static_cast<float>(rhs[static_cast<std::size_t>(hidden * classes + c)]);
    std::printf("training   %.2fs in all\n\n", seconds_since(start));

    // Classify the test set with two batch sizes (the batch dim is symbolic).
    double acc = accuracy(model, test, 500);
    double acc64 = accuracy(model, test, 64);
    std::printf("test accuracy: %.4f (batch 500), %.4f (batch 64)\n\n", acc, acc64);

    // Parameters survive a save/load round trip into a fresh instance.
    std::string path = (std::filesystem::temp_directory_path() / "fashion_mlp.wfparams").string();
    model.save_parameters(path);
    fashion::fashion_mlp reloaded;
    reloaded.load_parameters(path);
    std::printf("reloaded from %s: test accuracy %.4f\n\n", path.c_str(), accuracy(reloaded, test, 1000));

    std::cout << model.disassemble() << "\n" << model.profile(20, 5);
    return acc >= 0.80 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

// Classifies the Fashion-MNIST test images with a wfgen-generated MLP.
//
//   mlp_inference [--params FILE] [--data DIR] [--limit N] [--save FILE]
//
// The weights come from FILE (written by save_parameters(), e.g. by a
// training run) or, without --params, from the seeded initialisation of the
// build in mlp.yaml: then the accuracy is chance level (about 10%); the
// point is the workflow. --save writes the parameters the model holds.
// Data: Debian's dataset-fashion-mnist (IDX files, gzip or not) under
// /usr/share/datasets/fashion-mnist. gzip files are read through `gzip -dc`
// so the binary needs no zlib (only the C++ standard library and OpenBLAS).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "mlp_classifier.hpp"
#include "wfgen/runtime.hpp"

namespace {

using wfgen::rt::DType;
using wfgen::rt::Tensor;

// Reads an IDX file of unsigned bytes (a big-endian header, then the data);
// `path.gz` is decompressed by gzip.
std::vector<std::uint8_t> read_idx(const std::string& path, std::vector<std::int64_t>& dims) {
  const bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (!std::filesystem::exists(path)) throw std::runtime_error("cannot open " + path + " (install dataset-fashion-mnist)");
  std::string quoted = "'";
  for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  FILE* f = gz ? popen(("gzip -dc " + quoted).c_str(), "r") : std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  auto close = [gz](FILE* p) { return gz ? pclose(p) : std::fclose(p); };
  std::unique_ptr<FILE, decltype(close)> file(f, close);
  auto read = [&](void* p, std::size_t n) {
    if (std::fread(p, 1, n, f) != n) throw std::runtime_error(path + " is truncated");
  };
  unsigned char magic[4];
  read(magic, 4);
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08) throw std::runtime_error(path + " is not an IDX file of unsigned bytes");
  dims.clear();
  std::int64_t total = 1;
  for (int d = 0; d < magic[3]; ++d) {
    unsigned char b[4];
    read(b, 4);
    dims.push_back((std::int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3]);
    total *= dims.back();
  }
  std::vector<std::uint8_t> data(static_cast<std::size_t>(total));
  read(data.data(), data.size());
  return data;
}

// "DIR/NAME.gz" when it exists, else "DIR/NAME".
std::string data_file(const std::string& dir, const std::string& name) {
  std::string gz = dir + "/" + name + ".gz";
  return std::filesystem::exists(gz) ? gz : dir + "/" + name;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string params, save, dir = "/usr/share/datasets/fashion-mnist";
    std::int64_t limit = -1;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--params") params = value();
      else if (a == "--save") save = value();
      else if (a == "--data") dir = value();
      else if (a == "--limit") limit = std::stoll(value());
      else throw std::runtime_error("unknown argument " + a + " (usage: mlp_inference [--params FILE] [--data DIR] [--limit N] [--save FILE])");
    }

    std::vector<std::int64_t> di, dl;
    auto pixels = read_idx(data_file(dir, "t10k-images-idx3-ubyte"), di);
    auto labels = read_idx(data_file(dir, "t10k-labels-idx1-ubyte"), dl);
    if (di.size() != 3 || dl.size() != 1 || di[0] != dl[0] || di[1] * di[2] != 784)
      throw std::runtime_error("unexpected IDX shapes in " + dir);
    std::int64_t n = limit >= 0 && limit < di[0] ? limit : di[0];
    Tensor images = Tensor::empty(DType::f32, {n, 784});
    float* x = images.data<float>();
    for (std::int64_t i = 0; i < n * 784; ++i) x[i] = static_cast<float>(pixels[static_cast<std::size_t>(i)]) / 255.0f;

    mlp::mlp_classifier model;
    if (!params.empty()) model.load_parameters(params);
    std::cout << model.summary() << "\n";
    std::cout << "parameters: " << (params.empty() ? "seeded initialisation (no --params)" : params) << "\n";

    const std::int64_t batch = 256;
    std::int64_t correct = 0;
    for (std::int64_t i = 0; i < n; i += batch) {
      std::int64_t b = std::min(batch, n - i);
      Tensor scores = model.forward(images.slice(0, i, i + b))[0];
      for (std::int64_t r = 0; r < b; ++r) {
        int best = 0;
        for (int c = 1; c < 10; ++c)
          if (scores.at<float>({r, c}) > scores.at<float>({r, best})) best = c;
        correct += best == labels[static_cast<std::size_t>(i + r)];
      }
    }
    std::printf("classified %lld test images: accuracy %.4f\n", static_cast<long long>(n),
                n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0);
    if (!save.empty()) {
      model.save_parameters(save);
      std::printf("saved the parameters to %s\n", save.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

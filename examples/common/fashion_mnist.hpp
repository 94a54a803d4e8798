// Fashion-MNIST data for the examples: Debian's dataset-fashion-mnist (IDX
// files, gzip or not) under /usr/share/datasets/fashion-mnist. gzip files
// are read through `gzip -dc`, so the example binaries need no zlib (only
// the C++ standard library, and OpenBLAS where a build chooses it).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "wfgen/runtime.hpp"

namespace fashion_mnist {

// Reads an IDX file of unsigned bytes (a big-endian header, then the data);
// `path.gz` is decompressed by gzip.
inline std::vector<std::uint8_t> read_idx(const std::string& path, std::vector<std::int64_t>& dims) {
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
inline std::string data_file(const std::string& dir, const std::string& name) {
  std::string gz = dir + "/" + name + ".gz";
  return std::filesystem::exists(gz) ? gz : dir + "/" + name;
}

struct Dataset {
  wfgen::rt::Tensor images;  // (n 784) f32 in [0, 1]
  std::vector<int> labels;
};

// `prefix` is "train" or "t10k"; at most `limit` images when limit >= 0.
inline Dataset load(const std::string& dir, const std::string& prefix, std::int64_t limit = -1) {
  std::vector<std::int64_t> di, dl;
  auto pixels = read_idx(data_file(dir, prefix + "-images-idx3-ubyte"), di);
  auto labels = read_idx(data_file(dir, prefix + "-labels-idx1-ubyte"), dl);
  if (di.size() != 3 || dl.size() != 1 || di[0] != dl[0] || di[1] * di[2] != 784)
    throw std::runtime_error("unexpected IDX shapes in " + dir);
  const std::int64_t n = limit >= 0 && limit < di[0] ? limit : di[0];
  Dataset d;
  d.images = wfgen::rt::Tensor::empty(wfgen::rt::DType::f32, {n, 784});
  float* x = d.images.data<float>();
  for (std::int64_t i = 0; i < n * 784; ++i) x[i] = static_cast<float>(pixels[static_cast<std::size_t>(i)]) / 255.0f;
  d.labels.assign(labels.begin(), labels.begin() + n);
  return d;
}

}  // namespace fashion_mnist

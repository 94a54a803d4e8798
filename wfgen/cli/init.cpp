// `wfgen init DIR`: a minimal project that builds and runs as is. The files
// are the ones docs/getting-started.md walks through; tests/cmake builds
// them against the installed package, so they stay working.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "wfgen/cli/commands.hpp"

namespace wfgen::cli {

namespace {

// Replaces every @NAME@ (the project name, a C++ identifier) in `text`.
std::string fill(std::string text, const std::string& name) {
  for (std::size_t at; (at = text.find("@NAME@")) != std::string::npos;) text.replace(at, 6, name);
  return text;
}

const char* kSpec = R"wf(# A first wfgen project (written by `wfgen init`): a node of its own and a
# small model that uses it. `wfgen check model.yaml` validates this file;
# CMakeLists.txt generates C++ from it at build time.
nodes:
  - name: Swish
    args: {beta: {type: float, default: 1.0}}
    where: "X[~] OUT[~] -> OUT[~]"
    doc: "OUT <- X * sigmoid(beta * X)"
impls:
  - {node: Swish, device: cpu, dtypes: [f32, f64], ranks: "1..2", elementwise: "X / (1 + exp(-beta * X))"}

models:
  - name: TinyMLP
    args:
      inputs: {type: int, doc: "features per sample"}
      hidden: {type: int, doc: "hidden units"}
      outputs: {type: int, doc: "output scores"}
    params:
      W1: {shape: [inputs, hidden], init: {normal: [0.0, 0.5]}}
      b1: {shape: [hidden], init: zeros}
      W2: {shape: [hidden, outputs], init: {normal: [0.0, 0.5]}}
      b2: {shape: [outputs], init: zeros}
    where: "X[batch inputs] -> Y[batch outputs]"
    call: |
      h = Swish(X @ W1 + b1)
      return h @ W2 + b2

builds:
  - {name: @NAME@_mlp, model: TinyMLP, args: {inputs: 4, hidden: 8, outputs: 3}, dtype: f32, seed: 1}
)wf";

const char* kCMake = R"wf(# Written by `wfgen init`. Configure against an installed wfgen:
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=<wfgen prefix> && cmake --build build && ./build/@NAME@
cmake_minimum_required(VERSION 3.25)
project(@NAME@ LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)

find_package(wfgen CONFIG REQUIRED)

# Runs `wfgen gen model.yaml` at build time and compiles what it writes
# (the class @NAME@_mlp and the kernels it calls) into a static library.
wfgen_add_library(@NAME@_model SPECS model.yaml NAMESPACE @NAME@)

add_executable(@NAME@ main.cpp)
target_link_libraries(@NAME@ PRIVATE @NAME@_model)
)wf";

const char* kMain = R"wf(// Written by `wfgen init`: runs the generated model on a small batch.
#include <iostream>

#include "@NAME@_mlp.hpp"
#include "wfgen/runtime.hpp"

int main() {
  using wfgen::rt::Tensor;
  @NAME@::@NAME@_mlp model;  // parameters initialised with the build's seed
  std::cout << model.summary() << "\n";

  Tensor x = Tensor::from_data<float>({2, 4}, {0.1f, 0.2f, 0.3f, 0.4f, -1.0f, 0.0f, 1.0f, 2.0f});
  Tensor y = model.forward(x)[0];
  std::cout << "Y = " << y << "\n";
  return 0;
}
)wf";

const char* kGitignore = "/build/\n";

}  // namespace

int init(const InitOptions& o, Streams io) {
  namespace fs = std::filesystem;
  std::string name = o.name;
  if (name.empty()) {
    // From the folder name, as a C++ identifier: "my-project" -> "my_project".
    std::string base = fs::absolute(o.dir).lexically_normal().filename().string();
    if (base.empty()) base = fs::absolute(o.dir).lexically_normal().parent_path().filename().string();
    for (char c : base) name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "project_" + name;
    if (name.rfind("wf_", 0) == 0) name = "my" + name;  // wf_ is reserved for generated names
  } else {
    bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) && name.rfind("wf_", 0) != 0;
    for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ok) {
      io.err << "error: --name '" << name << "' is not a C++ identifier (letters, digits, '_'; not starting with a digit or wf_)\n";
      return kBadInput;
    }
  }
  const std::vector<std::pair<std::string, const char*>> files = {
      {"model.yaml", kSpec}, {"CMakeLists.txt", kCMake}, {"main.cpp", kMain}, {".gitignore", kGitignore}};
  // Refuse before writing anything: never half a project over someone's files.
  std::vector<std::string> existing;
  for (const auto& [rel, text] : files)
    if (fs::exists(o.dir / rel)) existing.push_back((o.dir / rel).string());
  if (!existing.empty()) {
    for (const auto& e : existing) io.err << "error: " << e << " exists already; wfgen init does not overwrite files\n";
    return kFailed;
  }
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (ec) {
    io.err << "error: cannot create " << o.dir.string() << ": " << ec.message() << "\n";
    return kBadInput;
  }
  for (const auto& [rel, text] : files) {
    std::ofstream out(o.dir / rel, std::ios::binary);
    out << fill(text, name);
    out.close();
    if (!out) {
      io.err << "error: cannot write " << (o.dir / rel).string() << "\n";
      return kBadInput;
    }
    if (!o.quiet) io.err << "wrote " << (o.dir / rel).string() << "\n";
  }
  if (!o.quiet) {
    io.err << "next: cmake -S " << o.dir.string() << " -B " << (o.dir / "build").string()
           << " -DCMAKE_PREFIX_PATH=<wfgen prefix> && cmake --build " << (o.dir / "build").string() << " && "
           << (o.dir / "build" / name).string() << "\n";
  }
  return kOk;
}

}  // namespace wfgen::cli

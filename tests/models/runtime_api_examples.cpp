// The code examples of docs/runtime-api.md, compiled and run here against
// the example models of models.yaml (the page calls their namespace
// my_models). Each example is the code between `// [example: NAME]` and
// `// [end example]`; the last test checks that the page shows every one of
// them verbatim, after `<!-- example: NAME -->`, and has no ```cpp block
// that is not one of them. Checks of what an example computed follow its
// end marker, outside what the page shows.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "mlp.hpp"
#include "regressor_train.hpp"
#include "res_predict.hpp"
#include "res_train.hpp"
#include "softmax_model.hpp"
#include "wfgen/runtime.hpp"
#include "wfgen/vm.hpp"

namespace my_models = wfgen_models;
using namespace wfgen::rt;

TEST_CASE("runtime-api.md: tensors") {
  // [example: tensors]
  Tensor a = Tensor::from_data<float>({2, 3}, {0, 1, 2, 3, 4, 5});  // owned, row-major
  Tensor z = Tensor::zeros(DType::f64, {4});                        // zero-filled
  Tensor s = Tensor::scalar(2.5f);                                  // rank 0, one element
  float last = a.at<float>({1, 2});     // 5: bounds-checked, one index per axis
  float* first = a.data<float>();       // a.data<double>() would throw DTypeMismatch
  Tensor t = a.T();                     // a view: shape (3 2), strides (1 3), a's storage
  Tensor row = a.slice(0, 1, 2);        // the second row, shape (1 3)
  Tensor b = a;                         // a second handle to the same storage
  b.at<float>({0, 0}) = 7;              // a sees it too
  Tensor c = a.clone();                 // a copy with its own storage
  c.fill(0.0);                          // a does not change
  std::vector<float> mine(6, 1.0f);
  Tensor borrowed = Tensor::borrow(mine.data(), {3, 2});  // no copy: keep `mine` alive while it is used
  std::cout << t << "\n";               // {CPUTENSOR[float] :shape (3 2) ...}
  // [end example]
  CHECK(z.numel() == 4);
  CHECK(s.item<float>() == 2.5f);
  CHECK(last == 5.0f);
  CHECK(first[0] == 7.0f);
  CHECK(t.strides() == Shape({1, 3}));
  CHECK(row.at<float>({0, 2}) == 5.0f);
  CHECK(a.at<float>({0, 0}) == 7.0f);
  CHECK(c.at<float>({1, 1}) == 0.0f);
  CHECK(borrowed.raw_data() == mine.data());
  CHECK_THROWS_AS(a.data<double>(), Error);
}

TEST_CASE("runtime-api.md: forward and forward_into") {
  // [example: forward]
  my_models::mlp model;                            // parameters initialised with the build's seed
  Tensor X = Tensor::zeros(DType::f32, {4, 20});   // X[batch inputs] with batch = 4
  Tensor T = Tensor::zeros(DType::f32, {4, 5});
  auto [y, l] = model.forward(X, T);               // logits (4 5), loss (1): the model's own, until its next call
  std::vector<Tensor> out = model.forward(X, T);   // the same results as a std::vector

  Tensor logits, loss;                             // undefined: the first call allocates them
  for (int batch = 0; batch < 100; ++batch) {
    X.fill(0.01 * batch);                          // the next batch, in the same buffers
    model.forward_into(logits, loss, X, T);        // after the first call: no allocation, no binding
  }
  // [end example]
  REQUIRE(out.size() == 2);
  CHECK(out[0].shape() == Shape({4, 5}));
  CHECK(y.shape() == Shape({4, 5}));
  CHECK(l.shape() == Shape({1}));
  CHECK(logits.shape() == Shape({4, 5}));
  CHECK(loss.shape() == Shape({1}));
  const std::vector<Tensor> again = model.forward(X, T);
  CHECK(again[1].item<float>() == loss.item<float>());
}

TEST_CASE("runtime-api.md: run_into and set_input") {
  my_models::mlp model;
  Tensor X = Tensor::zeros(DType::f32, {4, 20});
  Tensor T = Tensor::zeros(DType::f32, {4, 5});
  // [example: run_into]
  model.set_input("X", X);
  model.set_input("T", T);
  std::vector<Tensor> outputs(2);                  // one per output, in the where line's order
  model.run_into(outputs);                         // outputs[0]: logits, outputs[1]: loss
  // [end example]
  CHECK(outputs[0].shape() == Shape({4, 5}));
  CHECK(outputs[1].shape() == Shape({1}));
}

TEST_CASE("runtime-api.md: error codes") {
  my_models::mlp model;
  Tensor T = Tensor::zeros(DType::f32, {4, 5});
  Tensor logits, loss;
  // [example: status]
  Tensor wrong = Tensor::zeros(DType::f32, {4, 21});  // 21 features, the model takes 20
  Status st = model.try_forward_into(logits, loss, wrong, T);
  std::string text = st.to_string();                 // "shape mismatch: [wfgen] Shape-Error: ..."
  bool shape_error = !st.ok() && st.code() == ErrorCode::ShapeMismatch;
  ErrorCode thrown{};
  try {
    model.forward(wrong, T);                         // the throwing form
  } catch (const Error& e) {
    thrown = e.code();                               // the same code and message
  }
  // [end example]
  CHECK(shape_error);
  CHECK(thrown == ErrorCode::ShapeMismatch);
  CHECK(text.rfind("shape mismatch: [wfgen] Shape-Error", 0) == 0);
  CHECK(!logits.defined());
}

TEST_CASE("runtime-api.md: training") {
  // [example: training]
  my_models::regressor_train model;                // X[batch 4] T[batch 1] -> loss[1], SGD
  Tensor X = Tensor::empty(DType::f32, {32, 4});
  Tensor T = Tensor::empty(DType::f32, {32, 1});
  Rng rng(1);
  fill_uniform(X, -1, 1, rng);
  fill_uniform(T, -1, 1, rng);
  Tensor loss;
  for (int epoch = 0; epoch < 200; ++epoch) {
    model.forward_into(loss, X, T);                // the forward pass keeps what the pullback reads
    model.zero_grad();
    model.backward();                              // adds d loss / d parameter into every gradient
    model.step();                                  // one SGD step with lr 0.05 (set_learning_rate)
  }
  Tensor gW = model.grad("linear_0.W");            // a view of the model's gradient buffer
  // [end example]
  CHECK(gW.shape() == Shape({4, 8}));
  CHECK(model.step_count() == 200);
  my_models::regressor_train fresh;
  Tensor loss0;
  fresh.forward_into(loss0, X, T);
  CHECK(loss.item<float>() < loss0.item<float>());

  // [example: training-status]
  Status bad = model.try_backward();               // no forward pass since the last backward()
  // bad.code() == ErrorCode::InvalidArgument: "regressor_train::backward() needs a forward pass first ..."
  Status stepped = model.try_forward_into(loss, X, T);
  if (stepped.ok()) stepped = model.try_zero_grad();
  if (stepped.ok()) stepped = model.try_backward();
  if (stepped.ok()) stepped = model.try_step();
  // [end example]
  CHECK(stepped.ok());
  CHECK(bad.code() == ErrorCode::InvalidArgument);
  CHECK(bad.message().find("needs a forward pass first") != std::string::npos);
  CHECK(model.step_count() == 201);
}

TEST_CASE("runtime-api.md: parameters") {
  const std::string path = (std::filesystem::temp_directory_path() / ("runtime_api_" + std::to_string(::getpid()) + ".wfparams")).string();
  // [example: parameters]
  my_models::mlp model;
  Rng rng(7);
  for (auto& [name, tensor] : model.parameters()) {   // "linear_0.W", "linear_0.b", ...
    fill_normal(tensor, 0.0, 0.1, rng);             // views of the model's storage: this changes the model
  }
  model.save_parameters(path);
  my_models::mlp other;
  other.load_parameters(path);                      // checks names, dtypes, shapes and the checksum
  // [end example]
  CHECK(std::memcmp(other.parameter("linear_1.W").raw_data(), model.parameter("linear_1.W").raw_data(),
                    model.parameter("linear_1.W").nbytes()) == 0);
  std::filesystem::remove(path);
}

TEST_CASE("runtime-api.md: train, then deploy") {
  const std::string path = (std::filesystem::temp_directory_path() / ("runtime_api_deploy_" + std::to_string(::getpid()) + ".wfparams")).string();
  Tensor X = Tensor::empty(DType::f32, {8, 6}), T = Tensor::zeros(DType::f32, {8, 3});
  Rng rng(3);
  fill_uniform(X, -1, 1, rng);
  for (std::int64_t r = 0; r < 8; ++r) T.at<float>({r, r % 3}) = 1.0f;
  // [example: deploy]
  my_models::res_train train;                      // cross_entropy(ResClassifier(X, 6, 3), T), Adam
  my_models::res_predict predict;                  // ResClassifier alone: X[batch 6] -> logits[batch 3]
  for (int step = 0; step < 30; ++step) {
    train.forward(X, T);
    train.zero_grad();
    train.backward();
    train.step();
  }
  train.save_parameters(path);                     // "ResClassifier_0/linear_0.W", "ResClassifier_0.scale", ...
  predict.load_parameters(path);                   // into "linear_0.W", "scale", ...: matched by name
  Tensor logits = predict.forward(X)[0];
  my_models::res_predict copied;
  copied.copy_parameters_from(train);              // the same in memory, without a file
  // [end example]
  CHECK(std::memcmp(predict.parameter("linear_1.W").raw_data(), train.parameter("ResClassifier_0/linear_1.W").raw_data(),
                    predict.parameter("linear_1.W").nbytes()) == 0);
  Tensor again = copied.forward(X)[0];
  CHECK(std::memcmp(again.raw_data(), logits.raw_data(), logits.nbytes()) == 0);
  std::filesystem::remove(path);
}

TEST_CASE("runtime-api.md: threads and the VM") {
  my_models::softmax_model model;
  Tensor X = Tensor::zeros(DType::f32, {10, 10});
  // [example: vm]
  set_num_threads(1);                              // kernels of every model run on one thread
  Tensor Y;
  model.forward_into(Y, X);
  std::string listing = model.disassemble();       // the instruction sequence, as bound
  std::string times = model.profile(100, 3);       // per-instruction times over 100 runs
  model.vm().set_opt_level(OptLevel::Fast);        // no run-time checks (runtime-vm.md)
  // [end example]
  CHECK(listing.find("disassemble-waffe2-ir") == 0);
  CHECK(times.find("[Sorted by topK]") != std::string::npos);
  CHECK(model.vm().opt_level() == OptLevel::Fast);
  set_num_threads(2);
}

// --- the page shows each example verbatim --------------------------------------------

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Example name -> its code, without the indentation of the test body.
std::map<std::string, std::string> examples_in_source(const std::vector<std::string>& lines) {
  const std::string open = "// [example: ", close = "// [end example]";
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t at = lines[i].find_first_not_of(' ');
    if (at == std::string::npos || lines[i].compare(at, open.size(), open) != 0) continue;  // a marker starts its line
    const std::string name = lines[i].substr(at + open.size(), lines[i].find(']', at) - at - open.size());
    std::string code;
    for (++i; i < lines.size() && lines[i].find(close) == std::string::npos; ++i) {
      code += (lines[i].size() >= at ? lines[i].substr(at) : std::string()) + "\n";
    }
    out[name] = code;
  }
  return out;
}

}  // namespace

TEST_CASE("docs/runtime-api.md shows every example of runtime_api_examples.cpp verbatim") {
  const auto source = examples_in_source(lines_of(read_text(std::filesystem::path(WFGEN_TEST_DATA) / "runtime_api_examples.cpp")));
  const std::vector<std::string> page = lines_of(read_text(std::filesystem::path(WFGEN_SOURCE_DIR) / "docs" / "runtime-api.md"));
  REQUIRE(source.size() >= 8);
  std::map<std::string, std::string> shown;
  for (std::size_t i = 0; i < page.size(); ++i) {
    if (page[i] != "```cpp") continue;
    INFO("the ```cpp block at docs/runtime-api.md:" << i + 1);
    const std::string marker = i > 0 ? page[i - 1] : "";
    const std::string open = "<!-- example: ";
    REQUIRE(marker.rfind(open, 0) == 0);  // every C++ block of the page is a tested example
    const std::string name = marker.substr(open.size(), marker.find(" -->") - open.size());
    std::string code;
    for (++i; i < page.size() && page[i] != "```"; ++i) code += page[i] + "\n";
    shown[name] = code;
  }
  for (const auto& [name, code] : source) {
    INFO("example " << name);
    REQUIRE(shown.count(name) == 1);
    CHECK(shown[name] == code);
  }
  CHECK(shown.size() == source.size());
}

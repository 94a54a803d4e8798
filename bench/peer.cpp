// The wfgen side of the PyTorch peer section (issue 38): bench/torch_peer.py
// starts this program, and drives it over stdin/stdout so that wfgen's and
// torch's passes of one workload alternate in the same run, each in its own
// process (neither runs its threads beside the other's).
//
//   wfgen_peer DIR        (DIR: inputs, parameter files and outputs, below)
//
// Workloads (the classes wfgen generates; every shape fixed here):
//   tinylm_train_b16               lm_train of examples/tiny-lm/tiny_lm.yaml: forward(ids, targets),
//                                  zero_grad(), backward(), step() (AdamW lr 0.003, wd 0.01), ids [16 64] i64
//   gpt_decoder_infer              lm_logits of the same file: forward(ids), ids [16 64] i64
//   cnn_train_b64                  cnn_train of examples/cnn-training/cnn.yaml (Adam lr 0.001), X [64 1 28 28], T [64 10]
//   mlp_train_b64                  mlp_train of bench/specs/mlp.yaml (SGD lr 0.01), X [64 784], T [64 10]
//   resnet18_infer_1x3x224x224     torchvision's resnet18, exported to ONNX and imported by `wfgen import`
//   mobilenetv2_infer_1x3x224x224  torchvision's mobilenet_v2, the same way
//
// Commands, one per line; each answers one line ("ok ..." or "error ..."):
//   init W          the model's parameters: the built-in ones saved to DIR/W.init.wfparams
//                   (torch loads them), or the imported ones loaded from DIR/W.wfparams
//                   (written by `wfgen import`, torch's own weights)
//   check W         reads the inputs DIR/W.in<k>.bin (raw little-endian); a training step:
//                   writes the loss before and after one step (DIR/W.wfgen.losses, f32) and
//                   the gradients of the first (DIR/W.wfgen.grads.wfparams); inference: the
//                   output (DIR/W.wfgen.out, f32)
//   threads N       wfgen's pool and OpenBLAS get N threads
//   settle          waits until this process's other threads are idle (before a torch pass)
//   time W N        once the process's other threads are idle, runs N calls (a whole training
//                   step, or a forward) and answers the seconds
//   profile W N     the VM's per-instruction profile of N runs to DIR/W.profile.txt (the
//                   forward; for training also the pullback and the optimizer step)
//   quit
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cnn/cnn_train.hpp"
#include "harness.hpp"
#include "lm/lm_logits.hpp"
#include "lm/lm_train.hpp"
#include "mlp/mlp_train.hpp"
#include "mobilenetv2/mobilenetv2.hpp"
#include "resnet18/resnet18.hpp"
#include "wfgen/model_support.hpp"
#include "wfgen/runtime.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace {

using wfgen::rt::DType;
using wfgen::rt::Tensor;

// One input: its dtype and shape (the file holds exactly numel elements).
struct InputSpec {
  DType dtype;
  wfgen::rt::Shape shape;
};

Tensor read_input(const std::string& path, const InputSpec& spec) {
  Tensor t = Tensor::empty(spec.dtype, spec.shape);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot read " + path);
  const auto size = static_cast<std::int64_t>(in.tellg());
  if (size != static_cast<std::int64_t>(t.nbytes()))
    throw std::runtime_error(path + " has " + std::to_string(size) + " bytes, expected " + std::to_string(t.nbytes()));
  in.seekg(0);
  in.read(static_cast<char*>(t.raw_data()), size);
  return t;
}

void write_floats(const std::string& path, const float* p, std::int64_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// A workload as the driver sees it; the model lives in the closures.
struct Workload {
  std::vector<InputSpec> inputs;
  std::vector<Tensor> bound;  // the inputs read by check
  std::function<void(const std::string& dir, const std::string& name)> init;
  std::function<void(const std::string& dir, const std::string& name, const std::vector<Tensor>&)> check;
  std::function<void(const std::vector<Tensor>&)> call;
  // The VM's per-instruction profile (docs/runtime-vm.md) of n runs: the
  // forward, and for a training build the pullback and the optimizer step.
  std::function<std::string(const std::vector<Tensor>&, int n)> profile;
};

// The profile of a step's parts; the optimizer step is one call of the
// class's step() (it runs outside the VM's sections), timed n times.
template <class Model>
std::string profile_training(Model& m, const std::vector<Tensor>& in, int n) {
  m.forward(in[0], in[1]);
  std::string out = "forward (with the loss):\n" + m.profile(n, 15);
  // The pullback a step runs: the one after zero_grad() (Section::FreshBackward,
  // docs/autodiff.md), which writes the gradients a GEMM alone makes.
  out += "\nbackward (the pullback after zero_grad(), rerun without a forward):\n" +
         m.vm().profile(wfgen::rt::Section::FreshBackward, n, 15);
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < n; ++k) m.step();
  out += "\nstep() (the optimizer over every parameter): " +
         std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / n) + " s per call\n";
  return out;
}

// A training build: forward(inputs...) -> loss, then zero_grad, backward, step.
template <class Model>
Workload training(std::vector<InputSpec> inputs) {
  auto m = std::make_shared<Model>();
  Workload w;
  w.inputs = std::move(inputs);
  auto forward = [m](const std::vector<Tensor>& in) { return in.size() == 2 ? m->forward(in[0], in[1])[0].template data<float>()[0] : 0.0f; };
  w.init = [m](const std::string& dir, const std::string& name) { m->save_parameters(dir + "/" + name + ".init.wfparams"); };
  w.check = [m, forward](const std::string& dir, const std::string& name, const std::vector<Tensor>& in) {
    float losses[2];
    losses[0] = forward(in);
    m->zero_grad();
    m->backward();
    std::vector<std::string> names;
    std::vector<Tensor> grads;
    for (auto& [n, g] : m->gradients()) {
      names.push_back(n);
      grads.push_back(g);
    }
    wfgen::rt::save_parameters(dir + "/" + name + ".wfgen.grads.wfparams", names, grads);
    m->step();
    losses[1] = forward(in);
    write_floats(dir + "/" + name + ".wfgen.losses", losses, 2);
  };
  w.call = [m, forward](const std::vector<Tensor>& in) {
    forward(in);
    m->zero_grad();
    m->backward();
    m->step();
  };
  w.profile = [m](const std::vector<Tensor>& in, int n) { return profile_training(*m, in, n); };
  return w;
}

// An inference build of one input and one output; `imported`: its
// parameters come from `wfgen import`'s file (torch's weights).
template <class Model>
Workload inference(InputSpec input, bool imported) {
  auto m = std::make_shared<Model>();
  Workload w;
  w.inputs = {std::move(input)};
  w.init = [m, imported](const std::string& dir, const std::string& name) {
    if (imported) m->load_parameters(dir + "/" + name + ".wfparams");
    else m->save_parameters(dir + "/" + name + ".init.wfparams");
  };
  w.check = [m](const std::string& dir, const std::string& name, const std::vector<Tensor>& in) {
    const Tensor y = m->forward(in[0])[0].contiguous();
    write_floats(dir + "/" + name + ".wfgen.out", y.data<float>(), y.numel());
  };
  w.call = [m](const std::vector<Tensor>& in) { m->forward(in[0]); };
  w.profile = [m](const std::vector<Tensor>& in, int n) {
    m->forward(in[0]);
    return m->profile(n, 15);
  };
  return w;
}

std::map<std::string, Workload> workloads() {
  const InputSpec ids{DType::i64, {16, 64}};
  const InputSpec image{DType::f32, {1, 3, 224, 224}};
  std::map<std::string, Workload> w;
  w["tinylm_train_b16"] = training<peer_lm::lm_train>({ids, ids});
  w["gpt_decoder_infer"] = inference<peer_lm::lm_logits>(ids, false);
  w["cnn_train_b64"] = training<bench_cnn::cnn_train>({{DType::f32, {64, 1, 28, 28}}, {DType::f32, {64, 10}}});
  w["mlp_train_b64"] = training<bench_mlp::mlp_train>({{DType::f32, {64, 784}}, {DType::f32, {64, 10}}});
  w["resnet18_infer_1x3x224x224"] = inference<peer_resnet18::resnet18>(image, true);
  w["mobilenetv2_infer_1x3x224x224"] = inference<peer_mobilenetv2::mobilenetv2>(image, true);
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: wfgen_peer DIR (commands on stdin; bench/torch_peer.py drives it)\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::map<std::string, Workload> all = workloads();
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd, name;
    in >> cmd;
    if (cmd == "quit") break;
    try {
      if (cmd == "threads") {
        int n = 1;
        in >> n;
        wfgen::rt::set_num_threads(n);
        openblas_set_num_threads(n);
        std::cout << "ok" << std::endl;
        continue;
      }
      if (cmd == "settle") {
        bench::settle_threads();
        std::cout << "ok" << std::endl;
        continue;
      }
      in >> name;
      auto it = all.find(name);
      if (it == all.end()) throw std::runtime_error("unknown workload '" + name + "'");
      Workload& w = it->second;
      if (cmd == "init") {
        w.init(dir, name);
        std::cout << "ok" << std::endl;
      } else if (cmd == "check") {
        w.bound.clear();
        for (std::size_t k = 0; k < w.inputs.size(); ++k)
          w.bound.push_back(read_input(dir + "/" + name + ".in" + std::to_string(k) + ".bin", w.inputs[k]));
        w.check(dir, name, w.bound);
        std::cout << "ok" << std::endl;
      } else if (cmd == "time") {
        long n = 1;
        in >> n;
        if (w.bound.empty()) throw std::runtime_error("time " + name + " before check " + name);
        bench::settle_threads();  // the previous pass's threads (OpenBLAS's spin) idle first
        const auto start = std::chrono::steady_clock::now();
        for (long k = 0; k < n; ++k) w.call(w.bound);
        std::cout << "ok " << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << std::endl;
      } else if (cmd == "profile") {
        int n = 20;
        in >> n;
        if (w.bound.empty()) throw std::runtime_error("profile " + name + " before check " + name);
        std::ofstream out(dir + "/" + name + ".profile.txt", std::ios::trunc);
        out << w.profile(w.bound, n);
        if (!out) throw std::runtime_error("cannot write " + dir + "/" + name + ".profile.txt");
        std::cout << "ok" << std::endl;
      } else {
        throw std::runtime_error("unknown command '" + cmd + "'");
      }
    } catch (const std::exception& e) {
      std::cout << "error " << e.what() << std::endl;
    }
  }
  return 0;
}

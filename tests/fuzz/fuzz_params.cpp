// Fuzz target: the runtime's parameter-file loader (rt::load_parameters).
//
// The input is written to a file and loaded into a fixed set of parameters
// (f32 W[3 4], f32 b[4], i64 idx[2], u8 mask[]) that were filled with a
// known pattern. rt::Error with ErrorCode::BadParameterFile is the expected
// way to refuse a file, and then no parameter may have changed; anything
// else escaping is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "wfgen/model_support.hpp"
#include "wfgen/runtime.hpp"

namespace {

using namespace wfgen::rt;

struct Params {
  std::vector<std::string> names{"W", "b", "idx", "mask"};
  std::vector<Tensor> tensors{Tensor::empty(DType::f32, {3, 4}), Tensor::empty(DType::f32, {4}),
                              Tensor::empty(DType::i64, {2}), Tensor::empty(DType::u8, {})};
  Params() {
    for (auto& t : tensors) std::memset(t.raw_data(), 0x5a, static_cast<std::size_t>(t.nbytes()));
  }
  bool unchanged() const {
    for (const auto& t : tensors) {
      const auto* p = static_cast<const unsigned char*>(t.raw_data());
      for (std::size_t i = 0; i < t.nbytes(); ++i)
        if (p[i] != 0x5a) return false;
    }
    return true;
  }
};

const std::string& scratch_file() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("wfgen_fuzz_params_" + std::to_string(::getpid()) + ".wfp")).string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 65536) return 0;
  {
    std::ofstream out(scratch_file(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  Params p;
  try {
    load_parameters(scratch_file(), p.names, p.tensors);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::BadParameterFile) std::abort();
    if (!p.unchanged()) std::abort();  // a bad file must change nothing
  }
  return 0;
}

// Fuzz target: the model body parser and the tracer, end to end from a spec.
//
// The input is the `call:` body of a model with a few arguments, parameters
// and a `where` line; the spec (with the standard library) is loaded and the
// build traced into a graph, as `wfgen gen` does (the model is checked by
// spec::load_text, then traced against the standard library). UserError is the expected
// way to refuse input; anything else escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "wfgen/spec/spec.hpp"
#include "wfgen/support/diagnostics.hpp"
#include "wfgen/trace/trace.hpp"

namespace {

const char* const kHead = R"(models:
  - name: Fuzzed
    args: {n: {type: int}, k: {type: int, default: 3}}
    params: {W: {shape: [n, k], init: xavier}, b: {shape: [k], init: zeros}}
    where: "X[batch n] T[batch k] -> Y[batch k]"
    call: |
)";

const char* const kTail = R"(builds:
  - {name: fuzzed, model: Fuzzed, args: {n: 4}, dtype: f32, devices: [blas, cpu]}
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 8192) return 0;
  std::string text = kHead;
  text += "      ";
  for (std::size_t i = 0; i < size; ++i) {
    char c = static_cast<char>(data[i]);
    text += c;
    if (c == '\n') text += "      ";
  }
  text += "\n";
  text += kTail;
  // The standard library is loaded once (loading it is most of the time of
  // a run); the fuzzed model is loaded alone and added to a copy of it.
  static const wfgen::spec::Spec stdlib = wfgen::spec::load_text_with_stdlib("empty.yaml", "nodes: []\n");
  try {
    wfgen::spec::Spec user = wfgen::spec::load_text("fuzz.yaml", text);
    wfgen::spec::Spec s = stdlib;
    s.models.insert(s.models.end(), user.models.begin(), user.models.end());
    s.builds = user.builds;
    s.files.push_back("fuzz.yaml");
    s.texts["fuzz.yaml"] = text;
    for (const auto& b : s.builds) (void)wfgen::trace::trace_build(s, b);
  } catch (const wfgen::UserError& e) {
    (void)e.render(false);
  }
  return 0;
}

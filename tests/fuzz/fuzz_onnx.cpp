// Fuzz target: the ONNX importer, end to end (bytes -> ModelProto -> `wfgen
// import` -> the spec it writes, loaded back by wfgen's spec loader and traced
// against the standard library, as `wfgen gen` would).
//
// UserError is the expected way to refuse a file; anything else escaping is a
// bug, and so is a spec the importer writes that is not printable ASCII, that
// the spec loader refuses, or whose `call:` body has other lines than the
// statements the importer wrote (a name that became a statement). External
// data cannot be read: the model's folder does not exist. The data limit is
// 1 MiB (and tests/fuzz's -max_len 16 KiB), so a run stays fast.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "wfgen/onnx/onnx_import.hpp"
#include "wfgen/spec/spec.hpp"
#include "wfgen/support/diagnostics.hpp"
#include "wfgen/trace/trace.hpp"

namespace {

void check_message(const wfgen::UserError& e) {
  for (const auto& d : e.diagnostics()) {
    if (d.message.empty()) std::abort();
    for (char c : d.message)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) std::abort();
  }
  (void)e.render(false);
}

[[noreturn]] void finding(const char* what, const std::string& spec) {
  std::fprintf(stderr, "fuzz_onnx: %s; the spec written:\n%s\n", what, spec.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 65536) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  wfgen::onnx_import::Options options;
  options.name = "fuzzed";
  options.params_file = "fuzzed.wfparams";
  options.max_data_bytes = std::uint64_t{1} << 20;
  wfgen::onnx_import::Imported imported;
  try {
    imported = wfgen::onnx_import::import_bytes(bytes, "/nonexistent-wfgen-fuzz/model.onnx", options);
  } catch (const wfgen::UserError& e) {
    check_message(e);
    return 0;
  }
  const std::string& text = imported.spec;
  for (char c : text)
    if (c != '\n' && (c < 0x20 || c >= 0x7f)) finding("a byte that is not printable ASCII", text);
  wfgen::spec::Spec user;
  try {
    user = wfgen::spec::load_text("fuzzed.yaml", text);
  } catch (const wfgen::UserError& e) {
    finding(("the spec loader refuses it: " + e.render(false)).c_str(), text);
  }
  if (user.models.size() != 1) finding("not one model", text);
  std::istringstream body(user.models[0].call.value);
  int lines = 0;
  for (std::string l; std::getline(body, l);) lines += !l.empty();
  if (lines != imported.statements) finding("the body's lines are not the statements written", text);
  // Traced with the standard library, loaded once (most of a run's time
  // otherwise) and not copied (the copy was most of a run under ASan): the
  // imported model is appended to it, and removed before the next run.
  static wfgen::spec::Spec spec = [] {
    wfgen::spec::Spec s = wfgen::spec::load_text_with_stdlib("empty.yaml", "nodes: []\n");
    s.files.push_back("fuzzed.yaml");
    return s;
  }();
  static const std::size_t stdlib_models = spec.models.size();
  spec.models.resize(stdlib_models);
  spec.models.insert(spec.models.end(), user.models.begin(), user.models.end());
  spec.builds = user.builds;
  spec.texts["fuzzed.yaml"] = text;
  try {
    for (const auto& b : spec.builds) (void)wfgen::trace::trace_build(spec, b);
  } catch (const wfgen::UserError& e) {
    (void)e.render(false);
  }
  return 0;
}

// Fuzz target: the YAML spec loader with its schema validation and checks
// (spec::load_text: YAML, duplicate keys, JSON Schema, typed reading, the
// Subscript DSL of every `where`, names, cross references).
//
// UserError (diagnostics at file:line:col) is the expected way to refuse
// input; anything else escaping is a bug. Every diagnostic must have a
// message without control characters, and rendering it must not fail.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "wfgen/spec/spec.hpp"
#include "wfgen/support/diagnostics.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 65536) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    wfgen::spec::Spec s = wfgen::spec::load_text("fuzz.yaml", text);
    (void)s;
  } catch (const wfgen::UserError& e) {
    for (const auto& d : e.diagnostics()) {
      if (d.message.empty()) std::abort();
      for (char c : d.message)
        if (static_cast<unsigned char>(c) < 0x20) std::abort();
    }
    (void)e.render(false);
  }
  return 0;
}

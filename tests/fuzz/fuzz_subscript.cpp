// Fuzz target: the Subscript DSL parser and the shape checker.
//
// Input: the first line is a DSL line; every further line is an input shape
// ("2x3x4", symbolic dims allowed) or a constructor argument ("n=3",
// "k=(2 2)"). A ParseError from the parser or a bad
// shape line is the expected way to refuse input; anything else escaping
// (another exception, a crash, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "wfgen/shape/shape.hpp"
#include "wfgen/subscript/subscript.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;  // the DSL is one line; long inputs only slow the search
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t nl = text.find('\n');
  std::string_view dsl = text.substr(0, nl);
  wfgen::subscript::Declaration decl;
  try {
    decl = wfgen::subscript::parse(dsl);
  } catch (const wfgen::subscript::ParseError&) {
    return 0;
  }
  (void)decl.str();
  (void)decl.inplace_of();
  std::vector<wfgen::shape::Shape> inputs;
  wfgen::shape::Args args;
  while (nl != std::string_view::npos && inputs.size() + args.size() < 8) {
    std::size_t start = nl + 1;
    nl = text.find('\n', start);
    std::string_view line = text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    try {
      if (std::size_t eq = line.find('='); eq != std::string_view::npos) {
        std::string name(line.substr(0, eq));
        if (!wfgen::subscript::is_symbol(name)) return 0;
        args[name] = wfgen::shape::parse_value(line.substr(eq + 1));
      } else {
        inputs.push_back(wfgen::shape::parse_shape(line));
      }
    } catch (const std::invalid_argument&) {
      return 0;
    }
  }
  wfgen::shape::CheckResult r = wfgen::shape::check(decl, args, inputs);
  if (!r.ok()) (void)wfgen::shape::render_report(decl, inputs, r);
  return 0;
}

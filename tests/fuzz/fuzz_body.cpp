// Fuzz target: the model body language (`call:`), and `backward:` entries.
//
// Every input is parsed as a body and as one expression; what parses is
// printed back and must parse to the same tree. body::ParseError is the
// expected way to refuse input; anything else escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "wfgen/body/body.hpp"

namespace {

void check_expression(std::string_view text) {
  using namespace wfgen::body;
  ExprPtr e;
  try {
    e = parse_expression(text);
  } catch (const ParseError&) {
    return;
  }
  ExprPtr again = parse_expression(e->str());
  if (!same_tree(*e, *again)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 16384) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)wfgen::body::parse(text);
  } catch (const wfgen::body::ParseError&) {
  }
  check_expression(text);
  return 0;
}

// Internal to wfgen/body: the tokens of the model body language and the
// lexer that makes them (lexer.cpp). Python-like: NEWLINE, INDENT and DEDENT
// tokens come from the indentation of a body; inside brackets newlines are
// spaces. Its errors are UserErrors at the offending character.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace wfgen::body::detail {

enum class Tok { Int, Float, Name, Op, String, Newline, Indent, Dedent, End };

struct Token {
  Tok kind = Tok::End;
  std::size_t offset = 0;
  std::size_t length = 0;
  int line = 1;
  std::string_view text;     // Int, Float, Name, Op; String: the characters between the quotes
  std::uint64_t ivalue = 0;  // Int; 2^63 is kept for `-9223372036854775808`
  double fvalue = 0;         // Float

  std::size_t end() const { return offset + length; }
  bool real() const { return kind != Tok::Newline && kind != Tok::Indent && kind != Tok::Dedent && kind != Tok::End; }
};

constexpr std::uint64_t kTwoTo63 = std::uint64_t{1} << 63;

// Words with a meaning in the language; none of them is a name.
bool is_keyword(std::string_view w);

// Python statements that bodies do not have, with what to do instead
// (nullptr for a word that is not one of them).
const char* unsupported_statement(std::string_view w);

// The tokens of `text`: a body (statements = true, with NEWLINE, INDENT and
// DEDENT) or one expression in which newlines are spaces; the last is End.
std::vector<Token> lex(std::string_view text, bool statements);

}  // namespace wfgen::body::detail

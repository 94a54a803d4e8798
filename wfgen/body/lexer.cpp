// The lexer of the model body language (lexer.hpp).
#include "wfgen/body/lexer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>

#include "wfgen/body/body.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::body::detail {

bool is_keyword(std::string_view w) {
  static constexpr std::string_view kWords[] = {"if",  "elif", "else",   "for",  "in",    "and",  "or",
                                                "not", "pass", "return", "true", "false", "True", "False"};
  return std::find(std::begin(kWords), std::end(kWords), w) != std::end(kWords);
}

const char* unsupported_statement(std::string_view w) {
  static constexpr std::string_view kOthers =
      "statements are not supported (a body has assignments, 'return', 'assert', 'if'/'elif'/'else', "
      "'for NAME in range(...)' and 'pass')";
  if (w == "while") return "'while' loops are not supported: loops are unrolled while tracing; use 'for i in range(n)'";
  if (w == "break" || w == "continue") return "is not supported: loops over range(...) are unrolled while tracing and always run to the end";
  if (w == "def" || w == "class" || w == "lambda") return "is not supported: define another model in the spec and call it by name";
  if (w == "import" || w == "from") return "is not supported: the nodes and models of the spec are called by name";
  static constexpr std::string_view kRest[] = {"try",    "with",   "raise", "del",   "global",
                                               "nonlocal", "yield", "async", "await"};
  if (std::find(std::begin(kRest), std::end(kRest), w) != std::end(kRest)) return kOthers.data();
  return nullptr;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || is_digit(c); }

class Lexer {
 public:
  // statements: a body (NEWLINE/INDENT/DEDENT tokens); else one expression
  // in which newlines are spaces.
  Lexer(std::string_view text, bool statements) : s_(text), statements_(statements) {}

  std::vector<Token> run() {
    bool line_start = statements_;
    while (i_ < s_.size()) {
      if (line_start) {
        if (!begin_line()) continue;  // a blank or comment-only line was skipped
        line_start = false;
      }
      const char c = s_[i_];
      if (c == '\n') {
        if (statements_ && brackets_.empty()) {
          push_newline();
          line_start = true;
        }
        ++i_;
        ++line_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (is_digit(c) || (c == '.' && i_ + 1 < s_.size() && is_digit(s_[i_ + 1]) && !after_value())) {
        number();
      } else if (ident_start(c)) {
        const std::size_t start = i_;
        while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
        push(Tok::Name, start, i_ - start);
      } else {
        punctuation();
      }
    }
    if (!brackets_.empty()) {
      const Open& o = brackets_.back();
      throw ParseError(std::string("unclosed '") + o.c + "': no matching '" + (o.c == '(' ? ')' : ']') +
                           "' before the end of the " + (statements_ ? "body" : "expression"),
                       o.offset, 1);
    }
    if (statements_) {
      if (!out_.empty() && out_.back().kind != Tok::Newline) push_newline();
      while (indents_.size() > 1) {
        indents_.pop_back();
        push_structural(Tok::Dedent, end_of_last());
      }
    }
    push_structural(Tok::End, end_of_last());
    return std::move(out_);
  }

 private:
  struct Open {
    char c;
    std::size_t offset;
  };

  std::size_t end_of_last() const {
    for (auto it = out_.rbegin(); it != out_.rend(); ++it)
      if (it->real()) return it->end();
    return 0;
  }

  void push(Tok kind, std::size_t offset, std::size_t length) {
    Token t;
    t.kind = kind;
    t.offset = offset;
    t.length = length;
    t.line = line_;
    t.text = s_.substr(offset, length);
    out_.push_back(t);
  }
  void push_structural(Tok kind, std::size_t offset) {
    Token t;
    t.kind = kind;
    t.offset = offset;
    t.length = 1;
    t.line = line_;
    out_.push_back(t);
  }
  // A NEWLINE sits right after the last token of its line (before any
  // comment), so that "expected ':'" points where the ':' is missing.
  void push_newline() {
    Token t;
    t.kind = Tok::Newline;
    t.offset = end_of_last();
    t.length = 1;
    t.line = out_.empty() ? line_ : out_.back().line;
    out_.push_back(t);
  }

  // True after the ',' of a line that starts with 'assert' (outside brackets).
  bool message_position() const {
    if (!statements_ || !brackets_.empty() || out_.empty()) return false;
    if (out_.back().kind != Tok::Op || out_.back().text != ",") return false;
    std::size_t first = out_.size();
    while (first > 0 && out_[first - 1].kind != Tok::Newline) --first;
    while (first < out_.size() && !out_[first].real()) ++first;
    return first < out_.size() && out_[first].kind == Tok::Name && out_[first].text == "assert";
  }

  // True when the previous token ends a value, so that a following '.' is an
  // attribute access (`x.5` is an error, not `x` and `.5`).
  bool after_value() const {
    if (out_.empty()) return false;
    const Token& t = out_.back();
    if (t.kind == Tok::Name || t.kind == Tok::Int || t.kind == Tok::Float) return true;
    return t.kind == Tok::Op && (t.text == ")" || t.text == "]");
  }

  // At the start of a physical line outside brackets: measures the
  // indentation and emits INDENT/DEDENT. Returns false after skipping a blank
  // or comment-only line (including its newline).
  bool begin_line() {
    const std::size_t start = i_;
    std::size_t j = i_, tab = std::string_view::npos;
    while (j < s_.size() && (s_[j] == ' ' || s_[j] == '\t' || s_[j] == '\r')) {
      if (s_[j] == '\t' && tab == std::string_view::npos) tab = j;
      ++j;
    }
    if (j >= s_.size() || s_[j] == '\n' || s_[j] == '#') {
      while (j < s_.size() && s_[j] != '\n') ++j;
      if (j < s_.size()) {
        ++j;
        ++line_;
      }
      i_ = j;
      return false;
    }
    if (tab != std::string_view::npos) {
      throw ParseError("tab character in the indentation; indent with spaces only", tab, 1);
    }
    // '\r' only counts as indentation on lines that are otherwise blank.
    for (std::size_t k = start; k < j; ++k) {
      if (s_[k] == '\r') throw ParseError("unexpected carriage return in the indentation", k, 1);
    }
    const std::size_t width = j - start;
    i_ = j;
    if (indents_.empty()) {
      indents_.push_back(width);  // the first statement sets the base level
    } else if (width > indents_.back()) {
      indents_.push_back(width);
      push_structural(Tok::Indent, j);
    } else if (width < indents_.back()) {
      std::string open;
      for (std::size_t k = 0; k < indents_.size(); ++k) {
        if (k > 0) open += k + 1 == indents_.size() ? " or " : ", ";
        open += std::to_string(indents_[k]);
      }
      while (width < indents_.back()) {
        indents_.pop_back();
        push_structural(Tok::Dedent, j);
        if (indents_.empty() || width > indents_.back()) {
          std::size_t len = 1;
          if (ident_start(s_[j])) {
            while (j + len < s_.size() && ident_char(s_[j + len])) ++len;
          }
          throw ParseError("unindent to " + std::to_string(width) + (width == 1 ? " space" : " spaces") +
                               " does not match any enclosing block (indented " + open + " spaces)",
                           j, len);
        }
      }
    }
    return true;
  }

  void number() {
    const std::size_t start = i_;
    bool is_float = false, bad = false;
    while (i_ < s_.size() && is_digit(s_[i_])) ++i_;
    if (i_ < s_.size() && s_[i_] == '.') {
      is_float = true;
      ++i_;
      while (i_ < s_.size() && is_digit(s_[i_])) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      is_float = true;
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !is_digit(s_[i_])) bad = true;
      while (i_ < s_.size() && is_digit(s_[i_])) ++i_;
    }
    if (i_ < s_.size() && (ident_char(s_[i_]) || (s_[i_] == '.' && i_ + 1 < s_.size() && is_digit(s_[i_ + 1])))) {
      bad = true;
    }
    if (bad) {
      while (i_ < s_.size() && (ident_char(s_[i_]) || s_[i_] == '.')) ++i_;
      throw ParseError("malformed number '" + quote(s_.substr(start, i_ - start), 30) + "'", start, i_ - start);
    }
    const std::string_view text = s_.substr(start, i_ - start);
    push(is_float ? Tok::Float : Tok::Int, start, text.size());
    Token& t = out_.back();
    if (is_float) {
      const auto r = std::from_chars(text.data(), text.data() + text.size(), t.fvalue);
      if (r.ec == std::errc::result_out_of_range || (r.ec == std::errc() && !std::isfinite(t.fvalue))) {
        throw ParseError("floating-point literal '" + quote(text, 30) + "' is out of range", start, text.size());
      }
      if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
        throw ParseError("malformed number '" + quote(text, 30) + "'", start, text.size());
      }
      return;
    }
    std::uint64_t v = 0;
    for (char c : text) {
      const auto d = static_cast<std::uint64_t>(c - '0');
      if (v > (kTwoTo63 - d) / 10) {  // v * 10 + d > 2^63
        throw ParseError("integer literal '" + quote(text, 30) + "' is too large (the largest is " +
                             std::to_string(std::numeric_limits<std::int64_t>::max()) + ")",
                         start, text.size());
      }
      v = v * 10 + d;
    }
    t.ivalue = v;
  }

  void punctuation() {
    const std::size_t start = i_;
    const char c = s_[i_];
    const char d = i_ + 1 < s_.size() ? s_[i_ + 1] : '\0';
    const char e = i_ + 2 < s_.size() ? s_[i_ + 2] : '\0';
    auto op = [&](std::size_t n) {
      i_ += n;
      push(Tok::Op, start, n);
    };
    auto augmented = [&](std::size_t n) {
      const std::string o(s_.substr(start, n - 1));
      throw ParseError("augmented assignment '" + o + "=' is not supported; write 'x = x " + o + " ...'", start, n);
    };
    switch (c) {
      case '*':
        if (d == '*' && e == '=') augmented(3);
        if (d == '*') return op(2);
        if (d == '=') augmented(2);
        return op(1);
      case '+': case '-': case '@': case '%':
        if (d == '=') augmented(2);
        return op(1);
      case '/':
        if (d == '/') throw ParseError("'//' (floor division) is not supported", start, 2);
        if (d == '=') augmented(2);
        return op(1);
      case '=': case '<': case '>':
        return op(d == '=' ? 2 : 1);
      case '!':
        if (d == '=') return op(2);
        throw ParseError("'!' is not an operator; use 'not'", start, 1);
      case '&':
        throw ParseError(std::string("'") + (d == '&' ? "&&" : "&") + "' is not an operator; use 'and'", start,
                         d == '&' ? 2 : 1);
      case '|':
        throw ParseError(std::string("'") + (d == '|' ? "||" : "|") + "' is not an operator; use 'or'", start,
                         d == '|' ? 2 : 1);
      case ',': case '.': case ':':
        return op(1);
      case '(': case '[':
        brackets_.push_back({c, start});
        return op(1);
      case ')': case ']': {
        const char want = c == ')' ? '(' : '[';
        if (brackets_.empty()) {
          throw ParseError(std::string("unmatched '") + c + "': no '" + want + "' is open here", start, 1);
        }
        if (brackets_.back().c != want) {
          const SourceLoc at = loc_of_offset("", s_, brackets_.back().offset);
          throw ParseError(std::string("'") + c + "' does not match the '" + brackets_.back().c + "' at line " +
                               std::to_string(at.line) + ", column " + std::to_string(at.col) + "; expected '" +
                               (brackets_.back().c == '(' ? ')' : ']') + "'",
                           start, 1);
        }
        brackets_.pop_back();
        return op(1);
      }
      case '"': case '\'': {
        std::size_t j = i_ + 1;
        while (j < s_.size() && s_[j] != c && s_[j] != '\n') ++j;
        const bool closed = j < s_.size() && s_[j] == c;
        const std::size_t len = closed ? j + 1 - start : j - start;
        // The one place a string may stand: the message of an assert,
        // `assert cond, "message"`, after the comma at the bracket level 0.
        if (!message_position()) throw ParseError("strings are not supported in model bodies", start, len);
        if (!closed) {
          throw ParseError(std::string("unterminated string: no closing ") + c + " before the end of the line", start, len);
        }
        Token t;
        t.kind = Tok::String;
        t.offset = start;
        t.length = len;
        t.line = line_;
        t.text = s_.substr(start + 1, len - 2);
        out_.push_back(t);
        i_ = start + len;
        return;
      }
      case ';':
        throw ParseError("';' is not supported; put each statement on its own line", start, 1);
      case '{': case '}':
        throw ParseError(std::string("'") + c + "' is not supported: there are no dictionaries or sets", start, 1);
      case '\\':
        throw ParseError("'\\' line continuation is not supported; break long lines inside parentheses", start, 1);
      default: {
        std::size_t len = 1;
        if (static_cast<unsigned char>(c) >= 0x80) {  // the whole UTF-8 sequence
          while (start + len < s_.size() && (static_cast<unsigned char>(s_[start + len]) & 0xC0) == 0x80 && len < 4) ++len;
        }
        throw ParseError("unexpected character '" + quote(s_.substr(start, len)) + "'", start, len);
      }
    }
  }

  std::string_view s_;
  bool statements_;
  std::size_t i_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
  std::vector<Open> brackets_;
  std::vector<std::size_t> indents_;
};

}  // namespace

std::vector<Token> lex(std::string_view text, bool statements) { return Lexer(text, statements).run(); }

}  // namespace wfgen::body::detail

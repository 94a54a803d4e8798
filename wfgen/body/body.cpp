// The model body language's recursive-descent parser over the tokens of
// lexer.cpp; the printer behind Expr::str() is printer.cpp. See body.hpp for
// the tree and docs/model-language.md for the user reference with every
// error message.
#include "wfgen/body/body.hpp"

#include "wfgen/body/lexer.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "wfgen/support/diagnostics.hpp"

namespace wfgen::body {

namespace {

using detail::is_keyword;
using detail::Tok;
using detail::Token;
using detail::kTwoTo63;
using detail::unsupported_statement;

// --- parser ----------------------------------------------------------------------

// An expression being built, with the height of its tree.
struct P {
  ExprPtr e;
  int h = 1;
};

int binary_precedence(const Token& t) {
  if (t.kind == Tok::Name) return t.text == "or" ? 1 : t.text == "and" ? 2 : 0;
  if (t.kind != Tok::Op) return 0;
  const std::string_view o = t.text;
  if (o == "==" || o == "!=" || o == "<" || o == "<=" || o == ">" || o == ">=") return 4;
  if (o == "+" || o == "-") return 5;
  if (o == "*" || o == "/" || o == "@" || o == "%") return 6;
  return 0;
}
constexpr int kComparison = 4;

class Parser {
 public:
  Parser(std::string_view text, std::vector<Token> tokens, bool expression)
      : text_(text), toks_(std::move(tokens)), expression_(expression) {}

  Block program() {
    Block out;
    while (peek().kind != Tok::End) out.push_back(statement(0));
    return out;
  }

  ExprPtr single_expression() {
    if (peek().kind == Tok::End) throw ParseError("empty expression", 0, std::max<std::size_t>(text_.size(), 1));
    P e = expr();
    if (peek().kind != Tok::End) {
      if (is_op(peek(), "=")) fail(peek(), "unexpected '='; use '==' to compare");
      expected("an operator or the end of the expression", peek());
    }
    return std::move(e.e);
  }

 private:
  // --- tokens ---
  const Token& peek(std::size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  std::size_t prev_end() const { return pos_ == 0 ? 0 : toks_[pos_ - 1].end(); }
  static bool is_op(const Token& t, std::string_view o) { return t.kind == Tok::Op && t.text == o; }
  static bool is_word(const Token& t, std::string_view w) { return t.kind == Tok::Name && t.text == w; }
  static bool at_line_end(const Token& t) { return t.kind == Tok::Newline || t.kind == Tok::End; }
  static bool starts_expression(const Token& t) {
    if (t.kind == Tok::Int || t.kind == Tok::Float) return true;
    if (t.kind == Tok::Name) return !is_keyword(t.text) || t.text == "not" || t.text == "true" || t.text == "false" ||
                                    t.text == "True" || t.text == "False";
    return is_op(t, "(") || is_op(t, "[") || is_op(t, "-") || is_op(t, "+");  // '+': for its error message
  }

  std::string describe(const Token& tok) const {
    const Token& t = skip_structural(tok);  // INDENT/DEDENT: name the line's first token
    if (t.kind == Tok::Newline) return "the end of the line";
    if (t.kind == Tok::End) return expression_ ? "the end of the expression" : "the end of the body";
    if (t.kind == Tok::String) return "a string";
    return "'" + quote(t.text, 30) + "'";
  }
  const Token& skip_structural(const Token& tok) const {
    std::size_t i = static_cast<std::size_t>(&tok - toks_.data());
    while ((toks_[i].kind == Tok::Indent || toks_[i].kind == Tok::Dedent) && i + 1 < toks_.size()) ++i;
    return toks_[i];
  }

  [[noreturn]] void fail(const Token& t, const std::string& message) const {
    throw ParseError(message, t.offset, t.length);
  }
  [[noreturn]] void fail(const Expr& e, const std::string& message) const {
    throw ParseError(message, e.offset, e.length);
  }
  [[noreturn]] void expected(const std::string& what, const Token& found) const {
    const Token& t = skip_structural(found);
    fail(t, "expected " + what + ", found " + describe(t));
  }

  // Guards one level of parser recursion (parentheses, brackets, calls,
  // unary operators, '**').
  struct Nest {
    Parser& p;
    Nest(Parser& parser, const Token& at) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.too_deep(at);
    }
    ~Nest() { --p.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };
  [[noreturn]] void too_deep(const Token& at) const {
    fail(at, "expression is nested too deeply (more than " + std::to_string(kMaxNesting) + " levels)");
  }

  // --- expression nodes ---
  P node(Expr::Kind kind, std::size_t begin, const Token& at, std::initializer_list<const P*> children = {}) {
    P out;
    out.e = std::make_unique<Expr>();
    out.e->kind = kind;
    out.e->offset = begin;
    out.e->length = prev_end() - begin;
    int h = 0;
    for (const P* c : children) h = std::max(h, c->h);
    out.h = h + 1;
    if (out.h > kMaxNesting) too_deep(at);
    return out;
  }
  void grow(P& parent, int child_height, const Token& at) {
    parent.h = std::max(parent.h, child_height + 1);
    if (parent.h > kMaxNesting) too_deep(at);
  }
  P unary(std::string_view op, std::size_t begin, P operand, const Token& at) {
    P out = node(Expr::Kind::Unary, begin, at, {&operand});
    out.e->op = std::string(op);
    out.e->operands.push_back(std::move(operand.e));
    return out;
  }
  P binary(std::string_view op, std::size_t begin, P lhs, P rhs, const Token& at) {
    P out = node(Expr::Kind::Binary, begin, at, {&lhs, &rhs});
    out.e->op = std::string(op);
    out.e->operands.push_back(std::move(lhs.e));
    out.e->operands.push_back(std::move(rhs.e));
    return out;
  }

  // --- expressions ---
  // expr := or-level; no unparenthesised tuple.
  P expr() { return binary_level(1); }

  // Precedence climbing over or(1) and(2) not(3) comparisons(4) +-(5) */@%(6).
  P binary_level(int min_prec) {
    const std::size_t begin = peek().offset;
    P lhs;
    if (is_word(peek(), "not") && min_prec <= 3) {
      const Token& op = next();
      Nest guard(*this, op);
      lhs = unary("not", begin, binary_level(3), op);
    } else {
      lhs = unary_level();
    }
    bool last_was_comparison = false;
    for (;;) {
      const Token& op = peek();
      const int p = binary_precedence(op);
      if (p == 0 || p < min_prec) break;
      if (p == kComparison && last_was_comparison) {
        fail(op, "comparisons cannot be chained; write 'a < b and b < c' instead of 'a < b < c'");
      }
      next();
      P rhs = binary_level(p + 1);
      lhs = binary(op.text, begin, std::move(lhs), std::move(rhs), op);
      last_was_comparison = p == kComparison;
    }
    return lhs;
  }

  P unary_level() {
    if (is_op(peek(), "+")) fail(peek(), "unary '+' is not supported; leave it out");
    if (!is_op(peek(), "-")) return power_level();
    const Token& op = next();
    Nest guard(*this, op);
    const Token& lit = peek();
    // `-` directly before a number is part of the literal (-5, -0.5), unless
    // the number is the base of `**` or followed by a call, index or
    // attribute. Anything else (-(5), - -5) stays a unary minus, so printing
    // and parsing again gives the same tree.
    const bool literal = (lit.kind == Tok::Int || lit.kind == Tok::Float) && !is_op(peek(1), "**") &&
                         !is_op(peek(1), "(") && !is_op(peek(1), "[") && !is_op(peek(1), ".");
    // -9223372036854775808: the only literal whose positive part overflows.
    if (literal && lit.kind == Tok::Int && lit.ivalue == kTwoTo63) {
      next();
      P out = node(Expr::Kind::Int, op.offset, op);
      out.e->ivalue = std::numeric_limits<std::int64_t>::min();
      return out;
    }
    P operand = unary_level();
    Expr& x = *operand.e;
    if (literal && (x.kind == Expr::Kind::Int || x.kind == Expr::Kind::Float)) {
      if (x.kind == Expr::Kind::Int) {
        x.ivalue = -x.ivalue;
      } else {
        x.fvalue = -x.fvalue;
      }
      x.offset = op.offset;
      x.length = prev_end() - op.offset;
      return operand;
    }
    return unary("-", op.offset, std::move(operand), op);
  }

  P power_level() {
    const std::size_t begin = peek().offset;
    P base = postfix();
    if (!is_op(peek(), "**")) return base;
    const Token& op = next();
    Nest guard(*this, op);
    P exponent = unary_level();  // right-associative; `2 ** -1` is allowed
    return binary("**", begin, std::move(base), std::move(exponent), op);
  }

  P postfix() {
    const std::size_t begin = peek().offset;
    P e = atom();
    for (;;) {
      const Token& t = peek();
      if (is_op(t, "(")) {
        if (e.e->kind != Expr::Kind::Name && e.e->kind != Expr::Kind::Attribute) {
          fail(*e.e, "only names and methods can be called; '" + quote(e.e->str(), 40) + "' is " + what(*e.e));
        }
        e = call(begin, std::move(e));
      } else if (is_op(t, "[")) {
        e = subscript(begin, std::move(e));
      } else if (is_op(t, ".")) {
        next();
        const Token& name = peek();
        if (name.kind != Tok::Name || is_keyword(name.text)) expected("an attribute name after '.'", name);
        next();
        P out = node(Expr::Kind::Attribute, begin, name, {&e});
        out.e->name = std::string(name.text);
        out.e->operands.push_back(std::move(e.e));
        e = std::move(out);
      } else {
        return e;
      }
    }
  }

  P call(std::size_t begin, P callee) {
    const Token& open = next();
    Nest guard(*this, open);
    const std::string fname = callee.e->str();
    P out = node(Expr::Kind::Call, begin, open, {&callee});
    out.e->operands.push_back(std::move(callee.e));
    std::vector<Arg>& args = out.e->args;
    std::optional<std::string> first_keyword;
    while (!is_op(peek(), ")")) {
      const Token& t = peek();
      Arg a;
      a.offset = t.offset;
      if (t.kind == Tok::Name && !is_keyword(t.text) && is_op(peek(1), "=")) {
        for (const Arg& b : args) {
          if (b.keyword && *b.keyword == t.text) {
            fail(t, "duplicate keyword argument '" + quote(t.text) + "' in the call of '" + quote(fname, 40) + "'");
          }
        }
        a.keyword = std::string(t.text);
        next();
        next();
        if (!starts_expression(peek())) expected("a value for the keyword argument '" + quote(t.text) + "'", peek());
      }
      P v = expr();
      if (is_op(peek(), "=")) {
        if (a.keyword) fail(peek(), "unexpected '='; use '==' to compare");
        fail(*v.e, "a keyword argument must be a name, found '" + quote(v.e->str(), 40) + "'");
      }
      if (!a.keyword && first_keyword) {
        throw ParseError("positional argument after the keyword argument '" + quote(*first_keyword) +
                             "'; positional arguments come first",
                         v.e->offset, v.e->length);
      }
      a.value = std::move(v.e);
      a.length = prev_end() - a.offset;
      grow(out, v.h, open);
      if (a.keyword && !first_keyword) first_keyword = a.keyword;
      args.push_back(std::move(a));
      if (is_op(peek(), ",")) {
        next();
      } else if (!is_op(peek(), ")")) {
        expected("',' or ')' in the arguments of '" + quote(fname, 40) + "'", peek());
      }
    }
    next();
    out.e->length = prev_end() - begin;
    return out;
  }

  P subscript(std::size_t begin, P object) {
    const Token& open = next();
    Nest guard(*this, open);
    P out = node(Expr::Kind::Subscript, begin, open, {&object});
    out.e->operands.push_back(std::move(object.e));
    if (is_op(peek(), "]")) fail(peek(), "expected an index or a slice, found ']'");
    auto ends_part = [&](const Token& t) { return is_op(t, ":") || is_op(t, ",") || is_op(t, "]"); };
    auto part = [&](ExprPtr& slot) {
      P v = expr();
      grow(out, v.h, open);
      slot = std::move(v.e);
    };
    while (!is_op(peek(), "]")) {
      SliceItem item;
      item.offset = peek().offset;
      ExprPtr first;
      if (!is_op(peek(), ":")) {
        if (is_op(peek(), ",")) expected("an index or a slice", peek());
        part(first);
      }
      if (is_op(peek(), ":")) {
        next();
        item.is_slice = true;
        item.start = std::move(first);
        if (!ends_part(peek())) part(item.stop);
        if (is_op(peek(), ":")) {
          next();
          if (!is_op(peek(), ",") && !is_op(peek(), "]")) part(item.step);
        }
      } else {
        item.index = std::move(first);
      }
      item.length = prev_end() - item.offset;
      out.e->items.push_back(std::move(item));
      if (is_op(peek(), ",")) {
        next();
      } else if (!is_op(peek(), "]")) {
        expected("',' or ']' in the subscript", peek());
      }
    }
    next();
    out.e->length = prev_end() - begin;
    return out;
  }

  P atom() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::Int: {
        if (t.ivalue > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          fail(t, "integer literal '" + quote(t.text, 30) + "' is too large (the largest is " +
                      std::to_string(std::numeric_limits<std::int64_t>::max()) + ")");
        }
        next();
        P out = node(Expr::Kind::Int, t.offset, t);
        out.e->ivalue = static_cast<std::int64_t>(t.ivalue);
        return out;
      }
      case Tok::Float: {
        next();
        P out = node(Expr::Kind::Float, t.offset, t);
        out.e->fvalue = t.fvalue;
        return out;
      }
      case Tok::Name: {
        const bool is_true = t.text == "true" || t.text == "True";
        if (is_true || t.text == "false" || t.text == "False") {
          next();
          P out = node(Expr::Kind::Bool, t.offset, t);
          out.e->ivalue = is_true ? 1 : 0;
          return out;
        }
        if (is_keyword(t.text)) expected("an expression", t);
        next();
        P out = node(Expr::Kind::Name, t.offset, t);
        out.e->name = std::string(t.text);
        return out;
      }
      case Tok::Op:
        if (t.text == "(") return parenthesised();
        if (t.text == "[") return list();
        break;
      default:
        break;
    }
    expected("an expression", t);
  }

  P parenthesised() {
    const Token& open = next();
    Nest guard(*this, open);
    if (is_op(peek(), ")")) {
      next();
      return node(Expr::Kind::Tuple, open.offset, open);
    }
    P first = expr();
    if (is_op(peek(), ")")) {
      next();
      return first;  // grouping only: the range stays the inner expression's
    }
    if (!is_op(peek(), ",")) {
      if (is_op(peek(), "=")) fail(peek(), "unexpected '=' inside parentheses; use '==' to compare");
      expected("')' or ','", peek());
    }
    P out = node(Expr::Kind::Tuple, open.offset, open, {&first});
    out.e->operands.push_back(std::move(first.e));
    items_until(out, ")", open);
    return out;
  }

  P list() {
    const Token& open = next();
    Nest guard(*this, open);
    P out = node(Expr::Kind::List, open.offset, open);
    if (!is_op(peek(), "]")) {
      P first = expr();
      grow(out, first.h, open);
      out.e->operands.push_back(std::move(first.e));
      if (!is_op(peek(), ",") && !is_op(peek(), "]")) expected("',' or ']' in the list", peek());
    }
    items_until(out, "]", open);
    return out;
  }

  // After the first item of a tuple or list: `, item`* [`,`] close.
  void items_until(P& out, std::string_view close, const Token& open) {
    while (is_op(peek(), ",")) {
      next();
      if (is_op(peek(), close)) break;
      P item = expr();
      grow(out, item.h, open);
      out.e->operands.push_back(std::move(item.e));
      if (!is_op(peek(), ",") && !is_op(peek(), close)) {
        expected(std::string("',' or '") + std::string(close) + "'", peek());
      }
    }
    next();  // the closing bracket (the lexer checked that it is there)
    out.e->length = prev_end() - out.e->offset;
  }

  // expr {',' expr} [','] at statement level: a bare tuple when there is a comma.
  P expression_list() {
    const Token& start = peek();
    const std::size_t begin = start.offset;
    P first = expr();
    if (!is_op(peek(), ",")) return first;
    P out = node(Expr::Kind::Tuple, begin, start, {&first});
    out.e->operands.push_back(std::move(first.e));
    while (is_op(peek(), ",")) {
      next();
      if (!starts_expression(peek())) break;
      P item = expr();
      grow(out, item.h, start);
      out.e->operands.push_back(std::move(item.e));
    }
    out.e->length = prev_end() - begin;
    return out;
  }

  static std::string what(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Int: case Expr::Kind::Float: case Expr::Kind::Bool: return "a literal";
      case Expr::Kind::Name: return "a name";
      case Expr::Kind::Unary: case Expr::Kind::Binary: return "an operator expression";
      case Expr::Kind::Call: return "a call";
      case Expr::Kind::Attribute: return "an attribute";
      case Expr::Kind::Subscript: return "a subscript";
      case Expr::Kind::Tuple: return "a tuple";
      case Expr::Kind::List: return "a list";
    }
    return "an expression";
  }

  // --- statements ---
  void count_statement(const Token& at) {
    if (++statements_ > kMaxStatements) {
      fail(at, "the body has too many statements (more than " + std::to_string(kMaxStatements) + ")");
    }
  }

  // Length of the statement's first line: from its first token to the end of
  // the last token of toks_[first..last] on the same line.
  std::size_t first_line_length(std::size_t first, std::size_t last) const {
    const Token& f = toks_[first];
    std::size_t end = f.end();
    for (std::size_t i = first; i <= last && i < toks_.size(); ++i) {
      if (toks_[i].real() && toks_[i].line == f.line) end = std::max(end, toks_[i].end());
    }
    return end - f.offset;
  }

  std::unique_ptr<Stmt> start_statement(Stmt::Kind kind, const Token& first) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->offset = first.offset;
    s->line = first.line;
    return s;
  }

  std::unique_ptr<Stmt> statement(int depth) {
    const Token& t = peek();
    if (t.kind == Tok::Indent) {
      const Token& first = skip_structural(t);
      fail(first, "unexpected indent; only the lines after 'if', 'elif', 'else' or 'for' are indented");
    }
    count_statement(t);
    if (is_word(t, "if")) return if_statement(depth);
    if (is_word(t, "for")) return for_statement(depth);
    if (is_word(t, "elif") || is_word(t, "else")) {
      fail(t, "'" + std::string(t.text) + "' without a matching 'if' (is it indented like its 'if'?)");
    }
    auto s = simple_statement();
    end_of_statement();
    return s;
  }

  void end_of_statement() {
    const Token& t = peek();
    if (t.kind == Tok::Newline) {
      next();
      return;
    }
    if (t.kind == Tok::End) return;
    if (is_word(t, "if")) fail(t, "conditional expressions ('a if c else b') are not supported; use an 'if' statement");
    if (is_op(t, "=")) fail(t, "unexpected '='; use '==' to compare");
    expected("the end of the line", t);
  }

  // pass, return, or an assignment.
  std::unique_ptr<Stmt> simple_statement() {
    const std::size_t first = pos_;
    const Token& t = peek();
    std::unique_ptr<Stmt> s;
    if (is_word(t, "pass")) {
      next();
      s = start_statement(Stmt::Kind::Pass, t);
    } else if (is_word(t, "return")) {
      next();
      s = start_statement(Stmt::Kind::Return, t);
      if (!starts_expression(peek())) expected("the value to return after 'return'", peek());
      P r = expression_list();
      if (r.e->kind == Expr::Kind::Tuple) {
        if (r.e->operands.empty()) fail(*r.e, "'return' needs at least one value, found '()'");
        s->results = std::move(r.e->operands);
      } else {
        s->results.push_back(std::move(r.e));
      }
    } else if (is_word(t, "assert") && !is_op(peek(1), "=") && !is_op(peek(1), ",") && !is_op(peek(1), ".") &&
               !is_op(peek(1), "[")) {
      next();
      s = start_statement(Stmt::Kind::Assert, t);
      if (!starts_expression(peek())) expected("a condition after 'assert'", peek());
      s->value = expr().e;
      if (is_op(peek(), ",")) {
        next();
        if (peek().kind != Tok::String) expected("a message (a string literal) after ',' in 'assert'", peek());
        s->message = std::string(peek().text);
        s->message_offset = peek().offset;
        next();
      }
    } else if (is_word(t, "if") || is_word(t, "for") || is_word(t, "elif") || is_word(t, "else")) {
      fail(t, "'" + std::string(t.text) + "' must start a new line");
    } else {
      if (t.kind == Tok::Name) {
        const Token& after = peek(1);
        if (const char* why = unsupported_statement(t.text);
            why && !is_op(after, "=") && !is_op(after, ",") && !is_op(after, ".") && !is_op(after, "[")) {
          fail(t, why[0] == '\'' ? std::string(why) : "'" + std::string(t.text) + "' " + why);
        }
      }
      s = start_statement(Stmt::Kind::Assign, t);
      P lhs = expression_list();
      if (!is_op(peek(), "=")) {
        if (!at_line_end(peek())) {
          if (is_word(peek(), "if")) end_of_statement();
          expected("'=' or the end of the line", peek());
        }
        const Expr& e = *lhs.e;
        if (e.kind == Expr::Kind::Binary && e.op == "==") {
          fail(e, "'" + quote(e.str(), 40) + "' compares and its result is not used; did you mean '=' (assignment)?");
        }
        fail(e, "the value of '" + quote(e.str(), 40) + "' is not used; assign it to a name or return it");
      }
      set_targets(*s, *lhs.e);
      next();  // '='
      if (!starts_expression(peek())) expected("a value after '='", peek());
      s->value = expression_list().e;
      if (is_op(peek(), "=")) {
        fail(peek(), "chained assignment ('a = b = c') is not supported; assign one value per statement");
      }
    }
    s->length = first_line_length(first, pos_ - 1);
    return s;
  }

  void set_targets(Stmt& s, const Expr& lhs) {
    auto add = [&](const Expr& e) {
      if (e.kind != Expr::Kind::Name) {
        fail(e, "cannot assign to " + what(e) + " '" + quote(e.str(), 40) +
                    "'; the left side of '=' must be a name, or names separated by commas");
      }
      if (std::find(s.targets.begin(), s.targets.end(), e.name) != s.targets.end()) {
        fail(e, "'" + e.name + "' appears twice on the left side of '='");
      }
      s.targets.push_back(e.name);
      s.target_offsets.push_back(e.offset);
    };
    if (lhs.kind == Expr::Kind::Tuple) {
      if (lhs.operands.empty()) fail(lhs, "cannot assign to '()'; the left side of '=' must be a name, or names separated by commas");
      for (const ExprPtr& item : lhs.operands) add(*item);
    } else {
      add(lhs);
    }
  }

  void check_block_depth(int depth, const Token& at) const {
    if (depth >= kMaxNesting) {
      fail(at, "blocks are nested too deeply (more than " + std::to_string(kMaxNesting) +
                   " levels; each 'elif' counts as one)");
    }
  }

  // After the ':' of a header: a simple statement on the same line, or
  // NEWLINE INDENT statement+ DEDENT.
  Block suite(int depth, const Token& header) {
    Block out;
    const std::string where = "'" + std::string(header.text) + "' on line " + std::to_string(header.line);
    if (!at_line_end(peek())) {
      count_statement(peek());
      out.push_back(simple_statement());
      end_of_statement();
      return out;
    }
    if (peek().kind == Tok::Newline) next();
    if (peek().kind != Tok::Indent) expected("an indented block after " + where, peek());
    next();
    while (peek().kind != Tok::Dedent && peek().kind != Tok::End) out.push_back(statement(depth));
    if (peek().kind == Tok::Dedent) next();
    return out;
  }

  std::unique_ptr<Stmt> if_statement(int depth) {
    const std::size_t first = pos_;
    const Token& kw = next();  // 'if' or 'elif'
    check_block_depth(depth, kw);
    auto s = start_statement(Stmt::Kind::If, kw);
    const std::string name(kw.text);
    if (!starts_expression(peek())) expected("a condition after '" + name + "'", peek());
    P cond = expr();
    if (is_op(peek(), "=")) fail(peek(), "'=' assigns; use '==' to compare in the condition of '" + name + "'");
    if (!is_op(peek(), ":")) expected("':' after the condition of '" + name + "'", peek());
    next();
    s->value = std::move(cond.e);
    s->length = first_line_length(first, pos_ - 1);
    s->body = suite(depth + 1, kw);
    if (is_word(peek(), "elif")) {
      count_statement(peek());
      s->orelse.push_back(if_statement(depth + 1));
    } else if (is_word(peek(), "else")) {
      const Token& e = next();
      if (is_word(peek(), "if")) fail(peek(), "use 'elif' instead of 'else if'");
      if (!is_op(peek(), ":")) expected("':' after 'else'", peek());
      next();
      s->orelse = suite(depth + 1, e);
    }
    return s;
  }

  std::unique_ptr<Stmt> for_statement(int depth) {
    const std::size_t first = pos_;
    const Token& kw = next();
    check_block_depth(depth, kw);
    auto s = start_statement(Stmt::Kind::For, kw);
    const Token& var = peek();
    if (var.kind != Tok::Name || is_keyword(var.text)) expected("a loop variable (a name) after 'for'", var);
    next();
    if (is_op(peek(), ",")) fail(peek(), "a loop has one variable: 'for i in range(n)'");
    s->targets.push_back(std::string(var.text));
    s->target_offsets.push_back(var.offset);
    if (!is_word(peek(), "in")) expected("'in' after the loop variable '" + std::string(var.text) + "'", peek());
    next();
    const std::string supported = "loops are over 'range(end)' or 'range(start, end)' only";
    if (!starts_expression(peek())) expected("'range(...)' after 'in'", peek());
    P it = expr();
    Expr& r = *it.e;
    const bool is_range = r.kind == Expr::Kind::Call && r.operands[0]->kind == Expr::Kind::Name &&
                          r.operands[0]->name == "range";
    if (!is_range) fail(r, supported + ", found '" + quote(r.str(), 40) + "'");
    for (const Arg& a : r.args) {
      if (a.keyword) throw ParseError("range() takes no keyword arguments; " + supported, a.offset, a.length);
    }
    if (r.args.empty() || r.args.size() > 2) {
      fail(r, "range() takes 1 or 2 arguments, found " + std::to_string(r.args.size()) + "; " + supported);
    }
    if (r.args.size() == 2) s->range_start = std::move(r.args[0].value);
    s->value = std::move(r.args.back().value);
    if (!is_op(peek(), ":")) expected("':' after 'for " + std::string(var.text) + " in range(...)'", peek());
    next();
    s->length = first_line_length(first, pos_ - 1);
    s->body = suite(depth + 1, kw);
    return s;
  }

  std::string_view text_;
  std::vector<Token> toks_;
  bool expression_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::size_t statements_ = 0;
};

}  // namespace

Program parse(std::string_view text) {
  Program program;
  program.text = std::string(text);
  Parser parser(program.text, detail::lex(program.text, true), false);
  program.statements = parser.program();
  return program;
}

ExprPtr parse_expression(std::string_view text) {
  Parser parser(text, detail::lex(text, false), true);
  return parser.single_expression();
}

bool is_keyword(std::string_view word) { return detail::is_keyword(word); }

}  // namespace wfgen::body

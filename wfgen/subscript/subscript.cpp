#include "wfgen/subscript/subscript.hpp"

#include <cctype>
#include <charconv>

namespace wfgen::subscript {

namespace {

enum class Tok { Ident, Int, LBracket, RBracket, LParen, RParen, Arrow, Tilde, Equal, Plus, Minus, Star, Slash, Comma, End };

struct Token {
  Tok kind;
  std::string_view text;
  std::size_t offset;
};

// A symbol is a Lisp symbol, as in cl-waffe2: a letter or '_' first, then
// letters, digits and `_ - + * / .` (`batch-size`, `hidden_t+1`, `X.grad`).
// An operator character is part of a symbol when it is glued to it, so infix
// arithmetic needs spaces (`a - 1`, `h * 2`), as Lisp's reader would.
bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '+' || c == '*' || c == '/' ||
         c == '.';
}
// Characters a symbol may contain but not end with: `a- 1` is `a - 1`.
bool operator_char(char c) { return c == '-' || c == '+' || c == '*' || c == '/' || c == '.'; }

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of line";
    case Tok::Ident: return "'" + std::string(t.text) + "'";
    case Tok::Int: return "integer " + std::string(t.text);
    default: return "'" + std::string(t.text) + "'";
  }
}

std::vector<Token> lex(std::string_view s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (c == ';') {  // a Lisp comment, to the end of the line
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    std::size_t start = i;
    if (ident_start(c)) {
      while (i < s.size() && ident_char(s[i])) ++i;
      // A trailing operator belongs to the next token: `a- 1` is `a - 1`.
      while (i > start + 1 && operator_char(s[i - 1])) --i;
      out.push_back({Tok::Ident, s.substr(start, i - start), start});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
      if (i < s.size() && ident_start(s[i])) {
        std::size_t end = i;
        while (end < s.size() && ident_char(s[end])) ++end;
        throw ParseError("'" + std::string(s.substr(start, end - start)) +
                             "' is not a symbol: a symbol starts with a letter or '_'",
                         start, end - start);
      }
      out.push_back({Tok::Int, s.substr(start, i - start), start});
      continue;
    }
    if (c == '-' && i + 1 < s.size() && s[i + 1] == '>') {
      out.push_back({Tok::Arrow, s.substr(i, 2), i});
      i += 2;
      continue;
    }
    Tok k;
    switch (c) {
      case '[': k = Tok::LBracket; break;
      case ']': k = Tok::RBracket; break;
      case '(': k = Tok::LParen; break;
      case ')': k = Tok::RParen; break;
      case '~': k = Tok::Tilde; break;
      case '=': k = Tok::Equal; break;
      case '+': k = Tok::Plus; break;
      case '-': k = Tok::Minus; break;
      case '*': k = Tok::Star; break;
      case '/': k = Tok::Slash; break;
      case ',': k = Tok::Comma; break;
      default: {
        unsigned char u = static_cast<unsigned char>(c);
        std::string shown = (u >= 0x20 && u < 0x7f) ? std::string(1, c) : "a non-ASCII byte";
        throw ParseError("unexpected character '" + shown +
                             "': expected a pointer name, '[', ']', '~', a symbol, an integer, '->' or 'where'",
                         i, 1);
      }
    }
    out.push_back({k, s.substr(i, 1), i});
    ++i;
  }
  out.push_back({Tok::End, std::string_view(), s.size()});
  return out;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), toks_(lex(text)) {}

  Declaration declaration() {
    Declaration d;
    d.text = std::string(text_);
    d.inputs = arguments();
    if (peek().kind != Tok::Arrow) {
      throw error(peek(), "expected '->' between the inputs and the outputs, but got " + describe(peek()));
    }
    next();
    d.outputs = arguments();
    if (peek().kind == Tok::Ident && peek().text == "where") {
      Token w = next();
      if (peek().kind == Tok::End) throw error(w, "expected at least one binding 'symbol = expression' after 'where'");
      while (peek().kind != Tok::End) d.where.push_back(binding());
    }
    if (peek().kind != Tok::End) {
      const Token& t = peek();
      if (t.kind == Tok::Arrow) throw error(t, "only one '->' is allowed in a declaration");
      if (t.kind == Tok::Ident) {
        throw error(t, "expected '[' after the pointer name " + describe(t) +
                           " (or 'where' to start the bindings)");
      }
      throw error(t, "expected an argument 'Name[...]', 'where' or the end of the line, but got " + describe(t));
    }
    validate(d);
    return d;
  }

 private:
  const Token& peek(std::size_t ahead = 0) const {
    std::size_t i = std::min(pos_ + ahead, toks_.size() - 1);
    return toks_[i];
  }
  Token next() {
    Token t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  ParseError error(const Token& t, const std::string& message) const {
    return ParseError(message, t.offset, t.text.empty() ? 1 : t.text.size());
  }

  std::vector<Argument> arguments() {
    std::vector<Argument> out;
    while (true) {
      const Token& t = peek();
      if (t.kind == Tok::LBracket) {
        out.push_back(argument(std::nullopt, t.offset));
      } else if (t.kind == Tok::Ident && peek(1).kind == Tok::LBracket) {
        Token name = next();
        out.push_back(argument(std::string(name.text), name.offset));
      } else {
        return out;
      }
    }
  }

  Argument argument(std::optional<std::string> name, std::size_t start) {
    Argument a;
    a.name = std::move(name);
    a.offset = start;
    Token open = next();  // '['
    while (true) {
      const Token& t = peek();
      if (t.kind == Tok::RBracket) {
        Token close = next();
        a.length = close.offset + 1 - start;
        return a;
      }
      Subscript s;
      s.offset = t.offset;
      s.length = t.text.size();
      if (t.kind == Tok::Tilde) {
        s.kind = Subscript::Kind::Batch;
        s.name = "~";
      } else if (t.kind == Tok::Ident) {
        s.kind = Subscript::Kind::Symbol;
        s.name = std::string(t.text);
      } else if (t.kind == Tok::Int) {
        s.kind = Subscript::Kind::Integer;
        s.value = integer(t);
      } else if (t.kind == Tok::End) {
        throw ParseError("unterminated subscript: expected ']' to close the '[' opened here", open.offset, 1);
      } else {
        throw error(t, "expected a subscript ('~', a symbol or an integer) or ']', but got " + describe(t));
      }
      next();
      a.dims.push_back(std::move(s));
    }
  }

  std::int64_t integer(const Token& t) const {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || p != t.text.data() + t.text.size()) {
      throw error(t, "integer " + std::string(t.text) + " is too large (the largest is 9223372036854775807)");
    }
    return v;
  }

  Binding binding() {
    const Token& t = peek();
    if (t.kind != Tok::Ident) {
      throw error(t, "expected a binding 'symbol = expression', but got " + describe(t));
    }
    Binding b;
    Token sym = next();
    b.symbol = std::string(sym.text);
    b.offset = sym.offset;
    if (peek().kind != Tok::Equal) {
      throw error(peek(), "expected '=' after " + describe(sym) + " in the where clause, but got " + describe(peek()));
    }
    next();
    if (peek().kind == Tok::End) throw error(peek(), "expected an expression after '" + b.symbol + " ='");
    b.value = expr();
    b.length = b.value.offset + b.value.length - b.offset;
    return b;
  }

  // Expressions are evaluated and printed recursively, so their size is
  // bounded (specs are untrusted input): a clean error, never a stack overflow.
  static constexpr int kMaxNesting = 200;
  static constexpr int kMaxOperators = 2000;

  void count_operator(std::size_t offset) {
    if (++operators_ > kMaxOperators) {
      throw ParseError("expression too long: more than " + std::to_string(kMaxOperators) + " operators", offset, 1);
    }
  }

  Expr make_binary(char op, Expr lhs, Expr rhs) {
    count_operator(rhs.offset);
    Expr e;
    e.kind = Expr::Kind::Binary;
    e.op = op;
    e.offset = lhs.offset;
    e.length = rhs.offset + rhs.length - lhs.offset;
    e.items.push_back(std::move(lhs));
    e.items.push_back(std::move(rhs));
    return e;
  }

  // A '-' glued to the next token but not to the previous one (`(1 -2)`).
  bool negative_sign_ahead() const {
    if (peek().kind != Tok::Minus || pos_ == 0) return false;
    const Token& prev = toks_[pos_ - 1];
    return prev.offset + prev.text.size() < peek().offset && peek(1).offset == peek().offset + 1 &&
           peek(1).kind != Tok::End;
  }

  Expr expr() {
    Expr lhs = term();
    while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      if (list_depth_ > 0 && negative_sign_ahead()) break;
      char op = next().text[0];
      lhs = make_binary(op, std::move(lhs), term());
    }
    return lhs;
  }

  Expr term() {
    Expr lhs = unary();
    while (peek().kind == Tok::Star || peek().kind == Tok::Slash) {
      char op = next().text[0];
      lhs = make_binary(op, std::move(lhs), unary());
    }
    return lhs;
  }

  Expr unary() {
    struct Depth {
      int& d;
      explicit Depth(int& depth) : d(depth) { ++d; }
      ~Depth() { --d; }
    } guard(nesting_);
    if (nesting_ > kMaxNesting) {
      throw error(peek(), "expression nested too deeply (more than " + std::to_string(kMaxNesting) + " levels)");
    }
    if (peek().kind == Tok::Minus) {
      Token m = next();
      Expr operand = unary();
      Expr e;
      e.kind = Expr::Kind::Negate;
      e.offset = m.offset;
      e.length = operand.offset + operand.length - m.offset;
      e.items.push_back(std::move(operand));
      return e;
    }
    return postfix();
  }

  Expr postfix() {
    Expr e = primary();
    while (peek().kind == Tok::LBracket) {
      count_operator(peek().offset);
      next();
      Expr index = expr();
      if (peek().kind != Tok::RBracket) throw error(peek(), "expected ']' after the index, but got " + describe(peek()));
      Token close = next();
      Expr ix;
      ix.kind = Expr::Kind::Index;
      ix.offset = e.offset;
      ix.length = close.offset + 1 - e.offset;
      ix.items.push_back(std::move(e));
      ix.items.push_back(std::move(index));
      e = std::move(ix);
    }
    return e;
  }

  static bool starts_expr(Tok k) {
    return k == Tok::Int || k == Tok::Ident || k == Tok::LParen || k == Tok::Minus;
  }

  Expr primary() {
    const Token& t = peek();
    if (t.kind == Tok::Int) {
      Token tok = next();
      Expr e;
      e.kind = Expr::Kind::Integer;
      e.value = integer(tok);
      e.offset = tok.offset;
      e.length = tok.text.size();
      return e;
    }
    if (t.kind == Tok::Ident) {
      if (t.text == "where") throw error(t, "'where' may appear only once");
      Token tok = next();
      Expr e;
      e.kind = Expr::Kind::Symbol;
      e.name = std::string(tok.text);
      e.offset = tok.offset;
      e.length = tok.text.size();
      return e;
    }
    if (t.kind == Tok::LParen) return parenthesised();
    if (t.kind == Tok::Tilde) throw error(t, "'~' cannot be used in a where expression");
    throw error(t, "expected an integer, a symbol or '(', but got " + describe(t));
  }

  // `(e)` is e; `(1 2 3)` and `(1, 2, 3)` are lists; `(+ a b)` is a prefix form.
  Expr parenthesised() {
    Token open = next();
    Tok k = peek().kind;
    bool prefix = (k == Tok::Plus || k == Tok::Star || k == Tok::Slash) ||
                  (k == Tok::Minus && peek(1).kind != Tok::RParen && starts_expr(peek(1).kind) &&
                   peek(1).offset > peek().offset + 1);
    if (prefix) return prefix_form(open);
    if (k == Tok::Ident && is_function(peek().text) && peek(1).kind != Tok::RParen) return call_form(open);
    std::vector<Expr> items;
    bool list = false;
    while (peek().kind != Tok::RParen) {
      if (peek().kind == Tok::End) throw ParseError("expected ')' to close the '(' opened here", open.offset, 1);
      if (!items.empty()) {
        list = true;
        if (peek().kind == Tok::Comma) next();
      }
      if (!starts_expr(peek().kind)) {
        throw error(peek(), "expected an expression or ')', but got " + describe(peek()));
      }
      // In a list, `(1 -2)` is two items: a '-' with a space before it and
      // none after starts a negative item, as in Lisp.
      list_depth_ += 1;
      items.push_back(expr());
      list_depth_ -= 1;
    }
    Token close = next();
    if (items.empty()) throw ParseError("empty parentheses: expected an expression or a list", open.offset, 2);
    if (!list) {
      Expr e = std::move(items.front());
      return e;
    }
    Expr e;
    e.kind = Expr::Kind::List;
    e.items = std::move(items);
    e.offset = open.offset;
    e.length = close.offset + 1 - open.offset;
    return e;
  }

  // Lisp-style prefix arithmetic, as in cl-waffe2's where forms: `(+ a b c)`,
  // `(- a)`, `(* 2 (+ h 1))`, `(/ a b)`; folded left.
  Expr prefix_form(const Token& open) {
    Token op = next();
    std::vector<Expr> args;
    while (peek().kind != Tok::RParen) {
      if (peek().kind == Tok::End) throw ParseError("expected ')' to close the '(' opened here", open.offset, 1);
      if (peek().kind == Tok::Comma) next();
      if (!starts_expr(peek().kind)) throw error(peek(), "expected an operand or ')', but got " + describe(peek()));
      args.push_back(operand());
    }
    Token close = next();
    if (args.empty()) throw error(op, "'" + std::string(op.text) + "' needs at least one operand");
    Expr e;
    if (args.size() == 1) {
      if (op.text[0] == '-') {
        e.kind = Expr::Kind::Negate;
        e.items.push_back(std::move(args[0]));
      } else if (op.text[0] == '/') {
        throw error(op, "'/' needs two operands");
      } else {
        e = std::move(args[0]);
      }
    } else {
      e = std::move(args[0]);
      for (std::size_t i = 1; i < args.size(); ++i) e = make_binary(op.text[0], std::move(e), std::move(args[i]));
    }
    e.offset = open.offset;
    e.length = close.offset + 1 - open.offset;
    return e;
  }

  // One operand of a prefix form: an atom or a parenthesised form, with an
  // optional sign and indexing (`(+ a -1 ks[0])`), never infix arithmetic.
  Expr operand() {
    Expr e = unary();
    if (peek().kind == Tok::Plus || peek().kind == Tok::Star || peek().kind == Tok::Slash ||
        (peek().kind == Tok::Minus && !negative_sign_ahead())) {
      throw error(peek(), "infix '" + std::string(peek().text) +
                              "' inside a prefix form: write (op a b) with operands only, or wrap infix arithmetic in parentheses");
    }
    return e;
  }

  static bool is_function(std::string_view name) {
    return name == "floor" || name == "car" || name == "first" || name == "second" || name == "third" ||
           name == "nth" || name == "if" || name == "shape" || name == "conv-out-size" || name == "pool-out-size";
  }

  // Lisp helpers seen in cl-waffe2 where forms: `(floor x)`, `(floor a b)`,
  // `(car l)`/`(first l)`, `(second l)`, `(third l)`, `(nth i l)`; written
  // back as infix (`l[0]`, `a / b`).
  Expr call_form(const Token& open) {
    Token fn = next();
    if (fn.text == "if") return if_form(open, fn);
    std::vector<Expr> args;
    while (peek().kind != Tok::RParen) {
      if (peek().kind == Tok::End) throw ParseError("expected ')' to close the '(' opened here", open.offset, 1);
      if (!starts_expr(peek().kind)) throw error(peek(), "expected an operand or ')', but got " + describe(peek()));
      args.push_back(operand());
    }
    Token close = next();
    auto arity = [&](std::size_t n) {
      if (args.size() != n) {
        throw error(fn, "'" + std::string(fn.text) + "' takes " + std::to_string(n) + " operand" + (n == 1 ? "" : "s") +
                            ", but got " + std::to_string(args.size()));
      }
    };
    auto index = [&](Expr list, std::int64_t k, Expr* at) {
      Expr ix;
      ix.kind = Expr::Kind::Index;
      ix.items.push_back(std::move(list));
      if (at) {
        ix.items.push_back(std::move(*at));
      } else {
        Expr i;
        i.kind = Expr::Kind::Integer;
        i.value = k;
        i.offset = fn.offset;
        i.length = fn.text.size();
        ix.items.push_back(std::move(i));
      }
      return ix;
    };
    auto integer_expr = [&](std::int64_t v) {
      Expr i;
      i.kind = Expr::Kind::Integer;
      i.value = v;
      i.offset = fn.offset;
      i.length = fn.text.size();
      return i;
    };
    Expr e;
    if (fn.text == "conv-out-size") {
      // cl-waffe2's nn/pool.lisp: (floor (+ 1 (/ (+ in (* 2 padding)
      // (* (- dilation) (- kernel-size 1)) -1) stride))), with `/` flooring.
      arity(5);
      Expr in = std::move(args[0]), pad = std::move(args[1]), dil = std::move(args[2]), k = std::move(args[3]),
           stride = std::move(args[4]);
      Expr span = make_binary('*', std::move(dil), make_binary('-', std::move(k), integer_expr(1)));
      Expr num = make_binary('-', make_binary('-', make_binary('+', std::move(in), make_binary('*', integer_expr(2), std::move(pad))),
                                              std::move(span)),
                             integer_expr(1));
      e = make_binary('+', make_binary('/', std::move(num), std::move(stride)), integer_expr(1));
    } else if (fn.text == "pool-out-size") {
      // nn/pool.lisp: (floor (+ 1 (/ (+ in (* 2 padding) (- kernel-size)) stride))).
      arity(4);
      Expr in = std::move(args[0]), pad = std::move(args[1]), k = std::move(args[2]), stride = std::move(args[3]);
      Expr num = make_binary('-', make_binary('+', std::move(in), make_binary('*', integer_expr(2), std::move(pad))), std::move(k));
      e = make_binary('+', make_binary('/', std::move(num), std::move(stride)), integer_expr(1));
    } else if (fn.text == "shape") {
      // (shape a) of a constructor argument that is a tensor's shape: the list itself.
      arity(1);
      e = std::move(args[0]);
    } else if (fn.text == "floor") {
      if (args.size() == 2) {
        e = make_binary('/', std::move(args[0]), std::move(args[1]));
      } else {
        arity(1);  // our '/' already floors, so (floor x) is x
        e = std::move(args[0]);
      }
    } else if (fn.text == "nth") {
      arity(2);
      e = index(std::move(args[1]), 0, &args[0]);
    } else {
      arity(1);
      std::int64_t k = fn.text == "second" ? 1 : fn.text == "third" ? 2 : 0;
      e = index(std::move(args[0]), k, nullptr);
    }
    e.offset = open.offset;
    e.length = close.offset + 1 - open.offset;
    return e;
  }

  // `(if (numberp x) then else)`, the only condition cl-waffe2's where forms use.
  Expr if_form(const Token& open, const Token& fn) {
    const Token& c = peek();
    if (c.kind != Tok::LParen || peek(1).kind != Tok::Ident || peek(1).text != "numberp" ||
        peek(2).kind != Tok::Ident || peek(3).kind != Tok::RParen) {
      throw error(c, "expected the condition '(numberp symbol)' after 'if' (the only condition supported), but got " +
                         describe(c));
    }
    next();
    next();
    Token x = next();
    next();
    Expr e;
    e.kind = Expr::Kind::IfNumber;
    Expr sym;
    sym.kind = Expr::Kind::Symbol;
    sym.name = std::string(x.text);
    sym.offset = x.offset;
    sym.length = x.text.size();
    e.items.push_back(std::move(sym));
    for (int i = 0; i < 2; ++i) {
      if (!starts_expr(peek().kind)) {
        throw error(peek(), std::string("expected the ") + (i ? "else" : "then") + " branch of 'if', but got " +
                                describe(peek()));
      }
      e.items.push_back(operand());
    }
    if (peek().kind != Tok::RParen) {
      throw error(peek().kind == Tok::End ? fn : peek(), "expected ')' after the else branch of 'if', but got " + describe(peek()));
    }
    Token close = next();
    e.offset = open.offset;
    e.length = close.offset + 1 - open.offset;
    return e;
  }

  void validate(const Declaration& d) const {
    auto once = [&](const std::vector<Argument>& args) {
      for (const auto& a : args) {
        const Subscript* first = nullptr;
        for (const auto& s : a.dims) {
          if (s.kind != Subscript::Kind::Batch) continue;
          if (first) {
            throw ParseError("'~' may appear only once in an argument, but " + a.str() + " has it twice", s.offset, 1);
          }
          first = &s;
        }
      }
    };
    once(d.inputs);
    once(d.outputs);
    // `~` in the outputs only is not an error: cl-waffe2's checker binds it
    // to no dims (shape.lisp, create-subscript-p), whatever its documentation says.
  }

  std::string_view text_;
  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  int list_depth_ = 0;  // > 0 while parsing the items of a list
  int nesting_ = 0;     // unary() recursion depth
  int operators_ = 0;   // binary operators built so far
};

}  // namespace

std::string Expr::str() const {
  switch (kind) {
    case Kind::Integer: return std::to_string(value);
    case Kind::Symbol: return name;
    case Kind::List: {
      std::string s = "(";
      for (std::size_t i = 0; i < items.size(); ++i) s += (i ? " " : "") + items[i].str();
      return s + ")";
    }
    case Kind::Binary: {
      auto side = [&](const Expr& e, bool right) {
        bool low = e.op == '+' || e.op == '-';
        bool paren = e.kind == Kind::Binary && ((op == '*' || op == '/') ? (low || right) : (right && low));
        return paren ? "(" + e.str() + ")" : e.str();
      };
      return side(items[0], false) + " " + op + " " + side(items[1], true);
    }
    case Kind::Negate: {
      const Expr& e = items[0];
      bool paren = e.kind == Kind::Binary;
      return "-" + (paren ? "(" + e.str() + ")" : e.str());
    }
    case Kind::Index: return items[0].str() + "[" + items[1].str() + "]";
    case Kind::IfNumber:
      return "(if (numberp " + items[0].str() + ") (" + items[1].str() + ") (" + items[2].str() + "))";
  }
  return "?";
}

bool Argument::has_batch() const {
  for (const auto& s : dims)
    if (s.kind == Subscript::Kind::Batch) return true;
  return false;
}

std::string Argument::str() const {
  std::string s = name.value_or("") + "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += " ";
    s += dims[i].kind == Subscript::Kind::Integer ? std::to_string(dims[i].value) : dims[i].name;
  }
  return s + "]";
}

std::vector<std::optional<int>> Declaration::inplace_of() const {
  std::vector<std::optional<int>> out;
  for (const auto& o : outputs) {
    std::optional<int> found;
    if (o.name) {
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].name == o.name) {
          found = static_cast<int>(i);
          break;
        }
      }
    }
    out.push_back(found);
  }
  return out;
}

bool Declaration::uses_batch_in_inputs() const {
  for (const auto& a : inputs)
    if (a.has_batch()) return true;
  return false;
}

bool Declaration::uses_batch_in_outputs() const {
  for (const auto& a : outputs)
    if (a.has_batch()) return true;
  return false;
}

std::string Declaration::str() const {
  std::string s;
  auto side = [&](const std::vector<Argument>& args) {
    for (std::size_t i = 0; i < args.size(); ++i) s += (i ? " " : "") + args[i].str();
  };
  side(inputs);
  s += inputs.empty() ? "-> " : " -> ";
  side(outputs);
  if (!where.empty()) {
    s += " where";
    for (const auto& b : where) s += " " + b.symbol + " = " + b.value.str();
  }
  return s;
}

Declaration parse(std::string_view text) { return Parser(text).declaration(); }

const Subscript* batch_only_in_outputs(const Declaration& d) {
  if (d.uses_batch_in_inputs()) return nullptr;
  for (const auto& a : d.outputs)
    for (const auto& s : a.dims)
      if (s.kind == Subscript::Kind::Batch) return &s;
  return nullptr;
}

bool is_name(std::string_view name) {
  if (name.empty() || !ident_start(name.front()) || name.back() == '-') return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

bool is_symbol(std::string_view name) {
  if (name.empty() || !ident_start(name.front()) || operator_char(name.back())) return false;
  for (char c : name)
    if (!ident_char(c)) return false;
  return true;
}

}  // namespace wfgen::subscript

#include "wfgen/expr/expr.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>
#include <system_error>

#include "wfgen/expr/language.hpp"
#include "wfgen/kernel_math.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::expr {

namespace M = wfgen::rt::math;

namespace {

std::int64_t wrapping_neg(std::int64_t x) {
  return static_cast<std::int64_t>(std::uint64_t{0} - static_cast<std::uint64_t>(x));
}

}  // namespace

// The tables language.hpp declares.
namespace detail {

constexpr OpInfo kOps[] = {
    {"bool", kPrimary, 0}, {"int", kPrimary, 0}, {"float", kPrimary, 0}, {"name", kPrimary, 0},
    {"-", kUnary, 1},      {"!", kUnary, 1},
    {"*", kMul, 1},        {"/", kMul, 4},       {"%", kMul, 4},         {"+", kAdd, 1},
    {"-", kAdd, 1},        {"<", kRel, 1},       {"<=", kRel, 1},        {">", kRel, 1},
    {">=", kRel, 1},       {"==", kEq, 1},       {"!=", kEq, 1},         {"&&", kAnd, 1},
    {"||", kOr, 1},        {"?:", kCond, 1},     {"call", kPrimary, 0},  {"convert", kPrimary, 1},
};
static_assert(std::size(kOps) == kOpCount && kOpCount == static_cast<int>(Op::Convert) + 1);

const OpInfo& info(Op op) { return kOps[static_cast<int>(op)]; }

// One line per function. C++ templates: $0 $1 $2 are the arguments, @ is the
// math helper namespace (wfgen::rt::math::). cpp_int/integer are for int
// arguments of Numeric functions.
#define REAL(body)                                                                                      \
  [](const double* a, bool f32) {                                                                      \
    return real_call(a, f32, [](auto x, [[maybe_unused]] auto y, [[maybe_unused]] auto z) { return body; }); \
  }
#define INT(body)                                                          \
  [](const std::int64_t* a) -> std::int64_t {                              \
    [[maybe_unused]] const std::int64_t x = a[0], y = a[1], z = a[2];      \
    return body;                                                           \
  }

const FnInfo kFunctions[] = {
    {"abs", 1, Rule::Numeric, 1, "std::fabs($0)", "@iabs($0)", REAL(std::fabs(x)), INT(x < 0 ? wrapping_neg(x) : x)},
    {"exp", 1, Rule::Float, 20, "@exp($0)", "", REAL(M::exp(x)), nullptr},
    {"log", 1, Rule::Float, 20, "std::log($0)", "", REAL(std::log(x)), nullptr},
    {"log1p", 1, Rule::Float, 20, "std::log1p($0)", "", REAL(std::log1p(x)), nullptr},
    {"expm1", 1, Rule::Float, 20, "std::expm1($0)", "", REAL(std::expm1(x)), nullptr},
    {"sqrt", 1, Rule::Float, 4, "std::sqrt($0)", "", REAL(std::sqrt(x)), nullptr},
    {"rsqrt", 1, Rule::Float, 6, "@rsqrt($0)", "", REAL(M::rsqrt(x)), nullptr},
    {"sin", 1, Rule::Float, 20, "std::sin($0)", "", REAL(std::sin(x)), nullptr},
    {"cos", 1, Rule::Float, 20, "std::cos($0)", "", REAL(std::cos(x)), nullptr},
    {"tan", 1, Rule::Float, 20, "std::tan($0)", "", REAL(std::tan(x)), nullptr},
    {"tanh", 1, Rule::Float, 20, "std::tanh($0)", "", REAL(std::tanh(x)), nullptr},
    {"sigmoid", 1, Rule::Float, 24, "@sigmoid($0)", "", REAL(M::sigmoid(x)), nullptr},
    {"erf", 1, Rule::Float, 20, "@erf($0)", "", REAL(M::erf(x)), nullptr},
    {"pow", 2, Rule::Float, 40, "std::pow($0, $1)", "", REAL(std::pow(x, y)), nullptr},
    {"fmod", 2, Rule::Float, 8, "std::fmod($0, $1)", "", REAL(std::fmod(x, y)), nullptr},
    {"min", 2, Rule::Numeric, 1, "@min($0, $1)", "@min($0, $1)", REAL(M::min(x, y)), INT(M::min(x, y))},
    {"max", 2, Rule::Numeric, 1, "@max($0, $1)", "@max($0, $1)", REAL(M::max(x, y)), INT(M::max(x, y))},
    {"select", 3, Rule::Select, 1, "", "", nullptr, nullptr},  // printed and run like ?:
    {"floor", 1, Rule::Numeric, 1, "std::floor($0)", "$0", REAL(std::floor(x)), INT(x)},
    {"ceil", 1, Rule::Numeric, 1, "std::ceil($0)", "$0", REAL(std::ceil(x)), INT(x)},
    {"round", 1, Rule::Numeric, 1, "std::round($0)", "$0", REAL(std::round(x)), INT(x)},
    {"sign", 1, Rule::Numeric, 1, "@sign($0)", "@sign($0)", REAL(M::sign(x)), INT(M::sign(x))},
    {"clamp", 3, Rule::Numeric, 2, "@clamp($0, $1, $2)", "@clamp($0, $1, $2)", REAL(M::clamp(x, y, z)),
     INT(M::clamp(x, y, z))},
    {"isnan", 1, Rule::Predicate, 1, "std::isnan($0)", "", REAL(std::isnan(x)), nullptr},
    {"isinf", 1, Rule::Predicate, 1, "std::isinf($0)", "", REAL(std::isinf(x)), nullptr},
    {"isfinite", 1, Rule::Predicate, 1, "std::isfinite($0)", "", REAL(std::isfinite(x)), nullptr},
    {"asin", 1, Rule::Float, 20, "std::asin($0)", "", REAL(std::asin(x)), nullptr},
    {"acos", 1, Rule::Float, 20, "std::acos($0)", "", REAL(std::acos(x)), nullptr},
    {"atan", 1, Rule::Float, 20, "std::atan($0)", "", REAL(std::atan(x)), nullptr},
    {"sinh", 1, Rule::Float, 20, "std::sinh($0)", "", REAL(std::sinh(x)), nullptr},
    {"cosh", 1, Rule::Float, 20, "std::cosh($0)", "", REAL(std::cosh(x)), nullptr},
    {"asinh", 1, Rule::Float, 20, "std::asinh($0)", "", REAL(std::asinh(x)), nullptr},
    {"acosh", 1, Rule::Float, 20, "std::acosh($0)", "", REAL(std::acosh(x)), nullptr},
    {"atanh", 1, Rule::Float, 20, "std::atanh($0)", "", REAL(std::atanh(x)), nullptr},
    // Computed on the 64-bit value and wrapped to the kernel's Int by the
    // interpreter: the same as the 32-bit helper for 32-bit Ints (x * 2^n
    // keeps its low 32 bits; floor(x / 2^n) of an int32 x is 0 or -1 from n = 31).
    {"shl", 2, Rule::Integer, 1, "", "@shl($0, $1)", nullptr, INT(M::shl(x, y))},
    {"shr", 2, Rule::Integer, 1, "", "@shr($0, $1)", nullptr, INT(M::shr(x, y))},
};
static_assert(std::size(kFunctions) == kFnCount && kFnCount == static_cast<int>(Fn::Shr) + 1);

#undef REAL
#undef INT

const FnInfo& info(Fn fn) { return kFunctions[static_cast<int>(fn)]; }


int int_bits(rt::DType d) { return d == rt::DType::i32 || d == rt::DType::u8 ? 32 : 64; }

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool ident_char(char c) { return ident_start(c) || digit(c); }

double float_value(const Expr& lit, rt::DType dtype) {
  if (dtype == rt::DType::f32) {
    float f = 0;
    auto r = std::from_chars(lit.text.data(), lit.text.data() + lit.text.size(), f);
    if (r.ec == std::errc()) return f;
    return static_cast<double>(static_cast<float>(lit.fvalue));
  }
  return lit.fvalue;
}

}  // namespace detail

using namespace detail;

namespace {

// --- tables ----------------------------------------------------------------------








// Named constants (Float).
struct ConstantInfo {
  const char* name;
  double value;
};
const ConstantInfo kConstants[] = {
    {"pi", 3.141592653589793238462643383279502884},
    {"e", 2.718281828459045235360287471352662498},
    {"inf", std::numeric_limits<double>::infinity()},
    {"nan", std::numeric_limits<double>::quiet_NaN()},
};

const ConstantInfo* find_constant(std::string_view name) {
  for (const auto& c : kConstants)
    if (name == c.name) return &c;
  return nullptr;
}

constexpr int kMaxDepth = 200;  // of the tree (a chain a + a + ... is as deep as it is long)
// Nested parentheses, calls and unary operators the recursive descent
// accepts: far beyond real kernels, and few enough that the parser stays
// within a thread's stack even under AddressSanitizer (a fuzz finding).
constexpr int kMaxNesting = 64;


// --- lexer -----------------------------------------------------------------------------

enum class Tok { Int, Float, Ident, Punct, End };

struct Token {
  Tok kind;
  std::string_view text;
  std::size_t offset;
};


std::string describe(const Token& t) {
  if (t.kind == Tok::End) return "the end of the expression";
  return "'" + quote(t.text, 30) + "'";
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
    std::size_t start = i;
    if (digit(c) || (c == '.' && i + 1 < s.size() && digit(s[i + 1]))) {
      bool is_float = false;
      while (i < s.size() && digit(s[i])) ++i;
      if (i < s.size() && s[i] == '.') {
        is_float = true;
        ++i;
        while (i < s.size() && digit(s[i])) ++i;
      }
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        is_float = true;
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
        if (i >= s.size() || !digit(s[i])) {
          throw ParseError("exponent has no digits", start, i - start);
        }
        while (i < s.size() && digit(s[i])) ++i;
      }
      if (i < s.size() && (ident_char(s[i]) || s[i] == '.')) {
        std::size_t end = i;
        while (end < s.size() && (ident_char(s[end]) || s[end] == '.')) ++end;
        throw ParseError("invalid suffix '" + quote(s.substr(i, end - i), 30) + "' on numeric literal", i,
                         end - i);
      }
      out.push_back({is_float ? Tok::Float : Tok::Int, s.substr(start, i - start), start});
      continue;
    }
    if (ident_start(c)) {
      while (i < s.size() && ident_char(s[i])) ++i;
      out.push_back({Tok::Ident, s.substr(start, i - start), start});
      continue;
    }
    static constexpr std::string_view kTwo[] = {"&&", "||", "==", "!=", "<=", ">="};
    bool matched = false;
    for (auto two : kTwo) {
      if (s.substr(i, 2) == two) {
        out.push_back({Tok::Punct, s.substr(i, 2), i});
        i += 2;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    if (std::strchr("+-*/%<>!?:(),", c) != nullptr && c != '\0') {
      out.push_back({Tok::Punct, s.substr(i, 1), i});
      ++i;
      continue;
    }
    if (c == '=') throw ParseError("'=' is not an operator; did you mean '=='?", i, 1);
    if (c == '&') throw ParseError("'&' is not an operator; did you mean '&&'?", i, 1);
    if (c == '|') throw ParseError("'|' is not an operator; did you mean '||'?", i, 1);
    if (c == '[') {
      throw ParseError("unexpected '[': a name stands for the element itself and takes no index", i, 1);
    }
    // One UTF-8 sequence at most, so the caret covers a whole character.
    std::size_t end = i + 1;
    if (static_cast<unsigned char>(c) >= 0xc0) {
      while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80 && end - i < 4) ++end;
    }
    throw ParseError("unexpected character '" + quote(s.substr(i, end - i)) + "'", i, end - i);
  }
  out.push_back({Tok::End, s.substr(s.size()), s.size()});
  return out;
}

// --- parser ------------------------------------------------------------------------------

struct Node {
  Expr e;
  int depth = 1;
};

Op binary_op(const Token& t, int* prec) {
  if (t.kind != Tok::Punct) return Op::Name;
  static constexpr std::pair<std::string_view, Op> kBinary[] = {
      {"*", Op::Mul}, {"/", Op::Div}, {"%", Op::Mod}, {"+", Op::Add}, {"-", Op::Sub},  {"<", Op::Lt},
      {"<=", Op::Le}, {">", Op::Gt},  {">=", Op::Ge}, {"==", Op::Eq}, {"!=", Op::Ne}, {"&&", Op::And},
      {"||", Op::Or},
  };
  for (auto [text, op] : kBinary) {
    if (t.text == text) {
      *prec = info(op).prec;
      return op;
    }
  }
  return Op::Name;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), toks_(lex(text)) {}

  Expr parse_all() {
    if (peek().kind == Tok::End) throw ParseError("empty expression", 0, text_.empty() ? 1 : text_.size());
    Node n = conditional();
    if (peek().kind != Tok::End) {
      throw ParseError("expected an operator or the end of the expression, found " + describe(peek()),
                       peek().offset, peek().text.size());
    }
    return std::move(n.e);
  }

 private:
  const Token& peek() const { return toks_[pos_]; }
  bool is(std::string_view punct) const { return peek().kind == Tok::Punct && peek().text == punct; }
  const Token& next() { return toks_[pos_++]; }

  [[noreturn]] void fail_expected(const std::string& what) {
    throw ParseError("expected " + what + ", found " + describe(peek()), peek().offset,
                     peek().kind == Tok::End ? 1 : peek().text.size());
  }

  Node make(Op op, std::vector<Node> kids, std::size_t begin, std::size_t end) {
    Node n;
    n.e.op = op;
    n.e.offset = begin;
    n.e.length = end - begin;
    for (auto& k : kids) {
      n.depth = std::max(n.depth, k.depth + 1);
      n.e.args.push_back(std::move(k.e));
    }
    if (n.depth > kMaxDepth) {
      throw ParseError("expression is nested too deeply (more than " + std::to_string(kMaxDepth) + " levels)",
                       begin, end - begin);
    }
    return n;
  }
  static std::size_t end_of(const Node& n) { return n.e.offset + n.e.length; }

  // cond := binary(or) [ '?' cond ':' cond ]
  Node conditional() {
    Node c = binary(kOr);
    if (!is("?")) return c;
    next();
    Node a = conditional();
    if (!is(":")) fail_expected("':' of the conditional '?'");
    next();
    Node b = conditional();
    std::size_t begin = c.e.offset, end = end_of(b);
    return make(Op::Cond, vec(std::move(c), std::move(a), std::move(b)), begin, end);
  }

  // Precedence climbing over the left-associative binary operators.
  Node binary(int min_prec) {
    Node lhs = unary();
    for (;;) {
      int prec = 0;
      Op op = binary_op(peek(), &prec);
      if (op == Op::Name || prec < min_prec) return lhs;
      next();
      Node rhs = binary(prec + 1);
      std::size_t begin = lhs.e.offset, end = end_of(rhs);
      lhs = make(op, vec(std::move(lhs), std::move(rhs)), begin, end);
    }
  }

  Node unary() {
    if (is("-") || is("!")) {
      const Token& t = next();
      Op op = t.text == "-" ? Op::Neg : Op::Not;
      if (++nesting_ > kMaxNesting) too_deep(t);
      Node operand = unary();
      --nesting_;
      std::size_t end = end_of(operand);
      return make(op, vec(std::move(operand)), t.offset, end);
    }
    return primary();
  }

  [[noreturn]] void too_deep(const Token& t) {
    throw ParseError("expression is nested too deeply (more than " + std::to_string(kMaxNesting) + " levels of parentheses, calls or unary operators)",
                     t.offset, t.text.size());
  }

  Node primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::Int: {
        next();
        std::uint64_t v = 0;
        auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (ec != std::errc() || p != t.text.data() + t.text.size() ||
            v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          throw ParseError("integer literal is too large for a 64-bit integer", t.offset, t.text.size());
        }
        Node n = make(Op::IntLit, {}, t.offset, t.offset + t.text.size());
        n.e.ivalue = static_cast<std::int64_t>(v);
        n.e.text = std::string(t.text);
        return n;
      }
      case Tok::Float: {
        next();
        double v = 0;
        auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (ec != std::errc() || p != t.text.data() + t.text.size() || !std::isfinite(v)) {
          throw ParseError("floating-point literal is out of range", t.offset, t.text.size());
        }
        Node n = make(Op::FloatLit, {}, t.offset, t.offset + t.text.size());
        n.e.fvalue = v;
        n.e.text = std::string(t.text);
        return n;
      }
      case Tok::Ident: {
        next();
        if (t.text == "true" || t.text == "false") {
          Node n = make(Op::BoolLit, {}, t.offset, t.offset + t.text.size());
          n.e.ivalue = t.text == "true";
          n.e.text = std::string(t.text);
          return n;
        }
        if (!is("(")) {
          Node n = make(Op::Name, {}, t.offset, t.offset + t.text.size());
          n.e.text = std::string(t.text);
          return n;
        }
        return call(t);
      }
      case Tok::Punct:
        if (is("(")) {
          const Token& open = next();
          if (++nesting_ > kMaxNesting) too_deep(open);
          Node inner = conditional();
          --nesting_;
          if (!is(")")) fail_expected("')'");
          next();
          return inner;
        }
        break;
      case Tok::End: break;
    }
    fail_expected("an expression");
  }

  Node call(const Token& name) {
    std::optional<Fn> fn = find_function(name.text);
    if (!fn) {
      std::vector<std::string> names;
      for (const auto& f : kFunctions) names.push_back(f.name);
      throw ParseError("unknown function '" + quote(name.text) + "'" + did_you_mean(name.text, names),
                       name.offset, name.text.size());
    }
    next();  // '('
    if (++nesting_ > kMaxNesting) too_deep(name);
    std::vector<Node> args;
    if (!is(")")) {
      for (;;) {
        args.push_back(conditional());
        if (is(",")) {
          next();
          continue;
        }
        if (is(")")) break;
        fail_expected("',' or ')' in the call to " + std::string(name.text));
      }
    }
    --nesting_;
    const Token& close = next();
    std::size_t end = close.offset + 1;
    int arity = fn_arity(*fn);
    if (static_cast<int>(args.size()) != arity) {
      throw ParseError(std::string(fn_name(*fn)) + " takes " + std::to_string(arity) +
                           (arity == 1 ? " argument" : " arguments") + ", but " + std::to_string(args.size()) +
                           (args.size() == 1 ? " was" : " were") + " given",
                       name.offset, end - name.offset);
    }
    Node n = make(Op::Call, std::move(args), name.offset, end);
    n.e.fn = *fn;
    n.e.text = std::string(name.text);
    return n;
  }

  template <class... Ns>
  static std::vector<Node> vec(Ns&&... ns) {
    std::vector<Node> v;
    (v.push_back(std::move(ns)), ...);
    return v;
  }

  std::string_view text_;
  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
};

// --- type checker ------------------------------------------------------------------------

bool numeric(Type t) { return t != Type::Bool; }

Type unify(Type a, Type b) { return a == Type::Float || b == Type::Float ? Type::Float : Type::Int; }


class Checker {
 public:
  Checker(rt::DType dtype, const Env& env) : dtype_(dtype), env_(env) {}

  Expr check(const Expr& e) {
    Expr out;
    out.op = e.op;
    out.fn = e.fn;
    out.text = e.text;
    out.ivalue = e.ivalue;
    out.fvalue = e.fvalue;
    out.offset = e.offset;
    out.length = e.length;
    out.checked_for = dtype_;
    for (const auto& a : e.args) out.args.push_back(check(a));
    auto& args = out.args;
    const std::string op = info(e.op).spelling;
    switch (e.op) {
      case Op::BoolLit: out.type = Type::Bool; break;
      case Op::IntLit: {
        out.type = Type::Int;
        if (int_bits(dtype_) == 32 && e.ivalue > std::numeric_limits<std::int32_t>::max()) {
          throw TypeError("integer literal " + std::to_string(e.ivalue) + " does not fit in the int32 arithmetic of " +
                              rt::dtype_name(dtype_) + " kernels",
                          e.offset, e.length);
        }
        break;
      }
      case Op::FloatLit: {
        out.type = Type::Float;
        if (!std::isfinite(float_value(e, dtype_))) {
          throw TypeError("floating-point literal " + quote(e.text) + " is out of range for f32", e.offset, e.length);
        }
        break;
      }
      case Op::Name: name(out); break;
      case Op::Neg:
        if (!numeric(args[0].type)) {
          throw TypeError("'-' needs a numeric operand, but it is bool", args[0].offset, args[0].length);
        }
        out.type = args[0].type;
        break;
      case Op::Not:
        if (args[0].type != Type::Bool) {
          throw TypeError("'!' needs a bool operand, but it is " + std::string(type_name(args[0].type)) +
                              "; compare it with 0",
                          args[0].offset, args[0].length);
        }
        out.type = Type::Bool;
        break;
      case Op::Mul:
      case Op::Div:
      case Op::Add:
      case Op::Sub:
        need_numeric_operands(op, args);
        out.type = promote_pair(args);
        break;
      case Op::Mod:
        for (int i = 0; i < 2; ++i) {
          if (args[i].type != Type::Int) {
            std::string hint = rt::dtype_is_float(dtype_) && args[i].type == Type::Float ? "; use fmod for floats" : "";
            throw TypeError("'%' needs int operands, but the " + side(i) + " operand is " +
                                type_name(args[i].type) + hint,
                            args[i].offset, args[i].length);
          }
        }
        out.type = Type::Int;
        break;
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
        need_numeric_operands(op, args);
        promote_pair(args);
        out.type = Type::Bool;
        break;
      case Op::Eq:
      case Op::Ne:
        if ((args[0].type == Type::Bool) != (args[1].type == Type::Bool)) {
          throw TypeError("'" + op + "' cannot compare " + type_name(args[0].type) + " with " +
                              type_name(args[1].type),
                          out.offset, out.length);
        }
        if (args[0].type != Type::Bool) promote_pair(args);
        out.type = Type::Bool;
        break;
      case Op::And:
      case Op::Or:
        for (int i = 0; i < 2; ++i) {
          if (args[i].type != Type::Bool) {
            throw TypeError("'" + op + "' needs bool operands, but the " + side(i) + " operand is " +
                                type_name(args[i].type) + "; compare it with 0",
                            args[i].offset, args[i].length);
          }
        }
        out.type = Type::Bool;
        break;
      case Op::Cond: out.type = select(out, "'?:'"); break;
      case Op::Call: call(out); break;
      case Op::Convert: WFGEN_ASSERT(false, "check() of an already checked tree");
    }
    return out;
  }

 private:
  static std::string side(int i) { return i == 0 ? "left" : "right"; }

  void need_numeric_operands(const std::string& op, const std::vector<Expr>& args) {
    for (int i = 0; i < 2; ++i) {
      if (!numeric(args[i].type)) {
        throw TypeError("'" + op + "' needs numeric operands, but the " + side(i) + " operand is bool",
                        args[i].offset, args[i].length);
      }
    }
  }

  // Converts int operands to float when the other is float; returns the type.
  Type promote_pair(std::vector<Expr>& args) {
    Type t = unify(args[0].type, args[1].type);
    for (auto& a : args) to_type(a, t);
    return t;
  }

  void to_type(Expr& a, Type t) {
    if (a.type == t) return;
    WFGEN_ASSERT(a.type == Type::Int && t == Type::Float, "only int -> float is implicit");
    Expr c;
    c.op = Op::Convert;
    c.offset = a.offset;
    c.length = a.length;
    c.checked_for = dtype_;
    c.type = Type::Float;
    c.args.push_back(std::move(a));
    a = std::move(c);
  }

  void name(Expr& out) {
    auto it = env_.find(out.text);
    if (it != env_.end()) {
      out.binding = it->second;
      out.type = it->second.kind == Binding::Kind::Element ? Binding::element(it->second.dtype).type
                                                           : it->second.type;
      out.binding.type = out.type;
      return;
    }
    if (const ConstantInfo* c = find_constant(out.text)) {
      out.binding.kind = Binding::Kind::Constant;
      out.binding.type = Type::Float;
      out.type = Type::Float;
      out.fvalue = c->value;
      return;
    }
    if (find_function(out.text)) {
      throw TypeError("'" + out.text + "' is a function; call it as " + out.text + "(...)", out.offset, out.length);
    }
    std::vector<std::string> names;
    for (const auto& [n, b] : env_) names.push_back(n);
    for (const auto& c : kConstants) names.push_back(c.name);
    throw TypeError("unknown name '" + quote(out.text) + "'" + did_you_mean(out.text, names), out.offset,
                    out.length);
  }

  // c ? a : b and select(c, a, b).
  Type select(Expr& out, const std::string& what) {
    auto& args = out.args;
    if (args[0].type != Type::Bool) {
      throw TypeError("the condition of " + what + " must be bool, but it is " + type_name(args[0].type) +
                          "; compare it with 0",
                      args[0].offset, args[0].length);
    }
    Type a = args[1].type, b = args[2].type;
    if ((a == Type::Bool) != (b == Type::Bool)) {
      throw TypeError("the branches of " + what + " have different types: " + type_name(a) + " and " +
                          type_name(b),
                      out.offset, out.length);
    }
    if (a == Type::Bool) return Type::Bool;
    Type t = unify(a, b);
    to_type(args[1], t);
    to_type(args[2], t);
    return t;
  }

  void call(Expr& out) {
    const FnInfo& f = info(out.fn);
    std::size_t name_length = std::strlen(f.name);
    auto& args = out.args;
    if (f.rule == Rule::Select) {
      out.type = select(out, "select");
      return;
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (!numeric(args[i].type)) {
        std::string which = args.size() == 1 ? "its argument" : "argument " + std::to_string(i + 1);
        throw TypeError(std::string(f.name) + " needs numeric arguments, but " + which + " is bool",
                        args[i].offset, args[i].length);
      }
    }
    switch (f.rule) {
      case Rule::Float:
        if (!rt::dtype_is_float(dtype_)) {
          throw TypeError(std::string(f.name) + " needs a floating-point dtype, but this kernel is for " +
                              rt::dtype_name(dtype_),
                          out.offset, name_length);
        }
        for (auto& a : args) to_type(a, Type::Float);
        out.type = Type::Float;
        break;
      case Rule::Numeric: {
        Type t = Type::Int;
        for (auto& a : args) t = unify(t, a.type);
        for (auto& a : args) to_type(a, t);
        out.type = t;
        break;
      }
      case Rule::Predicate:
        for (auto& a : args) to_type(a, Type::Float);
        out.type = Type::Bool;
        break;
      case Rule::Integer:
        for (std::size_t i = 0; i < args.size(); ++i) {
          if (args[i].type != Type::Int) {
            std::string which = args.size() == 1 ? "its argument" : "argument " + std::to_string(i + 1);
            throw TypeError(std::string(f.name) + " needs int arguments, but " + which + " is float", args[i].offset, args[i].length);
          }
        }
        out.type = Type::Int;
        break;
      case Rule::Select: break;
    }
  }

  rt::DType dtype_;
  const Env& env_;
};

template <class F>
void walk(const Expr& e, F&& f) {
  f(e);
  for (const auto& a : e.args) walk(a, f);
}

}  // namespace

// --- public API ----------------------------------------------------------------------------

const char* type_name(Type t) {
  switch (t) {
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
  }
  return "?";
}

Binding Binding::element(rt::DType d) {
  Binding b;
  b.kind = Kind::Element;
  b.dtype = d;
  b.type = rt::dtype_is_float(d) ? Type::Float : Type::Int;
  return b;
}

Binding Binding::scalar(Type t) {
  Binding b;
  b.kind = Kind::Scalar;
  b.type = t;
  return b;
}

const char* op_spelling(Op op) { return info(op).spelling; }
const char* fn_name(Fn fn) { return info(fn).name; }
int fn_arity(Fn fn) { return info(fn).arity; }

std::optional<Fn> find_function(std::string_view name) {
  for (int i = 0; i < kFnCount; ++i)
    if (name == kFunctions[i].name) return static_cast<Fn>(i);
  return std::nullopt;
}


Expr parse(std::string_view text) { return Parser(text).parse_all(); }

Expr check(const Expr& e, rt::DType dtype, const Env& env) { return Checker(dtype, env).check(e); }

Expr compile(std::string_view text, rt::DType dtype, const Env& env) { return check(parse(text), dtype, env); }

std::string cpp_type(rt::DType d) { return rt::dtype_cpp_type(d); }



std::vector<std::string> names_used(const Expr& e) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  walk(e, [&](const Expr& n) {
    if (n.op != Op::Name) return;
    bool constant = n.checked() ? n.binding.kind == Binding::Kind::Constant : find_constant(n.text) != nullptr;
    if (!constant && seen.insert(n.text).second) out.push_back(n.text);
  });
  return out;
}

Expr substitute(const Expr& e, const std::map<std::string, Expr>& replacements) {
  WFGEN_ASSERT(!e.checked(), "substitute() works on parsed, unchecked trees");
  if (e.op == Op::Name) {
    auto it = replacements.find(e.text);
    if (it != replacements.end()) {
      Expr r = it->second;
      std::size_t offset = e.offset, length = e.length;
      std::function<void(Expr&)> relocate = [&](Expr& n) {
        n.offset = offset;
        n.length = length;
        for (auto& a : n.args) relocate(a);
      };
      relocate(r);
      return r;
    }
    return e;
  }
  Expr out = e;
  for (auto& a : out.args) a = substitute(a, replacements);
  return out;
}

bool is_constant(const Expr& e) { return names_used(e).empty(); }

bool is_cheap(const Expr& e) {
  bool cheap = true;
  walk(e, [&](const Expr& n) {
    if (n.op == Op::Call && info(n.fn).rule != Rule::Numeric && info(n.fn).rule != Rule::Select &&
        info(n.fn).rule != Rule::Predicate && info(n.fn).rule != Rule::Integer)
      cheap = false;
  });
  return cheap;
}

int cost(const Expr& e) {
  int total = 0;
  walk(e, [&](const Expr& n) { total += n.op == Op::Call ? info(n.fn).cost : info(n.op).cost; });
  return total;
}

int depth(const Expr& e) {
  int d = 0;
  for (const auto& a : e.args) d = std::max(d, depth(a));
  return d + 1;
}

}  // namespace wfgen::expr

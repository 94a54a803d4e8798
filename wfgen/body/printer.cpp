// The printer behind Expr::str() and same_tree() (body.hpp): the shortest
// text that parses back to the same tree, parentheses only where the
// precedence needs them.
#include "wfgen/body/body.hpp"

#include <charconv>
#include <cmath>
#include <string>

namespace wfgen::body {

namespace {

// The binding strength of the comparisons, as the parser has it.
constexpr int kComparison = 4;

// Binding strength for the printer: higher binds tighter.
int precedence(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Int: return e.ivalue < 0 ? 7 : 10;
    case Expr::Kind::Float: return std::signbit(e.fvalue) ? 7 : 10;
    case Expr::Kind::Bool: case Expr::Kind::Name: case Expr::Kind::Tuple: case Expr::Kind::List: return 10;
    case Expr::Kind::Call: case Expr::Kind::Attribute: case Expr::Kind::Subscript: return 9;
    case Expr::Kind::Unary: return e.op == "not" ? 3 : 7;
    case Expr::Kind::Binary: {
      const std::string& o = e.op;
      if (o == "or") return 1;
      if (o == "and") return 2;
      if (o == "+" || o == "-") return 5;
      if (o == "*" || o == "/" || o == "@" || o == "%") return 6;
      if (o == "**") return 8;
      return kComparison;
    }
  }
  return 10;
}

std::string format_float(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // keep it a Float ('n': inf, nan)
  return s;
}

void print(const Expr& e, std::string& out);

void print_wrapped(const Expr& e, bool parens, std::string& out) {
  if (parens) out += '(';
  print(e, out);
  if (parens) out += ')';
}

void print(const Expr& e, std::string& out) {
  switch (e.kind) {
    case Expr::Kind::Int: out += std::to_string(e.ivalue); return;
    case Expr::Kind::Float: out += format_float(e.fvalue); return;
    case Expr::Kind::Bool: out += e.ivalue ? "true" : "false"; return;
    case Expr::Kind::Name: out += e.name; return;
    case Expr::Kind::Unary: {
      const Expr& x = *e.operands.at(0);
      if (e.op == "not") {
        out += "not ";
        print_wrapped(x, precedence(x) < 3, out);
        return;
      }
      out += e.op;
      std::string inner;
      print_wrapped(x, precedence(x) < 7, inner);
      // `-` before a literal would parse as a negative literal: -(5), -(0).
      if ((x.kind == Expr::Kind::Int || x.kind == Expr::Kind::Float) && !inner.empty() && inner[0] != '-') {
        inner = "(" + inner + ")";
      }
      if (!inner.empty() && inner[0] == '-') out += ' ';
      out += inner;
      return;
    }
    case Expr::Kind::Binary: {
      const Expr& l = *e.operands.at(0);
      const Expr& r = *e.operands.at(1);
      const int p = precedence(e), pl = precedence(l), pr = precedence(r);
      bool lp, rp;
      if (e.op == "**") {
        lp = pl <= 8;
        rp = pr < 7;
      } else if (p == kComparison) {
        lp = pl <= p;
        rp = pr <= p;
      } else {
        lp = pl < p;
        rp = pr <= p;
      }
      print_wrapped(l, lp, out);
      out += ' ';
      out += e.op;
      out += ' ';
      print_wrapped(r, rp, out);
      return;
    }
    case Expr::Kind::Call: {
      const Expr& callee = *e.operands.at(0);
      print_wrapped(callee, precedence(callee) < 9, out);
      out += '(';
      for (std::size_t i = 0; i < e.args.size(); ++i) {
        if (i > 0) out += ", ";
        if (e.args[i].keyword) out += *e.args[i].keyword + "=";
        if (e.args[i].value) print(*e.args[i].value, out);
      }
      out += ')';
      return;
    }
    case Expr::Kind::Attribute: {
      const Expr& o = *e.operands.at(0);
      // `(1).T`: `1.T` would read as a malformed number
      print_wrapped(o, precedence(o) < 9 || o.kind == Expr::Kind::Int || o.kind == Expr::Kind::Float, out);
      out += '.';
      out += e.name;
      return;
    }
    case Expr::Kind::Subscript: {
      const Expr& o = *e.operands.at(0);
      print_wrapped(o, precedence(o) < 9, out);
      out += '[';
      for (std::size_t i = 0; i < e.items.size(); ++i) {
        const SliceItem& it = e.items[i];
        if (i > 0) out += ", ";
        if (!it.is_slice) {
          if (it.index) print(*it.index, out);
          continue;
        }
        if (it.start) print(*it.start, out);
        out += ':';
        if (it.stop) print(*it.stop, out);
        if (it.step) {
          out += ':';
          print(*it.step, out);
        }
      }
      out += ']';
      return;
    }
    case Expr::Kind::Tuple:
    case Expr::Kind::List: {
      const bool tuple = e.kind == Expr::Kind::Tuple;
      out += tuple ? '(' : '[';
      for (std::size_t i = 0; i < e.operands.size(); ++i) {
        if (i > 0) out += ", ";
        print(*e.operands[i], out);
      }
      if (tuple && e.operands.size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
  }
}

bool same_ptr(const ExprPtr& a, const ExprPtr& b) {
  if (!a || !b) return !a && !b;
  return same_tree(*a, *b);
}

}  // namespace

std::string Expr::str() const {
  std::string out;
  print(*this, out);
  return out;
}

bool same_tree(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.name != b.name || a.op != b.op) return false;
  switch (a.kind) {
    case Expr::Kind::Int: case Expr::Kind::Bool:
      if (a.ivalue != b.ivalue) return false;
      break;
    case Expr::Kind::Float:
      if (!(a.fvalue == b.fvalue || (std::isnan(a.fvalue) && std::isnan(b.fvalue)))) return false;
      break;
    default:
      break;
  }
  if (a.operands.size() != b.operands.size() || a.args.size() != b.args.size() || a.items.size() != b.items.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.operands.size(); ++i)
    if (!same_ptr(a.operands[i], b.operands[i])) return false;
  for (std::size_t i = 0; i < a.args.size(); ++i) {
    if (a.args[i].keyword != b.args[i].keyword || !same_ptr(a.args[i].value, b.args[i].value)) return false;
  }
  for (std::size_t i = 0; i < a.items.size(); ++i) {
    const SliceItem& x = a.items[i];
    const SliceItem& y = b.items[i];
    if (x.is_slice != y.is_slice || !same_ptr(x.index, y.index) || !same_ptr(x.start, y.start) ||
        !same_ptr(x.stop, y.stop) || !same_ptr(x.step, y.step)) {
      return false;
    }
  }
  return true;
}

}  // namespace wfgen::body

// Tests of the model body language: every construct, precedence and
// associativity (through str()), exact offsets and lines, every error with
// its position (tests/body/errors.txt), limits, and a fuzz loop.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "wfgen/body/body.hpp"
#include "wfgen/support/diagnostics.hpp"

using namespace wfgen::body;
using Kind = Expr::Kind;

namespace {

// Parses, prints, and checks that the printed text parses to the same tree.
std::string norm(std::string_view text) {
  ExprPtr e = parse_expression(text);
  const std::string s = e->str();
  ExprPtr again = parse_expression(s);
  INFO("text: " << text << "  printed: " << s);
  REQUIRE(same_tree(*e, *again));
  REQUIRE(again->str() == s);
  return s;
}

// The source text an expression's range covers.
std::string_view src(std::string_view text, const Expr& e) { return text.substr(e.offset, e.length); }

struct Failure {
  std::string message;
  std::size_t offset = 0, length = 0;
};

template <class F>
Failure failure(F&& f) {
  try {
    f();
  } catch (const ParseError& e) {
    return {e.what(), e.offset(), e.length()};
  }
  FAIL("no ParseError");
  return {};
}
Failure body_error(std::string_view text) { return failure([&] { (void)parse(text); }); }
Failure expr_error(std::string_view text) { return failure([&] { (void)parse_expression(text); }); }

// Checks every offset/length of a tree lies inside the text and that
// children lie inside their parent.
void check_ranges(std::string_view text, const Expr& e) {
  REQUIRE(e.offset + e.length <= text.size());
  REQUIRE(e.length > 0);
  auto inside = [&](const ExprPtr& c) {
    if (!c) return;
    REQUIRE(c->offset >= e.offset);
    REQUIRE(c->offset + c->length <= e.offset + e.length);
    check_ranges(text, *c);
  };
  for (const auto& c : e.operands) inside(c);
  for (const auto& a : e.args) inside(a.value);
  for (const auto& it : e.items) {
    inside(it.index);
    inside(it.start);
    inside(it.stop);
    inside(it.step);
  }
}

void check_block_ranges(std::string_view text, const Block& b) {
  for (const auto& s : b) {
    REQUIRE(s->offset + s->length <= text.size());
    if (s->value) check_ranges(text, *s->value);
    if (s->range_start) check_ranges(text, *s->range_start);
    for (const auto& r : s->results) check_ranges(text, *r);
    check_block_ranges(text, s->body);
    check_block_ranges(text, s->orelse);
  }
}

}  // namespace

TEST_CASE("literals and names", "[body]") {
  ExprPtr e = parse_expression("42");
  CHECK(e->kind == Kind::Int);
  CHECK(e->ivalue == 42);
  e = parse_expression("2.5e-3");
  CHECK(e->kind == Kind::Float);
  CHECK(e->fvalue == 2.5e-3);
  CHECK(parse_expression(".5")->fvalue == 0.5);
  CHECK(parse_expression("1.")->kind == Kind::Float);
  for (auto [text, value] : {std::pair{"true", 1}, {"True", 1}, {"false", 0}, {"False", 0}}) {
    e = parse_expression(text);
    CHECK(e->kind == Kind::Bool);
    CHECK(e->ivalue == value);
  }
  e = parse_expression("hidden_2");
  CHECK(e->kind == Kind::Name);
  CHECK(e->name == "hidden_2");
  CHECK(norm("1.0") == "1.0");
  CHECK(norm("1.") == "1.0");
  CHECK(norm("1e20") == "1e+20");
  CHECK(norm("0.1") == "0.1");
  CHECK(norm("True") == "true");
  CHECK(norm("007") == "7");
}

TEST_CASE("negative literals fold, other minus signs stay unary", "[body]") {
  ExprPtr e = parse_expression("-1");
  CHECK(e->kind == Kind::Int);
  CHECK(e->ivalue == -1);
  CHECK(e->offset == 0);
  CHECK(e->length == 2);
  e = parse_expression("-9223372036854775808");
  CHECK(e->kind == Kind::Int);
  CHECK(e->ivalue == std::numeric_limits<std::int64_t>::min());
  CHECK(norm("-9223372036854775808") == "-9223372036854775808");
  CHECK(norm("(-9223372036854775808) ** 2") == "(-9223372036854775808) ** 2");
  e = parse_expression("-0.5");
  CHECK(e->kind == Kind::Float);
  CHECK(e->fvalue == -0.5);
  e = parse_expression("-x");
  CHECK(e->kind == Kind::Unary);
  CHECK(e->op == "-");
  e = parse_expression("-2 ** 2");  // -(2 ** 2), as in Python
  CHECK(e->kind == Kind::Unary);
  CHECK(e->operands[0]->op == "**");
  CHECK(norm("-2 ** 2") == "-2 ** 2");
  CHECK(norm("(-2) ** 2") == "(-2) ** 2");
  CHECK(norm("- -5") == "- -5");
  CHECK(parse_expression("- -5")->kind == Kind::Unary);
  // Only a minus directly before a number folds; printing keeps the difference.
  CHECK(norm("-(5)") == "-(5)");
  CHECK(parse_expression("-(5)")->kind == Kind::Unary);
  CHECK(norm("- -0") == "-(0)");  // fuzz finding: was printed "-0", which parses as the literal 0
  CHECK(norm("----0") == "- - -(0)");
  CHECK(norm("-(0.0)") == "-(0.0)");
  CHECK(norm("x - -1") == "x - -1");
  CHECK(norm("(-1).T") == "(-1).T");
  CHECK(norm("(1).T") == "(1).T");
  CHECK(norm("x.reshape(2, -1)") == "x.reshape(2, -1)");
}

TEST_CASE("precedence and associativity", "[body]") {
  const std::pair<const char*, const char*> cases[] = {
      {"a + b * c", "a + b * c"},
      {"(a + b) * c", "(a + b) * c"},
      {"a - b - c", "a - b - c"},
      {"a - (b - c)", "a - (b - c)"},
      {"(a - b) - c", "a - b - c"},
      {"a / b / c", "a / b / c"},
      {"a / (b * c)", "a / (b * c)"},
      {"a @ b + c", "a @ b + c"},
      {"a @ (b + c)", "a @ (b + c)"},
      {"a % b * c", "a % b * c"},
      {"a ** b ** c", "a ** b ** c"},
      {"(a ** b) ** c", "(a ** b) ** c"},
      {"-a ** b", "-a ** b"},
      {"(-a) ** b", "(-a) ** b"},
      {"a ** -b", "a ** -b"},
      {"a * -b", "a * -b"},
      {"-(a + b)", "-(a + b)"},
      {"a + b == c * d", "a + b == c * d"},
      {"(a == b) == c", "(a == b) == c"},
      {"a == (b == c)", "a == (b == c)"},
      {"not a == b", "not a == b"},
      {"(not a) == b", "(not a) == b"},
      {"not a and b", "not a and b"},
      {"not (a and b)", "not (a and b)"},
      {"a or b and c", "a or b and c"},
      {"(a or b) and c", "(a or b) and c"},
      {"a and b or c and d", "a and b or c and d"},
      {"not not a", "not not a"},
      {"-(not a)", "-(not a)"},
      {"a < b and b <= c", "a < b and b <= c"},
      {"a != b or a >= c or a > d", "a != b or a >= c or a > d"},
      {"(a + b).T", "(a + b).T"},
      {"(a @ b)[0]", "(a @ b)[0]"},
      {"f(a)[0].T", "f(a)[0].T"},
      {"((a))", "a"},
      {"a+b*c-d", "a + b * c - d"},
  };
  for (auto [in, out] : cases) {
    INFO(in);
    CHECK(norm(in) == out);
  }
  // Trees, not only texts.
  ExprPtr e = parse_expression("a - b - c");
  CHECK(e->op == "-");
  CHECK(e->operands[0]->op == "-");
  CHECK(e->operands[1]->name == "c");
  e = parse_expression("a ** b ** c");
  CHECK(e->operands[0]->name == "a");
  CHECK(e->operands[1]->op == "**");
  e = parse_expression("a or b and not c");
  CHECK(e->op == "or");
  CHECK(e->operands[1]->op == "and");
  CHECK(e->operands[1]->operands[1]->op == "not");
}

TEST_CASE("calls, attributes, methods, subscripts, tuples, lists", "[body]") {
  ExprPtr e = parse_expression("sum(x, axis=1, keepdims=true)");
  REQUIRE(e->kind == Kind::Call);
  CHECK(e->operands[0]->name == "sum");
  REQUIRE(e->args.size() == 3);
  CHECK(!e->args[0].keyword);
  CHECK(*e->args[1].keyword == "axis");
  CHECK(e->args[1].value->ivalue == 1);
  CHECK(*e->args[2].keyword == "keepdims");
  CHECK(e->args[2].value->kind == Kind::Bool);
  CHECK(norm("sum(x, axis=1, keepdims=true)") == "sum(x, axis=1, keepdims=true)");
  CHECK(norm("f()") == "f()");
  CHECK(norm("f(a, b,)") == "f(a, b)");
  CHECK(norm("f(\n  a,\n  b)") == "f(a, b)");

  e = parse_expression("x.T");
  REQUIRE(e->kind == Kind::Attribute);
  CHECK(e->name == "T");
  CHECK(e->operands[0]->name == "x");

  e = parse_expression("x.reshape(2, -1)");
  REQUIRE(e->kind == Kind::Call);
  REQUIRE(e->operands[0]->kind == Kind::Attribute);
  CHECK(e->operands[0]->name == "reshape");
  CHECK(e->args[1].value->ivalue == -1);
  CHECK(norm("x.permute(0, 2, 1).view(n, -1)") == "x.permute(0, 2, 1).view(n, -1)");

  e = parse_expression("x[:, 1:3, ::2, 0, a:, :b, ::]");
  REQUIRE(e->kind == Kind::Subscript);
  REQUIRE(e->items.size() == 7);
  CHECK(e->items[0].is_slice);
  CHECK((!e->items[0].start && !e->items[0].stop && !e->items[0].step));
  CHECK(e->items[1].start->ivalue == 1);
  CHECK(e->items[1].stop->ivalue == 3);
  CHECK(!e->items[1].step);
  CHECK((!e->items[2].start && !e->items[2].stop && e->items[2].step->ivalue == 2));
  CHECK(!e->items[3].is_slice);
  CHECK(e->items[3].index->ivalue == 0);
  CHECK(e->items[4].start->name == "a");
  CHECK(e->items[5].stop->name == "b");
  CHECK(norm("x[:, 1:3, ::2, 0, a:, :b, ::]") == "x[:, 1:3, ::2, 0, a:, :b, :]");
  CHECK(norm("x[-1]") == "x[-1]");
  CHECK(norm("x[1:n - 1:2]") == "x[1:n - 1:2]");
  CHECK(norm("x[(0, 1)]") == "x[(0, 1)]");

  e = parse_expression("(a, b)");
  CHECK(e->kind == Kind::Tuple);
  CHECK(e->operands.size() == 2);
  CHECK(norm("(a,)") == "(a,)");
  CHECK(norm("()") == "()");
  CHECK(norm("(a, (b, c),)") == "(a, (b, c))");
  e = parse_expression("[1, 2]");
  CHECK(e->kind == Kind::List);
  CHECK(norm("[1, 2,]") == "[1, 2]");
  CHECK(norm("[]") == "[]");
  CHECK(norm("[[1], [2, 3]]") == "[[1], [2, 3]]");
}

TEST_CASE("expression ranges cover their source text", "[body]") {
  const std::string text = "relu(X @ W1 + (b1))[0, :].T";
  ExprPtr e = parse_expression(text);
  CHECK(src(text, *e) == text);
  check_ranges(text, *e);
  const Expr& sub = *e->operands[0];
  CHECK(src(text, sub) == "relu(X @ W1 + (b1))[0, :]");
  CHECK(sub.items[0].offset == 20);
  CHECK(sub.items[0].length == 1);
  CHECK(sub.items[1].offset == 23);
  const Expr& call = *sub.operands[0];
  CHECK(src(text, call) == "relu(X @ W1 + (b1))");
  const Expr& sum = *call.args[0].value;
  CHECK(src(text, sum) == "X @ W1 + (b1)");
  CHECK(src(text, *sum.operands[0]) == "X @ W1");
  CHECK(src(text, *sum.operands[1]) == "b1");

  const std::string t2 = "sum(x, axis = -1)";
  e = parse_expression(t2);
  CHECK(e->args[1].offset == 7);
  CHECK(t2.substr(e->args[1].offset, e->args[1].length) == "axis = -1");
  CHECK(src(t2, *e->args[1].value) == "-1");

  const std::string t3 = "(a, b)";
  CHECK(src(t3, *parse_expression(t3)) == "(a, b)");
  const std::string t4 = "not  x";
  CHECK(src(t4, *parse_expression(t4)) == "not  x");
  const std::string t5 = "a ** (b)";
  CHECK(src(t5, *parse_expression(t5)) == "a ** (b)");
}

TEST_CASE("statements", "[body]") {
  const std::string text =
      "h = relu(X @ W1 + b1)\n"
      "a, b = split(h)\n"
      "for i in range(layers):\n"
      "  h = h + block(h, heads=4)\n"
      "for j in range(1, n):\n"
      "  pass\n"
      "if use_bias:\n"
      "  y = h @ W2 + b2\n"
      "elif other:\n"
      "  y = h\n"
      "else:\n"
      "  y = h @ W2\n"
      "return y, sum(y, axis=1, keepdims=true)\n";
  Program p = parse(text);
  CHECK(p.text == text);
  const Block& b = p.statements;
  REQUIRE(b.size() == 6);

  CHECK(b[0]->kind == Stmt::Kind::Assign);
  CHECK(b[0]->targets == std::vector<std::string>{"h"});
  CHECK(b[0]->target_offsets == std::vector<std::size_t>{0});
  CHECK(b[0]->value->str() == "relu(X @ W1 + b1)");

  CHECK(b[1]->kind == Stmt::Kind::Assign);
  CHECK(b[1]->targets == std::vector<std::string>{"a", "b"});
  CHECK(b[1]->target_offsets == std::vector<std::size_t>{22, 25});

  CHECK(b[2]->kind == Stmt::Kind::For);
  CHECK(b[2]->targets == std::vector<std::string>{"i"});
  CHECK(!b[2]->range_start);
  CHECK(b[2]->value->name == "layers");
  REQUIRE(b[2]->body.size() == 1);
  CHECK(b[2]->body[0]->value->str() == "h + block(h, heads=4)");

  CHECK(b[3]->kind == Stmt::Kind::For);
  CHECK(b[3]->range_start->ivalue == 1);
  CHECK(b[3]->value->name == "n");
  CHECK(b[3]->body[0]->kind == Stmt::Kind::Pass);

  const Stmt& s = *b[4];
  CHECK(s.kind == Stmt::Kind::If);
  CHECK(s.value->name == "use_bias");
  REQUIRE(s.body.size() == 1);
  REQUIRE(s.orelse.size() == 1);
  const Stmt& elif = *s.orelse[0];
  CHECK(elif.kind == Stmt::Kind::If);
  CHECK(elif.value->name == "other");
  CHECK(elif.body[0]->value->str() == "h");
  REQUIRE(elif.orelse.size() == 1);
  CHECK(elif.orelse[0]->value->str() == "h @ W2");

  CHECK(b[5]->kind == Stmt::Kind::Return);
  REQUIRE(b[5]->results.size() == 2);
  CHECK(b[5]->results[1]->str() == "sum(y, axis=1, keepdims=true)");
  check_block_ranges(text, b);
}

TEST_CASE("statement lines, offsets and lengths are exact", "[body]") {
  const std::string text =
      "# a comment line\n"
      "\n"
      "h = relu(X @ W1\n"
      "         + b1)   # joined inside ()\n"
      "\n"
      "if c:   # trailing comment\n"
      "    y = h\n"
      "        \n"
      "    # comment inside the block\n"
      "    z = (y,\n"
      "  y)\n"
      "else:\n"
      "    z = h\n"
      "return z\n";
  Program p = parse(text);
  const Block& b = p.statements;
  REQUIRE(b.size() == 3);
  auto at = [&](const Stmt& s) { return std::string(text.substr(s.offset, s.length)); };

  CHECK(b[0]->line == 3);
  CHECK(at(*b[0]) == "h = relu(X @ W1");
  CHECK(b[0]->value->str() == "relu(X @ W1 + b1)");
  CHECK(src(text, *b[0]->value) == "relu(X @ W1\n         + b1)");

  CHECK(b[1]->line == 6);
  CHECK(at(*b[1]) == "if c:");
  REQUIRE(b[1]->body.size() == 2);
  CHECK(b[1]->body[0]->line == 7);
  CHECK(at(*b[1]->body[0]) == "y = h");
  CHECK(b[1]->body[1]->line == 10);
  CHECK(at(*b[1]->body[1]) == "z = (y,");
  CHECK(b[1]->orelse[0]->line == 13);
  CHECK(at(*b[1]->orelse[0]) == "z = h");

  CHECK(b[2]->line == 14);
  CHECK(at(*b[2]) == "return z");
  CHECK(src(text, *b[2]->results[0]) == "z");
  const wfgen::SourceLoc loc = wfgen::loc_of_offset("", text, b[2]->offset);
  CHECK(loc.line == 14);
  CHECK(loc.col == 1);

  // elif keeps its own line and range.
  const std::string t2 = "if a:\n  pass\nelif b:\n  pass\n";
  Program p2 = parse(t2);
  const Stmt& elif = *p2.statements[0]->orelse[0];
  CHECK(elif.line == 3);
  CHECK(t2.substr(elif.offset, elif.length) == "elif b:");
  CHECK(t2.substr(p2.statements[0]->offset, p2.statements[0]->length) == "if a:");

  // for: the header's first line.
  const std::string t3 = "for  i in range(2, n):  # x\n  pass";
  Program p3 = parse(t3);
  CHECK(t3.substr(p3.statements[0]->offset, p3.statements[0]->length) == "for  i in range(2, n):");
  CHECK(p3.statements[0]->target_offsets[0] == 5);
  CHECK(src(t3, *p3.statements[0]->range_start) == "2");
  CHECK(src(t3, *p3.statements[0]->value) == "n");
}

TEST_CASE("layout: indentation, blank lines, CRLF, single-line bodies", "[body]") {
  CHECK(parse("").statements.empty());
  CHECK(parse("\n\n  # only comments\n").statements.empty());
  CHECK(parse("y = x").statements.size() == 1);  // no final newline
  CHECK(parse("y = x\r\nreturn y\r\n").statements.size() == 2);
  // The first statement sets the base indentation.
  Program p = parse("    y = x\n    if c:\n        y = z\n    return y\n");
  CHECK(p.statements.size() == 3);
  CHECK(p.statements[0]->offset == 4);
  // Nested blocks closed by one dedent.
  p = parse("if a:\n  if b:\n    if c:\n      pass\nreturn x\n");
  REQUIRE(p.statements.size() == 2);
  CHECK(p.statements[0]->body[0]->body[0]->body[0]->kind == Stmt::Kind::Pass);
  // A simple statement on the header's line.
  p = parse("if a: y = x\nelse: y = z\nfor i in range(3): pass\nreturn y\n");
  REQUIRE(p.statements.size() == 3);
  CHECK(p.statements[0]->body[0]->targets[0] == "y");
  CHECK(p.statements[0]->orelse[0]->value->name == "z");
  CHECK(p.statements[1]->body[0]->kind == Stmt::Kind::Pass);
  // Tabs between tokens are spaces; only indentation tabs are errors.
  CHECK(parse("y =\tx").statements.size() == 1);
  // Unpacking, tuples on the right, return forms.
  p = parse("a, b = x, y\n(c, d) = f(x)\nreturn (a, b)\n");
  CHECK(p.statements[0]->targets.size() == 2);
  CHECK(p.statements[0]->value->kind == Kind::Tuple);
  CHECK(p.statements[1]->targets == std::vector<std::string>{"c", "d"});
  CHECK(p.statements[2]->results.size() == 2);
  p = parse("return (a, b), c\n");
  CHECK(p.statements[0]->results.size() == 2);
  CHECK(p.statements[0]->results[0]->kind == Kind::Tuple);
  // Names that are Python keywords but not ours are names.
  p = parse("lambda_ = f(from_)\nx = None\n");
  CHECK(p.statements.size() == 2);
}

TEST_CASE("every error of tests/body/errors.txt, at its position", "[body][errors]") {
  std::ifstream in(std::string(WFGEN_TEST_DATA) + "/body/errors.txt");
  REQUIRE(in);
  struct Case {
    std::string header;
    std::string text;
    int line_no;
  };
  std::vector<Case> cases;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.rfind("===", 0) == 0) {
      cases.push_back({line.substr(4), "", n});
    } else if (!cases.empty()) {
      cases.back().text += line + "\n";
    }
  }
  REQUIRE(cases.size() > 60);
  for (Case& c : cases) {
    bool expr = c.header.rfind("expr ", 0) == 0;
    std::string h = expr ? c.header.substr(5) : c.header;
    // The input ends before the blank line that separates it from the next case.
    if (expr && !c.text.empty()) c.text.pop_back();
    const auto colon1 = h.find(':');
    const auto colon2 = h.find(':', colon1 + 1);
    const int want_line = std::stoi(h.substr(0, colon1));
    const int want_col = std::stoi(h.substr(colon1 + 1, colon2 - colon1 - 1));
    const std::string want = h.substr(colon2 + 2);
    INFO("errors.txt:" << c.line_no << ": " << c.text);
    const Failure f = expr ? expr_error(c.text) : body_error(c.text);
    const wfgen::SourceLoc loc = wfgen::loc_of_offset("", c.text, f.offset);
    CHECK(f.message == want);
    CHECK(loc.line == want_line);
    CHECK(loc.col == want_col);
    CHECK(f.length >= 1);
    CHECK(f.offset + f.length <= std::max<std::size_t>(c.text.size(), 1) + 1);
    CHECK(f.message.back() != '.');
    CHECK(!std::isupper(static_cast<unsigned char>(f.message[0])));
  }
}

TEST_CASE("error ranges", "[body][errors]") {
  Failure f = body_error("y = \"relu\"\n");
  CHECK(f.offset == 4);
  CHECK(f.length == 6);  // the whole string
  f = body_error("h = relu(x\nreturn h\n");
  CHECK(f.offset == 8);  // the opening bracket
  CHECK(f.length == 1);
  f = body_error("y = 1.2.3 + x");
  CHECK(f.offset == 4);
  CHECK(f.length == 5);
  f = body_error("x.T = y");
  CHECK(f.length == 3);
  f = body_error("y = sum(axis=1, x + 1)");
  CHECK(f.offset == 16);
  CHECK(f.length == 5);
  f = body_error("y = sum(x, axis=1, axis=2)");
  CHECK(f.length == 4);
  f = body_error("if c:\n  y = x\n z = y\n");
  CHECK(f.length == 1);  // 'z'
  f = expr_error("a < b < c");
  CHECK(f.offset == 6);
  f = body_error("y = 1\n\tz = 2\n");
  CHECK(f.offset == 6);
}

TEST_CASE("limits: nesting and statement count", "[body][limits]") {
  auto nested = [](int n, std::string_view open, std::string_view mid, std::string_view close) {
    std::string s;
    for (int i = 0; i < n; ++i) s += open;
    s += mid;
    for (int i = 0; i < n; ++i) s += close;
    return s;
  };
  CHECK_NOTHROW(parse_expression(nested(150, "(", "x", ")")));
  // The documented boundaries.
  CHECK_NOTHROW(parse_expression(nested(200, "(", "x", ")")));
  CHECK(expr_error(nested(201, "(", "x", ")")).message == "expression is nested too deeply (more than 200 levels)");
  std::string chain = "x";
  for (int i = 0; i < 199; ++i) chain += " + x";
  CHECK_NOTHROW(parse_expression(chain));
  chain += " + x";
  CHECK(expr_error(chain).message == "expression is nested too deeply (more than 200 levels)");
  CHECK_NOTHROW(parse_expression(nested(150, "f(", "x", ")")));
  const std::string deep = "expression is nested too deeply (more than 200 levels)";
  CHECK(expr_error(nested(100000, "(", "x", ")")).message == deep);
  CHECK(expr_error(nested(100000, "[", "x", "]")).message == deep);
  CHECK(expr_error(nested(100000, "f(", "x", ")")).message == deep);
  CHECK(expr_error(nested(100000, "-", "x", "")).message == deep);
  CHECK(expr_error(nested(100000, "not ", "x", "")).message == deep);
  CHECK(expr_error(nested(100000, "x ** ", "x", "")).message == deep);
  CHECK(expr_error(nested(100000, "", "x", "[0]")).message == deep);
  CHECK(expr_error(nested(100000, "", "x", ".T")).message == deep);
  CHECK(expr_error(nested(100000, "", "x", " + x")).message == deep);
  CHECK(expr_error(nested(100000, "", "x", " and x")).message == deep);
  CHECK(expr_error(nested(100000, "", "x", "(y)")).message.find("only names and methods") == 0);
  // Wide is fine: long argument lists do not make the tree deep.
  std::string wide = "f(x";
  for (int i = 0; i < 10000; ++i) wide += ", x";
  wide += ")";
  CHECK(parse_expression(wide)->args.size() == 10001);

  std::string blocks;
  for (int i = 0; i < 300; ++i) blocks += std::string(static_cast<std::size_t>(i), ' ') + "if c:\n";
  blocks += std::string(300, ' ') + "pass\n";
  CHECK(body_error(blocks).message ==
        "blocks are nested too deeply (more than 200 levels; each 'elif' counts as one)");
  std::string elifs = "if c:\n  pass\n";
  for (int i = 0; i < 300; ++i) elifs += "elif c:\n  pass\n";
  CHECK(body_error(elifs).message.find("blocks are nested too deeply") == 0);
  std::string fine = "if c:\n  pass\n";
  for (int i = 0; i < 150; ++i) fine += "elif c:\n  pass\n";
  CHECK(parse(fine).statements.size() == 1);

  std::string many;
  for (std::size_t i = 0; i <= kMaxStatements; ++i) many += "pass\n";
  const Failure f = body_error(many);
  CHECK(f.message == "the body has too many statements (more than 100000)");
  CHECK(wfgen::loc_of_offset("", many, f.offset).line == 100001);
}

TEST_CASE("random token soups never crash", "[body][fuzz]") {
  const std::vector<std::string> pieces = {
      "x", "y", "f", "range", "for", "in", "if", "elif", "else", "return", "pass", "and", "or", "not",
      "true", "1", "2.5", "-", "+", "*", "/", "@", "%", "**", "==", "!=", "<", "<=", ">", ">=", "=",
      "(", ")", "[", "]", ",", ".", ":", "T", "\n", "\n  ", "\n    ", " ", "#c\n", "9999999999999999999999",
      "1.2.3", "\t", "'", "axis=", "$", ";", "\r\n", "1e", "-9223372036854775808", "\\"};
  std::mt19937 rng(12345);
  int parsed = 0, errors = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      text += pieces[rng() % pieces.size()];
      if (rng() % 3 == 0) text += ' ';
    }
    const bool expr = round % 2 == 1;
    try {
      if (expr) {
        ExprPtr e = parse_expression(text);
        check_ranges(text, *e);
        ExprPtr again = parse_expression(e->str());
        REQUIRE(same_tree(*e, *again));
      } else {
        Program p = parse(text);
        check_block_ranges(text, p.statements);
      }
      ++parsed;
    } catch (const ParseError& e) {
      ++errors;
      REQUIRE(e.offset() <= text.size());
      REQUIRE(std::string(e.what()).size() > 0);
    }
  }
  CHECK(parsed > 0);
  CHECK(errors > 0);
}

TEST_CASE("random valid expressions round-trip through str()", "[body][fuzz]") {
  std::mt19937 rng(777);
  const char* binops[] = {"+", "-", "*", "/", "@", "%", "**", "==", "!=", "<", "<=", ">", ">=", "and", "or"};
  std::function<std::string(int)> gen = [&](int depth) -> std::string {
    const unsigned r = depth <= 0 ? rng() % 4 : rng() % 12;
    switch (r) {
      case 0: return "x";
      case 1: return std::to_string(rng() % 100);
      case 2: return "2.5";
      case 3: return "true";
      case 4: return "-" + gen(depth - 1);
      case 5: return "not " + gen(depth - 1);
      case 6: return "(" + gen(depth - 1) + ")";
      case 7: return gen(depth - 1) + ".T";
      case 8: return "f(" + gen(depth - 1) + ", k=" + gen(depth - 1) + ")";
      case 9: return gen(depth - 1) + "[" + gen(depth - 1) + ":, ::2]";
      case 10: return "(" + gen(depth - 1) + ", " + gen(depth - 1) + ")";
      default: return gen(depth - 1) + " " + binops[rng() % 15] + " " + gen(depth - 1);
    }
  };
  int ok = 0;
  for (int i = 0; i < 5000; ++i) {
    const std::string text = gen(5);
    try {
      ExprPtr e = parse_expression(text);
      check_ranges(text, *e);
      const std::string s = e->str();
      ExprPtr again = parse_expression(s);
      INFO(text << "  ->  " << s);
      REQUIRE(same_tree(*e, *again));
      REQUIRE(again->str() == s);
      ++ok;
    } catch (const ParseError& e) {
      // Generated chains of comparisons, `x == not y` and `1.T` are rejected by design.
      const std::string m = e.what();
      INFO(text << ": " << m);
      REQUIRE((m.find("chained") != std::string::npos || m.find("found 'not'") != std::string::npos ||
               m.find("only names and methods") != std::string::npos ||
               m.find("malformed number") != std::string::npos));
    }
  }
  CHECK(ok > 2500);
}

TEST_CASE("assert: a condition and an optional string message, elsewhere 'assert' is a name", "[body][assert]") {
  const std::string text = "assert d % h == 0, \"d must be divisible by h\"\nassert n > 0 and m < 2\nassert = 3\nreturn x\n";
  Program p = parse(text);
  REQUIRE(p.statements.size() == 4);
  const Stmt& a = *p.statements[0];
  CHECK(a.kind == Stmt::Kind::Assert);
  CHECK(a.value->str() == "d % h == 0");
  CHECK(a.message == "d must be divisible by h");
  CHECK(text.substr(a.message_offset, 1) == "\"");
  CHECK(a.line == 1);
  CHECK(a.length == text.find('\n'));
  const Stmt& b = *p.statements[1];
  CHECK(b.kind == Stmt::Kind::Assert);
  CHECK(b.message.empty());
  CHECK(b.value->str() == "n > 0 and m < 2");
  CHECK(p.statements[2]->kind == Stmt::Kind::Assign);
  CHECK(p.statements[2]->targets[0] == "assert");
  // Single quotes too; a '#' inside the message is not a comment.
  Program q = parse("assert k >= 1, 'k # must be positive'  # a comment\n");
  CHECK(q.statements[0]->message == "k # must be positive");
}

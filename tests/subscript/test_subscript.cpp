// Unit tests of the Subscript DSL parser and the shape library: AST details,
// parse-error offsets, Dim arithmetic/folding/printing, parse_shape and
// parse_value. The end-to-end corpus is in test_cases.cpp.
#include <catch2/catch.hpp>

#include <limits>
#include <stdexcept>

#include "wfgen/shape/shape.hpp"
#include "wfgen/subscript/subscript.hpp"

using namespace wfgen;
using subscript::Expr;
using subscript::Subscript;

namespace {

// The byte offset of the ParseError `text` raises; fails if it parses.
std::size_t error_offset(const std::string& text, std::string* message = nullptr) {
  try {
    subscript::parse(text);
  } catch (const subscript::ParseError& e) {
    if (message) *message = e.what();
    return e.offset();
  }
  FAIL("expected a parse error for: " << text);
  return 0;
}

const Expr& where_value(const subscript::Declaration& d, std::size_t i) { return d.where.at(i).value; }

}  // namespace

TEST_CASE("parse: arguments, pointer names and subscripts", "[subscript][parse]") {
  auto d = subscript::parse("A[~ i j] B[~ j k] C[~ i k] -> C[~ i k]");
  REQUIRE(d.inputs.size() == 3);
  REQUIRE(d.outputs.size() == 1);
  CHECK(d.inputs[0].name == "A");
  CHECK(d.inputs[1].name == "B");
  REQUIRE(d.inputs[0].dims.size() == 3);
  CHECK(d.inputs[0].dims[0].kind == Subscript::Kind::Batch);
  CHECK(d.inputs[0].dims[0].offset == 2);
  CHECK(d.inputs[0].dims[1].kind == Subscript::Kind::Symbol);
  CHECK(d.inputs[0].dims[1].name == "i");
  CHECK(d.inputs[0].dims[1].offset == 4);
  CHECK(d.inputs[0].offset == 0);
  CHECK(d.inputs[0].length == 8);
  CHECK(d.inputs[1].offset == 9);
  CHECK(d.uses_batch_in_inputs());
  CHECK(d.uses_batch_in_outputs());
  CHECK(d.inplace_of() == std::vector<std::optional<int>>{2});
  CHECK(d.str() == "A[~ i j] B[~ j k] C[~ i k] -> C[~ i k]");
  CHECK(d.text == "A[~ i j] B[~ j k] C[~ i k] -> C[~ i k]");
}

TEST_CASE("parse: unnamed arguments, literals, dashes, empty sides", "[subscript][parse]") {
  auto d = subscript::parse("[x 3] -> [3 x]");
  CHECK_FALSE(d.inputs[0].name.has_value());
  CHECK(d.inputs[0].dims[1].kind == Subscript::Kind::Integer);
  CHECK(d.inputs[0].dims[1].value == 3);
  CHECK(d.inplace_of() == std::vector<std::optional<int>>{std::nullopt});
  CHECK(d.str() == "[x 3] -> [3 x]");

  auto dash = subscript::parse("X[~ batch-size in-features] -> [~ batch-size out-features]");
  CHECK(dash.inputs[0].dims[1].name == "batch-size");
  CHECK(dash.outputs[0].dims[2].name == "out-features");

  auto none = subscript::parse("-> C[k] where k = 1");
  CHECK(none.inputs.empty());
  CHECK(none.str() == "-> C[k] where k = 1");
  auto no_out = subscript::parse("A[i] ->");
  CHECK(no_out.outputs.empty());

  auto rank0 = subscript::parse("A[] -> A[]");
  CHECK(rank0.inputs[0].dims.empty());
  CHECK(rank0.inputs[0].str() == "A[]");

  CHECK(subscript::parse("A[i]->B[i]").outputs[0].name == "B");
  CHECK(subscript::parse("  A[ i ]\n->\tB[i]  ").str() == "A[i] -> B[i]");
}

TEST_CASE("parse: in-place is by pointer name, first match", "[subscript][parse]") {
  auto d = subscript::parse("A[i] B[i] -> B[i] A[i] C[i] [i]");
  CHECK(d.inplace_of() == std::vector<std::optional<int>>{1, 0, std::nullopt, std::nullopt});
  auto dup = subscript::parse("A[i] A[j] -> A[i]");
  CHECK(dup.inplace_of() == std::vector<std::optional<int>>{0});
}

TEST_CASE("parse: where expressions", "[subscript][parse][where]") {
  auto d = subscript::parse("A[i] -> A[k] where k = 2 + 3 * i - 1 s = (1 2 3) t = ks[0] u = -i");
  REQUIRE(d.where.size() == 4);
  CHECK(d.where[0].symbol == "k");
  CHECK(d.where[0].offset == 19);
  const Expr& k = where_value(d, 0);
  CHECK(k.kind == Expr::Kind::Binary);
  CHECK(k.op == '-');
  CHECK(k.items[0].kind == Expr::Kind::Binary);
  CHECK(k.items[0].op == '+');
  CHECK(k.items[0].items[1].op == '*');
  CHECK(k.str() == "2 + 3 * i - 1");
  CHECK(k.offset == 23);
  CHECK(k.length == 13);
  CHECK(where_value(d, 1).kind == Expr::Kind::List);
  CHECK(where_value(d, 1).items.size() == 3);
  CHECK(where_value(d, 1).str() == "(1 2 3)");
  CHECK(where_value(d, 2).kind == Expr::Kind::Index);
  CHECK(where_value(d, 2).str() == "ks[0]");
  CHECK(where_value(d, 3).kind == Expr::Kind::Negate);

  // Parentheses group; `(e)` is e, not a list.
  auto p = subscript::parse("A[i] -> A[k] where k = (i + 1) * 2 m = (i)");
  CHECK(where_value(p, 0).str() == "(i + 1) * 2");
  CHECK(where_value(p, 1).kind == Expr::Kind::Symbol);
  // Right operands keep their parentheses when printed.
  CHECK(subscript::parse("A[i] -> A[k] where k = 10 - (3 - 2)").where[0].value.str() == "10 - (3 - 2)");
  CHECK(subscript::parse("A[i] -> A[k] where k = 10 / (4 / 2)").where[0].value.str() == "10 / (4 / 2)");
}

TEST_CASE("parse: minus and identifiers with dashes", "[subscript][parse][where]") {
  auto sym = subscript::parse("A[i] -> A[k] where k = i-1");
  CHECK(where_value(sym, 0).kind == Expr::Kind::Symbol);
  CHECK(where_value(sym, 0).name == "i-1");
  for (const char* text : {"A[i] -> A[k] where k = i - 1", "A[i] -> A[k] where k = i- 1", "A[i] -> A[k] where k = i -1"}) {
    auto d = subscript::parse(text);
    INFO(text);
    CHECK(where_value(d, 0).kind == Expr::Kind::Binary);
    CHECK(where_value(d, 0).op == '-');
  }
  // In a list, a glued '-' after a space starts a negative item, as in Lisp.
  auto list = subscript::parse("A[i] -> A[k] where k = (3 -1)");
  CHECK(where_value(list, 0).kind == Expr::Kind::List);
  CHECK(where_value(list, 0).items.size() == 2);
  auto diff = subscript::parse("A[i] -> A[k] where k = (3 - 1)");
  CHECK(where_value(diff, 0).kind == Expr::Kind::Binary);
}

TEST_CASE("parse: prefix forms and Lisp helpers", "[subscript][parse][where]") {
  auto d = subscript::parse("A[i] -> A[k] where k = (+ 1 (/ (- i 3) 2) -1)");
  const Expr& k = where_value(d, 0);
  CHECK(k.kind == Expr::Kind::Binary);
  CHECK(k.str() == "1 + (i - 3) / 2 + -1");
  CHECK(k.offset == 23);
  CHECK(where_value(subscript::parse("A[i] -> A[k] where k = (- i)"), 0).kind == Expr::Kind::Negate);
  CHECK(where_value(subscript::parse("A[i] -> A[k] where k = (car ks)"), 0).str() == "ks[0]");
  CHECK(where_value(subscript::parse("A[i] -> A[k] where k = (second ks)"), 0).str() == "ks[1]");
  CHECK(where_value(subscript::parse("A[i] -> A[k] where k = (nth 2 ks)"), 0).str() == "ks[2]");
  CHECK(where_value(subscript::parse("A[i] -> A[k] where k = (floor i 2)"), 0).str() == "i / 2");
  auto f = subscript::parse("A[h] -> A[k] where k = (if (numberp h) (+ h 1) -1)");
  CHECK(where_value(f, 0).kind == Expr::Kind::IfNumber);
  CHECK(where_value(f, 0).str() == "(if (numberp h) (h + 1) (-1))");
  // Every normalised form parses back to itself.
  CHECK(subscript::parse(f.str()).str() == f.str());
  // A comment runs to the end of the line.
  CHECK(subscript::parse("A[i] -> A[i] ; nothing\n").where.empty());
}

TEST_CASE("parse errors point at the offending byte", "[subscript][parse][errors]") {
  std::string m;
  CHECK(error_offset("A[i] A[i]", &m) == 9);
  CHECK_THAT(m, Catch::Contains("expected '->'"));
  CHECK(error_offset("A[i] -> B[i] -> C[i]", &m) == 13);
  CHECK(error_offset("A[i] -> B[i", &m) == 9);
  CHECK_THAT(m, Catch::Contains("unterminated subscript"));
  CHECK(error_offset("A[i] -> B", &m) == 8);
  CHECK(error_offset("A[2i] -> A[i]", &m) == 2);
  CHECK(error_offset("A[~ i ~] -> A[i]", &m) == 6);
  CHECK_THAT(m, Catch::Contains("only once"));
  CHECK_NOTHROW(subscript::parse("A[i] -> B[~ i]"));  // ~ in the outputs only covers no dims
  CHECK(error_offset("A[i] -> A[i] where", &m) == 13);
  CHECK(error_offset("A[i] -> A[k] where k 3", &m) == 21);
  CHECK(error_offset("A[i] -> A[k] where k =", &m) == 22);
  CHECK(error_offset("A[i] -> A[k] where k = (i + 1", &m) == 23);
  CHECK(error_offset("A[i] -> A[k] where k = ()", &m) == 23);
  CHECK(error_offset("A[i] -> A[k] where k = i % 2", &m) == 25);
  CHECK(error_offset("A[i] -> A[k] where k = (+ 1 i * 2)", &m) == 30);
  CHECK(error_offset("A[i] -> A[k] where k = (if (oddp i) 1 2)", &m) == 27);
  CHECK(error_offset("A[99999999999999999999] -> A[i]", &m) == 2);
  CHECK_THAT(m, Catch::Contains("too large"));
  CHECK(error_offset("", &m) == 0);
  // The length of the error covers the token.
  try {
    subscript::parse("A[i] -> A[k] where k = where");
  } catch (const subscript::ParseError& e) {
    CHECK(e.offset() == 23);
    CHECK(e.length() == 5);
  }
}

TEST_CASE("is_symbol", "[subscript]") {
  CHECK(subscript::is_symbol("in-features"));
  CHECK(subscript::is_symbol("_x1"));
  CHECK(subscript::is_symbol("C_in"));
  CHECK_FALSE(subscript::is_symbol(""));
  CHECK_FALSE(subscript::is_symbol("1x"));
  CHECK_FALSE(subscript::is_symbol("a-"));
  CHECK_FALSE(subscript::is_symbol("a b"));
  CHECK_FALSE(subscript::is_symbol("~"));
  // Lisp symbols, as cl-waffe2's DSL reads them.
  CHECK(subscript::is_symbol("hidden_t+1"));
  CHECK(subscript::is_symbol("X.grad"));
  CHECK(subscript::is_symbol("a*b/c"));
  CHECK_FALSE(subscript::is_symbol("a+"));
  CHECK_FALSE(subscript::is_symbol("+a"));
  CHECK_FALSE(subscript::is_symbol("a."));
  // Spec argument and parameter names stay C-like.
  CHECK(subscript::is_name("in-features"));
  CHECK_FALSE(subscript::is_name("hidden_t+1"));
  CHECK_FALSE(subscript::is_name("X.grad"));
}

TEST_CASE("lexing Lisp symbols: operators glued to a name belong to it", "[subscript][parse]") {
  auto d = subscript::parse("X_t[batch-size one] h[batch-size one] -> hidden_t+1[batch-size one] where one = 1");
  REQUIRE(d.outputs.size() == 1);
  CHECK(d.outputs[0].name == std::optional<std::string>("hidden_t+1"));
  CHECK(d.outputs[0].dims[0].name == "batch-size");
  auto w = subscript::parse("A[i] -> B[k] where k = i*2");
  CHECK(where_value(w, 0).kind == Expr::Kind::Symbol);
  CHECK(where_value(w, 0).name == "i*2");
  auto spaced = subscript::parse("A[i] -> B[k] where k = i * 2 + (- i 1)");
  CHECK(where_value(spaced, 0).kind == Expr::Kind::Binary);
  // A trailing operator is the next token: `i+ 1` is i + 1.
  auto trailing = subscript::parse("A[i] -> B[k] where k = i+ 1");
  CHECK(where_value(trailing, 0).kind == Expr::Kind::Binary);
  CHECK(where_value(trailing, 0).str() == "i + 1");
}

TEST_CASE("Dim: constants fold, floor division, overflow", "[shape][dim]") {
  using shape::Dim;
  CHECK(Dim::binary('+', 2, 3) == Dim(5));
  CHECK(Dim::binary('/', 7, 2) == Dim(3));
  CHECK(Dim::binary('/', -7, 2) == Dim(-4));
  CHECK(Dim::binary('/', 7, -2) == Dim(-4));
  CHECK(Dim::binary('/', -8, 2) == Dim(-4));
  CHECK(Dim::binary('/', -7, -2) == Dim(3));
  CHECK_THROWS_AS(Dim::binary('/', 1, 0), std::domain_error);
  CHECK_THROWS_AS(Dim::binary('*', std::numeric_limits<std::int64_t>::max(), 2), std::overflow_error);
  CHECK_THROWS_AS(Dim::binary('+', std::numeric_limits<std::int64_t>::max(), 1), std::overflow_error);
  CHECK_THROWS_AS(Dim::binary('-', std::numeric_limits<std::int64_t>::min(), 1), std::overflow_error);
  CHECK_THROWS_AS(Dim::binary('/', std::numeric_limits<std::int64_t>::min(), -1), std::overflow_error);
}

TEST_CASE("Dim: symbolic arithmetic, identities, printing", "[shape][dim]") {
  using shape::Dim;
  Dim n = Dim::symbol("n");
  CHECK_FALSE(n.is_known());
  CHECK(n.str() == "n");
  CHECK(Dim::binary('*', n, 1) == n);
  CHECK(Dim::binary('*', 1, n) == n);
  CHECK(Dim::binary('+', n, 0) == n);
  CHECK(Dim::binary('*', n, 0) == Dim(0));
  CHECK(Dim::binary('/', n, 1) == n);
  CHECK(Dim::binary('*', n, 784).str() == "n * 784");
  CHECK(Dim::binary('*', 2, n).str() == "n * 2");
  CHECK(Dim::binary('*', Dim::binary('*', n, 3), 2).str() == "n * 6");
  CHECK(Dim::binary('+', 1, Dim::binary('+', Dim::binary('+', n, -2), -1)).str() == "n - 2");
  CHECK(Dim::binary('-', Dim::binary('+', n, 2), 2) == n);
  CHECK(Dim::binary('*', Dim::binary('+', n, 2), 3).str() == "(n + 2) * 3");
  CHECK(Dim::binary('-', 10, Dim::binary('-', n, 1)).str() == "10 - (n - 1)");
  Dim e = Dim::binary('/', Dim::binary('+', n, Dim::symbol("m")), 2);
  CHECK(e.str() == "(n + m) / 2");
  CHECK(e.symbols() == std::vector<std::string>{"n", "m"});
  Dim r = e.substitute([](const std::string& s) -> std::optional<shape::Dim> {
    if (s == "n") return Dim(5);
    if (s == "m") return Dim(4);
    return std::nullopt;
  });
  CHECK(r == Dim(4));
  CHECK(shape::shape_str({Dim(3), n, Dim::binary('*', n, 2)}) == "(3 n {n * 2})");
  CHECK(shape::shape_str({}) == "()");
  CHECK(shape::shapes_str({{Dim(3), Dim(2)}, {Dim(2), Dim(4)}}) == "((3 2) (2 4))");
}

TEST_CASE("parse_shape", "[shape][cli]") {
  using shape::Dim;
  CHECK(shape::parse_shape("10x3") == shape::Shape{10, 3});
  CHECK(shape::parse_shape("10,3") == shape::Shape{10, 3});
  CHECK(shape::parse_shape("10 3") == shape::Shape{10, 3});
  CHECK(shape::parse_shape("(10 3)") == shape::Shape{10, 3});
  CHECK(shape::parse_shape("7") == shape::Shape{7});
  CHECK(shape::parse_shape("").empty());
  CHECK(shape::parse_shape("()").empty());
  CHECK(shape::parse_shape("  ").empty());
  CHECK(shape::parse_shape("batch,784") == shape::Shape{Dim::symbol("batch"), 784});
  CHECK(shape::parse_shape("batchx784") == shape::Shape{Dim::symbol("batch"), 784});
  CHECK(shape::parse_shape("max-len,box") == shape::Shape{Dim::symbol("max-len"), Dim::symbol("box")});
  CHECK(shape::parse_shape("0x5") == shape::Shape{0, 5});
  CHECK_THROWS_AS(shape::parse_shape("3x-1"), std::invalid_argument);
  CHECK_THROWS_AS(shape::parse_shape("3xx4"), std::invalid_argument);
  CHECK_THROWS_AS(shape::parse_shape("3,"), std::invalid_argument);
  CHECK_THROWS_AS(shape::parse_shape("x3"), std::invalid_argument);
  CHECK_THROWS_AS(shape::parse_shape("3x$"), std::invalid_argument);
  CHECK_THROWS_AS(shape::parse_shape("99999999999999999999"), std::invalid_argument);
  CHECK_THROWS_WITH(shape::parse_shape("3x-1"), Catch::Contains("negative size -1"));
  CHECK_THROWS_WITH(shape::parse_shape("3xx4"), Catch::Contains("empty dimension"));
}

TEST_CASE("parse_value", "[shape][cli]") {
  using shape::Dim;
  using shape::Value;
  CHECK(shape::parse_value("3") == Value::scalar(3));
  CHECK(shape::parse_value("-1") == Value::scalar(-1));
  CHECK(shape::parse_value("hidden") == Value::scalar(Dim::symbol("hidden")));
  CHECK(shape::parse_value("10,10,10") == Value::list({10, 10, 10}));
  CHECK(shape::parse_value("(2 3)") == Value::list({2, 3}));
  CHECK(shape::parse_value("()") == Value::list({}));
  CHECK(shape::parse_value("3").str() == "3");
  CHECK(shape::parse_value("2,3").str() == "(2 3)");
  CHECK_THROWS_AS(shape::parse_value("3x"), std::invalid_argument);
  CHECK_THROWS_AS(shape::parse_value("1,,2"), std::invalid_argument);
  CHECK_THROWS_AS(shape::parse_value(""), std::invalid_argument);
}

TEST_CASE("check: the API the later stages use", "[shape][check]") {
  auto d = subscript::parse("X[~ batch-size in-features] -> [~ batch-size out-features]");
  shape::Args args{{"in-features", shape::Value::scalar(784)}, {"out-features", shape::Value::scalar(10)}};
  auto r = shape::check(d, args, {shape::parse_shape("batch,784")});
  REQUIRE(r.ok());
  REQUIRE(r.outputs.size() == 1);
  CHECK(shape::shape_str(r.outputs[0].shape) == "(batch 10)");
  CHECK_FALSE(r.outputs[0].inplace_of.has_value());

  auto u = shape::check(subscript::parse("A[i] B[i] -> B[i]"), {}, {shape::parse_shape("n"), shape::parse_shape("32")});
  REQUIRE(u.ok());
  CHECK(u.unified.at("n") == shape::Dim(32));

  auto bad = shape::check(subscript::parse("A[~] B[~] -> A[~]"), {}, {{3, 2}, {2, 4}});
  REQUIRE(bad.reports.size() == 2);
  CHECK(bad.reports[0].symbol == "~");
  CHECK(bad.reports[0].offset == std::optional<std::size_t>(7));
  std::string text = shape::render_report(subscript::parse("A[~] B[~] -> A[~]"), {{3, 2}, {2, 4}}, bad, {"ADDNODE-CPUTENSOR"});
  CHECK_THAT(text, Catch::StartsWith("[wfgen] Shape-Error: Couldn't step forward because of shape-error.\n\n"
                                     "The operation was : <Node: ADDNODE-CPUTENSOR (A[~] B[~] -> A[~])>\n\n"
                                     "Input(s)            : ((3 2) (2 4))\n"
                                     "Predicted Output(s) : ((3 2))\n\n"
                                     "Here's a list of reports.\n\n1. "));
  CHECK_THAT(text, Catch::Contains("\n\nAlso, these reports could be helpful for you (calculated ignoring the first errors.)\n\n2. "));
}

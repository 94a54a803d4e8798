// Rules for names that end up in generated C++ identifiers.
#pragma once

#include <string>
#include <string_view>

namespace wfgen {

// True for C++20 keywords and alternative tokens (`and`, `class`, `co_await`...).
bool is_cpp_keyword(std::string_view name);

// True for identifiers reserved to the implementation: `_Upper...`, any `__`.
bool is_reserved_identifier(std::string_view name);

// Why `name` cannot become (part of) a C++ identifier, or "" when it can.
// Spec names are checked with the schema's pattern first; this adds the rules
// a pattern cannot say.
std::string cpp_name_problem(std::string_view name);

// A DSL symbol or spec name as a C++ identifier, deterministically: '-'
// becomes '_', and `+ * / .` become `_plus_`, `_star_`, `_slash_`, `_dot_`
// (one '_' between words: `hidden_t+1` -> `hidden_t_plus_1`).
std::string cpp_identifier(std::string_view name);

// A node name as it appears in generated function names: lowercase ("MatMul" -> "matmul").
std::string lower_name(std::string_view name);

}  // namespace wfgen

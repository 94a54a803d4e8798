#include "wfgen/support/names.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace wfgen {

namespace {

constexpr std::string_view kKeywords[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
    "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
    "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
    "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
    "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
    "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
    "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
    // Not keywords, but names that would shadow what generated code relies on.
    "main", "std", "wfgen", "NULL", "errno", "assert"};

}  // namespace

bool is_cpp_keyword(std::string_view name) {
  return std::find(std::begin(kKeywords), std::end(kKeywords), name) != std::end(kKeywords);
}

bool is_reserved_identifier(std::string_view name) {
  if (name.find("__") != std::string_view::npos) return true;
  return name.size() >= 2 && name[0] == '_' && std::isupper(static_cast<unsigned char>(name[1]));
}

std::string cpp_name_problem(std::string_view name) {
  std::string id = cpp_identifier(name);
  if (is_cpp_keyword(id) || is_cpp_keyword(lower_name(id))) {
    return "'" + std::string(name) + "' is a C++ keyword or a name generated code needs; choose another name";
  }
  if (id.rfind("wf_", 0) == 0) {
    return "'" + std::string(name) + "' starts with 'wf_', which is reserved for names in generated code";
  }
  if (is_reserved_identifier(id)) {
    return "'" + std::string(name) + "' is reserved in C++ (names with '__' or starting with '_' and an uppercase letter)";
  }
  return {};
}

std::string cpp_identifier(std::string_view name) {
  // '-' is the common case (`batch-size`) and stays one '_' (generated code
  // from before the other characters were allowed is unchanged). The others
  // are spelled out between underscores, never doubling one: `hidden_t+1` ->
  // `hidden_t_plus_1`, `X.grad` -> `X_dot_grad`.
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    const char* word = c == '+' ? "plus" : c == '*' ? "star" : c == '/' ? "slash" : c == '.' ? "dot" : nullptr;
    if (!word) {
      out += c == '-' ? '_' : c;
      continue;
    }
    if (!out.empty() && out.back() != '_') out += '_';
    out += word;
    if (i + 1 < name.size() && name[i + 1] != '_' && name[i + 1] != '-') out += '_';
  }
  return out;
}

std::string lower_name(std::string_view name) {
  std::string out(name);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace wfgen

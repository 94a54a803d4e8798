// Diagnostics: where a user error comes from and how it is printed.
//
// Two kinds of failure exist in wfgen and they never mix:
//  - UserError: the input (a spec, a command-line argument) is wrong. It
//    carries one or more Diagnostics that point at file:line:col, show the
//    offending line with a caret, say what was found and what was expected.
//  - InternalError: wfgen itself is wrong (a broken invariant). It says so
//    and asks for a bug report; it never blames the user.
//
// Messages start lowercase and end without a period, like clang's.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace wfgen {

// A position in a source file. Lines and columns are 1-based; 0 means unknown.
struct SourceLoc {
  std::string file;
  int line = 0;
  int col = 0;

  bool known() const { return line > 0; }
  // "file:line:col", or as much of it as is known.
  std::string str() const;
};

struct Diagnostic {
  enum class Severity { Error, Warning, Note };
  Severity severity = Severity::Error;
  SourceLoc loc;
  std::string message;
  // The full text of the source line at loc.line (empty: not shown).
  std::string source_line;
  // How many characters the caret underlines (at least 1).
  int length = 1;
  // Free-form lines printed after the caret (reports, hints).
  std::string detail;
};

// Renders one diagnostic like clang:
//   file:3:14: error: unknown key 'whre'; did you mean 'where'?
//       whre: "A[i] -> A[i]"
//       ^~~~
std::string render(const Diagnostic& d, bool color = false);

class UserError : public std::runtime_error {
 public:
  explicit UserError(Diagnostic d);
  explicit UserError(std::vector<Diagnostic> ds);
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }
  std::string render(bool color = false) const;

 private:
  std::vector<Diagnostic> diags_;
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what);
};

// Throws InternalError with the location of the broken invariant.
[[noreturn]] void internal_fail(const char* cond, const char* file, int line,
                                const std::string& message);

#define WFGEN_ASSERT(cond, message)                                 \
  do {                                                              \
    if (!(cond)) ::wfgen::internal_fail(#cond, __FILE__, __LINE__, message); \
  } while (0)

// Returns line `line` (1-based) of `text`, without its newline.
std::string line_of(std::string_view text, int line);

// Converts a byte offset in `text` to a 1-based line and column.
SourceLoc loc_of_offset(std::string_view file, std::string_view text, std::size_t offset);

// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a likely typo,
// else an empty string.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// "; did you mean 'x'?" when a close candidate exists, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// Quotes a user string for a message: printable ASCII kept, the rest escaped,
// long strings shortened, so that no message can carry control characters.
std::string quote(std::string_view text, std::size_t max_length = 60);

// True when stderr is a terminal and NO_COLOR is not set.
bool stderr_wants_color();

// Debug tracing, switched on by the environment variable WFGEN_DEBUG=1.
bool debug_enabled();

}  // namespace wfgen

// Writes C++ text with indentation and scopes handled in one place.
#pragma once

#include <string>
#include <string_view>

namespace wfgen::emit {

class CodeWriter {
 public:
  // `depth`: the indentation of the first line, for text that fills a
  // template's hole inside a scope (1: a function body).
  explicit CodeWriter(int depth = 0) : depth_(depth) {}
  // One line at the current indentation ("" writes an empty line).
  CodeWriter& line(std::string_view text = {});
  // Opens a scope: writes `head {` (a bare `{` for an empty head) and indents.
  CodeWriter& open(std::string_view head);
  // Closes a scope: dedents and writes `}` followed by `tail` (e.g. ");").
  CodeWriter& close(std::string_view tail = {});
  // Between the branches of an if: `} else {` at the scope's level.
  CodeWriter& otherwise();
  // Between the branches of an if: `} else if (condition) {`.
  CodeWriter& otherwise_if(std::string_view condition);
  // A `// comment` line per line of text.
  CodeWriter& comment(std::string_view text);
  // Raw text, indented line by line (for templates).
  CodeWriter& block(std::string_view text);

  const std::string& str() const { return out_; }

 private:
  std::string out_;
  int depth_ = 0;
};

// Replaces every {{name}} in `text` with the value given for it ({{{name}}}
// keeps one literal brace on each side: `{{{names}}}` gives `{a, b}`). Every
// placeholder must be given a value and every value must be used; values
// are C++ the emitter built from validated data, never spec strings.
std::string fill_template(std::string_view text, std::initializer_list<std::pair<std::string_view, std::string>> values);

}  // namespace wfgen::emit

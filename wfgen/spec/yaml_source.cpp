#include "wfgen/spec/yaml_source.hpp"

#include <set>

namespace wfgen::spec::detail {

SourceLoc loc_of(const Source& src, const YAML::Mark& mark) {
  if (mark.is_null()) return SourceLoc{src.name, 0, 0};
  return SourceLoc{src.name, mark.line + 1, mark.column + 1};
}

namespace {

// Length of the scalar token that starts at `pos`: a quoted string up to its
// closing quote on the same line, else the plain run up to a YAML separator.
int token_length(const std::string& text, std::size_t pos) {
  if (pos >= text.size()) return 1;
  char q = text[pos];
  std::size_t end = pos + 1;
  if (q == '"' || q == '\'') {
    while (end < text.size() && text[end] != '\n') {
      if (q == '"' && text[end] == '\\') {
        end += 2;
        continue;
      }
      if (text[end] == q) {
        if (q == '\'' && end + 1 < text.size() && text[end + 1] == '\'') {
          end += 2;
          continue;
        }
        return static_cast<int>(end + 1 - pos);
      }
      ++end;
    }
    return static_cast<int>(end - pos);
  }
  while (end < text.size() && text[end] != '\n' && text[end] != ',' && text[end] != '}' && text[end] != ']' &&
         !(text[end] == ':' && (end + 1 >= text.size() || text[end + 1] == ' ' || text[end + 1] == '\n')) &&
         !(text[end] == ' ' && end + 1 < text.size() && text[end + 1] == '#')) {
    ++end;
  }
  while (end > pos + 1 && text[end - 1] == ' ') --end;
  return static_cast<int>(end - pos);
}

}  // namespace

Diagnostic diag_at(const Source& src, const YAML::Mark& mark, std::string message, int length) {
  Diagnostic d;
  d.loc = loc_of(src, mark);
  d.message = std::move(message);
  d.source_line = line_of(src.text, d.loc.line);
  d.length = length;
  return d;
}

Diagnostic diag_at(const Source& src, const YAML::Node& node, std::string message) {
  YAML::Mark m = node.Mark();
  int length = 1;
  if (node.IsScalar() && !m.is_null() && m.pos >= 0) length = token_length(src.text, static_cast<std::size_t>(m.pos));
  return diag_at(src, m, std::move(message), length);
}

Text text_of(const Source& src, const YAML::Node& scalar) {
  Text t;
  t.value = scalar.Scalar();
  YAML::Mark m = scalar.Mark();
  t.loc = loc_of(src, m);
  if (m.is_null() || m.pos < 0 || static_cast<std::size_t>(m.pos) >= src.text.size()) {
    t.exact = false;
    return t;
  }
  const std::string& raw = src.text;
  std::size_t pos = static_cast<std::size_t>(m.pos);
  char first = raw[pos];
  if (first == '|' || first == '>') {
    // Block scalar: content starts on the next line, at the block's indent.
    std::size_t line_start = raw.find('\n', pos);
    int line = t.loc.line + 1;
    t.exact = first == '|';
    std::size_t indent = std::string::npos;
    while (line_start != std::string::npos && line_start + 1 <= raw.size()) {
      std::size_t begin = line_start + 1;
      std::size_t end = raw.find('\n', begin);
      std::string_view l(raw.data() + begin, (end == std::string::npos ? raw.size() : end) - begin);
      std::size_t spaces = l.find_first_not_of(' ');
      if (spaces != std::string_view::npos) {
        if (indent == std::string::npos) indent = spaces;
        if (spaces < indent) break;  // the block ended
      }
      std::size_t col = indent == std::string::npos ? 1 : indent + 1;
      t.lines.push_back(SourceLoc{src.name, line, static_cast<int>(col)});
      if (end == std::string::npos) break;
      line_start = end;
      ++line;
    }
    if (!t.lines.empty()) t.loc = t.lines.front();
    return t;
  }
  if (first == '"' || first == '\'') {
    t.loc.col += 1;
    // Exact only when the raw text between the quotes equals the value.
    std::string_view rest(raw.data() + pos + 1, std::min(raw.size() - pos - 1, t.value.size()));
    t.exact = rest == t.value;
  } else {
    std::string_view rest(raw.data() + pos, std::min(raw.size() - pos, t.value.size()));
    t.exact = rest == t.value;
  }
  return t;
}

namespace {

void check_duplicates(const Source& src, const YAML::Node& node, std::vector<Diagnostic>& errors) {
  if (node.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& kv : node) {
      if (kv.first.IsScalar()) {
        auto [it, inserted] = seen.emplace(kv.first.Scalar(), kv.first.Mark());
        if (!inserted) {
          Diagnostic d = diag_at(src, kv.first,
                                 "duplicate key '" + quote(kv.first.Scalar()) + "' (first defined at line " +
                                     std::to_string(it->second.line + 1) + ")");
          errors.push_back(std::move(d));
        }
      }
      check_duplicates(src, kv.second, errors);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) check_duplicates(src, item, errors);
  }
}

}  // namespace

YAML::Node parse_yaml(const Source& src, std::vector<Diagnostic>& errors) {
  try {
    YAML::Node root = YAML::Load(src.text);
    std::size_t before = errors.size();
    check_duplicates(src, root, errors);
    if (errors.size() != before) return YAML::Node();
    return root;
  } catch (const YAML::Exception& e) {
    std::string msg = e.msg.empty() ? "invalid YAML" : e.msg;
    errors.push_back(diag_at(src, e.mark, "YAML syntax error: " + msg));
    return YAML::Node();
  }
}

}  // namespace wfgen::spec::detail

namespace wfgen::spec {

SourceLoc Text::at(std::size_t offset) const {
  if (lines.empty()) {
    SourceLoc l = loc;
    if (exact && l.known()) l.col += static_cast<int>(offset);
    return l;
  }
  // Block scalar: find the line the offset falls on.
  std::size_t line = 0, start = 0;
  for (std::size_t i = 0; i < offset && i < value.size(); ++i) {
    if (value[i] == '\n') {
      ++line;
      start = i + 1;
    }
  }
  if (line >= lines.size()) return loc;
  SourceLoc l = lines[line];
  if (exact) l.col += static_cast<int>(offset - start);
  return l;
}

}  // namespace wfgen::spec

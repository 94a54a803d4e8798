#include "wfgen/spec/yaml_source.hpp"

#include <yaml-cpp/depthguard.h>

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

// Walks the tree as the later stages will, with aliases (*name) expanded:
// reports duplicate keys, and stops at more values than any spec has (a
// "billion laughs": each alias repeating a list of aliases, which would make
// every later stage run for ever) or at a depth no spec has (an alias inside
// its own anchor nests without end). Returns false then.
class TreeCheck {
 public:
  TreeCheck(const Source& src, std::vector<Diagnostic>& errors) : src_(src), errors_(errors) {}

  bool walk(const YAML::Node& node, int depth = 0) {
    if (depth > kMaxDepth) {
      // Deep brackets, or aliases: one inside its own anchor (&a [*a]) nests without end.
      errors_.push_back(diag_at(src_, node, "YAML values nested more than " + std::to_string(kMaxDepth) +
                                                " deep (or an alias *name inside its own anchor); expected a spec, "
                                                "which nests a few levels"));
      return false;
    }
    if (++visited_ > kMaxValues) {
      errors_.push_back(diag_at(src_, node,
                                "the file holds more than " + std::to_string(kMaxValues) +
                                    " YAML values with its aliases (*name) expanded; expected a spec, whose aliases repeat small parts"));
      return false;
    }
    if (node.IsMap()) {
      std::map<std::string, YAML::Mark> seen;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          if (!walk(kv.first, depth + 1)) return false;  // a complex key (`? [..]`) is expanded too
        } else {
          auto [it, inserted] = seen.emplace(kv.first.Scalar(), kv.first.Mark());
          if (!inserted) {
            errors_.push_back(diag_at(src_, kv.first,
                                      "duplicate key '" + quote(kv.first.Scalar()) + "' (first defined at line " +
                                          std::to_string(it->second.line + 1) + ")"));
          }
        }
        if (!walk(kv.second, depth + 1)) return false;
      }
    } else if (node.IsSequence()) {
      for (const auto& item : node)
        if (!walk(item, depth + 1)) return false;
    }
    return true;
  }

 private:
  static constexpr int kMaxDepth = 200;
  static constexpr std::size_t kMaxValues = 500000;  // the standard library has a few thousand
  const Source& src_;
  std::vector<Diagnostic>& errors_;
  std::size_t visited_ = 0;
};

}  // namespace

namespace {

// Scans the raw text the way YAML quotes and comments it: calls
// `on_open(pos)` / `on_close(pos)` for flow brackets outside strings and
// comments, and returns the position of a quote that is never closed
// (npos when every string is closed).
struct RawScan {
  std::vector<std::size_t> open_brackets;  // unmatched '[' and '{', innermost last
  std::size_t unclosed_quote = std::string::npos;
};

RawScan raw_scan(const std::string& t) {
  RawScan r;
  std::size_t i = 0;
  bool line_start = true;
  while (i < t.size()) {
    char c = t[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    bool after_space = line_start || (i > 0 && (t[i - 1] == ' ' || t[i - 1] == '\t'));
    if (c == '#' && after_space) {
      while (i < t.size() && t[i] != '\n') ++i;
      continue;
    }
    // A quote starts a string only where a scalar can start.
    bool can_start = line_start || (i > 0 && std::string_view(" \t[{,:-?").find(t[i - 1]) != std::string_view::npos);
    if ((c == '"' || c == '\'') && can_start) {
      std::size_t j = i + 1;
      bool closed = false;
      while (j < t.size()) {
        if (c == '"' && t[j] == '\\') {
          j += 2;
          continue;
        }
        if (t[j] == c) {
          if (c == '\'' && j + 1 < t.size() && t[j + 1] == '\'') {
            j += 2;
            continue;
          }
          closed = true;
          break;
        }
        ++j;
      }
      if (!closed) {
        r.unclosed_quote = i;
        return r;
      }
      i = j + 1;
      line_start = false;
      continue;
    }
    if (c == '|' || c == '>') {
      // A block scalar: skip its more-indented lines.
      std::size_t ls = t.rfind('\n', i);
      ls = ls == std::string::npos ? 0 : ls + 1;
      std::size_t parent = t.find_first_not_of(" -", ls) - ls;
      if (t.find_first_not_of(" \t", i + 1) == t.find('\n', i) || t.find_first_of("\n#", i) == t.find('\n', i)) {
        std::size_t k = t.find('\n', i);
        while (k != std::string::npos) {
          std::size_t next = k + 1;
          std::size_t first = t.find_first_not_of(' ', next);
          if (first == std::string::npos) { k = std::string::npos; i = t.size(); break; }
          if (t[first] != '\n' && first - next <= parent) break;
          k = t.find('\n', next);
        }
        if (k == std::string::npos) return r;
        i = k;
        continue;
      }
    }
    if (c != ' ' && c != '\t') line_start = false;
    if (c == '[' || c == '{') r.open_brackets.push_back(i);
    if ((c == ']' || c == '}') && !r.open_brackets.empty()) r.open_brackets.pop_back();
    ++i;
  }
  return r;
}

// The first tab in the indentation of a line at or before `line` (1-based).
std::size_t indentation_tab(const std::string& t, int line) {
  std::size_t pos = 0;
  for (int l = 1; pos < t.size() && (line <= 0 || l <= line); ++l) {
    std::size_t end = t.find('\n', pos);
    if (end == std::string::npos) end = t.size();
    for (std::size_t k = pos; k < end && (t[k] == ' ' || t[k] == '\t'); ++k)
      if (t[k] == '\t') return k;
    pos = end + 1;
  }
  return std::string::npos;
}

Diagnostic diag_at_offset(const Source& src, std::size_t offset, std::string message, int length = 1) {
  Diagnostic d;
  d.loc = loc_of_offset(src.name, src.text, offset);
  d.message = std::move(message);
  d.source_line = line_of(src.text, d.loc.line);
  d.length = length;
  return d;
}

// The offset of a document marker that starts a second document: a line
// "---" (or "--- ...") after content, or any content after a line "...".
// Markers are only ever at the start of a line, even inside block or quoted
// scalars (YAML forbids them there), so a line scan finds them. npos: none.
std::size_t second_document_at(std::string_view t) {
  bool content = false, ended = false;
  std::size_t pos = 0;
  while (pos < t.size()) {
    std::size_t end = t.find('\n', pos);
    if (end == std::string_view::npos) end = t.size();
    std::string_view line = t.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto marker = [&](std::string_view m) {
      return line.starts_with(m) && (line.size() == 3 || line[3] == ' ' || line[3] == '\t');
    };
    std::size_t first = line.find_first_not_of(" \t");
    bool blank = first == std::string_view::npos || line[first] == '#';
    if (marker("---")) {
      if (content || ended) return pos;
      std::size_t rest = line.find_first_not_of(" \t", 3);
      content = rest != std::string_view::npos && line[rest] != '#';
    } else if (marker("...")) {
      ended = true;
    } else if (!blank) {
      if (ended) return pos;
      content = true;
    }
    pos = end + 1;
  }
  return std::string_view::npos;
}

// yaml-cpp's messages, with what was expected.
std::string explain(const std::string& msg) {
  if (msg == "end of map not found" || msg == "end of sequence not found")
    return "bad indentation (" + msg + "); expected this line to line up with a key or '-' entry above it";
  if (msg == "illegal map value")
    return "unexpected ':' (illegal map value); expected a key before it, or quotes around a value that contains ': '";
  if (msg == "illegal block entry")
    return "unexpected '-' list entry (illegal block entry); expected it indented under a key";
  return msg;
}

}  // namespace

YAML::Node parse_yaml(const Source& src, std::vector<Diagnostic>& errors) {
  RawScan raw = raw_scan(src.text);
  try {
    // YAML::Load reads the first document and silently drops the others
    // (YAML::LoadAll loops for ever on some bad input: ", a").
    if (std::size_t second = second_document_at(src.text); second != std::string::npos) {
      errors.push_back(diag_at_offset(src, second,
                                      "a second YAML document (after '---' or '...') in the spec file; expected one "
                                      "document per file",
                                      3));
      return YAML::Node();
    }
    YAML::Node root = YAML::Load(src.text);
    // yaml-cpp accepts a string left open at the end of the file.
    if (raw.unclosed_quote != std::string::npos) {
      std::string q(1, src.text[raw.unclosed_quote]);
      errors.push_back(diag_at_offset(src, raw.unclosed_quote,
                                      "YAML syntax error: unclosed quoted string; expected a closing " + q +
                                          " before the end of the file"));
      return YAML::Node();
    }
    std::size_t before = errors.size();
    TreeCheck(src, errors).walk(root);
    if (errors.size() != before) return YAML::Node();
    return root;
  } catch (const YAML::DeepRecursion& e) {
    errors.push_back(diag_at(src, e.mark,
                             "YAML syntax error: lists and mappings nested more than " + std::to_string(e.depth() - 1) +
                                 " deep; expected a spec, which nests a few levels"));
    return YAML::Node();
  } catch (const YAML::Exception& e) {
    std::string msg = e.msg.empty() ? "invalid YAML" : e.msg;
    int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    if (std::size_t tab = indentation_tab(src.text, line); tab != std::string::npos) {
      errors.push_back(diag_at_offset(src, tab, "YAML syntax error: a tab character in the indentation; YAML indents with spaces only"));
      return YAML::Node();
    }
    if (raw.unclosed_quote != std::string::npos) {
      std::string q(1, src.text[raw.unclosed_quote]);
      errors.push_back(diag_at_offset(src, raw.unclosed_quote,
                                      "YAML syntax error: unclosed quoted string; expected a closing " + q));
      return YAML::Node();
    }
    if (msg.find("flow not found") != std::string::npos && !raw.open_brackets.empty()) {
      std::size_t at = raw.open_brackets.back();
      std::string close = src.text[at] == '[' ? "]" : "}";
      errors.push_back(diag_at_offset(src, at, "YAML syntax error: unclosed '" + std::string(1, src.text[at]) +
                                                   "'; expected a matching '" + close + "' (" + msg + ")"));
      return YAML::Node();
    }
    Diagnostic d = diag_at(src, e.mark, "YAML syntax error: " + explain(msg));
    if (d.source_line.empty() && !src.text.empty()) {
      // Past the end of the file: point at the end of the last line.
      std::size_t end = src.text.find_last_not_of("\n\r \t");
      if (end != std::string::npos) d = diag_at_offset(src, end, d.message);
    }
    errors.push_back(std::move(d));
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
  // Block scalar: find the line the offset falls on. The end of a value
  // that ends with its final newline is the end of its last line.
  if (offset >= value.size() && !value.empty() && value.back() == '\n') offset = value.size() - 1;
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

#include "wfgen/emit/code_writer.hpp"

#include <set>

#include "wfgen/support/diagnostics.hpp"

namespace wfgen::emit {

CodeWriter& CodeWriter::line(std::string_view text) {
  if (!text.empty()) out_.append(static_cast<std::size_t>(depth_) * 2, ' ').append(text);
  out_ += '\n';
  return *this;
}

CodeWriter& CodeWriter::open(std::string_view head) {
  line(head.empty() ? std::string("{") : std::string(head) + " {");
  ++depth_;
  return *this;
}

CodeWriter& CodeWriter::close(std::string_view tail) {
  WFGEN_ASSERT(depth_ > 0, "close() without open()");
  --depth_;
  return line("}" + std::string(tail));
}

CodeWriter& CodeWriter::otherwise() {
  WFGEN_ASSERT(depth_ > 0, "otherwise() outside a scope");
  --depth_;
  line("} else {");
  ++depth_;
  return *this;
}

CodeWriter& CodeWriter::otherwise_if(std::string_view condition) {
  WFGEN_ASSERT(depth_ > 0, "otherwise_if() outside a scope");
  --depth_;
  line("} else if (" + std::string(condition) + ") {");
  ++depth_;
  return *this;
}

CodeWriter& CodeWriter::comment(std::string_view text) {
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    std::string l(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    // A comment must end on its line: no control characters, and no
    // backslash (or the trigraph ??/) at the end to continue it.
    for (char& c : l)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    while (!l.empty() && (l.back() == ' ' || l.back() == '\\' || l.ends_with("??/"))) l.pop_back();
    line(l.empty() ? std::string("//") : "// " + l);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return *this;
}

CodeWriter& CodeWriter::block(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    line(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return *this;
}

std::string fill_template(std::string_view text,
                          std::initializer_list<std::pair<std::string_view, std::string>> values) {
  std::string out;
  std::set<std::string_view> used;
  std::size_t pos = 0;
  while (true) {
    std::size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    // "{{{name}}}": a literal brace around a placeholder (an initializer list).
    while (open + 2 < text.size() && text[open + 2] == '{') ++open;
    std::size_t close = text.find("}}", open);
    WFGEN_ASSERT(close != std::string_view::npos, "unterminated {{ in a template");
    out.append(text.substr(pos, open - pos));
    std::string_view name = text.substr(open + 2, close - open - 2);
    bool found = false;
    for (const auto& [k, v] : values) {
      if (k == name) {
        out += v;
        used.insert(k);
        found = true;
        break;
      }
    }
    WFGEN_ASSERT(found, "template placeholder {{" + std::string(name) + "}} has no value");
    pos = close + 2;
  }
  WFGEN_ASSERT(used.size() == values.size(), "a template value was not used");
  return out;
}

}  // namespace wfgen::emit

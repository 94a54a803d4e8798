#include "wfgen/support/diagnostics.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace wfgen {

std::string SourceLoc::str() const {
  std::string out = file.empty() ? "<input>" : file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (col > 0) out += ":" + std::to_string(col);
  }
  return out;
}

namespace {

const char* severity_word(Diagnostic::Severity s) {
  switch (s) {
    case Diagnostic::Severity::Error: return "error";
    case Diagnostic::Severity::Warning: return "warning";
    case Diagnostic::Severity::Note: return "note";
  }
  return "error";
}

const char* severity_color(Diagnostic::Severity s) {
  switch (s) {
    case Diagnostic::Severity::Error: return "\033[1;31m";
    case Diagnostic::Severity::Warning: return "\033[1;35m";
    case Diagnostic::Severity::Note: return "\033[1;36m";
  }
  return "";
}

// Tabs are shown as single spaces so the caret lines up with the column.
std::string printable_line(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (char c : line) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '\t') out += ' ';
    else if (u < 0x20 || u == 0x7f) out += '?';
    else out += c;
  }
  return out;
}

}  // namespace

std::string render(const Diagnostic& d, bool color) {
  std::ostringstream os;
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  const char* green = color ? "\033[1;32m" : "";
  os << bold << d.loc.str() << ": " << reset;
  os << (color ? severity_color(d.severity) : "") << severity_word(d.severity) << ": " << reset;
  os << bold << d.message << reset << "\n";
  if (!d.source_line.empty() && d.loc.col > 0) {
    std::string line = printable_line(d.source_line);
    os << "    " << line << "\n";
    // Columns count bytes; UTF-8 continuation bytes take no screen column.
    std::string pad;
    for (int i = 0; i + 1 < d.loc.col && i < static_cast<int>(d.source_line.size()); ++i) {
      unsigned char u = static_cast<unsigned char>(d.source_line[i]);
      if ((u & 0xC0) != 0x80) pad += ' ';
    }
    int avail = static_cast<int>(line.size()) - (d.loc.col - 1);
    int len = std::max(1, std::min(d.length, std::max(1, avail)));
    os << "    " << pad << green << '^' << std::string(len - 1, '~') << reset << "\n";
  }
  if (!d.detail.empty()) {
    os << d.detail;
    if (d.detail.back() != '\n') os << "\n";
  }
  return os.str();
}

UserError::UserError(Diagnostic d) : UserError(std::vector<Diagnostic>{std::move(d)}) {}

UserError::UserError(std::vector<Diagnostic> ds)
    : std::runtime_error(ds.empty() ? std::string("error") : ds.front().loc.str() + ": error: " + ds.front().message),
      diags_(std::move(ds)) {}

std::string UserError::render(bool color) const {
  std::string out;
  for (const auto& d : diags_) out += wfgen::render(d, color);
  return out;
}

InternalError::InternalError(const std::string& what) : std::logic_error(what) {}

void internal_fail(const char* cond, const char* file, int line, const std::string& message) {
  std::ostringstream os;
  os << "internal error: " << message << " (" << cond << " failed at " << file << ":" << line
     << "); this is a bug in wfgen, please report it with the input that triggered it";
  throw InternalError(os.str());
}

std::string line_of(std::string_view text, int line) {
  if (line <= 0) return {};
  std::size_t pos = 0;
  for (int l = 1; l < line; ++l) {
    pos = text.find('\n', pos);
    if (pos == std::string_view::npos) return {};
    ++pos;
  }
  std::size_t end = text.find('\n', pos);
  std::string_view out = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
  if (!out.empty() && out.back() == '\r') out.remove_suffix(1);
  return std::string(out);
}

SourceLoc loc_of_offset(std::string_view file, std::string_view text, std::size_t offset) {
  SourceLoc loc{std::string(file), 1, 1};
  offset = std::min(offset, text.size());
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.col = 1;
    } else {
      ++loc.col;
    }
  }
  return loc;
}

// Optimal string alignment distance: Levenshtein plus the swap of two
// adjacent characters as one edit, the commonest typo ("alpah").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = 0;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (best.empty() || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // A typo is at most a third of the word (and at least one edit).
  std::size_t limit = std::max<std::size_t>(1, std::max(word.size(), best.size()) / 3);
  if (!best.empty() && best_distance <= limit) return best;
  return {};
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string m = closest_match(word, candidates);
  if (m.empty()) return {};
  return "; did you mean '" + m + "'?";
}

std::string quote(std::string_view text, std::size_t max_length) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_length) {
      out += "...";
      break;
    }
    unsigned char u = static_cast<unsigned char>(text[i]);
    if (u == '\n') out += "\\n";
    else if (u == '\t') out += "\\t";
    else if (u < 0x20 || u >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += static_cast<char>(u);
    }
  }
  return out;
}

bool stderr_wants_color() {
  static const bool wants = [] {
    if (std::getenv("NO_COLOR")) return false;
    const char* term = std::getenv("TERM");
    if (term && std::string_view(term) == "dumb") return false;
    return isatty(STDERR_FILENO) != 0;
  }();
  return wants;
}

bool debug_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("WFGEN_DEBUG");
    return v && *v && std::string_view(v) != "0";
  }();
  return enabled;
}

}  // namespace wfgen

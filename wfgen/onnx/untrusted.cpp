// Making an untrusted ONNX model harmless before the importer reads it: its
// names escaped into printable ASCII (this file's first half).
#include "wfgen/onnx/untrusted.hpp"

#include <cstdint>
#include <cstdio>

#include "wfgen/support/diagnostics.hpp"

namespace wfgen::onnx_import {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  Diagnostic d;
  d.loc.file = path;
  d.message = message;
  throw UserError(d);
}

// Escapes the names of one graph (and of the graphs its nodes' attributes
// hold) in place.
class NameEscaper {
 public:
  explicit NameEscaper(const std::string& path) : path_(path) {}

  void model(onnx::ModelProto& m) {
    name(*m.mutable_producer_name(), "the producer name");
    name(*m.mutable_producer_version(), "the producer version");
    name(*m.mutable_domain(), "the model's domain");
    for (auto& op : *m.mutable_opset_import()) name(*op.mutable_domain(), "an opset domain");
    graph(*m.mutable_graph());
  }

 private:
  void name(std::string& s, const char* what) {
    if (s.size() > kMaxNameBytes) {
      fail(path_, std::string(what) + " is " + std::to_string(s.size()) + " bytes long ('" + quote(s, 40) +
                      "'); names of up to " + std::to_string(kMaxNameBytes) + " bytes are accepted");
    }
    bool plain = true;
    for (char c : s) plain = plain && c >= 0x20 && c < 0x7f && c != '\\';
    if (!plain) s = escape_name(s);
  }

  void graph(onnx::GraphProto& g) {
    name(*g.mutable_name(), "the graph's name");
    for (auto& vi : *g.mutable_input()) value_info(vi);
    for (auto& vi : *g.mutable_output()) value_info(vi);
    for (auto& vi : *g.mutable_value_info()) value_info(vi);
    for (auto& t : *g.mutable_initializer()) name(*t.mutable_name(), "an initializer's name");
    for (auto& s : *g.mutable_sparse_initializer()) {
      name(*s.mutable_values()->mutable_name(), "a sparse initializer's name");
      name(*s.mutable_indices()->mutable_name(), "a sparse initializer's name");
    }
    for (auto& n : *g.mutable_node()) node(n);
  }

  void node(onnx::NodeProto& n) {
    name(*n.mutable_name(), "a node's name");
    name(*n.mutable_op_type(), "an operator type");
    name(*n.mutable_domain(), "an operator domain");
    for (auto& s : *n.mutable_input()) name(s, "a node's input name");
    for (auto& s : *n.mutable_output()) name(s, "a node's output name");
    for (auto& a : *n.mutable_attribute()) {
      name(*a.mutable_name(), "an attribute's name");
      // Only the fields present: mutable_s() would set `s` on an attribute
      // of another type, which ONNX's checker (upgrade.cpp) refuses as a
      // second value.
      if (a.has_ref_attr_name()) name(*a.mutable_ref_attr_name(), "an attribute's name");
      if (a.has_s()) name(*a.mutable_s(), "an attribute's string");
      for (auto& s : *a.mutable_strings()) name(s, "an attribute's string");
      if (a.has_t()) name(*a.mutable_t()->mutable_name(), "a tensor's name");
      for (auto& t : *a.mutable_tensors()) name(*t.mutable_name(), "a tensor's name");
      if (a.has_g()) graph(*a.mutable_g());
      for (auto& g : *a.mutable_graphs()) graph(g);
    }
  }

  void value_info(onnx::ValueInfoProto& vi) {
    name(*vi.mutable_name(), "a value's name");
    if (!vi.has_type()) return;
    onnx::TypeProto& t = *vi.mutable_type();
    name(*t.mutable_denotation(), "a type denotation");
    onnx::TensorShapeProto* shape = nullptr;
    if (t.has_tensor_type() && t.tensor_type().has_shape()) shape = t.mutable_tensor_type()->mutable_shape();
    if (t.has_sparse_tensor_type() && t.sparse_tensor_type().has_shape()) shape = t.mutable_sparse_tensor_type()->mutable_shape();
    if (!shape) return;
    for (auto& d : *shape->mutable_dim()) {
      if (d.has_dim_param()) name(*d.mutable_dim_param(), "a dim's name");
      name(*d.mutable_denotation(), "a dim denotation");
    }
  }

  const std::string& path_;
};

void append_hex(std::string& out, const char* format, std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, static_cast<unsigned>(v));
  out += buf;
}

// The code point of the UTF-8 sequence at s[i] and its length; 0 when the
// bytes there are not valid UTF-8 (overlong, surrogate, out of range, cut).
std::size_t utf8_at(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (c >= 0xf5) n = 0;
  if (n == 0 || i + n > s.size()) return 0;
  cp = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string escape_name(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (u < 0x20 || u >= 0x7f) append_hex(out, "\\x%02x", u);
    else out += c;
  }
  return out;
}

void escape_names(onnx::ModelProto& model, const std::string& path) { NameEscaper(path).model(model); }

std::string yaml_quoted(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0x80) {
      std::uint32_t cp = 0xfffd;
      const std::size_t n = utf8_at(s, i, cp);
      append_hex(out, cp > 0xffff ? "\\U%08x" : "\\u%04x", n ? cp : 0xfffd);
      i += n ? n : 1;
      continue;
    }
    if (s[i] == '"' || s[i] == '\\') out += '\\', out += s[i];
    else if (s[i] == '\n') out += "\\n";
    else if (s[i] == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) append_hex(out, "\\x%02x", u);
    else out += s[i];
    ++i;
  }
  return out + "\"";
}

}  // namespace wfgen::onnx_import

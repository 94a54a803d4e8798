// A generated model's parameters (model_support.hpp): their initialisers
// and the parameter file (.wfparams: names, dtypes, shapes, data, a
// checksum) they are saved to and loaded from; matching them by name is
// parameter_matching.cpp.
#include "wfgen/model_support.hpp"

#include "internal.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace wfgen::rt {

void init_parameter(Tensor& t, InitKind kind, double a, double b, Rng& rng) {
  std::int64_t fan_in = t.rank() == 0 ? 1 : t.dim(0);
  std::int64_t fan_out = t.rank() == 0 ? 1 : t.dim(t.rank() - 1);
  switch (kind) {
    case InitKind::Zeros: t.fill(0.0); return;
    case InitKind::Ones: t.fill(1.0); return;
    case InitKind::Constant: t.fill(a); return;
    case InitKind::Uniform: fill_uniform(t, a, b, rng); return;
    case InitKind::Normal: fill_normal(t, a, b, rng); return;
    case InitKind::Xavier: {
      double limit = std::sqrt(6.0 / static_cast<double>(std::max<std::int64_t>(1, fan_in + fan_out)));
      fill_uniform(t, -limit, limit, rng);
      return;
    }
    case InitKind::He: fill_normal(t, 0.0, std::sqrt(2.0 / static_cast<double>(std::max<std::int64_t>(1, fan_in))), rng); return;
  }
}

namespace {

constexpr char kMagic[8] = {'W', 'F', 'G', 'E', 'N', 'P', 'R', 'M'};
constexpr std::uint32_t kVersion = 1;

struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  void add(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
};

class Writer {
 public:
  explicit Writer(std::vector<char>& out) : out_(out) {}
  void bytes(const void* p, std::size_t n) { out_.insert(out_.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n); }
  template <class T>
  void put(T v) {
    static_assert(std::endian::native == std::endian::little, "parameter files are little-endian");
    bytes(&v, sizeof v);
  }

 private:
  std::vector<char>& out_;
};

// Reads the parameter file's bytes in order; the first problem is kept as
// error() (BadParameterFile) and every later read gives zeros.
class Reader {
 public:
  Reader(const std::vector<char>& in, const std::string& path) : in_(in), path_(path) {}
  bool bytes(void* p, std::size_t n) {
    if (!error_.ok()) return false;
    if (n > in_.size() - pos_) {
      fail("the file is truncated (needed " + std::to_string(n) + " more bytes at offset " + std::to_string(pos_) + ")");
      return false;
    }
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  template <class T>
  T get() {
    T v{};
    if (!bytes(&v, sizeof v)) return T{};
    return v;
  }
  std::size_t pos() const { return pos_; }
  // Past n bytes the caller checked are there.
  void skip(std::size_t n) { pos_ += n; }
  bool ok() const { return error_.ok(); }
  // Keeps the first error.
  void fail(const std::string& why) {
    if (error_.ok()) error_ = Status(ErrorCode::BadParameterFile, "parameter file " + path_ + ": " + why);
  }
  const Status& error() const { return error_; }

 private:
  const std::vector<char>& in_;
  const std::string& path_;
  std::size_t pos_ = 0;
  Status error_;
};

}  // namespace

Status check_tensors(const char* what, std::span<const std::string> names, std::span<const Tensor> tensors, bool distinct) {
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    if (!tensors[k].defined()) {
      return Status(ErrorCode::NullBuffer, std::string(what) + " " + (k < names.size() ? "'" + names[k] + "'" : std::to_string(k)) +
                                               " is an undefined tensor (no storage), expected a tensor to " +
                                               (distinct ? "load into" : "read"));
    }
  }
  if (!distinct) return {};
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    for (std::size_t j = 0; j < k; ++j) {
      if (may_alias(tensors[j], tensors[k])) {
        return Status(ErrorCode::AliasedBuffer, std::string(what) + " '" + (k < names.size() ? names[k] : std::to_string(k)) +
                                                    "' overlaps '" + (j < names.size() ? names[j] : std::to_string(j)) +
                                                    "' in memory, expected separate tensors to load into");
      }
    }
  }
  return {};
}

void save_parameters(const std::string& path, std::span<const std::string> names, std::span<const Tensor> tensors) {
  if (Status st = try_save_parameters(path, names, tensors); !st.ok()) fail(st);
}

void load_parameters(const std::string& path, std::span<const std::string> names, std::span<Tensor> tensors,
                     std::string_view scope) {
  if (Status st = try_load_parameters(path, names, tensors, scope); !st.ok()) fail(st);
}

Status try_save_parameters(const std::string& path, std::span<const std::string> names, std::span<const Tensor> tensors) {
  if (names.size() != tensors.size()) {
    return Status(ErrorCode::InvalidArgument, "save_parameters: " + std::to_string(names.size()) + " names but " +
                                                  std::to_string(tensors.size()) + " tensors");
  }
  if (Status st = check_tensors("parameter", names, tensors, false); !st.ok()) return st;
  std::vector<char> buf;
  Writer w(buf);
  w.bytes(kMagic, sizeof kMagic);
  w.put<std::uint32_t>(kVersion);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(names.size()));
  for (std::size_t k = 0; k < names.size(); ++k) {
    Tensor c = tensors[k].contiguous();
    w.put<std::uint32_t>(static_cast<std::uint32_t>(names[k].size()));
    w.bytes(names[k].data(), names[k].size());
    w.put<std::uint8_t>(static_cast<std::uint8_t>(c.dtype()));
    w.put<std::uint32_t>(static_cast<std::uint32_t>(c.rank()));
    for (int d = 0; d < c.rank(); ++d) w.put<std::int64_t>(c.dim(d));
    w.put<std::uint64_t>(static_cast<std::uint64_t>(c.nbytes()));
    w.bytes(c.raw_data(), static_cast<std::size_t>(c.nbytes()));
  }
  Fnv f;
  f.add(buf.data(), buf.size());
  w.put<std::uint64_t>(f.h);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (!out) return Status(ErrorCode::BadParameterFile, "cannot write the parameter file " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status(ErrorCode::BadParameterFile, "cannot move the parameter file into place: " + path);
  }
  return {};
}

namespace {

// One parameter of a file as read: where its data lies in the file's bytes.
struct FileParameter {
  std::string name;
  std::uint8_t dtype = 0;
  std::vector<std::int64_t> dims;
  std::uint64_t nbytes = 0;
  std::size_t offset = 0;
};

// Reads the parameters of a file whose header (magic, version) `r` has read;
// the first problem is r.error().
std::vector<FileParameter> read_file_parameters(Reader& r, const std::vector<char>& buf) {
  std::vector<FileParameter> out;
  const std::uint32_t count = r.get<std::uint32_t>();
  for (std::uint32_t k = 0; k < count && r.ok(); ++k) {
    FileParameter p;
    const std::uint32_t len = r.get<std::uint32_t>();
    if (!r.ok()) break;
    if (len > 4096) {
      r.fail("a parameter name is " + std::to_string(len) + " bytes long");
      break;
    }
    p.name.assign(len, '\0');
    if (!r.bytes(p.name.data(), len)) break;
    p.dtype = r.get<std::uint8_t>();
    const std::uint32_t rank = r.get<std::uint32_t>();
    if (r.ok() && rank > static_cast<std::uint32_t>(kMaxRank)) {
      r.fail("parameter '" + internal::printable_name(p.name) + "' has rank " + std::to_string(rank) + " (at most " +
             std::to_string(kMaxRank) + ")");
    }
    for (std::uint32_t d = 0; d < rank && r.ok(); ++d) p.dims.push_back(r.get<std::int64_t>());
    p.nbytes = r.get<std::uint64_t>();
    if (!r.ok()) break;
    if (p.nbytes > buf.size() - r.pos()) {
      r.fail("the file is truncated (parameter '" + internal::printable_name(p.name) + "' needs " + std::to_string(p.nbytes) +
             " bytes at offset " + std::to_string(r.pos()) + ")");
      break;
    }
    p.offset = r.pos();
    r.skip(static_cast<std::size_t>(p.nbytes));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

Status try_load_parameters(const std::string& path, std::span<const std::string> names, std::span<Tensor> tensors,
                           std::string_view scope) {
  if (names.size() != tensors.size()) {
    return Status(ErrorCode::InvalidArgument, "load_parameters: " + std::to_string(names.size()) + " names but " +
                                                  std::to_string(tensors.size()) + " tensors");
  }
  if (Status st = check_tensors("parameter", names, std::span<const Tensor>(tensors.data(), tensors.size()), true); !st.ok()) {
    return st;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status(ErrorCode::BadParameterFile, "cannot read the parameter file " + path + ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::BadParameterFile, "cannot open the parameter file " + path);
  std::vector<char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Reader r(buf, path);
  char magic[8] = {};
  r.bytes(magic, sizeof magic);
  if (!r.ok()) return r.error();
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) r.fail("this is not a wfgen parameter file (wrong magic)");
  std::uint32_t version = r.get<std::uint32_t>();
  if (r.ok() && version != kVersion) {
    r.fail("version " + std::to_string(version) + " is not supported (expected " + std::to_string(kVersion) + ")");
  }
  if (!r.ok()) return r.error();
  if (buf.size() < 8 + 8) r.fail("the file is truncated");
  if (!r.ok()) return r.error();
  // Read everything first: a bad file changes nothing.
  const std::vector<FileParameter> file = read_file_parameters(r, buf);
  if (!r.ok()) return r.error();
  if (r.pos() + 8 > buf.size()) r.fail("the file is truncated (the checksum is missing)");
  else if (r.pos() + 8 != buf.size()) r.fail("unexpected bytes after the last parameter");
  if (!r.ok()) return r.error();

  // Matched by name, never by position (docs/runtime-api.md, "Moving parameters between builds").
  const internal::ParameterSource where{"parameter file " + path + ": ", "the file", "load_parameters", ErrorCode::BadParameterFile};
  std::vector<std::string> file_names;
  for (const auto& p : file) file_names.push_back(p.name);
  std::vector<std::size_t> from;
  if (Status st = internal::match_parameters(file_names, names, scope, where, from); !st.ok()) return st;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const FileParameter& p = file[from[k]];
    std::string why = internal::parameter_mismatch(names[k], p.name, p.dtype, p.dims, tensors[k]);
    if (why.empty() && p.nbytes != static_cast<std::uint64_t>(tensors[k].nbytes())) {
      why = "parameter '" + names[k] + "' has the wrong byte count";
    }
    if (!why.empty()) r.fail(why);
  }
  if (!r.ok()) return r.error();
  Fnv f;
  f.add(buf.data(), buf.size() - 8);
  std::uint64_t stored;
  std::memcpy(&stored, buf.data() + buf.size() - 8, 8);
  if (f.h != stored) r.fail("the checksum does not match: the file is corrupted");
  if (!r.ok()) return r.error();
  std::vector<Tensor> staged(names.size());
  for (std::size_t k = 0; k < names.size(); ++k) {
    if (Status st = Tensor::try_empty(tensors[k].dtype(), tensors[k].shape(), staged[k]); !st.ok()) return st;
    const FileParameter& p = file[from[k]];
    if (p.nbytes) std::memcpy(staged[k].raw_data(), buf.data() + p.offset, static_cast<std::size_t>(p.nbytes));
  }
  for (std::size_t k = 0; k < names.size(); ++k) tensors[k].copy_from(staged[k]);
  return {};
}

}  // namespace wfgen::rt

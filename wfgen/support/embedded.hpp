// Files carried inside the wfgen binary (schemas, templates, the standard
// library of specs), produced at build time by cmake/EmbedFiles.cmake.
#pragma once

#include <span>
#include <string_view>

namespace wfgen {

struct EmbeddedFile {
  std::string_view path;  // relative to the folder it came from, e.g. "spec.schema.json"
  std::string_view text;
};

}  // namespace wfgen

// Matching a model's parameters with those of a parameter file or of another
// model by name: the same build, another build of the same model, or a build
// that calls the model (a training build names them "<Model>_0/linear_0.W").
// See "Moving parameters between builds" in docs/runtime-api.md.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "internal.hpp"
#include "wfgen/model_support.hpp"

namespace wfgen::rt {

namespace internal {

namespace {

// At most `limit` names, quoted, then "and N more".
std::string name_list(const std::vector<std::string>& names, std::size_t limit = 6) {
  std::string out;
  for (std::size_t k = 0; k < names.size() && k < limit; ++k) out += (k ? ", '" : "'") + names[k] + "'";
  if (names.size() > limit) out += " and " + std::to_string(names.size() - limit) + " more";
  return out;
}

std::string plural(std::size_t n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

// The name a build that calls the model gives the model's parameter `name`
// under `scope` (the call's model path, "classifier_0"): the model's own
// parameters are "classifier_0.W1", those of models it calls
// "classifier_0/linear_0.W"; the top level (scope "") is the name itself.
std::string scoped(const std::string& scope, std::string_view name) {
  if (scope.empty()) return std::string(name);
  return scope + (name.find('.') == std::string_view::npos ? "." : "/") + std::string(name);
}

// The scopes under which the source holds at least one of `names`, each with
// how many of them it holds.
std::map<std::string, std::size_t> scopes_holding(const std::map<std::string_view, std::size_t>& source,
                                                  const std::set<std::string_view>& names) {
  std::map<std::string, std::size_t> found;
  for (const auto& [s, index] : source) {
    (void)index;
    for (std::size_t cut = s.find_first_of("/."); cut != std::string_view::npos; cut = s.find_first_of("/.", cut + 1)) {
      const std::string scope(s.substr(0, cut));
      const std::string_view rest = s.substr(cut + 1);
      if (names.count(rest) && scoped(scope, rest) == s) ++found[scope];
    }
  }
  return found;
}

// "classifier_0/linear_0.W" under "classifier_0" is "linear_0.W" (and
// "classifier_0.W1" is "W1"); "" when `name` is not under `scope`.
std::string unscoped(const std::string& scope, const std::string& name) {
  if (name.size() <= scope.size() + 1 || name.compare(0, scope.size(), scope) != 0) return {};
  const std::string rest = name.substr(scope.size() + 1);
  return scoped(scope, rest) == name ? rest : std::string();
}

// The other way round: the one scope of `names` (a build that calls the
// source's model, "classifier_0") under which every name is a name of the
// source (a build used as a node's, with a '.', as it is); "" when there
// is none, or more than one.
std::string callee_scope(const std::map<std::string_view, std::size_t>& source, std::span<const std::string> names) {
  std::set<std::string> candidates;
  for (const auto& n : names) {
    for (std::size_t cut = n.find_first_of("/."); cut != std::string::npos; cut = n.find_first_of("/.", cut + 1)) {
      const std::string scope = n.substr(0, cut), rest = unscoped(scope, n);
      if (!rest.empty() && source.count(rest)) candidates.insert(scope);
    }
  }
  std::vector<std::string> complete;
  for (const auto& scope : candidates) {
    const bool all = std::all_of(names.begin(), names.end(), [&](const std::string& n) {
      const std::string rest = unscoped(scope, n);
      return rest.empty() ? n.find('.') != std::string::npos && source.count(n) : source.count(rest) != 0;
    });
    if (all) complete.push_back(scope);
  }
  return complete.size() == 1 ? complete[0] : std::string();
}

}  // namespace

Status match_parameters(std::span<const std::string> source_names, std::span<const std::string> names, std::string_view scope,
                        const ParameterSource& where, std::vector<std::size_t>& from) {
  auto error = [&](const std::string& why) { return Status(where.code, where.context + why); };
  std::map<std::string_view, std::size_t> source;
  for (std::size_t k = 0; k < source_names.size(); ++k) {
    if (!source.emplace(source_names[k], k).second) {
      return error(std::string(where.noun) + " holds the parameter '" + printable_name(source_names[k]) + "' twice");
    }
  }
  const std::set<std::string_view> wanted(names.begin(), names.end());
  // A parameter of a build used as a node (`as: node`, "elman_cell.Wx") is
  // shared by every caller and keeps its name in every build: not found
  // under the scope, a name with a '.' is looked up as it is.
  bool callee = false;  // the model calls the source's model (names under `chosen` here, not there)
  auto find = [&](const std::string& in, const std::string& name) {
    const std::string rest = callee ? unscoped(in, name) : std::string();
    auto it = source.find(callee ? (rest.empty() ? name : rest) : scoped(in, name));
    if (it == source.end() && !in.empty() && name.find('.') != std::string::npos) it = source.find(name);
    return it;
  };
  auto holds_all = [&](const std::string& in) {
    return std::all_of(names.begin(), names.end(), [&](const std::string& n) { return find(in, n) != source.end(); });
  };

  std::string chosen(scope);  // the scope matched, "" for the top level
  while (!chosen.empty() && (chosen.back() == '/' || chosen.back() == '.')) chosen.pop_back();
  if (scope.empty() && !holds_all("")) {
    // Not the same model at the top level: the one scope that holds every
    // parameter (a build that calls this model), else the closest for the message.
    const auto scopes = scopes_holding(source, wanted);
    std::vector<std::string> complete;
    for (const auto& [p, n] : scopes) {
      (void)n;
      if (holds_all(p)) complete.push_back(p);
    }
    if (complete.size() > 1) {
      return error(std::string(where.noun) + " holds this model's parameters under " + std::to_string(complete.size()) +
                   " scopes, " + name_list(complete) + ": name the one to take, e.g. " + where.call + "(..., \"" +
                   complete[0] + "\")");
    }
    if (complete.size() == 1) {
      chosen = complete[0];
    } else if (std::string c = callee_scope(source, names); !c.empty()) {
      // A training build taking an inference build's file (to train on from there).
      chosen = c;
      callee = true;
    } else {
      std::size_t best = 0;
      for (const auto& [p, n] : scopes) {
        if (n > best) best = n, chosen = p;
      }
      std::size_t top_level = 0;
      for (const auto& n : names) top_level += source.count(n);
      if (top_level > best) chosen.clear();
    }
  }

  std::vector<std::string> missing;
  from.assign(names.size(), 0);
  std::set<std::size_t> used;
  for (std::size_t k = 0; k < names.size(); ++k) {
    auto it = find(chosen, names[k]);
    if (it == source.end()) {
      missing.push_back(names[k]);
    } else {
      from[k] = it->second;
      used.insert(it->second);
    }
  }
  const std::string under = chosen.empty() ? "" : " under the scope '" + chosen + "'";
  if (!missing.empty()) {
    std::vector<std::string> has;
    for (const auto& s : source_names) has.push_back(printable_name(s));
    return error("the model's " + std::string(missing.size() == 1 ? "parameter " : "parameters ") + name_list(missing) +
                 (missing.size() == 1 ? " is" : " are") + " not in " + where.noun + under + "; it holds " +
                 plural(source_names.size(), "parameter") + (has.empty() ? "" : ": " + name_list(has)));
  }
  // Nothing of the source under the scope may be left over: that would be
  // another model (a layer more, a renamed one), not this one's parameters.
  std::vector<std::string> extra;
  for (std::size_t k = 0; k < source_names.size(); ++k) {
    const std::string& s = source_names[k];
    const bool under_scope = callee || chosen.empty() ||
                             (s.size() > chosen.size() && s.compare(0, chosen.size(), chosen) == 0 &&
                              (s[chosen.size()] == '/' || s[chosen.size()] == '.'));
    if (!used.count(k) && under_scope) extra.push_back(printable_name(s));
  }
  if (!extra.empty()) {
    return error(std::string(where.noun) + "'s " + (extra.size() == 1 ? "parameter " : "parameters ") + name_list(extra) +
                 (extra.size() == 1 ? " is" : " are") + " not " + (extra.size() == 1 ? "one" : "any") + " of the model's" + under +
                 " (the model has " + plural(names.size(), "parameter") + ")");
  }
  return {};
}

std::string printable_name(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= 64) return out + "...";
    if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string parameter_mismatch(const std::string& name, const std::string& source_name, std::uint8_t dtype_code,
                               std::span<const std::int64_t> dims, const Tensor& to) {
  const std::string who =
      "parameter '" + name + "'" + (source_name == name ? "" : " (taken from '" + printable_name(source_name) + "')");
  if (dtype_code != static_cast<std::uint8_t>(to.dtype())) {
    const std::string found = dtype_code < kDTypeCount ? std::string("dtype ") + dtype_name(static_cast<DType>(dtype_code))
                                                       : "an unknown dtype code " + std::to_string(dtype_code);
    return who + " has " + found + ", expected " + dtype_name(to.dtype());
  }
  if (static_cast<std::int64_t>(dims.size()) != to.rank()) {
    return who + " has rank " + std::to_string(dims.size()) + ", expected " + std::to_string(to.rank());
  }
  if (!std::equal(dims.begin(), dims.end(), to.shape().begin())) {
    return who + " has shape " + shape_to_string(dims) + ", expected " + shape_to_string(to.shape());
  }
  return {};
}

}  // namespace internal

Status try_copy_parameters(std::span<const std::pair<std::string, Tensor>> source, std::span<const std::string> names,
                           std::span<Tensor> tensors, std::string_view scope) {
  const internal::ParameterSource where{"copy_parameters_from: ", "the source model", "copy_parameters_from",
                                        ErrorCode::InvalidArgument};
  if (names.size() != tensors.size()) {
    return Status(ErrorCode::InvalidArgument, where.context + std::to_string(names.size()) + " names but " +
                                                  std::to_string(tensors.size()) + " tensors");
  }
  std::vector<std::string> source_names;
  std::vector<Tensor> source_tensors;
  for (const auto& [name, t] : source) source_names.push_back(name), source_tensors.push_back(t);
  if (Status st = check_tensors("source parameter", source_names, source_tensors, false); !st.ok()) return st;
  if (Status st = check_tensors("parameter", names, std::span<const Tensor>(tensors.data(), tensors.size()), true); !st.ok()) {
    return st;
  }
  std::vector<std::size_t> from;
  if (Status st = internal::match_parameters(source_names, names, scope, where, from); !st.ok()) return st;
  // Every check before the first copy: on error nothing changes.
  for (std::size_t k = 0; k < names.size(); ++k) {
    const Tensor& s = source_tensors[from[k]];
    const std::string why = internal::parameter_mismatch(names[k], source_names[from[k]], static_cast<std::uint8_t>(s.dtype()),
                                                         s.shape(), tensors[k]);
    if (!why.empty()) return Status(ErrorCode::InvalidArgument, where.context + why);
  }
  for (std::size_t k = 0; k < names.size(); ++k) tensors[k].copy_from(source_tensors[from[k]]);
  return {};
}

void copy_parameters(std::span<const std::pair<std::string, Tensor>> source, std::span<const std::string> names,
                     std::span<Tensor> tensors, std::string_view scope) {
  if (Status st = try_copy_parameters(source, names, tensors, scope); !st.ok()) fail(st);
}

}  // namespace wfgen::rt

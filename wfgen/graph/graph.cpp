#include "wfgen/graph/graph.hpp"

#include <sstream>

namespace wfgen::graph {

const char* kind_name(Kind k) {
  switch (k) {
#define WFGEN_KIND_NAME(name, text) \
  case Kind::name: return text;
    WFGEN_VALUE_KINDS(WFGEN_KIND_NAME)
#undef WFGEN_KIND_NAME
  }
  return "?";
}

const char* view_name(ViewKind v) {
  switch (v) {
    case ViewKind::Permute: return "permute";
    case ViewKind::Reshape: return "reshape";
    case ViewKind::Broadcast: return "broadcast";
    case ViewKind::Slice: return "slice";
    case ViewKind::Squeeze: return "squeeze";
    case ViewKind::Unsqueeze: return "unsqueeze";
  }
  return "?";
}

int Graph::root(int id) const {
  for (;;) {
    const Value& v = values[static_cast<std::size_t>(id)];
    if (v.kind == Kind::View) id = v.base;
    else if (v.kind == Kind::Call && v.write_to >= 0) id = v.write_to;
    else return id;
  }
}

void renumber(Graph& g, const std::vector<int>& order) {
  std::vector<int> new_id(g.values.size(), -1);
  std::vector<Value> kept;
  kept.reserve(order.size());
  for (int id : order) {
    new_id[static_cast<std::size_t>(id)] = static_cast<int>(kept.size());
    kept.push_back(std::move(g.values[static_cast<std::size_t>(id)]));
  }
  auto map = [&](int& id) {
    if (id >= 0) id = new_id[static_cast<std::size_t>(id)];
  };
  for (auto& v : kept) {
    map(v.id);
    for (int& o : v.operands) map(o);
    map(v.base);
    map(v.init_from);
    map(v.write_to);
    map(v.grad_of);
  }
  g.values = std::move(kept);
  for (auto* list : {&g.inputs, &g.params, &g.outputs, &g.seeds, &g.grads})
    for (int& i : *list) map(i);
}

void replace_uses(Graph& g, int from, int to) {
  for (auto& v : g.values) {
    if (v.id == to) continue;
    for (int& o : v.operands)
      if (o == from && v.id != from) o = to;
    if (v.base == from) v.base = to;
    if (v.init_from == from) v.init_from = to;
  }
  for (int& o : g.outputs)
    if (o == from) o = to;
}

std::vector<int> count_readers(const Graph& g) {
  std::vector<int> readers(g.values.size(), 0);
  auto read = [&](int id) { ++readers[static_cast<std::size_t>(id)]; };
  for (const auto& v : g.values) {
    for (int o : v.operands)
      if (o != v.id) read(o);
    if (v.base >= 0) read(v.base);
    if (v.init_from >= 0) read(v.init_from);
    if (v.write_to >= 0) read(v.write_to);
  }
  for (int o : g.outputs) read(o);
  return readers;
}

std::string Graph::dump() const {
  std::ostringstream os;
  os << "graph " << model << " (" << values.size() << " values)\n";
  for (const auto& v : values) {
    os << "  %" << v.id << " = " << kind_name(v.kind);
    switch (v.kind) {
      case Kind::Input: os << " " << v.name; break;
      case Kind::Param: os << " " << v.param_path; break;
      case Kind::Call: {
        os << " " << v.node->name << "[" << v.impl->device << "](";
        for (std::size_t k = 0; k < v.operands.size(); ++k) {
          os << (k ? ", " : "");
          if (v.operands[k] == v.id) os << "out";
          else os << "%" << v.operands[k];
        }
        os << ")";
        for (std::size_t k = 0; k < v.args.size(); ++k) os << " " << v.node->args[k].name << "=" << spec::arg_value_str(v.args[k]);
        if (v.init_from >= 0) os << " init=%" << v.init_from;
        if (v.write_to >= 0) os << (v.accumulate ? " added-into=%" : " into=%") << v.write_to;
        break;
      }
      case Kind::View: os << " " << view_name(v.view) << "(%" << v.base << ")"; break;
      case Kind::Grad: os << " d%" << v.grad_of; break;
      case Kind::Seed: os << " d%" << outputs[static_cast<std::size_t>(v.seed_of)]; break;
    }
    os << " : " << rt::dtype_name(v.dtype) << shape::shape_str(v.shape);
    if (!v.name.empty() && v.kind == Kind::Call) os << "  # " << v.name;
    if (v.backward) os << "  [pullback]";
    os << "\n";
  }
  os << "  return";
  for (std::size_t k = 0; k < outputs.size(); ++k) os << (k ? ", %" : " %") << outputs[k];
  os << "\n";
  return os.str();
}

}  // namespace wfgen::graph

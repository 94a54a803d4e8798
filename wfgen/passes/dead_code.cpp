#include <algorithm>

#include "wfgen/passes/passes.hpp"

namespace wfgen::passes {

void eliminate_dead_code(graph::Graph& g) {
  std::vector<bool> live(g.values.size(), false);
  std::vector<int> work(g.outputs.begin(), g.outputs.end());
  for (int p : g.params) live[static_cast<std::size_t>(p)] = true;
  for (int i : g.inputs) live[static_cast<std::size_t>(i)] = true;
  for (int s : g.seeds) live[static_cast<std::size_t>(s)] = true;
  for (int b : g.grads) live[static_cast<std::size_t>(b)] = true;
  auto external = [&](int id) {
    auto k = g[id].kind;
    return k == graph::Kind::Input || k == graph::Kind::Param || k == graph::Kind::Seed || k == graph::Kind::Grad;
  };
  // A call that writes into existing storage (write_to) lives as long as
  // that storage does, so marking repeats until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& v : g.values) {
      if (v.kind != graph::Kind::Call || v.write_to < 0 || live[static_cast<std::size_t>(v.id)]) continue;
      if (live[static_cast<std::size_t>(g.root(v.write_to))]) work.push_back(v.id);
    }
    while (!work.empty()) {
      int id = work.back();
      work.pop_back();
      if (live[static_cast<std::size_t>(id)] && !external(id)) continue;
      if (!live[static_cast<std::size_t>(id)]) changed = true;
      live[static_cast<std::size_t>(id)] = true;
      const graph::Value& v = g[id];
      for (int o : v.operands)
        if (o != id) work.push_back(o);
      if (v.base >= 0) work.push_back(v.base);
      if (v.init_from >= 0) work.push_back(v.init_from);
      if (v.write_to >= 0 && !live[static_cast<std::size_t>(v.write_to)]) work.push_back(v.write_to);
    }
  }
  // Renumber the survivors, keeping their order.
  std::vector<int> order;
  for (const auto& v : g.values)
    if (live[static_cast<std::size_t>(v.id)]) order.push_back(v.id);
  graph::renumber(g, order);
}

}  // namespace wfgen::passes

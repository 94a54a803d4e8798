#include <algorithm>

#include "wfgen/passes/passes.hpp"

namespace wfgen::passes {

namespace {

bool elementwise(const graph::Value& v) { return v.impl && v.impl->kind == spec::BodyKind::Elementwise; }

}  // namespace

MemoryPlan plan_memory(const graph::Graph& g) {
  const std::size_t n = g.values.size();
  MemoryPlan plan;
  plan.slot_of.assign(n, -1);
  plan.last_use.assign(n, -1);
  // Instruction index of each call = its position among calls.
  std::vector<int> index(n, -1);
  int next = 0;
  for (const auto& v : g.values)
    if (v.kind == graph::Kind::Call) index[static_cast<std::size_t>(v.id)] = next++;
  const int end = next;  // outputs live past the last instruction
  auto use = [&](int value, int at) {
    int root = g.root(value);
    int& l = plan.last_use[static_cast<std::size_t>(root)];
    l = std::max(l, at);
  };
  for (const auto& v : g.values) {
    if (v.kind != graph::Kind::Call) continue;
    int at = index[static_cast<std::size_t>(v.id)];
    for (int o : v.operands)
      if (o != v.id) use(o, at);
    if (v.init_from >= 0) use(v.init_from, at);
    if (v.write_to >= 0) use(v.write_to, at);  // writes into a live tensor
  }
  for (int o : g.outputs) use(o, end);
  // Greedy assignment in definition order.
  std::vector<int> free_slots;
  std::vector<int> holder;  // per slot: the root currently in it (-1: free)
  for (const auto& v : g.values) {
    if (v.kind != graph::Kind::Call || v.write_to >= 0) continue;
    int at = index[static_cast<std::size_t>(v.id)];
    // Free slots whose value was last read before this instruction.
    for (std::size_t s = 0; s < holder.size(); ++s) {
      int h = holder[s];
      if (h >= 0 && plan.last_use[static_cast<std::size_t>(h)] < at) {
        holder[s] = -1;
        free_slots.push_back(static_cast<int>(s));
      }
    }
    int slot = -1;
    // In place: an element-wise call may write over an operand that dies here.
    if (elementwise(v) && v.init_from < 0) {
      for (int o : v.operands) {
        if (o == v.id) continue;
        const graph::Value& ov = g[o];
        if (ov.kind != graph::Kind::Call || plan.last_use[static_cast<std::size_t>(o)] != at) continue;
        if (ov.shape != v.shape || ov.dtype != v.dtype) continue;
        // Only when no other operand is a view of the same storage.
        bool alone = true;
        for (int p : v.operands)
          if (p != o && p != v.id && g.root(p) == o) alone = false;
        if (!alone) continue;
        slot = plan.slot_of[static_cast<std::size_t>(o)];
        break;
      }
    }
    if (slot < 0 && !free_slots.empty()) {
      std::sort(free_slots.begin(), free_slots.end());
      slot = free_slots.front();
      free_slots.erase(free_slots.begin());
    }
    if (slot < 0) {
      slot = static_cast<int>(plan.slots.size());
      plan.slots.emplace_back();
      holder.push_back(-1);
    }
    plan.slot_of[static_cast<std::size_t>(v.id)] = slot;
    plan.slots[static_cast<std::size_t>(slot)].push_back(v.id);
    holder[static_cast<std::size_t>(slot)] = v.id;
    if (plan.last_use[static_cast<std::size_t>(v.id)] < 0) plan.last_use[static_cast<std::size_t>(v.id)] = at;
  }
  return plan;
}

}  // namespace wfgen::passes

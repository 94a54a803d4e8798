// The passes over a traced graph, and the pipeline that runs them in order.
// pipeline.cpp lists the passes one line each; read it first.
#pragma once

#include <string>
#include <vector>

#include "wfgen/graph/graph.hpp"
#include "wfgen/spec/spec.hpp"

namespace wfgen::passes {

// Removes values no output depends on (inputs and parameters stay).
void eliminate_dead_code(graph::Graph& g);

// Where every arena tensor lives. Each call's result gets a slot; a slot is
// reused once every value in it (and every view of it) is dead. Slot sizes
// are the largest of their members' sizes, known at run time from the
// symbolic dims; offsets follow in slot order, 64-byte aligned.
struct MemoryPlan {
  std::vector<int> slot_of;               // per value: its slot, -1 for inputs, params and views
  std::vector<std::vector<int>> slots;    // per slot: the values stored in it
  std::vector<int> last_use;              // per value: the last instruction that reads it
};

// Liveness over the instruction order (calls in value order). Element-wise
// calls write into the slot of an operand that dies there when the layouts
// match, as in-place operations.
MemoryPlan plan_memory(const graph::Graph& g);

struct PipelineOptions {
  std::vector<std::string> dump_after;  // pass names: print the graph after them
  bool time_passes = false;
};

// Runs every pass in order on the traced graph `g` of `build`; dumps and
// timings go to `log`.
MemoryPlan run_pipeline(const spec::Spec& spec, const spec::Build& build, graph::Graph& g, const PipelineOptions& options,
                        std::string* log);

}  // namespace wfgen::passes

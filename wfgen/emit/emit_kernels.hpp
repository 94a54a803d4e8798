// Emission of kernel plans as C++ files.
//
// Output, for namespace NS:
//   kernels.hpp        declarations of every kernel, and NS::kernel_table()
//   <node>.cpp         the kernels of one node on the cpu device (every dtype
//                      and rank), so editing one node recompiles one file
//   <node>_<dev>.cpp   the kernels of one node on another device
//   kernel_table.cpp   the type-erased table the VM and tests dispatch through
// Every kernel is commented with the Subscript DSL line it implements.
// The text depends only on the plans: same specs, byte-identical files.
#pragma once

#include <string>
#include <vector>

#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit {

struct OutputFile {
  std::string path;  // relative to the output directory
  std::string text;
};

struct KernelEmitOptions {
  std::string ns = "wfgen_kernels";  // C++ namespace of the generated kernels
  int jobs = 1;                      // threads emitting the node files (the text does not depend on it)
};

std::vector<OutputFile> emit_kernels(const std::vector<lower::KernelPlan>& plans, const KernelEmitOptions& options);

}  // namespace wfgen::emit

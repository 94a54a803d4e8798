// The workload groups of wfgen_bench, one per source file.
#pragma once

#include <vector>

#include "harness.hpp"

namespace bench {

void run_elementwise(Report& report, const std::vector<int>& threads);  // elementwise.cpp
void run_gemm(Report& report, const std::vector<int>& threads);         // gemm.cpp
void run_generator(Report& report);                                     // generator.cpp
void run_mlp(Report& report, const std::vector<int>& threads);          // mlp.cpp
void run_cnn(Report& report, const std::vector<int>& threads);          // cnn.cpp
void run_softmax(Report& report, const std::vector<int>& threads);      // rows.cpp
void run_softmax_small(Report& report, const std::vector<int>& threads);  // rows.cpp: softmax_64x10 alone
void run_layernorm_small(Report& report, const std::vector<int>& threads);  // rows.cpp: layernorm_64x32 alone
void run_layernorm(Report& report, const std::vector<int>& threads);    // rows.cpp
void run_call(Report& report, const std::vector<int>& threads);         // call.cpp

// "OpenBLAS 0.3.21 ..." from openblas_get_config() (gemm.cpp).
std::string openblas_version();

}  // namespace bench

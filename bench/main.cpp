// wfgen_bench: runs the benchmark suite and writes the CSV and Markdown reports.
//
//   wfgen_bench --csv results/latest.csv --md results/latest.md [--only relu,softmax,layernorm,call,gemm,mlp,cnn,gen] [--threads 1,2]
//
// --only also takes softmax_64x10 and layernorm_64x32 (those workloads of
// the softmax and layernorm sections alone, for bench/profile.sh), which a
// run without --only does not repeat.
//
// Environment: BENCH_PASSES (passes per implementation, default 11),
// BENCH_COMPILE_ALL=1 (compile every generated stdlib file, not a subset).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <sstream>
#include <string>

#include "bench_main.hpp"
#include "wfgen/runtime.hpp"

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

const std::vector<std::string> kSections = {"relu", "softmax", "layernorm", "call", "gemm", "mlp", "cnn", "gen", "softmax_64x10",
                                             "layernorm_64x32"};
// Sections that run only when --only names them (parts of another section).
const std::vector<std::string> kPartSections = {"softmax_64x10", "layernorm_64x32"};

bool wanted(const std::vector<std::string>& only, const char* name) {
  if (only.empty()) return std::find(kPartSections.begin(), kPartSections.end(), name) == kPartSections.end();
  return std::find(only.begin(), only.end(), name) != only.end();
}

}  // namespace

int main(int argc, char** argv) {
  std::string csv = "latest.csv", md = "latest.md";
  std::vector<std::string> only;
  std::vector<int> threads = {1, 2};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) bench::fail("missing value after " + a);
      return argv[++i];
    };
    if (a == "--csv") csv = value();
    else if (a == "--md") md = value();
    else if (a == "--only") {
      only = split_list(value());
      for (const std::string& o : only)
        if (std::find(kSections.begin(), kSections.end(), o) == kSections.end())
          bench::fail("unknown section '" + o + "' in --only (expected relu, softmax, layernorm, call, gemm, mlp, cnn, gen, softmax_64x10, layernorm_64x32)");
    }
    else if (a == "--threads") {
      threads.clear();
      for (const std::string& t : split_list(value())) threads.push_back(std::stoi(t));
    } else bench::fail("unknown argument '" + a + "' (expected --csv, --md, --only, --threads)");
  }

  const std::string load_before = bench::load_average();
  const bench::CpuTimes cpu0 = bench::read_cpu_times();
  const auto t0 = std::chrono::steady_clock::now();
  bench::Report report;
  auto section = [&](const char* name, auto&& fn) {
    if (!wanted(only, name)) return;
    std::fprintf(stderr, "bench: %s ...\n", name);
    const bench::CpuTimes a = bench::read_cpu_times();
    fn();
    const bench::CpuTimes b = bench::read_cpu_times();
    std::ostringstream os;
    os.precision(2);
    os << std::fixed << name << ": hypervisor steal " << bench::steal_percent(a, b) << " % of CPU time during the section";
    report.note(os.str());
  };
  section("relu", [&] { bench::run_elementwise(report, threads); });
  section("softmax", [&] { bench::run_softmax(report, threads); });
  section("layernorm", [&] { bench::run_layernorm(report, threads); });
  section("call", [&] { bench::run_call(report, threads); });
  section("gemm", [&] { bench::run_gemm(report, threads); });
  section("mlp", [&] { bench::run_mlp(report, threads); });
  section("cnn", [&] { bench::run_cnn(report, threads); });
  section("gen", [&] { bench::run_generator(report); });
  section("softmax_64x10", [&] { bench::run_softmax_small(report, threads); });
  section("layernorm_64x32", [&] { bench::run_layernorm_small(report, threads); });
  const bench::CpuTimes cpu1 = bench::read_cpu_times();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::ostringstream extra;
  extra.precision(2);
  extra << std::fixed;
  extra << "- OpenBLAS: " << bench::openblas_version() << "\n";
  extra << "- wfgen: " << BENCH_WFGEN_VERSION << "; flags: `" << BENCH_CXX_FLAGS << "`\n";
  extra << "- Passes: " << bench::passes() << " per implementation after two warm-up calls, implementations interleaved\n";
  extra << "- Run: " << seconds << " s; hypervisor steal " << bench::steal_percent(cpu0, cpu1)
        << " % of CPU time; load average " << load_before << " before, " << bench::load_average() << " after\n";
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  const std::string header = std::string("# wfgen benchmarks\n\n") + "Run " + date + " by `bench/run.sh`.\n\n" + bench::machine_md(extra.str());
  report.write(csv, md, header);
  std::fprintf(stderr, "bench: wrote %s and %s\n", csv.c_str(), md.c_str());
  return 0;
}

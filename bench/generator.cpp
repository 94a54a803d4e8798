// Workload 7 of issue 9: the generator itself.
//
//  wfgen_gen_stdlib      wall time of `wfgen gen --stdlib -o DIR` (every node,
//                        dtype and rank of the standard library), several passes.
//  compile_stdlib_output CPU time (user + sys of the compiler and its children)
//                        of compiling each generated file once with the bench's
//                        flags; CPU time rather than wall time because the
//                        machine is shared. By default a fixed subset of files
//                        (BENCH_COMPILE_ALL=1 compiles every file; at -O3 that is
//                        several CPU-minutes). Two compiles run at a time.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "bench_main.hpp"

extern char** environ;

namespace bench {

namespace {

namespace fs = std::filesystem;

struct Child {
  pid_t pid = -1;
  std::string what;
};

Child spawn_shell(const std::string& cmd, const std::string& what) {
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  Child c;
  c.what = what;
  if (posix_spawn(&c.pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) fail("cannot run: " + cmd);
  return c;
}

// Waits for one child; returns its CPU seconds (its own and its children's).
double wait_child(const Child& c) {
  int status = 0;
  rusage ru{};
  if (wait4(c.pid, &status, 0, &ru) < 0) fail("wait4 failed for " + c.what);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail(c.what + " failed (exit status " + std::to_string(status) + ")");
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::int64_t count_lines(const fs::path& p, const char* containing = nullptr) {
  std::ifstream in(p);
  std::string line;
  std::int64_t n = 0;
  while (std::getline(in, line)) n += containing == nullptr || line.find(containing) != std::string::npos;
  return n;
}

}  // namespace

void run_generator(Report& report) {
  const fs::path work = fs::path(BENCH_WORK_DIR) / "generator";
  const fs::path out = work / "stdlib";
  fs::create_directories(work);
  const std::string gen_cmd = quote(BENCH_WFGEN_EXE) + " gen --stdlib -o " + quote(out.string());

  using Clock = std::chrono::steady_clock;
  std::vector<double> wall;
  for (int p = 0; p <= passes(); ++p) {
    const auto t0 = Clock::now();
    wait_child(spawn_shell(gen_cmd, "wfgen gen --stdlib"));
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (p > 0) wall.push_back(s);  // pass 0 is the warm-up
  }
  if (!fs::exists(out / "kernels.hpp") || !fs::exists(out / "kernel_table.cpp")) fail("wfgen gen --stdlib wrote no kernels.hpp/kernel_table.cpp");
  const std::int64_t kernels = count_lines(out / "kernel_table.cpp", "{\"");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().extension() == ".cpp") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  report.add({"wfgen_gen_stdlib", "wfgen gen --stdlib", 1, stats_of(wall), static_cast<double>(kernels), "kernels/s", 1,
              std::to_string(kernels) + " kernels in " + std::to_string(files.size()) + " .cpp files"});

  // Compile: the headers alone first (what every generated file pays), then the files.
  const bool all = std::getenv("BENCH_COMPILE_ALL") != nullptr && std::string(std::getenv("BENCH_COMPILE_ALL")) == "1";
  const std::vector<std::string> subset = {"add.cpp", "relu.cpp", "exp.cpp", "sum.cpp", "matmul.cpp", "matmul_blas.cpp", "kernel_table.cpp"};
  std::vector<fs::path> to_compile;
  for (const fs::path& f : files)
    if (all || std::find(subset.begin(), subset.end(), f.filename().string()) != subset.end()) to_compile.push_back(f);
  const fs::path headers = work / "headers_only.cpp";
  {
    std::ofstream h(headers);
    h << "#include \"kernels.hpp\"\n#include \"wfgen/kernel_math.hpp\"\n#include \"wfgen/kernel_support.hpp\"\n#include <cmath>\n#include <string>\n#include <vector>\n";
  }
  const std::string cxx = std::string(BENCH_CXX) + " -std=c++20 " + BENCH_CXX_FLAGS + " -I" + quote(out.string()) + " -I" +
                          quote(BENCH_RUNTIME_INCLUDE) + " -c ";
  std::vector<fs::path> jobs = {headers};
  jobs.insert(jobs.end(), to_compile.begin(), to_compile.end());
  std::map<std::string, double> cpu;
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < jobs.size(); i += 2) {  // two at a time
    std::vector<Child> running;
    for (std::size_t j = i; j < std::min(i + 2, jobs.size()); ++j)
      running.push_back(spawn_shell(cxx + quote(jobs[j].string()) + " -o /dev/null", "compiling " + jobs[j].string()));
    for (const Child& c : running) cpu[c.what] = wait_child(c);
  }
  const double wall_total = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu_total = 0;
  std::int64_t lines_total = 0;
  const double header_cpu = cpu["compiling " + headers.string()];
  report.add({"compile_stdlib_output", "headers_only", 1, {header_cpu, header_cpu, header_cpu}, 0, "", 1, "kernels.hpp + runtime headers"});
  for (const fs::path& f : to_compile) {
    const double s = cpu["compiling " + f.string()];
    const std::int64_t lines = count_lines(f);
    cpu_total += s;
    lines_total += lines;
    report.add({"compile_stdlib_output", f.filename().string(), 1, {s, s, s}, 0, "", 1, std::to_string(lines) + " lines"});
    report.ratio({"compile_stdlib_output", f.filename().string(), 1, "compile_stdlib_output", "headers_only", 1});
  }
  report.add({"compile_stdlib_output", all ? "total" : "total_of_subset", 1, {cpu_total, cpu_total, cpu_total}, 0, "", 1,
              std::to_string(to_compile.size()) + " of " + std::to_string(files.size()) + " files, " + std::to_string(lines_total) +
                  " lines; wall " +
                  std::to_string(wall_total).substr(0, 5) + " s at 2 jobs, incl. headers_only"});
  report.note(std::string("compile_stdlib_output: one pass, CPU seconds (user+sys) of `") + BENCH_CXX + " -std=c++20 " +
              BENCH_CXX_FLAGS + " -c FILE`; ratios are to the TU that only includes the headers" +
              (all ? "." : "; subset of files (BENCH_COMPILE_ALL=1 for all)."));
}

}  // namespace bench

// The benchmark harness: timing passes, statistics, result rows, the machine
// description, and a two-way std::thread split for the hand-written loops.
//
// Conventions (issue 9): the machine is shared and noisy, so every figure is
// a ratio to a baseline measured in the same run; each implementation is run
// twice as a warm-up and then for several short passes, and the median, p10
// and p90 of the per-call time over the passes are reported. Implementations
// of one workload are timed round-robin (pass 1 of each, pass 2 of each, ...)
// so that a burst of noise hits all of them rather than one.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace wfgen::rt {
class Storage;
}

namespace bench {

// Per-call seconds of one implementation over the passes.
struct Stats {
  double median = 0, p10 = 0, p90 = 0;
};
Stats stats_of(std::vector<double> per_call_seconds);

// One measured (workload, impl, threads). `work` is the amount one call
// does in the unit of `unit` ("GB/s" counts bytes, "GFLOP/s" flops), used for
// the throughput column and for ratios between rows with different work.
struct Row {
  std::string workload, impl;
  int threads = 1;
  Stats s;
  double work = 0;
  std::string unit;      // throughput unit, e.g. "GB/s"
  double scale = 1e9;    // work units per unit of `unit` ("GB/s": 1e9 bytes)
  std::string note;
};

// A ratio of row `impl` to row `baseline` (same workload unless given):
// time per unit of work, impl / baseline, so lower is better and it is the
// plain time ratio when both rows do the same work.
struct RatioSpec {
  std::string workload, impl;
  int threads;
  std::string baseline_workload, baseline;
  int baseline_threads;
};

class Report {
 public:
  void add(Row r) { rows_.push_back(std::move(r)); }
  void ratio(RatioSpec r) { ratios_.push_back(std::move(r)); }
  void note(std::string line) { notes_.push_back(std::move(line)); }
  // A Markdown block written after the notes (e.g. a profile in a code block).
  void appendix(std::string md) { appendix_.push_back(std::move(md)); }
  const Row* find(const std::string& workload, const std::string& impl, int threads) const;
  // Writes the CSV (one line per row and baseline) and the Markdown report.
  void write(const std::string& csv_path, const std::string& md_path, const std::string& header_md) const;

 private:
  std::vector<Row> rows_;
  std::vector<RatioSpec> ratios_;
  std::vector<std::string> notes_;
  std::vector<std::string> appendix_;
};

// Times a set of implementations of one workload, round-robin, each pass
// in another order (a fixed-seed shuffle). Each callable does one call of the
// kernel; `reps` calls are timed together per pass so that a pass lasts a
// few milliseconds even for small workloads. Each pass starts on idle cores
// (settle_threads).
struct Impl {
  std::string name;
  std::function<void()> call;
};
std::vector<Stats> time_round_robin(const std::vector<Impl>& impls, int passes, double min_pass_seconds = 0.02);
// Waits until the process's other threads have been idle for 2 ms (at most
// 0.3 s): time_round_robin calls it before each pass, so no implementation
// runs beside threads the one before it left spinning (OpenBLAS's).
void settle_threads();

// Passes per implementation (BENCH_PASSES, default 11).
int passes();

// Aborts the run with a message (an implementation gave a wrong result).
[[noreturn]] void fail(const std::string& message);

// Compares out[i] with ref[i]: |out - ref| <= atol + rtol * |ref|.
void check_close(const std::string& what, const float* out, const float* ref, std::int64_t n, float rtol, float atol);

// CPU time counters of /proc/stat ("cpu" line), for hypervisor steal time.
struct CpuTimes {
  std::uint64_t total = 0, steal = 0, idle = 0;
};
CpuTimes read_cpu_times();
double steal_percent(const CpuTimes& a, const CpuTimes& b);

// The machine and toolchain, as Markdown bullet lines.
std::string machine_md(const std::string& extra);
std::string cpu_model();
std::string load_average();

// Runs f(lo, hi) over [0, n) split in `threads` parts: the calling thread
// takes the first part, persistent std::thread workers the others. Workers
// spin for 50 us, then sleep on std::atomic::wait between calls (as wfgen's pool).
class Split {
 public:
  explicit Split(int threads);
  ~Split();
  Split(const Split&) = delete;
  Split& operator=(const Split&) = delete;
  void run(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& f);
  int threads() const { return threads_; }

 private:
  void worker(int index);
  int threads_;
  std::vector<std::thread> workers_;
  std::atomic<std::uint32_t> generation_{0};  // 32-bit: futex-backed wait/notify
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(std::int64_t, std::int64_t)>* job_ = nullptr;
  std::int64_t n_ = 0;
};

// A float buffer allocated as the runtime allocates a tensor's storage
// (rt::Storage: 64-byte aligned; from 4 MiB on, mapped at a 2 MiB boundary
// and marked for transparent huge pages), for every implementation alike,
// hand loops and baselines included: what a generated kernel reads and
// writes in a user's program. (With 4 KiB pages every row of a 4096x1024
// softmax is a page of its own, and the same kernel ran 1.4x slower.)
struct Buffer {
  explicit Buffer(std::int64_t n);
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data;
  std::int64_t size;

 private:
  std::shared_ptr<wfgen::rt::Storage> storage_;
};

// Deterministic values in [lo, hi).
void fill_random(float* p, std::int64_t n, std::uint64_t seed, float lo, float hi);

}  // namespace bench

#include "harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "wfgen/runtime.hpp"

namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Linear interpolation between order statistics, q in [0, 1].
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const std::size_t i = static_cast<std::size_t>(pos);
  const double frac = pos - static_cast<double>(i);
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] * (1 - frac) + sorted[i + 1] * frac;
}

std::string fmt(double v, int digits) {
  std::ostringstream os;
  os << std::setprecision(digits) << v;
  return os.str();
}

std::string fixed(double v, int decimals) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(decimals) << v;
  return os.str();
}

// "1.23 ms", "456 us", "2.1 s"
std::string human_time(double s) {
  if (s >= 1) return fixed(s, 2) + " s";
  if (s >= 1e-3) return fixed(s * 1e3, 2) + " ms";
  if (s >= 1e-6) return fixed(s * 1e6, 1) + " us";
  return fixed(s * 1e9, 0) + " ns";
}

std::string throughput_of(const Row& r) {
  if (r.work <= 0 || r.s.median <= 0) return "";
  return fixed(r.work / r.s.median / r.scale, 2) + " " + r.unit;
}

std::string baseline_label(const RatioSpec& q) {
  std::string s = q.baseline + "@" + std::to_string(q.baseline_threads) + "t";
  if (q.baseline_workload != q.workload) s = q.baseline_workload + "/" + s;
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// CPU time, in ns, that the process's threads other than this one have
// used (the first field of /proc/self/task/<tid>/schedstat); 0 without /proc.
std::uint64_t other_threads_cpu_ns() {
  std::uint64_t total = 0;
  std::error_code ec;
  const std::string self = std::to_string(::gettid());
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    if (task.path().filename() == self) continue;
    std::ifstream in(task.path() / "schedstat");
    std::uint64_t ns = 0;
    if (in >> ns) total += ns;
  }
  return total;
}

}  // namespace

Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {quantile(v, 0.5), quantile(v, 0.1), quantile(v, 0.9)};
}

int passes() {
  if (const char* e = std::getenv("BENCH_PASSES")) {
    const int n = std::atoi(e);
    if (n >= 1 && n <= 1000) return n;
  }
  return 11;
}

void settle_threads() {
  // The process's other threads (wfgen's pool, OpenBLAS's) idle for 2 ms in
  // a row, or 0.3 s passed. OpenBLAS's threads spin for about 0.1 s after
  // the call of a hand-written baseline; the implementation timed next in
  // the round robin ran beside them. A CNN training step at 2 threads took
  // 4.5 or 11.7 ms from one run to the next after the hand loop's OpenBLAS
  // calls; after this wait, each implementation starts on idle cores.
  const auto deadline = Clock::now() + std::chrono::milliseconds(300);
  std::uint64_t before = other_threads_cpu_ns();
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const std::uint64_t now = other_threads_cpu_ns();
    if (now == before) return;
    before = now;
  }
}

std::vector<Stats> time_round_robin(const std::vector<Impl>& impls, int passes, double min_pass_seconds) {
  // Two warm-up calls; the second sizes a pass. (The first can be far
  // slower than the steady state: a model's forward() allocates its second
  // set of outputs there, and a huge-page fault may compact memory for
  // milliseconds. Sized from it, a pass of a 250 us call held 3 calls, so
  // the cold first call of each pass, after the other implementations had
  // evicted its data, weighed a third of every sample.)
  std::vector<int> reps(impls.size(), 1);
  for (std::size_t k = 0; k < impls.size(); ++k) {
    impls[k].call();
    auto t0 = Clock::now();
    impls[k].call();
    const double t = seconds_since(t0);
    reps[k] = t >= min_pass_seconds ? 1 : static_cast<int>(std::min(1000.0, std::ceil(min_pass_seconds / std::max(t, 1e-9))));
  }
  // Each pass runs the implementations in another order (a shuffle with a
  // fixed seed): an implementation finds the caches as the one before it
  // left them (a triad over 48 MiB evicts everything), so one fixed order
  // charged that to the same row every pass (layernorm 4096x1024:
  // forward() 1.23x of forward_into() in the fixed order, 0.96-1.00x with
  // the two swapped).
  std::vector<std::vector<double>> samples(impls.size());
  std::vector<std::size_t> order(impls.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937 shuffle_rng(20261126u);
  for (int p = 0; p < passes; ++p) {
    std::shuffle(order.begin(), order.end(), shuffle_rng);
    for (const std::size_t k : order) {
      settle_threads();
      auto t0 = Clock::now();
      for (int r = 0; r < reps[k]; ++r) impls[k].call();
      samples[k].push_back(seconds_since(t0) / reps[k]);
    }
  }
  std::vector<Stats> out;
  for (auto& s : samples) out.push_back(stats_of(s));
  return out;
}

void fail(const std::string& message) {
  std::fprintf(stderr, "bench: error: %s\n", message.c_str());
  std::exit(1);
}

void check_close(const std::string& what, const float* out, const float* ref, std::int64_t n, float rtol, float atol) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float d = std::fabs(out[i] - ref[i]);
    if (!(d <= atol + rtol * std::fabs(ref[i]))) {
      std::ostringstream os;
      os << what << ": element " << i << " is " << std::setprecision(9) << out[i] << ", the reference is " << ref[i]
         << " (|diff| " << d << " > " << atol << " + " << rtol << " * |ref|)";
      fail(os.str());
    }
  }
}

const Row* Report::find(const std::string& workload, const std::string& impl, int threads) const {
  for (const Row& r : rows_)
    if (r.workload == workload && r.impl == impl && r.threads == threads) return &r;
  return nullptr;
}

void Report::write(const std::string& csv_path, const std::string& md_path, const std::string& header_md) const {
  // ratio per (row index) -> list of (baseline label, ratio)
  std::vector<std::vector<std::pair<std::string, double>>> per_row(rows_.size());
  for (const RatioSpec& q : ratios_) {
    const Row* a = find(q.workload, q.impl, q.threads);
    const Row* b = find(q.baseline_workload, q.baseline, q.baseline_threads);
    if (!a || !b || a->s.median <= 0 || b->s.median <= 0) continue;
    // Time per unit of work, so rows doing different amounts of work compare.
    const double wa = a->work > 0 ? a->work : 1, wb = b->work > 0 ? b->work : 1;
    const double r = (a->s.median / wa) / (b->s.median / wb);
    per_row[static_cast<std::size_t>(a - rows_.data())].push_back({baseline_label(q), r});
  }

  std::ofstream csv(csv_path);
  csv << "workload,impl,threads,median_s,p10_s,p90_s,baseline,ratio_to_baseline,throughput\n";
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    const std::string head = r.workload + "," + r.impl + "," + std::to_string(r.threads) + "," + fmt(r.s.median, 6) +
                             "," + fmt(r.s.p10, 6) + "," + fmt(r.s.p90, 6) + ",";
    if (per_row[i].empty()) {
      csv << head << ",," << throughput_of(r) << "\n";
    } else {
      for (const auto& [label, ratio] : per_row[i]) csv << head << label << "," << fixed(ratio, 3) << "," << throughput_of(r) << "\n";
    }
  }

  std::ofstream md(md_path);
  md << header_md << "\n";
  md << "Times are per call: median over the passes, with p10 and p90. Ratios are time per unit of work of the row "
        "divided by that of the baseline named after it (`impl@threads`), so **lower is better** and 1.00 means as "
        "fast as the baseline; both come from this run.\n\n";
  // One table per workload, in the order the workloads first appear.
  std::vector<std::string> workloads;
  for (const Row& r : rows_)
    if (std::find(workloads.begin(), workloads.end(), r.workload) == workloads.end()) workloads.push_back(r.workload);
  std::vector<std::size_t> order;
  for (const std::string& w : workloads)
    for (std::size_t i = 0; i < rows_.size(); ++i)
      if (rows_[i].workload == w) order.push_back(i);
  std::string current;
  for (std::size_t i : order) {
    const Row& r = rows_[i];
    if (r.workload != current) {
      current = r.workload;
      md << "\n### " << current << "\n\n";
      md << "| impl | threads | median | p10 | p90 | throughput | ratio to baseline |\n";
      md << "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
    }
    std::string ratios;
    for (const auto& [label, ratio] : per_row[i]) {
      if (!ratios.empty()) ratios += ", ";
      ratios += fixed(ratio, 2) + " vs " + label;
    }
    md << "| " << r.impl << (r.note.empty() ? "" : " (" + r.note + ")") << " | " << r.threads << " | "
       << human_time(r.s.median) << " | " << human_time(r.s.p10) << " | " << human_time(r.s.p90) << " | "
       << throughput_of(r) << " | " << ratios << " |\n";
  }
  if (!notes_.empty()) {
    md << "\n### Notes\n\n";
    for (const std::string& n : notes_) md << "- " << n << "\n";
  }
  if (!appendix_.empty()) {
    md << "\n### Profiles\n";
    for (const std::string& a : appendix_) md << "\n" << a;
  }
}

CpuTimes read_cpu_times() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  CpuTimes t;
  if (!(in >> cpu) || cpu != "cpu") return t;
  // user nice system idle iowait irq softirq steal guest guest_nice
  std::uint64_t v[8] = {};
  for (auto& x : v) in >> x;
  for (std::uint64_t x : v) t.total += x;  // guest time is already in user
  t.idle = v[3] + v[4];
  t.steal = v[7];
  return t;
}

double steal_percent(const CpuTimes& a, const CpuTimes& b) {
  const double total = static_cast<double>(b.total - a.total);
  return total > 0 ? 100.0 * static_cast<double>(b.steal - a.steal) / total : 0.0;
}

std::string cpu_model() {
  std::istringstream in(read_file("/proc/cpuinfo"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  }
  return "unknown";
}

std::string load_average() {
  std::string s = read_file("/proc/loadavg");
  std::istringstream in(s);
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string machine_md(const std::string& extra) {
  std::ostringstream os;
  std::string flags = read_file("/proc/cpuinfo");
  auto has = [&](const char* f) { return flags.find(std::string(" ") + f + " ") != std::string::npos; };
  os << "- CPU: " << cpu_model() << ", " << std::thread::hardware_concurrency() << " logical CPUs"
     << (has("avx512f") ? ", AVX-512" : has("avx2") ? ", AVX2" : "") << (has("hypervisor") ? ", virtual machine" : "")
     << "\n";
  os << "- Compiler: " <<
#if defined(__clang__)
      "clang "
#else
      "g++ "
#endif
     << __VERSION__ << "\n";
  os << extra;
  return os.str();
}

Split::Split(int threads) : threads_(std::max(1, threads)) {
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

Split::~Split() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

namespace {

// Spins until pred() holds or 50 us pass (the same budget as wfgen's pool).
template <class Pred>
bool spin_until(Pred pred) {
  const auto deadline = Clock::now() + std::chrono::microseconds(50);
  for (unsigned i = 1;; ++i) {
    if (pred()) return true;
    __builtin_ia32_pause();
    if (i % 16 == 0 && Clock::now() > deadline) return pred();
  }
}

}  // namespace

void Split::worker(int index) {
  std::uint32_t seen = 0;
  for (;;) {
    spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
    generation_.wait(seen, std::memory_order_acquire);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    const std::int64_t lo = n_ * index / threads_, hi = n_ * (index + 1) / threads_;
    (*job_)(lo, hi);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void Split::run(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& f) {
  if (threads_ == 1) {
    f(0, n);
    return;
  }
  job_ = &f;
  n_ = n;
  pending_.store(threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  f(0, n / threads_);
  spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
  for (int p = pending_.load(std::memory_order_acquire); p != 0; p = pending_.load(std::memory_order_acquire))
    pending_.wait(p, std::memory_order_acquire);
}

Buffer::Buffer(std::int64_t n) : size(n) {
  storage_ = wfgen::rt::Storage::try_allocate_uninitialized(static_cast<std::size_t>(n) * sizeof(float));
  if (!storage_) fail("out of memory");
  data = reinterpret_cast<float*>(storage_->data());
}

void fill_random(float* p, std::int64_t n, std::uint64_t seed, float lo, float hi) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::int64_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    p[i] = lo + (hi - lo) * static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
  }
}

}  // namespace bench

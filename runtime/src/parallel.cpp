// The thread pool behind parallel_for.
//
// One job runs at a time. The caller publishes it (function, range, chunk
// size) and bumps `generation_`; every worker sees the new generation, claims
// chunks from an atomic counter until none are left, and checks out by
// decrementing `pending_`. The caller claims chunks too, then waits for
// `pending_` to reach zero, so once parallel_for returns no worker touches the
// job any more and the next job can overwrite it.
//
// Waiting is two-phase on both sides: spin for a short while (back-to-back
// kernels then start without a syscall), then sleep on a condition variable.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif
#include <string>
#include <thread>
#include <vector>

#include "wfgen/error.hpp"
#include "wfgen/parallel.hpp"

namespace wfgen::rt {

namespace {

#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
constexpr int kMaxThreads = 1;  // WebAssembly built without -pthread: no thread can start
#else
constexpr int kMaxThreads = 1024;
#endif
// How long an idle thread spins before it sleeps: 1 ms, so that workers
// stay awake through the gaps of a stream of kernels (a GEMM's packing
// between its parallel parts, the next call of a model). A worker that slept
// was often woken on the caller's CPU and shared it for the rest of a
// 20 ms benchmark pass (VM, 2 vCPUs): the std-only GEMM at 2 threads ran
// at its 1-thread speed in most passes with 50 us here, and scaled 1.9-2.0x
// with 1 ms. OpenMP runtimes spin for a similar time by default.
constexpr auto kSpinTime = std::chrono::microseconds(1000);
// The first part of it spins with pause instructions; the rest yields.
constexpr auto kBusySpinTime = std::chrono::microseconds(50);
// Chunks per thread: a few, so a slow chunk does not leave others idle, but
// few enough that claiming them costs nothing next to the work.
constexpr std::int64_t kChunksPerThread = 4;

// The integer an environment variable holds, whole, if it holds one and it
// lies in [lo, hi].
std::optional<std::int64_t> env_integer(const char* name, std::int64_t lo, std::int64_t hi) {
  const char* env = std::getenv(name);
  if (env == nullptr) return std::nullopt;
  std::int64_t v = 0;
  const char* end = env + std::strlen(env);
  const auto res = std::from_chars(env, end, v);
  if (res.ec != std::errc() || res.ptr != end || v < lo || v > hi) return std::nullopt;
  return v;
}

int default_num_threads() {
  if (const auto n = env_integer("WFGEN_NUM_THREADS", 1, kMaxThreads)) return static_cast<int>(*n);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxThreads));
}

std::atomic<int>& thread_setting() {
  static std::atomic<int> n{default_num_threads()};
  return n;
}

thread_local bool t_in_parallel = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until pred() holds or kSpinTime passes; returns pred(). After the
// first kBusySpinTime it yields the CPU on every turn, so that another
// thread that wants it (OpenBLAS's, in a model that calls cblas between
// wfgen's kernels) runs instead: spinning with pauses alone for 1 ms made a
// CNN's training step 2.5x slower at 2 threads.
template <class Pred>
bool spin_until(Pred pred) {
  const auto start = std::chrono::steady_clock::now();
  const auto busy_until = start + kBusySpinTime, deadline = start + kSpinTime;
  bool busy = true;
  for (unsigned i = 1;; ++i) {
    if (pred()) return true;
    if (busy) cpu_relax();
    else std::this_thread::yield();
    if (i % 64 == 0 || !busy) {
      const auto now = std::chrono::steady_clock::now();
      if (now > deadline) return pred();
      busy = now < busy_until;
    }
  }
}

class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  ~Pool() {
    std::lock_guard call(call_mutex_);
    stop_workers();
  }

  void run(std::int64_t begin, std::int64_t end, std::int64_t grain, detail::RangeFn fn,
           void* ctx) {
    std::unique_lock call(call_mutex_, std::try_to_lock);
    if (!call.owns_lock()) {
      // Another thread is using the pool; doing our range here is as fast as
      // queueing behind it, and cannot deadlock.
      fn(ctx, begin, end);
      return;
    }
    const int threads = num_threads();
    resize(threads - 1);

    const std::int64_t n = end - begin;
    const std::int64_t chunk = std::max(grain, (n + threads * kChunksPerThread - 1) /
                                                   (threads * kChunksPerThread));
    fn_ = fn;
    ctx_ = ctx;
    begin_ = begin;
    end_ = end;
    chunk_ = chunk;
    num_chunks_ = (n + chunk - 1) / chunk;
    next_chunk_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    caller_cpu_.store(current_cpu(), std::memory_order_relaxed);
    {
      std::lock_guard lk(m_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_cv_.notify_all();

    t_in_parallel = true;
    work();
    t_in_parallel = false;

    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock lk(m_);
      done_cv_.wait(lk, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
#if WFGEN_EXCEPTIONS
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
#endif
  }

 private:
  Pool() = default;

  // Claims and runs chunks of the current job until none are left or a body
  // has thrown. Never throws.
  void work() {
    while (!failed_.load(std::memory_order_relaxed)) {
      const std::int64_t k = next_chunk_.fetch_add(1, std::memory_order_relaxed);
      if (k >= num_chunks_) return;
      const std::int64_t lo = begin_ + k * chunk_;
      const std::int64_t hi = lo + std::min(chunk_, end_ - lo);
#if WFGEN_EXCEPTIONS
      try {
        fn_(ctx_, lo, hi);
      } catch (...) {
        std::lock_guard lk(error_mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_relaxed);
      }
#else
      fn_(ctx_, lo, hi);  // without exceptions a body cannot fail: fail() aborts
#endif
    }
  }

  void worker_loop(std::uint64_t seen) {
    t_in_parallel = true;  // bodies that call parallel_for run it inline
    for (;;) {
      auto ready = [&] {
        return generation_.load(std::memory_order_acquire) != seen ||
               stop_.load(std::memory_order_acquire);
      };
      if (!spin_until(ready)) {
        const SleepAwayFrom away(caller_cpu_.load(std::memory_order_relaxed));
        std::unique_lock lk(m_);
        wake_cv_.wait(lk, ready);
      }
      if (stop_.load(std::memory_order_acquire)) return;
      seen = generation_.load(std::memory_order_acquire);
      work();
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // Taking the mutex orders this notify after the caller either saw
        // pending_ == 0 or started waiting, so the wake-up cannot be lost.
        std::lock_guard lk(m_);
        done_cv_.notify_one();
      }
    }
  }

  // The CPU the calling thread runs on, or -1 where that is not known.
  static int current_cpu() noexcept {
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
  }

  // While it lives, the calling worker may not run on `cpu` (the CPU of the
  // last job's caller), when it may run elsewhere; then its mask is given
  // back, so nothing stays pinned. A worker sleeps here, and Linux tends to
  // wake a thread on the CPU of the thread that wakes it (the caller, busy
  // with its own chunks) when it sees no cache shared with another CPU, as
  // on the 2-vCPU VM of bench/: a worker woken after 5 ms of sleep started
  // its chunk 2.8 ms after the caller's (median), when the caller's time
  // slice ran out, and a 512^3 GEMM called after such a gap took its
  // 1-thread time at 2 threads. With the caller's CPU left out, it starts
  // after ~100 us (the time a halted vCPU takes to wake).
  class SleepAwayFrom {
   public:
    explicit SleepAwayFrom(int cpu) noexcept {
#if defined(__linux__)
      if (cpu < 0 || cpu >= CPU_SETSIZE) return;
      if (pthread_getaffinity_np(pthread_self(), sizeof allowed_, &allowed_) != 0 || !CPU_ISSET(cpu, &allowed_) ||
          CPU_COUNT(&allowed_) < 2)
        return;
      cpu_set_t others = allowed_;
      CPU_CLR(cpu, &others);
      narrowed_ = pthread_setaffinity_np(pthread_self(), sizeof others, &others) == 0;
#else
      (void)cpu;
#endif
    }
    ~SleepAwayFrom() {
#if defined(__linux__)
      if (narrowed_) pthread_setaffinity_np(pthread_self(), sizeof allowed_, &allowed_);
#endif
    }
    SleepAwayFrom(const SleepAwayFrom&) = delete;
    SleepAwayFrom& operator=(const SleepAwayFrom&) = delete;

   private:
#if defined(__linux__)
    cpu_set_t allowed_{};
    bool narrowed_ = false;
#endif
  };

  // Called with call_mutex_ held and no job running.
  void resize(int count) {
    if (static_cast<int>(workers_.size()) == count) return;
    stop_workers();
    const std::uint64_t gen = generation_.load(std::memory_order_relaxed);
    workers_.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) workers_.emplace_back([this, gen] { worker_loop(gen); });
  }

  void stop_workers() {
    {
      std::lock_guard lk(m_);
      stop_.store(true, std::memory_order_release);
    }
    wake_cv_.notify_all();
    for (std::thread& w : workers_) w.join();
    workers_.clear();
    stop_.store(false, std::memory_order_relaxed);
  }

  std::mutex call_mutex_;  // held by the thread whose job is running
  std::mutex m_;           // guards sleeping on the two condition variables
  std::condition_variable wake_cv_, done_cv_;
  std::vector<std::thread> workers_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> stop_{false};

  // The current job. Written by the caller before generation_ is bumped
  // (release) and read by workers after they load it (acquire).
  detail::RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::int64_t begin_ = 0, end_ = 0, chunk_ = 1, num_chunks_ = 0;
  std::atomic<int> caller_cpu_{-1};  // where the caller was when it published the last job
  std::atomic<std::int64_t> next_chunk_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace

void set_num_threads(int n) {
  if (n < 1 || n > kMaxThreads) {
    fail(ErrorCode::InvalidArgument, "set_num_threads got " + std::to_string(n) +
                                                ", expected 1.." + std::to_string(kMaxThreads));
  }
  thread_setting().store(n, std::memory_order_relaxed);
}

int num_threads() { return thread_setting().load(std::memory_order_relaxed); }

namespace {

// A byte threshold: `env` if it holds an integer >= -1, else `fallback`.
struct Threshold {
  Threshold(const char* env, std::int64_t fallback)
      : bytes(env_integer(env, -1, std::numeric_limits<std::int64_t>::max()).value_or(fallback)) {}
  void set(const char* setter, std::int64_t value) {
    if (value < -1) fail(ErrorCode::InvalidArgument, std::string(setter) + " got " + std::to_string(value) + ", expected -1 or more");
    bytes.store(value, std::memory_order_relaxed);
  }
  std::int64_t get() const noexcept { return bytes.load(std::memory_order_relaxed); }
  std::atomic<std::int64_t> bytes;
};

// The defaults: 32 MiB and 8 MiB, parallel.hpp says why.
Threshold& streaming_setting() {
  static Threshold t("WFGEN_STREAMING_STORE_BYTES", std::int64_t{32} << 20);
  return t;
}
Threshold& streaming_result_setting() {
  static Threshold t("WFGEN_STREAMING_RESULT_BYTES", std::int64_t{8} << 20);
  return t;
}

}  // namespace

void set_streaming_store_bytes(std::int64_t bytes) { streaming_setting().set("set_streaming_store_bytes", bytes); }
std::int64_t streaming_store_bytes() noexcept { return streaming_setting().get(); }
void set_streaming_result_bytes(std::int64_t bytes) { streaming_result_setting().set("set_streaming_result_bytes", bytes); }
std::int64_t streaming_result_bytes() noexcept { return streaming_result_setting().get(); }

namespace detail {

std::int64_t streaming_limit() noexcept { return t_writing_result ? streaming_result_bytes() : streaming_store_bytes(); }

thread_local constinit bool t_writing_result = false;

}  // namespace detail

namespace detail {

bool in_parallel_region() noexcept { return t_in_parallel; }

TaskBins bin_tasks(const std::int64_t* costs, std::int32_t n, int threads, std::int64_t grain, std::int64_t alone_at) {
  TaskBins out;
  std::vector<std::int32_t> binned;  // largest first; ties in index order (the same plan every call)
  std::int64_t total = 0;
  for (std::int32_t k = 0; k < n; ++k) {
    if (costs[k] >= alone_at) {
      out.alone.push_back(k);
    } else {
      binned.push_back(k);
      total += std::max<std::int64_t>(costs[k], 0);
    }
  }
  std::stable_sort(binned.begin(), binned.end(), [&](std::int32_t a, std::int32_t b) { return costs[a] > costs[b]; });
  const std::int64_t wanted = std::min<std::int64_t>({threads * kChunksPerThread, std::max<std::int64_t>(1, total / std::max<std::int64_t>(grain, 1)),
                                                      static_cast<std::int64_t>(binned.size())});
  const auto bins = static_cast<std::size_t>(std::max<std::int64_t>(wanted, 0));
  std::vector<std::int64_t> load(bins, 0);
  std::vector<std::vector<std::int32_t>> members(bins);
  for (const std::int32_t k : binned) {
    const std::size_t b = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[b] += std::max<std::int64_t>(costs[k], 0);
    members[b].push_back(k);
  }
  out.start.push_back(0);
  for (const auto& m : members) {
    out.order.insert(out.order.end(), m.begin(), m.end());
    out.start.push_back(static_cast<std::int32_t>(out.order.size()));
  }
  return out;
}

void parallel_for_impl(std::int64_t begin, std::int64_t end, std::int64_t grain, RangeFn fn,
                       void* ctx) {
  Pool::instance().run(begin, end, grain, fn, ctx);
}

}  // namespace detail

}  // namespace wfgen::rt

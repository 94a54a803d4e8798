// The thread pool behind parallel_for.
//
// One job runs at a time. The caller publishes it (function, range, chunk
// size), deals its chunks into one block of consecutive chunks a thread
// (Block), and bumps `generation_`; every worker that sees the new
// generation runs the chunks of its own block, then steals what is left in
// the others' from their back; the caller does the same with block 0, then
// waits for the chunks still running elsewhere (`unfinished_`). Once
// parallel_for returns every chunk has run; a worker that comes late finds
// its block empty, and the generation each block is tagged with keeps it
// from taking chunks of the next job.
//
// Thread t gets the same part of a range on every call: consecutive
// kernels over the same range (an element-wise chain, a GEMM and its
// epilogue kernel) read on each core what the last one wrote there, while
// chunks taken from one shared counter went to either thread by chance, and
// half of every small kernel's data then moved between the cores
// (bench/pool_handoff.cpp, docs/performance-history.md).
//
// Waiting is two-phase on both sides: spin for a short while (back-to-back
// kernels then start without a syscall), then sleep on a condition variable;
// nobody takes its mutex or notifies while nobody sleeps.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
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
static_assert(kMaxThreads * kChunksPerThread <= 0xffff, "a job's chunk indices fit Block's 16-bit fields");

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

// One thread's share of a job: the chunks [lo, hi) of its block, and the
// job (the low 32 bits of its generation) they belong to, packed in one word
// so that a claim checks all three at once. A line of its own: the owner
// claims from the front without touching another thread's line, a thread
// out of work steals from the back of the others'.
struct alignas(64) Block {
  std::atomic<std::uint64_t> word{0};

  static std::uint64_t pack(std::uint32_t tag, std::uint32_t lo, std::uint32_t hi) {
    return std::uint64_t{tag} << 32 | std::uint64_t{lo} << 16 | hi;
  }
  // The chunk claimed from the front (or the back), or -1 when the block is
  // empty or belongs to another job than `tag`.
  std::int64_t claim(std::uint32_t tag, bool back) {
    std::uint64_t w = word.load(std::memory_order_relaxed);
    for (;;) {
      const auto lo = static_cast<std::uint32_t>(w >> 16 & 0xffff), hi = static_cast<std::uint32_t>(w & 0xffff);
      if (static_cast<std::uint32_t>(w >> 32) != tag || lo >= hi) return -1;
      const std::uint64_t next = back ? pack(tag, lo, hi - 1) : pack(tag, lo + 1, hi);
      if (word.compare_exchange_weak(w, next, std::memory_order_relaxed)) return back ? hi - 1 : lo;
    }
  }
};

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
    resize(threads);
    publish(begin, end, grain, fn, ctx, threads);

    t_in_parallel = true;
    work(0);
    t_in_parallel = false;

    // Every chunk is claimed now (work() steals what the others left);
    // wait for the ones still running elsewhere.
    if (!spin_until([&] { return unfinished_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock lk(m_);
      caller_waits_.store(true, std::memory_order_seq_cst);
      done_cv_.wait(lk, [&] { return unfinished_.load(std::memory_order_seq_cst) == 0; });
      caller_waits_.store(false, std::memory_order_relaxed);
    }
#if WFGEN_EXCEPTIONS
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
#endif
  }

 private:
  Pool() = default;

  // Writes the job, deals its chunks into one block a thread (thread t, the
  // caller being 0, gets the t-th run of consecutive chunks: the same part
  // of the range every call, so a kernel finds in its core's cache what
  // the last kernel over the same range wrote there), then starts it.
  void publish(std::int64_t begin, std::int64_t end, std::int64_t grain, detail::RangeFn fn, void* ctx, int threads) {
    const std::int64_t n = end - begin;
    const std::int64_t chunk = std::max(grain, (n + threads * kChunksPerThread - 1) / (threads * kChunksPerThread));
    const std::int64_t chunks = (n + chunk - 1) / chunk;  // <= threads * kChunksPerThread: 16 bits
    Job& j = job_;
    j.fn = fn;
    j.ctx = ctx;
    j.begin = begin;
    j.end = end;
    j.chunk = chunk;
    unfinished_.store(chunks, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    caller_cpu_.store(current_cpu(), std::memory_order_relaxed);
    const std::uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
    const auto tag = static_cast<std::uint32_t>(gen);
    for (int t = 0; t < threads; ++t) {
      blocks_[t].word.store(Block::pack(tag, static_cast<std::uint32_t>(chunks * t / threads), static_cast<std::uint32_t>(chunks * (t + 1) / threads)),
                            std::memory_order_relaxed);
    }
    // seq_cst: either a worker about to sleep sees the new generation, or
    // this thread sees it counted in sleepers_ and wakes it.
    generation_.store(gen, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) {
      { std::lock_guard lk(m_); }
      wake_cv_.notify_all();
    }
  }

  // Runs the chunks of thread `self`'s block, then steals the others' from
  // their back, until none of the job `tag` (the current one unless given)
  // is left; skips them once a body has thrown. Then checks its chunks out
  // of unfinished_. Never throws.
  void work(int self) { work(self, static_cast<std::uint32_t>(generation_.load(std::memory_order_acquire))); }
  void work(int self, std::uint32_t tag) {
    const int blocks = static_cast<int>(workers_count_) + 1;
    std::int64_t ran = 0;
    for (int b = self, visited = 0; visited < blocks; b = (b + 1) % blocks, ++visited) {
      for (std::int64_t k; (k = blocks_[b].claim(tag, b != self)) >= 0; ++ran) run_chunk(k);
    }
    if (ran == 0) return;
    // seq_cst: either the caller, about to sleep, sees the count reach 0, or
    // the thread that brings it there sees caller_waits_ and wakes it.
    if (unfinished_.fetch_sub(ran, std::memory_order_seq_cst) == ran && self != 0 &&
        caller_waits_.load(std::memory_order_seq_cst)) {
      std::lock_guard lk(m_);
      done_cv_.notify_one();
    }
  }

  void run_chunk(std::int64_t k) {
    if (failed_.load(std::memory_order_relaxed)) return;  // a body threw: the rest is skipped
    const Job& j = job_;
    const std::int64_t lo = j.begin + k * j.chunk;
    const std::int64_t hi = lo + std::min(j.chunk, j.end - lo);
#if WFGEN_EXCEPTIONS
    try {
      j.fn(j.ctx, lo, hi);
    } catch (...) {
      std::lock_guard lk(error_mutex_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
#else
    j.fn(j.ctx, lo, hi);  // without exceptions a body cannot fail: fail() aborts
#endif
  }

  void worker_loop(int self, std::uint64_t seen) {
    t_in_parallel = true;  // bodies that call parallel_for run it inline
    for (;;) {
      auto ready = [&] {
        return generation_.load(std::memory_order_seq_cst) != seen || stop_.load(std::memory_order_acquire);
      };
      if (!spin_until(ready)) {
        const SleepAwayFrom away(caller_cpu_.load(std::memory_order_relaxed));
        std::unique_lock lk(m_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_cv_.wait(lk, ready);
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
      }
      if (stop_.load(std::memory_order_acquire)) return;
      // A job this thread comes to late is finished or still running; the
      // tag keeps it from taking chunks of a later one.
      seen = generation_.load(std::memory_order_acquire);
      work(self, static_cast<std::uint32_t>(seen));
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

  // Called with call_mutex_ held and no job running: `threads` threads,
  // the caller and threads - 1 workers.
  void resize(int threads) {
    if (workers_count_ == threads - 1) return;
    stop_workers();
    blocks_ = std::make_unique<Block[]>(static_cast<std::size_t>(threads));
    workers_count_ = threads - 1;
    const std::uint64_t gen = generation_.load(std::memory_order_relaxed);
    workers_.reserve(static_cast<std::size_t>(workers_count_));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i, gen] { worker_loop(i, gen); });
  }

  void stop_workers() {
    {
      std::lock_guard lk(m_);
      stop_.store(true, std::memory_order_release);
    }
    wake_cv_.notify_all();
    for (std::thread& w : workers_) w.join();
    workers_.clear();
    workers_count_ = 0;
    stop_.store(false, std::memory_order_relaxed);
  }

  std::mutex call_mutex_;  // held by the thread whose job is running
  std::mutex m_;           // guards sleeping on the two condition variables
  std::condition_variable wake_cv_, done_cv_;
  std::vector<std::thread> workers_;
  int workers_count_ = 0;          // workers_.size(), read by the workers
  std::unique_ptr<Block[]> blocks_;  // one a thread, the caller's first

  // What a worker spinning for work reads, and the current job: one cache
  // line, written by the caller once a call before generation_ is bumped
  // (seq_cst) and read by workers after they load it; a worker reads the
  // job only after it has claimed one of its chunks.
  alignas(64) std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};  // a body of the current job threw
  std::atomic<int> caller_cpu_{-1};  // where the caller was when it published the last job
  struct Job {
    detail::RangeFn fn = nullptr;
    void* ctx = nullptr;
    std::int64_t begin = 0, end = 0, chunk = 1;
  } job_;
  // Chunks of the current job not run (or skipped) yet: each thread
  // subtracts what it ran once, when it finds no chunk left.
  alignas(64) std::atomic<std::int64_t> unfinished_{0};
  // Workers asleep on wake_cv_, and whether the caller sleeps on done_cv_:
  // nobody takes m_ or calls notify when nobody sleeps.
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_waits_{false};
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

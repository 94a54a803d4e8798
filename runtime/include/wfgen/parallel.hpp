// Threads of the wfgen runtime: parallel_for over a persistent pool, the
// thread count, and the thresholds of streaming stores. Part of the kernel
// layer (below the model API of runtime.hpp): generated kernels and the
// GEMM use it without tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace wfgen::rt {

// Threads used by parallel_for, the calling thread included. The default is
// WFGEN_NUM_THREADS if it holds an integer in [1, 1024], otherwise
// std::thread::hardware_concurrency(). A new value takes effect at the next
// parallel_for call.
void set_num_threads(int n);
int num_threads();

// Element-wise kernels write a contiguous output of at least this many bytes
// with non-temporal (streaming) stores: they skip the caches and the read of
// each line before it is written, so an output far larger than the caches
// costs one memory transfer per byte instead of two, while a smaller one,
// likely read again soon, stays cached. The default is 32 MiB, the size of
// a large last-level cache (an output that fits it, read by the next
// instruction, is faster cached; measured in bench/), or
// WFGEN_STREAMING_STORE_BYTES if it holds an integer >= -1; 0 streams every
// contiguous output, -1 none. Results are the same either way.
void set_streaming_store_bytes(std::int64_t bytes);
std::int64_t streaming_store_bytes() noexcept;

// The same threshold for an output that is a result of a model (the VM's
// instructions that write one, which nothing after them reads): nothing in
// the model reads it back, so caching it only pays if the caller reads it
// soon, while streaming it keeps the inputs cached and skips the read of
// each line. The default is 8 MiB, a quarter of a large last-level cache,
// the share of it one program can count on when other tenants use the rest
// (layernorm 4096x1024, 16 MiB: 1.65 -> 0.69 ms at one thread, measured
// when forward() still alternated between two sets of results). Below
// it caching wins where the caller's data fits the cache (a 4 MiB result
// streamed: 20 % faster at one thread, 20 % slower at two; measured in
// bench/, docs/performance-history.md). WFGEN_STREAMING_RESULT_BYTES, if it holds
// an integer >= -1, overrides it.
void set_streaming_result_bytes(std::int64_t bytes);
std::int64_t streaming_result_bytes() noexcept;

namespace detail {
// The threshold for the kernel running on this thread: streaming_result_bytes()
// while the VM runs an instruction that writes a result (ResultScope),
// streaming_store_bytes() otherwise.
std::int64_t streaming_limit() noexcept;
// Set by ResultScope on this thread (constinit: read without a call).
extern thread_local constinit bool t_writing_result;
class ResultScope {
 public:
  // Inline: the VM enters one around every kernel that writes a result.
  explicit ResultScope(bool writes_result) noexcept : previous_(t_writing_result) { t_writing_result = writes_result; }
  ~ResultScope() { t_writing_result = previous_; }
  ResultScope(const ResultScope&) = delete;
  ResultScope& operator=(const ResultScope&) = delete;

 private:
  bool previous_;
};
using RangeFn = void (*)(void* ctx, std::int64_t lo, std::int64_t hi);
// True on pool workers and on a thread that is inside parallel_for.
bool in_parallel_region() noexcept;
void parallel_for_impl(std::int64_t begin, std::int64_t end, std::int64_t grain, RangeFn fn,
                       void* ctx);

// parallel_tasks' plan: the tasks run alone, in order, and bins of the
// others, bin b holding order[start[b]] .. order[start[b + 1] - 1].
struct TaskBins {
  std::vector<std::int32_t> alone;
  std::vector<std::int32_t> order;
  std::vector<std::int32_t> start;
};
TaskBins bin_tasks(const std::int64_t* costs, std::int32_t n, int threads, std::int64_t grain, std::int64_t alone_at);
}  // namespace detail

// Calls body(lo, hi) on disjoint sub-ranges that together cover [begin, end)
// exactly once, each at least `grain` long except possibly the last. Runs
// inline when the range is not longer than grain, when num_threads() == 1,
// and when called from inside another parallel_for. The first exception a
// body throws is rethrown here after every started chunk has finished;
// chunks not yet started are skipped. Threads are persistent: no thread is
// created per call. If another thread is already running a parallel_for, this
// call runs its whole range on the calling thread instead of waiting.
// Thread t of n (the caller first) starts on the t-th n-th of the range on
// every call and takes chunks of the others' only when its own are done: a
// kernel after another over the same range reads on each core what that one
// wrote there (data a core has to fetch from the other's cache cost more
// than the split saves in a kernel of a few microseconds on the machine of
// docs/performance-history.md). A worker that is not running when a call comes
// (its CPU busy, or asleep) is not waited for: the caller runs its part.
template <class F>
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, F&& body) {
  if (begin >= end) return;
  if (grain < 1) grain = 1;
  if (end - begin <= grain || detail::in_parallel_region() || num_threads() == 1) {
    body(begin, end);
    return;
  }
  using Body = std::remove_reference_t<F>;
  detail::RangeFn fn = [](void* ctx, std::int64_t lo, std::int64_t hi) {
    (*static_cast<Body*>(ctx))(lo, hi);
  };
  detail::parallel_for_impl(begin, end, grain, fn,
                            const_cast<void*>(static_cast<const void*>(std::addressof(body))));
}

// Runs task(k) once for each k in [0, n): independent tasks, in any order on
// any thread, costs[k] being task k's work (its element count, say). Many
// small kernels (an optimizer's update of each parameter) are each too
// small for parallel_for to split, but together they are not. Tasks whose
// cost reaches alone_at run first, one after another on the calling thread,
// each free to split its own work across the pool; the others are dealt,
// largest first, each into the bin with the least cost so far, into up to
// kChunksPerThread bins a thread of about `grain` of cost or more each; the
// pool's threads claim the bins and run their tasks inline. Runs every task
// in order on the calling thread when num_threads() == 1 or inside another
// parallel_for.
template <class F>
void parallel_tasks(const std::int64_t* costs, std::int32_t n, std::int64_t grain, std::int64_t alone_at, F&& task) {
  if (n <= 0) return;
  if (num_threads() == 1 || detail::in_parallel_region()) {
    for (std::int32_t k = 0; k < n; ++k) task(k);
    return;
  }
  const detail::TaskBins bins = detail::bin_tasks(costs, n, num_threads(), grain, alone_at);
  for (const std::int32_t k : bins.alone) task(k);
  parallel_for(0, static_cast<std::int64_t>(bins.start.size()) - 1, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t b = lo; b < hi; ++b)
      for (std::int32_t i = bins.start[b]; i < bins.start[b + 1]; ++i) task(bins.order[i]);
  });
}

}  // namespace wfgen::rt

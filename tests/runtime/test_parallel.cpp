// parallel_for and parallel_tasks: coverage, inline cases, nesting, exceptions, thread settings.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <mutex>
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_util.hpp"

namespace {

// Restores the thread count a test changed.
struct ThreadCountGuard {
  int saved = rt::num_threads();
  ~ThreadCountGuard() { rt::set_num_threads(saved); }
};

}  // namespace

TEST_CASE("parallel_for covers every index exactly once", "[parallel]") {
  ThreadCountGuard guard;
  for (int threads : {1, 2, 3, 4, 8}) {
    rt::set_num_threads(threads);
    for (std::int64_t grain : {1, 7, 64, 1000, 100000}) {
      for (std::int64_t begin : {0, -13, 5}) {
        const std::int64_t n = 10007;
        const std::int64_t end = begin + n;
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        std::atomic<std::int64_t> calls{0};
        std::atomic<bool> bad_range{false};
        rt::parallel_for(begin, end, grain, [&](std::int64_t lo, std::int64_t hi) {
          if (lo < begin || hi > end || lo >= hi) bad_range = true;
          // Every chunk but the last is at least `grain` long.
          if (hi != end && hi - lo < grain) bad_range = true;
          for (std::int64_t i = lo; i < hi; ++i) hits[static_cast<std::size_t>(i - begin)]++;
          calls++;
        });
        INFO("threads " << threads << " grain " << grain << " begin " << begin);
        REQUIRE_FALSE(bad_range);
        std::int64_t wrong = 0;
        for (auto& h : hits) wrong += h.load() != 1;
        REQUIRE(wrong == 0);
        if (grain >= n || threads == 1) REQUIRE(calls == 1);
      }
    }
  }
}

// Around the sizes where the pool changes how it cuts a range: one grain,
// two grains, and threads * 4 chunks (its chunks per thread), at thread
// counts whose blocks of chunks divide the chunks evenly or not.
TEST_CASE("parallel_for covers every index once around the grain and chunk boundaries", "[parallel]") {
  ThreadCountGuard guard;
  for (int threads : {1, 2, 3, 8}) {
    rt::set_num_threads(threads);
    for (std::int64_t grain : {1, 3, 64}) {
      const std::int64_t many = threads * 4 * grain;
      for (std::int64_t n : {grain - 1, grain, grain + 1, 2 * grain - 1, 2 * grain, 2 * grain + 1, many - 1, many, many + 1, 3 * many + 2}) {
        if (n <= 0) continue;
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        std::atomic<std::int64_t> shortest{n}, chunks{0};
        std::atomic<bool> bad_range{false};
        rt::parallel_for(0, n, grain, [&](std::int64_t lo, std::int64_t hi) {
          if (lo < 0 || hi > n || lo >= hi) bad_range = true;
          if (hi != n) shortest = std::min(shortest.load(), hi - lo);
          for (std::int64_t i = lo; i < hi; ++i) hits[static_cast<std::size_t>(i)]++;
          chunks++;
        });
        INFO("threads " << threads << " grain " << grain << " n " << n);
        REQUIRE_FALSE(bad_range);
        for (auto& h : hits) REQUIRE(h.load() == 1);
        CHECK(shortest.load() >= std::min(grain, n));  // every chunk but the last
        CHECK(chunks.load() <= std::max<std::int64_t>(1, threads * 4));
        if (n <= grain || threads == 1) CHECK(chunks.load() == 1);
      }
    }
  }
}

// Workers come late to tiny jobs (or not at all): a late one must not run
// chunks of the job after the one it woke for, nor miss any.
TEST_CASE("back-to-back tiny jobs of different sizes run every index once", "[parallel]") {
  ThreadCountGuard guard;
  for (int threads : {2, 3, 8}) {
    rt::set_num_threads(threads);
    std::vector<int> hits(97);
    std::int64_t wrong = 0;
    for (int rep = 0; rep < 1500; ++rep) {
      const std::int64_t n = 2 + rep % 96;
      std::fill(hits.begin(), hits.end(), 0);
      rt::parallel_for(0, n, 1, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) hits[static_cast<std::size_t>(i)]++;  // each index on one thread only
      });
      for (std::int64_t i = 0; i < 97; ++i) wrong += hits[static_cast<std::size_t>(i)] != (i < n ? 1 : 0);
    }
    INFO("threads " << threads);
    CHECK(wrong == 0);
  }
}

// Thread t starts on the t-th run of consecutive chunks and steals from the
// others' back only once its own are gone, so with 2 threads and 8 chunks
// the caller, whenever it runs a chunk, runs chunk 0 and the worker chunk
// 4: consecutive kernels over the same range find on each core what the
// last one wrote there (with chunks taken from one counter, the worker took
// chunk 1, 3, ... or any other).
TEST_CASE("each thread runs the same part of a range on every call", "[parallel]") {
  ThreadCountGuard guard;
  rt::set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  int both = 0, caller_without_first = 0, worker_without_fifth = 0;
  for (int rep = 0; rep < 20; ++rep) {
    std::mutex m;
    std::vector<std::int64_t> mine, theirs;
    rt::parallel_for(0, 8, 1, [&](std::int64_t lo, std::int64_t hi) {
      std::this_thread::sleep_for(std::chrono::microseconds(300));  // time for the worker to join
      std::lock_guard lk(m);
      for (std::int64_t i = lo; i < hi; ++i) (std::this_thread::get_id() == caller ? mine : theirs).push_back(i);
    });
    REQUIRE(mine.size() + theirs.size() == 8);
    if (!mine.empty() && std::find(mine.begin(), mine.end(), 0) == mine.end()) ++caller_without_first;
    if (!theirs.empty() && std::find(theirs.begin(), theirs.end(), 4) == theirs.end()) ++worker_without_fifth;
    both += !mine.empty() && !theirs.empty();
  }
  CHECK(both > 0);
  CHECK(caller_without_first == 0);
  CHECK(worker_without_fifth == 0);
}

TEST_CASE("parallel_for handles empty and tiny ranges", "[parallel]") {
  ThreadCountGuard guard;
  rt::set_num_threads(4);
  int calls = 0;
  rt::parallel_for(5, 5, 1, [&](std::int64_t, std::int64_t) { ++calls; });
  rt::parallel_for(5, 2, 1, [&](std::int64_t, std::int64_t) { ++calls; });
  CHECK(calls == 0);
  std::int64_t seen_lo = -1, seen_hi = -1;
  rt::parallel_for(3, 4, 0, [&](std::int64_t lo, std::int64_t hi) {  // grain 0 acts as 1
    seen_lo = lo;
    seen_hi = hi;
  });
  CHECK(seen_lo == 3);
  CHECK(seen_hi == 4);
}

TEST_CASE("parallel_for runs inline below the grain and with one thread", "[parallel]") {
  ThreadCountGuard guard;
  rt::set_num_threads(4);
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  rt::parallel_for(0, 100, 100, [&](std::int64_t lo, std::int64_t hi) {
    CHECK(lo == 0);
    CHECK(hi == 100);
    ran_on = std::this_thread::get_id();
  });
  CHECK(ran_on == caller);

  rt::set_num_threads(1);
  std::atomic<int> calls{0};
  rt::parallel_for(0, 1 << 20, 1, [&](std::int64_t lo, std::int64_t hi) {
    CHECK(lo == 0);
    CHECK(hi == 1 << 20);
    CHECK(std::this_thread::get_id() == caller);
    calls++;
  });
  CHECK(calls == 1);
}

TEST_CASE("parallel_for uses several threads when it can", "[parallel]") {
  ThreadCountGuard guard;
  rt::set_num_threads(4);
  std::mutex m;
  std::set<std::thread::id> ids;
  // Chunks that take a while, so idle workers get to claim some.
  for (int attempt = 0; attempt < 20 && ids.size() < 2; ++attempt) {
    rt::parallel_for(0, 64, 1, [&](std::int64_t, std::int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard lk(m);
      ids.insert(std::this_thread::get_id());
    });
  }
  CHECK(ids.size() >= 2);
  CHECK(ids.size() <= 4);
}

#if defined(__linux__)
// A worker sleeps with the CPU of the last job's caller left out of its
// mask (parallel.cpp, SleepAwayFrom) and gets its whole mask back when it
// wakes: the workers that run chunks after a sleep may run where the caller
// may (nothing stays pinned), and the work is all done.
TEST_CASE("workers woken from sleep run with their whole CPU mask", "[parallel]") {
  ThreadCountGuard guard;
  rt::set_num_threads(2);
  cpu_set_t caller_mask;
  REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof caller_mask, &caller_mask) == 0);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex m;
  int worker_chunks = 0, wrong_masks = 0;
  for (int round = 0; round < 10 && worker_chunks == 0; ++round) {
    rt::parallel_for(0, 2, 1, [](std::int64_t, std::int64_t) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the pool's 1 ms spin: the worker sleeps
    std::atomic<std::int64_t> covered{0};
    rt::parallel_for(0, 8, 1, [&](std::int64_t lo, std::int64_t hi) {
      covered += hi - lo;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // time for the worker to wake and claim a chunk
      if (std::this_thread::get_id() == caller) return;
      cpu_set_t mask;
      const bool whole = pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) == 0 && CPU_EQUAL(&mask, &caller_mask);
      std::lock_guard lk(m);
      ++worker_chunks;
      if (!whole) ++wrong_masks;
    });
    CHECK(covered.load() == 8);
  }
  CHECK(worker_chunks > 0);
  CHECK(wrong_masks == 0);
}
#endif

TEST_CASE("nested parallel_for runs inline", "[parallel]") {
  ThreadCountGuard guard;
  rt::set_num_threads(4);
  std::vector<std::atomic<int>> hits(64 * 64);
  std::atomic<bool> inner_split{false};
  rt::parallel_for(0, 64, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const auto outer_thread = std::this_thread::get_id();
      rt::parallel_for(0, 64, 1, [&](std::int64_t l2, std::int64_t h2) {
        if (l2 != 0 || h2 != 64 || std::this_thread::get_id() != outer_thread) inner_split = true;
        for (std::int64_t j = l2; j < h2; ++j) hits[static_cast<std::size_t>(i * 64 + j)]++;
      });
    }
  });
  CHECK_FALSE(inner_split);
  for (auto& h : hits) REQUIRE(h.load() == 1);
}

TEST_CASE("parallel_tasks runs every task once, large ones alone on the caller with the pool free", "[parallel]") {
  ThreadCountGuard guard;
  // Costs as a model's parameters: a large embedding, matrices, tiny biases.
  const std::vector<std::int64_t> costs = {300000, 4096, 64, 16384, 64, 4096, 16384, 256, 4096, 64, 200000, 4096, 1, 0};
  const auto n = static_cast<std::int32_t>(costs.size());
  const std::thread::id caller = std::this_thread::get_id();
  for (int threads : {1, 2, 3, 8}) {
    rt::set_num_threads(threads);
    std::vector<std::atomic<int>> hits(costs.size());
    std::atomic<int> alone_off_caller{0}, alone_inner_split{0};
    rt::parallel_tasks(costs.data(), n, 4096, 131072, [&](std::int32_t k) {
      hits[static_cast<std::size_t>(k)]++;
      if (costs[static_cast<std::size_t>(k)] < 131072) return;
      if (std::this_thread::get_id() != caller) alone_off_caller++;
      // A large task may split its own work across the pool.
      std::atomic<int> chunks{0};
      rt::parallel_for(0, 64, 1, [&](std::int64_t, std::int64_t) { chunks++; });
      if (chunks.load() > 1) alone_inner_split++;
    });
    for (auto& h : hits) REQUIRE(h.load() == 1);
    CHECK(alone_off_caller.load() == 0);
    CHECK(alone_inner_split.load() == (threads > 1 ? 2 : 0));
  }
}

TEST_CASE("parallel_tasks' bins hold every small task once, about equal in cost", "[parallel]") {
  // The tiny LM's 36 parameters: embeddings, 2 blocks of attention and MLP
  // matrices with their biases and layernorms, the final layernorm.
  std::vector<std::int64_t> costs = {16384, 4096};
  for (int block = 0; block < 2; ++block)
    for (std::int64_t c : {64, 64, 4096, 64, 4096, 64, 4096, 64, 4096, 64, 64, 64, 16384, 256, 16384, 64}) costs.push_back(c);
  costs.push_back(64), costs.push_back(64);
  const auto n = static_cast<std::int32_t>(costs.size());
  std::int64_t total = 0, largest = 0;
  for (std::int64_t c : costs) total += c, largest = std::max(largest, c);
  for (int threads : {2, 3, 4}) {
    const rt::detail::TaskBins bins = rt::detail::bin_tasks(costs.data(), n, threads, 4096, 131072);
    CHECK(bins.alone.empty());
    const std::size_t count = bins.start.size() - 1;
    CHECK(count == static_cast<std::size_t>(std::min<std::int64_t>(threads * 4, total / 4096)));
    std::vector<int> seen(costs.size(), 0);
    std::int64_t lightest = total, heaviest = 0;
    for (std::size_t b = 0; b < count; ++b) {
      std::int64_t load = 0;
      for (std::int32_t i = bins.start[b]; i < bins.start[b + 1]; ++i) {
        seen[static_cast<std::size_t>(bins.order[static_cast<std::size_t>(i)])]++;
        load += costs[static_cast<std::size_t>(bins.order[static_cast<std::size_t>(i)])];
      }
      lightest = std::min(lightest, load), heaviest = std::max(heaviest, load);
    }
    for (int s : seen) REQUIRE(s == 1);
    // Largest first into the lightest bin: no bin exceeds another by more than the largest task.
    INFO("threads " << threads << ": bins from " << lightest << " to " << heaviest);
    CHECK(heaviest - lightest <= largest);
  }
  // Less than a grain of work in all: one bin.
  const std::vector<std::int64_t> few = {100, 200, 300};
  CHECK(rt::detail::bin_tasks(few.data(), 3, 8, 4096, 131072).start.size() == 2);
}

TEST_CASE("exceptions thrown in workers reach the caller", "[parallel]") {
  ThreadCountGuard guard;
  for (int threads : {1, 2, 4}) {
    rt::set_num_threads(threads);
    for (std::int64_t bad : {0, 500, 999}) {
      INFO("threads " << threads << " failing index " << bad);
      try {
        rt::parallel_for(0, 1000, 10, [&](std::int64_t lo, std::int64_t hi) {
          if (bad >= lo && bad < hi) throw std::out_of_range("index " + std::to_string(bad));
        });
        FAIL("no exception");
      } catch (const std::out_of_range& e) {
        CHECK(std::string(e.what()) == "index " + std::to_string(bad));
      }
      // The pool is usable afterwards.
      std::atomic<std::int64_t> sum{0};
      rt::parallel_for(0, 1000, 10, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) sum += i;
      });
      CHECK(sum == 999 * 1000 / 2);
    }
  }
  // rt::Error keeps its type and code across threads.
  rt::set_num_threads(3);
  REQUIRE_RT_ERROR(rt::parallel_for(0, 100, 1,
                                    [](std::int64_t, std::int64_t) {
                                      throw rt::Error(rt::ErrorCode::OutOfBounds, "from a worker");
                                    }),
                   rt::ErrorCode::OutOfBounds, "from a worker");
}

TEST_CASE("parallel_for from several caller threads at once", "[parallel]") {
  ThreadCountGuard guard;
  rt::set_num_threads(4);
  std::atomic<std::int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        rt::parallel_for(0, 1000, 16, [&](std::int64_t lo, std::int64_t hi) { total += hi - lo; });
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(total == 4 * 50 * 1000);
}

TEST_CASE("many back-to-back calls and changing thread counts", "[parallel]") {
  ThreadCountGuard guard;
  std::int64_t expected = 0, got = 0;
  for (int rep = 0; rep < 2000; ++rep) {
    if (rep % 250 == 0) rt::set_num_threads(1 + (rep / 250) % 4);
    std::atomic<std::int64_t> sum{0};
    rt::parallel_for(0, 256, 8, [&](std::int64_t lo, std::int64_t hi) {
      std::int64_t s = 0;
      for (std::int64_t i = lo; i < hi; ++i) s += i;
      sum += s;
    });
    expected += 255 * 256 / 2;
    got += sum;
  }
  CHECK(got == expected);
}

TEST_CASE("set_num_threads validates its argument", "[parallel]") {
  ThreadCountGuard guard;
  REQUIRE_RT_ERROR(rt::set_num_threads(0), rt::ErrorCode::InvalidArgument,
                   "set_num_threads got 0, expected 1..1024");
  REQUIRE_RT_ERROR(rt::set_num_threads(5000), rt::ErrorCode::InvalidArgument, "got 5000");
  rt::set_num_threads(3);
  CHECK(rt::num_threads() == 3);
  CHECK(guard.saved >= 1);
}

// Also run by CTest with WFGEN_NUM_THREADS set to "3" and to "junk" (see
// CMakeLists.txt), each in a fresh process.
TEST_CASE("the default thread count comes from WFGEN_NUM_THREADS", "[parallel][env]") {
  const char* env = std::getenv("WFGEN_NUM_THREADS");
  const unsigned hw = std::thread::hardware_concurrency();
  int expected = hw == 0 ? 1 : static_cast<int>(hw);
  if (env && std::string(env) == "3") expected = 3;
  CHECK(rt::num_threads() == expected);
}

// Also run by CTest with WFGEN_STREAMING_STORE_BYTES set to "4096", "-1" and
// "-2" (out of range, so ignored) (see CMakeLists.txt), each in a fresh process.
TEST_CASE("the default streaming-store threshold comes from WFGEN_STREAMING_STORE_BYTES", "[parallel][env]") {
  const char* env = std::getenv("WFGEN_STREAMING_STORE_BYTES");
  std::int64_t expected = std::int64_t{32} << 20;
  if (env && std::string(env) == "4096") expected = 4096;
  if (env && std::string(env) == "-1") expected = -1;
  CHECK(rt::streaming_store_bytes() == expected);
}

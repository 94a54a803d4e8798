// What handing a kernel to the pool costs (issue 38 item 4): back-to-back
// rt::parallel_for calls at 1 and 2 threads, as the VM makes them (one
// instruction after another, each reading what the last one wrote).
//
//   empty        parallel_for over 2 indices, grain 1, bodies that do nothing:
//                the round trip of a hand-off alone
//   spin T       a body of T us of arithmetic (no memory), split in two
//   fill / add   a 65536-float FILL and a chain of ADDs over 3 x 65536 floats,
//                each reading the last one's output, as split by a kernel
//                of grain G (the pool makes min(8, n / G) chunks at 2 threads)
//   gap G        G us of serial work on the caller, then a 10 us spin body:
//                where the worker is (pause spin, sched_yield, asleep) when
//                work arrives
//
// Each row: wall us a call (median of 9 rounds), the CPU us of the process a
// call (getrusage, all threads), and for the split rows the median delay
// from the call's start to the worker's first chunk ("start").
//
// Build and run (not part of ctest; ~10 s):
//   g++ -O3 -march=native -std=c++20 -Iruntime/include bench/pool_handoff.cpp \
//       -o /tmp/pool_handoff build/runtime/libwfgen_runtime.a -lpthread && /tmp/pool_handoff
#include <sched.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "wfgen/parallel.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double now_us() { return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count(); }

double cpu_us() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}

long context_switches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw + u.ru_nivcsw;
}

// Arithmetic with no memory traffic: `units` steps of a dependent chain.
std::atomic<float> g_sink{0};
void burn(std::int64_t units) {
  float x = 1.0f;
  for (std::int64_t i = 0; i < units; ++i) {
    x = x * 0.9999999f + 1e-7f;
    asm volatile("" : "+x"(x));  // keeps the chain: one dependent step a unit
  }
  g_sink.store(x, std::memory_order_relaxed);
}

double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

// burn() units per microsecond of this thread's CPU time (not wall time: the
// machine may be shared).
double calibrate() {
  burn(1000000);
  const double t0 = thread_cpu_us();
  burn(20000000);
  return 20000000 / (thread_cpu_us() - t0);
}

// The worker's first chunk start of the current call, as us since the call
// began (the caller's chunks are not counted).
std::thread::id g_caller;
std::atomic<double> g_call_start{0}, g_worker_start{-1};
std::atomic<int> g_worker_cpu{-1};
void note_start() {
  if (std::this_thread::get_id() == g_caller) return;
  double expected = -1;
  if (g_worker_start.compare_exchange_strong(expected, now_us() - g_call_start.load(std::memory_order_relaxed)))
    g_worker_cpu.store(sched_getcpu(), std::memory_order_relaxed);
}

struct Row {
  double wall, cpu, start;
  long switches;
  double shared = 0;  // the share of the calls whose worker ran on the caller's CPU
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs call() `reps` times a round, 9 rounds; medians a call.
Row measure(int reps, const std::function<void()>& call) {
  for (int i = 0; i < reps; ++i) call();  // warm up: workers started and spinning
  std::vector<double> wall, cpu, start;
  int shared = 0;
  const long sw0 = context_switches();
  for (int r = 0; r < 9; ++r) {
    const double c0 = cpu_us(), t0 = now_us();
    for (int i = 0; i < reps; ++i) {
      g_worker_start.store(-1, std::memory_order_relaxed);
      g_call_start.store(now_us(), std::memory_order_relaxed);
      call();
      const double s = g_worker_start.load(std::memory_order_relaxed);
      if (s >= 0) {
        start.push_back(s);
        shared += g_worker_cpu.load(std::memory_order_relaxed) == sched_getcpu();
      }
    }
    wall.push_back((now_us() - t0) / reps);
    cpu.push_back((cpu_us() - c0) / reps);
  }
  return {median(wall), median(cpu), start.empty() ? -1 : median(start), (context_switches() - sw0) / (9L * reps),
          start.empty() ? 0 : static_cast<double>(shared) / static_cast<double>(start.size())};
}

void print(const char* name, int threads, const Row& r) {
  std::printf("%-26s %dt  wall %8.2f us  cpu %8.2f us  worker start %7.2f us  same cpu %3.0f %%  switches/call %ld\n", name, threads,
              r.wall, r.cpu, r.start, 100 * r.shared, r.switches);
}

}  // namespace

int main() {
  g_caller = std::this_thread::get_id();
  const double per_us = calibrate();
  std::printf("calibration: %.0f burn units a us\n", per_us);
  const std::int64_t n = 65536;
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);

  for (int threads : {1, 2}) {
    wfgen::rt::set_num_threads(threads);
    print("empty (2 x 1 index)", threads, measure(2000, [] {
            wfgen::rt::parallel_for(0, 2, 1, [](std::int64_t, std::int64_t) { note_start(); });
          }));
    for (int t : {5, 10, 20, 30}) {
      const auto units = static_cast<std::int64_t>(t * per_us);
      char name[64];
      std::snprintf(name, sizeof name, "spin %d us (2 halves)", t);
      print(name, threads, measure(200, [&] {
              wfgen::rt::parallel_for(0, 2, 1, [&](std::int64_t lo, std::int64_t hi) {
                note_start();
                burn(units * (hi - lo) / 2);
              });
            }));
    }
    for (std::int64_t grain : {std::int64_t{8192}, std::int64_t{32768}}) {
      char name[64];
      std::snprintf(name, sizeof name, "fill 65536, grain %lld", static_cast<long long>(grain));
      print(name, threads, measure(500, [&] {
              wfgen::rt::parallel_for(0, n, grain, [&](std::int64_t lo, std::int64_t hi) {
                note_start();
                std::fill(c.data() + lo, c.data() + hi, 0.0f);
              });
            }));
      std::snprintf(name, sizeof name, "add chain, grain %lld", static_cast<long long>(grain));
      // a <- b + c, b <- a + c, c <- a + b: each reads the last one's output
      float* bufs[3] = {a.data(), b.data(), c.data()};
      int k = 0;
      print(name, threads, measure(500, [&] {
              float *out = bufs[k % 3], *x = bufs[(k + 1) % 3], *y = bufs[(k + 2) % 3];
              ++k;
              wfgen::rt::parallel_for(0, n, grain, [&](std::int64_t lo, std::int64_t hi) {
                note_start();
                for (std::int64_t i = lo; i < hi; ++i) out[i] = x[i] * 0.5f + y[i] * 0.25f;
              });
            }));
      // The same chain with each half on a fixed thread (the caller the
      // first half, the worker the second: the data stay in each core's
      // cache from one call to the next), then with the halves swapped on
      // every call (each call reads what the other core wrote).
      for (int swap : {0, 1}) {
        print(swap ? "  halves swapped each call" : "  halves kept by thread", threads, measure(500, [&] {
                float *out = bufs[k % 3], *x = bufs[(k + 1) % 3], *y = bufs[(k + 2) % 3];
                const int mine = (swap ? k & 1 : 0);
                ++k;
                std::atomic<bool> done[2] = {false, false};
                wfgen::rt::parallel_for(0, 2, 1, [&](std::int64_t, std::int64_t) {
                  note_start();
                  // two calls of the body, two halves: each takes its thread's half if still free
                  int h = std::this_thread::get_id() == g_caller ? mine : 1 - mine;
                  if (done[h].exchange(true)) h = 1 - h;
                  for (std::int64_t i = h * n / 2; i < (h + 1) * n / 2; ++i) out[i] = x[i] * 0.5f + y[i] * 0.25f;
                });
              }));
      }
      print("  same, 1 thread inline", threads, measure(500, [&] {
              float *out = bufs[k % 3], *x = bufs[(k + 1) % 3], *y = bufs[(k + 2) % 3];
              ++k;
              for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * 0.5f + y[i] * 0.25f;
            }));
    }
    const auto ten = static_cast<std::int64_t>(10 * per_us);
    for (int gap : {0, 20, 60, 200, 900, 1500}) {
      const auto serial = static_cast<std::int64_t>(gap * per_us);
      char name[64];
      std::snprintf(name, sizeof name, "gap %d us, then spin 10", gap);
      const Row r = measure(gap >= 900 ? 20 : 100, [&] {
        burn(serial);
        g_call_start.store(now_us(), std::memory_order_relaxed);
        wfgen::rt::parallel_for(0, 2, 1, [&](std::int64_t lo, std::int64_t hi) {
          note_start();
          burn(ten * (hi - lo) / 2);
        });
      });
      print(name, threads, {r.wall - gap, r.cpu - gap, r.start, r.switches, r.shared});
    }
  }
  return 0;
}

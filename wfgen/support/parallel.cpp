#include "wfgen/support/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace wfgen {

void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& task) {
  const std::size_t workers = std::min<std::size_t>(n, jobs > 1 ? static_cast<std::size_t>(jobs) : 1);
  if (workers <= 1) {
    for (std::size_t i = 0; i < n; ++i) task(i);
    return;
  }
  std::vector<std::exception_ptr> errors(n);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        task(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  try {
    for (std::size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones started (and this one) do all the work.
  }
  work();  // the calling thread is one of the workers
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace wfgen

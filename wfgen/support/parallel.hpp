// Running independent tasks on a few threads (wfgen gen --jobs N).
#pragma once

#include <cstddef>
#include <functional>

namespace wfgen {

// Runs task(0) ... task(n - 1) on min(jobs, n) threads (jobs <= 1: in order
// on the calling thread). Tasks must not depend on each other; each writes
// its own result. When tasks throw, every task still runs, and then the
// exception of the lowest index is rethrown: the one a sequential run would
// have stopped at, so errors do not depend on `jobs` or on timing.
void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& task);

}  // namespace wfgen

#include "nimble/runtime/threading.hpp"

#include <oneapi/tbb/parallel_for.h>
#include <catch2/catch.hpp>

#include <mutex>
#include <set>
#include <thread>

#include "nimble/error.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;

namespace {
// The threads a parallel_for over many small chunks runs on.
std::size_t threads_used() {
  std::mutex mutex;
  std::set<std::thread::id> ids;
  oneapi::tbb::parallel_for(0, 10000, [&](int) {
    volatile double x = 0;
    for (int i = 0; i < 200; ++i) x = x + i;
    const std::lock_guard lock(mutex);
    ids.insert(std::this_thread::get_id());
  });
  return ids.size();
}
}  // namespace

TEST_CASE("set_num_threads limits parallel work, process-wide", "[runtime]") {
  const int before = num_threads();
  CHECK(before >= 1);

  set_num_threads(1);
  CHECK(num_threads() == 1);
  CHECK(threads_used() == 1);

  set_num_threads(2);
  CHECK(num_threads() == 2);
  CHECK(threads_used() <= 2);

  set_num_threads(before);
  CHECK(num_threads() == before);
}

TEST_CASE("set_num_threads rejects fewer than one thread", "[runtime]") {
  const int before = num_threads();
  CHECK_NIMBLE_ERROR(set_num_threads(0), ErrorKind::invalid_argument,
                     "set_num_threads: n must be at least 1, got 0");
  CHECK_NIMBLE_ERROR(set_num_threads(-3), ErrorKind::invalid_argument,
                     "set_num_threads: n must be at least 1, got -3");
  CHECK(num_threads() == before);
}

// Every test runs without the user's disk cache, however the binary is
// started (ctest, or by hand after script/demo filled ~/.cache/nimble): a
// kernel must come from the code under test, not from what an earlier run
// left. A test that needs a disk cache makes its own (cache_scope.hpp).
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // the listener interface
#include <catch2/catch.hpp>

#include "nimble/runtime/kernel.hpp"

namespace {
struct NoUserCache : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(const Catch::TestRunInfo& info) override {
    TestEventListenerBase::testRunStarting(info);
    nimble::KernelCacheOptions options = nimble::KernelCache::global().options();
    options.disk_cache_dir.clear();
    nimble::KernelCache::global().configure(options);
  }
};
}  // namespace

CATCH_REGISTER_LISTENER(NoUserCache)

#include "nimble/target.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace nimble;

TEST_CASE("the host target comes from LLVM", "[target]") {
  const HostTarget& t = host_target();
  CHECK(&t == &host_target());  // detected once
  CHECK_FALSE(t.triple.empty());
  CHECK_FALSE(t.cpu.empty());
  CHECK(std::is_sorted(t.features.begin(), t.features.end()));
#if defined(__x86_64__)
  CHECK(t.triple.starts_with("x86_64"));
  CHECK(t.has("sse2"));  // every x86-64 CPU has it
#endif
#if defined(__AVX2__)
  CHECK(t.has("avx2"));
#endif
  CHECK_FALSE(t.has("no-such-feature"));
  CHECK(llvm_version().starts_with("19."));
}

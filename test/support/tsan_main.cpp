// The main of the ThreadSanitizer test binary (preset tsan). Kernels run on
// the calling thread: oneTBB's parallel loops hand work to threads of the
// uninstrumented libtbb, which TSan cannot follow (the background compiler
// uses a std::thread in this build for the same reason).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "nimble/runtime/threading.hpp"

int main(int argc, char** argv) {
  nimble::set_num_threads(1);
  return Catch::Session().run(argc, argv);
}

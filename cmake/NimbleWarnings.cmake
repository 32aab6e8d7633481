# Warnings are errors in nimble's own code. Third-party headers (LLVM, Eigen,
# Catch2) are included as SYSTEM so that their warnings do not count.
function(nimble_set_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Werror
    -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough -Wcast-qual
    -Wmissing-declarations -Wundef)
endfunction()

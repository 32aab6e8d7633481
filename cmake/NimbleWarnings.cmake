# Warnings are errors in nimble's own code. Third-party headers (LLVM, Eigen,
# Catch2) are included as SYSTEM so that their warnings do not count.
function(nimble_set_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Werror
    -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough -Wcast-qual
    -Wmissing-declarations -Wundef
    # GCC 12 warns when a designated initializer leaves members to their
    # default member initializers (`{.opcode = Opcode::Goto}`), which is the
    # point of writing it that way; GCC 13 and clang do not.
    -Wno-missing-field-initializers)
endfunction()

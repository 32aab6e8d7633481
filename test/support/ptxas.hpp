// ptxas, the CUDA toolkit's PTX assembler, as the [cuda] tests' check of the
// PTX nimble writes (where the toolkit is installed).
#pragma once

#include <string>

namespace nimble::testing {

/// ptxas's path: on PATH, or in the toolkit's usual place; "" if neither.
[[nodiscard]] std::string find_ptxas();

/// The result of assembling `ptx` for `arch` ("sm_90"): exit status 0 and
/// nothing in `log`, or ptxas's status and messages.
struct PtxasResult {
  int status = -1;
  std::string log;
};
[[nodiscard]] PtxasResult run_ptxas(const std::string& ptxas, const std::string& ptx, const std::string& arch);

}  // namespace nimble::testing

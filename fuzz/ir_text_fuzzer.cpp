// libFuzzer target: the textual IR. Arbitrary text must parse or throw
// nimble::Error, never crash, hang or overflow the stack. What parses must
// print, reparse and print the same text (the printer and the parser agree),
// and then verify and infer types — or throw nimble::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nimble/error.hpp"
#include "nimble/ir/module.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nimble::ir::Module module;
  try {
    module = nimble::ir::parse(text, "fuzz");
  } catch (const nimble::Error&) {
    return 0;  // rejected text
  }
  try {
    const std::string printed = nimble::ir::print(module);
    if (nimble::ir::print(nimble::ir::parse(printed, "printed")) != printed) std::abort();
  } catch (const nimble::Error& e) {
    // A module too deep to print (rule 2 of docs/limits.md) may throw; one
    // the printer wrote must reparse.
    if (e.kind() != nimble::ErrorKind::resource_exhausted) std::abort();
  }
  try {
    nimble::ir::verify(module);
    nimble::ir::infer_types(module);
  } catch (const nimble::Error&) {
  }
  return 0;
}

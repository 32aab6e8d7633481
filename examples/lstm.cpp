// Builds the lstm model of ../shared/workloads.md with the fluent builder and
// prints its IR with the inferred types. (Running it comes with the reference
// interpreter; for now this shows what nimble knows about it before run time.)
#include <nimble/nimble.hpp>

#include <cstdio>

#include "models/lstm.hpp"

int main() {
  try {
    nimble::Builder b;
    const nimble::Function entry = nimble::models::build_lstm(b);
    const nimble::ir::Module module = b.build();
    std::fputs(nimble::ir::print(module, {.show_types = true}).c_str(), stdout);
    std::printf("\n@%s : %s\n", entry.name().c_str(),
                nimble::ir::to_string(module.find_function(entry.name()).type()).c_str());
  } catch (const nimble::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

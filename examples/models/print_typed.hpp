// Shared by the model examples: build a model with the builder and print its
// IR with the inferred types. (Running the models comes with the reference
// interpreter; for now this shows what nimble knows before run time.)
#pragma once

#include <nimble/nimble.hpp>

#include <cstdio>

namespace nimble::models {

inline int print_typed_model(Function (*build)(Builder&)) {
  try {
    Builder b;
    const Function entry = build(b);
    const ir::Module module = b.build();
    std::fputs(ir::print(module, {.show_types = true}).c_str(), stdout);
    std::printf("\n@%s : %s\n", entry.name().c_str(),
                ir::to_string(module.find_function(entry.name()).type()).c_str());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace nimble::models
